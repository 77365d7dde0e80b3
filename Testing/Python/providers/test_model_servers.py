"""The model conversation against limit-enforcing fakes of real servers (model_servers.py): the policy and budget
keep every request inside each server's documented limits, vendor fields and message-order rules round-trip,
quirks in replies are acted on, limits hit anyway end as ``model_length`` (scored), the pre-flight refuses
text-only and tool-less servers; and one ``bench run --agent model`` per module, end to end, against them."""

from __future__ import annotations

import json

import pytest
from agents_fakes import FakeModelServer, Scripted, openai_reply, toy_registry
from model_servers import PROFILES, LimitedModelServer, Profile, ScriptedVLM

from MedOpenClawLib.bench.agents.base import AgentContext
from MedOpenClawLib.bench.agents.model import ModelAgent
from MedOpenClawLib.bench.episode import EpisodeConfig, EpisodePrompt, feedback_text, run_episode
from MedOpenClawLib.bench.run_command import add_bench_subcommand
from MedOpenClawLib.cli import main
from MedOpenClawLib.core.audit import AuditTrace, read_trace
from MedOpenClawLib.providers import ImageInput, Message, ProviderConfig, ProviderError, RetryPolicy, make_provider
from MedOpenClawLib.providers.conversation import (
    DEFAULT_IMAGE_HISTORY,
    DEFAULT_TOOL_HISTORY,
    ContextBudgetError,
    ConversationPolicy,
    fit,
)
from MedOpenClawLib.providers.limits import PROFILE_NAMES, resolve_limits
from MedOpenClawLib.providers.text_calls import text_tool_calls
from MedOpenClawLib.providers.tool_schemas import gemini_schema
from MedOpenClawLib.worker.environment import LocalEnvironment

FAST = RetryPolicy(max_retries=1, backoff_s=0.01)
MODELS = {"openai": "gpt-4o", "anthropic": "claude-sonnet-4", "anthropic-thinking": "claude-sonnet-4",
          "gemini-2.5": "gemini-2.5-flash", "gemini-3": "gemini-3-pro-preview", "mistral": "mistral-small-latest"}
THINKING = {"thinking": {"type": "enabled", "budget_tokens": 1024}}


def tiny_png(size: int = 16) -> ImageInput:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("L", (size, size), 128).save(buffer, format="PNG")
    return ImageInput.from_png(buffer.getvalue(), "t")


def config_for(server: LimitedModelServer, **options) -> ProviderConfig:
    profile = server.profile
    extra = THINKING if profile.thinking_budget else {}
    if profile.strict_tools:  # strict function calling is the user's choice, not detected from the URL
        options.setdefault("profile", "openai-strict")
    return ProviderConfig(kind=profile.wire, model=MODELS.get(profile.name, "local-vlm"), base_url=server.url,
                          api_key="k", retry=FAST, extra_body=extra, max_tokens=2048, **options)


def toy_episode(tmp_path, profile: Profile, model: ScriptedVLM, rounds: int = 6, **options):
    registry = toy_registry(AuditTrace(tmp_path / "trace.jsonl"), rounds)
    env = LocalEnvironment(registry)
    with LimitedModelServer(profile, model, keep_bodies=True) as server:
        provider = make_provider(config_for(server, **options))
        warning = provider.preflight()  # a server that hides its window is told what was assumed, nothing else
        assert warning is None or profile.tool_calls_as_text or (
            not profile.report_window and "reports no context window" in warning)
        agent = ModelAgent(provider)
        agent.reset(AgentContext(module="toy", case=None, tools=env.tools(), max_rounds=rounds))
        prompt = EpisodePrompt("system prompt", "the task, sent once\n- vol (id 1)", [tiny_png(64)])
        outcome = run_episode(agent, env, prompt, EpisodeConfig(max_rounds=rounds))
    return outcome, server, read_trace(tmp_path / "trace.jsonl")


