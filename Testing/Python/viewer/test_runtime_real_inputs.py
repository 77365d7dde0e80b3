"""Real input files that install with pydicom and nibabel: series that ITK alone would stack with wrong
geometry (uneven spacing, three-plane localizers, radial MIPs), 4-D NIfTI, folders with a bad file, and the
warnings that reach the Result and the audit record instead of stderr."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nibabel
import numpy as np
import pydicom
import pytest
from runtime_data import call_error, call_ok

from MedOpenClawLib.apps.radiology import build_slicer_registry
from MedOpenClawLib.core.audit import AuditTrace
from MedOpenClawLib.viewer.geometry import vtk_to_numpy_matrix
from MedOpenClawLib.viewer.native_messages import clean_messages

DICOM_TESTS = Path(pydicom.__file__).parent / "data" / "test_files" / "dicomdirtests"
NIFTI_TESTS = Path(nibabel.__file__).parent / "tests" / "data"


@pytest.fixture()
def data(tmp_path):
    """Copies of the shipped files under one data root (tests may damage them)."""
    root = tmp_path / "data"
    for source, name in ((DICOM_TESTS / "77654033" / "CT2", "CT2"), (DICOM_TESTS / "98892003" / "MR2", "MR2"),
                         (DICOM_TESTS / "98892003" / "MR700", "MR700"), (DICOM_TESTS / "98892001" / "CT5N", "CT5N"),
                         (DICOM_TESTS / "98892001" / "CT2N", "CT2N")):
        shutil.copytree(source, root / name)
    for name in ("example4d.nii.gz", "anatomical.nii"):
        shutil.copy(NIFTI_TESTS / name, root / name)
    return root


def messages(result) -> list[str]:
    """The sentences of an action's warnings ({code, message} entries)."""
    return [warning["message"] for warning in result.data.get("warnings", [])]


def volumes_by_name(result) -> dict[str, dict]:
    return {volume["name"]: volume for volume in result.data["volumes"]}


def test_unevenly_spaced_ct_is_split_at_the_gap_with_true_slice_positions(data, tmp_path):
    trace = AuditTrace(tmp_path / "trace.jsonl")
    registry = build_slicer_registry([data], trace=trace)
    result = call_ok(registry, "open_case", dicom_dir=str(data / "CT2"))
    volumes = volumes_by_name(result)
    assert sorted(volumes) == ["Routine_Brain_1", "Routine_Brain_2"]
    # slices at S -99.48 | 103.02, 104.27, 105.52 (never one volume "evenly spaced" at 68.3 mm)
    assert volumes["Routine_Brain_1"]["dimensions"][2] == 1
    assert volumes["Routine_Brain_1"]["ras_bounds"][2] == pytest.approx([-99.48, -99.48], abs=1e-2)
    assert volumes["Routine_Brain_2"]["dimensions"][2] == 3
    assert volumes["Routine_Brain_2"]["spacing_mm"][2] == pytest.approx(1.25, abs=1e-3)
    assert volumes["Routine_Brain_2"]["ras_bounds"][2] == pytest.approx([103.02, 105.52], abs=1e-2)
    (warning,) = [w for w in result.data["warnings"] if "unevenly spaced" in w["message"]]
    assert warning["code"] == "loading"
    assert "202 mm" in warning["message"] and "split into 2 volumes" in warning["message"]
    record = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()][-1]
    assert record["action"] == "open_case" and warning in record["result"]["data"]["warnings"]


def test_points_on_a_single_slice_volume_as_printed_are_inside(data):
    """The split-off slice of CT2 has no thickness between voxel centres: a point on its plane, copied from the
    3-decimal inventory, is inside (half a voxel either way), for evidence as for jump; beyond that it is refused."""
    registry = build_slicer_registry([data])
    volumes = volumes_by_name(call_ok(registry, "open_case", dicom_dir=str(data / "CT2")))
    (r_low, r_high), (a_low, a_high), (s_plane, _) = volumes["Routine_Brain_1"]["ras_bounds"]
    point = [round((r_low + r_high) / 2, 3), round((a_low + a_high) / 2, 3), s_plane]
    call_ok(registry, "record_point", ras=point, label="on the plane")
    call_ok(registry, "jump", ras=point)
    call_error(registry, "record_point", "outside_volume", ras=[point[0], point[1], s_plane - 1.0])


