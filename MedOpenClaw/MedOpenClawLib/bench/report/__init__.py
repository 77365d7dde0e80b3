"""``bench report RUNS...``: paper-style tables (Markdown, CSV, versioned JSON, LaTeX), figures (PNG, SVG) and an
HTML report (index -> run -> episode pages, the final evidence drawn over the anatomy) over any set of runs.

RUNS are ``bench run`` output directories or directories holding such runs at any depth.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...core.provenance import provenance as report_provenance
from ...core.sinks import write_json
from ..cases import CaseFormatError
from .formats import csv_text, latex, markdown, results_json, results_schema
from .pages import slug, write_pages
from .runs import find_runs, load_run, run_names
from .tables import all_tables, pooling_warnings


def default_out(paths: list[Path]) -> Path:
    if len(paths) == 1:
        return paths[0] / "report"
    return Path(os.path.commonpath([str(path) for path in paths])) / "report"


def write_report(inputs: list[str | os.PathLike] | str | os.PathLike, out: str | os.PathLike | None = None,
                 evidence: bool = True, command: list[str] | None = None, figures: bool = True) -> dict:
    """Write every table, figure and page; returns what was written (paths relative to the output folder).
    ``command``: the command line that asked for the report (kept, secrets removed, in its provenance).
    ``figures`` False leaves the figures out: most of a small report's CPU, and matplotlib need not be installed."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    paths = [Path(path).resolve() for path in inputs]
    out_dir = Path(out).resolve() if out else default_out(paths)
    run_dirs = [run for run in find_runs(paths) if out_dir != run and out_dir not in run.parents]
    if not run_dirs:
        raise CaseFormatError("no bench run found outside the output folder")
    runs = [load_run(path, name) for path, name in zip(run_dirs, run_names(run_dirs))]
    out_dir.mkdir(parents=True, exist_ok=True)

    tables = all_tables(runs)
    pages = {run.name: out_dir / "runs" / f"{slug(run.name)}.html" for run in runs}
    run_records = [{"name": run.name, "module": run.module, "agent": run.agent, "model": run.model,
                    "provider": run.provider, "track": run.track, "max_rounds": run.max_rounds,
                    "max_tool_calls": run.max_tool_calls, "model_family": run.model_family,
                    "privileged": run.privileged, "episodes": len(run.episodes), "scored": run.count("scored"),
                    "rejected": run.count("rejected"), "invalid": run.count("invalid"), "errors": run.count("error"),
                    "page": pages[run.name].relative_to(out_dir).as_posix(), "invocations": run.invocations}
                   for run in runs]
    provenance = report_provenance(command)
    (out_dir / "results.md").write_text(markdown(tables), encoding="utf-8")
    (out_dir / "results.csv").write_text(csv_text(tables), encoding="utf-8")
    write_json(out_dir / "results.json", results_json(tables, run_records, provenance))
    write_json(out_dir / "results.schema.json", results_schema())
    (out_dir / "results.tex").write_text(latex(tables), encoding="utf-8")
    plots = []
    if figures:
        from .plots import write_plots  # matplotlib: only where figures are drawn

        plots = write_plots(runs, out_dir / "plots")
    episodes = write_pages(runs, tables, plots, pages, out_dir, evidence, provenance)
    return {"out": str(out_dir), "runs": len(runs), "episodes": episodes, "tables": [table.id for table in tables],
            "warnings": pooling_warnings(runs),
            "plots": [f"plots/{name}" for name in plots],
            "files": ["index.html", "results.md", "results.csv", "results.json", "results.schema.json", "results.tex"]}
