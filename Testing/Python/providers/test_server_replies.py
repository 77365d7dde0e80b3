"""Every reply real servers send, built from the vendors' own SDK types (``openai``, ``anthropic``), and every
request the harness sends back validated against the same SDKs' request types.

Replies: Anthropic ``content: []`` with ``end_turn`` (documented), ``pause_turn`` holding only a server tool
block, server blocks the neutral conversation has no field for, ``refusal`` and ``model_context_window_exceeded``
stops, ``output_tokens_details.thinking_tokens``; OpenAI ``refusal`` text, ``content_filter``, choices out of
order, ``prompt_tokens_details.cache_write_tokens``; LiteLLM's ``thinking_blocks`` and top-level
``cache_creation_input_tokens``; OpenRouter's ``reasoning_details``.
"""

from __future__ import annotations

import anthropic.types as anthropic_types
import openai.types.chat as openai_chat
import pytest
from agents_fakes import FakeModelServer, Scripted, toy_registry
from anthropic.types import message_create_params
from openai.types.chat import completion_create_params
from sdk_types import adapter

from MedOpenClawLib.bench.agents.base import AgentContext
from MedOpenClawLib.bench.agents.model import ModelAgent
from MedOpenClawLib.bench.episode import EpisodeConfig, EpisodePrompt, run_episode
from MedOpenClawLib.core.audit import AuditTrace, read_trace
from MedOpenClawLib.providers import ProviderConfig, RetryPolicy, make_provider
from MedOpenClawLib.providers.pricing import Price
from MedOpenClawLib.worker.environment import LocalEnvironment

REQUEST_TYPES = {"openai": completion_create_params.CompletionCreateParamsNonStreaming,
                 "anthropic": message_create_params.MessageCreateParamsNonStreaming}
MODELS = {"openai": "gpt-4o", "anthropic": "claude-sonnet-4"}
ANSWER = "Answer: done"


def sdk_request(kind: str, body: dict) -> None:
    """The body as the vendor's SDK would build it: its request TypedDict validates it (pydantic)."""
    adapter(REQUEST_TYPES[kind]).validate_python(body)


def anthropic_message(content: list[dict], stop: str = "end_turn", **usage) -> dict:
    """A Messages reply through the SDK's own model (fails here if the shape is not one the API sends)."""
    usage = {"input_tokens": 100, "output_tokens": 10, **usage}
    message = anthropic_types.Message.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": MODELS["anthropic"], "content": content,
        "stop_reason": stop, "stop_sequence": None, "usage": usage})
    return message.model_dump(mode="json", exclude_none=True)


def openai_completion(message: dict, finish: str = "stop", choices: list[dict] | None = None, **usage) -> dict:
    """A chat completion through the SDK's own model; ``choices`` add further choices before this one."""
    usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110, **usage}
    completion = openai_chat.ChatCompletion.model_validate({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": MODELS["openai"],
        "choices": [*(choices or []), {"index": 0, "message": {"role": "assistant", **message},
                                       "finish_reason": finish}],
        "usage": usage})
    return completion.model_dump(mode="json", exclude_none=True)


def call(name: str = "observe", index: int = 0) -> dict:
    return {"id": f"call_{index}", "type": "function", "function": {"name": name, "arguments": "{}"}}


def tool_use(index: int = 0) -> dict:
    return {"type": "tool_use", "id": f"toolu_{index}", "name": "observe", "input": {}}


def episode(tmp_path, kind: str, replies: list[dict], **options):
    """One toy episode against scripted SDK-typed replies; every request validated against the SDK."""
    registry = toy_registry(AuditTrace(tmp_path / f"trace{len(list(tmp_path.glob('trace*')))}.jsonl"), 4)
    env = LocalEnvironment(registry)
    with FakeModelServer([Scripted(reply) for reply in replies]) as server:
        config = ProviderConfig(kind=kind, model=MODELS[kind], base_url=server.url, api_key="k",
                                retry=RetryPolicy(max_retries=0), **options)
        agent = ModelAgent(make_provider(config))
        agent.reset(AgentContext(module="toy", case=None, tools=env.tools(), max_rounds=4))
        outcome = run_episode(agent, env, EpisodePrompt("system", "the task", []), EpisodeConfig(max_rounds=4))
    for request in server.requests:
        sdk_request(kind, request["body"])
    return outcome, [request["body"] for request in server.requests]


