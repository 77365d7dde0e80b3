"""Synthetic digital-subject cohort written in the five datasets' own distribution layouts (deterministic)."""
