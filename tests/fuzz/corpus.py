"""The seed corpus, made by code (nothing binary is committed): batches, a log, a store.

Everything here is deterministic (explicit timestamps and clocks), so a failing case is
reproduced by its seed alone. The *model* returned with each artefact is what was written:
the records by offset, the durable point (what a flush or a clean close made safe) and, for
the store, the committed consumer offsets and transactions. The checks in :mod:`checks`
compare what a mutated artefact reads back against it.

Seeds are written with the pure backend (both twins write the same bytes; a test elsewhere
checks that), so building the corpus can never crash the test process.
"""

from __future__ import annotations

import os
import random
import shutil
import struct

import seglog
from seglog import filenames
from seglog.storage.config import LogConfig

T0_MS = 1_700_000_000_000
#: The clock every open, append and close of the fuzz harness uses (producer ids never expire).
NOW_MS = T0_MS + 3_600_000
#: Small segments and indexes: many files per log, many index entries, cheap copies.
LOG_CONFIG = {"segment_bytes": 1400, "index_interval_bytes": 96, "segment_index_bytes": 4096}
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

# --- batches ------------------------------------------------------------------------------


def _record_fields(rng: random.Random, i: int, n: int):
    values, keys, headers = [], [], []
    for j in range(n):
        roll = rng.random()
        values.append(None if roll < 0.08 else f"v{i}.{j}:".encode() + rng.randbytes(rng.randrange(0, 40)))
        keys.append(None if rng.random() < 0.3 else f"k{rng.randrange(6)}".encode())
        headers.append(() if rng.random() < 0.6 else
                       (("h", b"x" * rng.randrange(4)), ("n", None)))
    return values, keys, headers


def codec_seeds() -> list[tuple[str, bytes]]:
    """Named buffers of valid batches for the codec fuzzer: every codec, headers, nulls, a
    control batch, an idempotent batch, LogAppendTime, a delete horizon, several batches back
    to back, a large record."""
    be = seglog.get_backend("pure")
    rng = random.Random(1234)
    seeds = []
    for codec in CODECS:
        for n in (1, 3):
            values, keys, headers = _record_fields(rng, n, n)
            raw = be.encode_batch(values, keys, [T0_MS + 7 * j for j in range(n)], headers,
                                  base_offset=rng.choice((0, 5, 1000)), compression=codec)
            seeds.append((f"{codec}-{n}", raw))
    seeds.append(("control", be.encode_control_batch(0, producer_id=7, producer_epoch=1,
                                                     base_offset=42, timestamp_ms=T0_MS)))
    seeds.append(("idempotent", be.encode_batch([b"a", b"b"], None, T0_MS, base_offset=3,
                                                producer_id=11, producer_epoch=2,
                                                base_sequence=2**31 - 2)))
    seeds.append(("log-append-time", be.encode_batch([b"x"], [b"k"], T0_MS, timestamp_type=1)))
    seeds.append(("delete-horizon", be.encode_batch([b"y", None], [b"k", b"k2"], T0_MS,
                                                    delete_horizon_ms=T0_MS - 5,
                                                    offset_deltas=[0, 4], last_offset_delta=6)))
    seeds.append(("large", be.encode_batch([bytes(range(256)) * 8], [b"big"], T0_MS)))
    multi = b"".join(raw for name, raw in seeds if name in ("none-3", "lz4-1", "control"))
    seeds.append(("multi", multi))
    return seeds


def batch_fields(data: bytes, *, limit: int = 64) -> list[tuple[int, int]]:
    """``(position, size_bytes)`` of every header field of the batches in ``data`` (walked by
    their lengths, tolerating junk), plus the first record's length byte."""
    fields, position = [], 0
    while position + 61 <= len(data) and len(fields) < limit * 14:
        for rel, size in ((0, 8), (8, 4), (12, 4), (16, 1), (17, 4), (21, 2), (23, 4), (27, 8),
                          (35, 8), (43, 8), (51, 2), (53, 4), (57, 4), (61, 1)):
            if position + rel + size <= len(data):
                fields.append((position + rel, size))
        (length,) = struct.unpack_from(">i", data, position + 8)
        if length < 49:
            break
        position += 12 + length
    return fields


def _entries(data: bytes, stride: int, layout, start: int = 0) -> list[tuple[int, int]]:
    out = []
    for base in range(start, len(data) - stride + 1, stride):
        out.extend((base + rel, size) for rel, size in layout)
        if len(out) > 400:
            break
    return out