# ------------------------------------------------------------------------------------------ policy and budget
def test_images_seen_beyond_the_history_become_stubs_and_the_budget_trims_to_the_limits():
    """The newest K images stay, and every image of the latest round even when it brought more; older ones
    become stubs naming id, view and offset."""
    from MedOpenClawLib.providers import ToolCall

    images = [ImageInput(tiny_png().png_base64, "observe:axial", "axial", f"img-{i}", float(i)) for i in range(10)]
    messages = [Message("system", "s"), Message("user", "task", images=images[:3])]
    for i in range(3, 9):
        messages += [Message("assistant", tool_calls=[ToolCall(f"c{i}", "observe", {})]),
                     Message("tool", f"out {i}", images=[images[i]], tool_call_id=f"c{i}", tool_name="observe")]
    messages[-1] = Message("tool", "out 8", images=images[8:], tool_call_id="c8", tool_name="observe")
    view, request = fit(messages, [], resolve_limits("anthropic"), 1024, ConversationPolicy(3, tool_history=None))
    kept = [image.image_id for m in view for image in m.images]
    assert kept == ["img-7", "img-8", "img-9"] and request["images_stubbed"] == 7
    assert len(messages[1].images) == 3  # the history itself is untouched
    assert "[image img-0 axial 0 mm: not attached; its id stays valid]" in view[1].text
    assert [m.text for m in fit(messages, [], resolve_limits("anthropic"), 1024, ConversationPolicy(0, None))[0]
            if m.images] == ["out 8"]  # 0: only what the latest round brought
    view, request = fit(messages, [], resolve_limits("mistral"), 1024, ConversationPolicy(None, None))
    assert request["images"] == 8 and request["images_stubbed"] == 2  # Mistral: 8 images per request
    first = fit(messages[:2], [], resolve_limits("anthropic"), 1024, ConversationPolicy(0, None))[0]
    assert len(first[1].images) == 3  # before its first turn the model has seen none: every task image goes
    tiny = resolve_limits("llamacpp", context_window=1200)
    with pytest.raises(ContextBudgetError):
        fit([Message("user", "x" * 5000)], [], tiny, 256, ConversationPolicy())


def test_old_rounds_become_one_line_each_at_drop_points_and_old_image_ids_still_work(tmp_path):
    """Rounds older than the latest and N before it shrink to one line each in the task (the calls, ok or error,
    what names the view, the image ids; never geometry, never a superseded viewer state), changing only at drop
    points so cached prefixes hold; an old image's 0..999 point still resolves by its id."""
    from runtime_data import call_ok, oblique_lps_affine, phantom, write_nifti

    from MedOpenClawLib.apps.radiology import build_slicer_registry
    from MedOpenClawLib.bench.episode import SUPERSEDED_STATE
    from MedOpenClawLib.providers import ToolCall

    root = tmp_path / "data"
    root.mkdir()
    write_nifti(root / "T1c.nii.gz", phantom(1), oblique_lps_affine())
    registry = build_slicer_registry([root])
    call_ok(registry, "open_case", dicom_dir=str(root), size=64)

    def episode(rounds: int) -> list[Message]:
        messages = [Message("system", "s"), Message("user", "task")]
        for round_id in range(rounds):
            result = call_ok(registry, "observe", view="axial", size=64)
            record = {"ok": True, "data": {**result.data, "view": "axial", "geometry": [[1.0] * 4] * 4},
                      "images": [{"view": "axial", "image_id": result.images[0].image_id}]}
            messages += [Message("assistant", tool_calls=[ToolCall(f"c{round_id}", "observe", {"view": "axial"})]),
                         Message("tool", feedback_text(record), tool_call_id=f"c{round_id}", tool_name="observe",
                                 result=record),
                         Message("user", f"viewer state {round_id}", superseded=SUPERSEDED_STATE)]
        return messages

    messages = episode(10)  # 9 finished rounds and the latest: drop point 9, 8 rounds shortened
    first_id = messages[3].result["images"][0]["image_id"]
    policy = ConversationPolicy(None, tool_history=1, drop_every=3)
    assert [policy.old_rounds(n) for n in (0, 2, 3, 5, 6, 9, 11)] == [0, 0, 2, 2, 5, 8, 8]
    view, request = fit(messages, [], resolve_limits("anthropic"), 1024, policy)
    task = view[1].text
    assert request["rounds_shortened"] == 8 and task.startswith("task\nEarlier rounds, shortened")
    assert f'1. observe {{"view":"axial"}} -> ok; view=axial; images {first_id}' in task
    assert "8. observe" in task and "9. observe" not in task and "geometry" not in task
    assert [m.text for m in view if m.role == "user"][1:] == ["viewer state 8", "viewer state 9"]
    # later requests before the next drop point: the shortened prefix is byte-identical
    longer = messages[:-1] + episode(12)[-7:]
    assert fit(longer, [], resolve_limits("anthropic"), 1024, policy)[0][1].text == task
    assert fit(messages, [], resolve_limits("anthropic"), 1024, ConversationPolicy(None, None))[1][
        "rounds_shortened"] == 0  # all: every round whole
    # the viewer keeps the geometry of every image id: a point on the oldest image still resolves
    point = call_ok(registry, "image_coords_to_ras", view="axial", point_1000=[500, 500], image_id=first_id)
    assert point.data["image_id"] == first_id and len(point.data["ras"]) == 3


