"""Latency of registry actions on a 256x256x160 volume (p50/p95 ms), and REST overhead over in-process calls.

Writes bench/actions.json. Targets (2-core machine): set_slice_offset and get_viewer_state p50 < 5 ms (the
action renders and returns the updated 512 px view; ``set_slice_offset_state_only`` shows the state change alone),
observe of three 512 px views p50 < 60 ms (PNG-encoded, as an agent receives them), REST overhead < 3 ms p50.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import nibabel as nib
import numpy as np
import requests

from MedOpenClawLib.server.rest import BackgroundRestServer
from MedOpenClawLib.session import build_slicer_registry

TARGETS_P50_MS = {"set_slice_offset": 5.0, "get_viewer_state": 5.0, "observe_3x512_png": 60.0, "rest_overhead": 3.0}


def percentiles(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {"p50_ms": round(statistics.median(ordered), 3),
            "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3), "n": len(ordered)}


def timed(function, repeats: int) -> list[float]:
    samples = []
    for index in range(repeats):
        started = time.perf_counter()
        function(index)
        samples.append((time.perf_counter() - started) * 1000.0)
    return samples


def make_volume(folder: Path) -> Path:
    rng = np.random.default_rng(0)
    shape = (256, 256, 160)
    x, y, z = np.ogrid[: shape[0], : shape[1], : shape[2]]
    body = ((x - 128) ** 2 + (y - 128) ** 2) < 110**2
    volume = np.where(body, 40, -1000) + rng.normal(0, 20, shape)
    volume[((x - 150) ** 2 + (y - 110) ** 2 + (z - 80) ** 2) < 12**2] = 300
    path = folder / "CT.nii.gz"
    nib.save(nib.Nifti1Image(volume.astype(np.int16), np.diag([-0.8, -0.8, 1.5, 1.0])), str(path))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=60)
    parser.add_argument("--out", type=Path, default=Path("bench/actions.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        make_volume(Path(folder))
        registry = build_slicer_registry([folder])
        assert registry.call("open_case", {"dicom_dir": folder}).ok
        low, high = (lambda d: (d["min_mm"], d["max_mm"]))(
            registry.call("get_slice_offset_range", {"view": "axial"}).data)
        offsets = np.linspace(low, high, args.repeats)

        def call(name, arguments):
            result = registry.call(name, arguments)
            assert result.ok, result.error
            return result

        results = {
            "set_slice_offset": timed(lambda i: call("set_slice_offset", {"view": "axial", "offset": offsets[i]}),
                                      args.repeats),
            # the action's contract includes rendering the updated 512 px view; this row isolates the state change
            "set_slice_offset_state_only": timed(lambda i: registry.context.engine.set_offset("axial", offsets[i]),
                                                 args.repeats),
            "get_viewer_state": timed(lambda i: call("get_viewer_state", {}), args.repeats),
            "jump": timed(lambda i: call("jump", {"ras": [0.0, 0.0, float(offsets[i])]}), args.repeats),
            "image_coords_to_ras": timed(lambda i: call("image_coords_to_ras", {
                "view": "axial", "point_1000": [i * 10 % 999, 500]}), args.repeats),
            "observe_3x512_render": timed(lambda i: call("observe", {"size": 512}), args.repeats),
            "observe_3x512_png": timed(lambda i: [image.png_bytes() for image in call("observe", {"size": 512}).images],
                                       args.repeats),
            "scroll_5_keyframes": timed(lambda i: call("scroll", {"view": "axial", "direction": "up" if i % 2 else
                                                                  "down", "num_slices": 5}), args.repeats // 2),
        }
        token = "bench-token"
        with BackgroundRestServer(registry, token) as server:
            session = requests.Session()
            session.headers["Authorization"] = f"Bearer {token}"
            url = f"http://127.0.0.1:{server.port}/v1/actions/get_viewer_state"
            session.post(url, json={}, timeout=10)
            rest = timed(lambda i: session.post(url, json={}, timeout=10).raise_for_status(), args.repeats)
    report = {name: percentiles(samples) for name, samples in results.items()}
    report["rest_get_viewer_state"] = percentiles(rest)
    overhead = statistics.median(rest) - statistics.median(results["get_viewer_state"])
    report["rest_overhead"] = {"p50_ms": round(overhead, 3)}
    report["targets_p50_ms"] = TARGETS_P50_MS
    report["meets_targets"] = {name: report[name]["p50_ms"] < target for name, target in TARGETS_P50_MS.items()}
    report["machine"] = {"python": platform.python_version(), "cpu_count": os.cpu_count(),
                         "volume": [256, 256, 160]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
