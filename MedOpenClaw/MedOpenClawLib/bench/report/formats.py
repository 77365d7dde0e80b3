"""Tables as Markdown, CSV (one line per cell), versioned JSON and LaTeX (booktabs).

Every format shows the same numbers: a mean over cases with its 95% interval (:mod:`.stats`), n per module group
(cases, the repeats per case, and how many episodes left the denominator and why), the paired change against the
reference cell for Tables 3 and 6 (↑ better, ↓ worse, ↔ unchanged at two decimals, with its interval and the number
of matched cases), and an em dash where a cell has no runs.
"""

from __future__ import annotations

import csv
import io
import json
from importlib import resources

from ...core.sinks import csv_cell, one_line
from .stats import Estimate
from .tables import Cell, Column, Row, Table

SCHEMA_NAME = "medopenclaw.bench.report"
SCHEMA_VERSION = "2.0.0"  # 2: n counts cases (repeats averaged per case), changes are paired
MISSING_TEXT = "—"
ONE_DECIMAL = frozenset({"calls", "images"})


def results_schema() -> dict:
    """The JSON schema ``results.json`` follows (shipped with the package)."""
    return json.loads(resources.files(__package__).joinpath("results.schema.json").read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------------------------ cell text
def number(value: float, metric: str | None) -> str:
    return f"{value:.1f}" if metric in ONE_DECIMAL else f"{value:.2f}"


def arrow(delta: Estimate) -> str:
    rounded = round(delta.value, 2)
    symbol = "↑" if rounded > 0 else "↓" if rounded < 0 else "↔"
    return f"{symbol}{abs(rounded):.2f}"


def plain_text(value) -> str:
    if value is None:
        return MISSING_TEXT
    if isinstance(value, float):
        return f"{value:.4f}".rstrip("0").rstrip(".")
    return str(value)


def cell_parts(cell: Cell, column: Column, own_n: int | None = None) -> tuple[str, str, str, str]:
    """(value, interval, change, n) texts of one cell; empty strings where they do not apply. ``own_n`` is shown
    when the cell counts other episodes than its group's n column (Loc. denominators, unscorable fields)."""
    if cell.plain is not None or column.kind in ("text", "count"):
        return plain_text(cell.plain), "", "", ""
    value = cell.estimate
    if value.value is None:
        return MISSING_TEXT, "", "", ""
    low, high = value.interval
    metric = column.metric
    shown = low is not None and column.kind != "mean"
    interval = f"[{number(low, metric)}, {number(high, metric)}]" if shown else ""
    return number(value.value, metric), interval, change_text(cell), f"n={own_n}" if own_n is not None else ""


def change_text(cell: Cell) -> str:
    """The paired change against the reference cell, its interval and the matched cases; or why there is none."""
    if cell.unmatched:
        return "(not differenced: no shared case)"
    delta = cell.delta
    if delta is None or delta.value is None:
        return ""
    interval = "" if delta.low is None else f" [{delta.low:+.2f}, {delta.high:+.2f}]"
    return f"({arrow(delta)}{interval}, {delta.n} paired)"


def cell_text(cell: Cell, column: Column, own_n: int | None = None) -> str:
    return " ".join(part for part in cell_parts(cell, column, own_n) if part)


# ------------------------------------------------------------------------------------------------ layout
def layout(table: Table) -> list[tuple[str, object]]:
    """Display columns: ("cell", Column) and, after each module group of a score table, ("n", [Column])."""
    entries: list[tuple[str, object]] = []
    if table.id == "runs":
        return [("cell", column) for column in table.columns]
    groups: list[list[Column]] = []
    for column in table.columns:
        if groups and groups[-1][0].group == column.group:
            groups[-1].append(column)
        else:
            groups.append([column])
    for group in groups:
        entries += [("cell", column) for column in group]
        if any(column.module for column in group):
            entries.append(("n", group))
    return entries


def group_n(row: Row, group: list[Column]) -> int | None:
    """The n of a module group: its cases (the largest n among its cells)."""
    counts = [row.cells[column.id].estimate.n for column in group
              if column.id in row.cells and row.cells[column.id].estimate.value is not None]
    return max(counts) if counts else None


def repeats_text(estimate: Estimate) -> str:
    """``×k`` when every case ran k times, ``(E episodes)`` when the repeats differ, nothing for one each."""
    if estimate.episodes <= estimate.n:
        return ""
    per_case = estimate.episodes / estimate.n
    return f" ×{per_case:.0f}" if per_case.is_integer() else f" ({estimate.episodes} episodes)"


def denominator_text(denominator: dict | None) -> str:
    """What left n and what stayed at 0, e.g. ``−1 INVALID: environment fault; 2 rejected = 0``."""
    if not denominator:
        return ""
    parts = [f"−{count} {reason}" for reason, count in denominator["left_out"].items()]
    parts += [f"{count} {kind} = 0" for kind, count in denominator["scored_zero"].items()]
    return f" ({'; '.join(parts)})" if parts else ""


def n_text(row: Row, group: list[Column]) -> str:
    """The n column of a module group: cases, repeats beside them, and the denominator's account."""
    cells = [row.cells[column.id] for column in group
             if column.id in row.cells and row.cells[column.id].estimate.value is not None]
    if not cells:
        return MISSING_TEXT
    widest = max(cells, key=lambda cell: cell.estimate.n)
    return f"{widest.estimate.n}{repeats_text(widest.estimate)}{denominator_text(widest.denominator)}"


def own_n(table: Table, row: Row, column: Column) -> int | None:
    """A cell's n when it differs from its group's n column (module groups only: not on summary rows, the
    Model Avg. columns or the runs table)."""
    cell = row.cells.get(column.id)
    if row.summary_row or column.module is None or table.id == "runs" or cell is None or cell.estimate.value is None:
        return None
    group = group_n(row, [other for other in table.columns if other.group == column.group])
    return cell.estimate.n if cell.estimate.n != group else None


def header_cells(table: Table) -> list[tuple[str, str]]:
    """(group, label) for every display column after the row header."""
    cells = []
    for kind, item in layout(table):
        if kind == "cell":
            cells.append((item.group, item.label))
        else:
            cells.append((item[0].group, "n"))
    return cells


def body_cells(table: Table, row: Row) -> list[str]:
    texts = []
    for kind, item in layout(table):
        if kind == "cell":
            texts.append(cell_text(row.cells.get(item.id, Cell()), item, own_n(table, row, item)))
        else:
            texts.append("" if row.summary_row else n_text(row, item))
    return texts


# ------------------------------------------------------------------------------------------------ Markdown
def _md_escape(text: str) -> str:
    """A Markdown table cell: one line (a newline would start a new row), no controls, pipes escaped."""
    return one_line(text).replace("|", "\\|")


def markdown(tables: list[Table]) -> str:
    out = []
    for table in tables:
        headers = list(table.row_header) + [label if table.id == "runs" else f"{group} · {label}"
                                            for group, label in header_cells(table)]
        out += [f"### {table.title}", "", table.caption, ""]
        out.append("| " + " | ".join(_md_escape(header) for header in headers) + " |")
        out.append("|" + "---|" * len(headers))
        for section in table.sections:
            if len(table.sections) > 1 or section.title not in ("Runs", "Agents"):
                out.append(f"| **{_md_escape(section.title)}** |" + " |" * (len(headers) - 1))
            for row in section.rows:
                texts = [*row.header, *body_cells(table, row)]
                out.append("| " + " | ".join(_md_escape(text) for text in texts) + " |")
        out += [""] + [note for note in table.notes] + [""]
    return "\n".join(out).rstrip() + "\n"


# ------------------------------------------------------------------------------------------------ CSV
CSV_FIELDS = ("table", "section", "row", "model", "provider", "agent", "track", "max_rounds", "privileged", "group",
              "column", "metric", "value", "ci_low", "ci_high", "n", "episodes", "interval", "delta", "delta_ci_low",
              "delta_ci_high", "delta_n", "reference_value", "left_out", "scored_zero")


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def cell_json(cell: Cell) -> dict:
    body: dict = {"value": None, "n": cell.estimate.n}
    if cell.plain is not None:
        body["value"] = cell.plain
        return body
    estimate = cell.estimate
    body.update(value=_round(estimate.value), ci_low=_round(estimate.low), ci_high=_round(estimate.high))
    if estimate.value is not None:
        body.update(episodes=estimate.episodes, interval=estimate.method)
        if estimate.spread is not None:
            body["repeat_sd"] = _round(estimate.spread)
    if cell.denominator:
        body.update(left_out=cell.denominator["left_out"], scored_zero=cell.denominator["scored_zero"])
    if cell.reference is not None:
        body.update(reference_value=_round(cell.reference.value), reference_n=cell.reference.n)
    if cell.delta is not None:
        body.update(delta=_round(cell.delta.value), delta_ci_low=_round(cell.delta.low),
                    delta_ci_high=_round(cell.delta.high), delta_n=cell.delta.n, delta_interval=cell.delta.method)
    elif cell.unmatched:
        body["delta_n"] = 0
    return body


def csv_text(tables: list[Table]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for table in tables:
        for section in table.sections:
            for row in section.rows:
                identity = row.identity
                for column in table.columns:
                    if column.id not in row.cells:
                        continue
                    body = cell_json(row.cells[column.id])
                    writer.writerow({key: csv_cell(value) for key, value in {
                        "table": table.id, "section": section.title, "row": " / ".join(filter(None, row.header)),
                        "model": identity.get("model"), "provider": identity.get("provider"),
                        "agent": identity.get("agent"), "track": identity.get("track"),
                        "max_rounds": "/".join(str(value) for value in identity.get("max_rounds") or []),
                        "privileged": identity.get("privileged"), "group": column.group, "column": column.label,
                        "metric": identity.get("metric") or column.metric or column.id,
                        **{key: body.get(key) for key in CSV_FIELDS[12:] if key not in ("left_out", "scored_zero")},
                        "left_out": denominator_text({"left_out": body.get("left_out") or {}, "scored_zero": {}}),
                        "scored_zero": denominator_text({"left_out": {}, "scored_zero": body.get("scored_zero") or {}}),
                    }.items()})
    return buffer.getvalue()


# ------------------------------------------------------------------------------------------------ JSON
def table_json(table: Table) -> dict:
    return {
        "id": table.id,
        "title": table.title,
        "caption": table.caption,
        "row_header": list(table.row_header),
        "columns": [{"id": column.id, "group": column.group, "label": column.label, "module": column.module,
                     "metric": column.metric, "kind": column.kind} for column in table.columns],
        "sections": [{"title": section.title, "rows": [
            {"header": row.header, "identity": row.identity, "summary_row": row.summary_row,
             "cells": {key: cell_json(cell) for key, cell in row.cells.items()}} for row in section.rows]}
            for section in table.sections],
        "notes": table.notes,
    }


def results_json(tables: list[Table], runs: list[dict], provenance: dict | None = None) -> dict:
    body = {"schema": SCHEMA_NAME, "schema_version": SCHEMA_VERSION, "runs": runs,
            "tables": [table_json(table) for table in tables]}
    return {**body, "provenance": provenance} if provenance else body


# ------------------------------------------------------------------------------------------------ LaTeX
LATEX_SPECIALS = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "†": r"$^\dagger$", "—": "---", "·": r"$\cdot$"}
LATEX_ARROWS = {"↑": r"$\uparrow$", "↓": r"$\downarrow$", "↔": r"$\leftrightarrow$"}


def latex_escape(text: str) -> str:
    """LaTeX text on one line (a blank line would end the paragraph inside a cell), specials escaped."""
    return "".join(LATEX_SPECIALS.get(character, LATEX_ARROWS.get(character, character))
                   for character in one_line(text))


def latex_cell(cell: Cell, column: Column, count: int | None = None) -> str:
    value, interval, change, n = cell_parts(cell, column, count)
    text = latex_escape(value)
    if interval:
        text += r"\,{\scriptsize " + latex_escape(interval) + "}"
    if change:
        text += " " + latex_escape(change)
    if n:
        text += r"$_{" + n + "}$"
    return text


def latex(tables: list[Table]) -> str:
    """One booktabs ``table*`` per table: grouped headers with \\cmidrule, sections as \\midrule blocks."""
    out = ["% MedFlow-Bench report tables; needs \\usepackage{booktabs}", ""]
    for table in tables:
        entries = layout(table)
        width = len(table.row_header) + len(entries)
        out += [r"\begin{table*}[t]", r"\centering", r"\scriptsize", r"\setlength{\tabcolsep}{3pt}",
                r"\begin{tabular}{" + "l" * len(table.row_header) + "c" * len(entries) + "}", r"\toprule"]
        spans: list[tuple[str, int, int]] = []
        for index, (group, _) in enumerate(header_cells(table), start=len(table.row_header) + 1):
            if spans and spans[-1][0] == group:
                spans[-1] = (group, spans[-1][1], index)
            else:
                spans.append((group, index, index))
        groups = [rf"\multicolumn{{{end - start + 1}}}{{c}}{{{latex_escape(group)}}}" for group, start, end in spans]
        out.append(" & " * len(table.row_header) + " & ".join(groups) + r" \\")
        out.append(" ".join(rf"\cmidrule(lr){{{start}-{end}}}" for _, start, end in spans))
        out.append(" & ".join(latex_escape(text) for text in
                              [*table.row_header, *(label for _, label in header_cells(table))]) + r" \\")
        for section in table.sections:
            out.append(r"\midrule")
            out.append(rf"\multicolumn{{{width}}}{{l}}{{\textit{{{latex_escape(section.title)}}}}} \\")
            for row in section.rows:
                cells = []
                for kind, item in entries:
                    if kind == "cell":
                        cells.append(latex_cell(row.cells.get(item.id, Cell()), item, own_n(table, row, item)))
                    else:
                        cells.append("" if row.summary_row else latex_escape(n_text(row, item)))
                out.append(" & ".join([*(latex_escape(text) for text in row.header), *cells]) + r" \\")
        out += [r"\bottomrule", r"\end{tabular}",
                rf"\caption{{{latex_escape(table.title)}. {latex_escape(table.caption)} "
                + " ".join(latex_escape(note) for note in table.notes) + "}",
                rf"\label{{tab:medflow-{table.id}}}", r"\end{table*}", ""]
    return "\n".join(out)
