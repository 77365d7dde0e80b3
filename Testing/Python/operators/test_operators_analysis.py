"""Region growing, quantification (volume, diameters, SUV) and DICOM SEG round trip on synthetic data."""

from __future__ import annotations

import numpy as np
import pytest
from operator_phantoms import ct_series, grid, lesion_volume
from pydicom.dataset import Dataset

from MedOpenClawLib.operators.dicom_seg import DicomSegError, Segment, export_seg, import_seg
from MedOpenClawLib.operators.image import ImageVolume
from MedOpenClawLib.operators.quantify import region_statistics, unique_rows
from MedOpenClawLib.operators.region_growing import GrowingParameters, grow_region, image_noise
from MedOpenClawLib.operators.suv import SuvError, suv_calibration


def dice(a: np.ndarray, b: np.ndarray) -> float:
    return 2.0 * (a & b).sum() / (a.sum() + b.sum())


@pytest.mark.parametrize("parameters", [GrowingParameters(), GrowingParameters("threshold", lower=85, upper=1000)])
def test_region_growing_recovers_a_synthetic_lesion(parameters):
    volume, truth, centre = lesion_volume()
    seed = np.rint(volume.ras_to_ijk([centre])[0]).astype(int)
    grown = grow_region(volume, [seed], parameters)
    assert dice(grown.mask, truth) > 0.9 and grown.stop == "complete"


def _ball(shape, centre, radius) -> np.ndarray:
    k, j, i = np.indices(shape)
    return (i - centre[0]) ** 2 + (j - centre[1]) ** 2 + (k - centre[2]) ** 2 <= radius**2


def test_the_leak_stop_cuts_growth_through_a_narrow_contact_into_tissue_of_the_same_intensity():
    """A lesion touching an organ of the same intensity through a 3x3-voxel bridge: unbounded growth takes the organ
    (5x the lesion), the leak stop cuts at the bridge."""
    shape = (48, 48, 96)
    lesion, organ = _ball(shape, (24, 24, 20), 9), np.zeros(shape, bool)
    organ[6:42, 6:42, 40:92] = True
    bridge = np.zeros(shape, bool)
    bridge[23:26, 23:26, 28:41] = True
    rng = np.random.default_rng(3)
    values = np.where(lesion | organ | bridge, 100.0, 0.0) + rng.normal(0.0, 5.0, shape)
    volume = ImageVolume(values, np.eye(4))
    grown = grow_region(volume, [(24, 24, 20)], GrowingParameters())
    assert grown.stop == "leak" and dice(grown.mask, lesion) > 0.9 and grown.mask.sum() < 1.5 * lesion.sum()
    assert grown.lower < 100 < grown.upper
    unbounded = grow_region(volume, [(24, 24, 20)], GrowingParameters("threshold", lower=grown.lower,
                                                                       upper=grown.upper, max_volume_ml=1e6))
    assert unbounded.stop == "leak"  # the stop belongs to the growth, whatever the range came from
    capped = grow_region(volume, [(24, 24, 20)], GrowingParameters(max_volume_ml=1.0))
    assert capped.stop == "volume_cap" and capped.mask.sum() <= 1000 < lesion.sum()


def test_the_seed_region_statistics_keep_a_bright_rim_and_fill_its_dark_core():
    shape = (40, 40, 40)
    outer, core = _ball(shape, (20, 20, 20), 10), _ball(shape, (20, 20, 20), 5)
    rng = np.random.default_rng(4)
    values = np.where(outer & ~core, 900.0, np.where(core, 250.0, 450.0)) + rng.normal(0.0, 20.0, shape)
    grown = grow_region(ImageVolume(values, np.eye(4)), [(20, 20, 28)], GrowingParameters())  # seed on the rim
    assert grown.stop == "complete" and dice(grown.mask, outer) > 0.95  # the core is a hole of the rim: filled


def test_a_seed_on_the_lesions_corner_takes_the_lesions_intensity_not_its_neighbourhoods_median():
    """A seed on a corner of a bright lesion: 8 of its 27 neighbours are lesion, so their median is the dark
    surrounding tissue's (the old seed statistics grew the surroundings, 7x the lesion); the seed tissue is the
    mode nearest the seed voxel."""
    shape = (40, 40, 40)
    k, j, i = np.indices(shape)
    lesion = (i >= 20) & (j >= 20) & (k >= 20)
    values = np.where(lesion, 900.0, 300.0) + np.random.default_rng(6).normal(0.0, 30.0, shape)
    grown = grow_region(ImageVolume(values, np.eye(4)), [(20, 20, 20)], GrowingParameters())
    assert grown.lower > 300.0 + 3 * 30.0 and dice(grown.mask, lesion) > 0.95


