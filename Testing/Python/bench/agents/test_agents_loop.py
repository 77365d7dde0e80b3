"""The episode loop with a model-backed agent against scripted local model servers and a real registry +
trace: malformed arguments, unknown tools, 429s, timeouts, budget exhaustion, receipts, no key in traces."""

from __future__ import annotations

import json
import time

from agents_fakes import FakeModelServer, Scripted, anthropic_reply, openai_reply, toy_registry

from MedOpenClawLib.bench.agents.base import AgentContext
from MedOpenClawLib.bench.agents.model import ModelAgent
from MedOpenClawLib.bench.episode import EpisodeConfig, EpisodePrompt, run_episode
from MedOpenClawLib.bench.outcomes import EPISODE_TIMEOUT, timeout_fault
from MedOpenClawLib.core.audit import AuditTrace, read_trace, verify_trace
from MedOpenClawLib.providers import ProviderConfig, RetryPolicy, make_provider
from MedOpenClawLib.worker.environment import LocalEnvironment

KEY = "sk-loop-SECRET-42"


def episode(
    tmp_path, kind: str, script: list[Scripted], max_rounds: int = 20, timeout_s: float = 30.0,
    episode_timeout_s: float | None = None, **config
):
    trace_path = tmp_path / "trace.jsonl"
    registry = toy_registry(AuditTrace(trace_path, header={"case": "toy"}, save_images=True), max_rounds)
    env = LocalEnvironment(registry)
    with FakeModelServer(script) as server:
        provider = make_provider(
            ProviderConfig(
                kind=kind,
                model="m",
                base_url=server.url,
                api_key=KEY,
                timeout_s=timeout_s,
                retry=RetryPolicy(max_retries=1, backoff_s=0.01),
            )
        )
        agent = ModelAgent(provider)
        agent.reset(AgentContext(module="toy", case=None, tools=env.tools(), max_rounds=max_rounds))
        episode_config = EpisodeConfig(max_rounds=max_rounds, timeout_s=episode_timeout_s, **config)
        outcome = run_episode(agent, env, EpisodePrompt("system prompt", "task"), episode_config)
    return outcome, read_trace(trace_path), server.requests, registry, trace_path


def events(records, kind):
    return [record["payload"] for record in records if record["kind"] == kind]


def test_malformed_unknown_429_then_answer(tmp_path):
    script = [
        Scripted(openai_reply("first look", [("set_slice_offset", '{"offset": 12'), ("zoom_in", "{}")])),
        Scripted({"error": "slow down"}, 429, headers={"Retry-After": "0"}),
        Scripted(openai_reply(calls=[("set_slice_offset", '{"offset": 12}'), ("observe", '{"size": 32}')])),
        Scripted(openai_reply("Done.\nANSWER: B", usage=(300, 20))),
    ]
    outcome, records, requests, registry, trace_path = episode(tmp_path, "openai", script)
    assert outcome.status == "completed" and outcome.final_text.endswith("ANSWER: B")
    assert outcome.rounds == 2 and outcome.tool_calls == 4
    assert (
        outcome.rejected_calls == 2 and outcome.failed_calls == 0
    )  # bad JSON rejected, a tool that was not offered refused before it reaches the viewer
    assert outcome.usage.calls == 3 and outcome.usage.retries == 1 and outcome.usage.output_tokens == 40
    assert outcome.images_received == 1 and registry.context.offset == 12.0
    receipts = events(records, "tool_receipt")
    assert [(r["name"], r["dispatched"], r["executed"]) for r in receipts] == [
        ("set_slice_offset", False, False),
        ("zoom_in", False, False),
        ("set_slice_offset", True, True),
        ("observe", True, True),
    ]
    assert receipts[0]["error"]["code"] == "invalid_json" and receipts[0]["raw_arguments"] == '{"offset": 12'
    assert receipts[1]["error"]["code"] == "unknown_action"
    outputs = events(records, "model_output")
    assert [o["round"] for o in outputs] == [1, 2, None] and outputs[0]["raw"]["content"] == "first look"
    # the model was told what went wrong, in the tool message answering the call
    second_request = requests[1]["body"]["messages"]
    tool_messages = [m for m in second_request if m["role"] == "tool"]
    assert "invalid_json" in tool_messages[0]["content"] and "unknown_action" in tool_messages[1]["content"]
    actions = [r for r in records if r["kind"] == "action"]
    assert [a["action"] for a in actions] == ["set_slice_offset", "observe"]
    assert actions[0]["extra"] == {"round": 2, "call_id": "call_0"}
    assert verify_trace(trace_path).ok
    assert KEY not in trace_path.read_text()
    assert events(records, "episode_end")[0]["final_text"].endswith("ANSWER: B")


