"""UCSF-PDGM: brain-tumour classification from four MRI sequences.
Its name and report column; everything else about it lies in this folder."""

NAME = "ucsf-pdgm"
REPORT_POSITION = 2  # column order in the report tables
