"""The producer over the backend's accumulator: both backends pick the same partitions and
write the same batch bytes; records keep their keys, values, headers and timestamps."""

from __future__ import annotations

import random
import threading

import pytest

from seglog.clients.partitioner import partition_for_key
from seglog.clients.producer import SendFuture, append_to_log
from seglog.errors import RequestTimedOutError
from seglog.store import Store
from seglog.types import RecordMetadata


def _log_bytes(log) -> bytes:
    out = []
    offset = log.start_offset
    while offset < log.end_offset:
        result = log.read(offset)
        out.append(bytes(result.buffer))
        offset = result.next_offset
    return b"".join(out)


def _records(count: int):
    rng = random.Random(13)
    out = []
    for i in range(count):
        key = None if i % 5 == 0 else b"key-%d" % rng.randrange(50)
        value = None if i % 11 == 0 else rng.randbytes(rng.randrange(0, 200))
        headers = [("h", b"%d" % i), ("n", None)] if i % 7 == 0 else None
        out.append((key, value, headers, 1_700_000_000_000 + i))
    return out


def _produce(path, backend: str, records, **config) -> dict[int, bytes]:
    with Store(path, backend=backend, offsets_topic_partitions=1) as store:
        topic = store.create_topic("t", partitions=4)
        producer = store.producer(linger_ms=60_000, **config)
        futures = [producer.send("t", v, k, timestamp_ms=ts, headers=h,
                                 partition=None if k is not None else 2)
                   for k, v, h, ts in records]
        producer.flush()
        partitions = [f.partition for f in futures]
        for (key, _v, _h, _ts), p in zip(records, partitions):
            if key is not None:
                assert p == partition_for_key(key, 4)
        producer.close()
        return {p: _log_bytes(topic.log(p)) for p in range(4)}


@pytest.mark.parametrize("config", [dict(batch_size_bytes=16384),
                                    dict(batch_size_bytes=700, compression="lz4"),
                                    dict(batch_size_bytes=1 << 20, idempotent=True)])
def test_both_backends_write_the_same_bytes(tmp_path, config):
    records = _records(600)
    native = _produce(tmp_path / "native", "native", records, **config)
    pure = _produce(tmp_path / "pure", "pure", records, **config)
    assert native == pure and sum(map(len, native.values())) > 0


def test_records_read_back_as_sent(tmp_path, backend):
    records = _records(300)
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as store:
        topic = store.create_topic("t", partitions=3)
        producer = store.producer(linger_ms=60_000, batch_size_bytes=2000)
        futures = [producer.send("t", v, k, timestamp_ms=ts, headers=h)
                   for k, v, h, ts in records]
        producer.flush()
        got = {}
        for p in range(3):
            for r in topic.log(p).records():
                got[(p, r.offset)] = (r.key, r.value, tuple(r.headers), r.timestamp_ms)
        for (key, value, headers, ts), future in zip(records, futures):
            meta = future.result(timeout_ms=10_000)
            assert got[(meta.partition, meta.offset)] == (key, value, tuple(headers or ()), ts)