def test_the_drift_stop_cuts_growth_into_a_neighbouring_tissue_the_range_reaches_through_a_broad_contact():
    """A lesion (900) half sunk in a large tissue of close intensity (860, FLAIR-bright white-matter disease against
    oedema): the range reaches part of that tissue, and the contact is a hemisphere, not a narrow bridge, so only
    the layers' intensities tell; without the drift stop the growth took 17x the lesion."""
    shape = (40, 40, 48)
    lesion = _ball(shape, (20, 20, 16), 8)
    neighbour = np.zeros(shape, bool)
    neighbour[2:38, 2:38, 18:46] = True
    values = np.where(lesion, 900.0, np.where(neighbour & ~lesion, 860.0, 500.0))
    values = values + np.random.default_rng(5).normal(0.0, 20.0, shape)
    grown = grow_region(ImageVolume(values, np.eye(4)), [(20, 20, 14)], GrowingParameters())
    assert grown.lower < 860.0 and grown.stop == "drift" and grown.mask.sum() < 3 * lesion.sum()
    assert dice(grown.mask, lesion) > 0.6


def test_image_noise_is_the_noise_deviation_whatever_the_edges_and_zero_on_constant_data():
    shape = (32, 32, 32)
    edges = np.where(_ball(shape, (16, 16, 16), 8), 1000.0, 0.0) + np.where(_ball(shape, (16, 16, 16), 4), 500, 0)
    noisy = edges + np.random.default_rng(7).normal(0.0, 25.0, shape)
    assert image_noise(noisy, [(16, 16, 16)]) == pytest.approx(25.0, rel=0.1)
    assert image_noise(np.zeros(shape), [(16, 16, 16)]) == 0.0


def test_region_growing_rejects_bad_parameters():
    volume, _, _ = lesion_volume((8, 8, 8))
    with pytest.raises(ValueError, match="lower <= upper"):
        grow_region(volume, [(4, 4, 4)], GrowingParameters("threshold", lower=10, upper=5))
    with pytest.raises(ValueError, match="seed"):
        grow_region(volume, [], GrowingParameters())
    with pytest.raises(ValueError, match="max_volume_ml"):
        grow_region(volume, [(4, 4, 4)], GrowingParameters(max_volume_ml=0))
    with pytest.raises(ValueError, match="drift_spreads"):
        grow_region(volume, [(4, 4, 4)], GrowingParameters(drift_spreads=0))


def test_statistics_of_a_box_match_its_geometry():
    shape = (30, 30, 5)
    mask = np.zeros(shape[::-1], bool)
    mask[1:4, 5:11, 3:13] = True  # 10 x 6 voxels of 1 mm in plane, 3 slices of 2 mm
    values = np.where(mask, 7.0, 0.0)
    values[2, 7, 8] = 11.0
    stats = region_statistics(ImageVolume(values, grid(shape, (1.0, 1.0, 2.0))), mask)
    assert stats.voxel_count == 180 and stats.volume_ml == pytest.approx(0.36)
    assert stats.maximum == 11.0 and stats.mean == pytest.approx((179 * 7 + 11) / 180)
    assert stats.longest_diameter_mm == pytest.approx(np.sqrt(10**2 + 6**2 + 6**2))
    assert stats.axial_longest_diameter_mm == pytest.approx(np.sqrt(136.0))  # the in-plane diagonal
    assert 6.0 < stats.axial_perpendicular_diameter_mm < 8.0
    lower, upper = np.array(stats.bbox_ras)
    assert np.allclose(upper - lower, (10.0, 6.0, 6.0))
    assert stats.suv_max is None and "bidimensional_product_mm2" in stats.to_json()["rano"]
    with pytest.raises(ValueError, match="empty"):
        region_statistics(ImageVolume(values, grid(shape, (1.0, 1.0, 2.0))), np.zeros_like(mask))


