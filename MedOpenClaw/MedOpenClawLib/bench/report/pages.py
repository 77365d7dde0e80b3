"""HTML pages through Jinja2 templates: index (tables, figures) -> run (episodes) -> episode (steps, evidence).

Every link and image is relative and every image the pages show is copied into the report folder, so the folder
can be zipped and served anywhere. Text from traces (prompts, arguments, answers) is escaped by the template
engine (autoescape on).
"""

from __future__ import annotations

import contextlib
import os
import re
from importlib import resources
from pathlib import Path

from PIL import Image

from ...core.provenance import summary as provenance_summary
from ..cases import CaseFormatError, load_cases, load_ground_truth
from ..progress import Activity
from .evidence import NO_EVIDENCE, RadiologyEvidence, episode_evidence
from .formats import cell_parts, header_cells, layout, n_text, own_n, plain_text
from .runs import Episode, Run, trace_records
from .tables import Cell, Table
from .transcript import answer_rows, clipped, pretty, transcript

PLOT_TITLES = {"scores": "Scores per module (mean over cases, 95% CI)",
               "task_vs_strict": "Task vs Strict: the evidence gap",
               "process": "Process metrics per episode", "budget": "Score against the operation budget"}
GATE_TEXT = {True: ("pass", "pass"), False: ("fail", "fail"), None: ("na", "n/a")}
EPISODE_COLUMNS = ("task", "strict", "loc", "calls", "images", "input_tokens", "output_tokens", "cost_usd")


def local_paths(runs: list[Run], out_dir: Path) -> list[tuple[str, str]]:
    """(absolute prefix, placeholder) pairs, longest first: pages never show this machine's paths (recorded
    arguments such as open_case's dicom_dir name the case package where the run happened)."""
    pairs = {str(out_dir): "<report>", str(Path.home()): "~"}
    for run in runs:
        pairs[str(run.path)] = f"<run {run.name}>"
        cases_dir = run.identity.get("cases_dir")
        if cases_dir:
            pairs[str(cases_dir)] = f"<cases {Path(cases_dir).name}>"
            pairs[str(Path(cases_dir).resolve())] = f"<cases {Path(cases_dir).name}>"
    return sorted(((prefix, name) for prefix, name in pairs.items() if len(prefix) > 1),
                  key=lambda pair: -len(pair[0]))


ABSOLUTE_PATH = re.compile(r"(?<![\w.:/])/([\w.-]+)(?:/[\w.@+-]+)+")


def _local_path(match: re.Match) -> str:
    """Any other absolute path under a top-level folder of this machine (/tmp, /home, ...) keeps its name only."""
    if Path("/" + match.group(1)).is_dir():
        return "…/" + match.group(0).rsplit("/", 1)[-1]
    return match.group(0)


def environment(paths: list[tuple[str, str]]):
    """Templates with autoescape, and every printed string stripped of local absolute paths.

    Only plain strings (data) are shortened: markup a macro or filter produced is passed through untouched,
    since each value inside it was already shortened when it was printed -- rewriting it would turn it back
    into a plain string that autoescape then prints as text."""
    import jinja2
    from markupsafe import Markup

    def finalize(value):
        if isinstance(value, str) and not isinstance(value, Markup):
            for prefix, name in paths:
                value = value.replace(prefix, name)
            value = ABSOLUTE_PATH.sub(_local_path, value)
        return value

    return jinja2.Environment(loader=jinja2.PackageLoader(__package__, "templates"), autoescape=True,
                              trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined,
                              finalize=finalize)


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name.replace("/", "__")).strip("_") or "run"


# ------------------------------------------------------------------------------------------------ tables
def html_table(table: Table, run_links: dict[str, str]) -> dict:
    entries = layout(table)
    labels = header_cells(table)
    groups: list[list] = []
    for group, _ in labels:
        if groups and groups[-1][0] == group:
            groups[-1][1] += 1
        else:
            groups.append([group, 1])
    kinds = []
    for kind, item in entries:
        css = "n" if kind == "n" else (item.metric if item.metric in ("strict", "loc") else item.kind)
        kinds.append(css)
    sections = []
    for section in table.sections:
        rows = []
        for row in section.rows:
            cells = []
            for (kind, item), css in zip(entries, kinds):
                if kind == "n":
                    cells.append({"kind": "n", "value": "" if row.summary_row else n_text(row, item), "interval": "",
                              "change": "", "trend": "", "n": ""})
                    continue
                cell = row.cells.get(item.id, Cell())
                value, interval, change, count = cell_parts(cell, item, own_n(table, row, item))
                trend = ""
                if change:
                    trend = "up" if "↑" in change else "down" if "↓" in change else "flat"
                cells.append({"kind": css, "value": value, "interval": interval, "change": change, "trend": trend,
                              "n": count})
            link = run_links.get(row.header[0]) if table.id == "runs" else None
            rows.append({"header": row.header, "cells": cells, "summary_row": row.summary_row,
                         "privileged": bool(row.identity.get("privileged")), "link": link})
        sections.append({"title": section.title, "rows": rows})
    return {"id": table.id, "title": table.title, "caption": table.caption, "row_header": table.row_header,
            "groups": groups, "labels": [(label, css) for (_, label), css in zip(labels, kinds)],
            "sections": sections, "width": len(table.row_header) + len(entries), "notes": table.notes}


