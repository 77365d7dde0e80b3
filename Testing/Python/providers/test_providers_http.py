"""Providers against scripted local OpenAI-/Anthropic-compatible servers: wire format, tool-call parsing,
retries with backoff, timeouts, token/image counting, and that the API key never leaks into errors."""

from __future__ import annotations

import base64
import json
import time

import pytest
from agents_fakes import FakeModelServer, Scripted, anthropic_reply, openai_reply

from MedOpenClawLib.providers import (
    ImageInput,
    Message,
    ProviderConfig,
    ProviderError,
    RetryPolicy,
    ToolCall,
    make_provider,
)
from MedOpenClawLib.providers.http import exchange_json, retry_after_seconds
from MedOpenClawLib.providers.messages import MAX_TOKEN_COUNT, Usage, parse_tool_arguments
from MedOpenClawLib.providers.pricing import Price, load_price
from MedOpenClawLib.providers.transport import MAX_RESPONSE_BYTES, attempt

KEY = "sk-test-SECRET-0123456789"
PNG = ImageInput(base64.b64encode(b"\x89PNG fake").decode(), "observe:axial")
TOOLS = [{"name": "observe", "description": "Render.", "parameters": {"type": "object", "properties": {}}}]
FAST_RETRY = RetryPolicy(max_retries=2, backoff_s=0.01, max_backoff_s=0.05)


def provider(kind: str, url: str, **options):
    config = ProviderConfig(kind=kind, model="m-1", base_url=url, api_key=KEY, retry=FAST_RETRY, **options)
    return make_provider(config)


def conversation() -> list[Message]:
    call = ToolCall(id="call_0", name="observe", arguments={}, raw_arguments="{}")
    return [
        Message("system", "You are a radiology assistant."),
        Message("user", "Case brief.", images=[PNG]),
        Message("assistant", "", tool_calls=[call]),
        Message("tool", '{"ok": true}', images=[PNG], tool_call_id="call_0", tool_name="observe"),
    ]


