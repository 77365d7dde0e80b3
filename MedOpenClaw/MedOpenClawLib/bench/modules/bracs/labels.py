"""BRACS's answer vocabulary (MedFlow-Bench App. H) and the normalisers that map the dataset's labels onto it:
one place for option letters and label text, so its loader, prompt, parser and scorer cannot drift apart.
"""

from __future__ import annotations

import re

from ...kit.parsing import squash

BRACS_LABELS = ("N", "PB", "UDH", "FEA", "ADH", "DCIS", "IC")


BRACS_OPTIONS = tuple((chr(ord("A") + index), label) for index, label in enumerate(BRACS_LABELS))  # A..G


_BRACS_SYNONYMS = {
    "N": ("n", "normal", "normal tissue", "type_n"),
    "PB": ("pb", "pathological benign", "benign", "pathologicalbenign", "type_pb"),
    "UDH": ("udh", "usual ductal hyperplasia", "type_udh"),
    "FEA": ("fea", "flat epithelial atypia", "type_fea"),
    "ADH": ("adh", "atypical ductal hyperplasia", "type_adh"),
    "DCIS": ("dcis", "ductal carcinoma in situ", "type_dcis"),
    "IC": ("ic", "invasive carcinoma", "invasive", "type_ic"),
}


_BRACS_LOOKUP = {synonym: label for label, synonyms in _BRACS_SYNONYMS.items() for synonym in synonyms}


def normalize_bracs_label(name: str) -> str | None:
    """Map a QuPath classification / spreadsheet value (``"DCIS"``, ``"Type_DCIS"``, ``"Invasive carcinoma"``,
    ``"Pathological Benign"``) to one of the seven BRACS labels; None if it is not a BRACS class."""
    key = squash(name).replace("-", " ").replace("_", " ")
    key = re.sub(r"^(type|class)\s+", "", key)
    return _BRACS_LOOKUP.get(key) or _BRACS_LOOKUP.get(key.replace(" ", ""))
