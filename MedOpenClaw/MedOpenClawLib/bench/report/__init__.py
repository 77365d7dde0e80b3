"""``bench report RUNS...``: paper-style tables (Markdown, CSV, versioned JSON, LaTeX), figures (PNG, SVG) and an
HTML report (index -> run -> episode pages, the final evidence drawn over the anatomy) over any set of runs.

RUNS are ``bench run`` output directories or directories holding such runs at any depth.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...result import ActionError
from ..cases import PATHOLOGY_MODULES, CaseFormatError, load_cases, load_ground_truth
from .evidence import RadiologyEvidence, pathology_overlay
from .formats import csv_text, latex, markdown, results_json, results_schema
from .runs import Episode, Run, find_runs, load_run, run_names

PLOT_TITLES = {"scores": "Scores per module (95% bootstrap CI)", "task_vs_strict": "Task vs Strict: the evidence gap",
               "process": "Process metrics per episode", "budget": "Score against the round budget"}


NO_EVIDENCE = {"evidence": [], "pathology_overlay": None, "evidence_error": None}


def default_out(paths: list[Path]) -> Path:
    if len(paths) == 1:
        return paths[0] / "report"
    return Path(os.path.commonpath([str(path) for path in paths])) / "report"


def write_report(inputs: list[str | os.PathLike] | str | os.PathLike, out: str | os.PathLike | None = None,
                 evidence: bool = True) -> dict:
    """Write every table, figure and page; returns what was written (paths relative to the output folder)."""
    import json

    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    paths = [Path(path).resolve() for path in inputs]
    out_dir = Path(out).resolve() if out else default_out(paths)
    run_dirs = [run for run in find_runs(paths) if out_dir != run and out_dir not in run.parents]
    if not run_dirs:
        raise CaseFormatError("no bench run found outside the output folder")
    runs = [load_run(path, name) for path, name in zip(run_dirs, run_names(run_dirs))]
    out_dir.mkdir(parents=True, exist_ok=True)

    from .plots import write_plots
    from .tables import all_tables

    tables = all_tables(runs)
    pages = {run.name: out_dir / "runs" / f"{_slug(run.name)}.html" for run in runs}
    run_records = [{"name": run.name, "module": run.module, "agent": run.agent, "model": run.model,
                    "provider": run.provider, "track": run.track, "max_rounds": run.max_rounds,
                    "privileged": run.privileged, "episodes": len(run.episodes), "scored": run.count("scored"),
                    "invalid": run.count("invalid"), "errors": run.count("error"),
                    "page": pages[run.name].relative_to(out_dir).as_posix()} for run in runs]
    (out_dir / "results.md").write_text(markdown(tables), encoding="utf-8")
    (out_dir / "results.csv").write_text(csv_text(tables), encoding="utf-8")
    (out_dir / "results.json").write_text(json.dumps(results_json(tables, run_records), indent=1,
                                                     ensure_ascii=False) + "\n", encoding="utf-8")
    (out_dir / "results.schema.json").write_text(json.dumps(results_schema(), indent=1) + "\n", encoding="utf-8")
    (out_dir / "results.tex").write_text(latex(tables), encoding="utf-8")
    plots = write_plots(runs, out_dir / "plots")
    episodes = _write_pages(runs, tables, plots, pages, out_dir, evidence)
    return {"out": str(out_dir), "runs": len(runs), "episodes": episodes, "tables": [table.id for table in tables],
            "plots": [f"plots/{name}" for name in plots],
            "files": ["index.html", "results.md", "results.csv", "results.json", "results.schema.json", "results.tex"]}


def _slug(name: str) -> str:
    from .pages import slug

    return slug(name)


def _write_pages(runs: list[Run], tables, plots: list[str], pages: dict[str, Path], out_dir: Path,
                 evidence: bool) -> int:
    from importlib import resources

    from ...audit import read_trace
    from .pages import environment, episode_page, html_table, local_paths, run_page

    env = environment(local_paths(runs, out_dir))
    (out_dir / "style.css").write_text(resources.files(__package__).joinpath("templates/style.css").read_text(
        encoding="utf-8"), encoding="utf-8")
    links = {run.name: pages[run.name].relative_to(out_dir).as_posix() for run in runs}
    figures = [{"png": f"plots/{name}", "svg": f"plots/{name[:-4]}.svg", "title": PLOT_TITLES.get(name[:-4], name)}
               for name in plots if name.endswith(".png")]
    downloads = ["results.md", "results.csv", "results.json", "results.schema.json", "results.tex"]
    (out_dir / "index.html").write_text(env.get_template("index.html.j2").render(
        title="Results", root="", crumbs=[("report", None)], runs=runs, episodes=sum(len(run.episodes) for run in runs),
        downloads=downloads, privileged=any(run.privileged for run in runs),
        tables=[html_table(table, links) for table in tables], plots=figures), encoding="utf-8")
    renderer = RadiologyEvidence()
    count = 0
    try:
        ordered = sorted(((run, episode) for run in runs for episode in run.episodes),
                         key=lambda item: (str(item[0].identity.get("cases_dir")), item[1].case_id, item[0].name))
        episode_pages = {(run.name, episode.episode_id):
                         pages[run.name].with_suffix("") / f"{_slug(episode.episode_id)}.html"
                         for run, episode in ordered}
        for run, episode in ordered:
            page = episode_pages[(run.name, episode.episode_id)]
            page.parent.mkdir(parents=True, exist_ok=True)
            records = read_trace(episode.trace) if episode.trace else []
            drawn = _evidence(renderer, run, episode, records, page) if evidence else dict(NO_EVIDENCE)
            crumbs = [("report", _up(page, out_dir) + "index.html"),
                      (run.name, os.path.relpath(pages[run.name], page.parent)), (episode.episode_id, None)]
            episode_page(env, run, episode, records, page, out_dir, drawn, crumbs)
            count += 1
    finally:
        renderer.close()
    for run in runs:
        page = pages[run.name]
        page.parent.mkdir(parents=True, exist_ok=True)
        own = {episode_id: path for (name, episode_id), path in episode_pages.items() if name == run.name}
        run_page(env, run, out_dir, page, own, [("report", _up(page, out_dir) + "index.html"), (run.name, None)])
    return count


def _up(page: Path, out_dir: Path) -> str:
    return "../" * len(page.parent.relative_to(out_dir).parts)


def _evidence(renderer: RadiologyEvidence, run: Run, episode: Episode, records: list[dict], page: Path) -> dict:
    """Evidence images for one episode, as template variables; a failure is reported on the page."""
    cases_dir = run.identity.get("cases_dir")
    result = dict(NO_EVIDENCE, evidence=[])
    if not cases_dir or not Path(cases_dir, "manifest.json").is_file():
        result["evidence_error"] = "the run's case package is not available on this machine"
        return result
    assets = page.with_suffix("")
    assets.mkdir(parents=True, exist_ok=True)
    try:
        truth = load_ground_truth(cases_dir, episode.case_id)
        case = next(case for case in load_cases(cases_dir) if case.case_id == episode.case_id)
        if run.module in PATHOLOGY_MODULES:
            target = assets / "evidence_slide.png"
            if case.slide and pathology_overlay(truth, episode.parsed, case.path(case.slide), target):
                result["pathology_overlay"] = target.relative_to(page.parent).as_posix()
            return result
        if run.track == "C" or run.module == "lumiere":
            return result  # no viewer geometry (Track C) or no spatial evidence (LUMIERE answers lesion fields)
        for view in renderer.render(case, truth, episode.parsed, records):
            target = assets / f"evidence_{view.view}.png"
            view.image.save(target)
            result["evidence"].append({"view": view.view, "src": target.relative_to(page.parent).as_posix(),
                                       "volume": view.volume, "offset": f"{view.offset_mm:.2f} mm",
                                       "notes": view.notes})
    except (ActionError, CaseFormatError, OSError, ValueError, StopIteration, RuntimeError, ImportError) as error:
        # ImportError: no viewer (slicer-core) here -- the report still renders, without the evidence views
        result["evidence_error"] = f"{type(error).__name__}: {error}"
    return result
