"""Headless linear registration and resampling with SimpleITK, in Slicer's linear-transform semantics.

Mirrors what BRAINSFit does inside Slicer: Mattes mutual information, a moments (or geometry) initialiser,
a versor rigid stage optionally followed by an affine stage, a multi-resolution pyramid. The result is the
*moving-to-fixed* 4x4 matrix in RAS: set as the parent transform of the moving volume it overlays it on the
fixed one, which is what a Slicer linear transform node produced by BRAINSFit does.

ITK's registration transform maps *fixed* LPS points to *moving* LPS points; that is inverted and converted
to RAS here, once, in :func:`_moving_to_fixed_ras`.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import SimpleITK as sitk

from .image import ImageVolume, from_sitk, lps_to_ras_matrix, ras_to_lps_matrix, to_sitk

TRANSFORM_TYPES = ("rigid", "affine")
INITIALIZATIONS = ("moments", "geometry", "none")
INTERPOLATIONS = {"linear": sitk.sitkLinear, "nearest": sitk.sitkNearestNeighbor, "bspline": sitk.sitkBSpline}


@dataclass(frozen=True)
class RegistrationSettings:
    """Defaults follow BRAINSFit's (50 histogram bins, MMI) with a fixed seed so reruns are identical."""

    histogram_bins: int = 50
    sampling_percentage: float = 0.05
    seed: int = 20260501
    shrink_factors: tuple[int, ...] = (4, 2, 1)
    smoothing_sigmas_mm: tuple[float, ...] = (2.0, 1.0, 0.0)
    iterations: int = 200
    learning_rate: float = 1.0
    minimum_step: float = 1e-4


@dataclass
class RegistrationResult:
    matrix_ras: np.ndarray  # moving -> fixed, row-major 4x4
    transform_type: str
    initialization: str
    final_metric: float
    iterations: list[int]
    stop_conditions: list[str]
    seconds: float

    def to_json(self) -> dict:
        return {
            "matrix_ras": np.round(self.matrix_ras, 6).tolist(),
            "transform_type": self.transform_type,
            "initialization": self.initialization,
            "final_metric": round(float(self.final_metric), 6),
            "iterations": self.iterations,
            "stop_conditions": self.stop_conditions,
            "seconds": round(self.seconds, 3),
        }


def register(
    fixed: ImageVolume,
    moving: ImageVolume,
    transform_type: str = "rigid",
    initialization: str = "moments",
    settings: RegistrationSettings | None = None,
) -> RegistrationResult:
    """Estimate the moving-to-fixed transform; ``affine`` runs a rigid stage first, as BRAINSFit's "Rigid,Affine"."""
    if transform_type not in TRANSFORM_TYPES:
        raise ValueError(f"transform_type must be one of {TRANSFORM_TYPES}")
    if initialization not in INITIALIZATIONS:
        raise ValueError(f"initialization must be one of {INITIALIZATIONS}")
    settings = settings or RegistrationSettings()
    started = time.perf_counter()
    with _single_threaded():
        return _register(to_sitk(fixed), to_sitk(moving), transform_type, initialization, settings, started)


@contextmanager
def _single_threaded():
    """Multi-threaded metric and pyramid sums differ in the last digits between runs; audit replays must not."""
    previous = sitk.ProcessObject.GetGlobalDefaultNumberOfThreads()
    sitk.ProcessObject.SetGlobalDefaultNumberOfThreads(1)
    try:
        yield
    finally:
        sitk.ProcessObject.SetGlobalDefaultNumberOfThreads(previous)


def _register(fixed_image, moving_image, transform_type, initialization, settings, started) -> RegistrationResult:
    rigid = _initial_rigid(fixed_image, moving_image, initialization)
    stages = [_optimize(fixed_image, moving_image, rigid, settings)]
    final: sitk.Transform = rigid
    if transform_type == "affine":
        affine = sitk.AffineTransform(3)
        affine.SetCenter(rigid.GetCenter())
        affine.SetMatrix(rigid.GetMatrix())
        affine.SetTranslation(rigid.GetTranslation())
        stages.append(_optimize(fixed_image, moving_image, affine, settings))
        final = affine
    return RegistrationResult(
        matrix_ras=_moving_to_fixed_ras(final),
        transform_type=transform_type,
        initialization=initialization,
        final_metric=stages[-1][0],
        iterations=[stage[1] for stage in stages],
        stop_conditions=[stage[2] for stage in stages],
        seconds=time.perf_counter() - started,
    )


