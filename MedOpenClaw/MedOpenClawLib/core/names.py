"""Names that become paths, and the paths they become: one validator and one confinement rule.

Case ids come from CSV cells, manifests and response files; file names come from directory scans. Any of them
can hold ``/abs/victim``, ``../..``, a newline, an escape sequence, a right-to-left override or bytes that are
not UTF-8 (which Python hands over as lone surrogates). Every entry point checks names here, and every write
or delete below a package or ``--out`` goes through :func:`confined`, so a path outside its root cannot be
built, whatever a caller forgot to check.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import stat
from pathlib import Path, PurePosixPath

from .hygiene import preview, text_problem

# a case id is one path component: letters, digits, '.', '_', '-'; it starts with a letter or digit, so it is
# never '.', '..', hidden or an option
CASE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# bidirectional and invisible formatting characters: shown text differs from the bytes (U+202E turns
# 'gpj.exe' around), so no name may hold them
_FORMAT_CHARACTER = re.compile("[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")


class UnsafeName(ValueError):
    """A name or path that would lead outside its root, or that no action could address safely."""


def name_problem(text: str) -> str | None:
    """Why ``text`` cannot be a file or volume name (control characters, surrogates from bytes that are not
    UTF-8, bidirectional overrides, over-long), or None when it can."""
    problem = text_problem(text)
    if problem is not None:
        return problem
    found = _FORMAT_CHARACTER.search(text)
    return None if found is None else f"contains the formatting character U+{ord(found.group()):04X}"


def check_case_id(value: object, what: str = "case id") -> str:
    """``value`` if it is a safe case id, else :class:`UnsafeName` saying why."""
    if not isinstance(value, str) or CASE_ID.fullmatch(value) is None:
        raise UnsafeName(f"{what} {preview(value)} is not a plain name (letters, digits, '.', '_', '-'; at most "
                         "128, starting with a letter or digit)")
    return value


def case_id_problem(value: object) -> str | None:
    try:
        check_case_id(value)
    except UnsafeName as error:
        return str(error)
    return None


def check_relative(path: object, under: str, what: str = "path") -> str:
    """``path`` if it is a relative POSIX path of plain components lying in ``under`` (or equal to it)."""
    if not isinstance(path, str) or name_problem(path) or "\\" in path:
        raise UnsafeName(f"{what} {preview(path)} is not a plain relative path")
    components = path.split("/")
    if path.startswith("/") or any(part in ("..", ".") for part in components) or not any(components):
        raise UnsafeName(f"{what} {preview(path)} must be relative and must not hold '..'")
    parts = tuple(part for part in components if part)  # what PurePosixPath(path).parts holds here (no '.', no root)
    root = _parts(under)
    if parts[:len(root)] != root:
        raise UnsafeName(f"{what} {preview(path)} lies outside {under}")
    return path


@functools.lru_cache(maxsize=256)
def _parts(path: str) -> tuple[str, ...]:
    """The components of a folder paths are checked against (a case has one: parsed once, not per path)."""
    return PurePosixPath(path).parts


def confined(root: str | os.PathLike, *parts: str) -> Path:
    """``root/part/...`` after checking that every part is a plain component and that the result, with links
    resolved, still lies strictly inside ``root``: the only way writers and deleters build their paths."""
    base = Path(root).resolve()
    for part in parts:
        _check_part(part, base)
    target = base.joinpath(*parts)
    real = target.resolve()
    if parts and base not in real.parents:
        raise UnsafeName(f"{target} leads outside {base}")
    return target


def plain_files(root: str | os.PathLike) -> list[Path]:
    """Every file below ``root``, sorted, walked with ``lstat`` only: a link (to a file or a folder) or anything
    that is not a regular file or folder raises :class:`UnsafeName`, so what is packed or hashed is exactly the
    tree's own bytes, never what a link points to."""
    root = Path(root)
    if root.is_symlink() or not root.is_dir():
        raise UnsafeName(f"{root} is not a folder (or is a link)")
    files, pending = [], [root]
    while pending:
        directory = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                mode = entry.stat(follow_symlinks=False).st_mode
                path = Path(entry.path)
                if stat.S_ISDIR(mode):
                    pending.append(path)
                elif stat.S_ISREG(mode):
                    files.append(path)
                else:
                    kind = "a link" if stat.S_ISLNK(mode) else "not a regular file"
                    raise UnsafeName(f"{path.relative_to(root)} under {root} is {kind}; refused")
    return sorted(files)


def regular_file(path: str | os.PathLike, inside: str | os.PathLike | None = None) -> Path:
    """``path`` if it is a regular file (not a link, device, FIFO or folder: ``/dev/zero`` hashes forever) and,
    given ``inside``, lies in that folder with links resolved; else :class:`UnsafeName`."""
    path = Path(path)
    if inside is not None:
        base = Path(inside).resolve()
        if base not in path.resolve().parents:
            raise UnsafeName(f"{preview(str(path))} lies outside {base}")
    try:
        mode = path.lstat().st_mode
    except OSError as error:
        raise UnsafeName(f"{preview(str(path))}: {error.strerror or error}") from error
    if not stat.S_ISREG(mode):
        raise UnsafeName(f"{preview(str(path))} is not a regular file")
    return path


def _check_part(part: object, base: Path) -> str:
    if not isinstance(part, str) or part in ("", ".", "..") or "/" in part or "\\" in part or name_problem(part):
        raise UnsafeName(f"{preview(part)} is not a plain file or folder name (inside {base})")
    return part


def remove_confined(root: str | os.PathLike, *parts: str) -> None:
    """Delete ``root/part/...`` (a folder tree or a file) if present; a link there is removed, never followed."""
    if not parts:
        raise UnsafeName(f"refusing to delete the root {root} itself")
    target = confined(root, *parts[:-1]) / _check_part(parts[-1], Path(root))
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.is_dir():
        shutil.rmtree(target)
