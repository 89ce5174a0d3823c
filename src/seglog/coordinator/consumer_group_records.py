"""Kafka's records of consumer groups (KIP-848) in ``__consumer_offsets``: what the group
coordinator writes so that a group survives a restart or a coordinator move.

Kafka 4.4's formats (``group-coordinator/src/main/resources/common/message/ConsumerGroup*``;
checked against the 4.4 jar's generated classes). A key is an int16 record type followed by
the key's fields (non-flexible: int16-length strings); a value is an int16 version (0)
followed by its fields in the flexible encoding (compact strings and arrays, tagged fields):

==== ============================================= =================================================
type key (fields)                                  value (version 0)
==== ============================================= =================================================
3    ConsumerGroupMetadataKey (group)              Epoch; tagged 0: MetadataHash (not written)
5    ConsumerGroupMemberMetadataKey (group, member) InstanceId, RackId, ClientId, ClientHost,
                                                   SubscribedTopicNames, SubscribedTopicRegex,
                                                   RebalanceTimeoutMs, ServerAssignor
6    ConsumerGroupTargetAssignmentMetadataKey      AssignmentEpoch; tagged 0: AssignmentTimestamp
     (group)                                       (not written)
7    ConsumerGroupTargetAssignmentMemberKey        TopicPartitions [(TopicId, Partitions)]
     (group, member)
8    ConsumerGroupCurrentMemberAssignmentKey       MemberEpoch, PreviousMemberEpoch, State,
     (group, member)                               AssignedPartitions [(TopicId, Partitions;
                                                   tagged 0: AssignmentEpochs)],
                                                   PartitionsPendingRevocation
==== ============================================= =================================================

Record type 4 (ConsumerGroupPartitionMetadata, deprecated since Kafka 4.0) is read and
ignored; 16 (ConsumerGroupRegularExpression) is not written (no regular-expression
subscriptions yet). A null value is the record's tombstone.

:func:`group_records` gives a group's records as ``{key bytes: value bytes}``; the writer
appends what changed since the last write (and tombstones for keys gone), as Kafka appends
its deltas; :func:`load_groups` rebuilds groups from the last record of each key. A leaf:
it knows the coordinator's data classes and nothing of storage.
"""

from __future__ import annotations

import struct
import uuid
from typing import Mapping

from .consumer_group import (MEMBER_STABLE, UNRELEASED_PARTITIONS, UNREVOKED_PARTITIONS, Group,
                             Member, Partitions)
from .offsets_schema import SchemaReader, encode_string, encode_uvarint

__all__ = ["KEY_TYPES", "decode_key", "group_records", "load_groups", "ordered_delta"]

METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16

#: The record types (key versions) of consumer groups.
KEY_TYPES = frozenset({METADATA, PARTITION_METADATA, MEMBER_METADATA, TARGET_METADATA,
                       TARGET_MEMBER, CURRENT_ASSIGNMENT, REGULAR_EXPRESSION})

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_STATES = {MEMBER_STABLE: 0, UNREVOKED_PARTITIONS: 1, UNRELEASED_PARTITIONS: 2}
_STATE_NAMES = {code: name for name, code in _STATES.items()}
_NO_TAGS = encode_uvarint(0)


# --- keys ---------------------------------------------------------------------------------


def _key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    out = _INT16.pack(record_type) + encode_string(group_id, "group_id")
    if member_id is not None:
        out += encode_string(member_id, "member_id")
    return out


def decode_key(data: bytes) -> tuple[int, str, str | None]:
    """``(record type, group id, member id or None)`` of a consumer group record key (a
    type-16 key's second string is its regular expression). CorruptRecordError when it
    does not parse."""
    reader = SchemaReader(data, "consumer group record key")
    record_type = reader.unpack(_INT16)
    group_id = reader.string("group_id")
    second = None
    if record_type in (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT, REGULAR_EXPRESSION):
        second = reader.string("member_id")
    return record_type, group_id, second


# --- values -------------------------------------------------------------------------------


def _compact_string(text: str | None, field: str) -> bytes:
    if text is None:
        return encode_uvarint(0)
    return encode_string(text, field, compact=True)


def _array(items: list[bytes]) -> bytes:
    return encode_uvarint(len(items) + 1) + b"".join(items)


def _topic_partitions(partitions: Partitions, ids: Mapping[str, uuid.UUID],
                      epochs: Mapping[tuple[str, int], int] | None = None) -> bytes:
    entries = []
    for topic in sorted(partitions):
        if topic not in ids or not partitions[topic]:
            continue
        parts = sorted(partitions[topic])
        entry = ids[topic].bytes + _array([_INT32.pack(p) for p in parts])
        if epochs is not None:
            raw = _array([_INT32.pack(epochs.get((topic, p), 0)) for p in parts])
            entry += encode_uvarint(1) + encode_uvarint(0) + encode_uvarint(len(raw)) + raw
        else:
            entry += _NO_TAGS
        entries.append(entry)
    return _array(entries)


