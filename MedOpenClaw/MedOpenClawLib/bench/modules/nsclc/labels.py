"""NSCLC's answer vocabulary (MedFlow-Bench App. H) and the normalisers that map the dataset's labels onto it:
one place for option letters and label text, so its loader, prompt, parser and scorer cannot drift apart.
"""

from __future__ import annotations

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
