"""MedCopilot on a real slicer-core scene with a fake OpenAI-compatible model server on 127.0.0.1:
approve/reject, auto mode, evidence linking, audit actors, non-blocking model calls, key redaction."""

from __future__ import annotations

import json
import time

import pytest
from agents_fakes import FakeModelServer, Scripted, openai_reply

from MedCopilotLib.approvals import ApprovalError, Decision
from MedCopilotLib.session import AWAITING_APPROVAL, IDLE, THINKING, CopilotBusy, CopilotSession
from MedOpenClawLib.gui.view_restore import restore_view
from MedOpenClawLib.providers import OpenAIChatProvider, ProviderConfig, RetryPolicy

API_KEY = "sk-test-never-logged-4242"


@pytest.fixture
def registry(slicer_session):
    return slicer_session


OPEN: list[CopilotSession] = []


@pytest.fixture(autouse=True)
def close_sessions():
    """Each test's sessions end their model processes."""
    yield
    while OPEN:
        OPEN.pop().close()


def make_session(registry, server, **options) -> CopilotSession:
    config = ProviderConfig(kind="openai", model="fake-vlm", base_url=server.url, api_key=API_KEY,
                            retry=RetryPolicy(max_retries=0), timeout_s=10)
    session = CopilotSession(
        registry, OpenAIChatProvider(config),
        restore_view=lambda seq: restore_view(registry, registry.trace.records[seq]),
        secrets=[API_KEY], **options,
    )
    OPEN.append(session)
    return session


