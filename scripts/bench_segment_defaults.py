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
the limits on either side of it. One seed per case says little about the clicks an agent makes, so ``other_seeds``
summarises growths from 5 more seeds per case (bright lesion voxels at least 2 voxels deep, drawn with a fixed
generator).

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
from MedOpenClawLib.operators.image import ImageVolume, from_sitk
from MedOpenClawLib.operators.region_growing import GrowingParameters, grow_region

LUMIERE_SEQUENCE = "FLAIR"
MAX_VOLUME_RATIO = 3.0  # the bound: never more than 3x the lesion's volume
DRIFT_ALTERNATIVES = (1.0, 1.5)  # the drift stop's limit on either side of the default, set on this cohort
OTHER_SEEDS = 5  # per case, besides the conspicuous seed


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


def other_seeds(values: np.ndarray, lesion: np.ndarray, rng: np.random.Generator) -> list[tuple[int, int, int]]:
    """:data:`OTHER_SEEDS` (i, j, k) drawn among the lesion voxels at or above its median intensity and at least
    two voxels deep: clicks an agent could make as well as the deepest one."""
    depth = ndimage.distance_transform_edt(lesion)
    candidates = np.argwhere(lesion & (depth >= 2) & (values >= np.median(values[lesion])))
    picks = candidates[rng.choice(len(candidates), size=min(OTHER_SEEDS, len(candidates)), replace=False)]
    return [(int(i), int(j), int(k)) for k, j, i in picks]


def grown_from(volume: ImageVolume, lesion: np.ndarray, seed: tuple[int, int, int], setting: GrowingParameters
               ) -> dict:
    """One growth against the lesion mask: Dice, volume over the mask's, what stopped it, seconds."""
    started = time.perf_counter()
    grown = grow_region(volume, [seed], setting)
    seconds = time.perf_counter() - started
    overlap = int((grown.mask & lesion).sum())
    return {"dice": round(2.0 * overlap / (int(grown.mask.sum()) + int(lesion.sum())), 3),
            "volume_ratio": round(float(grown.mask.sum() / lesion.sum()), 3),
            "lesion_ml": round(float(lesion.sum() * volume.voxel_volume_mm3 / 1000.0), 2),
            "stop": grown.stop, "seconds": round(seconds, 2), "seed_ijk": list(seed)}


def measure_case(volume_path: Path, mask_path: Path, parameters: list[GrowingParameters], rng: np.random.Generator
                 ) -> tuple[list[dict], list[dict]]:
    """The case grown from its conspicuous seed with each of ``parameters``, and from :func:`other_seeds` with the
    defaults."""
    image = read_image(volume_path)
    volume = from_sitk(image)
    lesion_image = sitk.Resample(sitk.ReadImage(str(mask_path)), image, sitk.Transform(), sitk.sitkNearestNeighbor)
    lesion = sitk.GetArrayFromImage(lesion_image) > 0
    seed, others = conspicuous_seed(volume.array, lesion), other_seeds(volume.array, lesion, rng)
    return ([grown_from(volume, lesion, seed, setting) for setting in parameters],
            [grown_from(volume, lesion, other, GrowingParameters()) for other in others])


def summary(grown: list[dict]) -> dict:
    """Median Dice, the largest volume ratio and how many growths exceed the issue's bound."""
    ratios = [result["volume_ratio"] for result in grown]
    return {"median_dice": round(statistics.median(result["dice"] for result in grown), 3),
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
    modules, sensitivity, robustness = {}, {str(value): {} for value in DRIFT_ALTERNATIVES}, {}
    rng = np.random.default_rng(0)
    for module, segmented in (("ucsf-pdgm", "FLAIR"), ("lumiere", "CURRENT_FLAIR (atlas space)"),
                              ("nsclc", "the CT series the SEG references")):
        measured = {case_id: measure_case(volume, mask, settings, rng)
                    for case_id, volume, mask in lesion_inputs(module, package(module))}
        cases = {case_id: results[0] for case_id, (results, _) in measured.items()}
        modules[module] = {"segmented": segmented, "cases": cases, **summary(list(cases.values()))}
        for index, value in enumerate(DRIFT_ALTERNATIVES, start=1):
            sensitivity[str(value)][module] = summary([results[index] for results, _ in measured.values()])
        others = [result for _, results in measured.values() for result in results]
        robustness[module] = {"seeds": len(others), **summary(others),
                              "cases_over_3x": sorted({case_id for case_id, (_, results) in measured.items()
                                                       if any(r["volume_ratio"] > MAX_VOLUME_RATIO for r in results)})}
        print(module, summary(list(cases.values())), "other seeds:", robustness[module], flush=True)
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results["defaults_on_cohort"] = {
        "cohort": package("ucsf-pdgm").resolve().parent.parent.name,
        "segment_region": {"parameters": GrowingParameters().__dict__, "modules": modules,
                           "drift_spreads_sensitivity": sensitivity, "other_seeds": robustness},
        "vista3d_segment": vista3d_on_nsclc(package("nsclc")),
    }
    args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