def test_a_record_with_a_bad_value_fails_alone(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as store:
        topic = store.create_topic("t")
        producer = store.producer(linger_ms=60_000)
        producer.send("t", b"a", b"k")
        from seglog.errors import InvalidRecordError
        with pytest.raises(InvalidRecordError):
            producer.send("t", 12, b"k")
        producer.send("t", bytearray(b"b"), memoryview(b"k"))
        producer.flush()
        assert [(r.key, r.value) for r in topic.log(0).records()] == [(b"k", b"a"), (b"k", b"b")]


def _fast_path_records(path, backend: str, batch_size_bytes: int):
    """Keyed sends with nothing else (the Sender's one-call path) and keyless ones to a
    one-partition topic; returns every partition's (offset, key, value) and batch sizes."""
    rng = random.Random(5)
    with Store(path, backend=backend, offsets_topic_partitions=1) as store:
        keyed = store.create_topic("keyed", partitions=5)
        single = store.create_topic("single", partitions=1)
        producer = store.producer(linger_ms=60_000, batch_size_bytes=batch_size_bytes)
        futures = []
        for i in range(2_000):
            value = rng.randbytes(rng.randrange(0, 100))
            futures.append(producer.send("keyed", value, b"k%d" % rng.randrange(300)))
            futures.append(producer.send("single", value if i % 3 else None))
        producer.flush()
        for future in futures:
            assert future.done()
        out = {}
        for topic in (keyed, single):
            for p in range(topic.partitions):
                log = topic.log(p)
                out[(topic.name, p)] = [(r.offset, r.key, r.value) for r in log.records()]
                counts = []
                offset = log.start_offset
                while offset < log.end_offset:
                    result = log.read(offset)
                    counts += [b.record_count for b in log.backend.iter_batches(result.buffer)]
                    offset = result.next_offset
                out[(topic.name, p, "batches")] = counts
        metas = [f.result(timeout_ms=1000) for f in futures]
        for meta, future in zip(metas, futures):
            assert (meta.topic, meta.partition) == (future.topic, future.partition)
        producer.close()
        return out


@pytest.mark.parametrize("batch_size_bytes", [0, 3000, 1 << 20])
def test_the_one_call_path_gives_the_same_records_and_batches_on_both_backends(
        tmp_path, batch_size_bytes):
    native = _fast_path_records(tmp_path / "native", "native", batch_size_bytes)
    pure = _fast_path_records(tmp_path / "pure", "pure", batch_size_bytes)
    assert native == pure
    for p in range(5):
        for _offset, key, _value in native[("keyed", p)]:
            assert partition_for_key(key, 5) == p
    assert sum(native[("single", 0, "batches")]) == 2_000


def test_futures_are_send_futures_on_every_path(tmp_path, backend):
    """The one-call path and the full send both return the backend's SendFuture, which
    ``seglog.clients.producer.SendFuture`` names for isinstance."""
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as store:
        store.create_topic("t", partitions=2)
        producer = store.producer(linger_ms=60_000)
        futures = [producer.send("t", b"v", b"k"), producer.send("t", b"v"),
                   producer.send("t", b"v", b"k", headers=[("h", b"1")]),
                   producer.send("t", bytearray(b"v"), partition=1, timestamp_ms=5)]
        for future in futures:
            assert isinstance(future, SendFuture) and type(future).__name__ == "SendFuture"
            assert not future.done()
        assert not isinstance(object(), SendFuture)
        producer.flush()
        assert [f.done() for f in futures] == [True] * 4
        before = sum(f.partition == 1 for f in futures[:3])  # one batch per partition
        assert futures[3].result(timeout_ms=0) == RecordMetadata("t", 1, before, 5)


class _FailingAppends:
    """A ``log_append`` that raises a retriable error for its first ``failures`` calls (no
    write), then appends."""

    def __init__(self, failures: int):
        self.failures = failures
        self.calls = 0

    def __call__(self, log, values, **fields):
        self.calls += 1
        if self.calls <= self.failures:
            raise RequestTimedOutError("no acknowledgement")
        return append_to_log(log, values, **fields)


def test_a_batch_failed_after_its_retries_fails_every_future(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as store:
        topic = store.create_topic("t", partitions=1)
        producer = store.producer(linger_ms=60_000, retries=2, retry_backoff_ms=0)
        failing = producer.log_append = _FailingAppends(failures=3)  # 1 send + 2 retries
        futures = [producer.send("t", b"v%d" % i, b"k") for i in range(4)]
        with pytest.raises(RequestTimedOutError) as raised:
            producer.flush()
        assert failing.calls == 3 and topic.log(0).end_offset == 0
        for future in futures:
            assert future.done() and "failed" in repr(future)
            with pytest.raises(RequestTimedOutError) as from_future:
                future.result(timeout_ms=0)
            assert from_future.value is raised.value
        # The next batch goes through (the error was reported once, by that flush).
        later = producer.send("t", b"w", b"k")
        producer.flush()
        assert later.result(timeout_ms=0).offset == 0 and failing.calls == 4
        producer.close()


def test_a_batch_written_after_a_retry_completes_its_futures(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as store:
        store.create_topic("t", partitions=1)
        producer = store.producer(linger_ms=60_000, retries=2, retry_backoff_ms=0)
        failing = producer.log_append = _FailingAppends(failures=2)
        futures = [producer.send("t", b"v%d" % i) for i in range(3)]
        producer.flush()
        assert failing.calls == 3
        assert [f.result(timeout_ms=0).offset for f in futures] == [0, 1, 2]
        assert repr(futures[2]) == "SendFuture(t-0, offset=2)"
        producer.close()


def test_a_sender_thread_failure_reaches_the_next_send(tmp_path, backend):
    """An error the linger thread met is raised by the next send, on the one-call path too
    (the Sender's errors_pending flag hands it to the full send), and once by flush."""
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as store:
        store.create_topic("t", partitions=1)
        producer = store.producer(linger_ms=1, retries=0)
        done = threading.Event()

        def broken(log, values, **fields):
            done.set()
            raise RuntimeError("the log went away")

        producer.log_append = broken
        future = producer.send("t", b"v", b"k")
        assert done.wait(60)
        with pytest.raises(RuntimeError):
            future.result(timeout_ms=60_000)
        with pytest.raises(RuntimeError, match="went away"):
            producer.send("t", b"v", b"k")
        with pytest.raises(RuntimeError, match="went away"):
            producer.flush()
        producer.log_append = append_to_log
        assert producer.send("t", b"w", b"k").result(timeout_ms=60_000).offset == 0
        producer.close()
