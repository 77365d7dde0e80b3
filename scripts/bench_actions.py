"""Latency of the actions as agents receive them, on a 256x256x160 volume (p50/p95 ms), measured side by side in
one run: the bare registry call, the same call in-process behind REST, and behind REST with the viewer in a
supervised child process (which streams each view's raw pixels to the server as soon as it is rendered: the server
encodes it while the viewer renders the next); plus the PNG encoders, and set_slice_offset against a one-view
observe (MCP start-up: scripts/bench_mcp_startup.py).

Writes bench/actions.json. Targets (issue "Serving every client"): REST observe of three 512 px views p50 within
1.5x of the in-process registry call plus one view's encoding; supervision adding at most 10 %; set_slice_offset
within one reslice of a one-view observe. The samples of the compared paths are interleaved call by call, each
round starting with the next path, so machine load (the machine may be shared: its load average is recorded
around every section) affects them alike; the CPU time each process spent per REST call (``cpu_ms_per_call``: the
benchmark's own process, which holds the client, both servers and the supervisor, and the supervised viewer's) is
counted in a pass of its own, where wall time is not to be trusted. The REST client is ``requests`` (what most
Python agents use); ``client_cost`` times the same supervised call from the standard library's ``http.client``
too, in its own interleaved run, to tell the server's time from the client's own reading of the 0.36 MB answer.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import nibabel as nib
import numpy as np
import requests
from PIL import Image

from MedOpenClawLib.apps.radiology import build_slicer_registry
from MedOpenClawLib.core.png import encode_png
from MedOpenClawLib.core.result import RenderedImage
from MedOpenClawLib.core.sinks import write_json
from MedOpenClawLib.server.rest_app import BackgroundRestServer
from MedOpenClawLib.server.supervisor import SupervisedRegistry

TOKEN = "bench-token"


def load() -> float:
    """The 1-minute load average: above the core count, the paths compete with other work for the CPU."""
    return round(os.getloadavg()[0], 2)


def percentiles(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {"p50_ms": round(statistics.median(ordered), 3),
            "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3), "n": len(ordered)}


def cpu_ms(pid: int) -> float | None:
    """The CPU time every live thread of process ``pid`` has used so far (Linux's per-thread schedstat, in ns:
    exact where /proc/PID/stat counts 10 ms ticks); None where there is no /proc."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    total = 0
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as handle:
                total += int(handle.read().split()[0])
        except (OSError, ValueError, IndexError):  # a thread that ended meanwhile
            continue
    return total / 1e6


def interleaved(paths: dict, repeats: int) -> dict:
    """Each path called once per round, the rounds going through every order of the paths in turn, so each path
    follows each other one equally often (a path run right after another on the same scene finds its caches warm;
    rotating one order left the in-process REST path after the registry call two rounds in three):
    {name: samples in ms}."""
    samples: dict[str, list[float]] = {name: [] for name in paths}
    orders = list(itertools.permutations(paths))
    for index in range(repeats):
        for name in orders[index % len(orders)]:
            started = time.perf_counter()
            paths[name](index)
            samples[name].append((time.perf_counter() - started) * 1000.0)
    return samples


def cpu_per_call(paths: dict, repeats: int, processes: dict) -> dict:
    """{name: {process: mean CPU ms per call}} for ``processes`` ({label: pid}), each path called ``repeats`` times
    in a row, apart from the timed rounds: reading the counters (a /proc file per thread of each process, the
    viewer's among them) never lies between two timed calls."""
    cpu: dict[str, dict[str, float]] = {}
    for name, function in paths.items():
        before = {label: cpu_ms(pid) for label, pid in processes.items()}
        for index in range(repeats):
            function(index)
        after = {label: cpu_ms(pid) for label, pid in processes.items()}
        cpu[name] = {label: round((after[label] - before[label]) / repeats, 3) for label in processes
                     if after[label] is not None and before[label] is not None}
    return cpu


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


def ok(result):
    assert result.ok, result.error
    return result


def rest_caller(port: int):
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {TOKEN}"

    def call(name: str, arguments: dict) -> dict:
        answer = session.post(f"http://127.0.0.1:{port}/v1/actions/{name}", json=arguments, timeout=120)
        answer.raise_for_status()
        body = answer.json()
        assert body["ok"], body["error"]
        return body

    return call


