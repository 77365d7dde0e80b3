"""The small raw cohort the tests of this folder prepare (generated once per session)."""

from __future__ import annotations

import pytest
from small_cohort import SMALL

from MedOpenClawLib.bench.synthetic.cohort import write_cohort


@pytest.fixture(scope="session")
def cohort(tmp_path_factory):
    root = tmp_path_factory.mktemp("cohort")
    write_cohort(root, SMALL)
    return root