def test_openai_wire_format_and_tool_call_parsing():
    with FakeModelServer([Scripted(openai_reply("looking", [("observe", '{"size": 64}')]))]) as server:
        reply = provider("openai", server.url, temperature=0.2, seed=7).complete(conversation(), TOOLS)
    request = server.requests[0]
    assert request["path"] == "/chat/completions"
    assert request["headers"]["Authorization"] == f"Bearer {KEY}"
    body = request["body"]
    assert body["temperature"] == 0.2 and body["seed"] == 7 and body["tool_choice"] == "auto"
    assert body["tools"][0]["function"]["name"] == "observe"
    roles = [message["role"] for message in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "user"]  # tool images follow as a user message
    assert body["messages"][1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert body["messages"][2]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert reply.text == "looking"
    assert reply.tool_calls[0].name == "observe" and reply.tool_calls[0].arguments == {"size": 64}
    assert (
        reply.usage.images_sent == 2 and reply.usage.input_tokens == 100 and reply.usage.output_tokens == 10
    )
    assert reply.usage.calls == 1 and reply.usage.retries == 0


def test_openai_malformed_arguments_are_reported_not_guessed():
    calls = [("observe", '{"size": 64'), ("observe", '"{\\"size\\": 32}"'), ("observe", "```json\n{}\n```")]
    with FakeModelServer([Scripted(openai_reply(calls=calls))]) as server:
        reply = provider("openai", server.url).complete(conversation(), TOOLS)
    broken, doubled, fenced = reply.tool_calls
    assert broken.arguments is None and "not valid JSON" in broken.parse_error
    assert broken.raw_arguments == '{"size": 64'
    assert doubled.arguments == {"size": 32} and "encoded twice" in doubled.repair
    assert fenced.arguments == {} and "code fence" in fenced.repair


def test_parse_tool_arguments_rejects_non_objects():
    assert parse_tool_arguments("[1, 2]")[1] == "arguments must be a JSON object, got list"
    assert parse_tool_arguments("") == ({}, None, "empty arguments read as {}")


def test_429_then_success_is_retried_with_backoff():
    script = [
        Scripted({"error": "rate limited"}, 429, headers={"Retry-After": "0"}),
        Scripted({"error": "overloaded"}, 503),
        Scripted(openai_reply("ANSWER: A")),
    ]
    with FakeModelServer(script) as server:
        reply = provider("openai", server.url).complete(conversation(), TOOLS)
    assert reply.text == "ANSWER: A" and reply.usage.retries == 2 and len(server.requests) == 3


def test_timeout_is_retried_then_fails_cleanly():
    script = [Scripted(openai_reply("late"), delay_s=1.0)] * 3
    with FakeModelServer(script) as server:
        with pytest.raises(ProviderError, match="no response within 0.2 s") as caught:
            provider("openai", server.url, timeout_s=0.2).complete(conversation(), TOOLS)
    assert caught.value.retryable and len(server.requests) == 3  # first try + 2 retries


def test_client_error_is_not_retried_and_key_is_scrubbed():
    script = [Scripted({"error": {"message": f"invalid key {KEY}"}}, 401)]
    with FakeModelServer(script) as server:
        with pytest.raises(ProviderError) as caught:
            provider("openai", server.url).complete(conversation(), TOOLS)
    assert caught.value.status == 401 and len(server.requests) == 1
    assert KEY not in str(caught.value) and "***" in str(caught.value)


def test_openai_tools_disallowed_after_budget():
    with FakeModelServer([Scripted(openai_reply("ANSWER: B"))]) as server:
        provider("openai", server.url).complete(conversation(), TOOLS, allow_tools=False)
    assert server.requests[0]["body"]["tool_choice"] == "none"


def test_anthropic_wire_format_cache_and_tool_use():
    script = [Scripted(anthropic_reply("scrolling", [("observe", {"size": 64})], cache_read=80))]
    with FakeModelServer(script) as server:
        reply = provider("anthropic", server.url, seed=3).complete(conversation(), TOOLS)
    request = server.requests[0]
    assert request["path"] == "/v1/messages"
    assert request["headers"]["x-api-key"] == KEY and request["headers"]["anthropic-version"] == "2023-06-01"
    body = request["body"]
    assert body["system"] == [
        {"type": "text", "text": "You are a radiology assistant.", "cache_control": {"type": "ephemeral"}}
    ]
    assert "seed" not in body  # the Messages API has no seed
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    tool_result = body["messages"][2]["content"][0]
    assert tool_result["type"] == "tool_result" and tool_result["tool_use_id"] == "call_0"
    assert [block["type"] for block in tool_result["content"]] == ["text", "image"]
    assert body["tools"][0]["input_schema"] == TOOLS[0]["parameters"]
    assert reply.tool_calls[0].arguments == {"size": 64} and reply.tool_calls[0].id == "toolu_0"
    assert (
        reply.usage.cache_read_tokens == 80
        and reply.usage.input_tokens == 200  # 120 uncached + 80 read from the cache
        and reply.usage.images_sent == 2
    )


def test_anthropic_overload_529_is_retried():
    script = [Scripted({"type": "error"}, 529), Scripted(anthropic_reply("ANSWER: C"))]
    with FakeModelServer(script) as server:
        reply = provider("anthropic", server.url).complete(conversation(), TOOLS)
    assert reply.text == "ANSWER: C" and reply.usage.retries == 1


def test_config_from_environment_never_exposes_the_key():
    env = {"MEDOPENCLAW_MODEL": "claude-x", "MEDOPENCLAW_API_KEY": KEY}
    config = ProviderConfig.resolve(environ=env)
    assert config.kind == "anthropic" and config.base_url == "https://api.anthropic.com"
    assert KEY not in repr(config) and KEY not in str(config.public())
    flagged = ProviderConfig.resolve(model="qwen", base_url="http://127.0.0.1:8000/v1/", environ=env)
    assert (
        flagged.kind == "openai" and flagged.base_url == "http://127.0.0.1:8000/v1" and flagged.api_key == KEY
    )
    with pytest.raises(ValueError, match="model name is required"):
        ProviderConfig.resolve(environ={})


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        ("openai", {"choices": [{"message": "not an object"}]}),
        ("openai", {"choices": [{"message": {"content": "x", "tool_calls": ["not an object"]}}]}),
        ("anthropic", {"content": ["not a block"]}),
    ],
)
def test_malformed_response_body_is_a_provider_error(kind, body):
    """A near-miss server dialect ends the episode INVALID (ProviderError) instead of crashing the run."""
    with FakeModelServer([Scripted(body)]) as server:
        with pytest.raises(ProviderError, match="unexpected response shape"):
            provider(kind, server.url).complete(conversation(), TOOLS)


