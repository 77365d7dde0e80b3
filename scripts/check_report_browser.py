"""Open a `bench report` folder in a real headless Chromium (Debian's chromium-headless-shell or chromium):
screenshot the index, one run page and one episode page at common widths, and check what a person sees: no
screenshot is blank, no page prints markup as text, the index renders every row of every table results.json
holds and links every run page, and it does not overflow horizontally at 1400 px (wide tables scroll inside their
own box; the widest one's scrolled-off width is reported). Writes a JSON verdict; exit status 1 on a failed check,
2 when no browser is installed (scripts/install_browser.sh installs one).

Run: python scripts/check_report_browser.py REPORT_DIR [--out DIR] [--docs docs/report_index.png]
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser")
WIDTHS = (1400, 1024, 800)
# Runs in a copy of each page after load; writes what a person sees as JSON into <pre id="probe-result">: the
# document's and the widest table's overflow, rendered rows and links per results table, and any text that reads
# as markup (tag-like text outside <pre>/<code>, where model output and arguments are shown verbatim). The result
# is never displayed (an inline !important display: none beats any page style), so a screenshot of the copy
# taken in the same browser launch is the page's.
TAGS = ("section|div|table|thead|tbody|tr|td|th|a|span|p|h[1-6]|ul|ol|li|img|figure|figcaption|nav|main|details|"
        "summary|dl|dt|dd|b|br|svg")
PROBE = """<script>var TAGS = '""" + TAGS + """'; window.addEventListener('load', function () {
 var e = document.documentElement, inner = 0, tables = {}, markup = [];
 document.querySelectorAll('.table-wrap').forEach(function (w) {
  inner = Math.max(inner, w.scrollWidth - w.clientWidth); });
 document.querySelectorAll('table.results').forEach(function (t) {
  var id = t.closest('section') ? t.closest('section').id : '';
  tables[id] = {rows: t.querySelectorAll('tbody tr:not(.section)').length, links: t.querySelectorAll('a[href]').length};
 });
 var tag = new RegExp('<\\\\/?(' + TAGS + ')(\\\\s[^<>]*)?\\\\/?>', 'i');
 var walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT), node;
 while ((node = walker.nextNode())) {
  if (node.parentElement.closest('pre, code, script')) continue;
  var found = tag.exec(node.textContent);
  if (found && markup.length < 5) markup.push(found[0].slice(0, 80));
 }
 var out = document.createElement('pre'); out.id = 'probe-result';
 out.style.setProperty('display', 'none', 'important');
 out.textContent = JSON.stringify({scroll: e.scrollWidth, client: e.clientWidth, table_scroll: inner,
  tables: tables, links: document.querySelectorAll('a[href]').length, markup: markup});
 document.body.appendChild(out);
});</script>"""


def browser() -> str | None:
    return next((path for path in map(shutil.which, BROWSERS) if path), None)


def _run(binary: str, width: int, height: int, *arguments: str) -> subprocess.CompletedProcess:
    command = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--mute-audio",
               "--no-first-run", f"--window-size={width},{height}", "--virtual-time-budget=5000", *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def _screenshot_taken(page: Path, target: Path, completed: subprocess.CompletedProcess) -> Path:
    if not target.is_file():
        raise RuntimeError(f"no screenshot of {page}: {completed.stderr[-500:]}")
    return target


def screenshot(binary: str, page: Path, target: Path, width: int, height: int = 1000) -> Path:
    completed = _run(binary, width, height, f"--screenshot={target}", page.resolve().as_uri())
    return _screenshot_taken(page, target, completed)


def probe(binary: str, page: Path, width: int, target: Path) -> dict:
    """What the page shows after load (see PROBE), read by a probe script in a copy beside the page (same
    folder, so its relative links resolve); the same browser launch screenshots the page into ``target`` (one
    Chromium start instead of two)."""
    copy = page.with_name(f".probe-{page.name}")
    copy.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    try:
        completed = _run(binary, width, 1000, "--dump-dom", f"--screenshot={target}", copy.resolve().as_uri())
    finally:
        copy.unlink()
    match = re.search(r'<pre id="probe-result"[^>]*>(.*?)</pre>', completed.stdout, re.S)
    if not match:
        raise RuntimeError(f"the probe did not run in {page}: {completed.stderr[-500:]}")
    _screenshot_taken(page, target, completed)
    return json.loads(html.unescape(match.group(1)))


def expected_rows(report: Path) -> dict[str, int]:
    """Rows per table as results.json (written from the same tables) has them: the index must render each."""
    path = report / "results.json"
    if not path.is_file():
        return {}
    tables = json.loads(path.read_text(encoding="utf-8")).get("tables", [])
    return {table["id"]: sum(len(section.get("rows", [])) for section in table.get("sections", []))
            for table in tables}


def rendered_problems(name: str, seen: dict, expected: dict[str, int], runs: int) -> list[str]:
    """A page that prints markup as text, or an index whose tables lost rows or the runs table its links."""
    problems = [f"{name} shows markup as text: {text!r}" for text in seen["markup"]]
    if name != "index":
        return problems
    for table_id, rows in expected.items():
        shown = seen["tables"].get(table_id, {}).get("rows", 0)
        if shown != rows:
            problems.append(f"index renders {shown} rows of table {table_id}, results.json has {rows}")
    if "runs" in expected and seen["tables"].get("runs", {}).get("links", 0) < runs:
        problems.append(f"the index's runs table links {seen['tables'].get('runs', {}).get('links', 0)} of "
                        f"{runs} run pages")
    return problems


def blank(path: Path) -> bool:
    from PIL import Image, ImageStat

    with Image.open(path) as image:
        return max(ImageStat.Stat(image.convert("L")).stddev) < 2.0


def check(report: Path, out: Path, docs: Path | None = None, widths: tuple[int, ...] = WIDTHS) -> dict:
    """Screenshot the index, the first run page and the first episode page at each width; measure the index's
    overflow at each width (the verdict fails on any overflow at 1400 px or a blank screenshot)."""
    binary = browser()
    if binary is None:
        raise FileNotFoundError("no Chromium found; run scripts/install_browser.sh")
    out.mkdir(parents=True, exist_ok=True)
    index = report / "index.html"
    pages = {"index": index, "run": next(iter(sorted((report / "runs").glob("*.html"))), None),
             "episode": next(iter(sorted((report / "runs").glob("*/*.html"))), None)}
    verdict: dict = {"browser": Path(binary).name, "screenshots": {}, "problems": []}
    expected = expected_rows(report)
    runs = len(list((report / "runs").glob("*.html")))
    for name, page in pages.items():
        if page is None:
            verdict["problems"].append(f"no {name} page in {report}")
            continue
        for width in widths:
            target = out / f"{name}_{width}.png"
            probed = width == widths[0] or name == "index"
            seen = probe(binary, page, width, target) if probed else None
            if seen is None:
                screenshot(binary, page, target, width)
            entry = verdict["screenshots"][target.name] = {"blank": blank(target)}
            if entry["blank"]:
                verdict["problems"].append(f"{target.name} is blank")
            if seen is None:
                continue
            entry.update(scroll_width=seen["scroll"], client_width=seen["client"],
                         widest_table_scrolls_px=seen["table_scroll"], links=seen["links"])
            if width == widths[0]:
                if name == "index":
                    entry["table_rows"] = {key: value["rows"] for key, value in seen["tables"].items()}
                verdict["problems"].extend(rendered_problems(name, seen, expected, runs))
            if name == "index" and width == 1400 and seen["scroll"] > seen["client"]:
                verdict["problems"].append(f"index overflows horizontally at 1400 px ({seen['scroll']} > "
                                           f"{seen['client']})")
    if docs is not None:
        docs.parent.mkdir(parents=True, exist_ok=True)
        screenshot(binary, index, docs, 1400, 1100)
    verdict["ok"] = not verdict["problems"]
    return verdict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("report", type=Path, help="a `medopenclaw bench report` output folder")
    parser.add_argument("--out", type=Path, help="where the screenshots go (default: a temporary folder)")
    parser.add_argument("--docs", type=Path, help="also write a 1400 px screenshot of the index here")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="report-browser-"))
    try:
        verdict = check(args.report, out, args.docs)
    except FileNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    verdict["out"] = str(out)
    print(json.dumps(verdict, indent=1, sort_keys=True))
    return 0 if verdict["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
