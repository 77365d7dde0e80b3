"""Stability's pairwise means at linear cost: the same values as measuring every pair one by one (numpy and
itertools as the reference), each final image decoded once, and a stated sample beyond PAIR_SAMPLE distinct pairs."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from PIL import Image

from MedOpenClawLib.trace_audit import pairs, stability
from MedOpenClawLib.trace_audit.milestones import _iou, _same_views

VIEWS = ("axial", "coronal", "sagittal")


def write_images(folder, seed: int, size=(24, 16)) -> dict[str, str]:
    folder.mkdir(parents=True)
    draw = np.random.default_rng(seed)
    for view in VIEWS:
        Image.fromarray(draw.integers(0, 256, (size[1], size[0]), dtype=np.uint8)).save(folder / f"{view}.png")
    return {view: f"{view}.png" for view in VIEWS}


def run(folder, repeat: int, offset: float, box_top: float) -> dict:
    views = {view: {"background": "T1c", "foreground": None, "offset_mm": offset} for view in VIEWS}
    return {"repeat": repeat, "trace_dir": str(folder), "milestones": None,
            "final_view": {"views": views, "images": {view: f"{view}.png" for view in VIEWS}},
            "final_mask": {"volume_ml": 1.0, "bbox_ras": [[0, 0, 0], [10, 10, box_top]]}}


def reference_difference(paths) -> list[float]:
    """Every pair decoded afresh, both at the first image's size (the pairwise definition)."""
    values, size = [], Image.open(paths[0]).size
    for first, second in combinations(paths, 2):
        a, b = (Image.open(path).convert("L") for path in (first, second))
        a, b = (image if image.size == size else image.resize(size) for image in (a, b))
        values.append(float(np.abs(np.asarray(a, float) - np.asarray(b, float)).mean() / 255))
    return values


def test_stability_equals_the_pair_by_pair_means_and_decodes_each_image_once(tmp_path, monkeypatch):
    runs = [run(tmp_path / f"r{index}", index, offset, top)
            for index, (offset, top) in enumerate([(0.0, 10), (0.4, 10), (3.0, 20), (0.0, 10), (7.5, 5)])]
    for index in range(len(runs)):
        write_images(tmp_path / f"r{index}", index, size=(24, 16) if index != 2 else (30, 10))
    opened = []
    real_open = Image.open
    monkeypatch.setattr(Image, "open", lambda path, *a, **k: opened.append(str(path)) or real_open(path, *a, **k))
    result = stability(runs)
    monkeypatch.setattr(Image, "open", real_open)
    assert sorted(opened) == sorted({str(tmp_path / f"r{i}" / f"{v}.png") for i in range(5) for v in VIEWS})
    expected = [value for view in VIEWS for value in reference_difference([tmp_path / f"r{i}" / f"{view}.png"
                                                                          for i in range(5)])]
    assert result["final_image_difference"] == round(sum(expected) / len(expected), 4)
    views = [item["final_view"] for item in runs]
    agree = [_same_views(a, b, 1.0) for a, b in combinations(views, 2)]
    assert result["final_view_agreement"] == round(sum(agree) / len(agree), 4) == 0.3
    boxes = [item["final_mask"]["bbox_ras"] for item in runs]
    iou = [_iou(a, b) for a, b in combinations(boxes, 2)]
    assert result["mask_bbox_iou"] == round(sum(iou) / len(iou), 4) and result["pairs_sampled"] is False


def test_unreadable_images_drop_out_with_their_pairs(tmp_path):
    paths = []
    for index in range(3):
        write_images(tmp_path / f"r{index}", index)
        paths.append(tmp_path / f"r{index}" / "axial.png")
    (tmp_path / "broken.png").write_bytes(b"not a png")
    total, count = pairs.pixel_difference_sum([paths[0], tmp_path / "broken.png", tmp_path / "absent.png", *paths[1:]])
    assert count == 3 and total == pytest.approx(sum(reference_difference(paths)))
    assert pairs.pixel_difference_sum([paths[0], tmp_path / "broken.png"]) == (0.0, 0)


def test_beyond_the_bound_the_mean_is_a_stated_sample_of_pairs(monkeypatch):
    values = list(np.random.default_rng(3).uniform(0, 1, 60))
    exact = float(np.mean([abs(a - b) for a, b in combinations(values, 2)]))
    assert pairs.pair_mean(values, lambda a, b: abs(a - b), key=float) == (pytest.approx(exact), False)
    monkeypatch.setattr(pairs, "PAIR_SAMPLE", 400)
    sampled, was_sampled = pairs.pair_mean(values, lambda a, b: abs(a - b), key=float)
    assert was_sampled and sampled == pytest.approx(exact, abs=0.05)
    repeated = [0.0] * 500 + [1.0] * 500  # 2 distinct values: exact however many runs
    assert pairs.pair_mean(repeated, lambda a, b: abs(a - b), key=float) == (pytest.approx(500 * 500 / 499500), False)
    assert pairs.pair_mean([1.0], lambda a, b: 0.0) == (None, False)