def resample(
    moving: ImageVolume,
    reference: ImageVolume,
    matrix_ras: np.ndarray,
    interpolation: str = "linear",
    default_value: float = 0.0,
) -> ImageVolume:
    """Resample ``moving`` onto ``reference``'s grid through a moving-to-fixed RAS matrix (BRAINSResample)."""
    if interpolation not in INTERPOLATIONS:
        raise ValueError(f"interpolation must be one of {tuple(INTERPOLATIONS)}")
    fixed_to_moving_lps = ras_to_lps_matrix(np.linalg.inv(np.asarray(matrix_ras, dtype=float)))
    transform = sitk.AffineTransform(3)
    transform.SetMatrix([float(value) for value in fixed_to_moving_lps[:3, :3].ravel()])
    transform.SetTranslation([float(value) for value in fixed_to_moving_lps[:3, 3]])
    keep_type = interpolation == "nearest"
    output = sitk.Resample(
        to_sitk(moving, dtype=None if keep_type else np.float32),
        to_sitk(reference),
        transform,
        INTERPOLATIONS[interpolation],
        float(default_value),
    )
    return from_sitk(output, moving.metadata)


def transform_matrix_lps(transform: sitk.Transform) -> np.ndarray:
    """4x4 of a centred ITK matrix-offset transform: x -> A (x - c) + c + t."""
    matrix = np.array(transform.GetMatrix()).reshape(3, 3)
    center = np.array(transform.GetCenter())
    translation = np.array(transform.GetTranslation())
    result = np.eye(4)
    result[:3, :3] = matrix
    result[:3, 3] = translation + center - matrix @ center
    return result


def _moving_to_fixed_ras(transform: sitk.Transform) -> np.ndarray:
    return np.linalg.inv(lps_to_ras_matrix(transform_matrix_lps(transform)))


def _initial_rigid(fixed: sitk.Image, moving: sitk.Image, initialization: str) -> sitk.VersorRigid3DTransform:
    if initialization == "none":
        center = fixed.TransformContinuousIndexToPhysicalPoint([(size - 1) / 2 for size in fixed.GetSize()])
        transform = sitk.VersorRigid3DTransform()
        transform.SetCenter(center)
        return transform
    mode = (
        sitk.CenteredTransformInitializerFilter.MOMENTS
        if initialization == "moments"
        else sitk.CenteredTransformInitializerFilter.GEOMETRY
    )
    return sitk.VersorRigid3DTransform(
        sitk.CenteredTransformInitializer(fixed, moving, sitk.VersorRigid3DTransform(), mode)
    )


def _optimize(
    fixed: sitk.Image, moving: sitk.Image, transform: sitk.Transform, settings: RegistrationSettings
) -> tuple[float, int, str]:
    """Optimise ``transform`` in place; returns (final metric, iterations, stop condition)."""
    method = sitk.ImageRegistrationMethod()
    method.SetMetricAsMattesMutualInformation(numberOfHistogramBins=settings.histogram_bins)
    method.SetMetricSamplingStrategy(method.RANDOM)
    method.SetMetricSamplingPercentage(settings.sampling_percentage, settings.seed)
    method.SetInterpolator(sitk.sitkLinear)
    method.SetOptimizerAsRegularStepGradientDescent(
        learningRate=settings.learning_rate,
        minStep=settings.minimum_step,
        numberOfIterations=settings.iterations,
        relaxationFactor=0.5,
        gradientMagnitudeTolerance=1e-8,
    )
    method.SetOptimizerScalesFromPhysicalShift()
    method.SetShrinkFactorsPerLevel(list(settings.shrink_factors))
    method.SetSmoothingSigmasPerLevel(list(settings.smoothing_sigmas_mm))
    method.SmoothingSigmasAreSpecifiedInPhysicalUnitsOn()
    method.SetInitialTransform(transform, inPlace=True)
    method.Execute(fixed, moving)
    return method.GetMetricValue(), method.GetOptimizerIteration(), method.GetOptimizerStopConditionDescription()
