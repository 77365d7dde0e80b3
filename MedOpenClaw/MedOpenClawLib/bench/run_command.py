"""``medopenclaw bench run``: its flags, and turning them into a run (pre-flight, runner, exit status).

Registering the flags imports nothing heavy, so ``bench run --help`` is instant; the runner and everything it
needs are imported only when a run starts.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from ..cli import COUNT, NON_NEGATIVE, SECONDS, Number, executable, user_path
from ..core.sinks import terminal_text
from ..providers.kinds import KINDS
from .cohort_cache import synthetic_cases
from .model_families import FAMILIES
from .run_summary import print_summary
from .spec import OFFLINE_AGENT_NAMES

MODEL_AGENTS = ("model", "montage")  # agents that call a model provider


def agent_factory(args, provider) -> Callable:
    """``make_agent(task)`` for the chosen agent; ``provider`` is the resolved ProviderConfig of model agents."""
    from .agents import OFFLINE_AGENTS
    from .agents.model import ModelAgent
    from .agents.replay import ReplayAgent, episode_trace, recorded_outputs

    if args.agent in OFFLINE_AGENTS:
        return lambda task: OFFLINE_AGENTS[args.agent]()
    if args.agent in MODEL_AGENTS:
        from ..providers import make_provider

        return lambda task: ModelAgent(make_provider(provider), name=args.agent)
    if args.agent == "replay":
        def replay(task):
            trace = episode_trace(args.replay_from, task.episode_id)
            return ReplayAgent(recorded_outputs(trace), source=str(trace))

        return replay
    raise ValueError(f"unknown agent {args.agent!r}")


def provider_config(args):
    """The model agents' ProviderConfig from flags and MEDOPENCLAW_* variables; None for other agents."""
    if args.agent not in MODEL_AGENTS:
        return None
    from ..providers import ProviderConfig, RetryPolicy
    from ..providers.pricing import load_price

    config = ProviderConfig.resolve(
        model=args.model, provider=args.provider, base_url=args.base_url, temperature=args.temperature,
        seed=args.seed, timeout_s=args.model_timeout, max_tokens=args.max_tokens or args.max_completion_tokens
        or 2048, token_limit_field="max_completion_tokens" if args.max_completion_tokens else "max_tokens",
        extra_body=args.extra_body or {}, context_window=args.context_window,
        profile=args.server_profile, retry=RetryPolicy(max_retries=args.max_retries, deadline_s=args.retry_deadline),
        api_version=args.api_version, region=args.region, project=args.project, stream=args.stream,
        **{key: getattr(args, key) for key in ("image_history", "tool_history") if hasattr(args, key)})
    if args.prices:
        config.price = load_price(args.prices, config.model)
        if config.price is None:
            print(terminal_text(f"warning: {args.prices} has no price for {config.model}: costs are not reported"),
                  file=sys.stderr)
    return config


def check_agent_track(args, module: str) -> None:
    """The options ``module`` must agree with (tasks.check_options), and Track C is the one-turn montage
    baseline: only the montage agent (or a replay of one) runs there."""
    from .tasks import check_options

    check_options(module, args.track, args.toolset, args.operators)
    if args.agent == "montage" and args.track != "C":
        raise ValueError("--agent montage is the Track C baseline: add --track C")
    if args.track == "C" and args.agent not in ("montage", "replay"):
        raise ValueError("Track C runs --agent montage (or --agent replay of a montage run)")
    if (args.agent == "replay") != bool(args.replay_from):
        raise ValueError("--agent replay needs --replay-from RUN_DIR, and --replay-from needs --agent replay")


def executor_factory(args):
    """``--executor``: the local process pool (default), or one Ray actor per worker (the ``ray`` extra)."""
    from .runner import local_executor

    if args.executor == "local":
        if args.ray_address or args.ray_gpus_per_worker is not None:
            raise ValueError("--ray-address and --ray-gpus-per-worker need --executor ray")
        return local_executor
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ValueError("--executor ray needs Ray: pip install 'medopenclaw[ray]'") from None
    from .ray_executor import RayExecutor, check_reachable

    if args.ray_address:
        check_reachable(args.ray_address)
    return lambda job, config, on_round: RayExecutor(job, on_round, address=args.ray_address,
                                                     num_gpus=args.ray_gpus_per_worker)


def _workers(text: str) -> int | str:
    if text == "auto":
        return text
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError("a positive number of workers, or 'auto'")
    return int(text)


def _modules(text: str) -> list[str]:
    """One ``--module`` value: a module, a comma-separated list of them, or ``all``."""
    from .modules import names

    named = [name for name in text.split(",") if name]
    unknown = sorted(set(named) - {*names(), "all"})
    if unknown or not named:
        raise argparse.ArgumentTypeError(f"unknown module {', '.join(unknown) or repr(text)} (choose from "
                                         f"{', '.join(names())}, or all)")
    return list(names()) if "all" in named else named


def module_list(values: list[list[str]]) -> list[str]:
    """Every module the ``--module`` values name, once each, in the benchmark's order."""
    from .modules import names

    named = {name for value in values for name in value}
    return [module for module in names() if module in named]


def module_cases(args, module: str, several: bool, step: str = "") -> Path:
    """The case package of ``module``: ``--cases`` itself (one module), ``--cases``/<module> (several: a folder
    of `bench prepare` packages), or the embedded synthetic cohort."""
    if not args.cases:
        return synthetic_cases(module, args.cohort_seed, cache_dir=args.cache_dir, size=args.cohort_size, step=step)
    if not several:
        return Path(args.cases)
    package = Path(args.cases) / module
    if not (package / "manifest.json").is_file():
        raise ValueError(f"several modules need --cases to hold one package per module: {package} has no "
                         "manifest.json")
    return package


