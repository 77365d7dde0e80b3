"""Maintainer checks of the paths only the real 3D Slicer runs (docs/verify-in-slicer.md).

    Slicer --no-main-window --python-script scripts/verify_in_slicer.py --out verify-no-main-window.json
    Slicer --python-script scripts/verify_in_slicer.py --out verify-gui.json

Each check prints PASS, FAIL or SKIP with what it saw, the JSON report keeps them all, and the exit status is 1
when any check failed. The checks use the application's own scene, slice views, CLI modules and Qt event loop:

- app_binding       (item 1) without a main window there is no layout manager: slice logics are built on the
                    application scene; with it, the Red/Yellow/Green widgets' logics are used
- registry          open a case, observe, map a 0..999 point on the application scene
- bench_worker      (item 1) the `bench run --slicer` worker's registry, two episodes on one application
- view_resize       (item 4) a view resized the way the GUI does keeps 0..999 points on the image the agent saw
- brainsfit         (items 2-3) BRAINSFit/BRAINSResample results, a failing BRAINSFit is an error, and neither
                    changes the user's background, foreground or field of view
- dependencies      (item 8) which feature packages are missing (information, not a failure)
- module_tests      (GUI) MedOpenClawTest and MedCopilotTest: audited actions on the app scene, REST server with
                    token on 127.0.0.1 answered on the GUI thread (item 7)
- copilot_panel     (GUI) the MedCopilot module's widget is created
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "MedOpenClaw"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "MedCopilot"))

import numpy as np  # noqa: E402
import slicer  # noqa: E402

from MedOpenClawLib.apps.radiology import build_slicer_registry  # noqa: E402
from MedOpenClawLib.core.audit import AuditTrace  # noqa: E402
from MedOpenClawLib.viewer.application import SlicerApplication  # noqa: E402

SHIFT_MM = np.array([4.0, -3.0, 2.0])


class Skip(Exception):
    """The check does not apply in this mode (e.g. a GUI check without the main window)."""


def gui_mode() -> bool:
    return slicer.app.layoutManager() is not None


def phantom(spacing: float = 2.0, shape=(40, 48, 44)) -> np.ndarray:
    """A smooth, asymmetric (k, j, i) phantom: blobs a registration can lock onto."""
    k, j, i = np.indices(shape, dtype=float)
    blobs = ((20, 24, 22, 9, 600.0), (14, 30, 16, 5, 900.0), (26, 16, 28, 4, 300.0))
    volume = np.zeros(shape)
    for ck, cj, ci, radius, value in blobs:
        volume += value * np.exp(-((k - ck) ** 2 + (j - cj) ** 2 + (i - ci) ** 2) / (2 * radius**2))
    return volume.astype(np.int16)


def write_case(directory: Path, shifts: dict[str, np.ndarray | None]) -> Path:
    """One NRRD per entry (SimpleITK, which Slicer ships), the phantom translated by ``shift`` mm in RAS, or an
    all-zero volume for ``None``."""
    import SimpleITK as sitk

    directory.mkdir(parents=True, exist_ok=True)
    for name, shift in shifts.items():
        image = sitk.GetImageFromArray(phantom() if shift is not None else np.zeros_like(phantom()))
        image.SetSpacing((2.0, 2.0, 2.0))
        origin_ras = np.array([-44.0, -48.0, -40.0]) + (shift if shift is not None else 0.0)
        image.SetOrigin((-origin_ras[0], -origin_ras[1], origin_ras[2]))  # ITK is LPS
        image.SetDirection((-1.0, 0, 0, 0, -1.0, 0, 0, 0, 1.0))
        sitk.WriteImage(image, str(directory / f"{name}.nrrd"))
    return directory


def call(registry, name, **arguments) -> dict:
    result = registry.call(name, arguments)
    if not result.ok:
        raise AssertionError(f"{name} failed: {result.error}")
    return result.to_json(inline_images=False)


def check_app_binding(work: Path) -> str:
    app = SlicerApplication.create()
    expected = gui_mode()
    assert app.embedded and app.gui_views == expected, (app.embedded, app.gui_views)
    assert app.scene is slicer.mrmlScene
    nodes = [logic.GetSliceNode().GetLayoutName() for logic in app.slice_logics.values()]
    assert nodes == ["Red", "Yellow", "Green"], nodes
    return f"layout manager {'present' if expected else 'absent'}; slice logics {nodes} on the app scene"


def check_registry(work: Path) -> str:
    root = write_case(work / "registry", {"T1": np.zeros(3)})
    registry = build_slicer_registry([root], app=SlicerApplication.create())
    opened = call(registry, "open_case", dicom_dir=str(root), size=128)
    data = call(registry, "image_coords_to_ras", view="axial", point_1000=[500, 500])["data"]
    assert data["inside_volume"], data
    return f"{len(opened['images'])} views, centre maps to RAS {data['ras']}"


def check_bench_worker(work: Path) -> str:
    from MedOpenClawLib.worker import service as worker

    root = write_case(work / "worker", {"T1": np.zeros(3)})
    for _episode in range(2):
        registry = worker.build_radiology([str(root)], "A", AuditTrace(None), None)
        call(registry, "open_case", dicom_dir=str(root), size=64)
        call(registry, "scroll", view="axial", direction="up", num_slices=2, size=64)
    return "two episodes on the worker's application (scene cleared between them)"


def resize_red_view(registry, width: int, height: int) -> None:
    """What the GUI does on a view resize: qMRMLSliceControllerWidget::setSliceViewSize -> ResizeSliceNode (without
    a main window there is no widget: the registry's own axial slice logic is resized the same way)."""
    if gui_mode():
        import qt

        slicer.app.layoutManager().sliceWidget("Red").sliceController().setSliceViewSize(qt.QSize(width, height))
    else:
        registry.context.engine.logic("axial").ResizeSliceNode(width, height)


def check_view_resize(work: Path) -> str:
    root = write_case(work / "resize", {"T1": np.zeros(3)})
    registry = build_slicer_registry([root], app=SlicerApplication.create())
    call(registry, "open_case", dicom_dir=str(root), size=128)
    image = call(registry, "observe", view="axial", size=256)["images"][0]
    before = call(registry, "image_coords_to_ras", view="axial", point_1000=[150, 820])["data"]
    resize_red_view(registry, 900, 600)
    after = call(registry, "image_coords_to_ras", view="axial", point_1000=[150, 820])["data"]
    assert np.allclose(before["ras"], after["ras"], atol=1e-3), (before["ras"], after["ras"])
    assert after["image_id"] == image["image_id"] and after["warnings"][0]["code"] == "view_changed", after
    return f"point stayed at RAS {after['ras']} on {image['image_id']}: {after['warnings'][0]['message']}"


def check_brainsfit(work: Path) -> str:
    if not (hasattr(slicer.modules, "brainsfit") and hasattr(slicer.modules, "brainsresample")):
        raise Skip("the BRAINSFit/BRAINSResample CLI modules are not loaded")
    root = write_case(work / "brains", {"Fixed": np.zeros(3), "Moving": SHIFT_MM, "Blank": None})
    registry = build_slicer_registry([root], track="B", app=SlicerApplication.create())
    call(registry, "open_case", dicom_dir=str(root), size=64)
    call(registry, "fusion", background_volume_ref="Fixed", foreground_volume_ref="Moving", foreground_opacity=0.4,
         size=64)
    call(registry, "zoom", view="axial", factor=1.5, size=64)
    views = registry.context.state()["views"]
    fit = call(registry, "register_volumes", fixed_volume_ref="Fixed", moving_volume_ref="Moving")["data"]
    assert fit["parameters"]["backend"] == "BRAINSFit", fit["parameters"]
    translation = np.abs(np.asarray(fit["matrix_ras"])[:3, 3])
    assert np.allclose(translation, np.abs(SHIFT_MM), atol=1.5), fit["matrix_ras"]
    assert registry.context.state()["views"] == views, "BRAINSFit changed the views"
    resampled = call(registry, "resample_volume", volume_name="Moving", transform_name=fit["transform_id"],
                     reference_volume_ref="Fixed")["data"]
    output = slicer.mrmlScene.GetNodeByID(resampled["outputs"]["volume_id"])
    assert slicer.util.arrayFromVolume(output).any(), "BRAINSResample produced an all-zero volume"
    assert registry.context.state()["views"] == views, "BRAINSResample changed the views (update_display)"
    failed = registry.call("register_volumes", {"fixed_volume_ref": "Fixed", "moving_volume_ref": "Blank"})
    assert not failed.ok and failed.error["code"] == "registration_failed", failed.error
    return (f"translation {np.round(translation, 2).tolist()} mm (expected {np.abs(SHIFT_MM).tolist()}); views "
            f"kept; blank moving volume -> {failed.error['message'][:160]}")


def check_dependencies(work: Path) -> str:
    from MedOpenClawLib.core.dependencies import FEATURES, missing_for

    missing = {feature: missing_for([feature]) for feature in FEATURES}
    return "; ".join(f"{feature}: {', '.join(items) or 'complete'}" for feature, items in missing.items())


def check_module_tests(work: Path) -> str:
    if not gui_mode():
        raise Skip("the module tests drive the main window's slice views")
    import slicer.testing  # the application's own (slicer-core has no slicer.testing)

    for module in ("MedOpenClaw", "MedCopilot"):  # as the build farm's ctest runs them (slicer_add_python_unittest)
        slicer.testing.runUnitTest([], module)
    return "MedOpenClawTest and MedCopilotTest passed"


def check_copilot_panel(work: Path) -> str:
    if not gui_mode():
        raise Skip("panels need the main window")
    slicer.util.selectModule("MedCopilot")
    widget = slicer.modules.medcopilot.widgetRepresentation()
    assert widget is not None
    return "MedCopilot panel created"


CHECKS = [check_app_binding, check_registry, check_bench_worker, check_view_resize, check_brainsfit,
          check_dependencies, check_module_tests, check_copilot_panel]


def run_checks(work: Path) -> list[dict]:
    results = []
    for check in CHECKS:
        name = check.__name__.removeprefix("check_")
        try:
            status, detail = "PASS", check(work)
        except Skip as skipped:
            status, detail = "SKIP", str(skipped)
        except Exception as failed:  # a failed check is reported, the others still run
            status, detail = "FAIL", f"{type(failed).__name__}: {failed}\n{traceback.format_exc(limit=4)}"
        slicer.mrmlScene.Clear(0)
        print(f"{status:4} {name}: {detail}", flush=True)
        results.append({"check": name, "status": status, "detail": detail})
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="JSON report to write")
    args = parser.parse_args(sys.argv[1:])
    with tempfile.TemporaryDirectory(prefix="medopenclaw-verify-") as work:
        results = run_checks(Path(work))
    report = {"slicer": slicer.app.applicationVersion, "main_window": gui_mode(), "checks": results}
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 1 if any(result["status"] == "FAIL" for result in results) else 0


if __name__ == "__main__":
    slicer.util.exit(main())
