"""The report reads a run directory whose trace was produced through the real registry and audit trace."""

from __future__ import annotations

import argparse
import json

import numpy as np

from MedOpenClawLib.bench.cases import Case, GroundTruth, load_ground_truth
from MedOpenClawLib.bench.commands import add_commands
from MedOpenClawLib.bench.kit.loading import localization_record
from MedOpenClawLib.bench.modules import get
from MedOpenClawLib.bench.package import PackageWriter
from MedOpenClawLib.bench.scoring import aggregate, score_case
from MedOpenClawLib.bench.scoring.process import aggregate_process, process_metrics
from MedOpenClawLib.bench.synthetic.common import write_nifti
from MedOpenClawLib.core.audit import AuditTrace
from MedOpenClawLib.core.policy import SessionPolicy
from MedOpenClawLib.core.registry import ActionRegistry
from MedOpenClawLib.core.result import ActionError, RenderedImage, Result
from MedOpenClawLib.core.toolset import Toolset


class SceneStub:
    """Minimal ActionContext: no scene, nothing to roll back."""

    def __init__(self):
        self.policy = SessionPolicy(max_rounds=5)

    def state(self) -> dict:
        return {"active": "T1c"}

    def checkpoint(self):
        return None

    def rollback(self, token) -> None:
        return None


def _package(tmp_path):
    writer = PackageWriter(tmp_path / "cases", get("ucsf-pdgm"), tmp_path)
    data = np.zeros((12, 12, 12), dtype=np.uint8)
    data[4:8, 4:8, 4:8] = 1
    mask = write_nifti(writer.hidden_dir("UCSF-PDGM-0001") / "mask.nii.gz", data, np.eye(4))
    (writer.data_dir("UCSF-PDGM-0001")).mkdir(parents=True)
    case = Case(
        "ucsf-pdgm",
        "UCSF-PDGM-0001",
        "data/UCSF-PDGM-0001",
        ["data/UCSF-PDGM-0001"],
        questions=list(get("ucsf-pdgm").questions),
    )
    writer.add(
        case,
        GroundTruth(
            "ucsf-pdgm", "UCSF-PDGM-0001", {"answer": "A"}, localization=localization_record(mask, "UCSF-PDGM-0001_T1c")
        ),
    )
    writer.finish()
    return tmp_path / "cases"


def _trace(path):
    tools = Toolset("viewer")

    @tools.action("observe", "viewer", "Render one view", properties={"view": {"type": "string"}}, required=["view"])
    def observe(context, view):
        if view not in ("axial", "sagittal", "coronal"):
            raise ActionError("invalid_argument", f"unknown view {view!r}")
        pixels = np.full((16, 16), 90, dtype=np.uint8)
        return Result(True, {"view": view}, images=[RenderedImage(view, 16, 16, 5.0, pixels=pixels)])

    trace = AuditTrace(path, header={"case_id": "UCSF-PDGM-0001"}, save_images=True)
    registry = ActionRegistry(SceneStub(), [tools], trace)
    trace.record_event("episode_prompt", {"system": "You are <b>a radiology assistant</b>", "user": "Case brief"})
    registry.call("observe", {"view": "axial"}, round_id=1)
    registry.call("observe", {"view": "oblique"}, round_id=2)
    trace.record_event("model_output", {"usage": {"input_tokens": 1200, "output_tokens": 80}}, actor="agent")
    trace.record_event("episode_end", {"budget_exhausted": False})
    return trace