def test_an_empty_anthropic_turn_never_reaches_the_history(tmp_path):
    """``content: []`` with ``end_turn`` (the docs: the model had nothing to add) was sent back as an empty
    assistant turn, which the API refuses (400): the episode was rejected and never re-run."""
    replies = [anthropic_message([tool_use()], "tool_use"), anthropic_message([]),
               anthropic_message([{"type": "text", "text": ANSWER}])]
    outcome, bodies = episode(tmp_path, "anthropic", replies)
    assert outcome.status != "error" and outcome.final_text == ANSWER and outcome.deviations == {"empty_reply": 1}
    assert all(turn["content"] for body in bodies for turn in body["messages"])
    assert [turn["role"] for turn in bodies[2]["messages"]] == ["user", "assistant", "user"]  # merged user turns


def test_a_paused_server_tool_turn_is_sent_back_verbatim_and_continued(tmp_path):
    """``pause_turn`` holding only ``server_tool_use``: the turn goes back as it is (the documented way to let the
    model continue), no nudge; blocks the neutral conversation has no field for keep their place."""
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "glioma"}}
    found = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}
    replies = [anthropic_message([search], "pause_turn"),
               anthropic_message([found, {"type": "text", "text": "looking"}, tool_use()], "tool_use"),
               anthropic_message([{"type": "text", "text": ANSWER}])]
    outcome, bodies = episode(tmp_path, "anthropic", replies)
    assert outcome.final_text == ANSWER and not outcome.deviations
    assert bodies[1]["messages"][-1] == {"role": "assistant", "content": [search]}
    echoed = bodies[2]["messages"][1]["content"]
    assert [block["type"] for block in echoed] == ["server_tool_use", "web_search_tool_result", "text", "tool_use"]


@pytest.mark.parametrize("kind, reply, reason", [
    ("anthropic", anthropic_message([], "refusal"), "refusal"),
    ("openai", openai_completion({"content": None, "refusal": "I can't help with that."}),
     "I can't help with that."),
    ("openai", openai_completion({"content": "partial"}, "content_filter"), "content_filter"),
])
def test_a_refusal_is_an_outcome_of_its_own(tmp_path, kind, reply, reason):
    """Not an empty reply to nudge: the episode ends ``refused`` without an answer (scored 0, kept in n)."""
    outcome, bodies = episode(tmp_path, kind, [reply])
    assert outcome.status != "error" and outcome.stop_reason == "refused" and outcome.final_text is None
    assert len(bodies) == 1 and not outcome.deviations
    (output,) = [record["payload"] for record in read_trace(tmp_path / "trace0.jsonl")
                 if record["kind"] == "model_output"]
    assert output["refusal"] == reason


def test_a_context_window_stop_is_truncation(tmp_path):
    """``model_context_window_exceeded`` cut the answer: it is continued, not scored as complete."""
    replies = [anthropic_message([{"type": "text", "text": "Answer: do"}], "model_context_window_exceeded"),
               anthropic_message([{"type": "text", "text": "ne"}])]
    outcome, bodies = episode(tmp_path, "anthropic", replies)
    assert outcome.final_text == "Answer: done" and len(bodies) == 2


def test_litellm_thinking_blocks_and_openrouter_reasoning_details_are_echoed(tmp_path):
    """Claude behind LiteLLM with extended thinking refuses request 2 without the message's ``thinking_blocks``;
    OpenRouter wants ``reasoning_details`` back. Both ride on the SDK's message as extra fields."""
    thinking = [{"type": "thinking", "thinking": "plan", "signature": "sig=="}]
    details = [{"type": "reasoning.encrypted", "data": "opaque", "id": "r1", "format": "anthropic-claude-v1"}]
    replies = [openai_completion({"content": None, "tool_calls": [call()], "thinking_blocks": thinking,
                                  "reasoning_details": details}, "tool_calls"),
               openai_completion({"content": ANSWER})]
    outcome, bodies = episode(tmp_path, "openai", replies)
    assistant = bodies[1]["messages"][2]
    assert assistant["thinking_blocks"] == thinking and assistant["reasoning_details"] == details
    assert outcome.final_text == ANSWER