def _value(body: bytes, tags: bytes = _NO_TAGS) -> bytes:
    return _INT16.pack(0) + body + tags


def _classic_tag(member: Member) -> bytes:
    """The member record's tagged fields: tag 0, ``ClassicMemberMetadata``
    (SessionTimeoutMs, SupportedProtocols [Name, Metadata]) of a classic member."""
    if member.classic_protocols is None:
        return _NO_TAGS
    protocols = [encode_string(name, "protocol", compact=True)
                 + encode_uvarint(len(metadata) + 1) + metadata + _NO_TAGS
                 for name, metadata in member.classic_protocols]
    raw = _INT32.pack(member.classic_session_timeout_ms) + _array(protocols) + _NO_TAGS
    return encode_uvarint(1) + encode_uvarint(0) + encode_uvarint(len(raw)) + raw


def _read_classic(raw: bytes, member: Member) -> None:
    reader = SchemaReader(raw, "ClassicMemberMetadata")
    member.classic_session_timeout_ms = reader.unpack(_INT32)
    protocols = []
    for _ in range(_read_count(reader)):
        name = _read_nullable(reader, "protocol") or ""
        length = reader.uvarint() - 1
        metadata = reader.take(length) if length >= 0 else b""
        _skip_tags(reader)
        protocols.append((name, bytes(metadata)))
    member.classic_protocols = tuple(protocols)


def group_records(group: Group, ids: Mapping[str, uuid.UUID]) -> dict[bytes, bytes]:
    """``{key: value}`` of every record that describes ``group`` now (topics by their ids
    ``ids``; partitions of a topic without an id are left out)."""
    gid = group.group_id
    out = {_key(METADATA, gid): _value(_INT32.pack(group.group_epoch)),
           _key(TARGET_METADATA, gid): _value(_INT32.pack(group.assignment_epoch))}
    for member in group.members.values():
        mid = member.member_id
        out[_key(MEMBER_METADATA, gid, mid)] = _value(
            _compact_string(member.instance_id, "instance_id")
            + _compact_string(member.rack_id, "rack_id")
            + _compact_string(member.client_id, "client_id")
            + _compact_string(member.client_host, "client_host")
            + _array([encode_string(t, "topic", compact=True)
                      for t in member.subscribed_topic_names])
            + _compact_string(member.subscribed_topic_regex, "subscribed_topic_regex")
            + _INT32.pack(member.rebalance_timeout_ms)
            + _compact_string(member.server_assignor, "server_assignor"),
            _classic_tag(member))
        out[_key(TARGET_MEMBER, gid, mid)] = _value(
            _topic_partitions(group.target.get(mid, {}), ids))
        out[_key(CURRENT_ASSIGNMENT, gid, mid)] = _value(
            _INT32.pack(member.member_epoch) + _INT32.pack(member.previous_member_epoch)
            + _INT8.pack(_STATES[member.state])
            + _topic_partitions(member.assigned, ids, member.assigned_at)
            + _topic_partitions(member.pending_revocation, ids))
    return out


#: The order Kafka appends a change in: tombstones of a member's records (current
#: assignment, target, metadata), then of the group's; new values with the member's
#: subscription first and its current assignment last.
_TOMBSTONE_ORDER = {CURRENT_ASSIGNMENT: 0, TARGET_MEMBER: 1, MEMBER_METADATA: 2,
                    TARGET_METADATA: 3, PARTITION_METADATA: 4, REGULAR_EXPRESSION: 5,
                    METADATA: 6}
_VALUE_ORDER = {MEMBER_METADATA: 0, METADATA: 1, TARGET_MEMBER: 2, TARGET_METADATA: 3,
                CURRENT_ASSIGNMENT: 4}


def ordered_delta(before: Mapping[bytes, bytes], now: Mapping[bytes, bytes]
                  ) -> list[tuple[bytes, bytes | None]]:
    """The records that turn ``before`` into ``now`` (changed values, tombstones for keys
    gone), in Kafka's order."""
    def record_type(key: bytes) -> int:
        return int(_INT16.unpack(key[:2])[0])

    gone = sorted((k for k in before if k not in now),
                  key=lambda k: (_TOMBSTONE_ORDER.get(record_type(k), 9), k))
    changed = sorted((k for k, v in now.items() if before.get(k) != v),
                     key=lambda k: (_VALUE_ORDER.get(record_type(k), 9), k))
    return [(k, None) for k in gone] + [(k, now[k]) for k in changed]


# --- reading ------------------------------------------------------------------------------


def _skip_tags(reader: SchemaReader) -> dict[int, bytes]:
    tags = {}
    for _ in range(reader.uvarint()):
        tag = reader.uvarint()
        tags[tag] = reader.take(reader.uvarint())
    return tags


def _read_nullable(reader: SchemaReader, field: str) -> str | None:
    length = reader.uvarint()
    if length == 0:
        return None
    return reader.take(length - 1).decode("utf-8")


