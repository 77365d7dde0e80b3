"""Benchmark: how the time to read hostile model text grows with its size (tool calls written as text, the five
answer parsers, the redaction every trace record passes through).

Writes bench/model_text.json: per shape, the seconds at 64, 128 and 256 KB and the growth from 128 to 256 KB
(2.0 is linear; the regexes this replaced grew 4x or more and took hours at 256 KB).
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "MedOpenClaw"))

from MedOpenClawLib.bench.modules import get  # noqa: E402
from MedOpenClawLib.core.redaction import redact_text  # noqa: E402
from MedOpenClawLib.providers.text_calls import text_tool_calls  # noqa: E402

MODULES = ("ucsf-pdgm", "lumiere", "nsclc", "bracs", "camelyon17")
SIZES = (64 * 1024, 128 * 1024, 256 * 1024)
SHAPES = {
    "unclosed <tool_call> + spaces": lambda n: "<tool_call>x" + " " * n + "y",
    "almost a ```json fence": lambda n: "```json" + " " * n + "y```z",
    "newlines": lambda n: "\n" * n + "x",
    "ANSWER: + spaces": lambda n: "ANSWER: a" + " " * n + "b",
    "RAS triple + spaces": lambda n: "RAS: (1" + " " * n + "x",
    "{ repeated": lambda n: "{" * n,
    '{"a":[ repeated': lambda n: '{"a":[' * (n // 6),
    "name-like run (redaction)": lambda n: "a-" * (n // 2),
}


def read_all(text: str) -> None:
    text_tool_calls(text, {"observe"})
    for module in MODULES:
        get(module).read_answer(text)
    redact_text(text)


def seconds(text: str) -> float:
    started = time.perf_counter()
    read_all(text)
    return time.perf_counter() - started


def main() -> None:
    read_all("warm-up")
    results = {}
    for name, shape in SHAPES.items():
        timings = [min(seconds(shape(size)) for _ in range(3)) for size in SIZES]
        results[name] = {"seconds": dict(zip((f"{size // 1024} KB" for size in SIZES), map(lambda t: round(t, 4),
                                                                                              timings))),
                         "growth_128_to_256": round(timings[2] / max(timings[1], 1e-6), 2)}
        print(f"{name:32s} {' '.join(f'{t:8.4f}' for t in timings)}  x{results[name]['growth_128_to_256']}")
    out = ROOT / "bench" / "model_text.json"
    out.write_text(json.dumps({"python": platform.python_version(), "machine": platform.machine(),
                               "shapes": results}, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