@pytest.mark.parametrize("columns", [2, 3])
def test_unique_rows_equals_numpys_row_wise_unique(columns):
    """The statistics' deduplication of voxel corners: the same rows in the same order as np.unique(axis=0) (the
    order picks among equally long diameters), for corners on an oblique grid, repeats, equal first columns, zeros
    of both signs, one row and none."""
    rng = np.random.default_rng(4)
    ijk = rng.integers(0, 12, (3000, 3)) + np.array([[x, y, z] for x in (-0.5, 0.5) for y in (-0.5, 0.5)
                                                      for z in (-0.5, 0.5)])[rng.integers(0, 8, 3000)]
    oblique = np.array([[-1.2, 0.05, 0.0], [0.03, -1.2, 0.1], [0.0, 0.0, 3.0]])
    corners = (ijk @ oblique.T - (1.2 * 6, -1.2 * 6, 0))[:, :columns]
    signed_zeros = np.array([[0.0, 1.0, 2.0], [-0.0, 1.0, 2.0], [1.0, -0.0, 0.0]])[:, :columns]
    for points in (corners, np.round(corners), signed_zeros, corners[:1], corners[:0]):
        assert len(np.unique(corners, axis=0)) < len(corners)  # repeats to remove
        np.testing.assert_array_equal(unique_rows(points), np.unique(points, axis=0))


def pet_dataset(**overrides) -> Dataset:
    ds = Dataset()
    ds.Modality, ds.Units, ds.DecayCorrection = "PT", "BQML", "START"
    ds.PatientWeight = 80.0
    ds.SeriesDate, ds.SeriesTime = "20260102", "110000"
    drug = Dataset()
    drug.RadionuclideTotalDose = 370e6
    drug.RadionuclideHalfLife = 6586.2
    drug.RadiopharmaceuticalStartTime = "100000"
    ds.RadiopharmaceuticalInformationSequence = [drug]
    for key, value in overrides.items():
        setattr(ds, key, value)
    return ds


def test_suv_body_weight_uses_the_decayed_dose():
    calibration = suv_calibration(pet_dataset())
    decayed = 370e6 * np.exp(-np.log(2) * 3600.0 / 6586.2)
    assert calibration.factor == pytest.approx(80000.0 / decayed)
    assert calibration.decay_factor == pytest.approx(decayed / 370e6)
    assert suv_calibration(pet_dataset(Units="GML")).factor == 1.0
    assert suv_calibration(pet_dataset(DecayCorrection="ADMIN")).factor == pytest.approx(80000.0 / 370e6)


@pytest.mark.parametrize(
    "overrides, message",
    [({"Units": "CNTS"}, "CNTS"), ({"DecayCorrection": "NONE"}, "DecayCorrection"), ({"PatientWeight": 0}, "Weight"),
     ({"Modality": "CT"}, "PET"), ({"SeriesTime": "090000"}, "after the series start")],
)
def test_suv_refuses_ungrounded_units(overrides, message):
    with pytest.raises(SuvError, match=message):
        suv_calibration(pet_dataset(**overrides))


def test_dicom_seg_round_trip_preserves_masks_exactly(tmp_path):
    datasets, volume = ct_series()
    rng = np.random.default_rng(3)
    speckle = rng.random(volume.array.shape) > 0.7
    lesion = np.zeros(volume.array.shape, bool)
    lesion[2:4, 5:9, 3:12] = True
    segments = [Segment("liver", speckle), Segment("lesion", lesion, "SEMIAUTOMATIC", "region growing",
                                                   "NeighborhoodAnalysis", lesion=True)]
    seg = export_seg(segments, volume, datasets, tmp_path / "seg.dcm")
    referenced = {item.ReferencedSOPInstanceUID for item in seg.ReferencedSeriesSequence[0].ReferencedInstanceSequence}
    assert referenced == {ds.SOPInstanceUID for ds in datasets}
    imported = import_seg(tmp_path / "seg.dcm", volume)
    assert [label for label, _ in imported] == ["liver", "lesion"]
    assert np.array_equal(imported[0][1], speckle) and np.array_equal(imported[1][1], lesion)
    flipped = ImageVolume(volume.array[::-1].copy(), volume.ijk_to_ras @ _flip_k(volume.array.shape[0]))
    assert np.array_equal(import_seg(tmp_path / "seg.dcm", flipped)[1][1], lesion[::-1])


def test_dicom_seg_refuses_a_grid_that_is_not_the_source_series(tmp_path):
    datasets, volume = ct_series()
    shifted = ImageVolume(volume.array, volume.ijk_to_ras + np.pad(np.full((3, 1), 0.4), ((0, 1), (3, 0))))
    with pytest.raises(DicomSegError, match="do not share one voxel grid"):
        export_seg([Segment("x", np.ones(volume.array.shape, bool))], shifted, datasets, tmp_path / "x.dcm")
    with pytest.raises(DicomSegError, match="source DICOM series"):
        export_seg([Segment("x", np.ones(volume.array.shape, bool))], volume, [], tmp_path / "x.dcm")


def _flip_k(slices: int) -> np.ndarray:
    flip = np.eye(4)
    flip[2, 2], flip[2, 3] = -1.0, slices - 1.0
    return flip
