"""Turning what seglog returns or raises into plain, picklable, comparable values."""

from __future__ import annotations

import os
import traceback

from seglog.errors import SeglogError


def error_tuple(exc: BaseException) -> tuple:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else "?"
    return ("err", type(exc).__name__, isinstance(exc, SeglogError),
            f"{str(exc)[:300]} [{where}]")


def attempt(fn, *args, **kwargs):
    """``("ok", fn(...))`` or the error tuple; MemoryError and RecursionError included."""
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - the point is to classify it
        return error_tuple(exc)


def record_tuple(rec) -> tuple:
    headers = tuple((k, None if v is None else bytes(v)) for k, v in (rec.headers or ()))
    key = None if rec.key is None else bytes(rec.key)
    value = None if rec.value is None else bytes(rec.value)
    return (int(rec.offset), int(rec.timestamp_ms), key, value, headers)


def columns_list(columns, limit: int = 10_000) -> list:
    out = []
    n = len(columns)
    for i in range(min(n, limit)):
        key, value = columns.key(i), columns.value(i)
        out.append((int(columns.offsets[i]), int(columns.timestamps_ms[i]),
                    None if key is None else bytes(key), None if value is None else bytes(value)))
    return out
