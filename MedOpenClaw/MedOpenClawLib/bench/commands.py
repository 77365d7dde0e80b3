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
from collections import Counter
from pathlib import Path

from ..cli import COUNT, NON_NEGATIVE, Number, user_path
from ..core.sinks import json_text, terminal_text
from .cases import CaseFormatError
from .modules import ModuleSpec, get, names

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


def _print_json(value: dict) -> None:
    print(json_text(value, indent=None), end="")


def _fail(message: str) -> int:
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
    parser.add_argument("--cases", type=COUNT, help="cases per module (default: the preset's)")
    parser.add_argument("--mri-spacing", type=Number(above=0),
                        help="brain MRI voxel size in mm (default: the preset's)")
    parser.add_argument("--slide-size", type=COUNT, nargs=2, metavar=("W", "H"),
                        help="slide size in px; every slide spans 24.6 mm of glass (default: the preset's)")
    parser.add_argument("--workers", type=COUNT, help="cases generated in parallel (default: up to 2)")
    parser.set_defaults(func=_run_cohort)


def _run_cohort(args) -> int:
    from .cohort_cache import cache_root, cached_cohorts, cohort_fingerprint, prune, synthetic_cases
    from .progress import Activity
    from .synthetic.cohort import CohortConfig, write_cohort

    steps = {module: f"{number}/{len(args.modules)}" for number, module in enumerate(args.modules, 1)}
    if args.cache:
        packages = {module: str(synthetic_cases(module, seed=args.seed, cases=args.cases, cache_dir=args.cache_dir,
                                                size=args.size, step=steps[module])) for module in args.modules}
        _print_json({"cache": str(cache_root(args.cache_dir)), "packages": packages})
        return 0
    if args.prune:
        _print_json(prune(cache_root(args.cache_dir)))
        return 0
    if args.where:
        root = cache_root(args.cache_dir)
        _print_json({"cache": str(root), "current_fingerprint": cohort_fingerprint(),
                     "cohorts": cached_cohorts(root)})
        return 0
    if not args.out:
        return _fail("bench cohort needs --out DIR (or --cache to prepare the cache, --where to show it, --prune to "
                     "empty it of earlier cohorts)")
    overrides = {
        "cases": args.cases,
        "mri_spacing_mm": args.mri_spacing,
        "slide_size": tuple(args.slide_size) if args.slide_size else None,
        "workers": args.workers,
    }
    config = CohortConfig.for_size(args.size, seed=args.seed,
                                   **{key: value for key, value in overrides.items() if value is not None})
    written, cases = {}, f"{config.cases} case" + "s" * (config.cases != 1)
    for module in args.modules:  # one at a time, so each shows its own progress (the output is the same)
        with Activity(f"cohort {module} {steps[module]}: generating {cases} ({args.size})"):
            written.update(write_cohort(args.out, config, modules=[module]))
    _print_json({"out": str(Path(args.out).resolve()), "modules": written})
    return 0


def _add_prepare(subparsers) -> None:
    parser = subparsers.add_parser("prepare", help="turn a dataset as distributed into case packages")
    parser.add_argument("--module", required=True, choices=names(), help="the benchmark module of the dataset")
    parser.add_argument(
        "--source", required=True, type=user_path, help="dataset root as downloaded (or a synthetic cohort dir)"
    )
    parser.add_argument("--out", required=True, type=user_path, help="case package directory to write")
    parser.add_argument(
        "--include-amc", action="store_true", help="nsclc: keep AMC cases (excluded by default)"
    )
    parser.add_argument(
        "--require-evidence",
        action="store_true",
        help="lumiere: keep only pairs whose OLD and CURRENT segmentations exist (evidence-availability filter)",
    )
    parser.add_argument(
        "--min-label-cases",
        type=NON_NEGATIVE,
        default=0,
        metavar="N",
        help="lumiere: drop RANO labels with fewer than N cases (label-frequency filter)",
    )
    parser.add_argument(
        "--images", choices=("atlas", "native"), default="atlas",
        help="lumiere: atlas-space skull-stripped scans, co-registered across timepoints (default), or each "
             "study's native scans: the unregistered control of Table 3's Registration column. A pair is taken "
             "only when both studies hold that space (never the other space's files instead); each case records "
             "its image space",
    )
    parser.set_defaults(func=_run_prepare)


def prepare_options(args, spec: ModuleSpec) -> dict:
    """The loader options of ``bench prepare``: each cohort filter is an explicit flag of its module."""
    return {name: getattr(args, name) for name in spec.loader_options}


