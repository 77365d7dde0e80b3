"""NSCLC Radiogenomics: five questions on a lung PET/CT.
Its name and report column; everything else about it lies in this folder."""

NAME = "nsclc"
REPORT_POSITION = 3  # column order in the report tables
