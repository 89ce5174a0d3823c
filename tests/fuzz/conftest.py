"""Fuzz-harness fixtures and the long-run switch.

``@pytest.mark.fuzz`` tests are short (seconds, fixed seeds) and run with the default suite.
``@pytest.mark.fuzz_long`` tests are skipped unless ``SEGLOG_FUZZ_LONG=1`` (CI sets it).
``SEGLOG_FUZZ_SEED=<int>`` replaces every test's fixed seed (printed on failure either way),
so a failure reproduces with ``SEGLOG_FUZZ_SEED=<seed> python3 -m pytest tests/fuzz -k <test>``.
"""

from __future__ import annotations

import os

import pytest

LONG = os.environ.get("SEGLOG_FUZZ_LONG", "") not in ("", "0")


def pytest_collection_modifyitems(config, items):
    if LONG:
        return
    skip = pytest.mark.skip(reason="long fuzz run: set SEGLOG_FUZZ_LONG=1")
    for item in items:
        if "fuzz_long" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def fuzz_seed(request) -> int:
    """The seed of this test: ``SEGLOG_FUZZ_SEED`` or a fixed one derived from the test name."""
    env = os.environ.get("SEGLOG_FUZZ_SEED")
    if env:
        return int(env)
    return sum(request.node.name.encode()) % 10_000


@pytest.fixture(scope="session")
def seed_logs(tmp_path_factory):
    """Seed log directories after a clean close, an unclean copy and a SIGKILL, with models."""
    from .seeds import make_seed_logs

    return make_seed_logs(str(tmp_path_factory.mktemp("seed-logs")))


@pytest.fixture(scope="session")
def seed_stores(tmp_path_factory):
    """Seed store directories after a clean close and an unclean copy, with models."""
    from .seeds import make_seed_stores

    return make_seed_stores(str(tmp_path_factory.mktemp("seed-stores")))
