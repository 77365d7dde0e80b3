"""Named window/level presets. Fixed CT windows are in Hounsfield units; ``*_auto`` presets are computed from
the volume's own intensity percentiles because PET (SUV or Bq/ml) and MR have no absolute scale.
"""

from __future__ import annotations

import numpy as np

from ..core.result import ActionError

# name -> (window, level, colour table)
FIXED_PRESETS = {
    "ct_lung": (1500.0, -600.0, "vtkMRMLColorTableNodeGrey"),
    "ct_mediastinal": (350.0, 50.0, "vtkMRMLColorTableNodeGrey"),
    "ct_soft_tissue": (400.0, 40.0, "vtkMRMLColorTableNodeGrey"),
    "ct_bone": (1800.0, 400.0, "vtkMRMLColorTableNodeGrey"),
    "ct_brain": (80.0, 40.0, "vtkMRMLColorTableNodeGrey"),
    "ct_liver": (150.0, 30.0, "vtkMRMLColorTableNodeGrey"),
    "ct_abdomen": (400.0, 50.0, "vtkMRMLColorTableNodeGrey"),
}
# name -> (low percentile, high percentile, colour table); PET shows 0 .. high percentile of uptake
AUTO_PRESETS = {
    "pet_auto": (None, 99.5, "vtkMRMLPETProceduralColorNodePET-Heat"),
    "pet_grey": (None, 99.5, "vtkMRMLColorTableNodeInvertedGrey"),
    "mr_auto": (1.0, 99.0, "vtkMRMLColorTableNodeGrey"),
    "mr_bright": (5.0, 99.8, "vtkMRMLColorTableNodeGrey"),
}
PRESET_NAMES = tuple(FIXED_PRESETS) + tuple(AUTO_PRESETS)


def preset_window_level(name: str, voxels: np.ndarray) -> tuple[float, float, str]:
    """(window, level, colour table id) for a preset applied to a volume's voxels."""
    if name in FIXED_PRESETS:
        return FIXED_PRESETS[name]
    if name not in AUTO_PRESETS:
        raise ActionError("invalid_argument", f"unknown preset {name!r}; one of {', '.join(PRESET_NAMES)}")
    low_percentile, high_percentile, color = AUTO_PRESETS[name]
    sample = voxels[:: max(1, voxels.shape[0] // 64)].astype(np.float64).ravel()
    foreground = sample[sample > sample.min()] if np.any(sample > sample.min()) else sample
    high = float(np.percentile(foreground, high_percentile))
    low = 0.0 if low_percentile is None else float(np.percentile(foreground, low_percentile))
    window = max(high - low, 1e-3)
    return window, low + window / 2.0, color
