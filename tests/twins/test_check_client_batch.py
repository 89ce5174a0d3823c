"""``check_client_batch``, the produce validator's fast path, on both backends: it returns
the batch exactly when the full validation loop (``validate_client_batches`` with the fast path
turned off) would write a one-batch buffer as it is, with the same record count and max
timestamp; it declines (None) everything the loop rewrites or refuses, never raising; and
the twins decline the same bytes."""

from __future__ import annotations

import random
import struct

import pytest

from seglog import format as fmt
from seglog.errors import SeglogError
from seglog.storage.config import LogConfig
from seglog.storage.validator import validate_client_batches

NOW_MS = 1_765_000_000_000


class _LoopOnly:
    """The backend with its fast path declining everything: the validator's full loop."""

    def __init__(self, backend):
        self._backend = backend

    def __getattr__(self, name):
        return getattr(self._backend, name)

    @staticmethod
    def check_client_batch(*_args):
        return None


def _loop(backend, data: bytes, config: LogConfig):
    """The full loop's verdict: ("write", count, max timestamp, producer batches?) when it
    writes ``data`` as it is, "rewrite" when it writes other bytes, "refused" on an error."""
    try:
        result = validate_client_batches(memoryview(data), backend=_LoopOnly(backend),
                                         config=config, now_ms=NOW_MS)
    except SeglogError:
        return "refused"
    if bytes(result.data) != data:
        return "rewrite"
    return ("write", result.record_count, result.max_timestamp_ms, result.batches is not None)


def _fast(backend, data: bytes, config: LogConfig):
    if config.message_timestamp_type == "LogAppendTime":
        return None  # the validator asks only for CreateTime topics (every batch is rewritten)
    codec = config.compression_codec
    batch = backend.check_client_batch(
        data, max(0, NOW_MS - config.message_timestamp_before_max_ms),
        min(NOW_MS + config.message_timestamp_after_max_ms, fmt.INT64_MAX),
        config.max_message_bytes, config.compaction_enabled,
        -1 if codec is None else fmt.COMPRESSION_IDS[codec])
    if batch is None:
        return None
    assert batch.position == 0 and batch.size_bytes == len(data)
    return ("write", batch.record_count, batch.max_timestamp_ms, batch.producer_id >= 0)


