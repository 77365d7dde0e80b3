"""The README's panel screenshots come from scripts/gui_screenshots.py: run it as the README says, so the
screenshots cannot rot (an import or API change breaks this test, not the next person regenerating them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")
from PIL import Image  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


def test_gui_screenshot_script_writes_both_panels(tmp_path):
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    completed = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gui_screenshots.py"), "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=180, env=env, cwd=ROOT,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    for name, min_height in (("medopenclaw_panel.png", 900), ("medcopilot_panel.png", 900)):
        with Image.open(tmp_path / name) as image:
            pixels = np.asarray(image.convert("L"), dtype=float)
        assert pixels.shape[0] >= min_height and pixels.shape[1] >= 600
        assert pixels.std() > 20, f"{name} is blank"