def test_a_key_no_header_can_carry_is_a_provider_error_without_the_key():
    """A key with a trailing newline cannot be sent in a header: one fatal line before any request, never the key."""
    config = ProviderConfig(kind="openai", model="m-1", base_url="http://127.0.0.1:9", api_key=KEY + "\n",
                            retry=FAST_RETRY)
    with pytest.raises(ProviderError, match="cannot go in a header") as caught:
        make_provider(config).complete(conversation(), TOOLS)
    assert KEY not in str(caught.value) and not caught.value.retryable and caught.value.fatal


def test_anthropic_provider_sends_no_empty_api_key_header():
    script = [Scripted(anthropic_reply("ANSWER: A"))] * 2
    with FakeModelServer(script) as server:
        make_provider(ProviderConfig(kind="anthropic", model="m-1", base_url=server.url, api_key="")).complete(
            conversation(), TOOLS)
        provider("anthropic", server.url).complete(conversation(), TOOLS)
    keyless, keyed = (request["headers"] for request in server.requests)
    assert "x-api-key" not in keyless and "Authorization" not in keyless and keyed["x-api-key"] == KEY


def test_retry_after_accepts_seconds_and_http_dates():
    assert retry_after_seconds("2") == 2.0 and retry_after_seconds(None) is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10.0
    assert retry_after_seconds("soon") is None


def test_retry_after_is_honoured_but_the_deadline_bounds_the_call():
    waits: list[float] = []
    policy = RetryPolicy(max_retries=9, backoff_s=0.01, deadline_s=5.0)
    script = [Scripted({"error": "slow down"}, 429, headers={"Retry-After": "2"})] * 4
    with FakeModelServer(script) as server:
        config = ProviderConfig(kind="openai", model="m-1", base_url=server.url, api_key=KEY, retry=policy)
        chosen = make_provider(config)
        clock = iter(float(t) for t in range(100))
        with pytest.raises(ProviderError, match="retry deadline") as caught:
            body = {"model": "m-1", "messages": []}
            exchange_json(lambda timeout: attempt(chosen.sdk, lambda: chosen._post(body, timeout), timeout), body,
                          5.0, policy, sleep=waits.append, clock=lambda: next(clock))
    assert waits == [2.0] and caught.value.retryable and not caught.value.fatal


@pytest.mark.parametrize(
    ("status", "body", "fatal", "text"),
    [
        (401, {"error": {"message": "Incorrect API key"}}, True, "API key was refused"),
        (403, {"error": {"message": "forbidden"}}, True, "API key was refused"),
        (404, {"error": {"message": "The model `nope` does not exist"}}, True, "unknown model"),
        (400, {"error": {"message": "nope is not a valid model ID"}}, True, "unknown model"),
        (400, {"error": {"message": "context length exceeded"}}, False, "too long.*context length exceeded"),
        (413, {"error": {"type": "request_too_large"}}, False, "too long"),
        (400, {"detail": "bad image"}, False, "bad image"),
    ],
)
def test_client_errors_are_classified_with_the_providers_message(status, body, fatal, text):
    """A refusal for length is retried once on a compact context, then raised as ``length`` (a model outcome)."""
    with FakeModelServer([Scripted(body, status)] * 2) as server:
        with pytest.raises(ProviderError, match=text) as caught:
            provider("openai", server.url).complete(conversation(), TOOLS)
    length = "too long" in text
    assert caught.value.fatal is fatal and not caught.value.retryable and caught.value.length is length
    assert len(server.requests) == (2 if length else 1)


