"""Choosing a backend: the one place that decides between the native core and its pure twin.

``SEGLOG_BACKEND=pure|native`` selects the default. When it is unset the native backend is the
default; if the extension cannot be imported users get one warning and the twin, but when
``SEGLOG_REQUIRE_NATIVE=1`` is set (the test suite and CI set it) a missing build is an error.
"""

from __future__ import annotations

import importlib
import os
import warnings
from types import ModuleType
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from . import _contract

BACKEND_NAMES = ("native", "pure")
_loaded: dict[str, ModuleType] = {}
_fallback_warned = False


def get_backend(name: str | None = None) -> _contract.Backend:
    """The backend module called ``name`` (``"native"`` or ``"pure"``), or the default one.
    Its interface is ``seglog._contract.Backend`` (both modules have exactly those names).

    Raises ``ValueError`` for another name and ``ImportError`` when ``"native"`` is asked for
    by name and the extension modules are not built.
    """
    if name is None:
        return default_backend()
    if name not in BACKEND_NAMES:
        raise ValueError(f"backend must be one of {BACKEND_NAMES}, got {name!r}")
    module = _loaded.get(name)
    if module is None:
        module = importlib.import_module("seglog._native" if name == "native" else "seglog.pure")
        _loaded[name] = module
    return cast("_contract.Backend", module)


def default_backend() -> _contract.Backend:
    """The backend ``SEGLOG_BACKEND`` names, else native, else (with one warning) pure."""
    global _fallback_warned
    requested = os.environ.get("SEGLOG_BACKEND", "").strip().lower()
    if requested:
        return get_backend(requested)
    try:
        return get_backend("native")
    except ImportError as exc:
        if os.environ.get("SEGLOG_REQUIRE_NATIVE", "") not in ("", "0"):
            raise ImportError(
                "seglog's native extension is not built and SEGLOG_REQUIRE_NATIVE is set: "
                f"{exc}. Build it with `pip install -e .` (needs a C compiler)."
            ) from exc
        if not _fallback_warned:
            _fallback_warned = True
            warnings.warn(
                f"seglog: native extension unavailable ({exc}); using the pure-Python backend",
                RuntimeWarning,
                stacklevel=2,
            )
        return get_backend("pure")
