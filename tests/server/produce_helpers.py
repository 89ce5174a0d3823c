"""Produce request bodies written by kio (an independent implementation of Kafka's protocol),
for the tests of the broker's Produce readers."""

from __future__ import annotations

import datetime
import io
import random
import struct
import time

from kio.serial import entity_writer

from core_helpers import request_frame
from seglog._native import codec
from seglog.schemas import load_request_schema


def produce_body(version: int, topics, *, transactional_id=None, acks=-1,
                 timeout_ms=30_000) -> bytes:
    """A Produce request body of ``version`` for ``topics``: ``[(name, or uuid from v13,
    [(index, records or None), ...]), ...]``."""
    cls = load_request_schema(0, version)
    mod = __import__(cls.__module__, fromlist=["_"])
    topic_data = []
    for key, partitions in topics:
        parts = tuple(mod.PartitionProduceData(index=i, records=r) for i, r in partitions)
        topic_data.append(mod.TopicProduceData(topic_id=key, partition_data=parts)
                          if version >= 13 else
                          mod.TopicProduceData(name=key, partition_data=parts))
    request = cls(transactional_id=transactional_id, acks=acks,
                  timeout=datetime.timedelta(milliseconds=timeout_ms),
                  topic_data=tuple(topic_data))
    buffer = io.BytesIO()
    entity_writer(cls)(buffer, request)
    return buffer.getvalue()


def produce_v9_frame(correlation_id: int, topic: str, values: list[bytes]) -> bytes:
    """A whole Produce v9 request frame (acks=-1): one batch of ``values`` for partition 0 of
    ``topic``."""
    batch = codec.encode_batch(values, timestamps_ms=int(time.time() * 1000))
    body = produce_body(9, [(topic, [(0, batch)])], acks=-1)
    return request_frame(0, 9, correlation_id, body, flexible=True)


def produce_v9_answer(frame: bytes, topic: str) -> tuple[int, int, int]:
    """(correlation id, error code, base offset) of a Produce v9 answer (without its size)
    for one partition of ``topic``."""
    (correlation_id,) = struct.unpack_from(">i", frame, 0)
    # header tags, topics (1), name, partitions (1), index, then error code and base offset
    position = 4 + 1 + 1 + 1 + len(topic.encode()) + 1 + 4
    error_code, base_offset = struct.unpack_from(">hq", frame, position)
    return correlation_id, error_code, base_offset


def damaged_copies(body: bytes, seed: int, count: int):
    """``count`` copies of ``body``, each with 1-3 bytes overwritten (seeded: the same copies
    every run), favouring the bytes that change a varint's or a length's meaning."""
    rng = random.Random(seed)
    for _ in range(count):
        damaged = bytearray(body)
        for _ in range(rng.randint(1, 3)):
            damaged[rng.randrange(len(damaged))] = rng.choice((0x00, 0x7F, 0x80, 0xFF,
                                                               rng.randrange(256)))
        yield bytes(damaged)
