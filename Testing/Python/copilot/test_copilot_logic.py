"""MedCopilot's pure logic: approval queue rules, claim/evidence linking, settings and key handling, worker."""

from __future__ import annotations

import time

import pytest
from copilot_models import CountingModel, MarkedModel

from MedCopilotLib.approvals import ApprovalError, ApprovalQueue, Decision
from MedCopilotLib.evidence_links import EvidenceBoard, split_claims
from MedCopilotLib.settings import CopilotSettings, DictSettingsStore, load_settings, save_settings
from MedCopilotLib.worker import ModelCall, ModelWorker, WorkerBusy
from MedOpenClawLib.providers.messages import ToolCall


def call(name="observe", arguments=None, index=0):
    return ToolCall(f"c{index}", name, {} if arguments is None else arguments, "{}")


def queue(auto=False):
    return ApprovalQueue(lambda name: name in {"observe", "jump"}, auto_mode=auto)


def test_cards_are_handled_in_order_and_decided_once():
    q = queue()
    first, second = q.propose([call(index=0), call("jump", index=1)], "why", 1)
    assert q.next_to_handle() is None
    q.approve(second.id)
    assert q.next_to_handle() is None  # the first card is still pending
    q.reject(first.id, "  ")
    assert first.reason == "rejected by the clinician"
    assert q.next_to_handle() is first
    q.mark_handled(first, False)
    assert q.next_to_handle() is second
    with pytest.raises(ApprovalError, match="already rejected"):
        q.approve(first.id)
    with pytest.raises(ApprovalError, match="still open"):
        q.propose([call()], "", 2)
    q.mark_handled(second, True)
    assert q.turn_settled()
    with pytest.raises(ApprovalError, match="no proposal"):
        q.reject("P99")


def test_auto_mode_and_unrunnable_proposals():
    q = queue(auto=True)
    malformed = ToolCall("c1", "observe", None, '{"view": ', parse_error="arguments are not valid JSON")
    cards = q.propose([call(), ToolCall("c2", "exec_python", {"code": "1"}), malformed], "", 1)
    assert [c.decision for c in cards] == [Decision.AUTO_APPROVED, Decision.REJECTED, Decision.REJECTED]
    assert "no action named 'exec_python'" in cards[1].reason and "not valid JSON" in cards[2].reason
    manual = queue()
    waiting = manual.propose([call(), call("jump", index=1)], "", 1)
    assert manual.set_auto_mode(True) == waiting and all(c.decision is Decision.AUTO_APPROVED for c in waiting)
    assert manual.set_auto_mode(False) == []
    stopped = queue()
    open_cards = stopped.propose([call()], "", 1)
    assert stopped.cancel_open("stopped") == open_cards and open_cards[0].reason == "stopped"


def test_claims_link_to_captured_evidence_only():
    records = [{"seq": 0, "kind": "session_start"},
               {"seq": 1, "kind": "action", "action": "record_point", "status": "error", "arguments": {},
                "result": {"data": {"evidence_id": "ev1"}}},
               {"seq": 2, "kind": "action", "action": "record_point", "status": "ok",
                "arguments": {"ras": [1.04, 2.0, 3.0], "label": "centre"},
                "result": {"data": {"evidence_id": "ev3", "ras": [1.04, 2.0, 3.0]}}}]
    board = EvidenceBoard(records)
    (item,) = board.refresh()
    assert item.summary == "record_point label=centre, ras=[1.0, 2.0, 3.0]" and item.record_seq == 2
    assert board.refresh() == []
    claims = board.link_answer("Lesion centre at R 1 mm [EV3]. Size 2 cm [ev3, ev7].\nNo other findings.")
    assert [c.text for c in claims] == ["Lesion centre at R 1 mm.", "Size 2 cm.", "No other findings."]
    assert [(c.refs, c.unknown_refs, c.supported) for c in claims] == [
        (["ev3"], [], True), (["ev3"], ["ev7"], False), ([], [], False)]
    assert board.get("ev3") is item and board.get("ev4") is None
    assert split_claims("") == []


