"""What a 20-round model episode sends, per module, against the repo's limit-enforcing fake servers
(Testing/Python/model_servers.py) -> ``bench/model_traffic.json``.

Traffic, per module: the defaults (the conversation policy, the paper's tool set) against ``--image-history all
--tool-history all`` with the tools a run showed before ``--toolset`` (radiology: all 24 actions, ``--toolset
extended``; pathology: Table 10's already), and apart the policy alone (with those tools), all on the Anthropic wire
format, a scripted GPT-4o/Claude-like model making two tool calls per round for 20 rounds, then answering. Per
episode: images, bytes and tokens of the largest request, the input tokens sent (Anthropic's image rule w*h/750,
text at 3.5 characters per token), and with prompt caching the tokens read from the cache (the prefix -- tools,
system, whole messages -- identical to the previous request's) reported apart from those written (every other prompt
token: the breakpoints sit on the latest turns), billed as Anthropic bills them (reads 10 %, writes 125 % of the
input price); and per documented server limit how many requests it would have refused.

Matrix, per module and fake server profile (OpenAI, OpenAI strict mode, Anthropic with and without extended
thinking, vLLM at 32k, Gemini 2.5 and 3, Mistral, Ollama at 32k, llama.cpp at 16k): one 20-round episode under the
default policy must finish scored with its full scripted trajectory (two tool calls per round), with no request
refused, over a documented limit, or silently cut; and a text-only or tool-less server must be refused by the
pre-flight (exit 2) in seconds.

    python scripts/bench_model_traffic.py [--cases 1] [--rounds 20] [--modules ucsf-pdgm,...] [--no-matrix]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "MedOpenClaw"))
sys.path.insert(0, str(ROOT / "Testing" / "Python"))

from model_servers import PROFILES, LimitedModelServer, Profile, ScriptedVLM, image_cost, png_size  # noqa: E402

from MedOpenClawLib.bench.modules import get, names  # noqa: E402
from MedOpenClawLib.cli import main  # noqa: E402
from MedOpenClawLib.core.audit import read_trace  # noqa: E402

CACHE_MARK = ', "cache_control": {"type": "ephemeral"}'  # breakpoints move each turn; the cached prefix does not
CACHE_READ_PRICE = 0.1  # Anthropic: cache reads at 10 % of the input price ...
CACHE_WRITE_PRICE = 1.25  # ... and 5-minute cache writes at 125 %
# the documented per-request limits each traffic request is checked against (model_servers.PROFILES, cited there)
CHECKED = ("anthropic", "gemini-2.5", "mistral", "vllm-32k", "ollama-32k", "llamacpp-16k")
MATRIX = ("openai", "openai-strict", "anthropic", "anthropic-thinking", "vllm-32k", "gemini-2.5", "gemini-3",
          "mistral", "ollama-32k", "llamacpp-16k")
REFUSED_BY_PREFLIGHT = ("text-only", "no-tools")
MODELS = {"anthropic": "claude-sonnet-4", "gemini-2.5": "gemini-2.5-flash", "gemini-3": "gemini-3-pro-preview",
          "mistral": "mistral-small-latest", "openai": "gpt-4o", "openai-strict": "gpt-4o"}
# what `bench run` showed before --toolset existed: every radiology action; pathology was held to Table 10 already
BEFORE_TOOLSET = {"radiology": "extended", "pathology": "paper"}
THINKING = '{"thinking": {"type": "enabled", "budget_tokens": 1024}}'


def _images(body: dict) -> list[str]:
    found = []
    for message in body.get("messages", []):
        stack = [message.get("content")]
        while stack:
            item = stack.pop()
            if isinstance(item, list):
                stack.extend(item)
            elif isinstance(item, dict):
                if item.get("type") == "image_url":
                    found.append(item["image_url"]["url"].split(",", 1)[1])
                elif item.get("type") == "image":
                    found.append(item["source"]["data"])
                else:
                    stack.append(item.get("content"))
    return found


def tokens(body: dict, rule: str) -> int:
    images = _images(body)
    text = len(json.dumps(body)) - sum(len(data) for data in images)
    return math.ceil(text / 3.5) + sum(image_cost(rule, *png_size(data)) for data in images)


def refusals(body: dict, size: int, profile: Profile) -> bool:
    """Whether ``profile``'s documented limits refuse (or, for Ollama, silently cut) this request."""
    images = _images(body)
    edges = [max(png_size(data)) for data in images] or [0]
    max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
    return bool((profile.max_images and len(images) > profile.max_images)
                or (profile.many_images and len(images) > profile.many_images
                    and max(edges) > profile.many_images_edge)
                or (profile.max_image_edge and max(edges) > profile.max_image_edge)
                or (profile.max_request_bytes and size > profile.max_request_bytes)
                or (profile.context and tokens(body, profile.image_rule) + max_tokens > profile.context))