def test_budget_exhaustion_forces_an_answer_without_tools(tmp_path):
    """A call on the answer turn is refused once with a request to answer (a protocol deviation); the next reply's
    text is the answer."""
    call = [("observe", "{}")]
    script = [
        Scripted(openai_reply(calls=call)),
        Scripted(openai_reply(calls=call)),
        Scripted(openai_reply("one more look", calls=call)),
        Scripted(openai_reply("out of budget\nANSWER: A")),
    ]
    outcome, records, requests, _, _ = episode(tmp_path, "openai", script, max_rounds=2)
    assert outcome.budget_exhausted and outcome.rounds == 2 and outcome.final_text.endswith("ANSWER: A")
    assert outcome.rejected_calls == 1 and outcome.stop_reason == "budget"  # the late call was not executed
    assert outcome.deviations == {"tool_call_on_answer_turn": 1}
    third, last = requests[2]["body"], requests[-1]["body"]
    assert third["tool_choice"] == "none" and "Tool budget exhausted" in json.dumps(third["messages"][-1])
    assert [m["role"] for m in last["messages"][-3:]] == ["assistant", "tool", "user"]
    assert "answer_required" in last["messages"][-2]["content"] and last["tool_choice"] == "none"
    assert len([r for r in records if r["kind"] == "action"]) == 2


def test_a_tool_call_budget_bounds_the_episode_beside_the_rounds(tmp_path):
    """--max-tool-calls 3: two calls run in round 1, one of the next two in round 2 (the other is refused), then
    the answer turn says which budget was spent."""
    calls = [("observe", "{}"), ("observe", "{}")]
    script = [Scripted(openai_reply(calls=calls)), Scripted(openai_reply(calls=calls)),
              Scripted(openai_reply("ANSWER: A"))]
    outcome, records, requests, _, _ = episode(tmp_path, "openai", script, max_rounds=20, max_tool_calls=3)
    assert (outcome.tool_calls, outcome.rejected_calls, outcome.rounds) == (3, 1, 2)
    assert outcome.budget_exhausted and outcome.stop_reason == "budget"
    assert len([r for r in records if r["kind"] == "action"]) == 3
    refused = [r for r in events(records, "tool_receipt") if not r["dispatched"]]
    assert [r["error"]["code"] for r in refused] == ["budget_exhausted"]
    last = requests[-1]["body"]
    assert last["tool_choice"] == "none" and "all 3 tool calls are used" in json.dumps(last["messages"][-1])


def test_one_call_per_round_for_pathology(tmp_path):
    script = [
        Scripted(anthropic_reply(calls=[("observe", {}), ("set_slice_offset", {"offset": 3})])),
        Scripted(anthropic_reply("ANSWER: N")),
    ]
    seen = []

    def observation(env, rounds_used):
        seen.append(True)
        result = env.call("observe", {"size": 8}, actor="system")
        from MedOpenClawLib.bench.episode import result_images

        return "Current viewer state.", result_images(result, "observation")

    outcome, records, requests, registry, _ = episode(
        tmp_path, "anthropic", script, one_call_per_round=True, round_observation=observation
    )
    assert outcome.tool_calls == 2 and outcome.rejected_calls == 1 and registry.context.offset == 0.0
    assert events(records, "tool_receipt")[1]["error"]["code"] == "one_call_per_round"
    assert seen == [True] and outcome.images_received == 2
    second = requests[1]["body"]["messages"]
    assert (
        second[-1]["role"] == "user" and second[-1]["content"][-2]["type"] == "text"
    )  # tool results + view merged
    assert second[-1]["content"][-1]["type"] == "image"