def test_reasoning_model_options_extra_body_and_default_temperature():
    usage = {"prompt_tokens": 1000, "completion_tokens": 300, "prompt_tokens_details": {"cached_tokens": 400},
             "completion_tokens_details": {"reasoning_tokens": 200}}
    reply = openai_reply("ANSWER: A")
    reply["usage"] = usage
    price = Price(input=2.0, output=10.0, cached_input=0.5)
    with FakeModelServer([Scripted(reply)]) as server:
        answer = provider("openai", server.url, token_limit_field="max_completion_tokens", max_tokens=999,
                          extra_body={"reasoning_effort": "low", "top_k": 20}, price=price).complete(
            conversation(), TOOLS)
    body = server.requests[0]["body"]
    assert body["max_completion_tokens"] == 999 and "max_tokens" not in body and "temperature" not in body
    assert body["reasoning_effort"] == "low" and body["top_k"] == 20
    usage = answer.usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.reasoning_tokens) == (1000, 400, 200)
    assert answer.usage.cost_usd == pytest.approx((600 * 2.0 + 400 * 0.5 + 300 * 10.0) / 1e6)
    assert answer.usage.to_json()["cost_usd"] == round(answer.usage.cost_usd, 6)
    with pytest.raises(ValueError, match="max_tokens"):
        ProviderConfig(kind="anthropic", model="c", base_url="http://x", token_limit_field="max_completion_tokens")


def test_price_table_matches_model_prefixes_and_rejects_bad_entries(tmp_path):
    table = tmp_path / "prices.json"
    table.write_text('{"gpt-4o": {"input": 2.5, "output": 10}, "gpt-4o-mini": {"input": 0.15, "output": 0.6}}')
    assert load_price(table, "gpt-4o-mini-2024-07-18").input == 0.15
    assert load_price(table, "gpt-4o-2024-08-06").output == 10.0 and load_price(table, "llama") is None
    table.write_text('{"m": {"input": -1, "output": 1}}')
    with pytest.raises(ValueError, match=r"a number in 0\.\.1e\+06"):
        load_price(table, "m")
    table.write_text('{"m": {"input": 1e308, "output": 1}}')  # finite, yet times a large count it would be inf
    with pytest.raises(ValueError, match="m.*input"):
        load_price(table, "m")
    with pytest.raises(ValueError, match="cannot read"):
        load_price(tmp_path / "missing.json", "m")


def test_preflight_fails_fast_on_a_bad_key_and_an_unreachable_url_but_not_on_a_busy_server():
    with FakeModelServer([Scripted({"error": {"message": "bad key"}}, 401)]) as server:
        with pytest.raises(ProviderError, match="API key was refused") as caught:
            provider("anthropic", server.url).preflight()
    preflight = server.requests[0]["body"]
    assert caught.value.fatal and preflight["max_tokens"] == 256 and preflight["tools"][0]["name"] == "report_colour"
    with FakeModelServer([Scripted({"error": {"message": "missing key"}}, 401)]) as server:
        keyless = make_provider(ProviderConfig(kind="openai", model="m", base_url=server.url, retry=FAST_RETRY))
        with pytest.raises(ProviderError, match="no API key was sent: set MEDOPENCLAW_API_KEY"):
            keyless.preflight()
    started = time.monotonic()
    with pytest.raises(ProviderError, match="connection failed") as caught:
        provider("openai", "http://127.0.0.1:9").preflight()
    assert caught.value.fatal and time.monotonic() - started < 20
    busy = [Scripted({"error": "overloaded"}, 503, headers={"Retry-After": "60"})]
    with FakeModelServer(busy) as server:
        assert "busy" in provider("openai", server.url).preflight()