def test_report_pages_from_a_registry_trace(tmp_path):
    cases_dir = _package(tmp_path)
    run = tmp_path / "run"
    episode = run / "episodes" / "UCSF-PDGM-0001__r0"
    trace = _trace(episode / "trace-1.jsonl")
    response = (
        "EVIDENCE:\nKEY_SLICE_AXIAL_MM: 5\nKEY_SLICE_SAGITTAL_MM: 5\nKEY_SLICE_CORONAL_MM: 20\n"
        "RAS: [5, 5, 5]\nANSWER: A"
    )
    parsed = get("ucsf-pdgm").read_answer(response)
    score = score_case(get("ucsf-pdgm"), load_ground_truth(cases_dir, "UCSF-PDGM-0001"), parsed)
    score.details["parsed"] = parsed
    assert (score.task, score.strict, score.loc) == (1.0, 0.0, 1.0)  # coronal key slice 20 is outside 3.5..7.5
    result = {
        "episode_id": "UCSF-PDGM-0001__r0",
        "case_id": "UCSF-PDGM-0001",
        "response": response,
        "invalid": None,
        "trace": "episodes/UCSF-PDGM-0001__r0/trace-1.jsonl",
        "score": score.to_json(),
    }
    (episode / "result.json").write_text(json.dumps(result))
    summary = aggregate([score], get("ucsf-pdgm"))
    summary["process"] = aggregate_process([process_metrics(get("ucsf-pdgm"), trace.records, answered=True)])
    (run / "summary.json").write_text(json.dumps(summary))
    (run / "run.json").write_text(json.dumps(
        {"module": "ucsf-pdgm", "agent": "scripted", "track": "A", "max_rounds": 20, "cases_dir": str(cases_dir)}
    ))

    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["bench", "report", str(tmp_path), "--no-figures"])  # tables and pages only
    assert args.func(args) == 0
    report = tmp_path / "report"
    table = (report / "results.md").read_text()
    # one case: Clopper-Pearson of 1/1 and 0/1, never a point
    assert ("| run | — | — | scripted | A | 20 rounds | ucsf-pdgm | 1 | 0 | 0 | 0 | 1.00 [0.03, 1.00] "
            "| 0.00 [0.00, 0.97] |") in table
    rows = json.loads((report / "results.json").read_text())["tables"][0]["sections"][0]["rows"]
    assert rows[0]["cells"]["input_tokens"]["value"] == 1200  # an integer, from the trace's model receipts
    assert rows[0]["cells"]["execution"]["value"] is not None
    page = (report / "runs" / "run" / "UCSF-PDGM-0001__r0.html").read_text()
    assert "&lt;b&gt;a radiology assistant&lt;/b&gt;" in page  # prompt shown, escaped
    assert "invalid_argument" in page and "&#34;view&#34;: &#34;oblique&#34;" in page
    assert 'key_slice_coronal: <span class="fail">fail</span>' in page
    assert 'ras_in_mask: <span class="pass">pass</span>' in page
    image_src = page.split('<img src="')[1].split('"')[0]
    assert not image_src.startswith("/") and (report / "runs" / "run" / image_src).resolve().is_file()
    assert str(tmp_path) not in page
    # the package holds no image volume: the evidence view reports why instead of failing the report
    assert "Evidence view unavailable" in page
    assert "UCSF-PDGM-0001__r0.html" in (report / "runs" / "run.html").read_text()
    assert not (report / "plots").exists() and 'id="plots"' not in (report / "index.html").read_text()  # no figures


def test_score_command_writes_per_case_files(tmp_path, capsys):
    cases_dir = _package(tmp_path)
    responses = tmp_path / "responses.jsonl"
    responses.write_text(
        json.dumps({"case_id": "UCSF-PDGM-0001", "response": "ANSWER: A"})
        + "\n"
        + json.dumps({"case_id": "UCSF-PDGM-0001", "response": "ANSWER: B"})
        + "\n"
        + json.dumps({"case_id": "nope", "response": "x"})
        + "\nnot json\n"
    )
    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["bench", "score", "--module", "ucsf-pdgm", "--cases", str(cases_dir), "--responses", str(responses)]
    )
    assert args.func(args) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert {key: summary[key] for key in ("module", "n", "task", "strict", "loc", "invalid")} == {
        "module": "ucsf-pdgm",
        "n": 1,
        "task": 0.0,
        "strict": 0.0,
        "loc": 0.0,
        "invalid": 0,
    }
    assert "not a case of this package" in captured.err and "line 4: not JSON" in captured.err
    assert "UCSF-PDGM-0001: answered more than once" in captured.err
    per_case = json.loads((tmp_path / "responses_scores" / "episodes" / "UCSF-PDGM-0001__r1" / "result.json")
                          .read_text())
    assert per_case["score"]["details"]["parsed"]["answer"] == "B" and per_case["response"] == "ANSWER: B"
    wrong = parser.parse_args(
        ["bench", "score", "--module", "bracs", "--cases", str(cases_dir), "--responses", str(responses)]
    )
    assert wrong.func(wrong) == 2
