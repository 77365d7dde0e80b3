"""What ``bench cohort``, ``prepare``, ``parse`` and ``score`` do once their flags are parsed (:mod:`.commands`
registers the flags); imported only when one of them runs (:func:`..cli.deferred`): the cohort generator and the
scorer need numpy, scipy and Pillow."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from ..core.sinks import terminal_text
from .cases import CaseFormatError
from .cohort_cache import cache_root, cached_cohorts, cohort_fingerprint, prune, synthetic_packages
from .commands import print_json, refuse
from .modules import ModuleSpec, get
from .package import prepare
from .progress import Activity
from .scoring.batch import score_file, write_scored_run
from .synthetic.cohort import CohortConfig, write_cohort


def run_cohort(args) -> int:
    if args.cache:
        packages = synthetic_packages(args.modules, seed=args.seed, cases=args.cases, cache_dir=args.cache_dir,
                                      size=args.size)
        print_json({"cache": str(cache_root(args.cache_dir)),
                    "packages": {module: str(package) for module, package in packages.items()}})
        return 0
    if args.prune:
        print_json(prune(cache_root(args.cache_dir)))
        return 0
    if args.where:
        root = cache_root(args.cache_dir)
        print_json({"cache": str(root), "current_fingerprint": cohort_fingerprint(),
                     "cohorts": cached_cohorts(root)})
        return 0
    if not args.out:
        return refuse("bench cohort needs --out DIR (or --cache to prepare the cache, --where to show it, --prune to "
                     "empty it of earlier cohorts)")
    overrides = {
        "cases": args.cases,
        "mri_spacing_mm": args.mri_spacing,
        "slide_size": tuple(args.slide_size) if args.slide_size else None,
        "workers": args.workers,
    }
    config = CohortConfig.for_size(args.size, seed=args.seed,
                                   **{key: value for key, value in overrides.items() if value is not None})
    steps = {module: f"{number}/{len(args.modules)}" for number, module in enumerate(args.modules, 1)}
    written, cases = {}, f"{config.cases} case" + "s" * (config.cases != 1)
    for module in args.modules:  # one at a time, so each shows its own progress (the output is the same)
        with Activity(f"cohort {module} {steps[module]}: generating {cases} ({args.size})"):
            written.update(write_cohort(args.out, config, modules=[module]))
    print_json({"out": str(Path(args.out).resolve()), "modules": written})
    return 0


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


def run_prepare(args) -> int:
    spec = get(args.module)
    try:
        manifest = prepare(spec, args.source, args.out, **prepare_options(args, spec))
    except (CaseFormatError, OSError) as error:  # the staged package is gone, --out is as it was
        return refuse(str(error))
    print("\n".join(terminal_text(line) for line in filter_table_text(manifest).splitlines()), file=sys.stderr)
    print_json(
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


def run_parse(args) -> int:
    print_json(get(args.module).read_answer(sys.stdin.read()))
    return 0


def run_score(args) -> int:
    try:
        result = score_file(get(args.module), args.cases, args.responses)
        responses = Path(args.responses)
        out = Path(args.out) if args.out else responses.with_name(responses.stem + "_scores")
        write_scored_run(out, result, args.module, args.cases, responses, args.name or responses.stem, args.track)
    except (CaseFormatError, OSError) as error:
        return refuse(str(error))
    for problem in result.problems:
        print(f"warning: {terminal_text(problem)}", file=sys.stderr)
    print_json(result.summary)
    return 0
