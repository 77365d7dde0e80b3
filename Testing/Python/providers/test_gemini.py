"""``--provider gemini`` (and ``gemini-vertex``) against a fake of Gemini's native API built from google-genai's own
types (gemini_server.py): every request the harness sends is read by the SDK's models and held to the documented
rules; replies are the SDK's. Thought signatures round-trip verbatim, function responses answer their calls, the
finish reasons and prompt feedback become truncation or refusals, usage is complete, errors are classified, a server
that only streams works with ``--stream``, and one ``bench run --agent model --provider gemini`` is scored."""

from __future__ import annotations

import base64
import json

import pytest
from agents_cases import write_ucsf_package
from agents_fakes import FakeModelServer, Scripted
from gemini_server import FakeGemini, Refused, dump, reply
from google.genai import types

from MedOpenClawLib.cli import main
from MedOpenClawLib.providers import ImageInput, Message, ProviderConfig, ProviderError, RetryPolicy, make_provider
from MedOpenClawLib.providers.config import thinking_budget
from MedOpenClawLib.providers.http import RetryPolicy as Policy
from MedOpenClawLib.providers.http import retry_info
from MedOpenClawLib.providers.openai_chat import TOOL_IMAGES_TEXT

KEY = "k-gemini"
TOOLS = [{"name": "observe", "description": "Render a view.", "parameters": {
    "type": "object", "additionalProperties": False, "required": ["view"],
    "properties": {"view": {"const": "axial"}, "size": {"type": ["integer", "null"], "exclusiveMinimum": 0}}}}]
SIGNATURE = b"\x01signature-of-the-plan\xff"
CALL = types.Part(function_call=types.FunctionCall(name="observe", args={"view": "axial", "size": 64}, id="fc-7"),
                  thought_signature=SIGNATURE)
USAGE = {"prompt_token_count": 120, "candidates_token_count": 9, "thoughts_token_count": 30,
         "cached_content_token_count": 100, "total_token_count": 159}
FAST = RetryPolicy(max_retries=0)


def png() -> ImageInput:
    return ImageInput.from_png(base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="), "x")


def provider(server: FakeGemini, **options):
    return make_provider(ProviderConfig(kind=options.pop("kind", "gemini"), model="gemini-3-pro-preview",
                                        base_url=server.url, api_key=KEY, retry=options.pop("retry", FAST), **options))


def conversation() -> list[Message]:
    return [Message("system", "You are a radiologist."), Message("user", "the task", images=[png()])]


def answers(*replies):
    """The scripted replies in order (a Refused is sent as the error it carries)."""
    queue = list(replies)
    return lambda body: queue.pop(0)


def test_a_tool_round_trips_with_its_signature_its_id_and_the_images_it_returned():
    thought = types.Part(text="plan: look axial", thought=True)
    with FakeGemini(answers(reply([thought, CALL], usage=USAGE), reply([types.Part(text="done")]),
                            reply([types.Part(text="never")]))) as server:
        model = provider(server, temperature=0.2, seed=3)
        messages = conversation()
        first = model.complete(messages, TOOLS)
        call = first.tool_calls[0]
        assert (call.id, call.name, call.arguments) == ("fc-7", "observe", {"view": "axial", "size": 64})
        assert first.reasoning == "plan: look axial" and first.text == ""
        usage = first.usage
        assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens, usage.cache_read_tokens) == \
            (120, 39, 30, 100)
        messages += [Message("assistant", first.text, tool_calls=first.tool_calls, vendor=first.vendor),
                     Message("tool", '{"ok": true}', images=[png()], tool_call_id=call.id, tool_name="observe"),
                     Message("user", "state: axial")]
        assert model.complete(messages, TOOLS, allow_tools=False).text == "done"
        stripped = {"kind": "gemini", "parts": [{key: value for key, value in part.items() if key != "thoughtSignature"}
                                                for part in first.vendor["parts"]]}
        unsigned = [*messages[:2], Message("assistant", "", tool_calls=first.tool_calls, vendor=stripped),
                    *messages[3:]]
        with pytest.raises(ProviderError, match="thought_signature"):  # the fake is as strict as Gemini 3
            model.complete(unsigned, TOOLS)
    body = server.requests[1]["body"]
    declared = body["tools"][0]["functionDeclarations"][0]["parameters"]
    assert declared["properties"] == {"view": {"enum": ["axial"]},
                                      "size": {"type": "integer", "nullable": True, "minimum": 0}}
    assert body["systemInstruction"] == {"parts": [{"text": "You are a radiologist."}]}
    assert body["generationConfig"] == {"maxOutputTokens": 2048, "temperature": 0.2, "seed": 3}
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "NONE"}}
    model_turn, results = body["contents"][1], body["contents"][2]
    sent = dump(reply([thought, CALL]))["candidates"][0]["content"]
    assert model_turn == sent and sent["parts"][1]["thoughtSignature"]  # verbatim, as the server wrote it
    assert [list(part) for part in results["parts"]] == [["functionResponse"], ["text"], ["inlineData"], ["text"]]
    assert results["parts"][0]["functionResponse"] == {"name": "observe", "id": "fc-7",
                                                       "response": {"output": '{"ok": true}'}}
    assert results["parts"][1]["text"] == TOOL_IMAGES_TEXT and results["parts"][3]["text"] == "state: axial"
    assert server.requests[0]["path"] == "/v1beta/models/gemini-3-pro-preview:generateContent"
    assert server.requests[0]["headers"]["x-goog-api-key"] == KEY