@dataclass
class Recorder:
    """Wraps the scripted model: measures every request it answers (pre-flight excluded)."""

    model: ScriptedVLM
    requests: list[dict] = field(default_factory=list)
    previous: dict = field(default_factory=dict)

    def __call__(self, body: dict, profile: Profile) -> dict:
        if not any((tool.get("function") or tool).get("name") == "report_colour" for tool in body.get("tools", [])):
            self.measure(body)
        return self.model(body, profile)

    def measure(self, body: dict) -> None:
        plain = json.loads(json.dumps(body).replace(CACHE_MARK, ""))
        messages, previous = plain.get("messages", []), self.previous.get("messages", [])
        if len(messages) <= 2:  # a new episode starts
            previous = []
        shared = 0
        while shared < min(len(messages), len(previous)) and messages[shared] == previous[shared]:
            shared += 1
        prefix = {key: plain.get(key) for key in ("tools", "system")}
        same_prefix = bool(previous) and prefix == {key: self.previous.get(key) for key in prefix}
        total = tokens(body, "anthropic")
        cached = tokens({**prefix, "messages": messages[:shared]}, "anthropic") if same_prefix else 0
        size = len(json.dumps(body))
        self.requests.append({"images": len(_images(body)), "bytes": size, "tokens": total,
                              "cached": min(cached, total), "episode_start": not previous,
                              "tools": len(plain.get("tools") or []),
                              "tool_tokens": tokens({"tools": plain.get("tools")}, "anthropic"),
                              "refused_by": [name for name in CHECKED if refusals(body, size, PROFILES[name])]})
        self.previous = plain


def small_cohort(root: Path, modules: list[str], cases: int) -> Path:
    """A coarse synthetic cohort (views are rendered at the same 512 px, so what a request carries is the same)."""
    from MedOpenClawLib.bench.modules import get
    from MedOpenClawLib.bench.package import prepare
    from MedOpenClawLib.bench.synthetic.cohort import CohortConfig, write_cohort

    config = CohortConfig(seed=7, cases=max(cases, 2), mri_spacing_mm=4, slide_size=(1024, 768), ct_size=96,
                          workers=1)
    write_cohort(root / "raw", config, modules=modules)
    for module in modules:
        prepare(get(module), root / "raw" / get(module).dataset_dir, root / "cases" / module)
    return root / "cases"


def run(module: str, profile: Profile, model, cases: int, rounds: int, out: Path, cohort: Path,
        options: list[str]) -> tuple[dict, LimitedModelServer, float]:
    """One ``bench run --agent model`` against a fake of ``profile``: (summary, server, seconds)."""
    started = time.perf_counter()
    with LimitedModelServer(profile, model) as server:
        argv = ["bench", "run", "--module", module, "--agent", "model", "--provider", profile.wire, "--model",
                MODELS.get(profile.name.removesuffix("-thinking"), "local-vlm"), "--base-url", server.url,
                "--limit", str(cases), "--max-rounds", str(rounds), "--out", str(out), "--max-retries", "1",
                "--cases", str(cohort / module), *options]
        argv += ["--extra-body", THINKING] if profile.thinking_budget else []
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = main(argv)
    lines = stdout.getvalue().strip().splitlines()
    summary = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    summary["exit_code"] = code
    summary["stderr_tail"] = stderr.getvalue().strip().splitlines()[-1:]
    return summary, server, time.perf_counter() - started


def episodes(requests: list[dict]) -> list[list[dict]]:
    grouped: list[list[dict]] = []
    for request in requests:
        if request["episode_start"] or not grouped:
            grouped.append([])
        grouped[-1].append(request)
    return grouped


def traffic(summary: dict, recorder: Recorder) -> dict:
    per_episode = episodes(recorder.requests)
    count = len(per_episode)

    def per(key: str) -> int:
        return round(sum(request[key] for request in recorder.requests) / count)

    sent, read = per("tokens"), per("cached")
    return {
        "episodes": count, "scored": summary.get("scored"), "errors": summary.get("errors"),
        "rejected": summary.get("rejected"), "requests_per_episode": round(len(recorder.requests) / count, 1),
        "largest_request": {key: max(r[key] for r in recorder.requests) for key in ("images", "bytes", "tokens")},
        "images_sent_per_episode": round(per("images")),
        "tools_offered": max(request["tools"] for request in recorder.requests),
        "tool_list_tokens_per_request": round(sum(r["tool_tokens"] for r in recorder.requests)
                                              / len(recorder.requests)),
        "input_tokens_per_episode": sent,
        "cache_read_tokens_per_episode": read,
        "cache_write_tokens_per_episode": sent - read,
        "billed_input_tokens_per_episode_with_caching": round((sent - read) * CACHE_WRITE_PRICE
                                                              + read * CACHE_READ_PRICE),
        "requests_over_documented_limits": {name: sum(name in r["refused_by"] for r in recorder.requests)
                                            for name in CHECKED},
    }