@pytest.mark.parametrize(
    ("kind", "usage"),
    [
        ("openai", {"prompt_tokens": 1.7e308, "completion_tokens": 10}),  # a finite float: int() of it priced is inf
        ("openai", {"prompt_tokens": -999999995, "completion_tokens": 10}),
        ("openai", {"prompt_tokens": 100, "completion_tokens": "lots"}),
        ("openai", {"prompt_tokens": 100, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": 2.5}}),
        ("openai", {"prompt_tokens": 100, "completion_tokens": 10, "prompt_tokens_details": [7]}),
        ("openai", "not an object"),
        ("anthropic", {"input_tokens": 100, "output_tokens": 10, "cache_read_input_tokens": 2 * MAX_TOKEN_COUNT}),
        ("anthropic", {"input_tokens": -1, "output_tokens": 10}),
    ],
)
def test_reported_usage_that_is_not_a_count_is_recorded_unknown_and_the_cost_stays_finite(kind, usage):
    """Counts are validated where the reply is parsed: the call's usage is marked unknown, the bad count is left
    out (never negative, never infinite), and the priced cost is a finite number strict JSON can write."""
    reply = openai_reply("done") if kind == "openai" else anthropic_reply("done")
    reply["usage"] = usage
    price = Price(input=2.5, output=10.0)
    with FakeModelServer([Scripted(reply)]) as server:
        result = provider(kind, server.url, price=price).complete(conversation(), TOOLS)
    assert result.text == "done" and result.usage.unknown_usage == 1
    counts = [result.usage.input_tokens, result.usage.output_tokens, result.usage.cache_read_tokens]
    assert all(0 <= count <= MAX_TOKEN_COUNT for count in counts)
    assert result.usage.cost_usd is not None and 0 <= result.usage.cost_usd < 1e6
    json.dumps(result.usage.to_json(), allow_nan=False)


def test_valid_usage_is_counted_and_recorded_usage_is_read_back_validated():
    with FakeModelServer([Scripted(openai_reply("done", usage=(1200, 30)))]) as server:
        usage = provider("openai", server.url, price=Price(input=2.5, output=10.0)).complete(
            conversation(), TOOLS).usage
    assert (usage.input_tokens, usage.output_tokens, usage.unknown_usage) == (1200, 30, 0)
    assert usage.cost_usd == pytest.approx((1200 * 2.5 + 30 * 10.0) / 1e6)
    assert Usage.from_json(usage.to_json()).input_tokens == 1200
    tampered = Usage.from_json({"input_tokens": -5, "output_tokens": float("inf"), "cost_usd": float("nan"),
                                "model_seconds": 1.5})
    assert (tampered.input_tokens, tampered.output_tokens, tampered.cost_usd) == (0, 0, None)
    assert tampered.unknown_usage == 1 and tampered.model_seconds == 1.5


def test_a_reply_body_over_the_ceiling_is_refused_unparsed():
    """A reply larger than any real one (here a 9 MB text) ends the call as rejected instead of being parsed."""
    huge = openai_reply("x" * (MAX_RESPONSE_BYTES + 1024 * 1024))
    with FakeModelServer([Scripted(huge)]) as server:
        with pytest.raises(ProviderError, match=f"more than {MAX_RESPONSE_BYTES} bytes") as caught:
            provider("openai", server.url).complete(conversation(), TOOLS)
    assert not caught.value.retryable and not caught.value.length


def test_providers_read_the_ca_store_once_per_process_and_still_verify(monkeypatch, tmp_path):
    """Making a TLS context reads the whole CA store (~50 ms of CPU): each episode's provider, and the clients its
    SDK makes, share one per process. It verifies certificates and host names, and a CA bundle named in
    SSL_CERT_FILE afterwards gets a context of its own, read from that bundle."""
    import ssl
    from pathlib import Path

    import certifi

    from MedOpenClawLib.providers.transport import tls_context

    reads = []
    load = ssl.SSLContext.load_verify_locations
    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations",
                        lambda context, *args, **named: reads.append(args) or load(context, *args, **named))
    context = tls_context()  # made here or by an earlier test
    reads.clear()
    places = {"azure-openai": {"api_version": "2024-10-21"}, "anthropic-bedrock": {"region": "us-east-1"},
              "anthropic-vertex": {"project": "p", "region": "us-east5"},
              "gemini-vertex": {"project": "p", "region": "us-central1"}}
    for kind in ("openai", "openai-responses", "azure-openai", "anthropic", "anthropic-bedrock", "anthropic-vertex",
                 "gemini", "gemini-vertex"):
        made = provider(kind, "https://models.example", **places.get(kind, {}))
        assert made.client is not None, kind
    assert reads == [] and tls_context() is context
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(Path(certifi.where()).read_bytes())
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    assert tls_context() is not context and reads == [(str(bundle), None, None)]
