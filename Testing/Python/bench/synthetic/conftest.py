"""The small raw cohort the tests of this folder prepare, and its case packages (each made once per session)."""

from __future__ import annotations

import pytest
from small_cohort import SMALL

from MedOpenClawLib.bench import modules
from MedOpenClawLib.bench.package import prepare
from MedOpenClawLib.bench.synthetic.cohort import write_cohort


@pytest.fixture(scope="session")
def cohort(tmp_path_factory):
    root = tmp_path_factory.mktemp("cohort")
    write_cohort(root, SMALL)
    return root


@pytest.fixture(scope="session")
def packages(cohort, tmp_path_factory):
    """Every module's case package prepared from ``cohort``, once (NSCLC's takes seconds) for the tests that only
    read them; a test that changes a package or its source works on a copy."""
    root = tmp_path_factory.mktemp("packages")
    for name in modules.names():
        prepare(modules.get(name), cohort / modules.get(name).dataset_dir, root / name)
    return root
