"""``medopenclaw bench run``: its flags. Registering them imports nothing heavy, so ``bench run --help`` is
instant; :mod:`.run_launch` turns them into a run (pre-flight, runner, exit status) and is imported only when a
run starts (:func:`..cli.deferred`).
"""

from __future__ import annotations

import argparse
import json

from ..cli import COUNT, NON_NEGATIVE, SECONDS, Number, deferred, executable, user_path
from ..providers.kinds import KINDS
from ..providers.limits import PROFILE_NAMES
from .model_families import FAMILIES
from .modules import names
from .outcomes import parse_fail_on_error
from .spec import OFFLINE_AGENT_NAMES
from .tasks import MAX_REPEATS, TOOLSETS, TRACKS, parse_limit, parse_operators

MODEL_AGENTS = ("model", "montage")  # agents that call a model provider


def _workers(text: str) -> int | str:
    if text == "auto":
        return text
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError("a positive number of workers, or 'auto'")
    return int(text)


def _modules(text: str) -> list[str]:
    """One ``--module`` value: a module, a comma-separated list of them, or ``all``."""
    named = [name for name in text.split(",") if name]
    unknown = sorted(set(named) - {*names(), "all"})
    if unknown or not named:
        raise argparse.ArgumentTypeError(f"unknown module {', '.join(unknown) or repr(text)} (choose from "
                                         f"{', '.join(names())}, or all)")
    return list(names()) if "all" in named else named


def module_list(values: list[list[str]]) -> list[str]:
    """Every module the ``--module`` values name, once each, in the benchmark's order."""
    named = {name for value in values for name in value}
    return [module for module in names() if module in named]