REFUSED_OR_CUT = {
    "max_tokens": (reply([types.Part(text="half an ans")], finish="MAX_TOKENS"), "max_tokens", None, True),
    "safety": (reply([], finish="SAFETY"), "safety", "SAFETY", False),
    "recitation": (reply([types.Part(text="quoted")], finish="RECITATION", ), "recitation", "RECITATION", False),
    "prohibited": (reply([], finish="PROHIBITED_CONTENT"), "prohibited_content", "PROHIBITED_CONTENT", False),
    "prompt_blocked": (types.GenerateContentResponse(prompt_feedback=types.GenerateContentResponsePromptFeedback(
        block_reason="PROHIBITED_CONTENT")), "blocked", "prompt blocked: PROHIBITED_CONTENT", False),
    "malformed_call": (reply([], finish="MALFORMED_FUNCTION_CALL"), "malformed_function_call", None, False),
}


@pytest.mark.parametrize("case", list(REFUSED_OR_CUT))
def test_finish_reasons_and_prompt_feedback_become_truncation_refusals_or_an_empty_reply(case):
    answer, stop, refusal, truncated = REFUSED_OR_CUT[case]
    with FakeGemini(answers(answer)) as server:
        got = provider(server).complete(conversation(), TOOLS)
    assert (got.stop_reason, got.refusal, got.truncated) == (stop, refusal, truncated)
    assert got.empty == (case in ("safety", "prohibited", "prompt_blocked", "malformed_call"))


def test_the_candidate_whose_index_is_0_is_the_reply():
    both = types.GenerateContentResponse(candidates=[
        types.Candidate(index=1, content=types.Content(role="model", parts=[types.Part(text="second")])),
        types.Candidate(index=0, finish_reason="STOP",
                        content=types.Content(role="model", parts=[types.Part(text="first")]))])
    with FakeGemini(answers(both)) as server:
        assert provider(server).complete(conversation(), TOOLS).text == "first"


