"""One behaviour for bad arguments in both twins (issue 8, symptom 4).

Every public Segment / OffsetIndex / TimeIndex method is called with negative, fractional,
huge and wrongly typed numbers on both backends, on identical files; the outcome (the value
returned, or the exception class) must be the same, must be a ``seglog.errors`` class or a
documented ValueError / TypeError / IndexError / OSError, and never an OverflowError leaking
from a C conversion. The rules (each method's docstring says them): a non-integer number is
TypeError; an offset or timestamp may be any int (below the segment means its start, beyond
int64 means the same as INT64_MAX); sizes and positions below 0 are ValueError, huge ones are
clamped; index slots outside ``[0, entries)`` are IndexError."""

from __future__ import annotations

import os
import socket

import pytest

import seglog
from seglog.errors import SeglogError
from segment_helpers import batch

HUGE = 2**70
BAD_NUMBERS = [-1, 1.5, HUGE, -HUGE, "1", None]

SEGMENT_CALLS = [
    *[("read", (v, 1 << 20), {}) for v in BAD_NUMBERS],
    *[("read", (0, v), {}) for v in BAD_NUMBERS],
    *[("read", (0, 1 << 20), {"max_position": v}) for v in BAD_NUMBERS],
    *[("read_range", (v, 100), {}) for v in BAD_NUMBERS],
    *[("read_range", (3, v), {}) for v in BAD_NUMBERS],
    *[("read_span", (v, 100), {}) for v in BAD_NUMBERS],
    *[("read_span", (3, v), {}) for v in BAD_NUMBERS],
    *[("read_record", (v,), {}) for v in BAD_NUMBERS],
    *[("read_value", (v,), {}) for v in BAD_NUMBERS],
    *[("translate_offset", (v,), {}) for v in BAD_NUMBERS],
    *[("find_offset_by_timestamp", (v,), {}) for v in BAD_NUMBERS],
    *[("find_offset_by_timestamp", (1000, v), {}) for v in BAD_NUMBERS],
    *[("batches", (v,), {}) for v in BAD_NUMBERS],
    *[("sendfile", ("SOCKET", v, 100), {}) for v in BAD_NUMBERS],
    *[("sendfile", ("SOCKET", 0, v), {}) for v in BAD_NUMBERS],
    *[("sendfile", (v, 0, 100), {}) for v in BAD_NUMBERS],
    *[("truncate_to", (v,), {}) for v in BAD_NUMBERS],
    *[("append", (v,), {}) for v in (1.5, None, "abc", b"", b"\x00" * 70)],
    *[("resize_indexes", (v,), {}) for v in BAD_NUMBERS],
]

OFFSET_INDEX_CALLS = [
    *[("lookup", (v,), {}) for v in BAD_NUMBERS],
    *[("entry", (v,), {}) for v in BAD_NUMBERS],
    *[("append", (v, 10_000), {}) for v in BAD_NUMBERS],
    *[("append", (1_000, v), {}) for v in BAD_NUMBERS],
    *[("truncate_to", (v,), {}) for v in BAD_NUMBERS],
    *[("resize", (v,), {}) for v in BAD_NUMBERS],
    *[("sanity_check", (), {"log_size_bytes": v}) for v in BAD_NUMBERS],
]

TIME_INDEX_CALLS = [
    *[("lookup", (v,), {}) for v in BAD_NUMBERS],
    *[("entry", (v,), {}) for v in BAD_NUMBERS],
    *[("maybe_append", (v, 1_000), {}) for v in BAD_NUMBERS],
    *[("maybe_append", (10**12, v), {}) for v in BAD_NUMBERS],
    *[("truncate_to", (v,), {}) for v in BAD_NUMBERS],
    *[("resize", (v,), {}) for v in BAD_NUMBERS],
    *[("sanity_check", (), {"next_offset": v}) for v in BAD_NUMBERS],
]

OPEN_CALLS = [
    *[{"base_offset": v} for v in BAD_NUMBERS if v is not None],
    *[{"index_interval_bytes": v} for v in BAD_NUMBERS],
    *[{"max_index_bytes": v} for v in BAD_NUMBERS],
    *[{"max_message_bytes": v} for v in BAD_NUMBERS],
]

