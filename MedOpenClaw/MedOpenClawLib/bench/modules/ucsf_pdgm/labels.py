"""UCSF-PDGM's answer vocabulary (MedFlow-Bench App. H) and the normalisers that map the dataset's labels onto it:
one place for option letters and label text, so its loader, prompt, parser and scorer cannot drift apart.
"""

from __future__ import annotations

UCSF_OPTIONS = (
    ("A", "Glioblastoma"),
    ("B", "Oligodendroglioma / Astrocytoma"),
    ("C", "No tumor"),
    ("D", "Dysembryoplastic neuroepithelial tumor (DNET) / Ganglioglioma"),
    ("E", "Pilocytic Astrocytoma"),
    ("F", "Central Neurocytoma / Ependymoma"),
)
