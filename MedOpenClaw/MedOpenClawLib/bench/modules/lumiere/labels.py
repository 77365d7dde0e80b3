"""LUMIERE's answer vocabulary (MedFlow-Bench App. H) and the normalisers that map the dataset's labels onto it:
one place for option letters and label text, so its loader, prompt, parser and scorer cannot drift apart.
"""

from __future__ import annotations

import re

RANO_OPTIONS = (("A", "PD"), ("B", "SD"), ("C", "PR"), ("D", "CR"))


LUMIERE_EVIDENCE_FIELDS = (
    "non_measurable_lesion",
    "t2_progression",
    "current_target_lesion",
    "new_target_lesion",
    "current_non_target_lesion",
    "new_non_target_lesion",
)


def normalize_rano(value: str) -> str | None:
    """LUMIERE ratings (``"PD"``, ``"Post-Op "``, ``"Post-Op/PD"``, ``"Pre-Op"``): a RANO label or None.

    Mixed ratings such as ``"Post-Op/PD"`` are a post-operative study re-rated at once; they are not a clean
    interval response and are excluded (None), like the pure Pre-Op/Post-Op rows.
    """
    text = re.sub(r"\s+", "", str(value)).upper()
    return text if text in {"PD", "SD", "PR", "CR"} else None
