"""BRACS: the slide-level breast-lesion label of an H&E whole-slide image.
Its name and report column; everything else about it lies in this folder."""

NAME = "bracs"
REPORT_POSITION = 4  # column order in the report tables
