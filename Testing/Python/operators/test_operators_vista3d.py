"""VISTA3D: label table, bundle loading in the official layout, modality checks and CPU inference end to end
with a small network of the same class (random weights)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from operator_phantoms import grid

from MedOpenClawLib.operators import vista3d
from MedOpenClawLib.operators.image import ImageVolume


def small_network():
    torch.manual_seed(0)
    return vista3d.build_network(feature_size=8, blocks_down=(1, 1, 1, 1, 1))


def write_bundle(root, network, wrap: bool = False, patch: int = 64):
    (root / "models").mkdir(parents=True)
    (root / "configs").mkdir()
    state = network.state_dict()
    torch.save({"model": state} if wrap else state, root / "models" / "model.pt")
    config = {
        "resample_spacing": [1.5, 1.5, 1.5],
        "patch_size": [patch, patch, patch],
        "network_def": "$monai.networks.nets.vista3d132(in_channels=@input_channels)",
        "preprocessing_transforms": [
            {"_target_": "CropForegroundd", "keys": "@image_key", "margin": 10},
            {"_target_": "ScaleIntensityRanged", "keys": "@image_key", "a_min": -963.8247715525971,
             "a_max": 1053.678477684517, "b_min": 0, "b_max": 1, "clip": True},
        ],
        "inferer": {"_target_": "scripts.inferer.Vista3dInferer", "overlap": 0.3},
    }
    (root / "configs" / "inference.json").write_text(json.dumps(config))
    return root


def ct_volume() -> ImageVolume:
    shape = (56, 48, 20)
    array = np.full(shape[::-1], -1000.0, np.float32)
    array[4:16, 8:40, 8:48] = 40.0
    array[8:12, 18:28, 20:32] = 160.0
    return ImageVolume(array, grid(shape, (1.0, 1.2, 3.0)))


def test_label_table_matches_the_bundle_and_resolves_names():
    table = vista3d.label_table()
    assert len(table.names) == 132
    assert table.resolve("Liver") == 1 and table.resolve("spleen") == 3 and table.resolve("lung tumor") == 23
    assert table.resolve(132) == 132 and table.resolve("23") == 23
    assert table.expand([20, 3]) == [28, 29, 30, 31, 32, 3]
    with pytest.raises(vista3d.Vista3DError, match="did you mean 'spleen'"):
        table.resolve("spleeen")
    with pytest.raises(vista3d.Vista3DError, match="no class id 500"):
        table.resolve(500)


def test_bundle_loading_reads_the_official_layout(tmp_path):
    network = small_network()
    for wrap in (False, True):
        bundle = vista3d.read_bundle(write_bundle(tmp_path / f"bundle_{wrap}", network, wrap=wrap))
        assert bundle.settings.patch_size == (64, 64, 64) and bundle.settings.spacing_mm == (1.5, 1.5, 1.5)
        loaded = vista3d.load_network(bundle, device="cpu")
        for key, value in network.state_dict().items():
            assert torch.equal(loaded.state_dict()[key], value), key
    full = vista3d.build_network()  # vista3d132: keys of the published checkpoint
    assert "image_encoder.encoder.layers.4.blocks.3.conv2.weight" in full.state_dict()
    assert "class_head.mlp.0.weight" in full.state_dict() and "point_head.class_embeddings.weight" in full.state_dict()


def test_missing_or_foreign_weights_give_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv(vista3d.BUNDLE_SETTING, raising=False)
    with pytest.raises(vista3d.Vista3DError, match=vista3d.BUNDLE_SETTING) as missing:
        vista3d.bundle_from_environment()
    assert missing.value.code == "weights_missing"
    monkeypatch.setenv(vista3d.BUNDLE_SETTING, str(tmp_path / "nowhere"))
    with pytest.raises(vista3d.Vista3DError, match="models/model.pt"):
        vista3d.bundle_from_environment()
    (tmp_path / "bad" / "models").mkdir(parents=True)
    torch.save({"conv.weight": torch.zeros(1)}, tmp_path / "bad" / "models" / "model.pt")
    with pytest.raises(vista3d.Vista3DError, match="not a VISTA3D state dict"):
        vista3d.load_network(vista3d.read_bundle(tmp_path / "bad"), device="cpu")


def test_mr_and_non_hounsfield_inputs_are_refused():
    with pytest.raises(vista3d.Vista3DError, match="CT only; this volume is MR"):
        vista3d.check_ct_input(np.zeros((2, 2, 2)), "MR")
    with pytest.raises(vista3d.Vista3DError, match="Hounsfield"):
        vista3d.check_ct_input(np.full((2, 2, 2), 20.0), None)
    vista3d.check_ct_input(np.full((2, 2, 2), -1024.0), None)
    vista3d.check_ct_input(np.full((2, 2, 2), 20.0), "CT")


def test_class_and_point_prompts_run_end_to_end_on_cpu():
    network = small_network().eval()
    settings = vista3d.InferenceSettings(patch_size=(64, 64, 64))
    volume = ct_volume()
    table = vista3d.label_table()
    output = vista3d.segment(network, volume, settings, label_prompt=[table.resolve("lung"), 3])
    assert output.labelmap.same_grid(volume)
    assert output.label_ids == [28, 29, 30, 31, 32, 3]
    assert set(np.unique(output.labelmap.array)) <= {0, *output.label_ids}
    point = volume.ijk_to_ras_points([[26, 23, 10]])
    output = vista3d.segment(network, volume, settings, label_prompt=[23], points_ras=point.tolist())
    assert output.labelmap.same_grid(volume) and set(np.unique(output.labelmap.array)) <= {0, 23}
    output = vista3d.segment(network, volume, settings, points_ras=point.tolist(), point_labels=[1])
    assert set(np.unique(output.labelmap.array)) <= {0, 1}
    with pytest.raises(vista3d.Vista3DError, match="outside"):
        vista3d.segment(network, volume, settings, points_ras=[[500.0, 0.0, 0.0]])
    with pytest.raises(vista3d.Vista3DError, match="single class"):
        vista3d.segment(network, volume, settings, label_prompt=[1, 3], points_ras=point.tolist())
