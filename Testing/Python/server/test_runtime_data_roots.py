"""Ground truth is never served: a case package given as a data root is narrowed to its data/ folder (one line
says so) and a root holding a package's hidden/ folder anywhere else is refused, by every front-end (REST serve,
MCP stdio, MCP Streamable HTTP); the application is chosen from what the roots hold. The MCP servers' package data
is proven by test_mcp_sdk.py's stdio and HTTP servers, which are given a package (one server per transport)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx2
import nibabel as nib
import numpy as np
import pytest
from test_mcp_sdk import ENV, NO_SPARE

from MedOpenClawLib.apps.radiology import build_headless_slicer_registry
from MedOpenClawLib.core.policy import DataRootPolicy
from MedOpenClawLib.core.result import ActionError
from MedOpenClawLib.server.sessions import SCAN_DEPTH, choose_application, served_roots


def write_volume(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(np.arange(8 * 8 * 4, dtype=np.int16).reshape(8, 8, 4), np.eye(4)), path)
    return path


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    """A package as ``bench prepare --out`` writes it: data/, hidden/ (the lesion mask) and manifest.json."""
    root = tmp_path_factory.mktemp("packages") / "CASES"
    write_volume(root / "data" / "case1" / "t1.nii.gz")
    write_volume(root / "hidden" / "case1" / "lesion_mask.nii.gz")
    (root / "manifest.json").write_text(json.dumps({"format": 1, "module": "ucsf-pdgm", "cases": []}))
    return root


def test_a_package_root_is_narrowed_to_its_data(package):
    roots, notes = served_roots([str(package)])
    assert roots == [str(package.resolve() / "data")]
    assert len(notes) == 1 and "serving only" in notes[0] and "hidden/" in notes[0]
    assert served_roots([str(package / "data" / "case1")]) == ([str((package / "data" / "case1").resolve())], [])


@pytest.mark.parametrize("where", ["parent", "hidden", "hidden/case1", "no-data"])
def test_roots_exposing_ground_truth_are_refused(package, tmp_path, where):
    if where == "no-data":
        bare = tmp_path / "bare"
        write_volume(bare / "hidden" / "x.nii.gz")
        root = bare
    else:
        root = package.parent if where == "parent" else package / where
    with pytest.raises(ValueError, match="ground truth|outside its data/"):
        served_roots([str(root)])


def test_ground_truth_is_never_opened_however_deep_or_late_a_scan_would_find_it(tmp_path):
    """The path resolver refuses a package's hidden/ (and manifest) from the path's own ancestors: a package
    deeper than the root scan reaches (SCAN_DEPTH) is served, yet its masks are refused by path, by a link inside
    the data and in a scan of a folder that links to them."""
    root = tmp_path / "root"
    package = root.joinpath(*[f"level{depth}" for depth in range(SCAN_DEPTH + 2)]) / "CASES"
    write_volume(package / "data" / "case1" / "t1.nii.gz")
    mask = write_volume(package / "hidden" / "case1" / "lesion_mask.nii.gz")
    (package / "manifest.json").write_text("{}")
    assert served_roots([str(root)]) == ([str(root.resolve())], [])  # the scan stops short of the package
    (root / "linked").mkdir()
    (root / "linked" / "mask.nii.gz").symlink_to(mask)
    (root / "linked" / "hidden_case").symlink_to(mask.parent, target_is_directory=True)
    policy = DataRootPolicy([root])
    for path in (mask, mask.parent, package / "hidden", package / "manifest.json", root / "linked" / "mask.nii.gz",
                 root / "linked" / "hidden_case" / "lesion_mask.nii.gz"):
        with pytest.raises(ActionError, match="ground truth") as caught:
            policy.resolve(str(path))
        assert caught.value.code == "path_not_allowed"
    assert policy.resolve(str(package / "data" / "case1" / "t1.nii.gz")).name == "t1.nii.gz"
    listing = policy.scan(policy.resolve(str(root / "linked")))
    assert listing.files == [] and listing.skipped == 2
    registry = build_headless_slicer_registry([root])
    refused = registry.call("open_case", {"dicom_dir": str(mask.parent)}, actor="agent")
    assert refused.error["code"] == "path_not_allowed"
    assert registry.call("open_case", {"dicom_dir": str(package / "data" / "case1"), "size": 64}, actor="agent").ok


def test_the_application_follows_the_roots(tmp_path, package):
    slides = tmp_path / "slides"
    slides.mkdir()
    (slides / "s1.svs").write_bytes(b"")
    application, why = choose_application("auto", [str(slides)])
    assert application == "pathology" and "whole-slide" in why
    assert choose_application("auto", [str(package / "data")]) == ("radiology", None)
    assert choose_application("radiology", [str(slides)]) == ("radiology", None)


def medopenclaw(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "MedOpenClawLib.cli", *arguments]


@pytest.mark.parametrize("front_end", [["serve", "--port", "0"], ["mcp"], ["mcp", "--transport", "http"]])
def test_every_front_end_refuses_a_root_holding_ground_truth(package, front_end):
    done = subprocess.run(medopenclaw(*front_end, "--data-root", str(package.parent)), capture_output=True,
                          text=True, timeout=120, env={**os.environ, **ENV}, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "ground truth" in done.stderr and "Traceback" not in done.stderr


@pytest.fixture(scope="module")
def slide_package(tmp_path_factory) -> Path:
    """A whole-slide package: data/case1/slide.tif and, in hidden/, a mask in the same format (a slide the viewer
    would open) and manifest.json."""
    from MedOpenClawLib.pathology.pyramid_tiff import write_pyramidal_tiff

    root = tmp_path_factory.mktemp("slide_packages") / "CASES"
    for path in (root / "data" / "case1" / "slide.tif", root / "hidden" / "case1" / "mask.tif"):
        path.parent.mkdir(parents=True)
        write_pyramidal_tiff(path, 512, 384, lambda ds, x, y, w, h: np.full((h, w, 3), 128, np.uint8), (1, 4),
                             mpp=None)
    (root / "manifest.json").write_text(json.dumps({"format": 1, "module": "bracs", "cases": []}))
    return root


def test_rest_serves_only_the_package_data(slide_package):
    """A whole-slide package (the viewer is chosen from what its data/ holds; its process starts without Slicer):
    the MCP servers' radiology packages are test_mcp_sdk.py's."""
    env = {**os.environ, **ENV, "MEDOPENCLAW_TOKEN": "gt-token"}
    server = subprocess.Popen(medopenclaw("serve", "--port", "0", "--data-root", str(slide_package), NO_SPARE),
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().split(" on ")[1].split()[0]
        assert "serving only" in server.stderr.readline() and "pathology" in server.stderr.readline()
        headers = {"Authorization": "Bearer gt-token"}

        def load(path: str) -> dict:
            return httpx2.post(f"{url}/v1/actions/load_image", json={"image_path": path}, headers=headers,
                               timeout=120).json()

        for hidden in (str(slide_package / "hidden" / "case1" / "mask.tif"), "../hidden/case1/mask.tif"):
            assert load(hidden)["error"]["code"] == "path_not_allowed"
        assert load("case1/slide.tif")["ok"]  # a relative path is taken in its data/
    finally:
        server.terminate()
        server.wait(timeout=30)
