"""LUMIERE: longitudinal glioma MRI, RANO response and lesion-state evidence.
Its name, report column and `bench prepare` flags; everything else about it lies in this folder."""

from ....cli import NON_NEGATIVE

NAME = "lumiere"
REPORT_POSITION = 1  # column order in the report tables
# `bench prepare` flags of its loader (argparse dest -> keywords): plain data, so the command line lists them
# without importing the spec
PREPARE_OPTIONS = {
    "require_evidence": {
        "action": "store_true",
        "help": "keep only pairs whose OLD and CURRENT segmentations exist (evidence-availability filter)"},
    "min_label_cases": {"type": NON_NEGATIVE, "default": 0, "metavar": "N",
                        "help": "drop RANO labels with fewer than N cases (label-frequency filter)"},
    "images": {
        "choices": ("atlas", "native"), "default": "atlas",
        "help": "atlas-space skull-stripped scans, co-registered across timepoints (default), or each study's native "
                "scans: the unregistered control of Table 3's Registration column. A pair is taken only when both "
                "studies hold that space (never the other space's files instead); each case records its image "
                "space"},
}
