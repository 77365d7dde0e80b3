"""Episode pages as a transcript: a scripted model's own words and reasoning, each tool call with its arguments,
the data it returned, its error, tokens and latency per turn, the final answer beside the correct one, and the
reference location drawn when the answered evidence missed the lesion."""

from __future__ import annotations

import hashlib
import html
import json
import re

from agents_cases import write_ucsf_package
from agents_fakes import FakeModelServer, Scripted, openai_reply

from MedOpenClawLib.bench.cases import load_cases, load_ground_truth
from MedOpenClawLib.bench.report import write_report
from MedOpenClawLib.bench.report.transcript import answer_rows, copy_images, reasoning_of, transcript, usage_text
from MedOpenClawLib.cli import main


def _with_reasoning(reply: dict, reasoning: str) -> dict:
    reply["choices"][0]["message"]["reasoning_content"] = reasoning
    return reply


def _text(page: str) -> str:
    """What a reader sees: the page's text without tags, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_a_scripted_model_episode_reads_as_a_transcript(tmp_path, monkeypatch, capsys):
    cases = write_ucsf_package(tmp_path / "cases", cases=1)
    truth = load_ground_truth(cases, "UCSF-PDGM-0001")
    wrong = next(letter for letter in "ABCDEF" if letter != truth.answers["answer"])
    script = [
        Scripted(_with_reasoning(openai_reply(text="Let me look at the axial T1c.", calls=[
            ("select_volume", '{"volume_name": "UCSF-PDGM-0001_T1c", "size": 64}')], usage=(1200, 40)),
            "The enhancing rim suggests a high-grade lesion.")),
        Scripted(openai_reply(calls=[("jump", '{"ras": [0, 0, 999]}'), ("no_such_tool", "{}")])),
        Scripted(openai_reply(text=f"KEY_SLICE_AXIAL_MM: -30\nRAS: [0, 0, -30]\nANSWER: {wrong}")),
    ]
    monkeypatch.setenv("MEDOPENCLAW_API_KEY", "sk-transcript-test-0001")
    out = tmp_path / "run"
    with FakeModelServer(script) as model:
        assert main(["bench", "run", "--module", "ucsf-pdgm", "--agent", "model", "--provider", "openai",
                     "--base-url", f"{model.url}/v1", "--model", "scripted", "--cases", str(cases), "--no-preflight",
                     "--out", str(out)]) == 0
    capsys.readouterr()
    write_report([out], tmp_path / "report", figures=False)  # pages only
    page = (tmp_path / "report" / "runs" / "run" / "UCSF-PDGM-0001__r1.html").read_text()
    seen = _text(page)
    assert "Let me look at the axial T1c." in seen  # the model's own words
    assert "The enhancing rim suggests a high-grade lesion." in seen  # its reasoning, as the provider returned it
    assert "1200 in / 40 out" in seen  # tokens of that turn
    assert '"active_volume": "UCSF-PDGM-0001_T1c"' in seen  # the data select_volume returned
    assert "not executed" in seen and "unknown_action" in seen  # the refused call, with its error
    assert seen.count("Turn ") >= 3 and "final answer" in seen
    answer = page.split('<table class="answers">')[1].split("</table>")[0]
    options = dict(load_cases(cases)[0].questions[0].options)
    assert f"{wrong} · {options[wrong]}" in _text(answer)  # the final answer ...
    correct = truth.answers["answer"]
    assert f"{correct} · {options[correct]}" in _text(answer)  # ... beside the correct one
    assert "✗" in answer
    assert "Where the lesion is" in page  # the answered slice missed the lesion: the reference is drawn
    assert (tmp_path / "report" / "runs" / "run" / "UCSF-PDGM-0001__r1" / "reference_axial.png").is_file()
    assert "sk-transcript-test-0001" not in page
    findings = json.loads(next(out.glob("episodes/*/result.json")).read_text())["audit"]["findings"]
    assert findings and "Trace-audit findings" in page  # the ungrounded key slice and point
    for finding in findings:
        assert finding["code"] in seen and all(f'href="#seq-{seq}"' in page for seq in finding["records"])


def test_transcript_pieces_from_records(tmp_path):
    assert reasoning_of({"reasoning": "thinking aloud"}) == "thinking aloud"
    assert reasoning_of([{"type": "thinking", "thinking": "a"}, {"type": "redacted_thinking"},
                         {"type": "text", "text": "b"}]) == "a\n\n[reasoning withheld by the provider]"
    assert usage_text({"calls": 0, "input_tokens": 0, "output_tokens": 0}) == ("", "")  # offline agents
    assert usage_text({"calls": 1, "input_tokens": 5, "output_tokens": 2, "model_seconds": 1.25}) == \
        ("5 in / 2 out", "1.2 s")
    records = [
        {"kind": "action", "actor": "system", "action": "open_case", "status": "ok", "seq": 0, "arguments": {}},
        {"kind": "episode_prompt", "payload": {"system": "S", "user": "U", "tools": ["jump"], "images": []}},
        {"kind": "model_output", "payload": {"round": 1, "text": "", "tool_calls": [{"id": "c1"}],
                                             "tools_allowed": True, "usage": {}}},
        {"kind": "action", "actor": "agent", "action": "jump", "status": "error", "seq": 3,
         "arguments": {"ras": [1, 2, 3]}, "error": {"code": "out_of_range", "message": "outside the volume"},
         "result": {"data": {}, "images": [{"path": "../../elsewhere.png"}]}, "extra": {"call_id": "c1"}},
        {"kind": "tool_receipt", "payload": {"call_id": "c1", "name": "jump", "arguments": {"ras": [1, 2, 3]},
                                             "dispatched": True, "status": "error", "feedback": "{...}"}},
        {"kind": "model_output", "payload": {"round": None, "text": "ANSWER: A", "tool_calls": [],
                                             "tools_allowed": True, "usage": {}}},
        "junk", {"kind": "tool_receipt"},
    ]
    page = tmp_path / "e.html"
    shown = transcript([record for record in records if isinstance(record, dict)], tmp_path / "t.jsonl",
                       tmp_path / "e", page)
    assert [step.name for step in shown["setup"]] == ["open_case"] and shown["prompt"]["tools"] == ["jump"]
    first, last = shown["turns"]
    assert [(step.name, step.status, step.error) for step in first.steps] == \
        [("jump", "error", "out_of_range: outside the volume")]
    assert first.steps[0].images == [] and first.steps[0].seq == 3  # no file outside the trace's folder
    assert last.final and last.text == "ANSWER: A" and not last.usage


def test_answer_rows_name_fields_and_reference_location():
    cases = None
    truth = type("Truth", (), {"answers": {"q1": "B", "q2": "A"}, "evidence_fields": {"new_lesion": True},
                               "localization": {"reference_key_slices": {"axial": 4.5},
                                                "reference_ras": [1.0, 2.0, 4.5]}, "regions": []})()
    rows = answer_rows(cases, truth, {"answers": {"q1": "B"}, "evidence": {"new_lesion": False,
                                                                           "key_slice_axial_mm": 4.5}})
    assert [(row["field"], row["answer"], row["correct"], row["match"]) for row in rows] == [
        ("q1", "B", "B", True), ("q2", "—", "A", False), ("new lesion", "False", "True", False),
        ("axial key slice (mm)", "4.50", "4.50 (reference)", None),
        ("RAS point (mm)", "—", "[1.00, 2.00, 4.50] (reference)", None)]
    assert json.dumps(rows)  # plain values: the template only prints them


def test_a_report_holds_each_distinct_image_once(tmp_path):
    """Episodes show the same views again and again: their images are placed once, named by their SHA-256."""
    images, pages = tmp_path / "report" / "images", []
    for episode, content in (("e1", b"same view"), ("e2", b"same view"), ("e3", b"another view")):
        folder = tmp_path / "run" / "episodes" / episode
        (folder / "images").mkdir(parents=True)
        (folder / "images" / "0001_axial.png").write_bytes(content)
        record = {"result": {"images": [{"path": "images/0001_axial.png", "view": "axial"}]}}
        page = tmp_path / "report" / "runs" / "run" / f"{episode}.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        pages.append(copy_images(record, folder.resolve(), images, page)[0]["src"])
    assert sorted(path.name for path in images.iterdir()) == sorted(
        f"{hashlib.sha256(content).hexdigest()}.png" for content in (b"same view", b"another view"))
    assert pages[0] == pages[1] != pages[2] and pages[0].startswith("../../images/")
    assert (tmp_path / "report" / "runs" / "run" / pages[0]).read_bytes() == b"same view"