# ------------------------------------------------------------------------------------------------ episodes
def _value(metric: str, value: float | None) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "—"
    if metric in ("input_tokens", "output_tokens", "calls", "images"):
        return str(int(round(value)))
    if metric == "cost_usd":
        return plain_text(round(value, 6))
    if metric == "duration":
        return f"{value:.0f} s" if value < 120 else f"{value / 60:.1f} min"
    return f"{value:.2f}"


def invocation_rows(run: Run) -> list[dict]:
    """One row per `bench run` invocation of the run, from run.json's provenance."""
    rows = []
    for record in run.invocations:
        source = record.get("source") if isinstance(record.get("source"), dict) else {}
        command = record.get("command")
        rows.append({"started": str(record.get("started", "—"))[:19].replace("T", " "),
                     "duration": _value("duration", record.get("duration_s")),
                     "version": str(record.get("version", "—")),
                     "commit": (str(source.get("commit", ""))[:12] + (" + local changes" if source.get("dirty")
                                                                      else "")) or "not a checkout",
                     "python": f"{record.get('python', '?')} · {record.get('platform', '?')}",
                     "stack": ", ".join(f"{name} {version}" for name, version in
                                        (record.get("versions") or {}).items() if version) or "—",
                     "command": " ".join(map(str, command)) if isinstance(command, list) else "—"})
    return rows


def run_page(env, run: Run, out_dir: Path, page: Path, episode_pages: dict[str, Path], crumbs) -> None:
    identity = [("module", run.module), ("agent", run.agent + (" †" if run.privileged else "")),
                ("model", run.model or "—"), ("provider", run.provider or "—"), ("track", run.track),
                ("model family", run.model_family if run.model else "—"),
                ("max rounds", run.max_rounds if run.has_rounds else "—"),
                ("max tool calls", run.max_tool_calls if run.max_tool_calls is not None else "—"),
                ("image history", run.image_history or "—"),
                ("tool history", run.tool_history or "—"),
                ("toolset", run.toolset or "—"),
                ("episodes", f"{len(run.episodes)} ({run.count('scored')} scored, {run.count('rejected')} rejected "
                             f"(scored 0), {run.count('invalid')} INVALID, {run.count('error')} errors)")]
    episodes = [{"id": episode.episode_id, "outcome": episode.outcome,
                 "href": episode_pages[episode.episode_id].relative_to(page.parent).as_posix(),
                 "values": [_value(metric, episode.metrics.get(metric)) for metric in EPISODE_COLUMNS]}
                for episode in run.episodes]
    page.write_text(env.get_template("run.html.j2").render(
        title=f"Run {run.name}", root=_root(page, out_dir), crumbs=crumbs, run=run, identity=identity,
        episodes=episodes, invocations=invocation_rows(run)), encoding="utf-8")


def _root(page: Path, out_dir: Path) -> str:
    depth = len(page.parent.relative_to(out_dir).parts)
    return "../" * depth


class CasePackages:
    """The cases and hidden references of the runs' case packages, read once per package: the episode pages
    show each final answer beside the correct one (when the package is on this machine)."""

    def __init__(self):
        self._cases: dict[str, dict] = {}

    def lookup(self, run: Run, case_id: str):
        """(case, ground truth) of ``case_id``, or a sentence saying why they are not available."""
        cases_dir = run.identity.get("cases_dir")
        if not cases_dir or not Path(cases_dir, "manifest.json").is_file():
            return "the run's case package is not on this machine"
        try:
            if cases_dir not in self._cases:
                self._cases[cases_dir] = {case.case_id: case for case in load_cases(cases_dir)}
            return self._cases[cases_dir].get(case_id), load_ground_truth(cases_dir, case_id)
        except (CaseFormatError, OSError, ValueError) as error:
            return f"{type(error).__name__}: {error}"


def audit_of(episode: Episode) -> dict:
    """The episode's trace audit: its result's ``audit`` block, or the one recomputed from the trace (older runs)."""
    audit = episode.audit if isinstance(episode.audit, dict) else episode.result.get("audit")
    return audit if isinstance(audit, dict) else {}


def findings_of(episode: Episode) -> list[dict]:
    """Trace-audit findings (``audit.findings``: code, rule, severity, message, records), each shown with links to
    the transcript entries (trace seq) it points at."""
    return [finding for finding in audit_of(episode).get("findings") or [] if isinstance(finding, dict)]


