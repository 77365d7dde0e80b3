"""Dataset loaders: each reads one dataset as distributed (or the synthetic cohort) into a case package."""

from __future__ import annotations

import os
from pathlib import Path

from ..cases import CaseFormatError, PackageWriter


def prepare(module: str, source: str | os.PathLike, out: str | os.PathLike, **options) -> dict:
    """Write the case package of ``module`` from ``source`` into ``out``; returns the manifest.

    Per-case problems (missing or malformed files, labels without an option, a reference that contradicts its
    own masks) skip that case with a reason in the manifest; only an unusable dataset root (no label table)
    raises CaseFormatError. The package is staged and renamed into place at the end, so any failure leaves
    ``out`` as it was.
    """
    from ..modules import get

    spec = get(module)  # UnknownModule for a module no spec defines
    source = Path(source).resolve()
    if not source.is_dir():
        raise CaseFormatError(f"source {source} is not a directory")
    writer = PackageWriter(out, module, source)
    try:
        spec.loader(source, writer, **options)
        return writer.finish()
    except ValueError as error:
        raise CaseFormatError(str(error)) from error
    finally:
        writer.abandon()