ALLOWED = (SeglogError, ValueError, TypeError, IndexError, OSError)


def _segment(backend, path):
    os.makedirs(path, exist_ok=True)
    segment = backend.Segment.open(path, 0, create=True, index_interval_bytes=100)
    for n in range(20):
        segment.append(batch(backend, 3, timestamp_ms=1000 + 10 * n))
    return segment


def _normal(value):
    if isinstance(value, memoryview):
        return ("bytes", bytes(value))
    if hasattr(value, "__next__") or type(value).__name__ == "generator":
        return ("batches", [(b.base_offset, b.size_bytes) for b in value])
    if hasattr(value, "offset") and hasattr(value, "value"):
        return ("record", tuple(value))
    if hasattr(value, "first_offset"):
        return ("append", tuple(value))
    return ("value", value)


def _outcome(call):
    try:
        return _normal(call())
    except ALLOWED as exc:
        return ("error", type(exc).__name__)
    except Exception as exc:  # noqa: BLE001 - anything else is a test failure, reported
        return ("UNTYPED", f"{type(exc).__name__}: {exc}")


def _call(obj, name, args, kwargs, sock):
    args = tuple(sock if a == "SOCKET" else a for a in args)
    return lambda: getattr(obj, name)(*args, **kwargs)


@pytest.mark.parametrize("name,args,kwargs", SEGMENT_CALLS,
                         ids=[f"{c[0]}{c[1]!r}{c[2]!r}" for c in SEGMENT_CALLS])
def test_segment_bad_arguments_same_on_both_twins(tmp_path, name, args, kwargs):
    outcomes = []
    for backend_name in ("native", "pure"):
        backend = seglog.get_backend(backend_name)
        segment = _segment(backend, str(tmp_path / backend_name))
        left, right = socket.socketpair()
        right.setblocking(False)
        try:
            outcomes.append(_outcome(_call(segment, name, args, kwargs, left)))
        finally:
            left.close()
            right.close()
            segment.close()
    native, pure = outcomes
    assert native[0] != "UNTYPED" and pure[0] != "UNTYPED", outcomes
    assert native == pure


@pytest.mark.parametrize("kind,name,args,kwargs",
                         [("offset", *c) for c in OFFSET_INDEX_CALLS]
                         + [("time", *c) for c in TIME_INDEX_CALLS],
                         ids=[f"offset-{c[0]}{c[1]!r}{c[2]!r}" for c in OFFSET_INDEX_CALLS]
                         + [f"time-{c[0]}{c[1]!r}{c[2]!r}" for c in TIME_INDEX_CALLS])
def test_index_bad_arguments_same_on_both_twins(tmp_path, kind, name, args, kwargs):
    outcomes = []
    for backend_name in ("native", "pure"):
        backend = seglog.get_backend(backend_name)
        segment = _segment(backend, str(tmp_path / backend_name))
        index = segment.offset_index if kind == "offset" else segment.time_index
        try:
            outcomes.append(_outcome(_call(index, name, args, kwargs, None)))
        finally:
            segment.close()
    native, pure = outcomes
    assert native[0] != "UNTYPED" and pure[0] != "UNTYPED", outcomes
    assert native == pure


@pytest.mark.parametrize("kwargs", OPEN_CALLS, ids=[repr(k) for k in OPEN_CALLS])
def test_open_bad_arguments_same_on_both_twins(tmp_path, kwargs):
    outcomes = []
    for backend_name in ("native", "pure"):
        backend = seglog.get_backend(backend_name)
        path = str(tmp_path / backend_name)
        os.makedirs(path)
        options = dict(kwargs)
        base = options.pop("base_offset", 0)

        def call():
            segment = backend.Segment.open(path, base, create=True, **options)
            segment.close()
            return "opened"
        outcomes.append(_outcome(call))
    native, pure = outcomes
    assert native[0] != "UNTYPED" and pure[0] != "UNTYPED", outcomes
    assert native == pure
