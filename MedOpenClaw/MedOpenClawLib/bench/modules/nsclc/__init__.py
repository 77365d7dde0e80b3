"""NSCLC Radiogenomics: five questions on a lung PET/CT.
Its name, report column and `bench prepare` flags; everything else about it lies in this folder."""

NAME = "nsclc"
REPORT_POSITION = 3  # column order in the report tables
# `bench prepare` flags of its loader (argparse dest -> keywords): plain data, so the command line lists them
# without importing the spec
PREPARE_OPTIONS = {"include_amc": {"action": "store_true", "help": "keep AMC cases (excluded by default)"}}
