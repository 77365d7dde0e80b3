"""``bench report DIR``: the paper-style results table (Markdown, CSV, JSON) and an HTML report with one page per
episode (prompt, every step with its arguments and rendered images, the answer, the evidence drawn over the
image, and the pass/fail of each gate).

DIR is a ``bench run`` output directory (``run.json``, ``summary.json``, ``episodes/<id>/result.json`` with the
trace path relative to DIR) or a directory whose sub-directories are such runs (one per module or model).
"""

from __future__ import annotations

import csv
import html
import json
import os
from pathlib import Path

import numpy as np

from ..audit import read_trace
from .cases import PATHOLOGY_MODULES, CaseFormatError, load_ground_truth
from .scoring.geometry import mask_from_file

TABLE_COLUMNS = (
    "run",
    "module",
    "agent",
    "track",
    "n",
    "task",
    "strict",
    "loc",
    "invalid",
    "planning_f1",
    "execution",
    "progress_rate",
    "budget_exhaustion",
    "images",
    "input_tokens",
    "output_tokens",
)
STYLE = (
    "body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}"
    ".pass{color:#080}.fail{color:#b00}.na{color:#888}img{max-width:320px;margin:2px;border:1px solid #ddd}"
    "pre{white-space:pre-wrap;background:#f6f6f6;padding:8px}"
)


def find_runs(directory: Path) -> list[Path]:
    if (directory / "summary.json").is_file() and (directory / "episodes").is_dir():
        return [directory]
    runs = sorted(path.parent for path in directory.glob("*/summary.json") if (path.parent / "episodes").is_dir())
    if not runs:
        raise CaseFormatError(f"{directory} holds no bench run (summary.json + episodes/)")
    return runs


def table_row(run: Path) -> dict:
    summary = json.loads((run / "summary.json").read_text())
    identity = json.loads((run / "run.json").read_text()) if (run / "run.json").is_file() else {}
    process = summary.get("process") or {}
    row = {"run": run.name, "agent": identity.get("agent"), "track": identity.get("track")}
    row.update({key: summary.get(key) for key in ("module", "n", "task", "strict", "loc", "invalid")})
    row.update({key: process.get(key) for key in TABLE_COLUMNS if key in process or key == "budget_exhaustion"})
    return {column: row.get(column) for column in TABLE_COLUMNS}


