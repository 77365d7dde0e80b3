"""CAMELYON17's answer vocabulary (MedFlow-Bench App. H) and the normalisers that map the dataset's labels onto it:
one place for option letters and label text, so its loader, prompt, parser and scorer cannot drift apart.
"""

from __future__ import annotations

TUMOR_PRESENCE_OPTIONS = (("A", "no_tumor"), ("B", "tumor_present"))


METASTASIS_OPTIONS = (("A", "negative"), ("B", "itc"), ("C", "micro"), ("D", "macro"))
