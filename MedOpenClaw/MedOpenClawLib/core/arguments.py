"""The argument schemas actions share, each written (and described) once.

Every action's JSON schema builds its recurring arguments from here, so a view, a 0..999 screen point, an
``image_id`` or a volume means the same thing, is validated the same way and is described in the same few words in
every tool a model reads (the tool list is sent with every round: a description repeated across many tools costs
tokens each time). Descriptions say only what the name and the constraints do not.

The volume convention (MedFlow-Bench Table 9's argument names): the volume an action acts on is given by
``volume_name`` (as the scene inventory lists it) or ``volume_id`` (its node id), the active volume when both are
omitted; a volume in a role (the background of a fusion, the fixed volume of a registration) is
``<role>_volume_ref``, a name or node id. :func:`MedOpenClawLib.viewer.engine.ViewerEngine.find_volume` resolves
both. Argument names an action had before are in :data:`RENAMED`: the registry accepts them under their current
name (:func:`canonical_arguments`), so old traces replay and old clients keep working.

Data only (no Slicer, no numpy): the catalog and the trace readers import it anywhere.
"""

from __future__ import annotations

from .result import ActionError

VIEWS = ("axial", "sagittal", "coronal")

VIEW = {"type": "string", "enum": list(VIEWS)}
SIZE = {"type": "integer", "minimum": 64, "maximum": 1024, "default": 512, "description": "image side (px)"}
IMAGE_ID = {"type": "string", "pattern": "^img-[0-9]{1,12}$",
            "description": "image_id of an earlier image that 0..999 points are read on (default: the last image "
                           "of view)"}

COORDINATE_1000 = {"type": "number", "minimum": 0, "maximum": 999}
# a point in a list of points: the list carries the description
POINT_1000_ITEM = {"type": "array", "items": COORDINATE_1000, "minItems": 2, "maxItems": 2}
POINT_1000 = {**POINT_1000_ITEM, "description": "[x, y] on the image, 0..999 from its top-left"}
BOX_1000 = {"type": "array", "items": COORDINATE_1000, "minItems": 4, "maxItems": 4}
BBOX_1000 = {**BOX_1000, "description": "[x0, y0, x1, y1] on the image, 0..999; its centre is used"}
POINTS_1000 = {"type": "array", "items": POINT_1000_ITEM, "minItems": 1, "maxItems": 16,
               "description": "[[x, y], ...] on the image of view, 0..999 from its top-left"}

RAS_ITEM = {"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3}
RAS = {**RAS_ITEM, "description": "[R, A, S] mm"}
POINTS_RAS = {"type": "array", "items": RAS_ITEM, "minItems": 1, "maxItems": 16, "description": "[[R, A, S], ...] mm"}
OFFSET_MM = {"type": "number", "description": "canonical RAS mm (axial=S, sagittal=R, coronal=A)"}

VOLUME_NAME = {"type": "string", "description": "a loaded volume's name (or node id)"}
VOLUME_ID = {"type": "string", "description": "a loaded volume's node id"}
VOLUME_REF = {"type": "string", "description": "name or node id of a loaded volume"}
# the volume an action acts on, as ``properties`` entries, and the root rule of an action that needs one named
VOLUME = {"volume_id": VOLUME_ID, "volume_name": VOLUME_NAME}
VOLUME_GIVEN = [{"required": ["volume_id"]}, {"required": ["volume_name"]}]

NAME = {"type": "string", "minLength": 1, "maxLength": 64}
LABEL = {"type": "string", "maxLength": 200, "default": "", "description": "short free-text label"}
WSI_LABEL = {"type": "string", "minLength": 1, "maxLength": 80, "description": "short name for this evidence item"}

# action -> {former argument name: its name now}
RENAMED = {
    "register_volumes": {"fixed_volume": "fixed_volume_ref", "moving_volume": "moving_volume_ref"},
    "resample_volume": {"reference_volume": "reference_volume_ref"},
}


def canonical_arguments(action: str, arguments: dict) -> dict:
    """``arguments`` of ``action`` under the current argument names (:data:`RENAMED`); a call that gives one
    argument under both names is refused, since the two values could disagree."""
    renamed = RENAMED.get(action)
    if not renamed or not isinstance(arguments, dict) or not renamed.keys() & arguments.keys():
        return arguments
    canonical = {}
    for name, value in arguments.items():
        current = renamed.get(name, name)
        if current != name and current in arguments:
            raise ActionError("invalid_argument", f"{action}: give {current} only ({name} is its former name)")
        canonical[current] = value
    return canonical
