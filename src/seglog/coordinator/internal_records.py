"""Whether a record a client writes to an internal topic is one its coordinator can load.

Kafka lets its admin client (client id ``__admin_client``) produce to ``__consumer_offsets``
and ``__transaction_state`` and appends whatever it sends: the group coordinator's loader
(``CoordinatorLoaderImpl``) then fails on a key or value that does not deserialize, and that
coordinator partition stays offline (``CoordinatorRuntime``: FAILED, NOT_COORDINATOR) until
the bad record is compacted away or the files are fixed by hand. seglog refuses such a
record at the Produce instead (INVALID_RECORD, see ``docs/server.md``): what
:func:`internal_record_errors` accepts is exactly what the loaders
(:mod:`seglog.coordinator.offsets`, :mod:`seglog.coordinator.transaction`, the classic
group's membership records) read back, so one request can no longer take a coordinator
partition down.

The rules, per record: a non-null key; for ``__consumer_offsets`` a key that
:func:`~seglog.coordinator.offsets_schema.decode_key` parses (a key of a version it does not
know is accepted: the loader skips it with a warning, as Kafka's skips an unknown record
type), an offset-commit value (versions 0-4) under an offset-commit key, a membership value
(versions 0-4) under a group-metadata key, null values (tombstones) under both; for
``__transaction_state`` a key of an unknown version is accepted likewise, a version-0 key
must parse and its value (versions 0-1) too; for ``__share_group_state`` a ShareSnapshot or
ShareUpdate key (other types are accepted) and its value (version 0; a tombstone only under a
snapshot key). A key whose group or transactional id hashes to
another partition than the one written is refused as well: its coordinator would load it
into the wrong partition's state.

A leaf of the coordinator package: it knows the schemas and nothing of storage.
"""

from __future__ import annotations

from typing import Any, Iterable

from . import classic_group_schema, offsets_schema, share_state_records, txn_schema
from ..errors import SeglogError

__all__ = ["INTERNAL_RECORD_TOPICS", "internal_record_errors"]

#: The internal topics whose records are checked.
INTERNAL_RECORD_TOPICS = frozenset({offsets_schema.OFFSETS_TOPIC,
                                    txn_schema.TRANSACTION_STATE_TOPIC,
                                    share_state_records.SHARE_STATE_TOPIC})


def internal_record_errors(topic: str, partition: int, partition_count: int,
                           records: Iterable[Any]) -> list[tuple[int, str]]:
    """``[(record index, why), ...]`` of the records (objects with ``key`` and ``value``,
    bytes-like or None) that the coordinator of internal topic ``topic`` could not load
    from partition ``partition`` of ``partition_count``; empty when every one loads (or
    ``topic`` is not one of :data:`INTERNAL_RECORD_TOPICS`)."""
    if topic == offsets_schema.OFFSETS_TOPIC:
        check = _offsets_record_error
    elif topic == txn_schema.TRANSACTION_STATE_TOPIC:
        check = _txn_record_error
    elif topic == share_state_records.SHARE_STATE_TOPIC:
        check = _share_state_record_error
    else:
        return []
    found = []
    for index, record in enumerate(records):
        try:
            why = check(record.key, record.value, partition, partition_count)
        except SeglogError as exc:  # the schemas' CorruptRecordError: what it says is why
            why = str(exc)
        if why is not None:
            found.append((index, why))
    return found


def _offsets_record_error(key: Any, value: Any, partition: int, count: int) -> str | None:
    if key is None:
        return "Group metadata/offset entry key should not be null"
    decoded = offsets_schema.decode_key(key)
    if isinstance(decoded, offsets_schema.UnknownKey):
        return None  # the loader skips it with a warning, as Kafka's does
    home = offsets_schema.offsets_partition_for_group(decoded.group, count)
    if home != partition:
        return (f"the record of group {decoded.group!r} belongs to partition {home} of "
                f"{offsets_schema.OFFSETS_TOPIC}, not {partition}")
    if isinstance(decoded, offsets_schema.OffsetCommitKey):
        offsets_schema.decode_offset_commit_value(value)
    else:
        classic_group_schema.decode_group_metadata_value(value)
    return None


def _txn_record_error(key: Any, value: Any, partition: int, count: int) -> str | None:
    if key is None:
        return "Transaction state log's key should not be null"
    if txn_schema.key_version(key) != txn_schema.KEY_VERSION:
        return None  # the loader skips it with a warning, as Kafka's does
    transactional_id = txn_schema.decode_key(key)
    home = txn_schema.partition_for_transactional_id(transactional_id, count)
    if home != partition:
        return (f"the record of transactional id {transactional_id!r} belongs to partition "
                f"{home} of {txn_schema.TRANSACTION_STATE_TOPIC}, not {partition}")
    txn_schema.decode_value(value)
    return None


def _share_state_record_error(key: Any, value: Any, partition: int, count: int) -> str | None:
    if key is None:
        return "Share coordinator record key should not be null"
    raw = bytes(key)
    if len(raw) >= 2 and int.from_bytes(raw[:2], "big", signed=True) not in \
            share_state_records.KEY_TYPES:
        return None  # the loader skips it with a warning, as Kafka's does
    decoded = share_state_records.decode_key(raw)
    home = share_state_records.share_state_partition(decoded.group_id, decoded.topic_id,
                                                     decoded.partition, count)
    if home != partition:
        return (f"the record of share-partition {decoded.group_id}:{decoded.topic_id}:"
                f"{decoded.partition} belongs to partition {home} of "
                f"{share_state_records.SHARE_STATE_TOPIC}, not {partition}")
    if value is None:
        if decoded.record_type == share_state_records.SHARE_UPDATE:
            return "a ShareUpdate record has no tombstone"
        return None
    share_state_records.decode_value(decoded.record_type, bytes(value))
    return None
