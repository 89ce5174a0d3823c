"""Shared fixtures: every core test takes ``backend`` and runs on native and pure alike.

The test run refuses to fall back silently: if the native extension is not built, every
native-parametrized test errors (unless SEGLOG_BACKEND=pure asks for the twin only).
"""

from __future__ import annotations

import os

import pytest

import seglog

os.environ.setdefault("SEGLOG_REQUIRE_NATIVE", "1")

_ONLY = os.environ.get("SEGLOG_BACKEND", "").strip().lower()
BACKENDS = [_ONLY] if _ONLY else list(seglog.BACKEND_NAMES)


@pytest.fixture(params=BACKENDS)
def backend(request):
    """The backend module under test (``seglog._native`` or ``seglog.pure``)."""
    return seglog.get_backend(request.param)


@pytest.fixture
def native():
    """The native backend (errors if it is not built)."""
    return seglog.get_backend("native")


@pytest.fixture
def pure():
    """The pure-Python twin."""
    return seglog.get_backend("pure")