def lean_caller(port: int):
    """The same calls from the standard library's ``http.client`` (one keep-alive connection, the body read whole)."""
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}

    def call(name: str, arguments: dict) -> dict:
        connection.request("POST", f"/v1/actions/{name}", body=json.dumps(arguments), headers=headers)
        answer = connection.getresponse()
        body = json.loads(answer.read())
        assert answer.status == 200 and body["ok"], body["error"]
        return body

    return call


def rendered_only(function):
    """``function()`` with no view encoded ahead: the registry call's own work, rendering, without PNG encoding."""
    saved = RenderedImage.encode_ahead
    RenderedImage.encode_ahead = lambda self: None
    try:
        return function()
    finally:
        RenderedImage.encode_ahead = saved


def observe_paths(registry, supervised, repeats: int) -> dict:
    """observe 3x512: the registry call (renders, no encoding), one view's encoding, REST in-process and
    supervised (PNG, base64 and JSON included, decoded by the client)."""
    pixels = ok(registry.call("observe", {"view": "axial", "size": 512})).images[0].pixels
    with BackgroundRestServer(registry, TOKEN) as local, BackgroundRestServer(supervised, TOKEN) as remote:
        local_call, remote_call, lean_call = rest_caller(local.port), rest_caller(remote.port), lean_caller(remote.port)
        for call in (local_call, remote_call):
            call("observe", {"size": 512})
        rest = {"rest_in_process": lambda i: local_call("observe", {"size": 512}),
                "rest_supervised": lambda i: remote_call("observe", {"size": 512})}
        samples = interleaved({
            "registry_call": lambda i: local.executor.submit(
                rendered_only, lambda: ok(registry.call("observe", {"size": 512}))).result(),
            "encode_one_view": lambda i: encode_png(pixels), **rest}, repeats)
        cpu = cpu_per_call(rest, repeats, {"bench_process": os.getpid(), "viewer_process": supervised.viewer_pid})
        lean_call("observe", {"size": 512})  # connected now: the server drops a connection idle for KEEP_ALIVE_S
        clients = interleaved({"requests": lambda i: remote_call("observe", {"size": 512}),
                               "http_client": lambda i: lean_call("observe", {"size": 512})}, repeats)
    report = {name: percentiles(values) for name, values in samples.items()}
    p50 = {name: entry["p50_ms"] for name, entry in report.items()}
    # the client, both REST servers and the supervisor run in this process; the supervised viewer in its own
    report["cpu_ms_per_call"] = cpu
    bound = 1.5 * (p50["registry_call"] + p50["encode_one_view"])
    report["rest_in_process_over_bound"] = round(p50["rest_in_process"] / bound, 3)
    report["rest_supervised_over_bound"] = round(p50["rest_supervised"] / bound, 3)
    report["supervision_added"] = round(p50["rest_supervised"] / p50["rest_in_process"] - 1.0, 3)
    costs = {name: percentiles(values) for name, values in clients.items()}  # its own run: against the same bound
    report["client_cost"] = {**{f"rest_supervised_{name}": entry for name, entry in costs.items()},
                             "requests_minus_http_client_p50_ms": round(costs["requests"]["p50_ms"]
                                                                        - costs["http_client"]["p50_ms"], 3),
                             "rest_supervised_http_client_over_bound": round(costs["http_client"]["p50_ms"] / bound,
                                                                             3)}
    report["meets_targets"] = {"rest_in_process_within_1.5x_of_call_plus_one_encoding": p50["rest_in_process"] <= bound,
                               "rest_supervised_within_1.5x_of_call_plus_one_encoding": p50["rest_supervised"] <= bound,
                               "supervision_adds_at_most_10_percent": report["supervision_added"] <= 0.10}
    return report


