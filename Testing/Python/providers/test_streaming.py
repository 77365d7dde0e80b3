"""``--stream`` against servers that only stream: each vendor's server-sent events, built and checked with the
vendors' SDK event types, assembled into the reply a non-streamed request gets (text, tool calls split over
chunks, thinking with its signature, usage); Anthropic streams by default above its non-streaming limit."""

from __future__ import annotations

import anthropic.types as anthropic_types
import openai.types.chat as openai_chat
import openai.types.responses as openai_responses
import pytest
from agents_fakes import FakeModelServer, Scripted, aws_event_stream
from anthropic.types import message_create_params
from openai.types.chat import completion_create_params
from openai.types.responses import response_create_params
from sdk_types import adapter

from MedOpenClawLib.providers import Message, ProviderConfig, ProviderError, RetryPolicy, make_provider

TOOLS = [{"name": "observe", "description": "Render.", "parameters": {"type": "object", "properties": {
    "size": {"type": "integer"}}}}]
CONVERSATION = [Message("system", "s"), Message("user", "the task")]
EVENT_STREAM = "application/vnd.amazon.eventstream"
REQUEST_TYPES = {"openai": completion_create_params.CompletionCreateParamsStreaming,
                 "anthropic": message_create_params.MessageCreateParamsStreaming,
                 "openai-responses": response_create_params.ResponseCreateParamsStreaming}


def checked(event_type: object, events: list[dict]) -> list[dict]:
    """Each event as the SDK's own type reads it (fails here if the shape is not one the vendor sends)."""
    reader = adapter(event_type)
    return [reader.dump_python(reader.validate_python(event), mode="json", exclude_none=True) for event in events]


def chat_chunks() -> list[dict]:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    deltas = [({"role": "assistant", "content": "look"}, None),
              ({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                "function": {"name": "observe", "arguments": '{"si'}}]}, None),
              ({"tool_calls": [{"index": 0, "function": {"arguments": 'ze": 64}'}}]}, "tool_calls")]
    chunks = [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]} for delta, finish in deltas]
    chunks.append({**base, "choices": [], "usage": {"prompt_tokens": 120, "completion_tokens": 9, "total_tokens": 129,
                                                    "prompt_tokens_details": {"cached_tokens": 100}}})
    return checked(openai_chat.ChatCompletionChunk, chunks)


def anthropic_events() -> list[dict]:
    events = [
        {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                                              "content": [], "stop_reason": None, "stop_sequence": None,
                                              "usage": {"input_tokens": 120, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "",
                                                                       "signature": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "plan"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig=="}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "look"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1",
                                                                       "name": "observe", "input": {}}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '{"si'}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": 'ze": 64}'}},
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
         "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    return checked(anthropic_types.RawMessageStreamEvent, events)


def responses_events() -> list[dict]:
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "observe",
            "arguments": '{"size": 64}', "status": "completed"}
    text = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "look", "annotations": []}]}
    final = {"id": "resp_1", "object": "response", "created_at": 0, "model": "m", "output": [text, call],
             "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "status": "completed",
             "usage": {"input_tokens": 120, "output_tokens": 9, "total_tokens": 129,
                       "input_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 0},
                       "output_tokens_details": {"reasoning_tokens": 0}}}
    events = [{"type": "response.created", "sequence_number": 0, "response": {**final, "output": [],
                                                                              "status": "in_progress"}},
              {"type": "response.output_text.delta", "sequence_number": 1, "item_id": "msg_1", "output_index": 0,
               "content_index": 0, "delta": "look", "logprobs": []},
              {"type": "response.completed", "sequence_number": 2, "response": final}]
    return checked(openai_responses.ResponseStreamEvent, events)


STREAMS = {"openai": chat_chunks, "anthropic": anthropic_events, "openai-responses": responses_events}


def only_streams(kind: str):
    """A server that answers only streamed requests (as some gateways and local servers do)."""
    def respond(body: dict) -> Scripted:
        if body.get("stream") is not True:
            return Scripted({"error": {"message": "this server only streams: set stream to true"}}, 400)
        adapter(REQUEST_TYPES[kind]).validate_python(body)
        return Scripted(STREAMS[kind]())
    return respond


@pytest.mark.parametrize("kind", list(STREAMS))
def test_stream_assembles_each_vendors_events_into_the_reply(kind):
    with FakeModelServer([], respond=only_streams(kind)) as server:
        config = ProviderConfig(kind=kind, model="m", base_url=server.url, api_key="k", stream=True,
                                retry=RetryPolicy(max_retries=0))
        reply = make_provider(config).complete(CONVERSATION, TOOLS)
        with pytest.raises(ProviderError, match="only streams"):  # without --stream that server cannot be used
            make_provider(ProviderConfig(kind=kind, model="m", base_url=server.url, api_key="k",
                                         retry=RetryPolicy(max_retries=0))).complete(CONVERSATION, TOOLS)
    assert reply.text == "look" and [(call.id[-1], call.name, call.arguments) for call in reply.tool_calls] == \
        [("1", "observe", {"size": 64})]
    cached = 0 if kind == "anthropic" else 100
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.cache_read_tokens) == (120, 9, cached)
    if kind == "anthropic":
        assert reply.vendor["content"][0] == {"type": "thinking", "thinking": "plan", "signature": "sig=="}
        assert reply.stop_reason == "tool_use"
    if kind == "openai":
        assert server.requests[0]["body"]["stream_options"] == {"include_usage": True}


def test_anthropic_streams_by_default_above_its_non_streaming_limit():
    with FakeModelServer([], respond=only_streams("anthropic")) as server:
        config = ProviderConfig(kind="anthropic", model="m", base_url=server.url, api_key="k", max_tokens=32_000,
                                retry=RetryPolicy(max_retries=0))
        assert make_provider(config).complete(CONVERSATION, TOOLS).text == "look"
    assert ProviderConfig(kind="openai", model="m", base_url="http://x", extra_body={"stream": True}).stream


def test_bedrock_streams_through_invoke_with_response_stream_in_aws_event_stream_frames(monkeypatch):
    """Bedrock frames the Messages events in AWS's binary event stream; the SDK's decoder unwraps them."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    frames = Scripted(aws_event_stream(anthropic_events()), headers={"Content-Type": EVENT_STREAM})
    with FakeModelServer([frames]) as server:
        config = ProviderConfig(kind="anthropic-bedrock", model="m", base_url=server.url, region="us-east-1",
                                stream=True, retry=RetryPolicy(max_retries=0))
        reply = make_provider(config).complete(CONVERSATION, TOOLS)
    request = server.requests[0]
    assert request["path"] == "/model/m/invoke-with-response-stream" and "stream" not in request["body"]
    adapter(REQUEST_TYPES["anthropic"]).validate_python(
        {**request["body"], "model": "m", "stream": True})
    assert reply.text == "look" and [(call.name, call.arguments) for call in reply.tool_calls] == \
        [("observe", {"size": 64})]
    assert reply.vendor["content"][0]["signature"] == "sig==" and reply.usage.output_tokens == 9
