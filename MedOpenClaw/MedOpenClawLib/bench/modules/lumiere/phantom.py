"""LUMIERE's longitudinal course on the synthetic brain: the lesions of a timepoint, how they evolve towards a RANO
response, and the RANO assessment of two timepoints (the expert rating the synthetic dataset carries)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...synthetic.brain import Compartment, Lesion
from ...synthetic.brain_tumours import pick

# the real archive's convention (its measured_volumes_in_mm3.json: Enhancing_Core = label 1)
DEEPBRATUMIA_LABELS = {"enhancing": 1, "necrosis": 2, "edema": 3}



MEASURABLE_MM = 10.0



@dataclass
class Timepoint:
    week: str
    lesions: list[Lesion] = field(default_factory=list)
    cavity: Compartment | None = None  # the resection cavity, from the post-operative study on

    def compartments(self) -> list[Compartment]:
        parts = [part for lesion in self.lesions for part in lesion.compartments(DEEPBRATUMIA_LABELS)]
        return parts + ([self.cavity] if self.cavity else [])

    def measurable(self) -> list[Lesion]:
        return [lesion for lesion in self.lesions if lesion.enhancing and min(lesion.diameters) >= MEASURABLE_MM]

    def non_measurable(self) -> list[Lesion]:
        return [lesion for lesion in self.lesions if lesion.enhancing and min(lesion.diameters) < MEASURABLE_MM]

    def spd(self) -> float:
        largest = sorted(self.measurable(), key=lambda lesion: -np.prod(lesion.diameters))[:5]
        return float(sum(np.prod(lesion.diameters) for lesion in largest))

    def edema_volume(self) -> float:
        return float(sum(lesion.edema_volume for lesion in self.lesions))



def rano_assessment(old: Timepoint, current: Timepoint, within_12_weeks: bool = False) -> tuple[str, dict[str, bool]]:
    """RANO 2010 (Wen et al.) from the lesion model: returns the label and the six CURRENT evidence fields.

    PD: SPD +25 % or more over OLD, a new lesion, or T2/FLAIR (oedema) volume +25 % or more -- except that
    within 12 weeks of chemoradiation growth of the treated lesion alone is not progression (pseudo-progression;
    only new enhancement outside it is). CR: no enhancing disease left and no T2/FLAIR progression. PR: SPD
    -50 % or more, no new lesion, no T2 progression. Else
    SD.
    """
    old_ids = {lesion.lesion_id for lesion in old.lesions if lesion.enhancing}
    new = [lesion for lesion in current.lesions if lesion.enhancing and lesion.lesion_id not in old_ids]
    t2_progression = current.edema_volume() >= 1.25 * old.edema_volume() > 0
    old_spd, current_spd = old.spd(), current.spd()
    grown = old_spd > 0 and current_spd >= 1.25 * old_spd and not within_12_weeks
    if new or t2_progression or grown:
        label = "PD"
    elif not any(lesion.enhancing for lesion in current.lesions):
        label = "CR"
    elif old_spd > 0 and current_spd <= 0.5 * old_spd:
        label = "PR"
    else:
        label = "SD"
    new_ids = {lesion.lesion_id for lesion in new}
    fields = {
        "non_measurable_lesion": bool(current.non_measurable()),
        "t2_progression": bool(t2_progression),
        "current_target_lesion": bool(current.measurable()),
        "new_target_lesion": any(lesion.lesion_id in new_ids for lesion in current.measurable()),
        "current_non_target_lesion": bool(current.non_measurable()),
        "new_non_target_lesion": any(lesion.lesion_id in new_ids for lesion in current.non_measurable()),
    }
    return label, fields



def evolve(previous: Timepoint, target: str, week: str, rng: np.random.Generator,
           within_12_weeks: bool = False) -> Timepoint:
    """The next timepoint whose RANO label against ``previous`` is ``target``; within 12 weeks of treatment
    half of the stable studies are pseudo-progression (the treated lesion's enhancement grows)."""

    def scaled(lesion: Lesion, factor: float, edema: float | None = None) -> Lesion:
        return Lesion(
            lesion.lesion_id,
            lesion.center,
            tuple(r * factor for r in lesion.enhancing_radii),
            lesion.edema_factor if edema is None else edema,
            lesion.necrotic,
        )

    lesions = [lesion for lesion in previous.lesions if lesion.enhancing]
    if target == "SD" and within_12_weeks and lesions and rng.random() < 0.5:
        growth = pick(rng, 1.15, 1.3)  # enhancement grows, the FLAIR envelope does not (no T2 progression)
        current = [scaled(lesion, growth, edema=lesion.edema_factor * 1.05 / growth) for lesion in lesions]
    elif target == "SD":
        current = [scaled(lesion, pick(rng, 0.97, 1.03)) for lesion in lesions]
    elif target == "PR":
        current = [scaled(lesion, 0.65) for lesion in lesions if min(lesion.diameters) >= MEASURABLE_MM]
    elif target == "CR":
        current = []
    elif target == "PD":
        mode = int(rng.integers(0, 3)) if lesions else 1
        if mode == 0:
            current = [scaled(lesion, 1.3) for lesion in lesions]
        elif mode == 1:
            first = lesions[0].center if lesions else (20.0, 0.0, 20.0)
            far = (-first[0], first[1] - 10.0, first[2])
            radius = pick(rng, 7.5, 9.0)
            current = lesions + [Lesion(f"new-{week}", far, (radius, radius, radius), 1.3)]
        else:
            current = [scaled(lesion, 1.0, edema=lesion.edema_factor * 1.3) for lesion in lesions]
    else:
        raise ValueError(f"unknown RANO label {target!r}")
    timepoint = Timepoint(week, current, previous.cavity)
    label, _ = rano_assessment(previous, timepoint, within_12_weeks)
    if label != target:
        raise AssertionError(f"lesion model produced {label} while building {target}")
    return timepoint



def baseline_timepoint(week: str, rng: np.random.Generator) -> Timepoint:
    """A post-operative baseline: one measurable enhancing lesion, in half of the patients a small
    non-measurable satellite, in a third a second measurable focus (multifocal disease)."""
    side = float(rng.choice([-1.0, 1.0]))
    center = (side * pick(rng, 22, 30), pick(rng, -20, 10), pick(rng, 14, 26))
    radius = pick(rng, 11.5, 13.0)
    satellite = (center[0], center[1] + radius + 14.0, center[2] - 4.0)
    direction = rng.normal(size=3)
    direction /= np.linalg.norm(direction)
    cavity_radius = pick(rng, 8, 14)
    cavity_center = tuple(float(c + d * (radius + cavity_radius * 0.5)) for c, d in zip(center, direction))
    lesions = [Lesion("L1", center, (radius, radius * 0.9, radius * 0.9), 1.5)]
    if rng.random() < 0.5:
        lesions.append(Lesion("L2", satellite, (3.0, 3.0, 3.0), 1.2, necrotic=False))
    if rng.random() < 0.33:
        second = pick(rng, 7.0, 9.0)
        focus = (center[0] + side * 4.0, center[1] - radius - second - 16.0, center[2] + 6.0)
        lesions.append(Lesion("L3", focus, (second, second, second), 1.3, necrotic=False))
    return Timepoint(week, lesions, Compartment("cavity", cavity_center, (cavity_radius,) * 3, 0, roughness=0.15))

