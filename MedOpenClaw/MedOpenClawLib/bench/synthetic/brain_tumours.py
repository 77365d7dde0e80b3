"""Brain tumours as compartments of the synthetic brain (:mod:`.brain`): the compartments of each diagnosis class
(glioblastoma, IDH-mutant astrocytoma, oligodendroglioma, ...; the classes are probabilities, not rules), the
white-matter hyperintensities of glioma age, and the treatment changes around a resection cavity."""

from __future__ import annotations

import numpy as np

from .brain import Compartment, Template

BRATS_LABELS = {"necrosis": 1, "edema": 2, "enhancing": 4, "solid": 1, "cyst": 1, "bubbly": 1, "enhancing_mild": 4,
                "mismatch": 1}



def pick(rng, low, high):
    return float(rng.uniform(low, high))



def _lobar_center(rng, side: float, region: str) -> tuple[float, float, float]:
    """A white-matter-deep point in a lobe (MNI mm): gliomas are frontal and temporal first."""
    r, a, s = {"frontal": ((15, 35), (10, 45), (5, 40)), "temporal": ((32, 45), (-30, 5), (-20, 0)),
               "parietal": ((18, 38), (-55, -20), (20, 45)), "insular": ((28, 38), (-10, 15), (-5, 12))}[region]
    return side * pick(rng, *r), pick(rng, *a), pick(rng, *s)



def diagnosis_compartments(option: str, rng: np.random.Generator, subtype: str = "") -> list[Compartment]:
    """Tumour compartments of the brain-tumour question's option ``option`` (A..F; C = no tumour). The signatures
    overlap: enhancement, necrosis, T2-FLAIR mismatch and calcification are drawn with class-dependent probabilities
    (``subtype`` "astrocytoma" or "oligodendroglioma" refines option B)."""
    side = float(rng.choice([-1.0, 1.0]))
    L = BRATS_LABELS
    if option in ("A", "B"):
        regions = ["frontal", "temporal", "parietal", "insular"]
        weights = [0.3, 0.35, 0.25, 0.1] if option == "A" else [0.55, 0.2, 0.1, 0.15]
        center = _lobar_center(rng, side, str(rng.choice(regions, p=weights)))
        if option == "A":
            enhance, necrosis, edema = rng.random() < 0.92, rng.random() < 0.85, pick(rng, 1.4, 2.3)
            radius = pick(rng, 9, 22)
        else:
            grade4 = subtype == "astrocytoma" and rng.random() < 0.35
            enhance = rng.random() < (0.8 if grade4 else 0.2)
            necrosis, edema = grade4 and rng.random() < 0.6, pick(rng, 1.05, 1.35)
            radius = pick(rng, 12, 26)
        radii = tuple(radius * pick(rng, 0.75, 1.2) for _ in range(3))
        parts = [Compartment("edema", center, tuple(r * edema for r in radii), L["edema"], roughness=0.22)]
        if option == "B" or not enhance:
            core = "mismatch" if subtype == "astrocytoma" and rng.random() < 0.35 else "solid"
            parts.append(Compartment(core, center, radii, L["solid"], roughness=0.22))
        if enhance:
            strong = option == "A" or rng.random() < 0.5
            kind = "enhancing" if strong else "enhancing_mild"
            rim = radii if option == "A" else tuple(r * pick(rng, 0.3, 0.6) for r in radii)
            parts.append(Compartment(kind, center, rim, L["enhancing"], shell=pick(rng, 2.5, 5.0) if necrosis else 0,
                                     roughness=0.22))
        elif option == "A":  # the few glioblastomas without convincing enhancement
            parts.append(Compartment("enhancing_mild", center, tuple(r * 0.5 for r in radii), L["enhancing"]))
        if necrosis and min(radii) > 6:
            parts.append(Compartment("necrosis", center, tuple(r * 0.6 for r in radii), L["necrosis"], roughness=0.25))
        if subtype == "oligodendroglioma" and rng.random() < 0.45:
            for _ in range(int(rng.integers(1, 4))):
                spot = tuple(c + rng.normal(0, radius * 0.3) for c in center)
                parts.append(Compartment("calcification", spot, (2.5, 2.5, 2.5), L["solid"], roughness=0.1))
        return parts
    if option == "C":
        return []
    if option == "D":  # DNET / ganglioglioma: small cortical temporal, bubbly, FLAIR partly suppressed
        center = (side * pick(rng, 45, 52), pick(rng, -12, 6), pick(rng, -14, -4))
        return [Compartment("bubbly", center, tuple(pick(rng, 8, 11) for _ in range(3)), L["bubbly"])]
    if option == "E":  # pilocytic astrocytoma: cerebellar cyst with an enhancing mural nodule
        center = (side * pick(rng, 15, 22), pick(rng, -62, -52), pick(rng, -34, -26))
        cyst = tuple(pick(rng, 11, 14) for _ in range(3))
        nodule = (center[0] + side * cyst[0] * 0.7, center[1], center[2])
        return [
            Compartment("cyst", center, cyst, L["cyst"], roughness=0.1),
            Compartment("enhancing", nodule, (6.0, 6.0, 6.0), L["enhancing"]),
        ]
    if option == "F":  # central neurocytoma / ependymoma: intraventricular, heterogeneous mild enhancement
        center = (side * pick(rng, 4, 9), pick(rng, -6, 8), pick(rng, 12, 20))
        radii = tuple(pick(rng, 10, 13) for _ in range(3))
        return [
            Compartment("enhancing_mild", center, radii, L["enhancing_mild"]),
            Compartment("cyst", (center[0], center[1] + 2, center[2] + 2), (4.0, 4.0, 4.0), L["cyst"]),
        ]
    raise ValueError(f"unknown brain-tumour option {option!r}")



