"""The cloud surfaces of the two wire formats, exactly as their contracts read: Azure OpenAI (deployment path,
``?api-version=``, ``api-key`` header), Anthropic on Bedrock (``/model/{model}/invoke``, SigV4 checked by
recomputing it with botocore) and on Vertex AI (``rawPredict``, Bearer token); bodies validated against the
``openai`` / ``anthropic`` SDKs' request types; the Responses API in an episode, its replies built from the SDK's
``Response`` model."""

from __future__ import annotations

import sys

import pytest
from agents_fakes import FakeModelServer, Scripted, anthropic_reply, openai_reply
from anthropic.types import message_create_params
from openai.types.chat import completion_create_params
from openai.types.responses import Response, response_create_params
from sdk_types import adapter

from MedOpenClawLib.providers import Message, ProviderConfig, ProviderError, RetryPolicy, make_provider

KEY = "azure-key-0123456789"
TOOLS = [{"name": "observe", "description": "Render.", "parameters": {"type": "object", "properties": {}}}]
CONVERSATION = [Message("system", "s"), Message("user", "the task")]
NO_RETRY = RetryPolicy(max_retries=0)


def complete(kind: str, reply: dict, **options) -> dict:
    with FakeModelServer([Scripted(reply)]) as server:
        config = ProviderConfig(kind=kind, base_url=options.pop("base_url", server.url), retry=NO_RETRY, **options)
        answer = make_provider(config).complete(CONVERSATION, TOOLS)
    assert answer.text == "done"
    return server.requests[0]


def test_azure_openai_puts_the_deployment_in_the_path_the_version_in_the_query_and_the_key_in_api_key():
    request = complete("azure-openai", openai_reply("done"), model="my-gpt4o", api_version="2024-10-21",
                       api_key=KEY)
    assert request["path"] == "/openai/deployments/my-gpt4o/chat/completions?api-version=2024-10-21"
    assert request["headers"]["api-key"] == KEY and "Authorization" not in request["headers"]
    adapter(completion_create_params.CompletionCreateParamsNonStreaming).validate_python(request["body"])


def messages_body(body: dict, model: str, version: str) -> None:
    """The cloud body is the Messages body with the model moved to the URL and the version into the body."""
    assert body["anthropic_version"] == version and "model" not in body
    rest = {key: value for key, value in body.items() if key != "anthropic_version"}
    adapter(message_create_params.MessageCreateParamsNonStreaming).validate_python({**rest, "model": model})


def test_anthropic_bedrock_invokes_the_model_with_a_valid_sigv4_signature(monkeypatch):
    from anthropic.lib.aws._auth import _get_session
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    # the SDK keeps one boto3 session per process, its credentials resolved once (a run's environment does not
    # change under it); earlier tests of this process signed with other keys
    _get_session.cache_clear()
    model = "anthropic.claude-sonnet-4-20250514-v1:0"
    request = complete("anthropic-bedrock", anthropic_reply("done"), model=model, region="us-east-1")
    assert request["path"] == "/model/anthropic.claude-sonnet-4-20250514-v1:0/invoke"  # the SDK keeps ":" as is
    messages_body(request["body"], model, "bedrock-2023-05-31")
    headers = request["headers"]
    authorization = headers["Authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") and \
        "/us-east-1/bedrock/aws4_request" in authorization
    # the server's side of SigV4: the signature recomputed over the bytes that arrived
    url = f"http://{headers['Host']}{request['path']}"
    signed = authorization.split("SignedHeaders=")[1].split(",")[0].split(";")
    assert {"host", "x-amz-date", "content-type"} <= set(signed)
    received = AWSRequest("POST", url, data=request["raw"], headers={
        key: value for key, value in headers.items() if key.lower() in signed and key.lower() != "host"})
    received.context["timestamp"] = headers["X-Amz-Date"]
    signer = SigV4Auth(Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"), "bedrock", "us-east-1")
    expected = signer.signature(signer.string_to_sign(received, signer.canonical_request(received)), received)
    assert authorization.endswith(f"Signature={expected}")


def test_anthropic_vertex_calls_raw_predict_with_a_bearer_token():
    model = "claude-sonnet-4@20250514"
    request = complete("anthropic-vertex", anthropic_reply("done"), model=model, project="my-project",
                       region="us-east5", api_key="ya29.token")
    assert request["path"] == ("/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/"
                               "claude-sonnet-4@20250514:rawPredict")
    assert request["headers"]["Authorization"] == "Bearer ya29.token"
    messages_body(request["body"], model, "vertex-2023-10-16")


def test_cloud_endpoints_follow_the_region_and_missing_options_are_one_line_errors():
    bedrock = ProviderConfig.resolve(model="m", provider="anthropic-bedrock", region="eu-west-1", environ={})
    assert bedrock.base_url == "https://bedrock-runtime.eu-west-1.amazonaws.com"
    vertex = ProviderConfig.resolve(model="m", provider="anthropic-vertex", region="global", project="p", environ={})
    assert vertex.base_url == "https://aiplatform.googleapis.com"
    azure = ProviderConfig.resolve(model="d", provider="azure-openai", base_url="https://res.openai.azure.com",
                                   api_version="v", environ={"AZURE_OPENAI_API_KEY": "k"})
    assert azure.api_key == "k"  # the resource is Azure's own API: its key variable is read
    for kind, options, missing in (("azure-openai", {"base_url": "https://r.openai.azure.com"}, "--api-version"),
                                   ("azure-openai", {"api_version": "v"}, "--base-url"),
                                   ("anthropic-bedrock", {}, "--region"),
                                   ("anthropic-vertex", {"region": "us-east5"}, "--project")):
        with pytest.raises(ValueError, match=f"the {kind} provider needs {missing}"):
            ProviderConfig.resolve(model="m", provider=kind, environ={}, **options)


def test_a_missing_cloud_dependency_stops_the_run_in_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "botocore.auth", None)  # importing it now raises ImportError
    config = ProviderConfig(kind="anthropic-bedrock", model="m", base_url="http://127.0.0.1:9", region="us-east-1",
                            retry=NO_RETRY)
    with pytest.raises(ProviderError, match=r"pip install 'medopenclaw\[bedrock\]'") as raised:
        make_provider(config).complete(CONVERSATION, TOOLS)
    assert raised.value.fatal


