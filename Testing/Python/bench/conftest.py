"""Fixtures of the bench test folders."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def warm_pool(tmp_path_factory):
    """The test process's pool of warm headless workers (warm_workers.WarmPool), ended with the session."""
    from warm_workers import WarmPool

    pool = WarmPool(tmp_path_factory.mktemp("warm-workers"))
    yield pool
    pool.shut_down()


@pytest.fixture(scope="module")
def warm_workers(warm_pool):
    """The module's runs in this process launch their local workers from ``warm_pool`` (for the modules whose
    runs test what happens around the worker, not its start); subprocess runs start their own as ever."""
    from MedOpenClawLib.bench import executors

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(executors, "local_worker", warm_pool.local_worker)
        yield warm_pool
