"""ConsumerRecord on both twins (issue 27): a native type without a cyclic-GC header in
``seglog._native.codec`` and its pure twin, each keeping what users relied on while it was a
7-field NamedTuple (fields by name and position, unpacking, ``_fields``/``_asdict``/
``_replace``/``_make``, equality, hash and order of the tuple of its fields, its repr,
pickling), and ``seglog.types.ConsumerRecord`` being the class every consumer returns,
whichever backend its Store uses."""

from __future__ import annotations

import copy
import gc
import pickle
from typing import NamedTuple

import pytest

import seglog
from seglog.types import ConsumerRecord


class _Reference(NamedTuple):
    """The NamedTuple ConsumerRecord was until issue 27: what the new type must match."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple


FIELDS = ("t", 3, 2**40, -1, b"k", None, (("h", b"v"), ("n", None)))


def test_fields_by_name_position_and_unpacking(backend):
    record = backend.ConsumerRecord(*FIELDS)
    reference = _Reference(*FIELDS)
    assert (record.topic, record.partition, record.offset, record.timestamp_ms, record.key,
            record.value, record.headers) == FIELDS
    assert tuple(record) == FIELDS and list(record) == list(reference)
    topic, partition, offset, timestamp_ms, key, value, headers = record
    assert (topic, partition, offset, timestamp_ms, key, value, headers) == FIELDS
    assert len(record) == 7
    for index in (0, 2, 6, -1, -7, slice(1, 3), slice(None, None, -1)):
        assert record[index] == reference[index]
    with pytest.raises(IndexError):
        record[7]
    assert b"k" in record and "x" not in record
    assert record._fields == reference._fields == backend.ConsumerRecord._fields
    assert backend.ConsumerRecord.__match_args__ == reference._fields
    match record:
        case backend.ConsumerRecord(topic="t", partition=p, offset=o):
            assert (p, o) == (3, 2**40)
        case _:
            pytest.fail("the record did not match its class pattern")


def test_keyword_construction_asdict_replace_make(backend):
    cls = backend.ConsumerRecord
    record = cls(**_Reference(*FIELDS)._asdict())
    assert record._asdict() == _Reference(*FIELDS)._asdict()
    moved = record._replace(offset=7, value=b"x")
    assert type(moved) is cls and moved == _Reference(*FIELDS)._replace(offset=7, value=b"x")
    assert record.offset == 2**40  # _replace makes a new record
    with pytest.raises(ValueError, match="unexpected field names"):
        record._replace(nope=1)
    assert cls._make(iter(FIELDS)) == record
    with pytest.raises(TypeError):
        cls._make(FIELDS[:6])
    with pytest.raises(TypeError):
        cls(*FIELDS[:6])


def test_read_only(backend):
    record = backend.ConsumerRecord(*FIELDS)
    for name in record._fields:
        with pytest.raises(AttributeError):
            setattr(record, name, None)
        with pytest.raises(AttributeError):
            delattr(record, name)
    assert tuple(record) == FIELDS


def test_ints_are_checked_as_the_c_fields(backend):
    cls = backend.ConsumerRecord
    for bad in ({"partition": 2**31}, {"offset": 2**63}, {"timestamp_ms": -(2**63) - 1}):
        with pytest.raises(OverflowError):
            cls(**{**_Reference(*FIELDS)._asdict(), **bad})
    with pytest.raises(TypeError):
        cls("t", 1.5, 0, 0, None, None, ())
    assert type(cls("t", True, 0, 0, None, None, ()).partition) is int


def test_equality_hash_order_repr_as_the_tuple(native, pure):
    records = [native.ConsumerRecord(*FIELDS), pure.ConsumerRecord(*FIELDS)]
    reference = _Reference(*FIELDS)
    for record in records:
        assert record == FIELDS and FIELDS == record and record == reference
        assert not record != FIELDS and not FIELDS != record
        assert hash(record) == hash(FIELDS)
        assert repr(record) == repr(reference).replace("_Reference", "ConsumerRecord")
        assert record != FIELDS[:6] and record != list(FIELDS) and record != object()
        assert {record: 1}[FIELDS] == 1
        later = record._replace(offset=2**40 + 1)
        assert record < later and later > record and record <= FIELDS and record >= FIELDS
        assert FIELDS < later and later > FIELDS
        assert sorted([later, record]) == [FIELDS, later]
        with pytest.raises(TypeError):
            record < 1  # noqa: B015 - the comparison is the test
    assert records[0] == records[1] and records[1] == records[0]
    assert hash(records[0]) == hash(records[1])


def test_pickle_and_copy(backend):
    record = backend.ConsumerRecord(*FIELDS)
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        again = pickle.loads(pickle.dumps(record, protocol))
        assert type(again) is type(record) and again == record
    assert copy.copy(record) == record and copy.deepcopy(record) == record


def test_native_record_is_not_tracked_by_the_garbage_collector(native, pure):
    """Why the type exists: a poll's thousands of records are no work for the cyclic GC."""
    assert not gc.is_tracked(native.ConsumerRecord(*FIELDS))
    assert not gc.is_tracked(native.ConsumerRecord("t", 0, 0, 0, None, None, ()))
    # not a tuple subclass any more (docs/api.md says so): the twins agree on it
    assert not isinstance(native.ConsumerRecord(*FIELDS), tuple)
    assert not isinstance(pure.ConsumerRecord(*FIELDS), tuple)


def test_types_names_the_default_backends_class():
    assert ConsumerRecord is seglog.get_backend().ConsumerRecord
    assert seglog.ConsumerRecord is ConsumerRecord


@pytest.mark.parametrize("backend_name", ["native", "pure"])
def test_every_consumer_returns_seglog_types_consumer_record(tmp_path, backend_name):
    """Either backend's consumer hands out ``seglog.types.ConsumerRecord`` objects with the
    fields of what was sent (poll builds them straight from each batch)."""
    store = seglog.Store(str(tmp_path / "store"), backend=backend_name)
    try:
        store.create_topic("t", partitions=2)
        with store.producer() as producer:
            for i in range(20):
                producer.send("t", b"v%d" % i, key=b"k%d" % i, partition=i % 2,
                              headers=[("h", b"%d" % i)] if i % 3 == 0 else None,
                              timestamp_ms=1_000 + i)
        consumer = store.consumer(group_id="g", topics=["t"], auto_offset_reset="earliest")
        records = []
        for _ in range(20):
            records += consumer.poll(timeout_ms=100)
            if len(records) == 20:
                break
        consumer.close()
    finally:
        store.close()
    assert len(records) == 20
    assert all(type(r) is ConsumerRecord for r in records)
    by_value = {r.value: r for r in records}
    for i in range(20):
        r = by_value[b"v%d" % i]
        assert (r.topic, r.partition, r.key, r.timestamp_ms) == ("t", i % 2, b"k%d" % i, 1_000 + i)
        assert r.headers == ((("h", b"%d" % i),) if i % 3 == 0 else ())
    for partition in (0, 1):
        assert [r.offset for r in records if r.partition == partition] == list(range(10))
