"""Fixtures of the developers' pytest-benchmark suites (``pytest bench/ --benchmark-only``).

Records are the same JSON-like values ``seglog bench`` uses (:mod:`seglog.bench.data`).
Backends that are not built yet are skipped with the import error as the reason, never
silently replaced: the ``backend`` fixture runs each benchmark on ``native`` and ``pure``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pytest_benchmark")

from seglog.bench.data import load_backend, make_values  # noqa: E402

#: Records per batch (the peer survey's batches of 1,000) and the record size.
BATCH_RECORDS = 1_000
RECORD_BYTES = 100


@pytest.fixture(scope="session")
def values():
    """One batch worth of 100-byte records (1,000 ``bytes`` objects)."""
    return make_values(BATCH_RECORDS, RECORD_BYTES)


def need(backend_name: str, *names: str):
    """The backend module (or partial view) with ``names``, or skip saying what is missing."""
    view = load_backend(backend_name)
    for name in names:
        if not view.has(name):
            pytest.skip(f"{backend_name} backend: {name} not built "
                        f"({view.missing.get(name, 'missing')})")
    return view.namespace


@pytest.fixture(params=["native", "pure"])
def backend_name(request):
    """``native`` then ``pure``."""
    return request.param
