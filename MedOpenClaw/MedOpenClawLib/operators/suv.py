"""Body-weight SUV from the DICOM attributes of a PET series (the QIBA/Slicer PET-SUV convention).

``SUVbw = activity concentration [Bq/ml] * body weight [g] / injected dose decayed to the scan start [Bq]``.
Pixel values must already be in the series' ``Units`` (rescale slope/intercept applied when loading).
Refuses rather than guesses: an SUV computed from ungrounded units is MedFlow-Bench's pseudo-quantification (F2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from pydicom.dataset import Dataset


class SuvError(ValueError):
    """The series lacks what a body-weight SUV needs; the message says which attribute."""


@dataclass(frozen=True)
class SuvCalibration:
    factor: float  # multiply a pixel value by this to get SUVbw
    units: str
    decay_correction: str
    weight_kg: float | None
    injected_dose_bq: float | None
    decay_factor: float | None

    def to_json(self) -> dict:
        return {key: value for key, value in self.__dict__.items()}


def suv_calibration(dataset: Dataset) -> SuvCalibration:
    """The SUVbw factor of a PET series, from one of its instances."""
    if str(dataset.get("Modality", "")).upper() != "PT":
        raise SuvError(f"SUV needs a PET series (Modality PT), not {dataset.get('Modality', 'unknown')}")
    units = str(dataset.get("Units", "")).upper()
    if units == "GML":  # already body-weight SUV
        return SuvCalibration(1.0, units, str(dataset.get("DecayCorrection", "")), None, None, None)
    if units != "BQML":
        raise SuvError(f"PET Units {units or 'missing'} cannot be converted to SUV (needs BQML or GML)")
    decay_correction = str(dataset.get("DecayCorrection", "")).upper()
    if decay_correction not in ("START", "ADMIN"):
        raise SuvError(f"PET DecayCorrection is {decay_correction or 'missing'}; SUV needs START or ADMIN")
    weight = _positive(dataset.get("PatientWeight"), "PatientWeight")
    info = dataset.get("RadiopharmaceuticalInformationSequence")
    if not info:
        raise SuvError("RadiopharmaceuticalInformationSequence is missing")
    drug = info[0]
    dose = _positive(drug.get("RadionuclideTotalDose"), "RadionuclideTotalDose")
    decay = 1.0
    if decay_correction == "START":
        half_life = _positive(drug.get("RadionuclideHalfLife"), "RadionuclideHalfLife")
        elapsed = (_scan_start(dataset) - _injection_time(dataset, drug)).total_seconds()
        if elapsed < 0:
            raise SuvError("the injection time is after the series start time")
        decay = math.exp(-math.log(2.0) * elapsed / half_life)
    return SuvCalibration(weight * 1000.0 / (dose * decay), units, decay_correction, weight, dose, decay)


def _positive(value, name: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise SuvError(f"{name} is missing") from None
    if number <= 0:
        raise SuvError(f"{name} must be positive, got {number}")
    return number


def _scan_start(dataset: Dataset) -> datetime:
    date, time = dataset.get("SeriesDate"), dataset.get("SeriesTime")
    if not date or not time:
        raise SuvError("SeriesDate/SeriesTime are missing")
    return _parse(str(date) + str(time))


def _injection_time(dataset: Dataset, drug: Dataset) -> datetime:
    if drug.get("RadiopharmaceuticalStartDateTime"):
        return _parse(str(drug.RadiopharmaceuticalStartDateTime))
    if drug.get("RadiopharmaceuticalStartTime"):  # same day as the series, by convention
        return _parse(str(dataset.get("SeriesDate")) + str(drug.RadiopharmaceuticalStartTime))
    raise SuvError("RadiopharmaceuticalStartDateTime/StartTime are missing")


def _parse(value: str) -> datetime:
    digits, _, fraction = value.split("+")[0].split("-")[0].partition(".")
    try:
        parsed = datetime.strptime(digits[:14].ljust(14, "0"), "%Y%m%d%H%M%S")
    except ValueError:
        raise SuvError(f"unreadable DICOM date/time {value!r}") from None
    return parsed.replace(microsecond=int((fraction + "000000")[:6]) if fraction else 0)
