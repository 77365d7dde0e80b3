"""Which of the module's Python requirements are missing from the running interpreter.

Inside Slicer the module offers to install them (``slicer.util.pip_install``) only after the user agrees;
this part decides what to offer and is testable anywhere.
"""

from __future__ import annotations

import importlib.util
import os
import re

IMPORT_NAMES = {"pillow": "PIL", "pyyaml": "yaml"}
REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def read_requirements(path: str | os.PathLike) -> list[str]:
    with open(path, encoding="utf-8") as handle:
        lines = [line.split("#", 1)[0].strip() for line in handle]
    return [line for line in lines if line]


def import_name(requirement: str) -> str:
    match = REQUIREMENT_NAME.match(requirement)
    if match is None:
        raise ValueError(f"cannot read a package name from {requirement!r}")
    name = match.group(1).lower()
    return IMPORT_NAMES.get(name, name.replace("-", "_").replace(".", "_"))


def missing_requirements(requirements: list[str]) -> list[str]:
    return [requirement for requirement in requirements if importlib.util.find_spec(import_name(requirement)) is None]
