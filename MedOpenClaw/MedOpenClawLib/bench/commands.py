"""``medopenclaw bench ...`` sub-commands: cohort, prepare, parse, score, report, compare.

Extension hook (agreed with the runner/agents owner): every module named in :data:`EXTENSION_MODULES` may
define ``add_bench_subcommand(bench_subparsers)``. It is called with the ``bench`` sub-parser collection after
the sub-commands of this file are registered, so ``bench run`` lives in ``MedOpenClawLib/bench/run_command.py`` and
registers itself there with ``bench_subparsers.add_parser("run", ...)`` and ``set_defaults(func=...)``.
A listed module that does not exist yet is skipped; any other import error propagates.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ..cli import COUNT, NON_NEGATIVE, Number, deferred, user_path
from ..core.sinks import json_text, terminal_text
from .modules import names, prepare_options

EXTENSION_MODULES = ("MedOpenClawLib.bench.run_command",)


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    bench = subparsers.add_parser("bench", help="MedFlow-Bench: run, report, compare, cohort, prepare, parse, score")
    bench_subparsers = bench.add_subparsers(dest="bench_command", required=True)
    for register in (_add_cohort, _add_prepare, _add_parse, _add_score, _add_report, _add_compare):
        register(bench_subparsers)
    for module_name in EXTENSION_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name == module_name:
                continue
            raise
        hook = getattr(module, "add_bench_subcommand", None)
        if hook is not None:
            hook(bench_subparsers)


def print_json(value: dict) -> None:
    print(json_text(value, indent=None), end="")


def refuse(message: str) -> int:
    print(f"error: {terminal_text(message)}", file=sys.stderr)
    return 2


def _add_cohort(subparsers) -> None:
    parser = subparsers.add_parser(
        "cohort", help="write the synthetic digital-subject cohort in dataset layouts (or show where it is cached)",
        description="Write the synthetic digital-subject cohort in the datasets' own layouts (then `bench "
                    "prepare` it), with --cache prepare it in the cache `bench run` reads (done once; the test "
                    "suite does this before the tests that run the cohort), with --where print that cache, or with "
                    "--prune remove its cohorts of earlier sources.",
    )
    parser.add_argument("--out", type=user_path,
                        help="directory for the raw synthetic datasets (required unless --cache or --where)")
    parser.add_argument("--cache", action="store_true",
                        help="prepare the embedded cohort of --modules in the cache `bench run` reads, as `bench "
                             "run` would (kept when already there), and print each package's folder")
    parser.add_argument("--where", action="store_true",
                        help="print the cache folder of the embedded cohort `bench run` uses, and what it holds")
    parser.add_argument("--prune", action="store_true",
                        help="remove the cached cohorts of earlier sources (other fingerprints) and print what was "
                             "freed; the current fingerprint's are kept")
    parser.add_argument("--cache-dir", type=user_path,
                        help="with --cache, --where or --prune: the cache folder (default: MEDOPENCLAW_CACHE or "
                             "~/.cache/medopenclaw)")
    parser.add_argument("--seed", type=NON_NEGATIVE, default=0, help="seed of every generated subject (default 0)")
    parser.add_argument("--modules", nargs="+", choices=names(), default=list(names()),
                        help="modules to write (default: all)")
    parser.add_argument("--size", choices=("demo", "full"), default="demo", help="preset of the sizes below")
    parser.add_argument("--cases", type=COUNT, help="cases per module (default: the preset's; with --cache, "
                                                    "MEDOPENCLAW_COHORT_CASES first)")
    parser.add_argument("--mri-spacing", type=Number(above=0),
                        help="brain MRI voxel size in mm (default: the preset's)")
    parser.add_argument("--slide-size", type=COUNT, nargs=2, metavar=("W", "H"),
                        help="slide size in px; every slide spans 24.6 mm of glass (default: the preset's)")
    parser.add_argument("--workers", type=COUNT, help="cases generated in parallel (default: up to 2)")
    parser.set_defaults(func=deferred("MedOpenClawLib.bench.command_runs:run_cohort"))


def _add_prepare(subparsers) -> None:
    parser = subparsers.add_parser("prepare", help="turn a dataset as distributed into case packages")
    parser.add_argument("--module", required=True, choices=names(), help="the benchmark module of the dataset")
    parser.add_argument(
        "--source", required=True, type=user_path, help="dataset root as downloaded (or a synthetic cohort dir)"
    )
    parser.add_argument("--out", required=True, type=user_path, help="case package directory to write")
    for module, dest, keywords in prepare_options():  # each module's loader flags, from its folder
        parser.add_argument("--" + dest.replace("_", "-"), **{**keywords, "help": f"{module}: {keywords['help']}"})
    parser.set_defaults(func=deferred("MedOpenClawLib.bench.command_runs:run_prepare"))


def _add_parse(subparsers) -> None:
    parser = subparsers.add_parser(
        "parse", help="parse one raw final response from stdin into canonical JSON"
    )
    parser.add_argument("--module", required=True, choices=names(), help="the module whose answer format to parse")
    parser.set_defaults(func=deferred("MedOpenClawLib.bench.command_runs:run_parse"))


def _add_score(subparsers) -> None:
    parser = subparsers.add_parser("score", help="score a responses JSONL file against a case package")
    parser.add_argument("--module", required=True, choices=names(), help="the module of the case package")
    parser.add_argument("--cases", required=True, type=user_path, help="case package directory (from bench prepare)")
    parser.add_argument("--responses", required=True, type=user_path, help='JSONL lines {"case_id", "response"}')
    parser.add_argument("--out", type=user_path, help="run folder of the scores, readable by `bench report` (default: "
                                      "<responses>_scores/)")
    parser.add_argument("--name", help="what the report calls this pipeline, e.g. M3D (default: the responses "
                                       "file's name)")
    parser.add_argument("--track", choices=("A", "B", "C"), default="C",
                        help="the track the answers belong to (default C: runtime-agnostic)")
    parser.set_defaults(func=deferred("MedOpenClawLib.bench.command_runs:run_score"))


def _add_report(subparsers) -> None:
    parser = subparsers.add_parser(
        "report",
        help="paper-style tables (Markdown, CSV, JSON, LaTeX), figures and HTML pages over any set of runs",
    )
    parser.add_argument("runs", nargs="+", metavar="RUNS", type=user_path,
                        help="bench run output directories, or directories holding runs at any depth")
    parser.add_argument("--out", type=user_path,
                        help="output directory (default: RUN/report, or report/ beside several runs)")
    parser.add_argument("--no-evidence", action="store_true",
                        help="skip drawing the final evidence over the anatomy (no viewer engine needed)")
    parser.add_argument("--no-figures", action="store_true",
                        help="leave the figures out: tables and pages only (no matplotlib needed)")
    parser.set_defaults(func=deferred("MedOpenClawLib.bench.report.command:run_report"))


def _add_compare(subparsers) -> None:
    parser = subparsers.add_parser(
        "compare", help="two runs on the same cases: per module and metric the paired difference with its 95%% CI and "
                        "an exact paired test, and each run's Task - Strict gap")
    parser.add_argument("run_a", metavar="RUN_A", type=user_path,
                        help="a bench run directory (or a multi-module run's --out)")
    parser.add_argument("run_b", metavar="RUN_B", type=user_path, help="the run to compare it with")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON instead of text")
    parser.set_defaults(func=deferred("MedOpenClawLib.bench.report.command:run_compare"))