def _cases(backend):
    """``(name, bytes, config)``: one-batch buffers the loop writes, rewrites or refuses."""
    plain = LogConfig()
    compact = LogConfig(cleanup_policy=frozenset({"compact"}))

    def enc(n=5, **kwargs):
        kwargs.setdefault("timestamps_ms", [NOW_MS - 1000 + i for i in range(n)])
        keys = kwargs.pop("keys", [b"k%d" % i for i in range(n)])
        return bytes(backend.encode_batch([b"value-%d" % i for i in range(n)], keys,
                                          kwargs.pop("timestamps_ms"), None, **kwargs))

    def patched(raw, position, fmt_, value, crc=True):
        out = bytearray(raw)
        struct.pack_into(fmt_, out, position, value)
        if crc:
            struct.pack_into(">I", out, fmt.CRC_POSITION,
                             backend.crc32c(bytes(out[fmt.ATTRIBUTES_POSITION:])))
        return bytes(out)

    good = enc()
    yield "plain", good, plain
    yield "one record", enc(1), plain
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        yield f"{codec}", enc(40, compression=codec), plain
        yield f"{codec} on a {codec} topic", enc(40, compression=codec), \
            LogConfig(compression_type=codec)
        yield f"{codec} on an lz4/none topic", enc(40, compression=codec), \
            LogConfig(compression_type="none" if codec == "lz4" else "lz4")
    yield "idempotent", enc(producer_id=7, producer_epoch=0, base_sequence=0), plain
    yield "transactional", enc(producer_id=7, producer_epoch=0, base_sequence=3,
                               is_transactional=True), plain
    yield "keyless, plain topic", enc(keys=None), plain
    yield "keyless, compacted topic", enc(keys=None), compact
    yield "keyed, compacted topic", good, compact
    yield "one keyless of five, compacted", enc(keys=[b"a", b"b", None, b"d", b"e"]), compact
    yield "base offset 9", patched(good, 0, ">q", 9, crc=False), plain
    yield "producer id without sequence", patched(good, fmt.PRODUCER_ID_POSITION, ">q", 5), plain
    yield "bad crc", good[:-1] + bytes([good[-1] ^ 1]), plain
    yield "LogAppendTime by the producer", enc(
        timestamp_type=fmt.TIMESTAMP_TYPE_LOG_APPEND_TIME), plain
    yield "LogAppendTime topic", good, LogConfig(message_timestamp_type="LogAppendTime")
    yield "too old", enc(timestamps_ms=[NOW_MS - 10**12] * 5), LogConfig(
        message_timestamp_before_max_ms=10**6)
    yield "too new", enc(timestamps_ms=[NOW_MS + 10**9] * 5), LogConfig(
        message_timestamp_after_max_ms=10**6)
    yield "no timestamp", enc(timestamps_ms=[-1, NOW_MS, NOW_MS, NOW_MS, NOW_MS]), plain
    yield "max timestamp wrong", patched(good, fmt.MAX_TIMESTAMP_POSITION, ">q", NOW_MS), plain
    yield "larger than max.message.bytes", good, LogConfig(max_message_bytes=len(good) - 1)
    yield "exactly max.message.bytes", good, LogConfig(max_message_bytes=len(good))
    yield "count above the records", patched(good, fmt.RECORDS_COUNT_POSITION, ">i", 6), plain
    yield "last offset delta off", patched(good, fmt.LAST_OFFSET_DELTA_POSITION, ">i", 5), plain
    yield "control", backend.encode_control_batch(fmt.CONTROL_TYPE_COMMIT, producer_id=1,
                                                  producer_epoch=0, timestamp_ms=NOW_MS), plain
    yield "truncated", good[:-3], plain
    yield "trailing bytes", good + b"\x00" * 5, plain
    yield "two batches", good + good, plain
    yield "magic 1", patched(good, fmt.MAGIC_POSITION, ">b", 1, crc=False), plain


#: Buffers the loop writes as they are that the fast path leaves to it on purpose: several
#: batches, and records without a timestamp (-1, rare: Kafka's per-record rule decides).
_LEFT_TO_THE_LOOP = frozenset({"two batches", "no timestamp"})


def test_fast_path_writes_exactly_what_the_loop_writes_as_is(backend):
    seen = set()
    for name, data, config in _cases(backend):
        loop = _loop(backend, data, config)
        fast = _fast(backend, data, config)
        if fast is not None:
            assert fast == loop, name
        elif name not in _LEFT_TO_THE_LOOP:
            assert not isinstance(loop, tuple), (name, loop)
        seen.add("fast" if fast is not None else "declined")
    assert seen == {"fast", "declined"}


@pytest.mark.parametrize("seed", range(3))
def test_damaged_batches_decline_alike_and_never_raise(backend, native, seed):
    rng = random.Random(seed)
    config = LogConfig(cleanup_policy=frozenset({"compact"}))
    raw = bytes(backend.encode_batch([b"v%d" % i for i in range(30)],
                                     [b"k%d" % i for i in range(30)],
                                     [NOW_MS - 100 + i for i in range(30)], None,
                                     compression=("none", "lz4", "gzip")[seed]))
    accepted = 0
    for _ in range(400):
        damaged = bytearray(raw)
        for _ in range(rng.randint(1, 3)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        damaged = bytes(damaged)
        fast = _fast(backend, damaged, config)
        assert fast == _fast(native, damaged, config)
        if fast is not None:
            accepted += 1
            assert fast == _loop(backend, damaged, config)
    # Damage outside the CRC (base offset, partition leader epoch) leaves some accepted.
    assert _fast(backend, raw, config) is not None and accepted < 400