def _limit(text: str) -> int | tuple[int, int]:
    try:
        return parse_limit(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _case_ids(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise argparse.ArgumentTypeError("a comma-separated list of case ids")
    return names


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not JSON: {error.msg} at position {error.pos}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object, e.g. '{\"top_k\": 20}'")
    return value


def _operators(text: str) -> tuple[str, ...]:
    try:
        return parse_operators(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _fail_on_error(text: str) -> float:
    try:
        return parse_fail_on_error(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _history(text: str) -> int | None:
    """``--image-history`` / ``--tool-history``: a whole number (0: only what the latest round brought), or ``all``
    (None). Parsed here, not in the conversation policy's module: that one imports the HTTP client, which every
    ``bench`` command would then load to build its parsers."""
    if text.strip().lower() == "all":
        return None
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"takes a whole number or 'all', not {text!r}")
    return int(text)


def _needing(option: str) -> str:
    """The providers whose endpoint needs ``option`` (their declarations say so)."""
    return ", ".join(kind.name for kind in KINDS.values() if option in kind.needs)


def add_bench_subcommand(bench_subparsers) -> None:
    parser = bench_subparsers.add_parser("run", help="run agents on MedFlow-Bench episodes (resumable)",
                                         description="Run agents on MedFlow-Bench episodes. Exit status: 0 every "
                                         "episode finished, 1 episodes in error or not run (run the same command "
                                         "again to re-run them), 2 usage or pre-flight error, 130 interrupted.")
    parser.add_argument("--module", required=True, nargs="+", type=_modules, metavar="MODULE",
                        help=f"benchmark module(s): {', '.join(names())}, several (space- or comma-separated) or "
                             "'all'; with several, each runs into --out/MODULE and --out/summary.json combines them")
    parser.add_argument("--agent", required=True, choices=[*OFFLINE_AGENT_NAMES, *MODEL_AGENTS, "replay"],
                        help="oracle, heuristic, random (offline); model; montage (Track C); replay")
    parser.add_argument("--replay-from", type=user_path,
                        help="--agent replay: an earlier run directory whose model outputs to replay")
    model = parser.add_argument_group("model agents (model, montage)")
    model.add_argument("--model", help="model name (or MEDOPENCLAW_MODEL)")
    model.add_argument("--provider", choices=tuple(KINDS), help="the model API (or MEDOPENCLAW_PROVIDER): " + "; ".join(
        f"{kind.name}: {kind.summary}" for kind in KINDS.values()))
    model.add_argument("--base-url", help="API base URL (or MEDOPENCLAW_BASE_URL); the key: MEDOPENCLAW_API_KEY")
    model.add_argument("--api-version", help=f"{_needing('api_version')}: the API version sent as ?api-version=")
    model.add_argument("--region", help=f"{_needing('region')}: the cloud region (e.g. us-east-1, us-east5, global)")
    model.add_argument("--project", help=f"{_needing('project')}: the Google Cloud project")
    model.add_argument("--stream", action=argparse.BooleanOptionalAction, default=None,
                       help="stream every request and assemble the server-sent events (default: only where the "
                            "vendor requires it, Anthropic above 21,333 max_tokens); for servers that only stream")
    model.add_argument("--temperature", type=Number(minimum=0, maximum=2), default=None,
                       help="sampling temperature; sent only when given (reasoning models reject it)")
    limit = model.add_mutually_exclusive_group()
    limit.add_argument("--max-tokens", type=COUNT, help="output token limit sent as max_tokens (default 2048)")
    limit.add_argument("--max-completion-tokens", type=COUNT,
                       help="output token limit sent as max_completion_tokens (OpenAI reasoning models)")
    model.add_argument("--extra-body", type=_json_object, metavar="JSON",
                       help="extra request fields for the server, e.g. '{\"top_k\": 20}' (vLLM, Ollama, OpenRouter)")
    model.add_argument("--prices", metavar="FILE", type=user_path,
                       help="price table JSON {model: {input, output, cached_input, cache_write}} in USD per "
                            "million tokens: adds cost per episode and run")
    model.add_argument("--model-timeout", type=SECONDS, default=120.0, help="seconds per model request")
    model.add_argument("--max-retries", type=NON_NEGATIVE, default=6, help="retries of a 429/5xx/connection failure")
    model.add_argument("--retry-deadline", type=SECONDS, default=300.0,
                       help="seconds one model call may spend on retries before its episode ends in error")
    model.add_argument("--no-preflight", action="store_true",
                       help="skip the request (one image, one tool) that checks key, URL, model, image input and tool "
                            "calling before workers start")
    # defaults: the conversation policy's (providers.conversation, applied only when a model agent runs)
    model.add_argument("--image-history", type=_history, default=argparse.SUPPRESS, metavar="K|all",
                       help="images each request carries: the last K at each drop point (older ones become text "
                            "stubs; default: the documented policy, see README), or all; recorded in run.json")
    model.add_argument("--tool-history", type=_history, default=argparse.SUPPRESS, metavar="N|all",
                       help="rounds whose tool outputs and viewer states each request carries whole: the last N at "
                            "each drop point (older ones become one-line stubs naming status, view and image ids; "
                            "default: the documented policy), or all; recorded in run.json")
    model.add_argument("--context-window", type=COUNT, metavar="TOKENS",
                       help="the server's context window (default: documented per server, reported by the server's "
                            "GET /models (vLLM, OpenRouter, LM Studio) or llama.cpp's /props, else 16384, said at the "
                            "pre-flight); every request is trimmed to fit it")
    model.add_argument("--server-profile", choices=PROFILE_NAMES,
                       help="whose documented limits requests are held to (default: detected from URL and model); "
                            "openai-strict: OpenAI with strict function calling")
    parser.add_argument("--fail-on-error", type=_fail_on_error, metavar="N|FRACTION",
                        help="stop starting episodes once N episodes (or more than FRACTION of the run) ended "
                             "in a provider error; errored episodes are re-run when the same command runs again")
    parser.add_argument("--rerun-rejected", action="store_true",
                        help="also re-run episodes the model server rejected deterministically (a 4xx) earlier")
    parser.add_argument("--track", choices=TRACKS, default="A",
                        help="A viewer-native, B advanced operators, C 2D slice montage in one turn")
    parser.add_argument("--operators", type=_operators, metavar="NAME[,NAME]",
                        help="Track B: offer only these operators -- operations segmentation, registration, "
                             "vista3d (Table 3's columns) or operator names; default: every operator")
    parser.add_argument("--toolset", choices=TOOLSETS,
                        help="the tools the agent is shown: paper (default; Table 9's viewer tools, Table 10's "
                             "pathology tools, plus Track B's operators) or extended (also MedOpenClaw's "
                             "evidence-capture and pathology setup actions); a replay keeps the replayed run's")
    parser.add_argument("--cases", type=user_path,
                        help="case packages from `bench prepare`; default: the synthetic cohort")
    parser.add_argument("--cohort-seed", type=NON_NEGATIVE, default=0, help="seed of the embedded synthetic cohort")
    parser.add_argument("--cohort-size", choices=("demo", "full"), default="demo",
                        help="embedded cohort size: demo (minutes on 2 cores) or full (1 mm brains, 0.75 um/px slides)")
    parser.add_argument("--cohort-cases", type=COUNT, metavar="N",
                        help="cases per module of the embedded cohort (default: MEDOPENCLAW_COHORT_CASES, else the "
                             "size's: 6 demo, 40 full); each count is cached apart")
    parser.add_argument("--cache-dir", type=user_path,
                        help="where the synthetic cohort is cached (default: MEDOPENCLAW_CACHE, ~/.cache/medopenclaw)")
    parser.add_argument("--limit", type=_limit, metavar="N|A-B",
                        help="the first N cases, or cases A to B (1-based, inclusive) of each package")
    parser.add_argument("--case-ids", type=_case_ids, metavar="ID,ID,...",
                        help="only these cases (comma-separated); --limit then applies to them")
    parser.add_argument("--repeats", type=Number(int, minimum=1, maximum=MAX_REPEATS), default=1,
                        help=f"episodes per case (each a fresh agent; at most {MAX_REPEATS})")
    parser.add_argument("--workers", type=_workers, default=1,
                        help="concurrent episodes (one viewer worker each), or 'auto': as many as the CPUs and "
                             "memory here (or the Ray cluster's resources) carry -- several per core for model "
                             "agents, which mostly wait on the model")
    parser.add_argument("--executor", choices=("local", "ray"), default="local",
                        help="local: worker processes on this machine; ray: one Ray actor per worker, anywhere in "
                             "a cluster (pip install 'medopenclaw[ray]')")
    parser.add_argument("--ray-address", help="--executor ray: the cluster to join (default: start a local one)")
    parser.add_argument("--ray-gpus-per-worker", type=Number(minimum=0),
                        help="--executor ray: GPUs each actor declares (default: 1 for Track B when the cluster "
                             "has GPUs, else 0)")
    parser.add_argument("--slicer", type=executable, help="path of a 3D Slicer executable to use as the worker")
    parser.add_argument("--max-rounds", type=COUNT, default=20, help="tool-call rounds per episode before the "
                                                                     "agent must answer (default 20)")
    parser.add_argument("--max-tool-calls", type=COUNT, help="tool calls per episode before the agent must answer, "
                                                            "beside --max-rounds (Table 7's operation budget; "
                                                            "default: no limit but the rounds)")
    parser.add_argument("--model-family", choices=FAMILIES, help="how the report groups the model: "
                        + ", ".join(FAMILIES) + " (default: from its name by a table of known models, else general)")
    parser.add_argument("--seed", type=NON_NEGATIVE,
                        help="seed of the offline agents' sampling (default 0) and of the model's, sent only when "
                             "given and only to APIs that take one (many servers refuse an unknown seed)")
    parser.add_argument("--call-timeout", type=SECONDS, default=300.0, help="seconds before a worker call is a hang")
    parser.add_argument("--episode-timeout", type=SECONDS, metavar="S",
                        help="wall-clock seconds an episode may take (default: no limit); past it the episode ends "
                             "as episode_timeout: the model's outcome (scored on the answer it had, kept in n), or "
                             "INVALID when viewer calls took half of it")
    parser.add_argument("--json", action="store_true",
                        help="end with the summary JSON line on a terminal too (it always does when stdout is not "
                             "a terminal)")
    parser.add_argument("--out", required=True, type=user_path,
                        help="run directory (created; the same command resumes into it)")
    parser.set_defaults(func=deferred("MedOpenClawLib.bench.run_launch:run"))
