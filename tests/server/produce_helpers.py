"""Produce request bodies written by kio (an independent implementation of Kafka's protocol),
for the tests of the broker's Produce readers."""

from __future__ import annotations

import datetime
import io
import random

from kio.serial import entity_writer

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
