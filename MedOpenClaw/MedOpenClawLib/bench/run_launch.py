"""``medopenclaw bench run`` once its flags are parsed: the pre-flight, one runner per module, the combined summary
and the exit status. Imported only when a run starts (:func:`..cli.deferred`): the runner's stack (numpy, scipy,
Pillow, requests) would make ``bench run --help`` take seconds; :mod:`.run_command` registers the flags.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from ..core.provenance import provenance
from ..core.sinks import terminal_text
from ..providers import ProviderConfig, ProviderError, RetryPolicy, make_provider
from ..providers.pricing import load_price
from .agents import OFFLINE_AGENTS
from .agents.model import ModelAgent
from .agents.replay import ReplayAgent, episode_trace, recorded_outputs
from .cohort_cache import synthetic_packages
from .outcomes import EXIT_ERRORS, EXIT_USAGE, exit_status, write_json_atomic
from .preload import module_prompt
from .run_command import MODEL_AGENTS, module_list
from .run_summary import print_summary
from .runner import BenchmarkRunner, local_executor
from .tasks import RunConfig, check_options


def agent_factory(args, provider) -> Callable:
    """``make_agent(task)`` for the chosen agent; ``provider`` is the resolved ProviderConfig of model agents."""
    if args.agent in OFFLINE_AGENTS:
        return lambda task: OFFLINE_AGENTS[args.agent]()
    if args.agent in MODEL_AGENTS:
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
    check_options(module, args.track, args.toolset, args.operators)
    if args.agent == "montage" and args.track != "C":
        raise ValueError("--agent montage is the Track C baseline: add --track C")
    if args.track == "C" and args.agent not in ("montage", "replay"):
        raise ValueError("Track C runs --agent montage (or --agent replay of a montage run)")
    if (args.agent == "replay") != bool(args.replay_from):
        raise ValueError("--agent replay needs --replay-from RUN_DIR, and --replay-from needs --agent replay")


def executor_factory(args):
    """``--executor``: the local process pool (default), or one Ray actor per worker (the ``ray`` extra)."""
    if args.executor == "local":
        if args.ray_address or args.ray_gpus_per_worker is not None:
            raise ValueError("--ray-address and --ray-gpus-per-worker need --executor ray")
        return local_executor
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ValueError("--executor ray needs Ray: pip install 'medopenclaw[ray]'") from None
    from .ray_executor import RayExecutor, check_reachable  # ray (the optional [ray] extra)

    if args.ray_address:
        check_reachable(args.ray_address)
    return lambda job, config, on_round: RayExecutor(job, on_round, address=args.ray_address,
                                                     num_gpus=args.ray_gpus_per_worker)


def module_packages(args, modules: list[str]) -> dict[str, Path]:
    """The case package of each module: ``--cases`` itself (one module), ``--cases``/<module> (several: a folder
    of `bench prepare` packages), or the embedded synthetic cohort (its missing modules generated at once)."""
    if not args.cases:
        return synthetic_packages(modules, args.cohort_seed, args.cohort_cases, args.cache_dir, args.cohort_size)
    if len(modules) == 1:
        return {modules[0]: Path(args.cases)}
    packages = {module: Path(args.cases) / module for module in modules}
    for package in packages.values():
        if not (package / "manifest.json").is_file():
            raise ValueError(f"several modules need --cases to hold one package per module: {package} has no "
                             "manifest.json")
    return packages


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


def run(args) -> int:
    """``bench run``: every module the flags name, one after the other, into --out (resumable)."""
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
        packages = module_packages(args, modules)
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