def _cell(value) -> str:
    if value is None:
        return "–"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def markdown_table(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(TABLE_COLUMNS) + " |", "|" + "---|" * len(TABLE_COLUMNS)]
    lines += ["| " + " | ".join(_cell(row[column]) for column in TABLE_COLUMNS) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _gate_html(gates: dict) -> str:
    items = []
    for name, value in gates.items():
        css, text = {True: ("pass", "pass"), False: ("fail", "fail"), None: ("na", "n/a")}[value]
        items.append(f'<li>{html.escape(name)}: <span class="{css}">{text}</span></li>')
    return "<ul>" + "".join(items) + "</ul>"


def radiology_overlay(truth, parsed: dict, out: Path) -> Path | None:
    """Axial slice of the hidden mask's grid at the answered key slice (else the reference one), mask in red,
    the answered RAS point as a green cross when it falls on that slice."""
    from PIL import Image, ImageDraw

    if not truth.localization or truth.mask_path is None or not truth.mask_path.is_file():
        return None
    mask = mask_from_file(truth.mask_path)
    evidence = parsed.get("evidence") or {}
    s_value = evidence.get("key_slice_axial_mm")
    if s_value is None:
        s_value = truth.localization["reference_key_slices"]["axial"]
    inverse = np.linalg.inv(mask.affine)
    k_axis = int(np.argmax(np.abs(mask.affine[2, :3])))
    centre = np.array(truth.localization["reference_ras"], dtype=float)
    centre[2] = s_value
    index = int(np.clip(np.round((inverse @ np.append(centre, 1.0))[k_axis]), 0, mask.data.shape[k_axis] - 1))
    plane = np.take(mask.data, index, axis=k_axis)
    image = Image.fromarray(np.where(plane, 200, 30).astype(np.uint8).T).convert("RGB")
    ras = evidence.get("ras")
    if ras and len(ras) == 3:
        voxel = inverse @ np.append(np.asarray(ras, dtype=float), 1.0)
        if round(voxel[k_axis]) == index:
            x, y = [voxel[axis] for axis in range(3) if axis != k_axis]
            draw = ImageDraw.Draw(image)
            draw.line((x - 3, y, x + 3, y), fill=(0, 255, 0))
            draw.line((x, y - 3, x, y + 3), fill=(0, 255, 0))
    image = image.transpose(Image.FLIP_TOP_BOTTOM).resize((image.width * 3, image.height * 3), Image.NEAREST)
    image.save(out)
    return out


def pathology_overlay(truth, parsed: dict, slide: Path, out: Path) -> Path | None:
    """Smallest pyramid level of the slide with the hidden regions (green ROI/tumour, grey exclusions) and the
    answered localizations (red dots)."""
    import tifffile
    from PIL import Image, ImageDraw

    if not slide.is_file() or not truth.slide_size:
        return None
    with tifffile.TiffFile(slide) as tiff:
        level = tiff.pages[len(tiff.pages) - 1].asarray()
    image = Image.fromarray(level[..., :3]).convert("RGB")
    scale = image.width / truth.slide_size[0]
    draw = ImageDraw.Draw(image)
    for region in truth.regions:
        colour = (128, 128, 128) if region["kind"] == "exclusion" else (0, 160, 0)
        draw.polygon([(x * scale, y * scale) for x, y in region["polygon"]], outline=colour)
    for x, y in parsed.get("localizations") or []:
        draw.ellipse((x * scale - 3, y * scale - 3, x * scale + 3, y * scale + 3), fill=(220, 0, 0))
    image.save(out)
    return out


def episode_page(run: Path, result: dict, identity: dict, out_dir: Path) -> Path:
    """One HTML page for one episode; image paths are made relative to the page."""
    episode_id = result.get("episode_id", result["case_id"])
    page = out_dir / "episodes" / f"{episode_id}.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    score = result.get("score") or {}
    parsed = (score.get("details") or {}).get("parsed") or {}
    parts = [
        f"<h1>{html.escape(episode_id)}</h1>",
        f"<p>module {html.escape(str(score.get('module')))} · task {_cell(score.get('task'))} · strict "
        f"{_cell(score.get('strict'))} · loc {_cell(score.get('loc'))}"
        + (f" · <b>INVALID</b>: {html.escape(str(result.get('invalid')))}" if result.get("invalid") else "")
        + "</p>",
    ]
    records = []
    if result.get("trace") and (run / result["trace"]).is_file():
        trace_path = run / result["trace"]
        records = read_trace(trace_path)
        for record in records:
            if record.get("kind") == "episode_prompt":
                payload = record.get("payload") or {}
                parts.append(
                    "<h2>Prompt</h2><pre>"
                    + html.escape(str(payload.get("system", "")))
                    + "</pre><pre>"
                    + html.escape(str(payload.get("user", "")))
                    + "</pre>"
                )
        parts.append(
            "<h2>Steps</h2><table><tr><th>#</th><th>actor</th><th>action</th><th>arguments</th>"
            "<th>status</th><th>images</th></tr>"
        )
        for record in records:
            if record.get("kind") != "action":
                continue
            images = []
            for image in (record.get("result") or {}).get("images") or []:
                if image.get("path"):
                    target = trace_path.parent / image["path"]
                    images.append(
                        f'<img src="{html.escape(os.path.relpath(target, page.parent))}" '
                        f'title="{html.escape(str(image.get("view")))}">'
                    )
            error = record.get("error") or {}
            status = record.get("status", "")
            if error:
                status += f": {error.get('code')} {error.get('message', '')}"
            parts.append(
                f"<tr><td>{record.get('seq')}</td><td>{html.escape(str(record.get('actor')))}</td>"
                f"<td>{html.escape(str(record.get('action')))}</td>"
                f"<td><code>{html.escape(json.dumps(record.get('arguments'), sort_keys=True))}</code></td>"
                f"<td>{html.escape(status)}</td><td>{''.join(images)}</td></tr>"
            )
        parts.append("</table>")
    parts.append("<h2>Answer</h2><pre>" + html.escape(str(result.get("response") or "(no answer)")) + "</pre>")
    parts.append("<h3>Parsed</h3><pre>" + html.escape(json.dumps(parsed, indent=1, sort_keys=True)) + "</pre>")
    parts.append("<h2>Evidence gates</h2>" + _gate_html(score.get("gates") or {}))
    overlay = _overlay(identity, score, parsed, page)
    if overlay is not None:
        parts.append(f'<h3>Evidence over the hidden reference</h3><img src="{overlay.name}" style="max-width:600px">')
    page.write_text(f"<!doctype html><meta charset=utf-8><style>{STYLE}</style>" + "".join(parts))
    return page


def _overlay(identity: dict, score: dict, parsed: dict, page: Path) -> Path | None:
    cases_dir = identity.get("cases_dir")
    if not cases_dir or not score.get("case_id"):
        return None
    try:
        truth = load_ground_truth(cases_dir, score["case_id"])
    except CaseFormatError:
        return None
    target = page.with_suffix(".png")
    if truth.module in PATHOLOGY_MODULES:
        manifest = json.loads((Path(cases_dir) / "manifest.json").read_text())
        slides = [case.get("slide") for case in manifest.get("cases", []) if case.get("case_id") == truth.case_id]
        return pathology_overlay(truth, parsed, Path(cases_dir) / slides[0], target) if slides and slides[0] else None
    return radiology_overlay(truth, parsed, target)


def write_report(directory: str | os.PathLike, out: str | os.PathLike | None = None) -> dict:
    """Write results.{md,csv,json} and index.html (+ episodes/*.html) and return the paths written."""
    directory = Path(directory).resolve()
    out_dir = Path(out).resolve() if out else directory / "report"
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = find_runs(directory)
    rows = [table_row(run) for run in runs]
    (out_dir / "results.md").write_text(markdown_table(rows))
    with open(out_dir / "results.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=TABLE_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    (out_dir / "results.json").write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
    index = [
        f"<!doctype html><meta charset=utf-8><style>{STYLE}</style><h1>MedFlow-Bench report</h1><table><tr>"
        + "".join(f"<th>{column}</th>" for column in TABLE_COLUMNS)
        + "</tr>"
    ]
    index += ["<tr>" + "".join(f"<td>{_cell(row[column])}</td>" for column in TABLE_COLUMNS) + "</tr>" for row in rows]
    index.append("</table>")
    pages = 0
    for run in runs:
        identity = json.loads((run / "run.json").read_text()) if (run / "run.json").is_file() else {}
        index.append(f"<h2>{html.escape(run.name)}</h2><ul>")
        for result_path in sorted((run / "episodes").glob("*/result.json")):
            result = json.loads(result_path.read_text())
            page = episode_page(run, result, identity, out_dir / run.name)
            score = result.get("score") or {}
            index.append(
                f'<li><a href="{html.escape(page.relative_to(out_dir).as_posix())}">'
                f"{html.escape(result.get('episode_id', result['case_id']))}</a> task {_cell(score.get('task'))}"
                f" strict {_cell(score.get('strict'))} loc {_cell(score.get('loc'))}</li>"
            )
            pages += 1
        index.append("</ul>")
    (out_dir / "index.html").write_text("".join(index))
    return {
        "out": str(out_dir),
        "runs": len(runs),
        "episodes": pages,
        "files": ["results.md", "results.csv", "results.json", "index.html"],
    }
