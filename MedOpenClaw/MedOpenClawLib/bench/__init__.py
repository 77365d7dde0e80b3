"""MedFlow-Bench: case packages, synthetic cohort, prompts, parsers, scorers and reports (paper §4, App. C,
H)."""
