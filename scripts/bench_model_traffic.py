"""What a 20-round model episode sends, per module: the default conversation policy against ``--image-history all``
(the behaviour before the policy), against the repo's limit-enforcing fake servers -> ``bench/model_traffic.json``.

Per module and policy, over the episodes of ``--cases`` cases (a scripted GPT-4o/Claude-like model making two tool
calls per round for 20 rounds, then answering): images, bytes and tokens of the largest request, input tokens sent
per episode (Anthropic's image rule: w*h/750, text at 3.5 characters per token), and the same with prompt caching
(the part of each request identical to the previous one read from the cache, billed at 10 %, as Anthropic does),
and how many requests each documented server limit would have refused. The default policy also runs against the
strictest fake (llama.cpp at 16k, which refuses any request over its window): refusals there must be 0.

    python scripts/bench_model_traffic.py [--cases 2] [--rounds 20] [--modules ucsf-pdgm,...]
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

from MedOpenClawLib.bench.modules import names  # noqa: E402
from MedOpenClawLib.cli import main  # noqa: E402

CACHE_MARK = ', "cache_control": {"type": "ephemeral"}'  # breakpoints move each turn; the cached prefix does not
CACHED_PRICE = 0.1  # Anthropic bills cache reads at 10 % of the input price
STRICTEST = "llamacpp-16k"
# the documented per-request limits each request is checked against (model_servers.PROFILES, cited there)
CHECKED = ("anthropic", "gemini-2.5", "mistral", "vllm-32k", "ollama-32k", "llamacpp-16k")


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
    text = len(json.dumps({key: value for key, value in body.items()})) - sum(len(data) for data in images)
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
    previous: list = field(default_factory=list)

    def __call__(self, body: dict, profile: Profile) -> dict:
        if not any((tool.get("function") or tool).get("name") == "report_colour" for tool in body.get("tools", [])):
            self.measure(body)
        return self.model(body, profile)

    def measure(self, body: dict) -> None:
        messages = json.loads(json.dumps(body.get("messages", [])).replace(CACHE_MARK, ""))
        if len(messages) <= 2:  # a new episode starts
            self.previous = []
        shared = 0
        while shared < min(len(messages), len(self.previous)) and messages[shared] == self.previous[shared]:
            shared += 1
        total = tokens(body, "anthropic")
        cached = tokens({"messages": messages[:shared], "tools": body.get("tools")}, "anthropic") if shared else 0
        size = len(json.dumps(body))
        self.requests.append({"images": len(_images(body)), "bytes": size, "tokens": total,
                              "cached": min(cached, total), "episode_start": not self.previous,
                              "refused_by": [name for name in CHECKED if refusals(body, size, PROFILES[name])]})
        self.previous = messages


def small_cohort(root: Path, modules: list[str], cases: int) -> Path:
    """A coarse synthetic cohort (views are rendered at the same 512 px, so what a request carries is the same)."""
    from MedOpenClawLib.bench.loaders import prepare
    from MedOpenClawLib.bench.modules import get
    from MedOpenClawLib.bench.synthetic.cohort import CohortConfig, write_cohort

    config = CohortConfig(seed=7, cases=max(cases, 2), mri_spacing_mm=4, slide_size=(1024, 768), ct_size=96,
                          workers=1)
    write_cohort(root / "raw", config, modules=modules)
    for module in modules:
        prepare(module, root / "raw" / get(module).dataset_dir, root / "cases" / module)
    return root / "cases"


def run(module: str, profile: Profile, policy: str, cases: int, rounds: int, out: Path, cohort: Path,
        server_profile: str | None = None) -> tuple[dict, Recorder, LimitedModelServer]:
    recorder = Recorder(ScriptedVLM(rounds=rounds))
    with LimitedModelServer(profile, recorder) as server:
        argv = ["bench", "run", "--module", module, "--agent", "model", "--provider", profile.wire, "--model",
                "claude-sonnet-4" if profile.wire == "anthropic" else "local-vlm", "--base-url", server.url,
                "--limit", str(cases), "--max-rounds", str(rounds), "--image-history", policy,
                "--out", str(out), "--max-retries", "1", "--cases", str(cohort / module)]
        argv += ["--server-profile", server_profile] if server_profile else []
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            code = main(argv)
    summary = json.loads(stdout.getvalue().strip().splitlines()[-1])
    summary["exit_code"] = code
    return summary, recorder, server


def episodes(requests: list[dict]) -> list[list[dict]]:
    grouped: list[list[dict]] = []
    for request in requests:
        if request["episode_start"] or not grouped:
            grouped.append([])
        grouped[-1].append(request)
    return grouped


def report(summary: dict, recorder: Recorder) -> dict:
    per_episode = episodes(recorder.requests)
    largest = max(recorder.requests, key=lambda request: request["tokens"])
    sent = [sum(request["tokens"] for request in episode) for episode in per_episode]
    billed = [sum(r["tokens"] - r["cached"] + CACHED_PRICE * r["cached"] for r in episode) for episode in per_episode]
    refused = {name: sum(name in request["refused_by"] for request in recorder.requests) for name in CHECKED}
    return {
        "episodes": len(per_episode), "scored": summary.get("scored"), "errors": summary.get("errors"),
        "rejected": summary.get("rejected"),
        "requests_per_episode": round(len(recorder.requests) / len(per_episode), 1),
        "largest_request": {"images": max(r["images"] for r in recorder.requests),
                            "bytes": max(r["bytes"] for r in recorder.requests), "tokens": largest["tokens"]},
        "images_sent_per_episode": round(sum(r["images"] for r in recorder.requests) / len(per_episode), 1),
        "input_tokens_per_episode": round(sum(sent) / len(sent)),
        "cache_read_tokens_per_episode": round(sum(r["cached"] for r in recorder.requests) / len(per_episode)),
        "billed_input_tokens_per_episode_with_caching": round(sum(billed) / len(billed)),
        "requests_over_documented_limits": refused,
    }


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--modules", default=",".join(names()))
    parser.add_argument("--out", default=str(ROOT / "bench" / "model_traffic.json"))
    args = parser.parse_args()
    results: dict = {"rounds": args.rounds, "cases_per_module": args.cases, "token_rule": "anthropic w*h/750, "
                     "text/3.5", "cached_price": CACHED_PRICE, "strictest_server": STRICTEST, "modules": {}}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        cohort = small_cohort(Path(scratch) / "cohort", args.modules.split(","), args.cases)
        for module in args.modules.split(","):
            row = {}
            # today's behaviour: every image, the task every round, against a server that refuses nothing
            summary, recorder, _ = run(module, Profile("unlimited"), "all", args.cases, args.rounds,
                                       Path(scratch) / module / "all", cohort, server_profile="openai")
            row["all"] = report(summary, recorder)
            summary, recorder, _ = run(module, PROFILES["anthropic"], "6", args.cases, args.rounds,
                                       Path(scratch) / module / "default", cohort)
            row["default"] = report(summary, recorder)
            summary, recorder, server = run(module, PROFILES[STRICTEST], "6", args.cases, args.rounds,
                                            Path(scratch) / module / "strictest", cohort)
            row["default_on_strictest"] = {**report(summary, recorder), "refusals": len(server.refusals)}
            row["reduction"] = round(row["all"]["input_tokens_per_episode"]
                                     / row["default"]["input_tokens_per_episode"], 2)
            results["modules"][module] = row
            print(f"{module}: {row['all']['input_tokens_per_episode']} -> {row['default']['input_tokens_per_episode']}"
                  f" tokens/episode ({row['reduction']}x), strictest refusals "
                  f"{row['default_on_strictest']['refusals']}", file=sys.stderr)
    results["seconds"] = round(time.perf_counter() - started, 1)
    Path(args.out).write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main_bench()
