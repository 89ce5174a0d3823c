"""What a worker runs: one ``run_<kind>(payload)`` per kind of case (see :mod:`fuzz._worker`).

* ``codec``: a chunk of generated parser inputs (:mod:`fuzz.inputs`), each fed to
  ``iter_batches``, ``Batch.records``, ``columns``, ``record_at``, ``is_valid`` and
  ``decode_columns`` on both backends; the invariants are checked here (shipping 10^6
  observations through a pipe would cost more than the parsing) and only findings go back.
* ``log`` / ``store``: open one mutated directory with one backend and report what it reads
  (records, columns, raw reads, offsets, the recovery report, then one append, close and
  reopen); the parent checks that against the model (:mod:`fuzz.checks`).
* ``append``: hand client batches to ``Log.append_raw`` and read back what was accepted.
* ``build_log``: write the seed log in this process (``shutdown="kill"`` ends it by SIGKILL).

Every call into seglog is wrapped by :func:`attempt`, which turns an exception into
``("err", class name, typed?, message)``; typed means a ``SeglogError``.
"""

from __future__ import annotations

import os
import shutil

import seglog
from seglog.storage.config import LogConfig

from . import checks, corpus, inputs
from .observe import attempt, columns_list, error_tuple, record_tuple

_BACKENDS = {}


def backend(name: str):
    be = _BACKENDS.get(name)
    if be is None:
        be = _BACKENDS[name] = seglog.get_backend(name)
    return be


# --- codec -----------------------------------------------------------------------------------

def run_codec(payload: dict) -> dict:
    """``payload``: seed, start, count, ops ("full" or "quick"). Returns
    ``{"inputs": n, "findings": {signature: example}, "counts": {signature: n}}``."""
    native, pure = backend("native"), backend("pure")
    report = checks.FindingLog()
    for index in range(payload["start"], payload["start"] + payload["count"]):
        case = inputs.codec_input(payload["seed"], index)
        checks.check_codec_input(case, native, pure, report, full=payload.get("ops") != "quick")
    return {"inputs": payload["count"], **report.as_dict()}


def run_codec_one(payload: dict) -> dict:
    """Observe one given buffer on one backend (for reproducers and minimisation)."""
    return checks.observe_codec(backend(payload["backend"]), payload["data"], full=True)


# --- files -----------------------------------------------------------------------------------

def run_build_log(payload: dict) -> dict:
    return corpus.build_log(payload["path"], shutdown=payload["shutdown"],
                            seed=payload.get("seed", 0))


def _log_config() -> LogConfig:
    return LogConfig(**corpus.LOG_CONFIG)


def observe_log(log, be, sample_offsets) -> dict:
    """What a log reads: offsets, records, columns, raw reads of ``sample_offsets``."""
    obs = {"start": log.start_offset, "end": log.end_offset, "hw": log.high_watermark}
    obs["records"] = attempt(lambda: [record_tuple(r) for r in log.records(log.start_offset)])
    columns, offset, error = [], log.start_offset, None
    for _ in range(10_000):  # bounded: each read moves forward or stops
        if offset >= log.high_watermark:
            break
        got = attempt(log.read_columns, offset, 1000)
        if got[0] != "ok":
            error = got
            break
        chunk = columns_list(got[1])
        if not chunk:
            break
        columns.extend(chunk)
        offset = chunk[-1][0] + 1
    obs["columns"] = error if error else ("ok", columns)
    reads = {}
    for offset in sample_offsets:
        if not log.start_offset <= offset < log.high_watermark:
            continue

        def raw_read(offset=offset):
            result = log.read(offset, 4096)
            buffer = bytes(result.buffer)
            first = next(iter(be.iter_batches(buffer)), None)
            return (len(buffer), None if first is None else (first.base_offset, first.last_offset),
                    result.next_offset)

        reads[offset] = attempt(raw_read)
    obs["reads"] = reads
    obs["timestamps"] = {ts: attempt(log.offset_for_timestamp, ts)
                         for ts in (corpus.T0_MS, corpus.T0_MS + 255, corpus.T0_MS + 10**6)}
    return obs


