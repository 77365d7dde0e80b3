"""Run directories for the report tests: hand-written episode results (several agents, models, modules, tracks
and budgets) in the layout `bench run` writes, and one case package with a real volume and a lesion mask."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from MedOpenClawLib.bench.cases import Case, GroundTruth
from MedOpenClawLib.bench.kit.loading import localization_record
from MedOpenClawLib.bench.modules import get
from MedOpenClawLib.bench.package import PackageWriter
from MedOpenClawLib.bench.synthetic.common import write_nifti

LESION_IJK = (slice(26, 32), slice(17, 23), slice(8, 12))  # patient right (R > 0) of a 40x40x20 2-mm grid
VOLUME_AFFINE = np.array([[2.0, 0, 0, -40.0], [0, 2.0, 0, -40.0], [0, 0, 2.0, -20.0], [0, 0, 0, 1]])


def lesion_case(root: Path) -> Path:
    """A ucsf-pdgm package with one case: T1c and FLAIR volumes with a bright lesion on the patient's right, and
    the hidden mask stored flipped left-right (another affine, same anatomy), as real masks sometimes are."""
    writer = PackageWriter(root / "cases", get("ucsf-pdgm"), root)
    case_id = "CASE-1"
    rng = np.random.default_rng(3)
    head = np.zeros((40, 40, 20), dtype=np.int16)
    head[6:34, 6:34, 2:18] = 300
    for name, lesion in (("T1c", 900), ("FLAIR", 700)):
        data = head + rng.normal(0, 5, head.shape).astype(np.int16)
        data[LESION_IJK] = lesion
        write_nifti(writer.data_dir(case_id) / f"{case_id}_{name}.nii.gz", data, VOLUME_AFFINE)
    mask = np.zeros(head.shape, dtype=np.uint8)
    mask[LESION_IJK] = 1
    flipped_affine = VOLUME_AFFINE.copy()
    flipped_affine[0, 0] = -2.0
    flipped_affine[0, 3] = -40.0 + 2.0 * 39
    mask_path = write_nifti(writer.hidden_dir(case_id) / "mask.nii.gz", mask[::-1].copy(), flipped_affine)
    case = Case("ucsf-pdgm", case_id, f"data/{case_id}", [f"data/{case_id}"],
                questions=list(get("ucsf-pdgm").questions))
    writer.add(case, GroundTruth("ucsf-pdgm", case_id, {"answer": "A"},
                                 localization=localization_record(mask_path, f"{case_id}_T1c")))
    writer.finish()
    return root / "cases"


def lesion_centre_ras() -> list[float]:
    centre = [(s.start + s.stop - 1) / 2.0 for s in LESION_IJK]
    return list((VOLUME_AFFINE @ np.array([*centre, 1.0]))[:3])


ANSWERED = {"answer": "A", "answers": {"q1": "A"}, "tumor_presence": "no_tumor"}  # what each module's parser reads


def score(module: str, case_id: str, task: float, strict: float, loc: float | None, parsed: dict | None = None,
          **details) -> dict:
    """A scored episode's score; ``parsed``: what the parser read (default: an answer each module accepts)."""
    return {"case_id": case_id, "module": module, "task": task, "strict": strict, "loc": loc, "invalid": False,
            "invalid_reason": None, "parse_errors": [], "gates": {},
            "details": {"parsed": ANSWERED if parsed is None else parsed, **details}}


