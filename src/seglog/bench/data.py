"""The records every part uses, and the backends they are written with.

Records are JSON-like byte strings of exactly ``record_bytes`` bytes with per-record
variation (ids, users, events, timestamps), the same shape the peer survey measured, so compression
ratios and CRC inputs look like real click events rather than ``b"x" * 100``. They are
generated once per run from a fixed seed, before any timing.

Backends: :func:`load_backend` returns the full backend module when it imports. While the
project is being built, a backend package's ``__init__`` fails until *every* module exists;
the bench then loads the submodules that do exist one by one and reports the rest as missing,
so each measurement runs as soon as the code it needs has landed.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import random
import sys
import types
from dataclasses import dataclass, field
from typing import Any

#: Fixed seed of the record generator (values are identical across runs and machines).
RECORDS_SEED = 7

_EVENTS = (b"click", b"view", b"scroll", b"purchase", b"signup", b"logout")
_FILLER = b"abcdefghijklmnopqrstuvwxyz0123456789" * 8


class Unavailable(Exception):
    """A measurement cannot run here; the message says why (shown as ``not available: ...``)."""


def make_values(count: int, record_bytes: int, *, seed: int = RECORDS_SEED) -> list[bytes]:
    """``count`` JSON-like records of exactly ``record_bytes`` bytes each (deterministic).

    Each record looks like ``{"id":12,"user":"u004711","ev":"click","ts":1700000000123,
    "p":"/p/77","pad":"abc..."}``, padded with filler (or cut) to the requested size.
    """
    assert count >= 0 and record_bytes > 0
    rng = random.Random(seed)
    getrandbits = rng.getrandbits
    out: list[bytes] = []
    append = out.append
    ts_ms = 1_700_000_000_000
    for i in range(count):
        bits = getrandbits(32)
        ts_ms += bits & 0x3F
        head = b'{"id":%d,"user":"u%06d","ev":"%s","ts":%d,"p":"/p/%d","pad":"' % (
            i, (bits >> 6) % 1_000_000, _EVENTS[bits % 6], ts_ms, (bits >> 12) & 0x3FF)
        room = record_bytes - len(head) - 2
        if room >= 0:
            value = head + _FILLER[(bits >> 20) & 0x1F:][:room].ljust(room, b"x") + b'"}'
        else:
            value = head[:record_bytes]
        append(value)
    return out


def values_matrix(values: list[bytes]) -> Any:
    """The values as a 2-D C-contiguous uint8 numpy array (one row per record).

    All values must have the same length. This is the fast, object-free input form of
    ``encode_batch`` (see ``seglog._contract``).
    """
    import numpy as np

    if not values:
        return np.zeros((0, 0), dtype=np.uint8)
    width = len(values[0])
    return np.frombuffer(b"".join(values), dtype=np.uint8).reshape(len(values), width)


def offset_keys(count: int) -> list[bytes]:
    """8-byte big-endian keys ``0..count-1`` (sorted byte order = offset order)."""
    return [i.to_bytes(8, "big") for i in range(count)]


def random_offsets(count: int, upper: int, *, seed: int = 42) -> list[int]:
    """``count`` offsets drawn uniformly from ``range(upper)`` (with repeats), seeded."""
    rng = random.Random(seed)
    return [rng.randrange(upper) for _ in range(count)]


# --- backends -------------------------------------------------------------------------------

_SUBMODULES = {
    "native": ("seglog._native", ("_crc32c", "codec", "index", "segment")),
    "pure": ("seglog.pure", ("crc32c", "codec", "index", "segment")),
}
_ATTRIBUTES = {
    "crc32c": ("_crc32c", "crc32c"),
    "encode_batch": ("codec",),
    "iter_batches": ("codec",),
    "decode_columns": ("codec",),
    "OffsetIndex": ("index",),
    "TimeIndex": ("index",),
    "Segment": ("segment",),
}


@dataclass
class BackendView:
    """The parts of one backend that import: ``name``, ``complete`` and ``missing``.

    Attribute access is forwarded to the loaded submodules; :meth:`need` raises
    :class:`Unavailable` with the import error when a name is missing.
    """

    name: str
    complete: bool
    namespace: Any
    missing: dict[str, str] = field(default_factory=dict)

    def has(self, attr: str) -> bool:
        """True when ``attr`` (``encode_batch``, ``Segment``, ...) can be used."""
        return hasattr(self.namespace, attr)

    def need(self, attr: str) -> Any:
        """``attr`` of this backend, or raise :class:`Unavailable` saying why it is missing."""
        if self.has(attr):
            return getattr(self.namespace, attr)
        reason = self.missing.get(attr, "not implemented")
        raise Unavailable(f"{self.name} backend has no {attr} yet ({reason})")


_backend_cache: dict[str, BackendView] = {}


def load_backend(name: str) -> BackendView:
    """The ``native`` or ``pure`` backend, whole or in part (cached per process)."""
    view = _backend_cache.get(name)
    if view is None:
        view = _backend_cache[name] = _load_backend(name)
    return view


def _load_backend(name: str) -> BackendView:
    import seglog

    try:
        module = seglog.get_backend(name)
        return BackendView(name, True, module)
    except ImportError as exc:
        full_error = _short(exc)
    package, submodules = _SUBMODULES[name]
    loaded, errors = _import_partial(package, submodules)
    namespace = types.SimpleNamespace(name=name)
    missing: dict[str, str] = {}
    for attr, candidates in _ATTRIBUTES.items():
        for sub in candidates:
            submodule = loaded.get(sub)
            if submodule is not None and hasattr(submodule, attr):
                setattr(namespace, attr, getattr(submodule, attr))
                break
        else:
            reasons = [errors[s] for s in candidates if s in errors]
            missing[attr] = reasons[0] if reasons else full_error
    return BackendView(name, False, namespace, missing)


def _import_partial(package: str, submodules: tuple[str, ...]) -> tuple[dict, dict]:
    """Import each submodule of ``package`` without running the package's ``__init__``.

    A stand-in package module is placed in ``sys.modules`` while the submodules import (their
    relative imports need it) and removed afterwards, so a later ``import package`` runs the
    real ``__init__`` (which then finds the submodules already imported).
    """
    loaded: dict[str, types.ModuleType] = {}
    errors: dict[str, str] = {}
    parent_name, _, _ = package.rpartition(".")
    try:
        parent = importlib.import_module(parent_name)
    except ImportError as exc:  # pragma: no cover - seglog itself is importable here
        return loaded, {s: _short(exc) for s in submodules}
    locations = [p + "/" + package.rpartition(".")[2] for p in parent.__path__]
    placed_stub = package not in sys.modules
    if placed_stub:
        stub = types.ModuleType(package)
        stub.__path__ = locations
        stub.__package__ = package
        sys.modules[package] = stub
    try:
        for sub in submodules:
            try:
                loaded[sub] = importlib.import_module(f"{package}.{sub}")
            except Exception as exc:  # noqa: BLE001 - half-written modules raise anything
                errors[sub] = _short(exc)
    finally:
        if placed_stub:
            sys.modules.pop(package, None)
    return loaded, errors


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 160 else text[:157] + "..."