def test_tool_calls_written_as_text_and_gemini_schemas():
    offered = {"observe", "scroll"}
    hermes = 'Let me look.<tool_call>\n{"name": "observe", "arguments": {"size": 64}}\n</tool_call>'
    calls, rest = text_tool_calls(hermes, offered)
    assert [(c.name, c.arguments, c.from_text) for c in calls] == [("observe", {"size": 64}, True)]
    assert rest == "Let me look."
    calls, _ = text_tool_calls('[TOOL_CALLS][{"name": "scroll", "arguments": {"view": "axial"}}]', offered)
    assert calls[0].name == "scroll" and calls[0].arguments == {"view": "axial"}
    calls, _ = text_tool_calls('[TOOL_CALLS]observe[ARGS]{"size": 32}', offered)
    assert calls[0].arguments == {"size": 32}
    assert text_tool_calls('{"name": "observe", "parameters": {}}', offered)[0][0].name == "observe"
    assert text_tool_calls('{"name": "answer", "arguments": {}}', offered) == ([], '{"name": "answer", '
                                                                                '"arguments": {}}')
    schema = {"type": "object", "additionalProperties": False, "properties": {
        "x": {"type": ["string", "null"]}, "n": {"type": "number", "exclusiveMinimum": 0},
        "k": {"const": "a"}, "m": {"oneOf": [{"type": "integer"}]}}}
    assert gemini_schema(schema) == {"type": "object", "properties": {
        "x": {"type": "string", "nullable": True}, "n": {"type": "number", "minimum": 0},
        "k": {"enum": ["a"]}, "m": {"anyOf": [{"type": "integer"}]}}}


HOSTILE_RUN = 256 * 1024  # a quadratic scan of one such run is ~2**35 steps: minutes to hours, not milliseconds


@pytest.mark.parametrize("reply", [
    "<tool_call>x" + " " * HOSTILE_RUN + "y",  # an unclosed block with a whitespace run inside
    "<tool_call>" + "\n" * HOSTILE_RUN + "{",
    "```json" + " " * HOSTILE_RUN + "y```z",  # almost a fence
    "```x" + " " * HOSTILE_RUN + "y",
    "[TOOL_CALLS]observe [CALL_ID] " + "a" * HOSTILE_RUN,
])
def test_tool_calls_in_text_are_read_in_linear_time(reply):
    """Hostile replies finish (a quadratic HERMES/FENCE regex took 6 s on 16 KB) and are read as what they are:
    no tool call, the text kept."""
    assert text_tool_calls(reply, {"observe"})[0] == []
    block = '<tool_call>{"name": "observe", "arguments": {}}</tool_call>'
    calls, rest = text_tool_calls(" " * HOSTILE_RUN + block + "<tool_call>" + " " * HOSTILE_RUN, {"observe"})
    assert [call.name for call in calls] == ["observe"] and rest == ""
    fenced = text_tool_calls("```json\n" + " " * HOSTILE_RUN + '{"name": "observe", "arguments": {}}\n```', {"observe"})
    assert [call.name for call in fenced[0]] == ["observe"]