def provenance_of(episode: Episode) -> list[dict]:
    """Each evidence field of the answer, grounded (with the transcript entries that ground it) or not."""
    return [item for item in audit_of(episode).get("provenance") or [] if isinstance(item, dict)]


def episode_page(env, run: Run, episode: Episode, records: list[dict], page: Path, out_dir: Path,
                 evidence: dict, crumbs, reference) -> None:
    score = episode.score
    raw_gates = score.get("gates") if isinstance(score.get("gates"), dict) else {}
    gates = [(str(name), *GATE_TEXT.get(value if isinstance(value, bool) else None))
             for name, value in raw_gates.items()]
    run_label = f"{run.model} [{run.agent}]" if run.model else run.agent
    answers, answers_note = ([], reference) if isinstance(reference, str) else \
        (answer_rows(reference[0], reference[1], episode.parsed), None)
    page.write_text(env.get_template("episode.html.j2").render(
        title=episode.episode_id, root=_root(page, out_dir), crumbs=crumbs,
        episode={"id": episode.episode_id, "outcome": episode.outcome}, run_label=run_label
        + (" †" if run.privileged else "") + f" · Track {run.track}", module=run.module,
        scores={key: _value(key, episode.metrics.get(key)) for key in ("task", "strict", "loc")},
        invalid=episode.result.get("invalid"), gates=gates,
        **transcript(records, episode.trace, out_dir / "images", page),
        response=clipped(str(episode.result.get("response") or "(no answer)")), answers=answers,
        answers_note=answers_note, parsed=pretty(episode.parsed), findings=findings_of(episode),
        provenance=provenance_of(episode), audited=bool(audit_of(episode)), **evidence),
        encoding="utf-8")


def is_wide(picture: Path) -> bool:
    """A figure at least twice as wide as high (a row of panels) spans the whole row of the index: squeezed into
    one column its text shrank to a few pixels."""
    with Image.open(picture) as image:
        width, height = image.size
    return width >= 2 * height


def write_pages(runs: list[Run], tables: list[Table], plots: list[str], pages: dict[str, Path], out_dir: Path,
                evidence: bool, provenance: dict | None = None) -> int:
    """index.html, one page per run and per episode (with its evidence views unless ``evidence`` is off);
    returns the number of episode pages."""
    env = environment(local_paths(runs, out_dir))
    (out_dir / "style.css").write_text(resources.files(__package__).joinpath("templates/style.css").read_text(
        encoding="utf-8"), encoding="utf-8")
    links = {run.name: pages[run.name].relative_to(out_dir).as_posix() for run in runs}
    figures = [{"png": f"plots/{name}", "svg": f"plots/{name[:-4]}.svg", "title": PLOT_TITLES.get(name[:-4], name),
                "wide": is_wide(out_dir / "plots" / name)} for name in plots if name.endswith(".png")]
    downloads = ["results.md", "results.csv", "results.json", "results.schema.json", "results.tex"]
    (out_dir / "index.html").write_text(env.get_template("index.html.j2").render(
        title="Results", root="", crumbs=[("report", None)], runs=runs, episodes=sum(len(run.episodes) for run in runs),
        downloads=downloads, privileged=any(run.privileged for run in runs),
        tables=[html_table(table, links) for table in tables], plots=figures,
        written_by=provenance_summary(provenance), unrecorded=[run.name for run in runs if not run.invocations]),
        encoding="utf-8")
    renderer = RadiologyEvidence()
    packages = CasePackages()
    with contextlib.ExitStack() as stack:
        stack.callback(renderer.close)
        ordered = sorted(((run, episode) for run in runs for episode in run.episodes),
                         key=lambda item: (str(item[0].identity.get("cases_dir")), item[1].case_id, item[0].name))
        episode_pages = {(run.name, episode.episode_id):
                         pages[run.name].with_suffix("") / f"{slug(episode.episode_id)}.html"
                         for run, episode in ordered}
        activity = stack.enter_context(Activity("writing episode pages" + (" and evidence views" if evidence else ""),
                                                total=len(ordered)))
        for run, episode in ordered:
            activity.advance()
            page = episode_pages[(run.name, episode.episode_id)]
            page.parent.mkdir(parents=True, exist_ok=True)
            records = trace_records(episode.trace)
            reference = packages.lookup(run, episode.case_id)
            drawn = episode_evidence(renderer, run, episode, records, page, reference) if evidence \
                else dict(NO_EVIDENCE)
            crumbs = [("report", _root(page, out_dir) + "index.html"),
                      (run.name, os.path.relpath(pages[run.name], page.parent)), (episode.episode_id, None)]
            episode_page(env, run, episode, records, page, out_dir, drawn, crumbs, reference)
    for run in runs:
        page = pages[run.name]
        page.parent.mkdir(parents=True, exist_ok=True)
        own = {episode_id: path for (name, episode_id), path in episode_pages.items() if name == run.name}
        run_page(env, run, out_dir, page, own, [("report", _root(page, out_dir) + "index.html"), (run.name, None)])
    return len(ordered)
