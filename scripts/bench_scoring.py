"""Benchmark: parse and score 1,000 final responses (200 per module) against the synthetic case packages.

Writes bench/scoring.json. The target is under 10 s on this machine for the 1,000 responses; cohort
generation and case preparation are timed separately and not part of the target.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "MedOpenClaw"))

from MedOpenClawLib.bench import modules  # noqa: E402
from MedOpenClawLib.bench.cases import load_cases, load_ground_truth  # noqa: E402
from MedOpenClawLib.bench.kit.answers import Evidence  # noqa: E402
from MedOpenClawLib.bench.package import prepare  # noqa: E402
from MedOpenClawLib.bench.scoring import score_case  # noqa: E402
from MedOpenClawLib.bench.synthetic.cohort import CohortConfig, write_cohort  # noqa: E402

PER_MODULE = 200


def oracle_response(module: str, truth) -> str:
    """A correct answer with passing evidence (the truth's own), in the module's final-answer format."""
    return modules.get(module).write_answer(truth.answers, Evidence.of_truth(truth))


def responses_for(module: str, cases_dir: Path) -> list[dict]:
    cases = load_cases(cases_dir)
    variants = [
        lambda text: text,
        lambda text: f"**Rationale** ...\n```\n{text}\n```\nDone.",
        lambda text: "ANSWER: maybe",
        lambda text: "{garbage",
    ]
    records = []
    for index in range(PER_MODULE):
        case = cases[index % len(cases)]
        truth = load_ground_truth(cases_dir, case.case_id)
        records.append({"case_id": case.case_id, "response": variants[index % 4](oracle_response(module, truth))})
    return records


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        started = time.perf_counter()
        write_cohort(scratch / "raw", CohortConfig(seed=0, cases=6, mri_spacing_mm=2, slide_size=(2048, 1536)))
        generated = time.perf_counter() - started
        packages = {module: scratch / "cases" / module for module in modules.names()}
        for module, out in packages.items():
            prepare(modules.get(module), scratch / "raw" / modules.get(module).dataset_dir, out)
        prepared = time.perf_counter() - started - generated
        records = {module: responses_for(module, out) for module, out in packages.items()}
        timings, summaries = {}, {}
        total_started = time.perf_counter()
        for module, out in packages.items():
            module_started = time.perf_counter()
            truths: dict[str, object] = {}
            scores = []
            for record in records[module]:
                case_id = record["case_id"]
                if case_id not in truths:
                    truths[case_id] = load_ground_truth(out, case_id)
                spec = modules.get(module)
                scores.append(score_case(spec, truths[case_id], spec.read_answer(record["response"])))
            timings[module] = round(time.perf_counter() - module_started, 4)
            summaries[module] = {
                "responses": len(scores),
                "task": round(sum(s.task for s in scores) / len(scores), 4),
                "strict": round(sum(s.strict for s in scores) / len(scores), 4),
            }
        total = time.perf_counter() - total_started
    result = {
        "benchmark": "parse + score 1,000 final responses against synthetic case packages",
        "responses": PER_MODULE * len(packages),
        "scoring_seconds": round(total, 3),
        "target_seconds": 10.0,
        "passed": total < 10.0,
        "per_module_seconds": timings,
        "per_module": summaries,
        "cohort_generation_seconds": round(generated, 2),
        "prepare_seconds": round(prepared, 2),
        "note": "half of the responses are correct oracle answers (plain or wrapped in markdown/fences), half are "
        "unparseable; so task and strict are 0.5",
    }
    out = ROOT / "bench" / "scoring.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(json.dumps(result, sort_keys=True))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