def test_the_byte_budget_counts_the_body_as_encoded():
    """2.5 M four-byte characters of model text are 10 MB of UTF-8 and 30 MB of JSON (each escaped as a surrogate
    pair, 12 bytes): the budget trims to Gemini's 20 MB by the encoded body, which it estimated at 3 MB."""
    from MedOpenClawLib.providers import ToolCall
    from MedOpenClawLib.providers.http import encoded_size

    wordy = "\U0001F600" * 2_500_000
    messages = [Message("system", "s"), Message("user", "task")]
    for i in range(4):
        messages += [Message("assistant", wordy if i == 0 else "", tool_calls=[ToolCall(f"c{i}", "observe", {})]),
                     Message("tool", f"out {i}", tool_call_id=f"c{i}", tool_name="observe")]
    limits = resolve_limits("gemini")
    config = ProviderConfig(kind="openai", model="gemini-2.5-flash", base_url="http://127.0.0.1:9", api_key="k")
    provider = make_provider(config)
    view, request = fit(messages, [], limits, 1024, ConversationPolicy(None, None))
    body, _ = provider._request_body(view, [], True)
    assert encoded_size(body) <= request["bytes"] <= limits.max_request_bytes
    assert request["rounds_dropped"] == 1 and wordy not in [message.text for message in view]


def test_every_catalog_tool_converts_to_openai_strict_mode_and_is_accepted(tmp_path):
    """Strict mode (the fake refuses what OpenAI's documented subset refuses): every action of both applications,
    full and concise; in an episode the model's nulls for arguments it does not give never reach the registry."""
    from model_servers import strict_problem

    from MedOpenClawLib import apps
    from MedOpenClawLib.providers.tool_schemas import concise, drop_strict_nulls, openai_tools, strict_optional

    tools = [{key: entry[key] for key in ("name", "description", "parameters")} for entry in apps.entries()]
    for converted in (openai_tools(tools, "openai-strict"), openai_tools(concise(tools), "openai-strict")):
        problems = {tool["function"]["name"]: strict_problem(tool["function"]["parameters"], ())
                    for tool in converted if tool["function"]["strict"] is not True
                    or strict_problem(tool["function"]["parameters"], ())}
        assert len(converted) == len(tools) and problems == {}
    assert strict_problem({"type": "object", "properties": {"a": {"type": "string", "default": "x"}},
                           "required": ["a"], "additionalProperties": False}, ()) is not None  # the fake refuses
    fusion = strict_optional([tool for tool in tools if tool["name"] == "fusion"])["fusion"]
    assert "size" in fusion and "foreground_volume_ref" not in fusion  # an argument that takes null keeps it
    assert drop_strict_nulls({"size": None, "foreground_volume_ref": None}, fusion) == {"foreground_volume_ref": None}
    scripted = ScriptedVLM(rounds=3)

    def default_size(body: dict, profile: Profile) -> dict:  # the model leaves observe's size to its default
        reply = scripted(body, profile)
        for call in reply["choices"][0]["message"].get("tool_calls") or []:
            call["function"]["arguments"] = call["function"]["arguments"].replace('"size": 512', '"size": null')
        return reply

    outcome, server, records = toy_episode(tmp_path, PROFILES["openai-strict"], default_size, rounds=3)
    assert server.refusals == [] and outcome.rounds == 3
    assert all(body["tools"][0]["function"]["strict"] for body in server.bodies)
    receipts = [r["payload"] for r in records if r["kind"] == "tool_receipt"]
    assert receipts and all(None not in r["arguments"].values() for r in receipts if r["dispatched"])
    defaulted = [r for r in receipts if r["raw_arguments"] == '{"size": null}']
    assert defaulted and all(r["executed"] and r["arguments"] == {} and "nulls" in r["repair"] for r in defaulted)