def navigation_paths(registry, repeats: int) -> dict:
    """set_slice_offset (one 512 px view, as an agent receives it) against a one-view observe and one reslice."""
    engine = registry.context.engine
    bounds = ok(registry.call("get_slice_offset_range", {"view": "axial"})).data
    offsets = np.linspace(bounds["min_mm"], bounds["max_mm"], repeats)
    producer = engine.logic("axial").GetImageDataConnection().GetProducer()

    def as_sent(name: str, arguments: dict) -> str:
        return json.dumps(ok(registry.call(name, arguments)).to_json())

    def reslice(index: int) -> None:
        engine.set_offset("axial", float(offsets[-1 - index]))
        producer.Update()

    samples = interleaved({
        "observe_1x512": lambda i: as_sent("observe", {"view": "axial", "size": 512}),
        "set_slice_offset_1x512": lambda i: as_sent("set_slice_offset", {"view": "axial", "offset": float(offsets[i]),
                                                                         "size": 512}),
        "reslice_1x512": reslice,
    }, repeats)
    report = {name: percentiles(values) for name, values in samples.items()}
    extra = report["set_slice_offset_1x512"]["p50_ms"] - report["observe_1x512"]["p50_ms"]
    report["set_slice_offset_minus_observe_p50_ms"] = round(extra, 3)
    report["meets_targets"] = {"set_slice_offset_within_one_reslice_of_observe":
                               extra <= 1.25 * report["reslice_1x512"]["p50_ms"] + 1.0}
    return report


def without_isal(array: np.ndarray) -> bytes:
    """encode_png where isal is not installed (its zlib fallback)."""
    saved = sys.modules.get("isal")
    sys.modules["isal"] = None  # importing it now raises ImportError
    try:
        return encode_png(array)
    finally:
        if saved is None:
            del sys.modules["isal"]
        else:
            sys.modules["isal"] = saved


def encoders(registry, repeats: int) -> dict:
    """The lossless encoders tried on a rendered 512 px view: time and bytes (the library uses the fastest)."""
    pixels = ok(registry.call("observe", {"view": "axial", "size": 512})).images[0].pixels
    import imagecodecs

    def pillow(level: int):
        def encode(array):
            buffer = io.BytesIO()
            Image.fromarray(array).save(buffer, format="PNG", compress_level=level)
            return buffer.getvalue()
        return encode

    candidates = {"pillow_png_level1": pillow(1), "pillow_png_level0": pillow(0),
                  "libpng_level1_default": lambda array: imagecodecs.png_encode(array, level=1),
                  "libpng_level1_rle_sub (opencv's)": lambda array: imagecodecs.png_encode(array, level=1, strategy=3,
                                                                                           filter=16),
                  "libpng_level1_huffman_up": lambda array: imagecodecs.png_encode(array, level=1, strategy=2,
                                                                                   filter=32),
                  "up_filter_zlib_huffman (without isal)": without_isal,
                  "up_filter_isal_level1 (used)": encode_png}
    samples = interleaved({name: (lambda i, f=f: f(pixels)) for name, f in candidates.items()}, repeats)
    report = {}
    for name, encode in candidates.items():
        data = encode(pixels)
        assert np.array_equal(np.asarray(Image.open(io.BytesIO(data))), pixels), f"{name} is not lossless"
        report[name] = {**percentiles(samples[name]), "bytes": len(data)}
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=72, help="rounds; 72: every order of four paths three times")
    parser.add_argument("--out", type=Path, default=Path("bench/actions.json"))
    args = parser.parse_args()
    loads = {"start": load()}
    with tempfile.TemporaryDirectory() as folder:
        make_volume(Path(folder))
        registry = build_slicer_registry([folder])
        ok(registry.call("open_case", {"dicom_dir": folder}))
        supervised = SupervisedRegistry("radiology", [folder], workdir=Path(folder) / "viewer", spare=False)
        try:
            ok(supervised.call("open_case", {"dicom_dir": folder}))
            report = {"observe_3x512": observe_paths(registry, supervised, args.repeats)}
        finally:
            supervised.close()
        loads["after_observe"] = load()
        report["navigation"] = navigation_paths(registry, args.repeats)
        loads["after_navigation"] = load()
        report["png_encoders_512"] = encoders(registry, args.repeats)
        loads["end"] = load()
    report["machine"] = {"python": platform.python_version(), "cpu_count": os.cpu_count(),
                         "load_average_1m": loads, "volume": [256, 256, 160]}
    write_json(args.out, report, indent=2)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
