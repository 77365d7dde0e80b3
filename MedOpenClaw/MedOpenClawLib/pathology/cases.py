"""Resolve what ``load_case`` names (a slide file, a case folder, or a QuPath project) to one slide file.

Every candidate goes through the session's data-root policy (its resolver, and its confined scan for a case
folder), so neither a QuPath project nor a link in a case folder can point the viewer outside the allowed roots.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

from ..core.policy import DataRootPolicy
from ..core.result import ActionError

SLIDE_SUFFIXES = (".svs", ".tif", ".tiff", ".ndpi", ".mrxs", ".scn", ".svslide", ".bif", ".vms", ".vmu")
PROJECT_FILE = "project.qpproj"


def _project_images(project: Path) -> list[tuple[str, Path]]:
    """(imageName, file) of each entry of a QuPath project; relative URIs resolve against the project folder."""
    try:
        document = json.loads(project.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ActionError("invalid_case", f"{project.name} is not a readable QuPath project: {error}") from error
    entries = []
    for entry in document.get("images", []) if isinstance(document, dict) else []:
        builder = entry.get("serverBuilder", {}) if isinstance(entry, dict) else {}
        uri = builder.get("uri") if isinstance(builder, dict) else None
        if not isinstance(uri, str):
            continue
        parsed = urlparse(uri)
        if parsed.scheme not in ("", "file"):
            continue
        location = Path(unquote(parsed.path))
        if not location.is_absolute() or not location.exists():
            location = project.parent / location.name  # a moved project: QuPath looks beside the project too
        entries.append((str(entry.get("imageName") or location.name), location))
    return entries


def _choose(candidates: list[tuple[str, Path]], image_name: str | None, where: str) -> Path:
    if not candidates:
        raise ActionError("invalid_case", f"{where} contains no whole-slide image")
    if image_name is not None:
        for name, location in candidates:
            if image_name in (name, location.name):
                return location
        names = ", ".join(sorted(name for name, _ in candidates))
        raise ActionError("not_found", f"{where} has no image named {image_name!r}; images: {names}")
    if len(candidates) > 1:
        names = ", ".join(sorted(name for name, _ in candidates))
        raise ActionError("ambiguous_case", f"{where} holds several images ({names}); pass image_name")
    return candidates[0][1]


def _companion_files(slide: Path) -> list[Path]:
    """Files a multi-file slide format makes OpenSlide read besides ``slide``: MIRAX keeps its data in a folder
    named like the slide; Hamamatsu VMS/VMU lists its image and map files in the slide's ini text."""
    suffix = slide.suffix.lower()
    if suffix == ".mrxs":
        folder = slide.with_suffix("")
        return [folder, *(folder / entry.name for entry in os.scandir(folder))] if folder.is_dir() else []
    if suffix in (".vms", ".vmu"):
        try:
            text = slide.read_text(encoding="latin-1")
        except OSError:
            return []
        names = re.findall(r"^\s*(?:ImageFile[^=]*|MapFile|OptimisationFile)\s*=\s*(.+?)\s*$", text, re.MULTILINE)
        return [slide.parent / name for name in names]
    return []


def resolve_slide(path: str, roots: DataRootPolicy) -> Path:
    """The data-root resolver for a slide: the file, and every companion file its format reads, must resolve
    inside the roots (a link in a MIRAX data folder would otherwise let OpenSlide read outside)."""
    slide = roots.resolve(path)
    for companion in _companion_files(slide):
        try:
            roots.resolve(str(companion))
        except ActionError as error:
            if error.code == "not_found":
                continue  # OpenSlide reports the missing part when it opens the slide
            raise ActionError("path_not_allowed", f"{slide.name}: its companion file {companion.name!r} lies "
                                                  "outside the allowed data roots") from error
    return slide


def resolve_case_image(case_path: str, image_name: str | None, roots: DataRootPolicy) -> Path:
    """The slide file of a case: the file itself, the project's (named) image, or the folder's only slide."""
    case = roots.resolve(case_path)

    def guard(path: str) -> Path:
        return resolve_slide(path, roots)

    if case.is_file():
        if case.suffix == ".qpproj":
            return guard(str(_choose(_project_images(case), image_name, case.name)))
        if image_name is not None and image_name != case.name:
            raise ActionError("invalid_argument", "image_name only applies to a case folder or a QuPath project")
        return guard(str(case))
    project = case / PROJECT_FILE
    if project.is_file():
        return guard(str(_choose(_project_images(project), image_name, case.name)))
    listing = roots.scan(case, recursive=False)
    slides = [(path.name, path) for path in listing.files if path.suffix.lower() in SLIDE_SUFFIXES]
    return guard(str(_choose(slides, image_name, case.name)))