def _report_tuple(report) -> dict:
    return {"truncations": [(t.base_offset, t.position, t.truncated_bytes, t.reason)
                            for t in report.truncations],
            "deleted": list(report.deleted_segments),
            "rebuilt": list(report.rebuilt_indexes),
            "missing": [tuple(r) for r in getattr(report, "missing_offsets", ())],
            "clean": report.clean_shutdown}


def run_log(payload: dict) -> dict:
    """Open the mutated log at ``dir`` with ``backend``; read everything; as a writer also
    append one record, close, reopen and read again. Returns the observations; the first
    exception ends the case and is reported with the step it happened in."""
    be = backend(payload["backend"])
    read_only = payload["read_only"]
    obs: dict = {"backend": payload["backend"], "steps": []}
    step = "open"
    log = None
    try:
        log = seglog.Log.open(payload["dir"], _log_config(), backend=payload["backend"],
                              read_only=read_only, now_ms=corpus.NOW_MS)
        obs["report"] = _report_tuple(log.recovery_report)
        step = "read"
        obs["first"] = observe_log(log, be, payload["sample_offsets"])
        if not read_only:
            step = "append"
            obs["appended"] = log.append(b"after-fuzz", key=b"fz",
                                         timestamp_ms=corpus.NOW_MS, now_ms=corpus.NOW_MS)
            step = "close"
            log.close()
            step = "reopen"
            log = seglog.Log.open(payload["dir"], _log_config(), backend=payload["backend"],
                                  now_ms=corpus.NOW_MS)
            obs["report2"] = _report_tuple(log.recovery_report)
            step = "reread"
            obs["second"] = observe_log(log, be, ())
        step = "final-close"
        log.close()
    except Exception as exc:  # noqa: BLE001
        obs["error"] = (step, *error_tuple(exc)[1:])
        if log is not None:
            try:
                log.close()
            except Exception:  # noqa: BLE001 - the first error is the one reported
                pass
    return obs


def _poll_all(store) -> list:
    """Every record of the topic as a consumer without a group polls it (bounded)."""
    consumer = store.consumer(None, auto_offset_reset="earliest")
    try:
        consumer.assign([(corpus.STORE_TOPIC, 0), (corpus.STORE_TOPIC, 1)])
        out = []
        for _ in range(1000):
            batch = consumer.poll(max_records=500, timeout_ms=0)
            if not batch:
                break
            out.extend((r.partition, r.offset, r.timestamp_ms, r.key, r.value) for r in batch)
        return sorted(out)
    finally:
        consumer.close()


def run_store(payload: dict) -> dict:
    """Open the mutated store at ``dir``: read both partitions of the topic, the group's
    committed offsets and the transaction; close; reopen and read again."""
    obs: dict = {"backend": payload["backend"]}
    step = "open"
    store = None
    try:
        for round_ in ("first", "second"):
            step = f"{round_}:open"
            store = seglog.Store(payload["dir"], backend=payload["backend"],
                                 read_only=payload["read_only"], offsets_topic_partitions=1,
                                 transaction_state_partitions=1)
            step = f"{round_}:read"
            out = {"topics": sorted(store.topics())}
            for p in (0, 1):
                log = store.log((corpus.STORE_TOPIC, p))
                out[p] = {"records": attempt(lambda log=log: [record_tuple(r) for r in log.records(log.start_offset)]),
                          "report": _report_tuple(log.recovery_report),
                          "start": log.start_offset, "end": log.end_offset}
            out["poll"] = attempt(_poll_all, store)
            group = store.group(corpus.STORE_GROUP)
            out["committed"] = {p: attempt(group.committed, (corpus.STORE_TOPIC, p)) for p in (0, 1)}
            for internal in ("__consumer_offsets", "__transaction_state"):
                if internal in store.topics():
                    out[internal] = {**_report_tuple(store.log((internal, 0)).recovery_report),
                                     "end": store.log((internal, 0)).end_offset}
            if not payload["read_only"]:
                desc = attempt(store.describe_transaction, corpus.STORE_TXN_ID)
                out["txn"] = desc if desc[0] != "ok" or desc[1] is None else \
                    ("ok", (desc[1].producer_id, desc[1].producer_epoch, str(desc[1].state)))
            obs[round_] = out
            step = f"{round_}:close"
            store.close()
            store = None
            if payload["read_only"]:
                break
    except Exception as exc:  # noqa: BLE001
        obs["error"] = (step, *error_tuple(exc)[1:])
        if store is not None:
            try:
                store.close()
            except Exception:  # noqa: BLE001
                pass
    return obs


