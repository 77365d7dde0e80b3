"""The segmentation operators with their defaults on every radiology module's embedded cohort.

Adds ``defaults_on_cohort`` to bench/operators.json (the operator timings of scripts/bench_operators.py stay): per
case, ``segment_region``'s default region growing (operators.region_growing, the function the action runs after
mapping its seeds) seeded once inside the hidden lesion, its Dice against the hidden lesion mask and its volume
over the mask's. The seed is a click on the lesion's conspicuous signal: the mask voxel deepest inside the mask
among those at or above the mask's median intensity on the segmented volume, which is the one the action's
description points the agent to (FLAIR for a brain tumour with its oedema, CT for a lung tumour). Lesion masks:
UCSF-PDGM's tumour segmentation (all labels), LUMIERE's CURRENT DeepBraTumIA mask (all labels, atlas space like
the images), NSCLC's DICOM SEG tumour. ``vista3d_segment`` is measured the same way with the weights configured
(``MEDOPENCLAW_VISTA3D_BUNDLE``) when there are any; otherwise the reason is recorded and no number. The drift
stop's limit (``drift_spreads``) was set on this cohort, so ``drift_spreads_sensitivity`` keeps the summaries with
the limits on either side of it.

Run: MEDOPENCLAW_CACHE=... python scripts/bench_segment_defaults.py  (generates the cohort when not cached)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import nibabel as nib
import numpy as np
import SimpleITK as sitk
from scipy import ndimage

from MedOpenClawLib.bench.cases import load_cases, load_ground_truth
from MedOpenClawLib.bench.cohort_cache import synthetic_cases
from MedOpenClawLib.operators.image import from_sitk
from MedOpenClawLib.operators.region_growing import GrowingParameters, grow_region

LUMIERE_SEQUENCE = "FLAIR"
MAX_VOLUME_RATIO = 3.0  # the bound: never more than 3x the lesion's volume
DRIFT_ALTERNATIVES = (1.0, 1.5)  # the drift stop's limit on either side of the default, set on this cohort


def read_image(path: Path) -> sitk.Image:
    """A NIfTI file, or the DICOM series in a folder."""
    if path.is_dir():
        reader = sitk.ImageSeriesReader()
        reader.SetFileNames(reader.GetGDCMSeriesFileNames(str(path)))
        return reader.Execute()
    return sitk.ReadImage(str(path))


def lesion_inputs(module: str, cases_dir: Path):
    """(case id, segmented volume path, hidden lesion mask path) of every case with a lesion."""
    for case in load_cases(cases_dir):
        truth = load_ground_truth(cases_dir, case.case_id)
        if module == "lumiere":
            segmentation = truth.hidden_dir / "current_seg.nii.gz"
            if segmentation.is_file() and np.asarray(nib.load(segmentation).dataobj).any():  # else nothing to seed
                yield case.case_id, case.path(f"{case.data_dir}/CURRENT_{LUMIERE_SEQUENCE}.nii.gz"), segmentation
        elif truth.localization:
            if module == "ucsf-pdgm":
                volume = case.path(f"{case.data_dir}/{case.case_id}_FLAIR.nii.gz")
            else:
                source = truth.localization["source_volume_name"]
                volume = case.path(next(ref.path for ref in case.volumes if ref.name == source))
            yield case.case_id, volume, truth.mask_path


def conspicuous_seed(values: np.ndarray, lesion: np.ndarray) -> tuple[int, int, int]:
    """(i, j, k) of the lesion voxel deepest inside the lesion among those at or above its median intensity."""
    depth = ndimage.distance_transform_edt(lesion)
    depth[~lesion | (values < np.median(values[lesion]))] = -1
    k, j, i = np.unravel_index(int(np.argmax(depth)), lesion.shape)
    return int(i), int(j), int(k)


def measure_case(volume_path: Path, mask_path: Path, parameters: list[GrowingParameters]) -> list[dict]:
    """The case grown from its seed with each of ``parameters``."""
    image = read_image(volume_path)
    volume = from_sitk(image)
    lesion_image = sitk.Resample(sitk.ReadImage(str(mask_path)), image, sitk.Transform(), sitk.sitkNearestNeighbor)
    lesion = sitk.GetArrayFromImage(lesion_image) > 0
    seed = conspicuous_seed(volume.array, lesion)
    results = []
    for setting in parameters:
        started = time.perf_counter()
        grown = grow_region(volume, [seed], setting)
        seconds = time.perf_counter() - started
        overlap = int((grown.mask & lesion).sum())
        results.append({"dice": round(2.0 * overlap / (int(grown.mask.sum()) + int(lesion.sum())), 3),
                        "volume_ratio": round(float(grown.mask.sum() / lesion.sum()), 3),
                        "lesion_ml": round(float(lesion.sum() * volume.voxel_volume_mm3 / 1000.0), 2),
                        "stop": grown.stop, "seconds": round(seconds, 2), "seed_ijk": list(seed)})
    return results


def summary(cases: dict[str, dict]) -> dict:
    """Median Dice, the largest volume ratio and how many cases exceed the issue's bound."""
    ratios = [case["volume_ratio"] for case in cases.values()]
    return {"median_dice": round(statistics.median(case["dice"] for case in cases.values()), 3),
            "max_volume_ratio": max(ratios), "over_3x": sum(ratio > MAX_VOLUME_RATIO for ratio in ratios)}