def test_the_choice_whose_index_is_0_is_the_reply(tmp_path):
    other = {"index": 1, "message": {"role": "assistant", "content": "Answer: wrong"}, "finish_reason": "stop"}
    outcome, _ = episode(tmp_path, "openai", [openai_completion({"content": ANSWER}, choices=[other])])
    assert outcome.final_text == ANSWER


@pytest.mark.parametrize("kind, reply, expected", [
    ("anthropic", anthropic_message([{"type": "text", "text": ANSWER}], cache_read_input_tokens=1000,
                                    cache_creation_input_tokens=500, output_tokens_details={"thinking_tokens": 840},
                                    output_tokens=900),
     {"input_tokens": 1600, "cache_read_tokens": 1000, "cache_write_tokens": 500, "reasoning_tokens": 840}),
    ("openai", openai_completion({"content": ANSWER}, prompt_tokens=1600,
                                 prompt_tokens_details={"cached_tokens": 1000, "cache_write_tokens": 500}),
     {"input_tokens": 1600, "cache_read_tokens": 1000, "cache_write_tokens": 500}),
    # LiteLLM in front of Anthropic: the cache write arrives as a top-level field beside the OpenAI ones
    ("openai", {**openai_completion({"content": ANSWER}, prompt_tokens=1600,
                                    prompt_tokens_details={"cached_tokens": 1000})}
     | {"usage": {"prompt_tokens": 1600, "completion_tokens": 10, "total_tokens": 1610,
                  "prompt_tokens_details": {"cached_tokens": 1000}, "cache_creation_input_tokens": 500,
                  "cache_read_input_tokens": 1000}},
     {"input_tokens": 1600, "cache_read_tokens": 1000, "cache_write_tokens": 500}),
])
def test_usage_counts_every_field_that_carries_it_and_prices_cache_writes(tmp_path, kind, reply, expected):
    price = Price(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)
    outcome, _ = episode(tmp_path, kind, [reply], price=price)
    usage = outcome.usage
    assert {key: getattr(usage, key) for key in expected} == expected
    uncached = usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens
    assert usage.cost_usd == pytest.approx((uncached * 3.0 + 1000 * 0.3 + 500 * 3.75
                                            + usage.output_tokens * 15.0) / 1e6)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_seed_and_temperature_go_out_only_when_given_and_where_the_api_takes_them(tmp_path, kind):
    text = (anthropic_message([{"type": "text", "text": ANSWER}]) if kind == "anthropic"
            else openai_completion({"content": ANSWER}))
    _, (plain,) = episode(tmp_path, kind, [text])
    assert "seed" not in plain and "temperature" not in plain
    _, (given,) = episode(tmp_path, kind, [text], seed=7, temperature=0.2)
    assert given["temperature"] == 0.2
    assert given.get("seed") == (7 if kind == "openai" else None)  # the Messages API has no seed


def test_bench_run_sends_no_seed_unless_given():
    """``--seed`` defaults to unset: LiteLLM's default configuration answers 400 UnsupportedParamsError to it."""
    import argparse

    from MedOpenClawLib.bench.run_command import add_bench_subcommand
    from MedOpenClawLib.bench.run_launch import provider_config

    parser = argparse.ArgumentParser()
    add_bench_subcommand(parser.add_subparsers())
    arguments = ["run", "--module", "bracs", "--agent", "model", "--model", "m", "--base-url",
                 "http://127.0.0.1:9", "--out", "x"]
    assert provider_config(parser.parse_args(arguments)).seed is None
    assert provider_config(parser.parse_args([*arguments, "--seed", "3"])).seed == 3
