"""`medopenclaw bench run --agent model` end to end: a scripted OpenAI-compatible model on 127.0.0.1 drives a real
headless worker through tool calls, answers with evidence, and the run is scored, audited and key-free."""

from __future__ import annotations

import json

from agents_cases import write_ucsf_package
from agents_fakes import FakeModelServer, Scripted, openai_reply

from MedOpenClawLib.bench.cases import load_ground_truth
from MedOpenClawLib.cli import main
from MedOpenClawLib.core.audit import read_trace, verify_trace

SECRET = "sk-cli-test-DO-NOT-LEAK-42"


def final_answer(truth) -> str:
    slices = truth.localization["reference_key_slices"]
    r, a, s = truth.localization["reference_ras"]
    return (f"**Findings**: enhancing lesion on T1c.\nKEY_SLICE_AXIAL_MM: {slices['axial']:.2f}\n"
            f"KEY_SLICE_SAGITTAL_MM: {slices['sagittal']:.2f} mm\nKEY_SLICE_CORONAL_MM: {slices['coronal']:.2f}\n"
            f"RAS: [{r:.2f}, {a:.2f}, {s:.2f}]\nANSWER: {truth.answers['answer']}")


def test_model_agent_run_through_the_cli(tmp_path, capsys, monkeypatch):
    cases = write_ucsf_package(tmp_path / "cases", cases=1)
    truth = load_ground_truth(cases, "UCSF-PDGM-0001")
    script = [
        Scripted(openai_reply(calls=[("report_colour", '{"colour": "red"}')])),  # the pre-flight request
        Scripted(openai_reply(calls=[("select_volume", '{"volume_name": "UCSF-PDGM-0001_T1c", "size": 64}')])),
        Scripted(openai_reply(calls=[("image_coords_to_ras", '{"view": "axial", "point_1000": [500, 500]}'),
                                     ("run_python", '{"code": "import os"}')])),
        Scripted(openai_reply(text=final_answer(truth))),
    ]
    monkeypatch.setenv("MEDOPENCLAW_API_KEY", SECRET)
    out = tmp_path / "run"
    with FakeModelServer(script) as model:
        code = main(["bench", "run", "--module", "ucsf-pdgm", "--agent", "model", "--provider", "openai",
                     "--base-url", f"{model.url}/v1", "--model", "scripted", "--cases", str(cases),
                     "--out", str(out)])
    assert code == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (summary["n"], summary["task"], summary["strict"], summary["loc"], summary["invalid"]) == (1, 1, 1, 1, 0)

    assert len(model.requests) == 4
    preflight = model.requests[0]["body"]
    assert preflight["max_tokens"] == 256 and "temperature" not in preflight
    assert [tool["function"]["name"] for tool in preflight["tools"]] == ["report_colour"]
    assert preflight["messages"][0]["content"][1]["type"] == "image_url"  # one image, one tool
    first = model.requests[1]["body"]
    assert first["model"] == "scripted" and {tool["function"]["name"] for tool in first["tools"]} >= {"jump", "observe"}
    assert any(part.get("type") == "image_url" for message in first["messages"]
               for part in (message["content"] if isinstance(message["content"], list) else []))
    assert model.requests[1]["headers"]["Authorization"] == f"Bearer {SECRET}"

    trace_path = next(out.rglob("trace-*.jsonl"))
    assert verify_trace(trace_path).ok
    records = read_trace(trace_path)
    receipts = [r["payload"] for r in records if r["kind"] == "tool_receipt"]
    assert [(r["name"], r["status"]) for r in receipts] == [("select_volume", "ok"), ("image_coords_to_ras", "ok"),
                                                            ("run_python", "error")]
    assert sum(r["kind"] == "model_output" for r in records) == 3
    for path in out.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".jsonl", ".txt", ".log", ".html", ".md"):
            assert SECRET not in path.read_text(errors="replace"), path


def test_secrets_in_the_base_url_and_extra_body_are_written_nowhere(tmp_path, capsys, warm_workers):
    """URL userinfo and secret-named --extra-body fields (api_key, Authorization) are redacted by the one
    redaction wherever the run writes: run.json, result.json, episode traces, the report and its transcripts, the
    terminal. The requests themselves still carry them.

    On a warm worker (a worker only ever sees them through the runner's requests, as a fresh one would), whose log
    is read where it is written, in the pool's folder."""
    cases = write_ucsf_package(tmp_path / "cases", cases=1)
    truth = load_ground_truth(cases, "UCSF-PDGM-0001")
    script = [Scripted(openai_reply(calls=[("report_colour", '{"colour": "red"}')])),
              Scripted(openai_reply(text=final_answer(truth)))]
    secrets = ("hunter2-url-password", "body-key-DO-NOT-LEAK", "header-token-DO-NOT-LEAK")
    extra = {"api_key": secrets[1], "Authorization": f"Bearer {secrets[2]}", "top_k": 20}
    out = tmp_path / "run"
    with FakeModelServer(script) as model:
        base_url = model.url.replace("http://", f"http://user:{secrets[0]}@") + "/v1"
        code = main(["bench", "run", "--module", "ucsf-pdgm", "--agent", "model", "--provider", "openai",
                     "--base-url", base_url, "--model", "scripted", "--cases", str(cases), "--out", str(out),
                     "--extra-body", json.dumps(extra)])
    assert code == 0 and main(["bench", "report", str(out)]) == 0
    assert model.requests[-1]["body"]["api_key"] == secrets[1]  # sent, as asked
    written = [path for path in out.rglob("*") if path.is_file()]
    assert any(path.suffix == ".html" for path in written) and any(path.name == "run.json" for path in written)
    written += list(warm_workers.directory.rglob("worker.log"))
    captured = capsys.readouterr()
    for name, text in [(str(path), path.read_text(errors="replace")) for path in written] + [
            ("stdout", captured.out), ("stderr", captured.err)]:
        assert not [secret for secret in secrets if secret in text], name
    run = json.loads(next(out.rglob("run.json")).read_text())
    assert "user:***@" not in json.dumps(run) and "***@127.0.0.1" in json.dumps(run)