def responses_reply(output: list[dict], incomplete: str | None = None, **usage) -> dict:
    """A Responses API reply through the SDK's own model."""
    usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
             "output_tokens": 10,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 110, **usage}
    response = Response.model_validate({
        "id": "resp_1", "object": "response", "created_at": 0, "model": "o3", "output": output,
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "usage": usage,
        "status": "incomplete" if incomplete else "completed",
        "incomplete_details": {"reason": incomplete} if incomplete else None})
    return response.model_dump(mode="json", exclude_none=True)


def output_message(text: str) -> dict:
    return {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def test_openai_responses_episode_round_trips_reasoning_items_and_tool_images(tmp_path):
    """Reasoning items go back verbatim before their call; a tool's images ride in its function_call_output;
    every request validates against the SDK's ResponseCreateParams; usage and truncation are read."""
    from agents_fakes import toy_registry

    from MedOpenClawLib.bench.agents.base import AgentContext
    from MedOpenClawLib.bench.agents.model import ModelAgent
    from MedOpenClawLib.bench.episode import EpisodeConfig, EpisodePrompt, run_episode
    from MedOpenClawLib.core.audit import AuditTrace
    from MedOpenClawLib.worker.environment import LocalEnvironment

    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "look first"}],
                 "encrypted_content": "gAAAA"}
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "observe", "arguments": "{}",
            "status": "completed"}
    replies = [responses_reply([reasoning, call], output_tokens_details={"reasoning_tokens": 64}),
               responses_reply([output_message("Answer: do")], "max_output_tokens"),
               responses_reply([output_message("ne")], input_tokens=900,
                               input_tokens_details={"cached_tokens": 600, "cache_write_tokens": 200})]
    env = LocalEnvironment(toy_registry(AuditTrace(tmp_path / "trace.jsonl"), 4))
    with FakeModelServer([Scripted(reply) for reply in replies]) as server:
        config = ProviderConfig(kind="openai-responses", model="o3", base_url=server.url, api_key=KEY,
                                retry=NO_RETRY)
        agent = ModelAgent(make_provider(config))
        agent.reset(AgentContext(module="toy", case=None, tools=env.tools(), max_rounds=4))
        outcome = run_episode(agent, env, EpisodePrompt("system", "the task", []), EpisodeConfig(max_rounds=4))
    assert outcome.final_text == "Answer: done"
    bodies = [request["body"] for request in server.requests]
    assert all(request["path"] == "/responses" for request in server.requests)
    for body in bodies:
        adapter(response_create_params.ResponseCreateParamsNonStreaming).validate_python(body)
        assert "seed" not in body and body["tools"][0]["strict"] is False
    second = bodies[1]["input"]
    assert second[2:4] == [reasoning, call]  # system, task, then the server's items verbatim
    assert second[4]["type"] == "function_call_output" and second[4]["call_id"] == "call_1"
    assert [part["type"] for part in second[4]["output"]] == ["input_text", "input_image"]
    assert (outcome.usage.reasoning_tokens, outcome.usage.cache_read_tokens, outcome.usage.cache_write_tokens) == \
        (64, 600, 200)


def test_openai_responses_refusal_is_refused():
    refusal = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
               "content": [{"type": "refusal", "refusal": "I can't help with that."}]}
    with FakeModelServer([Scripted(responses_reply([refusal]))]) as server:
        config = ProviderConfig(kind="openai-responses", model="o3", base_url=server.url, api_key=KEY,
                                retry=NO_RETRY)
        reply = make_provider(config).complete(CONVERSATION, TOOLS)
    assert reply.refusal == "I can't help with that." and reply.text == ""