def test_cli_profile_choices_are_the_providers_profiles():
    import argparse

    parser = argparse.ArgumentParser()
    add_bench_subcommand(parser.add_subparsers())
    run = parser._subparsers._group_actions[0].choices["run"]  # noqa: SLF001 - argparse has no public accessor
    (action,) = [a for a in run._actions if a.dest == "server_profile"]  # noqa: SLF001
    assert tuple(action.choices) == PROFILE_NAMES


# ------------------------------------------------------------------------------------------ wire rules per server
@pytest.mark.parametrize("name", ["gemini-3", "mistral", "anthropic-thinking", "vllm-32k", "gemini-2.5"])
def test_vendor_fields_and_message_order_round_trip(name, tmp_path):
    """Gemini 3 thought signatures, Mistral's no-user-after-tool rule, Anthropic thinking blocks, vLLM's valid JSON
    history (a call cut at max_tokens is echoed as {} and the model told), Gemini's schema subset."""
    quirks = frozenset({"truncated"}) if name == "vllm-32k" else frozenset()
    outcome, server, records = toy_episode(tmp_path, PROFILES[name], ScriptedVLM(rounds=4, quirks=quirks))
    assert server.refusals == [] and outcome.status == "completed" and outcome.rounds == 4
    assert outcome.final_text.endswith("ANSWER: A")
    if name == "vllm-32k":
        receipts = [r["payload"] for r in records if r["kind"] == "tool_receipt"]
        assert any((r["error"] or {}).get("code") == "truncated" for r in receipts)


def test_reply_quirks_are_acted_on_and_counted(tmp_path):
    """Tool calls as Hermes text (a server without a tool parser), one empty reply (one nudge), a call on the answer
    turn (refused with a request to answer), and an answer left only in reasoning_content (the documented rule)."""
    model = ScriptedVLM(rounds=5, quirks=frozenset({"empty", "answer_turn_call", "reasoning_answer"}))
    outcome, server, records = toy_episode(tmp_path, PROFILES["vllm-no-parser"], model, rounds=5)
    assert server.refusals == [] and outcome.rounds == 5 and outcome.final_text.endswith("ANSWER: A")
    assert outcome.deviations == {"tool_call_as_text": 6, "empty_reply": 1, "tool_call_on_answer_turn": 1,
                                  "answer_in_reasoning": 1}
    nudges = [m for body in server.bodies for m in body["messages"] if "last reply was empty" in json.dumps(m)]
    assert nudges


def test_a_limit_hit_anyway_ends_as_model_length_scored(tmp_path):
    """A refusal for length is retried once on a compact context; refused again, the model is asked for its answer
    without tools, and the episode completes (scored) with stop_reason model_length."""
    too_long = Scripted({"error": {"code": 400, "message": "the request exceeds the available context size, try "
                                   "increasing it", "type": "exceed_context_size_error"}}, 400)
    script = [Scripted(openai_reply(calls=[("observe", '{"size": 64}')]))] * 3 + [too_long, too_long,
                                                                                 Scripted(openai_reply("ANSWER: A"))]
    registry = toy_registry(AuditTrace(tmp_path / "trace.jsonl"), 10)
    env = LocalEnvironment(registry)
    with FakeModelServer(script) as server:
        agent = ModelAgent(make_provider(ProviderConfig(kind="openai", model="m", base_url=server.url, retry=FAST,
                                                        image_history=None)))  # every image until refused
        agent.reset(AgentContext(module="toy", case=None, tools=env.tools(), max_rounds=10))
        outcome = run_episode(agent, env, EpisodePrompt("s", "task", [tiny_png()]), EpisodeConfig(max_rounds=10))
    assert outcome.status == "completed" and outcome.stop_reason == "model_length"
    assert outcome.final_text == "ANSWER: A" and outcome.rounds == 3
    bodies = [request["body"] for request in server.requests]
    images = [json.dumps(body).count('"type": "image_url"') for body in bodies]
    assert images[3] == 4 and images[4] == 2 and images[5] == 0  # each refusal: a more compact context
    assert bodies[5]["tool_choice"] == "none" and "no longer fits" in json.dumps(bodies[5]["messages"][-1])
    assert [r for r in read_trace(tmp_path / "trace.jsonl") if r["kind"] == "model_length"]