def file_fields(kind: str, data: bytes) -> list[tuple[int, int]]:
    """Integer fields of one of seglog's binary files (``kind`` is its suffix)."""
    if kind == ".log":
        return batch_fields(data)
    if kind == ".index":
        return _entries(data, 8, ((0, 4), (4, 4)))
    if kind == ".timeindex":
        return _entries(data, 12, ((0, 8), (8, 4)))
    if kind == ".txnindex":
        return _entries(data, 34, ((0, 2), (2, 8), (10, 8), (18, 8), (26, 8)))
    if kind == ".snapshot":
        return [(0, 2), (2, 4), (6, 4)] + _entries(
            data, 46, ((0, 8), (8, 2), (10, 4), (14, 8), (22, 4), (26, 8), (34, 4), (38, 8)),
            start=10)
    return []


# --- a log --------------------------------------------------------------------------------


def _record_tuple(offset, ts, key, value, headers):
    return (offset, ts, key, value, tuple((k, v) for k, v in headers))


def write_log(log, rng: random.Random, model: dict, *, batches: int, prefix: str) -> None:
    """Append ``batches`` batches of every kind to ``log`` and record them in ``model``
    (``offset -> (offset, timestamp_ms, key, value, headers)``)."""
    seq = model.setdefault("_seq", {})
    for i in range(batches):
        n = rng.randint(1, 4)
        values, keys, headers = _record_fields(rng, i, n)
        values = [v if v is None else prefix.encode() + v for v in values]
        base = log.end_offset
        timestamps = [T0_MS + 10 * (base + j) for j in range(n)]
        kind = rng.random()
        kwargs = {}
        if kind < 0.2:  # an idempotent producer
            kwargs = dict(producer_id=7, producer_epoch=0, base_sequence=seq.get(7, 0))
            seq[7] = seq.get(7, 0) + n
        elif kind < 0.3:  # a transaction: open it, the marker comes below
            kwargs = dict(producer_id=9, producer_epoch=0, base_sequence=seq.get(9, 0),
                          is_transactional=True)
            seq[9] = seq.get(9, 0) + n
        first, last = log.append_batch(values, keys=keys, timestamps_ms=timestamps,
                                       headers=headers, compression=rng.choice(CODECS),
                                       now_ms=NOW_MS, **kwargs)
        assert last - first + 1 == n, (first, last, n)
        for j in range(n):
            model["records"][first + j] = _record_tuple(first + j, timestamps[j], keys[j],
                                                        values[j], headers[j])
        if kwargs.get("is_transactional"):
            log.append_txn_marker(producer_id=9, producer_epoch=0, coordinator_epoch=0,
                                  commit=rng.random() < 0.5, now_ms=NOW_MS)


def build_log(path: str, *, shutdown: str, seed: int = 0) -> dict:
    """Write a log of several segments at ``path`` and stop it as ``shutdown`` says:
    ``"clean"`` (close), ``"copy"`` (``path`` is a copy of the directory taken before close:
    an unclean image), or ``"kill"`` (the caller's process is SIGKILLed after the writes:
    only use in a subprocess). Returns the model."""
    rng = random.Random(seed)
    model = {"records": {}, "shutdown": shutdown}
    work = path + ".work" if shutdown == "copy" else path
    log = seglog.Log.open(work, LogConfig(**LOG_CONFIG), backend="pure", now_ms=NOW_MS)
    write_log(log, rng, model, batches=30, prefix="a")
    log.flush(now_ms=NOW_MS)
    model["durable_end"] = log.recovery_point
    write_log(log, rng, model, batches=10, prefix="b")
    model["end"] = log.end_offset
    model["batches"] = _batch_map(log)
    model.pop("_seq", None)
    if shutdown == "clean":
        log.close()
        model["durable_end"] = model["end"]
    elif shutdown == "copy":
        shutil.copytree(work, path)
        log.close()
        shutil.rmtree(work)
    elif shutdown == "kill":
        import signal
        import pickle
        with open(path + ".model", "wb") as f:
            pickle.dump(model, f)
        os.kill(os.getpid(), signal.SIGKILL)
    else:
        raise ValueError(shutdown)
    return model


def _batch_map(log) -> list[tuple[int, int, int, int]]:
    """``(segment base offset, position, base offset, last offset)`` of every batch."""
    be = seglog.get_backend("pure")
    out = []
    for segment in log.segments:
        with open(segment.log_path, "rb") as f:
            data = f.read()
        for batch in be.iter_batches(data):
            out.append((segment.base_offset, batch.position, batch.base_offset, batch.last_offset))
    return out


# --- a store ------------------------------------------------------------------------------

STORE_TOPIC = "t"
STORE_GROUP = "g"
STORE_TXN_ID = "tx"