def write_run(root: Path, name: str, module: str, agent: str, scores: list[dict], track: str = "A",
              max_rounds: int = 20, model: str | None = None, usage: dict | None = None,
              invalid: int = 0, errors: int = 0, rejected: tuple[str, ...] = (), **identity) -> Path:
    """``rejected``: case ids whose request a server refused for good (error.json, as `bench run` writes them);
    ``identity``: more run.json fields (max_tool_calls, model_family, package, ...)."""
    run = root / name
    provider = {"kind": "openai", "model": model, "base_url": "http://127.0.0.1:9/v1"} if model else None
    (run / "episodes").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"module": module, "agent": agent, "track": track,
                                              "max_rounds": max_rounds, "provider": provider, "seed": 0,
                                              "cases_dir": str(root / "no-such-cases"), "replay_from": None,
                                              **identity}))
    for case_id in rejected:
        episode_id = f"{case_id}__r1"
        (run / "episodes" / episode_id).mkdir()
        (run / "episodes" / episode_id / "error.json").write_text(json.dumps(
            {"episode_id": episode_id, "case_id": case_id, "score": None, "response": None,
             "error": {"kind": "rejected", "retryable": False, "message": "HTTP 400: image too large"}}))
    results = [{"score": body, "invalid": None} for body in scores]
    results += [{"score": {**scores[0], "invalid": True}, "invalid": "environment fault: worker died"}
                for _ in range(invalid)]
    for index, result in enumerate(results):
        episode_id = f"{result['score']['case_id']}__r{index + 1}"
        result.update(episode_id=episode_id, case_id=result["score"]["case_id"], repeat=index + 1,
                      response="ANSWER: A", outcome={"status": "completed", "usage": usage or {}})
        (run / "episodes" / episode_id).mkdir()
        (run / "episodes" / episode_id / "result.json").write_text(json.dumps(result))
    for index in range(errors):  # provider failures: only error.json, re-run by the next `bench run`
        episode_id = f"E{index}__r1"
        (run / "episodes" / episode_id).mkdir()
        (run / "episodes" / episode_id / "error.json").write_text(json.dumps(
            {"episode_id": episode_id, "case_id": f"E{index}", "error": {"kind": "transient", "message": "HTTP 503"},
             "usage_all_attempts": usage or {}}))
    (run / "summary.json").write_text(json.dumps({"module": module, "n": len(scores)}))
    return run


def nsclc_details(values: list[float]) -> dict:
    return {"questions": {f"q{k + 1}": value for k, value in enumerate(values)}}


def lumiere_details(values: list[bool | None]) -> dict:
    from MedOpenClawLib.bench.modules.lumiere.labels import LUMIERE_EVIDENCE_FIELDS

    return {"fields": dict(zip(LUMIERE_EVIDENCE_FIELDS, values))}


def cohort_of_runs(root: Path) -> Path:
    """Two backbones (a model over an OpenAI-compatible provider and the heuristic agent) plus the privileged
    oracle; the model on Tracks A, B and C and at two budgets; modules of both families."""
    usage = {"input_tokens": 1200, "output_tokens": 80, "reasoning_tokens": 20, "calls": 3, "cost_usd": 0.0125}
    ucsf = [score("ucsf-pdgm", f"U{k}", *values) for k, values in
            enumerate([(1, 1, 1), (1, 0, 1), (0, 0, 0), (1, 1, None)])]
    write_run(root, "gpt/ucsf-A", "ucsf-pdgm", "model", ucsf, model="gpt-test", usage=usage, invalid=1, errors=1)
    write_run(root, "gpt/ucsf-A-5rounds", "ucsf-pdgm", "model",
              [score("ucsf-pdgm", f"U{k}", *values) for k, values in enumerate([(1, 0, 0), (0, 0, 0)])],
              max_rounds=5, model="gpt-test", usage=usage)
    write_run(root, "gpt/ucsf-B", "ucsf-pdgm", "model",
              [score("ucsf-pdgm", f"U{k}", *values) for k, values in enumerate([(1, 1, 1), (1, 1, 1), (0, 0, 1)])],
              track="B", model="gpt-test", usage=usage)
    write_run(root, "gpt/ucsf-C", "ucsf-pdgm", "montage",
              [score("ucsf-pdgm", f"U{k}", *values) for k, values in enumerate([(0, 0, 0), (1, 0, 0)])],
              track="C", model="gpt-test", usage=usage)
    write_run(root, "gpt/nsclc-A", "nsclc", "model",
              [score("nsclc", "N0", 0.6, 0.6, 1.0, **nsclc_details([1, 0, 1, 1, 0])),
               score("nsclc", "N1", 0.4, 0.0, 0.0, **nsclc_details([0, 1, 0, 1, 0]))], model="gpt-test",
              usage=usage)
    write_run(root, "gpt/lumiere-A", "lumiere", "model",
              [score("lumiere", "L0", 1, 0, None, **lumiere_details([True, False, True, None, True, False])),
               score("lumiere", "L1", 0, 0, None, **lumiere_details([False, True, True, True, None, True]))],
              model="gpt-test", usage=usage)
    write_run(root, "offline/heuristic-ucsf", "ucsf-pdgm", "heuristic",
              [score("ucsf-pdgm", f"U{k}", *values) for k, values in enumerate([(1, 0, 0), (0, 0, 0)])])
    write_run(root, "offline/oracle-ucsf", "ucsf-pdgm", "oracle",
              [score("ucsf-pdgm", f"U{k}", 1, 1, 1) for k in range(3)])
    write_run(root, "offline/oracle-bracs", "bracs", "oracle", [score("bracs", f"B{k}", 1, 1, 1) for k in range(2)])
    return root