# --- append_raw --------------------------------------------------------------------------------

def _client_records(data) -> tuple:
    """What a client's buffer says it holds, decoded by the pure twin: per record
    ``(timestamp_ms, key, value, headers)`` in order (offsets are the log's to assign)."""
    pure = backend("pure")
    out = []
    for batch in pure.iter_batches(data):
        for rec in batch.records():
            out.append(record_tuple(rec)[1:])
    return tuple(out)


def run_append(payload: dict) -> list:
    """Append each buffer of ``payload["buffers"]`` with ``Log.append_raw`` to one fresh log
    (``dir``) and read back what was accepted, with what the client's bytes hold. One
    result per buffer: ``("ok", (first, last), read_back, client_records)`` or an error."""
    directory = payload["dir"]
    shutil.rmtree(directory, ignore_errors=True)
    log = seglog.Log.open(directory, LogConfig(**payload.get("config", {})),
                          backend=payload["backend"], now_ms=corpus.NOW_MS)
    results = []
    try:
        for data in payload["buffers"]:
            got = attempt(log.append_raw, data, now_ms=corpus.NOW_MS)
            if got[0] == "ok":
                first, last = got[1]
                back = attempt(lambda: [record_tuple(r) for r in log.records(first, last + 1)])
                results.append(("ok", (first, last), back, attempt(_client_records, data)))
            else:
                results.append(got)
    finally:
        log.close()
    return results


def _peak_rss_kib(reset: bool = False) -> int:
    """VmHWM of this process in KiB; ``reset`` restarts the peak (Linux clear_refs 5)."""
    if reset:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def run_bomb(payload: dict) -> dict:
    """Decode one bomb batch on one backend (records, columns, decode_columns, record_at)
    and append it to a fresh log; report the outcomes and the peak resident memory (KiB)."""
    be = backend(payload["backend"])
    data = payload["data"]
    out = {"rss_before_kib": _peak_rss_kib(reset=True)}
    batch = next(iter(be.iter_batches(data)))
    out["records"] = attempt(lambda: len(batch.records()))
    out["columns"] = attempt(lambda: len(batch.columns()))
    out["decode_columns"] = attempt(lambda: len(be.decode_columns(data)))
    out["record_at"] = attempt(lambda: batch.record_at(0) is not None)

    def append():
        directory = payload["dir"]
        shutil.rmtree(directory, ignore_errors=True)
        log = seglog.Log.open(directory, LogConfig(), backend=payload["backend"],
                              now_ms=corpus.NOW_MS)
        try:
            return log.append_raw(data, now_ms=corpus.NOW_MS)
        finally:
            log.close()

    out["append_raw"] = attempt(append)
    out["peak_rss_kib"] = _peak_rss_kib()
    return out


# --- a follower while the writer truncates -------------------------------------------------------

def run_truncate_under_reader(payload: dict) -> dict:
    """A read-only log (a follower) is reading when the segment file under it is truncated to
    ``length`` bytes, as a writer process's recovery or truncate_to would: iterate
    ``records()`` across the cut, ``read_columns`` after it and touch a ``read()`` buffer
    taken before it. Without a fix for mapped files this is where SIGBUS kills the process."""
    log = seglog.Log.open(payload["dir"], _log_config(), backend=payload["backend"],
                          read_only=True, now_ms=corpus.NOW_MS)
    out = {}
    try:
        records = log.records(log.start_offset)
        first = attempt(lambda: [record_tuple(next(records)) for _ in range(payload["before"])])
        held = attempt(lambda: log.read(payload["held_offset"], 1 << 20).buffer)
        os.truncate(payload["path"], payload["length"])
        out["first"] = first
        out["rest"] = attempt(lambda: [record_tuple(r) for r in records])
        out["columns"] = attempt(lambda: columns_list(log.read_columns(log.start_offset, 10_000)))
        out["held"] = attempt(lambda: len(bytes(held[1]))) if held[0] == "ok" else held
        out["refresh"] = attempt(log.refresh)
        out["after_refresh"] = attempt(lambda: [record_tuple(r) for r in log.records(log.start_offset)])
    finally:
        attempt(log.close)
    return out
