"""One warning shape for every action: ``data["warnings"]`` is a list of {code, message} entries. The registry
refuses (internal_error, rolled back) a handler that reports a warning any other way, so a client reads warnings
one way whatever the action; the viewer's own warnings carry stable codes."""

from __future__ import annotations

import numpy as np
import pytest
from runtime_data import call_ok, phantom, write_nifti
from test_runtime_registry import CountingContext

from MedOpenClawLib.apps.radiology import build_slicer_registry
from MedOpenClawLib.core.registry import ActionRegistry
from MedOpenClawLib.core.result import Result, add_warning, warning
from MedOpenClawLib.core.toolset import Toolset


def warning_toolset(data: dict) -> Toolset:
    toolset = Toolset("warnings")

    @toolset.action("warn", "viewer", "Change state and report ``data``.")
    def warn(ctx) -> Result:
        ctx.counter += 1
        return Result(ok=True, data=dict(data))

    return toolset


@pytest.mark.parametrize("data", [
    {"warnings": ["a bare string"]},
    {"warning": "a single field"},
    {"warnings": [{"code": "x"}]},
    {"warnings": {"code": "x", "message": "not a list"}},
])
def test_a_warning_in_another_shape_is_a_handler_bug(data):
    registry = ActionRegistry(CountingContext(), [warning_toolset(data)])
    result = registry.call("warn")
    assert result.error["code"] == "internal_error" and "warn" in result.error["message"]
    assert registry.context.counter == 0  # rolled back like any other handler fault


def test_warnings_in_the_one_shape_pass_with_their_details():
    data = add_warning({}, "view_changed", "the view moved", image_id="img-3")
    assert data == {"warnings": [warning("view_changed", "the view moved", image_id="img-3")]}
    result = ActionRegistry(CountingContext(), [warning_toolset(data)]).call("warn")
    assert result.ok and result.data["warnings"][0] == {"code": "view_changed", "message": "the view moved",
                                                       "image_id": "img-3"}


def test_viewer_warnings_carry_codes(tmp_path):
    (tmp_path / "case").mkdir()
    write_nifti(tmp_path / "case" / "ct.nii.gz", phantom(), np.diag([1.0, 1.0, 2.0, 1.0]))
    registry = build_slicer_registry([tmp_path])
    call_ok(registry, "open_case", dicom_dir=str(tmp_path / "case"), size=64)
    for _ in range(80):
        zoomed = call_ok(registry, "zoom", view="axial", factor=0.2, size=64)
    assert [item["code"] for item in zoomed.data["warnings"]] == ["zoom_limit"]