def module_traffic(module: str, args, scratch: Path, cohort: Path) -> dict:
    row = {}
    before = ["--toolset", BEFORE_TOOLSET[get(module).application]]
    for policy, options in (("all", ["--image-history", "all", "--tool-history", "all", *before,
                                     "--server-profile", "openai"]), ("policy_only", before), ("default", [])):
        # all: the behaviour before the policy and the paper's tool set, against a server that refuses nothing
        # (held to OpenAI's roomy limits, so the budget trims nothing); else against the Anthropic fake
        profile = Profile("unlimited", "anthropic") if policy == "all" else PROFILES["anthropic"]
        recorder = Recorder(ScriptedVLM(rounds=args.rounds))
        summary, _, seconds = run(module, profile, recorder, args.cases, args.rounds, scratch / module / policy,
                                  cohort, options)
        row[policy] = {**traffic(summary, recorder), "seconds": round(seconds, 1)}
    row["reduction"] = round(row["all"]["input_tokens_per_episode"] / row["default"]["input_tokens_per_episode"], 2)
    row["reduction_by_the_policy_alone"] = round(row["all"]["input_tokens_per_episode"]
                                                 / row["policy_only"]["input_tokens_per_episode"], 2)
    row["billed_reduction_with_caching"] = round(row["all"]["billed_input_tokens_per_episode_with_caching"]
                                                 / row["default"]["billed_input_tokens_per_episode_with_caching"], 2)
    return row


def trajectory(out: Path) -> list[int]:
    """Tool calls received per episode (the scripted trajectory: two per round)."""
    return [sum(record["kind"] == "tool_receipt" for record in read_trace(trace))
            for trace in sorted(out.rglob("trace-*.jsonl"))]


def matrix_cell(module: str, name: str, args, scratch: Path, cohort: Path) -> dict:
    profile = PROFILES[name]
    options = ["--server-profile", "openai-strict"] if profile.strict_tools else []
    out = scratch / module / f"matrix-{name}"
    summary, server, seconds = run(module, profile, ScriptedVLM(rounds=args.rounds), args.cases, args.rounds, out,
                                   cohort, options)
    calls = trajectory(out)
    cell = {"scored": summary.get("scored"), "errors": summary.get("errors"), "rejected": summary.get("rejected"),
            "exit_code": summary["exit_code"], "tool_calls_per_episode": calls,
            "refusals": len(server.refusals), "requests_cut_by_server": sum(s.dropped > 0 for s in server.stats),
            "largest_request": {"images": max(s.images for s in server.stats),
                                "tokens_by_the_server": max(s.tokens for s in server.stats),
                                "bytes": max(s.bytes for s in server.stats)},
            "seconds": round(seconds, 1)}
    cell["ok"] = bool(summary.get("scored") == args.cases and not summary.get("errors") and not cell["refusals"]
                      and not cell["requests_cut_by_server"] and calls == [2 * args.rounds] * args.cases)
    if server.refusals:
        cell["first_refusal"] = server.refusals[0][:300]
    return cell


def preflight_refusals(module: str, args, scratch: Path, cohort: Path) -> dict:
    found = {}
    for name in REFUSED_BY_PREFLIGHT:
        summary, server, seconds = run(module, PROFILES[name], ScriptedVLM(rounds=args.rounds), args.cases,
                                       args.rounds, scratch / f"preflight-{name}", cohort, [])
        found[name] = {"exit_code": summary["exit_code"], "seconds": round(seconds, 2),
                       "message": summary["stderr_tail"], "requests": len(server.stats),
                       "ok": summary["exit_code"] == 2 and len(server.stats) == 1}
    return found


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--modules", default=",".join(names()))
    parser.add_argument("--no-matrix", action="store_true", help="traffic only")
    parser.add_argument("--out", default=str(ROOT / "bench" / "model_traffic.json"))
    args = parser.parse_args()
    modules = args.modules.split(",")
    from MedOpenClawLib.providers.conversation import ConversationPolicy

    results: dict = {"rounds": args.rounds, "cases_per_module": args.cases, "wire": "anthropic",
                     "token_rule": "anthropic w*h/750, text/3.5", "default_policy": ConversationPolicy().to_json(),
                     "cache_prices": {"read": CACHE_READ_PRICE, "write": CACHE_WRITE_PRICE}, "modules": {}}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        cohort = small_cohort(Path(scratch) / "cohort", modules, args.cases)
        for module in modules:
            row = module_traffic(module, args, Path(scratch), cohort)
            if not args.no_matrix:
                row["matrix"] = {name: matrix_cell(module, name, args, Path(scratch), cohort) for name in MATRIX}
            results["modules"][module] = row
            failed = [name for name, cell in row.get("matrix", {}).items() if not cell["ok"]]
            print(f"{module}: {row['all']['input_tokens_per_episode']} -> {row['default']['input_tokens_per_episode']}"
                  f" tokens/episode ({row['reduction']}x); matrix failures: {failed or 'none'}", file=sys.stderr)
        if not args.no_matrix:
            results["preflight_refusals"] = preflight_refusals(modules[0], args, Path(scratch), cohort)
    results["all_matrix_cells_ok"] = all(cell["ok"] for row in results["modules"].values()
                                         for cell in row.get("matrix", {}).values())
    results["seconds"] = round(time.perf_counter() - started, 1)
    out = Path(args.out)
    if out.exists():  # the per-provider entries are scripts/bench_provider_traffic.py's
        previous = json.loads(out.read_text(encoding="utf-8"))
        results.update({key: previous[key] for key in ("providers", "provider_sdks") if key in previous})
    out.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main_bench()
