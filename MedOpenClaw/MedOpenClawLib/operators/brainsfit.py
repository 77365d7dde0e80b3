"""Registration inside the 3D Slicer application: the BRAINSFit and BRAINSResample CLI modules.

Used only when the session drives the running Slicer GUI, where the CLIs exist (slicer-core has none).
Parameter names are the CLIs' own; the settings match the headless SimpleITK path in ``registration``.
"""

from __future__ import annotations

from ..core.result import ActionError
from .registration import RegistrationSettings

TRANSFORM_TYPES = {"rigid": "Rigid", "affine": "Rigid,Affine"}
INITIALIZE_MODES = {"moments": "useMomentsAlign", "geometry": "useGeometryAlign", "none": "Off"}
INTERPOLATION_MODES = {"linear": "Linear", "nearest": "NearestNeighbor", "bspline": "BSpline"}


SLICER_ENGINES = ("BRAINSFit", "BRAINSResample")  # the ``backend`` an operator records when it ran these CLIs
HEADLESS_ENGINES = ("SimpleITK",)


def engines(app) -> tuple[str, ...]:
    """The registration engines a session on ``app`` runs (what its operators record as ``backend``)."""
    return SLICER_ENGINES if available(app) else HEADLESS_ENGINES


def available(app) -> bool:
    """True inside the Slicer GUI when the BRAINS CLI modules are loaded."""
    if not getattr(app, "embedded", False):
        return False
    import slicer

    modules = getattr(slicer, "modules", None)
    return hasattr(modules, "brainsfit") and hasattr(modules, "brainsresample")


def run_brainsfit(fixed, moving, transform_node, transform_type: str, initialization: str,
                  settings: RegistrationSettings) -> None:
    """Fill ``transform_node`` (a linear transform node) with BRAINSFit's moving-to-fixed transform."""
    parameters = {
        "fixedVolume": fixed.GetID(),
        "movingVolume": moving.GetID(),
        "linearTransform": transform_node.GetID(),
        "transformType": TRANSFORM_TYPES[transform_type],
        "initializeTransformMode": INITIALIZE_MODES[initialization],
        "costMetric": "MMI",
        "numberOfHistogramBins": settings.histogram_bins,
        "samplingPercentage": settings.sampling_percentage,
    }
    _run("brainsfit", parameters)


def run_brainsresample(moving, reference, transform_node, output, interpolation: str, default_value: float) -> None:
    parameters = {
        "inputVolume": moving.GetID(),
        "referenceVolume": reference.GetID(),
        "outputVolume": output.GetID(),
        "warpTransform": transform_node.GetID(),
        "interpolationMode": INTERPOLATION_MODES[interpolation],
        "pixelType": "float",
        "defaultValue": float(default_value),
    }
    _run("brainsresample", parameters)


ERROR_TEXT_CHARS = 800  # the tail of a CLI's standard error kept in the action's error message


def _run(module_name: str, parameters: dict) -> None:
    """Run a CLI module to completion and refuse its outputs unless it completed without errors.

    ``slicer.cli.runSync`` (Base/Python/slicer/cli.py) returns the CLI node whatever happened: a failed run
    leaves status ``CompletedWithErrors`` (``GetStatus() & ErrorsMask``) with the CLI's standard error in
    ``GetErrorText()``, and its outputs are not reloaded (vtkSlicerCLIModuleLogic.cxx) -- the transform keeps its
    pre-filled identity, the output volume its zeros. ``update_display=False``: with the default True, Slicer shows
    the output as background, clears the foreground and resets the field of view of every slice view.
    """
    import slicer

    module = getattr(slicer.modules, module_name)
    title = getattr(module, "title", None) or module_name
    try:
        cli_node = slicer.cli.runSync(module, None, parameters, update_display=False)
    # runSync reports a failed run through the node's status, never by raising (Base/Python/slicer/cli.py, 5.6 to
    # 5.10); an exception here is the call's own fault (a parameter the CLI node rejects, no CLI logic)
    except (RuntimeError, ValueError) as error:
        raise ActionError("registration_failed", f"{title} failed: {error}") from error
    if cli_node is None:
        raise ActionError("registration_failed", f"{title} could not be started (no CLI logic)")
    try:
        status = cli_node.GetStatus()
        if status & cli_node.ErrorsMask or status == cli_node.Cancelled:
            stderr = (cli_node.GetErrorText() or "").strip()
            detail = f": {stderr[-ERROR_TEXT_CHARS:]}" if stderr else " (no error output)"
            raise ActionError("registration_failed", f"{title} {cli_node.GetStatusString().lower()}{detail}")
    finally:
        slicer.mrmlScene.RemoveNode(cli_node)