@pytest.mark.parametrize(("folder", "count"), [("MR2", 7), ("MR700", 7)])
def test_multi_plane_series_load_one_volume_per_plane_with_its_own_orientation(data, folder, count):
    registry = build_slicer_registry([data])
    result = call_ok(registry, "open_case", dicom_dir=str(data / folder))
    assert len(result.data["loaded"]) == count
    assert any("image planes in one series" in warning for warning in messages(result))
    engine = registry.context.engine
    for node in engine.volume_nodes():
        assert node.GetImageData().GetDimensions()[2] == 1  # never a stack of differently oriented slices
        files = node.GetAttribute("DICOM.instanceFiles").split("|")
        header = pydicom.dcmread(files[0], stop_before_pixels=True)
        ijk_to_ras = vtk_to_numpy_matrix_of(node)
        row_lps = np.array(header.ImageOrientationPatient[:3], dtype=float)
        origin_lps = np.array(header.ImagePositionPatient, dtype=float)
        np.testing.assert_allclose(ijk_to_ras[:3, 0] / np.linalg.norm(ijk_to_ras[:3, 0]),
                                   row_lps * [-1, -1, 1], atol=1e-4)
        np.testing.assert_allclose(ijk_to_ras[:3, 3], origin_lps * [-1, -1, 1], atol=1e-3)
    if folder == "MR2":
        names = result.data["loaded"]
        assert {"axial", "coronal", "sagittal"} <= {name.split("_")[-1] for name in names} | {
            name.split("_")[-2] for name in names}


def test_localizer_images_are_named_and_kept_apart(data):
    """98892001/CT2N: two scout images (ImageType ORIGINAL/PRIMARY/LOCALIZER), coronal and sagittal."""
    registry = build_slicer_registry([data])
    result = call_ok(registry, "open_case", dicom_dir=str(data / "CT2N"))
    assert sorted(result.data["loaded"]) == ["Scout_localizer_coronal", "Scout_localizer_sagittal"]
    volumes = volumes_by_name(result)
    assert volumes["Scout_localizer_coronal"]["ras_bounds"][1] == pytest.approx([0.0, 0.0])  # one coronal plane
    assert volumes["Scout_localizer_sagittal"]["ras_bounds"][0] == pytest.approx([0.0, 0.0])


def vtk_to_numpy_matrix_of(node) -> np.ndarray:
    import vtk

    matrix = vtk.vtkMatrix4x4()
    node.GetIJKToRASMatrix(matrix)
    return vtk_to_numpy_matrix(matrix)


def test_slightly_uneven_spacing_is_resampled_onto_an_even_grid(data):
    folder = data / "CT5N"
    files = sorted(folder.iterdir())
    positions = []
    for path in files:
        dataset = pydicom.dcmread(path)
        positions.append(float(dataset.ImagePositionPatient[2]))
    # move the slice at 3.7625 by +0.5 mm: gaps 2.5, 2.0, 3.0, 2.5 (uneven, no gap large enough to split)
    target = files[positions.index(3.7625)]
    dataset = pydicom.dcmread(target)
    dataset.ImagePositionPatient[2] = 4.2625
    dataset.save_as(target)
    registry = build_slicer_registry([data])
    result = call_ok(registry, "open_case", dicom_dir=str(folder))
    (volume,) = result.data["volumes"]
    assert volume["dimensions"][2] == 5 and volume["spacing_mm"][2] == pytest.approx(2.5)
    assert volume["ras_bounds"][2] == pytest.approx([-1.2375, 8.7625], abs=1e-3)
    assert any("resampled onto an even 2.5 mm grid" in warning for warning in messages(result))
    # ITK's own warning (printed on stderr by the native reader) is captured into the Result too
    assert any("Non uniform sampling" in warning for warning in messages(result))


