"""CAMELYON17: lymph-node metastasis on an H&E whole-slide image.
Its name and report column; everything else about it lies in this folder."""

NAME = "camelyon17"
REPORT_POSITION = 5  # column order in the report tables
