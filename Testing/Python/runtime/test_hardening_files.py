"""Hostile files in a case folder (issue 23): detached headers naming data outside the roots, file names that are
not UTF-8 or hold control/bidirectional characters, headers that claim huge volumes, slides stored as one huge
tile, and a session that keeps adding volumes. Each must be refused (or skipped and counted) before a reader
decodes anything, with the session left working."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from runtime_data import call_error, call_ok, oblique_lps_affine, phantom, write_nifti

from MedOpenClawLib.apps.radiology import build_slicer_registry
from MedOpenClawLib.core.result import ActionError
from MedOpenClawLib.pathology.slide import MAX_NATIVE_TILE_PIXELS, Slide
from MedOpenClawLib.viewer import loading

NRRD_HEADER = ("NRRD0004\ntype: uint8\ndimension: 3\nsizes: 4 4 4\nspace: left-posterior-superior\n"
               "space directions: (1,0,0) (0,1,0) (0,0,1)\nencoding: raw\ndata file: {}\n\n")
MHD_HEADER = "ObjectType = Image\nNDims = 3\nDimSize = 4 4 4\nElementType = MET_UCHAR\nElementDataFile = {}\n"


@pytest.fixture()
def case(tmp_path):
    """A data root holding one case folder with one good volume, and a secret beside the root."""
    (tmp_path / "secret.raw").write_bytes(bytes(range(64)))
    root = tmp_path / "data"
    folder = root / "case"
    folder.mkdir(parents=True)
    write_nifti(folder / "CT.nii.gz", phantom(0), oblique_lps_affine())
    return root


def _loaded(result) -> list[str]:
    return sorted(volume["name"] for volume in result.data["volumes"])


@pytest.mark.parametrize("header,name", [(NRRD_HEADER, "x.nhdr"), (MHD_HEADER, "x.mhd")])
@pytest.mark.parametrize("reference", ["absolute", "../../secret.raw", "LIST", "/dev/zero"])
def test_detached_headers_naming_data_outside_the_roots_are_not_read(case, tmp_path, header, name, reference):
    target = str(tmp_path / "secret.raw") if reference == "absolute" else reference
    (case / "case" / name).write_text(header.format(target))
    registry = build_slicer_registry([case])
    result = call_ok(registry, "open_case", dicom_dir=str(case / "case"))
    assert _loaded(result) == ["CT"]
    (warning,) = [item["message"] for item in result.data["warnings"] if name in item["message"]]
    assert "outside the allowed data roots" in warning or "not supported" in warning or "does not exist" in warning
    error = call_error(registry, "open_case", "path_not_allowed" if reference in ("absolute", "../../secret.raw",
                                                                                    "/dev/zero")
                       else "unsupported_format", dicom_dir=str(case / "case" / name))
    assert "secret" not in str(error.data)


def test_detached_header_with_its_data_inside_the_roots_loads(case):
    (case / "case" / "inside.raw").write_bytes(bytes(range(64)))
    (case / "case" / "x.nhdr").write_text(NRRD_HEADER.format("inside.raw"))
    (case / "case" / "y.mhd").write_text(MHD_HEADER.format("inside.raw"))
    result = call_ok(build_slicer_registry([case]), "open_case", dicom_dir=str(case / "case"))
    assert _loaded(result) == ["CT", "x", "y"]


def test_scanned_names_that_are_not_utf8_or_hold_controls_are_skipped_and_counted(case):
    folder = os.fsencode(case / "case")
    hostile = [b"caf\xe9.nii.gz", b"T1\nx.nii.gz", b"T1\x1b]0;owned\x07.nii.gz", "T1\u202ezg.ii.nii".encode()]
    source = (case / "case" / "CT.nii.gz").read_bytes()
    for name in hostile:
        with open(os.path.join(folder, name), "wb") as handle:
            handle.write(source)
    registry = build_slicer_registry([case])
    for _ in range(5):  # any agent may repeat it: the viewer must keep working
        result = call_ok(registry, "open_case", dicom_dir=str(case / "case"))
        assert len(_loaded(result)) == 1 and result.data["unsafe_names"] == 4
    assert "have names no action could use" in result.data["warnings"][0]["message"]
    assert "\\x1b" in result.data["warnings"][0]["message"] and "\x1b" not in result.data["warnings"][0]["message"]
    call_error(registry, "open_case", "invalid_argument", dicom_dir=str(case / "case") + "/caf\udce9.nii.gz")
    call_ok(registry, "ping")


def test_a_tiny_gzip_nifti_claiming_a_huge_volume_is_refused_before_decoding(case):
    header = nib.Nifti1Header()
    header.set_data_shape((1024, 1024, 512))
    header.set_data_dtype(np.uint8)
    header["vox_offset"] = 352
    body = header.binaryblock + b"\0" * 4 + bytes(1 << 20)  # 1 MiB of the claimed 512 MiB
    (case / "case" / "huge.nii.gz").write_bytes(gzip.compress(body))
    assert (case / "case" / "huge.nii.gz").stat().st_size < 64 << 10
    registry = build_slicer_registry([case])
    result = call_ok(registry, "open_case", dicom_dir=str(case / "case"))
    assert _loaded(result) == ["CT"]
    notes = [item["message"] for item in result.data["warnings"]]
    assert any("huge.nii.gz: its header declares 536870912 voxels" in text for text in notes)
    call_error(registry, "open_case", "volume_too_large", dicom_dir=str(case / "case" / "huge.nii.gz"))


def test_keep_loaded_growth_is_bounded_per_session(case, monkeypatch):
    monkeypatch.setattr(loading, "MAX_VOLUMES_PER_SESSION", 3)
    registry = build_slicer_registry([case])
    for _ in range(3):
        call_ok(registry, "open_case", dicom_dir=str(case / "case"), keep_loaded=True)
    error = call_error(registry, "open_case", "session_too_large", dicom_dir=str(case / "case"), keep_loaded=True)
    assert "without keep_loaded" in error.error["message"]
    assert len(call_ok(registry, "open_case", dicom_dir=str(case / "case")).data["volumes"]) == 1
    monkeypatch.setattr(loading, "MAX_VOXELS_PER_SESSION", phantom(0).size + 1)
    call_error(registry, "open_case", "session_too_large", dicom_dir=str(case / "case"), keep_loaded=True)


def test_a_slide_stored_as_one_huge_tile_is_refused_from_its_header(tmp_path):
    import tifffile

    side = 4096
    assert side * side > MAX_NATIVE_TILE_PIXELS
    path = tmp_path / "one_tile.tif"
    tifffile.imwrite(path, np.zeros((side, side, 3), np.uint8), tile=(side, side), compression="zlib",
                     photometric="rgb")
    assert path.stat().st_size < 1 << 20
    with pytest.raises(ActionError) as refused:
        Slide(path)
    assert refused.value.code == "slide_tile_too_large" and "4096x4096 px tiles" in refused.value.message
    small = tmp_path / "small_tiles.tif"
    tifffile.imwrite(small, np.zeros((1024, 1024, 3), np.uint8), tile=(256, 256), photometric="rgb")
    assert Slide(small).info.width == 1024


def test_check_source_refuses_a_data_file_that_is_not_a_regular_file(case):
    (case / "case" / "fifo").mkdir()
    (case / "case" / "x.nhdr").write_text(NRRD_HEADER.format("fifo"))
    with pytest.raises(ActionError, match="not a regular file"):
        loading.check_source(loading.VolumeSource("file", Path(case / "case" / "x.nhdr")),
                             build_slicer_registry([case]).policy.data_roots)
