"""The error of a case package that does not follow its layout: at the bottom of bench, so the module registry,
the case records and the package writer raise one kind of error that every command reports alike."""

from __future__ import annotations


class CaseFormatError(ValueError):
    """A case package (or one of its files) does not follow the documented layout."""