def white_matter_hyperintensities(template: Template, rng: np.random.Generator) -> list[Compartment]:
    """Age-related small-vessel disease at glioma age (none, mild or moderate-to-severe burden in 40/35/25 %):
    FLAIR-bright foci in the white matter, the larger ones against the ventricles -- bright FLAIR that is not
    tumour. Drawn once per subject, so every study of a patient shows the same foci."""
    burden = int(rng.choice(3, p=[0.40, 0.35, 0.25]))
    if burden == 0:
        return []
    deep, periventricular = template.white_matter_sites
    foci = []
    for index in range(int(rng.integers(2, 7)) if burden == 1 else int(rng.integers(6, 16))):
        pool = periventricular if burden == 2 and index % 2 == 0 and len(periventricular) else deep
        voxel = pool[int(rng.integers(len(pool)))]
        center = tuple(float(value) for value in (template.affine @ np.append(voxel, 1.0))[:3])
        radius = pick(rng, 1.5, 3.0) if burden == 1 else pick(rng, 2.0, 5.0)
        foci.append(Compartment("wmh", center, (radius, radius * pick(rng, 1.0, 1.6), radius), 0, roughness=0.3))
    return foci



def treatment_changes(cavity: Compartment | None, weeks_after_surgery: int,
                      rng: np.random.Generator) -> list[Compartment]:
    """What makes a post-operative brain hard to read, none of it tumour (RANO: not measurable disease): FLAIR-bright
    gliosis around the cavity (the same in every study of the patient, so it never reads as T2 progression but
    outlasts a complete response), a thin, smooth enhancing lining of the cavity (in most studies), and T1-bright
    blood products on the cavity wall that resolve over the following months -- bright on T1c, so only a
    comparison with T1 or with the shape tells them from enhancing tumour."""
    if cavity is None:
        return []
    changes = [Compartment("gliosis", cavity.center, tuple(r * 1.6 + 3.0 for r in cavity.radii), 0, roughness=0.35)]
    if rng.random() < 0.65:
        lining = pick(rng, 2.0, 3.5)
        changes.append(Compartment("postop_lining", cavity.center, tuple(r + lining for r in cavity.radii), 0,
                                   shell=lining, roughness=0.1))
    if rng.random() < (0.7 if weeks_after_surgery <= 4 else 0.35 if weeks_after_surgery <= 12 else 0.1):
        direction = rng.normal(size=3)
        direction /= np.linalg.norm(direction)
        spot = tuple(float(c + d * r * 0.85) for c, d, r in zip(cavity.center, direction, cavity.radii))
        changes.append(Compartment("blood", spot, (pick(rng, 2.5, 5.0),) * 3, 0, roughness=0.3))
    return changes

