"""Scoring a responses file against a case package: what ``bench score`` and Track C pipelines use.

Responses are JSONL lines ``{"case_id", "response"}``; optional keys: ``"invalid": "<reason>"`` (an
environment fault: excluded from denominators) and ``"trace": "<path>"`` (an audit trace, relative to the responses
file, from which process metrics are computed). Cases of the package without a response are scored as unanswered.

:func:`write_scored_run` writes the scores as a run folder (``run.json``, ``summary.json``,
``episodes/<case>__r1/result.json``), the shape ``bench run`` writes, so ``bench report`` shows externally scored
pipelines (Table 6's M3D / RadFM rows) beside the runs of this runtime.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ...core.audit import read_trace
from ...core.names import confined
from ...core.sinks import write_json
from ..cases import CaseFormatError, load_cases, load_ground_truth, package_image_space
from ..spec import ModuleSpec
from .aggregate import aggregate
from .process import aggregate_process, invalid_reason, process_metrics
from .rules import CaseScore, score_case


@dataclass
class BatchResult:
    scores: list[CaseScore]
    summary: dict
    problems: list[str] = field(default_factory=list)
    responses: dict[str, str | None] = field(default_factory=dict)  # case id -> the raw response scored


def read_responses(path: str | os.PathLike) -> tuple[list[dict], list[str]]:
    """Records of a JSONL file; malformed lines are reported, not fatal."""
    records, problems = [], []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                problems.append(f"line {number}: not JSON ({error.msg})")
                continue
            if not isinstance(record, dict) or not isinstance(record.get("case_id"), str):
                problems.append(f"line {number}: needs an object with a string case_id")
                continue
            records.append(record)
    return records, problems


def score_records(
    spec: ModuleSpec, cases_dir: str | os.PathLike, records: list[dict], base_dir: Path | None = None
) -> BatchResult:
    """Score every case of the package (of ``spec``'s module) once: the last record per case wins, missing cases
    count as unanswered."""
    problems: list[str] = []
    case_ids = [case.case_id for case in load_cases(cases_dir)]
    known = set(case_ids)  # one look-up per response, whatever the package's size
    by_case: dict[str, dict] = {}
    for record in records:
        if record["case_id"] not in known:
            problems.append(f"{record['case_id']}: not a case of this package; ignored")
            continue
        if record["case_id"] in by_case:
            problems.append(f"{record['case_id']}: answered more than once; the last answer is scored")
        by_case[record["case_id"]] = record
    scores, process = [], []
    for case_id in case_ids:
        record = by_case.get(case_id, {"case_id": case_id, "response": None})
        truth = load_ground_truth(cases_dir, case_id)
        trace_records = None
        if record.get("trace"):
            trace_path = Path(record["trace"])
            if not trace_path.is_absolute() and base_dir is not None:
                trace_path = base_dir / trace_path
            try:
                trace_records = read_trace(trace_path)
            except (OSError, ValueError) as error:
                problems.append(f"{case_id}: cannot read trace {trace_path}: {error}")
        invalid = record.get("invalid") or (invalid_reason(trace_records) if trace_records else None)
        parsed = spec.read_answer(record.get("response"))
        if case_id not in by_case:
            parsed["errors"] = ["no response for this case"] + parsed["errors"]
        score = score_case(spec, truth, parsed, invalid=invalid)
        score.details["parsed"] = parsed
        if trace_records is not None:
            metrics = process_metrics(spec, trace_records, spec.answered(parsed))
            metrics["invalid"] = metrics["invalid"] or (str(invalid) if invalid else None)
            score.details["process"] = metrics
            process.append(metrics)
        scores.append(score)
    summary = (
        aggregate(scores, spec)
        if scores
        else {"module": spec.name, "n": 0, "task": None, "strict": None, "loc": None, "invalid": 0}
    )
    summary["module"] = spec.name
    summary["missing"] = sum(1 for case_id in case_ids if case_id not in by_case)
    if process:
        summary["process"] = aggregate_process(process)
    responses = {case_id: record.get("response") for case_id, record in by_case.items()}
    return BatchResult(scores, summary, problems, responses)


def package_fingerprint(cases_dir: str | os.PathLike) -> str | None:
    """A short hash of a package's manifest (its cases, files and hashes): two runs pool only when it agrees."""
    import hashlib

    try:
        return hashlib.sha256((Path(cases_dir) / "manifest.json").read_bytes()).hexdigest()[:16]
    except OSError:
        return None


def write_scored_run(out: str | os.PathLike, result: BatchResult, module: str, cases_dir: str | os.PathLike,
                     responses: Path, name: str, track: str) -> Path:
    """The scores of an external pipeline as a run folder named ``name`` (agent ``external``) on ``track``."""
    out = Path(out)
    identity = {"module": module, "agent": "external", "track": track,
                "provider": {"kind": "external", "model": name},
                "cases_dir": str(Path(cases_dir).resolve()), "package": package_fingerprint(cases_dir),
                **package_image_space(cases_dir), "responses": str(responses.resolve())}
    for score in result.scores:
        episode = f"{score.case_id}__r1"
        body = {"episode_id": episode, "case_id": score.case_id, "response": result.responses.get(score.case_id),
                "invalid": score.invalid_reason, "score": score.to_json()}
        write_json(confined(out / "episodes", episode, "result.json"), body)  # ids checked by the manifest reader
    write_json(out / "run.json", identity)
    write_json(out / "summary.json", {**result.summary, "episode_ids": [f"{s.case_id}__r1" for s in result.scores]})
    return out


def score_file(spec: ModuleSpec, cases_dir: str | os.PathLike, responses: str | os.PathLike) -> BatchResult:
    """Score a responses JSONL file against a package of ``spec``'s module (``bench score``)."""
    module = spec.name
    try:
        manifest_module = json.loads((Path(cases_dir) / "manifest.json").read_text())["module"]
    except (OSError, ValueError, KeyError) as error:
        raise CaseFormatError(f"{cases_dir}: no readable manifest.json ({error})") from error
    if manifest_module != module:
        raise CaseFormatError(f"{cases_dir} holds {manifest_module} cases, not {module}")
    records, problems = read_responses(responses)
    result = score_records(spec, cases_dir, records, Path(responses).resolve().parent)
    result.problems[:0] = problems
    return result
