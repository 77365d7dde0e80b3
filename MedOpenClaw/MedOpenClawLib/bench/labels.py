"""Answer vocabularies of the five modules (MedFlow-Bench App. H.1-H.2) and the normalisers that map dataset labels
onto them.

One place for option letters and label text, so loaders, prompts, parsers and scorers cannot drift apart.
"""

from __future__ import annotations

import re

UCSF_OPTIONS = (
    ("A", "Glioblastoma"),
    ("B", "Oligodendroglioma / Astrocytoma"),
    ("C", "No tumor"),
    ("D", "Dysembryoplastic neuroepithelial tumor (DNET) / Ganglioglioma"),
    ("E", "Pilocytic Astrocytoma"),
    ("F", "Central Neurocytoma / Ependymoma"),
)

RANO_OPTIONS = (("A", "PD"), ("B", "SD"), ("C", "PR"), ("D", "CR"))

LUMIERE_EVIDENCE_FIELDS = (
    "non_measurable_lesion",
    "t2_progression",
    "current_target_lesion",
    "new_target_lesion",
    "current_non_target_lesion",
    "new_non_target_lesion",
)

NSCLC_QUESTIONS = (
    (
        "q1",
        "Tumor location",
        (
            ("A", "Right upper lobe"),
            ("B", "Right middle lobe"),
            ("C", "Right lower lobe"),
            ("D", "Left upper lobe"),
            ("E", "Left lower lobe"),
            ("F", "Lingula"),
            ("G", "No tumor"),
        ),
    ),
    (
        "q2",
        "Pathological T stage",
        (
            ("A", "T1"),
            ("B", "T2"),
            ("C", "T3"),
            ("D", "T4"),
            ("E", "Not available / not collected"),
            ("F", "No tumor"),
        ),
    ),
    (
        "q3",
        "Pathological N stage",
        (("A", "N0"), ("B", "N1"), ("C", "N2"), ("D", "Not available / not collected"), ("E", "No tumor")),
    ),
    (
        "q4",
        "Histology",
        (
            ("A", "Adenocarcinoma"),
            ("B", "Squamous cell carcinoma"),
            ("C", "Small cell carcinoma"),
            ("D", "Other / indeterminate NSCLC"),
            ("E", "No tumor"),
        ),
    ),
    (
        "q5",
        "Histopathological grade",
        (
            ("A", "G1 Well differentiated"),
            ("B", "G2 Moderately differentiated"),
            ("C", "G3 Poorly differentiated"),
            ("D", "Other Type I: well to moderately differentiated"),
            ("E", "Other Type II: moderately to poorly differentiated"),
            ("F", "No tumor"),
        ),
    ),
)

BRACS_LABELS = ("N", "PB", "UDH", "FEA", "ADH", "DCIS", "IC")
BRACS_OPTIONS = tuple((chr(ord("A") + index), label) for index, label in enumerate(BRACS_LABELS))  # A..G

TUMOR_PRESENCE_OPTIONS = (("A", "no_tumor"), ("B", "tumor_present"))
METASTASIS_OPTIONS = (("A", "negative"), ("B", "itc"), ("C", "micro"), ("D", "macro"))

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


def squash(text: str) -> str:
    """Lower-case, collapse whitespace and strip punctuation at the ends: how labels are compared."""
    return re.sub(r"\s+", " ", str(text)).strip().strip(".,;:*_`'\"").strip().lower()


def normalize_bracs_label(name: str) -> str | None:
    """Map a QuPath classification / spreadsheet value (``"DCIS"``, ``"Type_DCIS"``, ``"Invasive carcinoma"``,
    ``"Pathological Benign"``) to one of the seven BRACS labels; None if it is not a BRACS class."""
    key = squash(name).replace("-", " ").replace("_", " ")
    key = re.sub(r"^(type|class)\s+", "", key)
    return _BRACS_LOOKUP.get(key) or _BRACS_LOOKUP.get(key.replace(" ", ""))


def normalize_rano(value: str) -> str | None:
    """LUMIERE ratings (``"PD"``, ``"Post-Op "``, ``"Post-Op/PD"``, ``"Pre-Op"``): a RANO label or None.

    Mixed ratings such as ``"Post-Op/PD"`` are a post-operative study re-rated at once; they are not a clean
    interval response and are excluded (None), like the pure Pre-Op/Post-Op rows.
    """
    text = re.sub(r"\s+", "", str(value)).upper()
    return text if text in {"PD", "SD", "PR", "CR"} else None