def build_store(path: str, *, shutdown: str, seed: int = 0) -> dict:
    """A store with topic ``t`` (2 partitions), committed offsets of group ``g`` (several
    commits), one committed and one aborted transaction of ``tx``; stopped as in
    :func:`build_log`. Returns the model: records per partition, the durable point per
    partition, the committed offsets (the last and every earlier one) and the topics."""
    work = path + ".work" if shutdown == "copy" else path
    rng = random.Random(seed)
    store = seglog.Store(work, backend="pure", offsets_topic_partitions=1,
                         transaction_state_partitions=1)
    store.create_topic(STORE_TOPIC, partitions=2,
                       config={"segment.bytes": "1400", "index.interval.bytes": "96"})
    model = {"records": {0: {}, 1: {}}, "committed": {0: [], 1: []}, "shutdown": shutdown}
    producer = store.producer(linger_ms=0)
    tx = store.producer(transactional_id=STORE_TXN_ID)

    def send(count, prefix):
        for i in range(count):
            p = rng.randrange(2)
            value = f"{prefix}{i}:".encode() + rng.randbytes(rng.randrange(30))
            key = f"key{rng.randrange(9)}".encode()
            ts = T0_MS + i
            meta = producer.send(STORE_TOPIC, value, key=key, partition=p,
                                 timestamp_ms=ts).result()
            model["records"][p][meta.offset] = (ts, key, value)
        producer.flush()

    consumer = store.consumer(STORE_GROUP, auto_offset_reset="earliest")
    consumer.assign([(STORE_TOPIC, 0), (STORE_TOPIC, 1)])

    def commit():
        offsets = {}
        for p in (0, 1):
            offsets[(STORE_TOPIC, p)] = rng.randrange(0, store.log((STORE_TOPIC, p)).end_offset + 1)
            model["committed"][p].append(offsets[(STORE_TOPIC, p)])
        consumer.commit(offsets)

    send(25, "a")
    commit()
    tx.begin_transaction()
    tx.send(STORE_TOPIC, b"txn-commit", key=b"tk", partition=0)
    tx.commit_transaction()
    commit()
    send(25, "b")
    tx.begin_transaction()
    tx.send(STORE_TOPIC, b"txn-abort", key=b"tk", partition=1)
    tx.abort_transaction()
    commit()
    store.flush()
    model["durable_end"] = {p: store.log((STORE_TOPIC, p)).recovery_point for p in (0, 1)}
    send(10, "c")
    commit()
    model["end"] = {p: store.log((STORE_TOPIC, p)).end_offset for p in (0, 1)}
    model["offsets_end"] = store.log(("__consumer_offsets", 0)).end_offset
    # The transactional records are in the partitions too: read them back as the truth.
    for p in (0, 1):
        for rec in store.log((STORE_TOPIC, p)).records():
            model["records"][p][rec.offset] = (rec.timestamp_ms, rec.key, rec.value)
    consumer.close()
    producer.close()
    tx.close()
    if shutdown == "clean":
        store.close()
        model["durable_end"] = dict(model["end"])
    elif shutdown == "copy":
        shutil.copytree(work, path)
        store.close()
        shutil.rmtree(work)
    else:
        raise ValueError(shutdown)
    return model


def store_files(path: str) -> dict[str, list[str]]:
    """Files of a store directory by kind: root checkpoints, meta.properties, the registry,
    partition.metadata, and the internal topics' ``.log`` files."""
    kinds: dict[str, list[str]] = {}
    for name in (filenames.RECOVERY_POINT_CHECKPOINT, filenames.LOG_START_OFFSET_CHECKPOINT,
                 filenames.REPLICATION_OFFSET_CHECKPOINT, filenames.CLEANER_OFFSET_CHECKPOINT,
                 filenames.META_PROPERTIES, filenames.TOPICS_FILE):
        if os.path.exists(os.path.join(path, name)):
            kinds[name] = [name]
    for entry in sorted(os.listdir(path)):
        sub = os.path.join(path, entry)
        if not os.path.isdir(sub):
            continue
        for name in sorted(os.listdir(sub)):
            rel = os.path.join(entry, name)
            if name == filenames.PARTITION_METADATA:
                kinds.setdefault(name, []).append(rel)
            elif name.endswith(".log") and entry.startswith("__consumer_offsets"):
                kinds.setdefault("__consumer_offsets", []).append(rel)
            elif name.endswith(".log") and entry.startswith("__transaction_state"):
                kinds.setdefault("__transaction_state", []).append(rel)
            elif name.endswith(".log"):
                kinds.setdefault("topic.log", []).append(rel)
    return kinds
