"""Open a `bench report` folder in a real headless Chromium (Debian's chromium-headless-shell or chromium):
screenshot the index, one run page and one episode page at common widths, check that no screenshot is blank and
that the index does not overflow horizontally at 1400 px (wide tables scroll inside their own box; the widest
one's scrolled-off width is reported). Writes a JSON verdict; exit status 1 on a failed check,
2 when no browser is installed (scripts/install_browser.sh installs one).

Run: python scripts/check_report_browser.py REPORT_DIR [--out DIR] [--docs docs/report_index.png]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser")
WIDTHS = (1400, 1024, 800)
PROBE = ("<script>window.addEventListener('load', function () { var e = document.documentElement, inner = 0;"
         " document.querySelectorAll('.table-wrap').forEach(function (w) {"
         " inner = Math.max(inner, w.scrollWidth - w.clientWidth); });"
         " document.body.setAttribute('data-probe', e.scrollWidth + '/' + e.clientWidth + '/' + inner); });</script>")


def browser() -> str | None:
    return next((path for path in map(shutil.which, BROWSERS) if path), None)


def _run(binary: str, width: int, height: int, *arguments: str) -> subprocess.CompletedProcess:
    command = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--mute-audio",
               "--no-first-run", f"--window-size={width},{height}", "--virtual-time-budget=5000", *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def screenshot(binary: str, page: Path, target: Path, width: int, height: int = 1000) -> Path:
    completed = _run(binary, width, height, f"--screenshot={target}", page.resolve().as_uri())
    if not target.is_file():
        raise RuntimeError(f"no screenshot of {page}: {completed.stderr[-500:]}")
    return target


def page_widths(binary: str, page: Path, width: int) -> tuple[int, int, int]:
    """(scrollWidth, clientWidth) of the document and the widest table's scrolled-off width, read by a probe
    script in a copy beside the page (same folder, so its relative links resolve)."""
    probe = page.with_name(f".probe-{page.name}")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    try:
        completed = _run(binary, width, 1000, "--dump-dom", probe.resolve().as_uri())
    finally:
        probe.unlink()
    match = re.search(r'data-probe="(\d+)/(\d+)/(\d+)"', completed.stdout)
    if not match:
        raise RuntimeError(f"the probe did not run in {page}: {completed.stderr[-500:]}")
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


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
    for name, page in pages.items():
        if page is None:
            verdict["problems"].append(f"no {name} page in {report}")
            continue
        for width in widths:
            target = screenshot(binary, page, out / f"{name}_{width}.png", width)
            entry = verdict["screenshots"][target.name] = {"blank": blank(target)}
            if entry["blank"]:
                verdict["problems"].append(f"{target.name} is blank")
            if name != "index":
                continue
            scroll, client, table_scroll = page_widths(binary, page, width)
            entry.update(scroll_width=scroll, client_width=client, widest_table_scrolls_px=table_scroll)
            if width == 1400 and scroll > client:
                verdict["problems"].append(f"index overflows horizontally at 1400 px ({scroll} > {client})")
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