def test_errors_are_google_rpc_statuses_retry_info_is_honoured_and_a_wrong_key_stops_the_run():
    exhausted = Refused("Resource has been exhausted (e.g. check quota).", 429, "RESOURCE_EXHAUSTED", details=[
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.01s"}])
    assert retry_info(json.dumps(exhausted.body()).replace("0.01s", "37s")) == "37"
    assert Policy().delay(0, "37") == 37
    with FakeGemini(answers(exhausted, reply([types.Part(text="ok")]))) as server:
        got = provider(server, retry=RetryPolicy(max_retries=1, backoff_s=60, deadline_s=30)).complete(
            conversation(), TOOLS)  # the 60 s backoff would pass the deadline: only RetryInfo's 0.01 s fits
    assert got.text == "ok" and got.usage.retries == 1
    with FakeGemini(answers()) as server, pytest.raises(ProviderError, match="API key not valid") as wrong:
        make_provider(ProviderConfig(kind="gemini", model="m", base_url=server.url, api_key="nope",
                                     retry=FAST)).complete(conversation(), TOOLS)
    assert wrong.value.fatal
    too_long = Refused("The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).")
    with FakeGemini(answers(too_long, too_long)) as server, pytest.raises(ProviderError) as refused:
        provider(server).complete(conversation(), TOOLS)
    assert refused.value.length and not refused.value.fatal


def test_stream_against_a_server_that_only_streams_keeps_each_part_and_its_signature():
    said = types.Part(text="look")
    with FakeGemini(answers(reply([said, CALL], usage=USAGE), reply([types.Part(text="done")])),
                    stream_only=True) as server:
        with pytest.raises(ProviderError, match="HTTP 404") as refused:
            provider(server).complete(conversation(), TOOLS)
        assert refused.value.fatal
        model = provider(server, stream=True)
        messages = conversation()
        first = model.complete(messages, TOOLS)
        messages += [Message("assistant", first.text, tool_calls=first.tool_calls, vendor=first.vendor),
                     Message("tool", "ok", tool_call_id=first.tool_calls[0].id, tool_name="observe")]
        assert model.complete(messages, TOOLS).text == "done"  # the fake checks the signature came back
    assert first.text == "look" and [call.arguments for call in first.tool_calls] == [{"view": "axial", "size": 64}]
    assert (first.stop_reason, first.usage.output_tokens, first.usage.cache_read_tokens) == ("stop", 39, 100)
    assert server.requests[-1]["path"] == "/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse"


def test_thinking_settings_in_the_extra_body_add_to_the_generation_config():
    extra = {"generationConfig": {"thinkingConfig": {"thinkingBudget": 512, "includeThoughts": True}}}
    assert thinking_budget(extra) == 512
    with FakeGemini(answers(reply([types.Part(text="ok")]))) as server:
        provider(server, extra_body=extra).complete(conversation(), TOOLS)
    assert server.requests[0]["body"]["generationConfig"] == {
        "maxOutputTokens": 2048, "thinkingConfig": {"thinkingBudget": 512, "includeThoughts": True}}


def test_gemini_on_vertex_takes_the_same_body_with_a_bearer_token():
    with FakeGemini(answers(reply([types.Part(text="ok")])), bearer=True) as server:
        got = provider(server, kind="gemini-vertex", project="p-1", region="us-central1").complete(
            conversation(), TOOLS)
    assert got.text == "ok"
    assert server.requests[0]["path"] == \
        "/v1/projects/p-1/locations/us-central1/publishers/google/models/gemini-3-pro-preview:generateContent"
    assert server.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"


def episode(body: dict) -> types.GenerateContentResponse:
    """The pre-flight's call when report_colour is offered; in the episode one signed call of a tool that needs no
    argument, then the answer."""
    declared = [item for tool in body.get("tools") or [] for item in tool["functionDeclarations"]]
    if any(item["name"] == "report_colour" for item in declared):
        return reply([types.Part(function_call=types.FunctionCall(name="report_colour", args={"colour": "red"}),
                                 thought_signature=b"preflight")])
    answered = any("functionResponse" in part for content in body["contents"] for part in content["parts"])
    if answered or body["toolConfig"]["functionCallingConfig"]["mode"] == "NONE":
        return reply([types.Part(text="ANSWER: glioblastoma")], usage=USAGE)
    free = next(item["name"] for item in declared if not (item.get("parameters") or {}).get("required"))
    return reply([types.Part(function_call=types.FunctionCall(name=free, args={}), thought_signature=SIGNATURE)],
                 usage=USAGE)


@pytest.mark.usefixtures("warm_workers")  # the commands as typed, their episodes on a warm worker
@pytest.mark.parametrize("stream", [False, True])
def test_one_bench_run_with_provider_gemini_is_scored(stream, tmp_path, capsys, monkeypatch):
    """As a user types it; with --stream against a server that only streams."""
    monkeypatch.setenv("MEDOPENCLAW_API_KEY", KEY)
    cases = write_ucsf_package(tmp_path / "cases", cases=1)
    with FakeGemini(episode, stream_only=stream) as server:
        code = main(["bench", "run", "--module", "ucsf-pdgm", "--agent", "model", "--provider", "gemini",
                     "--model", "gemini-3-pro-preview", "--base-url", server.url, "--limit", "1", "--max-rounds", "3",
                     "--max-retries", "0", "--cases", str(cases), "--out", str(tmp_path / "run"),
                     *(["--stream"] if stream else [])])
    captured = capsys.readouterr()
    summary = json.loads((captured.out.strip().splitlines() or ["{}"])[-1])
    assert code == 0 and (summary["scored"], summary["errors"], summary["rejected"]) == (1, 0, 0), captured.err
    episode_requests = [request["body"] for request in server.requests[1:]]
    assert any("functionResponse" in part for body in episode_requests for content in body["contents"]
               for part in content["parts"])  # a tool round ran, its signed call sent back (the fake checks)
    assert {request["path"].rsplit(":", 1)[1] for request in server.requests} == \
        {"streamGenerateContent?alt=sse" if stream else "generateContent"}
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["provider"]["kind"] == "gemini"


def test_without_a_key_none_is_sent_not_even_the_environments(monkeypatch):
    """A keyless server (a gateway, a local fake): GOOGLE_API_KEY / GEMINI_API_KEY are the vendor's, never sent
    elsewhere (google-genai reads them whenever it is given no key)."""
    monkeypatch.setenv("GOOGLE_API_KEY", "vendor-secret")
    monkeypatch.setenv("GEMINI_API_KEY", "vendor-secret")
    with FakeGemini(answers(reply([types.Part(text="ok")])), key=None) as server:
        config = ProviderConfig.resolve(model="gemini-2.5-flash", provider="gemini", base_url=server.url,
                                        environ={"GOOGLE_API_KEY": "vendor-secret"}, retry=FAST)
        assert make_provider(config).complete(conversation(), TOOLS).text == "ok"
    assert "vendor-secret" not in json.dumps(dict(server.requests[0]["headers"]))


@pytest.mark.parametrize("candidates", [{"index": 0}, [{"index": [0]}], [{"content": {"parts": "text"}}], ["x"]])
def test_a_stream_chunk_of_another_shape_ends_the_request_in_a_provider_error(candidates):
    with FakeModelServer([Scripted([{"candidates": candidates}])]) as server, \
            pytest.raises(ProviderError, match="response refused"):
        provider(server, stream=True).complete(conversation(), TOOLS)


def test_a_call_written_as_text_goes_back_as_a_call_with_the_documented_stand_in_signature():
    written = '<tool_call>{"name": "observe", "arguments": {"view": "axial"}}</tool_call>'
    with FakeGemini(answers(reply([types.Part(text=written)]), reply([types.Part(text="done")]))) as server:
        model = provider(server)
        messages = conversation()
        first = model.complete(messages, TOOLS)
        assert [(call.name, call.arguments) for call in first.tool_calls] == [("observe", {"view": "axial"})]
        messages += [Message("assistant", first.text, tool_calls=first.tool_calls, vendor=first.vendor),
                     Message("tool", "ok", tool_call_id=first.tool_calls[0].id, tool_name="observe")]
        assert model.complete(messages, TOOLS).text == "done"  # Gemini 3 refuses an unsigned call of the turn
    assert server.requests[1]["body"]["contents"][1] == {"role": "model", "parts": [
        {"functionCall": {"name": "observe", "args": {"view": "axial"}},
         "thoughtSignature": "skip_thought_signature_validator"}]}