def test_provider_timeout_ends_the_episode_in_error_not_invalid(tmp_path):
    """A provider failure is an *error* (re-run later), never an INVALID episode excluded from the score."""
    script = [Scripted(openai_reply("late"), delay_s=0.6)] * 2
    outcome, records, _, _, trace_path = episode(tmp_path, "openai", script, timeout_s=0.2)
    assert outcome.status == "error" and "no response within 0.2 s" in outcome.error["message"]
    assert outcome.error["retryable"] and not outcome.error["fatal"]
    assert events(records, "episode_end")[0]["status"] == "error" and verify_trace(trace_path).ok


def test_a_hidden_tool_is_refused_even_though_the_viewer_has_it(tmp_path):
    """Pathology episodes offer Table 10's tools only (close, sleep, load_case stay hidden): hidden = refused."""
    registry = toy_registry(AuditTrace(tmp_path / "trace.jsonl"), 5)
    env = LocalEnvironment(registry)
    script = [Scripted(openai_reply(calls=[("set_slice_offset", '{"offset": 7}')])),
              Scripted(openai_reply("ANSWER: A"))]
    with FakeModelServer(script) as server:
        agent = ModelAgent(make_provider(ProviderConfig(kind="openai", model="m", base_url=server.url, api_key=KEY)))
        offered = [tool for tool in env.tools() if tool["name"] == "observe"]
        agent.reset(AgentContext(module="toy", case=None, tools=offered, max_rounds=5))
        outcome = run_episode(agent, env, EpisodePrompt("s", "t"), EpisodeConfig(max_rounds=5))
    assert registry.context.offset == 0.0 and outcome.rejected_calls == 1
    (receipt,) = events(read_trace(tmp_path / "trace.jsonl"), "tool_receipt")
    assert not receipt["dispatched"] and receipt["error"]["code"] == "unknown_action"
    assert "not one of the tools offered" in receipt["error"]["message"]


class SlowViewer(LocalEnvironment):
    """A viewer whose every call takes ``seconds`` (a hung render, a slow disk)."""

    def __init__(self, registry, seconds: float):
        super().__init__(registry)
        self.seconds = seconds

    def call(self, *arguments, **options):
        time.sleep(self.seconds)
        return super().call(*arguments, **options)


def test_an_episode_past_its_timeout_ends_as_the_models_outcome_unless_the_viewer_took_the_time(tmp_path):
    """--episode-timeout: a slow model ends the episode as episode_timeout (model-side: scored, kept in n; no
    INVALID reason); a viewer that took half the limit makes the same stop an environment fault (INVALID). The
    limit is a second: on a loaded machine the episode's own start (trace writes) must stay well inside it."""
    slow_model = [Scripted(openai_reply(calls=[("observe", "{}")]), delay_s=1.2), Scripted(openai_reply("late"))]
    outcome, records, requests, _, _ = episode(tmp_path, "openai", slow_model, episode_timeout_s=1.0)
    assert (outcome.status, outcome.stop_reason, outcome.final_text, outcome.tool_calls) == (
        "completed", EPISODE_TIMEOUT, None, 0)
    assert len(requests) == 1 and events(records, EPISODE_TIMEOUT)[0]["limit_s"] == 1.0
    assert timeout_fault(outcome.to_json(), 1.0) is None

    registry = toy_registry(AuditTrace(tmp_path / "slow.jsonl"), 20)
    env = SlowViewer(registry, 1.2)
    with FakeModelServer([Scripted(openai_reply(calls=[("observe", "{}")])), Scripted(openai_reply("x"))]) as server:
        agent = ModelAgent(make_provider(ProviderConfig(kind="openai", model="m", base_url=server.url, api_key=KEY)))
        agent.reset(AgentContext(module="toy", case=None, tools=env.tools(), max_rounds=20))
        slow_env = run_episode(agent, env, EpisodePrompt("s", "task"), EpisodeConfig(timeout_s=1.0))
    assert slow_env.stop_reason == EPISODE_TIMEOUT and slow_env.tool_seconds >= 1.2
    assert "environment fault" in timeout_fault(slow_env.to_json(), 1.0)