def filter_table_text(manifest: dict) -> str:
    """The per-step cohort counts with MedFlow-Bench's count beside the final one (printed on stderr)."""
    lines = [f"{manifest['module']} cohort filters:", f"  {'step':<48} {'excluded':>8} {'remaining':>9}"]
    for row in manifest.get("filters", []):
        lines.append(f"  {row['step']:<48} {row['excluded']:>8} {row['remaining']:>9}")
    lines.append(f"  {'paper (Table 4)':<48} {'':>8} {manifest.get('paper_count', '?'):>9}")
    spaces = Counter(case["image_space"] for case in manifest.get("cases", []) if case.get("image_space"))
    for space, count in sorted(spaces.items()):
        lines.append(f"  image space {space}: {count} cases")
    for name, counts in sorted((manifest.get("class_counts") or {}).items()):
        lines.append(f"  class {name}: {counts['cases']} cases, {counts['evidence_available']} with evidence")
    for question, counts in sorted((manifest.get("label_counts") or {}).items()):
        lines.append(f"  {question}: " + "; ".join(f"{label} {count}" for label, count in sorted(counts.items())))
    if manifest.get("evidence_note"):
        lines.append(f"  note: {manifest['evidence_note']}")
    for note in manifest.get("annotation_notes") or []:
        lines.append(f"  note: {note}")
    for item in manifest.get("skipped", []):
        lines.append(f"  excluded {item['case_id']} ({item['step']}): {item['reason']}")
    return "\n".join(lines)


def _run_prepare(args) -> int:
    from .package import prepare

    spec = get(args.module)
    try:
        manifest = prepare(spec, args.source, args.out, **prepare_options(args, spec))
    except (CaseFormatError, OSError) as error:  # the staged package is gone, --out is as it was
        return _fail(str(error))
    print("\n".join(terminal_text(line) for line in filter_table_text(manifest).splitlines()), file=sys.stderr)
    _print_json(
        {
            "module": args.module,
            "out": str(Path(args.out).resolve()),
            "cases": len(manifest["cases"]),
            "skipped": manifest["skipped"],
            "filters": manifest["filters"],
            "paper_count": manifest["paper_count"],
        }
    )
    return 0


def _add_parse(subparsers) -> None:
    parser = subparsers.add_parser(
        "parse", help="parse one raw final response from stdin into canonical JSON"
    )
    parser.add_argument("--module", required=True, choices=names(), help="the module whose answer format to parse")
    parser.set_defaults(func=_run_parse)


def _run_parse(args) -> int:
    from .kit.parsing import parse_response

    _print_json(parse_response(args.module, sys.stdin.read()))
    return 0


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
    parser.set_defaults(func=_run_score)


def _run_score(args) -> int:
    from .scoring.batch import score_file, write_scored_run

    try:
        result = score_file(args.module, args.cases, args.responses)
        responses = Path(args.responses)
        out = Path(args.out) if args.out else responses.with_name(responses.stem + "_scores")
        write_scored_run(out, result, args.module, args.cases, responses, args.name or responses.stem, args.track)
    except (CaseFormatError, OSError) as error:
        return _fail(str(error))
    for problem in result.problems:
        print(f"warning: {terminal_text(problem)}", file=sys.stderr)
    _print_json(result.summary)
    return 0


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
    parser.set_defaults(func=_run_report)


def _run_report(args) -> int:
    from .report import write_report

    try:
        written = write_report(args.runs, args.out, evidence=not args.no_evidence, command=getattr(args, "argv", None))
    except ModuleNotFoundError as error:
        if error.name not in ("jinja2", "matplotlib"):
            raise
        return _fail(f"bench report needs {error.name}: pip install 'medopenclaw[report]'")
    except (CaseFormatError, OSError, ValueError) as error:
        return _fail(str(error))
    for warning in written["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    _print_json(written)
    return 0


def _add_compare(subparsers) -> None:
    parser = subparsers.add_parser(
        "compare", help="two runs on the same cases: per module and metric the paired difference with its 95%% CI and "
                        "an exact paired test, and each run's Task - Strict gap")
    parser.add_argument("run_a", metavar="RUN_A", type=user_path,
                        help="a bench run directory (or a multi-module run's --out)")
    parser.add_argument("run_b", metavar="RUN_B", type=user_path, help="the run to compare it with")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON instead of text")
    parser.set_defaults(func=_run_compare)


def _run_compare(args) -> int:
    from .report.compare import compare

    try:
        text, body = compare(args.run_a, args.run_b)
    except (CaseFormatError, OSError) as error:
        return _fail(str(error))
    if args.json:
        _print_json(body)
    else:
        print(text, end="")
    return 0