def test_the_budget_keeps_a_small_server_from_refusing_or_dropping(tmp_path):
    for name in ("llamacpp-16k", "ollama-32k"):
        outcome, server, _ = toy_episode(tmp_path / name, PROFILES[name], ScriptedVLM(rounds=8), rounds=8)
        assert server.refusals == [] and all(stats.dropped == 0 for stats in server.stats)
        assert outcome.stop_reason == "budget" or outcome.final_text.endswith("ANSWER: A")


def test_preflight_refuses_text_only_and_tool_less_servers_in_one_line():
    for name, text in (("text-only", "does not accept images"), ("no-tools", "does not accept tools")):
        with LimitedModelServer(PROFILES[name], ScriptedVLM()) as server:
            with pytest.raises(ProviderError, match=text) as caught:
                make_provider(config_for(server)).preflight()
        assert caught.value.fatal and "\n" not in str(caught.value)
    with LimitedModelServer(PROFILES["anthropic-thinking"], ScriptedVLM(), keep_bodies=True) as server:
        assert make_provider(config_for(server)).preflight() is None  # max_tokens above the thinking budget
        assert server.bodies[0]["max_tokens"] > 1024


# ------------------------------------------------------------------------------------------ end to end, per module
E2E = {"ucsf-pdgm": "anthropic", "lumiere": "vllm-32k", "nsclc": "mistral", "bracs": "gemini-3",
       "camelyon17": "llamacpp-16k"}


@pytest.fixture(scope="module")
def cohort():
    """The suite's cached demo cohort (ctest's demo_cohort generates it first), each module's package; ``--limit 1``
    runs its first case."""
    from MedOpenClawLib.bench.cohort_cache import synthetic_packages

    return synthetic_packages(sorted(E2E))


@pytest.mark.usefixtures("warm_workers")  # the commands as typed, their episodes on a warm worker
@pytest.mark.parametrize("module", sorted(E2E))
def test_bench_run_per_module_against_a_limited_server(module, cohort, tmp_path, capsys):
    profile = PROFILES[E2E[module]]
    rounds = 3
    with LimitedModelServer(profile, ScriptedVLM(rounds=rounds)) as server:
        argv = ["bench", "run", "--module", module, "--agent", "model", "--provider", profile.wire, "--model",
                MODELS.get(profile.name, "local-vlm"), "--base-url", server.url, "--limit", "1", "--max-rounds",
                str(rounds + 1), "--out", str(tmp_path / "run"), "--max-retries", "1", "--cases", str(cohort[module])]
        code = main(argv)
    captured = capsys.readouterr()
    summary = json.loads((captured.out.strip().splitlines() or ["{}"])[-1])
    assert code == 0 and (summary["scored"], summary["errors"], summary["rejected"]) == (1, 0, 0), captured.err
    assert server.refusals == [], server.refusals
    trace = next((tmp_path / "run").rglob("trace-*.jsonl"))
    records = read_trace(trace)
    receipts = [r["payload"] for r in records if r["kind"] == "tool_receipt"]
    assert len(receipts) == 2 * rounds  # the whole scripted trajectory, two calls per round
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    conversation = run["provider"]["conversation"]
    assert (conversation["image_history"], conversation["tool_history"]) == (DEFAULT_IMAGE_HISTORY,
                                                                             DEFAULT_TOOL_HISTORY)
    assert max(stats.images for stats in server.stats) <= 8