def vista3d_on_nsclc(cases_dir: Path) -> dict:
    """``vista3d_segment``'s pipeline with the configured weights on the NSCLC CTs (class "lung tumor" with the same
    seed as a point prompt), or why it cannot run here: no number is made up."""
    from MedOpenClawLib.operators.vista3d import (  # torch/monai: the optional vista3d extra
        Vista3DError,
        bundle_from_environment,
        label_table,
        load_network,
        segment,
    )

    try:
        bundle = bundle_from_environment()
        network = load_network(bundle)
    except Vista3DError as error:
        return {"measured": False, "reason": str(error)}
    tumour = label_table().resolve("lung tumor")
    cases = {}
    for case_id, volume_path, mask_path in lesion_inputs("nsclc", cases_dir):
        image = read_image(volume_path)
        volume = from_sitk(image)
        lesion = sitk.GetArrayFromImage(sitk.Resample(sitk.ReadImage(str(mask_path)), image, sitk.Transform(),
                                                      sitk.sitkNearestNeighbor)) > 0
        seed_ras = volume.ijk_to_ras_points(np.array([conspicuous_seed(volume.array, lesion)]))[0]
        started = time.perf_counter()
        output = segment(network, volume, bundle.settings, [tumour], [seed_ras.tolist()], [1])
        mask = output.labelmap.array > 0
        cases[case_id] = {"dice": round(2.0 * int((mask & lesion).sum()) / (int(mask.sum()) + int(lesion.sum())), 3),
                          "volume_ratio": round(float(mask.sum() / lesion.sum()), 3),
                          "seconds": round(time.perf_counter() - started, 2), "device": output.device}
    dice = [case["dice"] for case in cases.values()]
    return {"measured": True, "weights": str(bundle.weights), "cases": cases,
            "median_dice": round(statistics.median(dice), 3) if dice else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/operators.json"))
    parser.add_argument("--cases", type=Path, help="a folder of prepared packages, one per module (default: the "
                                                      "embedded cohort, generated into the cache when absent)")
    args = parser.parse_args()

    def package(module: str) -> Path:
        return args.cases / module if args.cases else synthetic_cases(module)

    settings = [GrowingParameters(), *(GrowingParameters(drift_spreads=value) for value in DRIFT_ALTERNATIVES)]
    modules, sensitivity = {}, {str(value): {} for value in DRIFT_ALTERNATIVES}
    for module, segmented in (("ucsf-pdgm", "FLAIR"), ("lumiere", "CURRENT_FLAIR (atlas space)"),
                              ("nsclc", "the CT series the SEG references")):
        measured = {case_id: measure_case(volume, mask, settings)
                    for case_id, volume, mask in lesion_inputs(module, package(module))}
        cases = {case_id: results[0] for case_id, results in measured.items()}
        modules[module] = {"segmented": segmented, "cases": cases, **summary(cases)}
        for index, value in enumerate(DRIFT_ALTERNATIVES, start=1):
            sensitivity[str(value)][module] = summary({case_id: grown[index] for case_id, grown in measured.items()})
        print(module, summary(cases), flush=True)
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results["defaults_on_cohort"] = {
        "cohort": package("ucsf-pdgm").resolve().parent.parent.name,
        "segment_region": {"parameters": GrowingParameters().__dict__, "modules": modules,
                           "drift_spreads_sensitivity": sensitivity},
        "vista3d_segment": vista3d_on_nsclc(package("nsclc")),
    }
    args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