def test_four_d_nifti_is_refused_with_its_reason_and_a_folder_keeps_its_good_files(data):
    registry = build_slicer_registry([data])
    error = call_error(registry, "open_case", "unreadable_volume", dicom_dir=str(data / "example4d.nii.gz")).error
    assert "4D image" in error["message"] and "sequence" in error["message"]
    assert str(data) not in error["message"]  # reader messages name files, never host paths
    assert registry.context.engine.volume_nodes() == []
    mixed = data / "mixed"
    mixed.mkdir()
    shutil.copy(data / "example4d.nii.gz", mixed)
    shutil.copy(data / "anatomical.nii", mixed)
    (mixed / "broken.nii.gz").write_bytes(b"\x1f\x8b not a volume")
    result = call_ok(registry, "open_case", dicom_dir=str(mixed))
    assert result.data["loaded"] == ["anatomical"]
    warnings = " ".join(messages(result))
    assert "example4d.nii.gz" in warnings and "4D image" in warnings and "broken.nii.gz" in warnings


def test_a_dicom_file_that_cannot_be_read_is_left_out_and_the_rest_loads(data):
    folder = data / "CT5N"
    victim = sorted(folder.iterdir())[-1]  # the last slice: the other four stay evenly spaced
    victim.write_bytes(victim.read_bytes()[:-300])  # pixel data cut short
    registry = build_slicer_registry([data])
    result = call_ok(registry, "open_case", dicom_dir=str(folder))
    (volume,) = result.data["volumes"]
    assert volume["dimensions"][2] == 4 and volume["spacing_mm"][2] == pytest.approx(2.5)
    assert any(victim.name in warning and "could not be read" in warning for warning in messages(result))


def test_second_case_replaces_the_first_unless_keep_loaded(data):
    registry = build_slicer_registry([data])
    call_ok(registry, "open_case", dicom_dir=str(data / "CT5N"))
    second = call_ok(registry, "open_case", dicom_dir=str(data / "anatomical.nii"))
    assert [volume["name"] for volume in second.data["volumes"]] == ["anatomical"]
    kept = call_ok(registry, "open_case", dicom_dir=str(data / "CT5N"), keep_loaded=True)
    assert sorted(volume["name"] for volume in kept.data["volumes"]) == ["SmartScore_-_Gated_0_5_sec", "anatomical"]
    again = call_ok(registry, "open_case", dicom_dir=str(data / "CT5N"))
    assert [volume["name"] for volume in again.data["volumes"]] == ["SmartScore_-_Gated_0_5_sec"]  # no "_2"
    # a case that fails to open leaves the open one in place
    call_error(registry, "open_case", "unreadable_volume", dicom_dir=str(data / "example4d.nii.gz"))
    assert [node.GetName() for node in registry.context.engine.volume_nodes()] == ["SmartScore_-_Gated_0_5_sec"]


def test_reader_messages_are_cleaned_of_addresses_headers_and_paths():
    raw = ("ERROR: In /build/vtkITKArchetypeImageSeriesReader.cxx, line 626\n"
           "vtkITKArchetypeImageSeriesVectorReaderSeries (0x55f96f85bec0): Cannot read file "
           "'/home/user/data/x.nii.gz' as a 3D image\n\n"
           "ERROR: In vtkExecutive.cxx, line 729\nvtkCompositeDataPipeline (0x1): Algorithm returned failure for "
           "request: vtkInformation (0x2)\n\n"
           "2026-12-01 03:05:29.085 (   4.011s) [    7F2508686B80]vtkITKArchetypeImageSer:626    ERR| "
           "vtkITKArchetypeImageSeriesVectorReaderSeries (0x55f96f85bec0): Cannot read file "
           "'/home/user/data/x.nii.gz' as a 3D image\n")
    assert clean_messages(raw) == ["Cannot read file 'x.nii.gz' as a 3D image"]


def test_outside_the_volume_renders_black(data):
    registry = build_slicer_registry([data])
    call_ok(registry, "open_case", dicom_dir=str(data / "CT5N"))
    call_ok(registry, "zoom", view="axial", factor=0.25)  # the 7.8 mm wide volume in a 4x wider view
    (image,) = call_ok(registry, "observe", view="axial", size=128).images
    pixels = np.asarray(image.pixels)
    assert pixels[20, 20].max() == 0 and pixels[-20, -20].max() == 0  # not the grey of value 0 (was 234)
    assert pixels[64, 64].max() > 0


