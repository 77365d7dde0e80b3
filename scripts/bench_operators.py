"""Operator costs: headless registration of 128^3 volumes and one full-size VISTA3D forward pass per 128^3 patch.

Writes bench/operators.json. The VISTA3D number uses ``vista3d132`` (218 M parameters) with random weights: the
cost of a forward pass does not depend on the weight values. CPU is measured here; the GPU field is filled
when CUDA is available (run this script on a GPU machine) and left null otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import SimpleITK as sitk
import torch

from MedOpenClawLib.operators.image import ImageVolume, from_sitk
from MedOpenClawLib.operators.registration import register, resample
from MedOpenClawLib.operators.vista3d import build_network

SIZE = 128
SPACING_MM = 1.5


def textured_volume(seed: int = 7) -> ImageVolume:
    """Smoothed noise inside an ellipsoid: structure everywhere for mutual information, no symmetry."""
    rng = np.random.default_rng(seed)
    noise = sitk.GetImageFromArray(rng.normal(0.0, 1.0, (SIZE, SIZE, SIZE)).astype(np.float32))
    smooth = sitk.GetArrayFromImage(sitk.SmoothingRecursiveGaussian(noise, 3.0))
    k, j, i = np.indices((SIZE, SIZE, SIZE)) - (SIZE - 1) / 2.0
    body = ((i / 50.0) ** 2 + (j / 40.0) ** 2 + (k / 45.0) ** 2) <= 1.0
    array = np.where(body, 100.0 + 400.0 * smooth, 0.0).astype(np.float32)
    image = sitk.GetImageFromArray(array)
    image.SetSpacing((SPACING_MM,) * 3)
    image.SetOrigin((-(SIZE - 1) * SPACING_MM / 2.0,) * 3)
    return from_sitk(image)


def known_transform() -> np.ndarray:
    angle = np.radians(6.0)
    matrix = np.eye(4)
    matrix[:3, :3] = [[np.cos(angle), -np.sin(angle), 0], [np.sin(angle), np.cos(angle), 0], [0, 0, 1]]
    matrix[:3, 3] = (5.0, -4.0, 3.0)
    return matrix


def bench_registration() -> dict:
    fixed = textured_volume()
    truth = known_transform()
    moving = resample(fixed, fixed, np.linalg.inv(truth))  # moving content = fixed mapped by truth^-1
    points = np.c_[np.random.default_rng(0).uniform(-40, 40, (500, 3)), np.ones(500)]
    results = {}
    for transform_type in ("rigid", "affine"):
        started = time.perf_counter()
        result = register(fixed, moving, transform_type)
        seconds = time.perf_counter() - started
        error = np.linalg.norm((points @ result.matrix_ras.T - points @ truth.T)[:, :3], axis=1)
        results[transform_type] = {
            "seconds": round(seconds, 3),
            "max_error_mm": round(float(error.max()), 3),
            "iterations": result.iterations,
        }
    return {"volume": f"{SIZE}^3 at {SPACING_MM} mm, float32", "backend": "SimpleITK Mattes MI, 3-level pyramid",
            **results}


def forward_seconds(network, device: torch.device, runs: int) -> list[float]:
    image = torch.rand(1, 1, SIZE, SIZE, SIZE, device=device)
    prompt = torch.tensor([[3]], device=device)
    timings = []
    with torch.no_grad(), torch.autocast(device.type, enabled=device.type == "cuda"):
        for _ in range(runs):
            if device.type == "cuda":
                torch.cuda.synchronize()
            started = time.perf_counter()
            network(image, class_vector=prompt)
            if device.type == "cuda":
                torch.cuda.synchronize()
            timings.append(round(time.perf_counter() - started, 3))
    return timings


def bench_vista3d() -> dict:
    torch.manual_seed(0)
    network = build_network().eval()
    parameters = sum(parameter.numel() for parameter in network.parameters())
    result = {"network": "monai.networks.nets.vista3d132 (random weights)", "parameters": parameters,
              "patch": f"{SIZE}^3", "prompt": "one class (spleen)",
              "cpu_seconds_per_patch": forward_seconds(network, torch.device("cpu"), runs=1)[0],
              "cpu_threads": torch.get_num_threads()}
    if torch.cuda.is_available():
        device = torch.device("cuda")
        timings = forward_seconds(network.to(device), device, runs=4)
        result.update(gpu_seconds_per_patch=float(np.median(timings[1:])), gpu_first_run_seconds=timings[0],
                      gpu=torch.cuda.get_device_name(0), gpu_note="median of 3 runs after one warm-up, autocast fp16")
    else:
        result.update(gpu_seconds_per_patch=None, gpu_note="no CUDA device on this machine; run this script on one")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", default=str(Path(__file__).resolve().parents[1] / "bench" / "operators.json"))
    args = parser.parse_args()
    report = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "torch": torch.__version__},
        "registration": bench_registration(),
        "vista3d": bench_vista3d(),
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
