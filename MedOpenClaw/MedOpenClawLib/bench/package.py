"""The case-package writer: loaders (real datasets and the synthetic cohort) put files and cases into a staged
package, checked case by case against one rule set (:mod:`.truth_check`), then renamed into place."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..core.hygiene import preview
from ..core.names import case_id_problem, confined, remove_confined
from ..core.sinks import write_json
from .cases import CONSISTENT_STEP, MANIFEST_FORMAT, USABLE_STEP, Case, GroundTruth, checked_case_id
from .errors import CaseFormatError
from .integrity import file_records
from .spec import ModuleSpec
from .truth_check import check_ground_truth


def place_file(source: str | os.PathLike, target: str | os.PathLike) -> Path:
    """Put a dataset file into a package: hard link when possible (no copy of gigabytes), else copy."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        target.unlink()
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
    return target


class PackageWriter:
    """Accumulates cases and skips while a loader walks a dataset, then writes the manifest once.

    Everything is written into a staging folder beside ``out_dir`` that :meth:`finish` renames into place (an
    earlier package there is replaced only then) and :meth:`abandon` deletes: a prepare that fails or is
    interrupted leaves no half-written package, and never touches a folder that is not a case package."""

    def __init__(self, out_dir: str | os.PathLike, spec: ModuleSpec, source: str | os.PathLike):
        self.target = Path(out_dir).resolve()
        self.spec = spec
        self.module = spec.name
        self.source = str(source)
        if self.target.exists() and not (self.target.is_dir() and (
                (self.target / "manifest.json").is_file() or not any(self.target.iterdir()))):
            raise CaseFormatError(f"{self.target} exists and is not a case package (no manifest.json): "
                                  "refusing to replace it; choose another --out")
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self.root = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.partial-", dir=self.target.parent))
        self.cases: list[Case] = []
        self.skipped: list[dict] = []
        self.notes: dict[str, Any] = {}  # loader findings worth keeping in the manifest (e.g. label mappings)
        (self.root / "data").mkdir()
        (self.root / "hidden").mkdir()

    def data_dir(self, case_id: str) -> Path:
        return confined(self.root / "data", checked_case_id(case_id))

    def hidden_dir(self, case_id: str) -> Path:
        return confined(self.root / "hidden", checked_case_id(case_id))

    def admit(self, case_id: str) -> bool:
        """Whether a dataset's case id (a CSV cell, a folder name) can name a case; one that cannot is skipped
        with the reason and nothing on disk is touched. Loaders call this first for every candidate."""
        problem = case_id_problem(case_id)
        if problem is not None:
            self.skip(case_id, problem)
        return problem is None

    def relative(self, path: str | os.PathLike) -> str:
        return Path(path).resolve().relative_to(self.root).as_posix()

    def add(self, case: Case, truth: GroundTruth) -> bool:
        """Record a finished case and return True; its agent-visible files get size + sha256 records. A ground
        truth that contradicts its own masks and labels (:func:`.truth_check.check_ground_truth`) excludes
        that case with the contradictions as its reason (False): one disagreement between, say, an expert
        rating and an automatic mask must not abort the whole dataset."""
        if case.case_id != truth.case_id or case.module != self.module:
            raise CaseFormatError(f"case {case.case_id!r} and its ground truth disagree on id or module")
        hidden = self.hidden_dir(case.case_id)
        hidden.mkdir(parents=True, exist_ok=True)
        truth.hidden_dir = hidden
        problems = check_ground_truth(case, truth, self.spec)
        if problems:
            self.skip(case.case_id, "ground truth contradicts itself: " + "; ".join(problems), CONSISTENT_STEP)
            return False
        case.files = file_records(self.data_dir(case.case_id), self.root)
        write_json(hidden / "ground_truth.json", truth.to_json())
        case.cases_dir = self.target
        self.cases.append(case)
        return True

    def skip(self, case_id: str, reason: str | Exception, step: str = USABLE_STEP) -> None:
        """Record an excluded case under the cohort-filter ``step`` that excluded it (a loader's SkipCase
        carries its own step); partially written files of it are removed so the package stays clean."""
        step = getattr(reason, "step", step)
        reason = str(reason)
        problem = case_id_problem(case_id)
        if problem is None:  # an unsafe id names no folder of this package: there is nothing to remove
            for tree in ("data", "hidden"):
                remove_confined(self.root / tree, case_id)
        else:
            case_id, reason = preview(case_id), reason if reason == problem else f"{problem}; {reason}"
        self.cases = [case for case in self.cases if case.case_id != case_id]
        self.skipped.append({"case_id": case_id, "reason": reason, "step": step})

    def filter_table(self) -> list[dict]:
        """Cases remaining after each cohort-filter step, in the loader's filter order."""
        remaining = len(self.cases) + len(self.skipped)
        table = [{"step": "candidates", "excluded": 0, "remaining": remaining}]
        order = self.spec.filter_steps
        steps = sorted(dict.fromkeys(item["step"] for item in self.skipped),
                       key=lambda step: order.index(step) if step in order else len(order))
        for step in steps:
            excluded = sum(item["step"] == step for item in self.skipped)
            remaining -= excluded
            table.append({"step": step, "excluded": excluded, "remaining": remaining})
        return table

    def finish(self) -> dict:
        """Write the manifest and move the staged package to ``out_dir`` (replacing an earlier package)."""
        manifest = {
            "format": MANIFEST_FORMAT,
            "module": self.module,
            "source": self.source,
            "cases": [case.to_json() for case in sorted(self.cases, key=lambda c: c.case_id)],
            "skipped": sorted(self.skipped, key=lambda s: s["case_id"]),
            "filters": self.filter_table(),
            "paper_count": self.spec.paper_count,  # MedFlow-Bench Table 4
            **self.notes,
        }
        write_json(self.root / "manifest.json", manifest)
        previous = None
        if self.target.exists():
            previous = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.old-", dir=self.target.parent))
            os.replace(self.target, previous / "package")
        os.replace(self.root, self.target)
        if previous is not None:
            shutil.rmtree(previous, ignore_errors=True)
        self.root = self.target
        return manifest

    def abandon(self) -> None:
        """Delete the staged package (a failed prepare): ``out_dir`` keeps what it held before."""
        if self.root != self.target:
            shutil.rmtree(self.root, ignore_errors=True)


def prepare(spec: ModuleSpec, source: str | os.PathLike, out: str | os.PathLike, **options) -> dict:
    """Write the case package of the module ``spec`` from ``source`` (the dataset as distributed, or the synthetic
    cohort) into ``out`` with the module's loader; returns the manifest.

    Per-case problems (missing or malformed files, labels without an option, a reference that contradicts its
    own masks) skip that case with a reason in the manifest; only an unusable dataset root (no label table)
    raises CaseFormatError. The package is staged and renamed into place at the end, so any failure leaves
    ``out`` as it was.
    """
    source = Path(source).resolve()
    if not source.is_dir():
        raise CaseFormatError(f"source {source} is not a directory")
    writer = PackageWriter(out, spec, source)
    try:
        spec.loader(source, writer, **options)
        return writer.finish()
    except ValueError as error:
        raise CaseFormatError(str(error)) from error
    finally:
        writer.abandon()