def test_error_messages_print_plain_numbers():
    from MedOpenClawLib.core.hygiene import bounded_message

    ras = np.array([500.0, -2.5, 3.0])
    assert bounded_message(f"RAS {list(ras)} lies outside X ({np.int64(3)} voxels)") == (
        "RAS [500.0, -2.5, 3.0] lies outside X (3 voxels)")


def _series(folder: Path, description: str = "SERIES") -> list[Path]:
    from runtime_data import write_dicom_series

    affine = np.array([[-1.0, 0, 0, 10.0], [0, -1.0, 0, 12.0], [0, 0, 2.0, -4.0], [0, 0, 0, 1]])
    write_dicom_series(folder, np.arange(8 * 6 * 4, dtype=float).reshape(8, 6, 4), affine, description=description)
    return sorted(folder.glob("*.dcm"))


def test_repeated_positions_split_by_temporal_position(tmp_path):
    first, second = _series(tmp_path / "a"), _series(tmp_path / "b")
    series_uid = pydicom.dcmread(first[0]).SeriesInstanceUID
    folder = tmp_path / "data" / "dynamic"
    folder.mkdir(parents=True)
    for phase, files in ((1, first), (2, second)):
        for path in files:
            dataset = pydicom.dcmread(path)
            dataset.SeriesInstanceUID, dataset.TemporalPositionIdentifier = series_uid, phase
            dataset.save_as(folder / f"p{phase}_{path.name}")
    registry = build_slicer_registry([tmp_path / "data"])
    result = call_ok(registry, "open_case", dicom_dir=str(folder))
    assert sorted(result.data["loaded"]) == ["SERIES_t1", "SERIES_t2"]
    assert all(volume["dimensions"][2] == 4 and volume["spacing_mm"][2] == 2.0 for volume in result.data["volumes"])
    assert any("one volume per TemporalPositionIdentifier" in warning for warning in messages(result))


def test_sheared_slice_stack_is_refused_with_its_reason(tmp_path):
    folder = tmp_path / "data" / "tilted"
    for index, path in enumerate(_series(folder)):
        dataset = pydicom.dcmread(path)
        position = [float(value) for value in dataset.ImagePositionPatient]
        dataset.ImagePositionPatient = [position[0], position[1] + 0.9 * index, position[2]]  # gantry tilt
        dataset.save_as(path)
    registry = build_slicer_registry([tmp_path / "data"])
    message = call_error(registry, "open_case", "no_volumes", dicom_dir=str(folder)).error["message"]
    assert "gantry tilt" in message and "SERIES" in message


@pytest.mark.parametrize(("name", "code"), [("rtdose.dcm", None), ("SC_rgb_rle_2frame.dcm", None),
                                            ("rtdose_1frame.dcm", "no_volumes"), ("reportsi.dcm", "no_volumes")])
def test_multi_frame_and_non_image_dicom_load_or_are_refused_never_crash(tmp_path, name, code):
    folder = tmp_path / "data" / Path(name).stem
    folder.mkdir(parents=True)
    shutil.copy(Path(pydicom.__file__).parent / "data" / "test_files" / name, folder)
    registry = build_slicer_registry([tmp_path / "data"])
    if code is None:
        result = call_ok(registry, "open_case", dicom_dir=str(folder))
        (volume,) = result.data["volumes"]
        assert volume["dimensions"][2] > 1  # the frames are the slices, not an extra dimension
        assert any("multi-frame image" in warning for warning in messages(result))
    else:
        call_error(registry, "open_case", code, dicom_dir=str(folder))


def test_two_slices_far_apart_are_two_images_not_one_thick_volume(data):
    folder = data / "CT5N"
    files = sorted(folder.iterdir())  # S 8.76, 6.26, 3.76, 1.26, -1.24 (2.5 mm thick)
    for path in files[1:4]:
        path.unlink()  # keep S 8.76 and -1.24: 10 mm apart, 4x the slice thickness
    result = call_ok(build_slicer_registry([data]), "open_case", dicom_dir=str(folder))
    assert len(result.data["volumes"]) == 2
    for volume in result.data["volumes"]:
        assert volume["dimensions"][2] == 1 and volume["spacing_mm"][2] == 2.5  # a slice as thick as it is
    assert any("split into 2 volumes" in warning for warning in messages(result))
