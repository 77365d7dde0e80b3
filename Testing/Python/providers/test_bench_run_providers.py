"""One ``bench run --agent model`` per provider, typed as a user types it, against a scripted server of that surface:
the pre-flight's tool call, then one answer; the episode must be scored. Replies are built from the vendors' SDK
types and every request is validated against their request types; each surface's path and authentication are
checked on the requests that arrived. The episodes run on a warm headless worker of the test process (conftest.py
``warm_workers``): the surfaces are under test here, a worker's own start in the bench and worker groups."""

from __future__ import annotations

import json

import anthropic.types as anthropic_types
import openai.types.chat as openai_chat
import openai.types.responses as openai_responses
import pytest
from agents_cases import write_ucsf_package
from agents_fakes import FakeModelServer, Scripted
from anthropic.types import message_create_params
from openai.types.chat import completion_create_params
from openai.types.responses import response_create_params
from sdk_types import adapter

from MedOpenClawLib.cli import main

MODULE = "ucsf-pdgm"
ANSWER = "ANSWER: glioblastoma"
# provider -> (wire, extra arguments, the path every request must take)
SURFACES = {
    "openai": ("chat", [], "/chat/completions"),
    "openai-responses": ("responses", [], "/responses"),
    "azure-openai": ("chat", ["--api-version", "2024-10-21"],
                     "/openai/deployments/m-1/chat/completions?api-version=2024-10-21"),
    "anthropic": ("anthropic", [], "/v1/messages"),
    "anthropic-bedrock": ("anthropic", ["--region", "us-east-1"], "/model/m-1/invoke"),
    "anthropic-vertex": ("anthropic", ["--project", "p", "--region", "us-east5"],
                         "/v1/projects/p/locations/us-east5/publishers/anthropic/models/m-1:rawPredict"),
}
REQUESTS = {"chat": completion_create_params.CompletionCreateParamsNonStreaming,
            "anthropic": message_create_params.MessageCreateParamsNonStreaming,
            "responses": response_create_params.ResponseCreateParamsNonStreaming}


def _tool_names(body: dict) -> list[str]:
    return [tool.get("name") or tool.get("function", {}).get("name") for tool in body.get("tools") or []]


def reply(wire: str, body: dict) -> dict:
    """The pre-flight's tool call when report_colour is offered, else the final answer, as the SDK types it."""
    call = "report_colour" in _tool_names(body)
    if wire == "chat":
        message = {"role": "assistant", "content": None if call else ANSWER}
        if call:
            message["tool_calls"] = [{"id": "call_1", "type": "function",
                                      "function": {"name": "report_colour", "arguments": '{"colour": "red"}'}}]
        return openai_chat.ChatCompletion.model_validate({
            "id": "c", "object": "chat.completion", "created": 0, "model": "m-1",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55}}).model_dump(mode="json")
    if wire == "anthropic":
        content = [{"type": "tool_use", "id": "toolu_1", "name": "report_colour", "input": {"colour": "red"}}] \
            if call else [{"type": "text", "text": ANSWER}]
        return anthropic_types.Message.model_validate({
            "id": "m", "type": "message", "role": "assistant", "model": "m-1", "content": content,
            "stop_reason": "tool_use" if call else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 50, "output_tokens": 5}}).model_dump(mode="json", exclude_none=True)
    item = {"type": "function_call", "call_id": "call_1", "name": "report_colour", "arguments": '{"colour": "red"}',
            "id": "fc_1", "status": "completed"} if call else \
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": ANSWER, "annotations": []}]}
    return openai_responses.Response.model_validate({
        "id": "r", "object": "response", "created_at": 0, "model": "m-1", "output": [item], "status": "completed",
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "usage": {"input_tokens": 50, "output_tokens": 5, "total_tokens": 55,
                  "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 0}}}).model_dump(mode="json", exclude_none=True)


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    """One small UCSF-PDGM case package (tiny volumes: the surfaces are under test, not the cohort generator)."""
    return write_ucsf_package(tmp_path_factory.mktemp("cases"), cases=1)


@pytest.mark.usefixtures("warm_workers")  # the commands as typed, their episodes on a warm worker
@pytest.mark.parametrize("provider", list(SURFACES))
def test_one_bench_run_per_provider_is_scored(provider, cases, tmp_path, capsys, monkeypatch):
    wire, extra, path = SURFACES[provider]
    if provider == "anthropic-bedrock":  # SigV4 from the standard AWS variables, no key
        monkeypatch.delenv("MEDOPENCLAW_API_KEY", raising=False)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-example")
    else:
        monkeypatch.setenv("MEDOPENCLAW_API_KEY", "k-0123456789")

    def respond(body: dict) -> Scripted:
        checked = {key: value for key, value in body.items() if key != "anthropic_version"}
        adapter(REQUESTS[wire]).validate_python({"model": "m-1", **checked})
        return Scripted(reply(wire, body))

    with FakeModelServer([], respond=respond) as server:
        code = main(["bench", "run", "--module", MODULE, "--agent", "model", "--provider", provider, "--model", "m-1",
                     "--base-url", server.url, *extra, "--limit", "1", "--max-rounds", "2", "--max-retries", "0",
                     "--cases", str(cases), "--out", str(tmp_path / "run")])
    captured = capsys.readouterr()
    summary = json.loads((captured.out.strip().splitlines() or ["{}"])[-1])
    assert code == 0 and (summary["scored"], summary["errors"], summary["rejected"]) == (1, 0, 0), captured.err
    assert len(server.requests) >= 2 and {request["path"] for request in server.requests} == {path}
    headers = {key.lower(): value for key, value in server.requests[-1]["headers"].items()}
    if provider == "anthropic-bedrock":
        assert headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    else:
        header = {"azure-openai": "api-key", "anthropic": "x-api-key"}.get(provider, "authorization")
        assert headers[header].removeprefix("Bearer ") == "k-0123456789"
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["provider"]["kind"] == provider
