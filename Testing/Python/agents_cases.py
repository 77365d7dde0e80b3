"""A tiny ucsf-pdgm case package for the runner tests, written through the case-package contract
(``bench.cases.PackageWriter``): 4 sequences of 24x24x16 voxels with a bright lesion, its mask, and ground
truth. Small enough that a worker opens a case in milliseconds."""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np

from MedOpenClawLib.bench.cases import Case, GroundTruth, VolumeRef
from MedOpenClawLib.bench.modules import get
from MedOpenClawLib.bench.modules.ucsf_pdgm.labels import UCSF_OPTIONS
from MedOpenClawLib.bench.package import PackageWriter
from MedOpenClawLib.bench.scoring.geometry import VoxelMask

SEQUENCES = ("T1", "T1c", "T2", "FLAIR")
AFFINE = np.array([[-2.0, 0, 0, 24.0], [0, -2.0, 0, 20.0], [0, 0, 2.5, -15.0], [0, 0, 0, 1]])  # LPS-like flips


def write_ucsf_package(root: Path, cases: int = 3, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    writer = PackageWriter(root, get("ucsf-pdgm"), "test fixture")
    grid = np.indices((24, 24, 16)).transpose(1, 2, 3, 0)
    for number in range(cases):
        case_id = f"UCSF-PDGM-{number + 1:04d}"
        data_dir = writer.data_dir(case_id)
        data_dir.mkdir(parents=True, exist_ok=True)
        center = rng.uniform([7, 7, 5], [17, 17, 11])
        mask = (((grid - center) / [4, 4, 3]) ** 2).sum(-1) <= 1.0
        volumes = []
        for index, sequence in enumerate(SEQUENCES):
            image = rng.normal(100, 5, mask.shape) + mask * (120 + 40 * index)
            path = data_dir / f"{case_id}_{sequence}.nii.gz"
            nib.save(nib.Nifti1Image(image.astype(np.float32), AFFINE), path)
            volumes.append(VolumeRef(f"{case_id}_{sequence}", writer.relative(path), "MR", sequence))
        hidden = writer.hidden_dir(case_id)
        hidden.mkdir(parents=True, exist_ok=True)
        nib.save(nib.Nifti1Image(mask.astype(np.uint8), AFFINE), hidden / "mask.nii.gz")
        voxel_mask = VoxelMask(mask, AFFINE)
        reference_ras, reference_slices = voxel_mask.interior_reference()
        letter = UCSF_OPTIONS[number % 6][0] if number % 6 != 2 else "A"
        case = Case("ucsf-pdgm", case_id, writer.relative(data_dir), [writer.relative(data_dir)], volumes,
                    questions=list(get("ucsf-pdgm").questions),
                    brief={"csv_id": case_id, "loaded_files": [Path(v.path).name for v in volumes]})
        truth = GroundTruth(
            "ucsf-pdgm", case_id, {"answer": letter}, {"answer": dict(UCSF_OPTIONS)[letter]},
            localization={"source_volume_name": f"{case_id}_T1c", "mask": "mask.nii.gz",
                          "ras_ranges": {k: list(v) for k, v in voxel_mask.ras_ranges().items()},
                          "reference_ras": reference_ras, "reference_key_slices": reference_slices},
        )
        writer.add(case, truth)
    writer.finish()
    return root