def settle(session, until=lambda s: s.state != THINKING, timeout_s=60.0) -> None:
    """What the panel's QTimer does: poll the worker from this (the GUI) thread (deadline: as gui_helpers.pump's)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        session.poll()
        if until(session):
            return
        time.sleep(0.01)
    raise AssertionError(f"copilot still {session.state}")


def test_approve_flow_runs_actions_and_links_the_answer_to_evidence(registry):
    script = [
        Scripted(openai_reply("The lesion should be near S=4 mm; I will go there and bookmark it.", [
            ("set_slice_offset", '{"view": "axial", "offset": 4.0, "size": 64}'),
            ("bookmark_view", '{"view": "axial", "label": "lesion"}'),
        ])),
        Scripted(openai_reply("A bright lesion is visible on axial slice S=4 mm [ev1]. It is probably benign.")),
    ]
    with FakeModelServer(script) as server:
        session = make_session(registry, server)
        session.send("Where is the lesion?")
        settle(session)
        assert session.state == AWAITING_APPROVAL
        first, second = session.queue.current()
        assert first.call.name == "set_slice_offset" and first.rationale.startswith("The lesion")
        assert registry.context.state()["views"]["axial"]["offset_mm"] != 4.0  # nothing runs before approval
        session.approve(second.id)  # approving out of order waits for the first card
        assert not second.handled
        session.approve(first.id)
        settle(session)
        assert session.state == IDLE
        with pytest.raises(ApprovalError):
            session.approve(first.id)

        second_request = server.requests[1]["body"]["messages"]
        tool_messages = [m for m in second_request if m["role"] == "tool"]
        assert [json.loads(m["content"])["ok"] for m in tool_messages] == [True, True]
        assert any(isinstance(m["content"], list) for m in second_request if m["role"] == "user")  # renders
        assert server.requests[0]["headers"]["Authorization"] == f"Bearer {API_KEY}"

    assert registry.context.state()["views"]["axial"]["offset_mm"] == pytest.approx(4.0)
    answer = session.conversation.entries[-1]
    assert answer.kind == "answer"
    claims = answer.data["claims"]
    assert claims[0]["refs"] == ["ev1"] and claims[0]["supported"]
    assert claims[1]["refs"] == [] and not claims[1]["supported"]
    assert [item.ref for item in session.evidence.items] == ["ev1"]

    actions = [r for r in registry.trace.records if r["kind"] == "action" and r["actor"] == "agent"]
    assert [(r["action"], r["extra"]["approval"]) for r in actions] == [
        ("set_slice_offset", "approved"), ("bookmark_view", "approved")]
    decisions = [r for r in registry.trace.records if r["kind"] == "proposal_decision"]
    assert [r["actor"] for r in decisions] == ["human", "human"]
    assert [r["kind"] for r in registry.trace.records].count("model_output") == 2
    assert API_KEY not in registry.trace.path.read_text()

    registry.call("set_slice_offset", {"view": "axial", "offset": -6.0, "size": 64}, actor="human")
    assert session.jump_to_evidence("ev1").ok is not False
    assert registry.context.state()["views"]["axial"]["offset_mm"] == pytest.approx(4.0)
    assert session.jump_to_evidence("ev9").error["code"] == "not_found"


def test_reject_then_auto_mode_and_invalid_proposals(registry):
    script = [
        Scripted(openai_reply("Scrolling first.", [("set_slice_offset", '{"view": "axial", "offset": 6}')])),
        Scripted(openai_reply("", [
            ("set_slice_offset", '{"view": "axial", "offset": 2, "size": 64}'),
            ("run_python", '{"code": "import os"}'),
            ("observe", '{"view": "axial", '),
        ])),
        Scripted(openai_reply("Done: nothing abnormal found.")),
    ]
    with FakeModelServer(script) as server:
        session = make_session(registry, server)
        session.send("Look around")
        settle(session)
        card = session.queue.current()[0]
        with pytest.raises(CopilotBusy):
            session.send("another question")
        session.reject(card.id, "not that slice")
        settle(session, until=lambda s: s.state == AWAITING_APPROVAL or len(server.requests) == 2 and
               s.state != THINKING)
        rejected = json.loads([m for m in server.requests[1]["body"]["messages"] if m["role"] == "tool"][0]["content"])
        assert rejected["error"] == {"code": "rejected", "message": "not that slice"}

        cards = session.queue.current()
        assert [c.decision for c in cards] == [Decision.PENDING, Decision.REJECTED, Decision.REJECTED]
        assert "no action named 'run_python'" in cards[1].reason and "rejected" in cards[2].reason
        session.set_auto_mode(True)  # approves the waiting card and runs it
        settle(session)
        assert session.state == IDLE and cards[0].decision is Decision.AUTO_APPROVED and cards[0].ok

    assert registry.context.state()["views"]["axial"]["offset_mm"] == pytest.approx(2.0)
    agent_actions = [r["action"] for r in registry.trace.records if r["kind"] == "action" and r["actor"] == "agent"]
    assert agent_actions == ["set_slice_offset"]  # the unknown and malformed calls never reached the registry
    auto = [r for r in registry.trace.records if r["kind"] == "copilot_auto_mode"]
    assert auto[0]["actor"] == "human" and auto[0]["payload"] == {"enabled": True}


def test_model_calls_do_not_block_and_failures_are_redacted(registry):
    script = [Scripted(openai_reply("late"), delay_s=0.6),
              Scripted({"error": {"message": f"invalid api key {API_KEY}"}}, status=401)]
    with FakeModelServer(script) as server:
        session = make_session(registry, server)
        session.send("hello")  # returns at once: the call runs in the model process
        assert session.state == THINKING and session.poll() is False
        settle(session, until=lambda _: server.requests)  # the request is at the server, its answer 0.6 s away
        session.stop()  # the clinician gives up waiting: the late reply is dropped
        assert session.state == IDLE
        assert session.worker._process.poll() is None  # the dropped call's child ended; the next one is ready
        time.sleep(0.8)
        assert session.poll() is False
        session.send("again")
        settle(session)
    notice = session.conversation.entries[-1]
    assert notice.kind == "notice" and not notice.ok
    assert API_KEY not in notice.text and "401" in notice.text
    assert API_KEY not in registry.trace.path.read_text()
    assert session.state == IDLE