def combined_summary(summaries: dict[str, dict]) -> dict:
    """One summary of a run over several modules: each module's summary, the episode counts summed, and the
    macro means (each module's mean counts once, as in Table 1's average)."""
    def macro(metric: str) -> float | None:
        values = [summary[metric] for summary in summaries.values() if summary.get(metric) is not None]
        return round(sum(values) / len(values), 4) if values else None

    counts = {key: sum(int(summary.get(key) or 0) for summary in summaries.values())
              for key in ("episodes", "scored", "invalid", "errors", "rejected", "rejected_now", "missing",
                          "executed_now")}
    return {"modules": summaries, **counts, "task_macro": macro("task"), "strict_macro": macro("strict"),
            "loc_macro": macro("loc"), "interrupted": any(s.get("interrupted") for s in summaries.values()),
            "stopped": next((s["stopped"] for s in summaries.values() if s.get("stopped")), None)}


def _run(args) -> int:
    from ..core.provenance import provenance
    from ..providers import ProviderError, make_provider
    from .outcomes import EXIT_ERRORS, EXIT_USAGE, exit_status, write_json_atomic
    from .preload import module_prompt
    from .runner import BenchmarkRunner
    from .tasks import RunConfig

    summaries: dict[str, dict] = {}
    try:
        args.toolset = resolved_toolset(args)  # once: a replay's is read from the replayed run
        modules = module_list(args.module)
        for module in modules:
            check_agent_track(args, module)
        provider = provider_config(args)
        if provider is not None and not args.no_preflight:
            warning = make_provider(provider).preflight()
            if warning:
                print(f"warning: {terminal_text(warning)}", file=sys.stderr)
        resume = shlex.join(["medopenclaw", *args.argv]) if getattr(args, "argv", None) else "the same command"
        packages = {module: module_cases(args, module, len(modules) > 1, f"{number}/{len(modules)}")
                    for number, module in enumerate(modules, 1)}
        for module, cases_dir in packages.items():
            if len(modules) > 1:
                print(f"{module}:", file=sys.stderr)
            out = Path(args.out) / module if len(modules) > 1 else Path(args.out)
            config = RunConfig(module=module, agent=args.agent, out=out, cases_dir=cases_dir,
                               track=args.track, limit=args.limit, case_ids=args.case_ids, repeats=args.repeats,
                               workers=args.workers, slicer=args.slicer, max_rounds=args.max_rounds,
                               max_tool_calls=args.max_tool_calls, model_family=args.model_family,
                               seed=args.seed or 0,
                               provider=provider, call_timeout_s=args.call_timeout, fail_on_error=args.fail_on_error,
                               episode_timeout_s=args.episode_timeout,
                               rerun_rejected=args.rerun_rejected, operators=args.operators,
                               toolset=args.toolset,
                               replay_from=str(Path(args.replay_from).resolve()) if args.replay_from else None)
            summary = summaries[module] = BenchmarkRunner(
                config, agent_factory(args, provider), module_prompt, resume_hint=resume,
                make_executor=executor_factory(args), provenance=provenance(getattr(args, "argv", None))).run()
            if summary.get("interrupted") or summary.get("stopped"):
                break  # Ctrl-C or the error policy ends the whole run, not one module
    except ProviderError as error:
        print(f"error: model pre-flight failed: {terminal_text(error)}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as error:
        print(f"error: {terminal_text(error)}", file=sys.stderr)
        return EXIT_USAGE
    if len(modules) > 1:
        summary = combined_summary(summaries)
        summary["missing"] += sum(1 for module in modules if module not in summaries)  # modules never started
        write_json_atomic(Path(args.out) / "summary.json", summary)
    # for programs the last stdout line is the aggregate, keys as `bench score`; a person at a terminal gets a table
    print_summary(summary, Path(args.out), sys.stdout, args.json or not sys.stdout.isatty())
    status = exit_status(summary)
    if status == EXIT_ERRORS and summary.get("stopped"):
        print(f"error: run stopped: {terminal_text(summary['stopped'])}", file=sys.stderr)
    return status


def resolved_toolset(args) -> str:
    """``--toolset``, else the replayed run's (run.json), else ``paper``."""
    if args.toolset:
        return args.toolset
    if args.replay_from:
        try:
            recorded = json.loads((Path(args.replay_from) / "run.json").read_text(encoding="utf-8")).get("toolset")
        except (OSError, ValueError, AttributeError):
            recorded = None  # the replay itself names what is missing
        if isinstance(recorded, str):
            return recorded
    return "paper"


def _limit(text: str) -> int | tuple[int, int]:
    from .tasks import parse_limit

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
    from .tasks import parse_operators

    try:
        return parse_operators(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _fail_on_error(text: str) -> float:
    from .outcomes import parse_fail_on_error

    try:
        return parse_fail_on_error(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _history(text: str) -> int | None:
    from ..providers.conversation import parse_history

    try:
        return parse_history(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _needing(option: str) -> str:
    """The providers whose endpoint needs ``option`` (their declarations say so)."""
    return ", ".join(kind.name for kind in KINDS.values() if option in kind.needs)


def add_bench_subcommand(bench_subparsers) -> None:
    from .modules import names
    from .tasks import MAX_REPEATS, TOOLSETS, TRACKS

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
    # defaults: the conversation policy's (providers.conversation, imported only when a model agent runs)
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
    model.add_argument("--server-profile", choices=("openai", "openai-strict", "anthropic", "gemini", "mistral",
                                                    "vllm", "ollama", "llamacpp", "openai-compatible"),
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
    parser.set_defaults(func=_run)
