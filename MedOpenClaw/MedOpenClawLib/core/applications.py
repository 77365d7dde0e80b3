"""The one vocabulary of application kinds: catalog entries, session_config ``app``, worker builders, module specs."""

from __future__ import annotations

APPLICATIONS = ("radiology", "pathology")
RADIOLOGY, PATHOLOGY = APPLICATIONS  # 3D Slicer (volumes), QuPath-style whole-slide viewers
# what traces written before that vocabulary call them in session_config "app"
FORMER_APPLICATION_NAMES = {"slicer": RADIOLOGY, "wsi": PATHOLOGY}
TRACKS = ("A", "B")


def check_application(application: object) -> str:
    """``application`` when it is one of :data:`APPLICATIONS`; ValueError naming them otherwise."""
    if application not in APPLICATIONS:
        raise ValueError(f"application must be one of {', '.join(APPLICATIONS)}, got {application!r}")
    return application


def application_named(name: object) -> str:
    """The application a trace's ``app`` names (older traces say ``slicer``/``wsi``); ValueError for others."""
    application = FORMER_APPLICATION_NAMES.get(name, name) if isinstance(name, str) else name
    if application not in APPLICATIONS:
        raise ValueError(f"unknown application {name!r}; expected one of {', '.join(APPLICATIONS)}")
    return application