def test_settings_come_from_env_then_store_and_never_show_the_key():
    store = DictSettingsStore({"MedCopilot/model": "stored-model", "MedCopilot/api_key": "sk-stored",
                               "MedCopilot/timeout_s": "not a number"})
    settings = load_settings(store, environ={"MEDOPENCLAW_MODEL": "env-model"})
    assert (settings.model, settings.api_key, settings.key_source, settings.timeout_s) == (
        "env-model", "sk-stored", "settings", 120.0)
    env = load_settings(store, environ={"MEDOPENCLAW_API_KEY": "sk-env"})
    assert env.api_key == "sk-env" and env.key_source == "environment"
    assert "sk-" not in repr(env) and "sk-" not in str(env.describe())
    config = env.provider_config()
    assert config.api_key == "sk-env" and config.model == "stored-model" and "sk-env" not in repr(config)

    save_settings(env, store, remember_key=True)  # a key from the environment is never written to disk
    assert store.value("MedCopilot/api_key") == "sk-stored"
    save_settings(settings, store, remember_key=False)
    assert store.value("MedCopilot/api_key") is None and store.value("MedCopilot/model") == "env-model"
    typed = CopilotSettings(base_url="http://127.0.0.1:9/v1", model="m", api_key="sk-typed", key_source="entered")
    save_settings(typed, store, remember_key=True)
    assert store.value("MedCopilot/api_key") == "sk-typed"


def test_settings_validation_messages():
    assert CopilotSettings(model="m").validate() == []
    problems = CopilotSettings(base_url="file:///etc/passwd", model=" ", provider="x", timeout_s=0).validate()
    assert len(problems) == 4 and "http(s)" in problems[0]


def test_a_prepared_model_is_in_its_child_before_the_first_call(tmp_path):
    worker, seen, mark = ModelWorker(), [], tmp_path / "marks"
    model = MarkedModel(mark)
    try:
        worker.prepare(model)
        worker.prepare(model)  # held already: not sent again
        deadline = time.monotonic() + 30
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert mark.exists() and worker.poll() is False and not worker.busy  # handed over, nothing answered
        worker.submit(ModelCall(model, ["hi"], []), seen.append, seen.append)
        assert worker.wait(30) and seen[-1][1] == 1
        assert mark.read_text() == "unpickled\n"  # the call used the prepared copy
        worker.submit(ModelCall(CountingModel(delay_s=30), ["hi"], []), seen.append, seen.append)
        worker.prepare(MarkedModel(mark))  # a call runs: nothing is handed over meanwhile
        worker.cancel()
        assert mark.read_text() == "unpickled\n"
        worker.prepare(lambda: None)  # does not pickle: left for the call to report
        worker.submit(ModelCall(lambda: None, ["hi"], []), seen.append, seen.append)
        assert worker.poll() and "could not be handed to its process" in str(seen[-1])
    finally:
        worker.close()


def test_worker_runs_calls_in_a_child_process_and_delivers_on_the_polling_thread():
    import os

    worker, seen = ModelWorker(), []
    model = CountingModel()
    try:
        for _ in range(2):
            worker.submit(ModelCall(model, ["hi"], []), seen.append, seen.append)
            assert worker.wait(30)
        (pid, first, _), (same_pid, second, _) = seen
        assert pid != os.getpid() and same_pid == pid and (first, second) == (1, 2)  # one child, its state kept
        assert model.calls == 0  # the parent's copy never ran
        worker.submit(ModelCall(model, ["fail"], []), seen.append, seen.append)
        assert worker.wait(30) and isinstance(seen[-1], ZeroDivisionError) and not worker.busy
    finally:
        worker.close()


def test_worker_drops_cancelled_calls_and_survives_a_dead_or_unpicklable_model():
    worker, seen = ModelWorker(), []
    try:
        worker.submit(ModelCall(CountingModel(delay_s=30), ["hi"], []), seen.append, seen.append)
        with pytest.raises(WorkerBusy):
            worker.submit(ModelCall(CountingModel(), ["hi"], []), seen.append, seen.append)
        worker.cancel()  # ends the child at once, not after its 30 s
        assert worker.poll() is False and seen == [] and not worker.busy
        worker.submit(ModelCall(CountingModel(), ["die"], []), seen.append, seen.append)
        assert worker.wait(30) and "ended unexpectedly (exit code 3)" in str(seen[-1])
        worker.submit(ModelCall(lambda: None, ["hi"], []), seen.append, seen.append)  # a lambda does not pickle
        assert worker.poll() and "could not be handed to its process" in str(seen[-1])
        worker.submit(ModelCall(CountingModel(), ["hi"], []), seen.append, seen.append)
        assert worker.wait(30) and seen[-1][1] == 1  # a fresh child
    finally:
        worker.close()