def _read_count(reader: SchemaReader) -> int:
    count = reader.uvarint() - 1
    if count < 0:
        raise reader.fail("a null array")
    return count


def _read_topic_partitions(reader: SchemaReader, names: Mapping[uuid.UUID, str]
                           ) -> tuple[Partitions, dict[tuple[str, int], int]]:
    partitions: Partitions = {}
    epochs: dict[tuple[str, int], int] = {}
    for _ in range(_read_count(reader)):
        topic_id = uuid.UUID(bytes=reader.take(16))
        parts = [reader.unpack(_INT32) for _ in range(_read_count(reader))]
        tags = _skip_tags(reader)
        name = names.get(topic_id)
        if name is None:
            continue  # the topic is gone
        partitions[name] = frozenset(parts)
        if 0 in tags:
            inner = SchemaReader(tags[0], "assignment epochs")
            values = [inner.unpack(_INT32) for _ in range(_read_count(inner))]
            epochs.update({(name, p): e for p, e in zip(parts, values)})
    return partitions, epochs


def _body(value: bytes, what: str) -> SchemaReader:
    reader = SchemaReader(value, what)
    version = reader.unpack(_INT16)
    if version != 0:
        raise reader.fail(f"unknown version {version}")
    return reader


def load_groups(records: Mapping[bytes, bytes | None], names: Mapping[uuid.UUID, str],
                now_ms: int, session_timeout_ms: int) -> dict[str, Group]:
    """The groups the last record of each key describes (tombstoned keys are gone; a group
    without its metadata record is not one). Members get a new session from ``now_ms``, as
    Kafka's coordinator gives them when it loads. CorruptRecordError for a value that does
    not parse."""
    groups: dict[str, Group] = {}
    pending: list[tuple[int, str, str | None, bytes]] = []
    for key, value in records.items():
        record_type, group_id, member_id = decode_key(key)
        if value is None:
            continue
        if record_type == METADATA:
            reader = _body(value, "ConsumerGroupMetadataValue")
            groups.setdefault(group_id, Group(group_id)).group_epoch = reader.unpack(_INT32)
        else:
            pending.append((record_type, group_id, member_id, value))
    for record_type, group_id, member_id, value in sorted(pending, key=lambda r: r[0]):
        found = groups.get(group_id)
        if found is None:
            continue
        group = found
        if record_type == TARGET_METADATA:
            group.assignment_epoch = _body(value, "ConsumerGroupTargetAssignmentMetadataValue"
                                           ).unpack(_INT32)
        elif record_type == MEMBER_METADATA and member_id is not None:
            reader = _body(value, "ConsumerGroupMemberMetadataValue")
            member = Member(member_id)
            member.instance_id = _read_nullable(reader, "instance_id")
            member.rack_id = _read_nullable(reader, "rack_id")
            member.client_id = _read_nullable(reader, "client_id") or ""
            member.client_host = _read_nullable(reader, "client_host") or ""
            member.subscribed_topic_names = tuple(
                reader.string("topic", compact=True) for _ in range(_read_count(reader)))
            member.subscribed_topic_regex = _read_nullable(reader, "subscribed_topic_regex")
            member.rebalance_timeout_ms = reader.unpack(_INT32)
            member.server_assignor = _read_nullable(reader, "server_assignor")
            classic = _skip_tags(reader).get(0)
            if classic is not None:
                _read_classic(classic, member)
            member.session_deadline_ms = now_ms + (member.classic_session_timeout_ms
                                                   or session_timeout_ms)
            group.members[member_id] = member
        elif record_type == TARGET_MEMBER and member_id is not None:
            reader = _body(value, "ConsumerGroupTargetAssignmentMemberValue")
            group.target[member_id] = _read_topic_partitions(reader, names)[0]
        elif record_type == CURRENT_ASSIGNMENT and member_id is not None:
            current = group.members.get(member_id)
            if current is None:
                continue
            member = current
            reader = _body(value, "ConsumerGroupCurrentMemberAssignmentValue")
            member.member_epoch = reader.unpack(_INT32)
            member.previous_member_epoch = reader.unpack(_INT32)
            state = reader.unpack(_INT8)
            member.state = _STATE_NAMES.get(state, MEMBER_STABLE)
            member.assigned, member.assigned_at = _read_topic_partitions(reader, names)
            member.pending_revocation = _read_topic_partitions(reader, names)[0]
    for group in groups.values():
        group.target = {m: t for m, t in group.target.items() if m in group.members}
        for member in group.members.values():
            for topic, parts in list(member.assigned.items()) + list(
                    member.pending_revocation.items()):
                for p in parts:
                    group.partition_epochs[(topic, p)] = member.member_epoch
            if member.state == UNREVOKED_PARTITIONS:
                # Kafka reschedules the revocation deadline on load, too.
                member.rebalance_deadline_ms = now_ms + max(0, member.rebalance_timeout_ms)
    return groups
