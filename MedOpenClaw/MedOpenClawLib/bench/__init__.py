"""MedFlow-Bench: case packages, synthetic cohort, prompts, parsers, scorers and reports (MedFlow-Bench §4, App. C,
H)."""
