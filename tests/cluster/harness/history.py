"""A recorded history of a cluster run: every send, poll, final read and replica listing, as
JSON lines (R§6.3), in the order they happened.

Each event is a dict with ``index`` (its position), ``process`` (who did it: a producer,
a consumer, ``final`` or ``replicas``), ``time_ns``, ``type`` and ``f``:

* ``type`` is ``invoke``, ``ok``, ``fail`` or ``info`` for operations (Jepsen's vocabulary:
  ``fail`` = definitely did not happen, ``info`` = indeterminate) and ``meta`` for facts
  about a process.
* ``f`` says which operation:

  - ``send``: ``key``, ``value`` (a unique integer across the run) and, on ``ok``,
    ``partition`` and ``offset``; on ``fail``/``info``, ``error`` (Kafka's error name) and,
    where the client knew it, ``partition``. A send inside a transaction carries ``txn``
    (the transaction's id) on its invoke and its completion.
  - ``txn``: one transaction of a transactional producer. ``invoke`` when it begins (``txn``,
    its id, unique across the run); the completion names its ``outcome``: ``ok`` with
    ``committed`` (commit_transaction returned) or ``aborted`` (the producer never asked to
    commit it, so it can only end aborted), ``info`` with ``unknown`` (a commit was asked
    and failed or timed out: it may be either); with ``values`` (every value produced in it),
    ``intent`` (``commit`` or ``abort``) and, on failure, ``error``.
  - ``poll`` (``ok`` only): ``values``: ``{partition: [[offset, value], ...]}`` and the
    consumer's ``isolation`` (``read_uncommitted`` when absent).
  - ``assign`` (``ok`` only): ``partitions``: a consumer's new assignment (it resets that
    consumer's monotonicity tracking, R§6.4 #6).
  - ``final-read`` (``ok`` only): ``partition``, ``records``: ``[[offset, value], ...]``
    from offset 0 to the end, read by a fresh consumer after healing, its ``isolation``
    (``read_uncommitted`` when absent: to the high watermark; ``read_committed``: to the last
    stable offset) and ``high_watermark`` (the end it read to).
  - ``replica`` (``ok`` only): ``broker``, ``partition``, ``batches``: ``[[base_offset,
    last_offset, crc], ...]`` in file order, ``epochs``: the ``leader-epoch-checkpoint``
    entries ``[[epoch, start_offset], ...]``, ``high_watermark``, ``log_end_offset``.
  - ``producer`` (``meta``): a producer's settings: ``idempotent``, ``max_in_flight``,
    ``retries``, ``acks`` (and ``transactional_id`` for a transactional one).

Values are the integers the workload wrote as ASCII record values; the checker never
needs the record bytes.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterable

#: Operation outcomes and the fact type.
INVOKE, OK, FAIL, INFO, META = "invoke", "ok", "fail", "info", "meta"
TYPES = frozenset({INVOKE, OK, FAIL, INFO, META})

#: Operations (the ``f`` of an event).
SEND, POLL, ASSIGN, FINAL_READ, REPLICA, PRODUCER, TXN = (
    "send", "poll", "assign", "final-read", "replica", "producer", "txn")
FUNCTIONS = frozenset({SEND, POLL, ASSIGN, FINAL_READ, REPLICA, PRODUCER, TXN})

#: Consumer isolation levels (Kafka's ``isolation.level``).
READ_UNCOMMITTED, READ_COMMITTED = "read_uncommitted", "read_committed"
#: A transaction's outcomes (the ``outcome`` of a ``txn`` completion).
COMMITTED, ABORTED, UNKNOWN = "committed", "aborted", "unknown"


class HistoryError(ValueError):
    """A history event or file that does not follow the format above."""


class History:
    """An append-only history: events are kept in :attr:`events` and, when ``path`` is
    given, written to it as JSON lines as they happen (flushed per event, so a crashed run
    keeps what it recorded). Thread-safe: delivery callbacks record from client threads."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else None
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.file = open(self.path, "a", encoding="utf-8") if self.path is not None else None

    def record(self, process: str, type: str, f: str, **fields: Any) -> dict[str, Any]:
        """Append one event and return it (``index`` and ``time_ns`` are filled in)."""
        if type not in TYPES or f not in FUNCTIONS:
            raise HistoryError(f"unknown event type/f: {type!r}/{f!r}")
        with self.lock:
            event = {"index": len(self.events), "process": process,
                     "time_ns": time.time_ns(), "type": type, "f": f, **fields}
            self.events.append(event)
            if self.file is not None:
                self.file.write(json.dumps(event, separators=(",", ":")) + "\n")
                self.file.flush()
        return event

    def extend(self, events: Iterable[dict[str, Any]]) -> None:
        """Append events recorded elsewhere (e.g. a client subprocess's history file), in
        their order; their ``index`` is renumbered to this history's."""
        for event in events:
            fields = {k: v for k, v in event.items()
                      if k not in ("index", "process", "type", "f")}
            time_ns = fields.pop("time_ns", None)
            recorded = self.record(event["process"], event["type"], event["f"], **fields)
            if time_ns is not None:
                recorded["time_ns"] = time_ns

    def close(self) -> None:
        """Close the file (the events stay in memory)."""
        with self.lock:
            if self.file is not None:
                self.file.close()
                self.file = None

    def __enter__(self) -> "History":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def load(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The events of a history file, in file order; a torn last line (a run killed while
    writing) is dropped, any other bad line raises :class:`HistoryError`."""
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    events = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):  # the last line, without its newline: torn
                break
            raise HistoryError(f"{path}:{number}: not JSON") from None
        if not isinstance(event, dict) or event.get("type") not in TYPES \
                or event.get("f") not in FUNCTIONS:
            raise HistoryError(f"{path}:{number}: not a history event")
        events.append(event)
    return events


def partition_values(values: dict[Any, list]) -> dict[int, list[tuple[int, int]]]:
    """A poll's ``values`` with integer partitions (JSON object keys are strings) and
    ``(offset, value)`` tuples."""
    return {int(p): [(int(o), int(v)) for o, v in pairs] for p, pairs in values.items()}
