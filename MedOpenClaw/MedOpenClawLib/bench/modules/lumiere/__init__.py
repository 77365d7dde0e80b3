"""LUMIERE: longitudinal glioma MRI, RANO response and lesion-state evidence.
Its name and report column; everything else about it lies in this folder."""

NAME = "lumiere"
REPORT_POSITION = 1  # column order in the report tables
