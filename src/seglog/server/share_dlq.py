"""Dead-letter queues of share groups (KIP-1191), as Kafka 4.4's broker writes them
(``DefaultShareGroupDLQManager``, ``ShareGroupDLQStateManager``,
``ShareGroupDLQRecordFetcher``, ``ShareCoordinatorMetadataCacheHelperImpl``; the
``SharePartition`` parts: ``initiateDLQAndArchive``, ``maybeResumeDlqArchiving``).

When a share group has ``errors.deadletterqueue.topic.name`` (a group config) and
``share.version`` >= 2, a record a consumer REJECTs, or one whose delivery count reaches the
limit, goes to the ARCHIVING state (persisted) instead of ARCHIVED; the share fetch path
hands each range of ``SharePartition.take_dlq_batches()`` to :meth:`ShareDlqManager.enqueue`
with the share partition, which writes one DLQ record per offset to the group's DLQ topic,
then calls the partition's ``archiving_done`` (ARCHIVING -> ARCHIVED) and the caller's
``persist`` (Kafka's ``initiateDLQAndArchive``). A failed DLQ write is logged and the range
archived regardless, as Kafka does. Whether a group has a DLQ: :func:`dlq_enabled`.

What goes onto the DLQ topic (every fact from Kafka 4.4; checked against a real broker by
``tests/server/test_share_dlq_differential.py``):

- partition: the source partition modulo the DLQ topic's partition count;
- one record per offset of ``[first_offset, last_offset]``, timestamp now (CreateTime);
  key and value the source record's when the group's ``errors.deadletterqueue.copy.record
  .enable`` is true and the record can be read (else null: headers only); the source record's
  own headers are NOT copied;
- headers, in order: ``__dlq.errors.topic`` (the source topic's name), ``__dlq.errors
  .partition``, ``__dlq.errors.offset``, ``__dlq.errors.group``, ``__dlq.errors.delivery
  .count``, ``__dlq.errors.message`` (``Offset rejected by client.`` or ``Offset delivery
  count exceeded the threshold.``), values UTF-8 decimal / text;
- uncompressed batches no larger than the DLQ topic's ``max.message.bytes`` (Kafka's
  ``topicProduceData`` loop: 61 bytes of batch header plus each record's size); a source
  record larger than that is written headers only (Kafka's fetcher skips it);
- written with acks=-1 (Kafka's inter-broker Produce, timeout 30 s) to the DLQ partition's
  leader: through the seam's append when this broker leads it, else a Produce request (v13,
  the topic by id) to the broker that does, over the inter-broker listener with its TLS and
  SASL settings (:mod:`seglog.server.share_dlq_remote`, the connections the share persister
  and the transaction marker sender make the same way).

The DLQ topic's configs come from the cluster's view, as Kafka's metadata cache gives them
(``ShareCoordinatorMetadataCacheHelperImpl``): ``errors.deadletterqueue.group.enable`` and
``max.message.bytes`` of the topic as this broker's Store holds it (a ZooKeeper cluster
member creates every topic of the cluster there, with ``/config/topics/<t>``), else as the
seam reads them from the cluster (``topic_config_overrides``: the flag false unless set,
``max.message.bytes`` else the broker's ``message.max.bytes``).

Leaders move. As Kafka's ``ShareGroupDLQStateManager``: a batch answered
NOT_LEADER_OR_FOLLOWER, or a request without an answer (connection lost, timed out), is
sent again to the leader then known after Kafka's backoff (``ExponentialBackoffManager(5,
1000 ms, x2, 30 s, 20 % jitter)``: at most 5 sends); any other error, or the last attempt
failing, fails the write (logged, the range archived regardless). Kafka resends the whole
batch, so a first send appended before its answer was lost is written twice; seglog first
reads the DLQ partition at the leader from the range's recorded offset (below) and sends
only the records not there yet.

The source records are read as Kafka's ``ShareGroupDLQRecordFetcher`` reads them
(``FetchIsolation.HIGH_WATERMARK``): up to the high watermark, whatever the group's
``share.isolation.level``, since records of aborted transactions never reach ARCHIVING (a
read_committed share partition archives them directly). Control records are skipped.

The DLQ topic. It must not start with ``__``; it must start with the broker's
``errors.deadletterqueue.topic.name.prefix`` (default ``dlq.``; empty: any name); an
existing topic must have the topic config ``errors.deadletterqueue.group.enable=true``; a
missing one is created only when the broker's ``errors.deadletterqueue.auto.create.topics
.enable`` is true, with the broker's default partition count and replication factor and
the configs ``errors.deadletterqueue.group.enable=true``, ``message.timestamp.type
=CreateTime`` (Kafka's ``createTopicBuilder``). Refusals carry Kafka's messages
(``validateDlqTopic``) as :class:`~seglog.errors.InvalidConfigError`.

Across a restart. Kafka 4.4 persists the ARCHIVING state before writing and re-enqueues the
ranges still ARCHIVING when the share partition loads (``maybeResumeDlqArchiving``); it keeps
no record of what it already wrote, so a broker that stops between its DLQ write and the
ARCHIVED write writes those records twice. seglog does the same and adds one thing Kafka does
not have, so that a range is written exactly once: before its first write to the DLQ it
records (fsync'd, in ``share-dlq-progress.json`` of the data directory) the range and the
DLQ partition's high watermark then (no record of the range is below it, and nothing below
it is ever truncated: acks=-1, no unclean election); a later enqueue of a range so recorded,
and every resend above, first reads the DLQ partition from that offset and leaves out the
offsets whose records are there already (by their ``__dlq.errors.*`` headers). At another
broker that read is a ListOffsets (high watermark and log end offset) and consumer Fetches
up to the high watermark once it has reached that log end offset (a record appended by a
send whose answer was lost is then either committed, and seen, or gone for good; waited for
30 s at most, then the write fails rather than risk a duplicate). The record is dropped once
the ARCHIVED state is persisted. (The DLQ records themselves are Kafka's.) A share partition
that moved to another broker meanwhile finds no record there and writes as Kafka does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar

from .. import error_codes as codes
from .. import errors
from .._backend import get_backend
from ..cluster.inter_broker import InterBrokerError
from ..cluster.seam import AppendOrigin
from ..types import TopicPartition
from .context import BrokerState
from .share_dlq_remote import RemoteDlqPartitions

__all__ = [
    "AUTO_CREATE_TOPICS_ENABLE_CONFIG", "CAUSE_MESSAGES", "CLIENT_REJECT",
    "COPY_RECORD_ENABLE_CONFIG", "DELIVERY_COUNT_EXCEEDED", "DLQ_HEADERS",
    "DlqWriteResult", "GROUP_ENABLE_TOPIC_CONFIG", "PROGRESS_FILE", "ShareDlqManager",
    "TOPIC_NAME_CONFIG", "TOPIC_NAME_PREFIX_CONFIG", "dlq_enabled", "dlq_headers",
    "find_dlq_manager",
    "share_dlq_manager",
]

log = logging.getLogger(__name__)

#: Group configs (Kafka's ``GroupConfig``).
TOPIC_NAME_CONFIG = "errors.deadletterqueue.topic.name"
COPY_RECORD_ENABLE_CONFIG = "errors.deadletterqueue.copy.record.enable"
#: Broker configs (Kafka's ``GroupCoordinatorConfig``).
AUTO_CREATE_TOPICS_ENABLE_CONFIG = "errors.deadletterqueue.auto.create.topics.enable"
TOPIC_NAME_PREFIX_CONFIG = "errors.deadletterqueue.topic.name.prefix"
#: The topic config a DLQ topic must have set to true (Kafka's ``TopicConfig``).
GROUP_ENABLE_TOPIC_CONFIG = "errors.deadletterqueue.group.enable"

#: The causes a share partition gives (its ``DlqBatch.cause``) and Kafka's messages for them
#: (``ShareGroupDLQManager.CLIENT_REJECT`` / ``DELIVERY_COUNT_EXCEEDED``).
CLIENT_REJECT = "CLIENT_REJECT"
DELIVERY_COUNT_EXCEEDED = "DELIVERY_COUNT_EXCEEDED"
CAUSE_MESSAGES: Mapping[str, str] = {
    CLIENT_REJECT: "Offset rejected by client.",
    DELIVERY_COUNT_EXCEEDED: "Offset delivery count exceeded the threshold.",
}

#: The header names, in the order Kafka writes them (``ProduceRequestHandler.HEADER_*``).
HEADER_TOPIC = "__dlq.errors.topic"
HEADER_PARTITION = "__dlq.errors.partition"
HEADER_OFFSET = "__dlq.errors.offset"
HEADER_GROUP = "__dlq.errors.group"
HEADER_DELIVERY_COUNT = "__dlq.errors.delivery.count"
HEADER_MESSAGE = "__dlq.errors.message"
DLQ_HEADERS = (HEADER_TOPIC, HEADER_PARTITION, HEADER_OFFSET, HEADER_GROUP,
               HEADER_DELIVERY_COUNT, HEADER_MESSAGE)

#: Kafka's produce request of the DLQ writer: acks=-1, timeout 30 s.
PRODUCE_ACKS = -1
PRODUCE_TIMEOUT_S = 30.0
#: The pauses while a DLQ partition has no live leader (a topic just created, a leader
#: being elected; bounded: about 3 s in all).
LEADER_WAITS_S = (0.1, 0.2, 0.4, 0.8, 1.6)
#: Kafka's ``ExponentialBackoffManager(5, 1000, 2, 30000, 0.2)`` of the DLQ writer's
#: Produce: at most 5 sends of a batch, the n-th resend after 1000 * 2**n ms (at most
#: 30 s), +-20 % jitter.
MAX_ATTEMPTS = 5
BACKOFF_MS = 1000
BACKOFF_MAX_MS = 30_000
BACKOFF_JITTER = 0.2
#: The answers Kafka's DLQ writer sends again: the partition's leader moved, or the request
#: got no answer (its client's NETWORK_EXCEPTION / REQUEST_TIMED_OUT).
_RETRIABLE = frozenset({codes.NOT_LEADER_OR_FOLLOWER, codes.NETWORK_EXCEPTION})
#: The v2 batch header Kafka's size loop starts from (``batchSize = 61``).
_BATCH_OVERHEAD_BYTES = 61
#: Where the exactly-once progress is kept, in the broker's data directory.
PROGRESS_FILE = "share-dlq-progress.json"
#: Where the broker's manager lives in ``BrokerState.extensions``.
EXTENSION_KEY = "seglog.server.share_dlq"
#: Kafka's ``share.version`` level from which share groups have DLQs (``SV_2``).
SHARE_VERSION_DLQ = 2

Header = tuple[str, bytes]
_T = TypeVar("_T")


def dlq_headers(topic: str, partition: int, offset: int, group_id: str,
                delivery_count: int | None, cause: str | None) -> tuple[Header, ...]:
    """The headers Kafka 4.4 writes on the DLQ record of ``offset`` (``headers(offset)``):
    delivery count and message only when known."""
    headers: list[Header] = [
        (HEADER_TOPIC, topic.encode()),
        (HEADER_PARTITION, str(partition).encode()),
        (HEADER_OFFSET, str(offset).encode()),
        (HEADER_GROUP, group_id.encode()),
    ]
    if delivery_count is not None:
        headers.append((HEADER_DELIVERY_COUNT, str(delivery_count).encode()))
    message = CAUSE_MESSAGES.get(cause) if cause is not None else None
    if message is not None:
        headers.append((HEADER_MESSAGE, message.encode()))
    return tuple(headers)


# --- sizes (Kafka's DefaultRecord.sizeInBytes) ---------------------------------------------


def _varint_bytes(value: int) -> int:
    """The size of ``value`` as a zigzag varint (Kafka's ``ByteUtils.sizeOfVarint``)."""
    zigzag = (value << 1) ^ (value >> 63)
    size = 1
    while zigzag >= 0x80:
        zigzag >>= 7
        size += 1
    return size


def record_size_bytes(offset_delta: int, timestamp_delta: int, key: bytes | None,
                      value: bytes | None, headers: Iterable[tuple[str, bytes | None]]) -> int:
    """Kafka's ``DefaultRecord.sizeInBytes``: the record with its length prefix."""
    body = 1 + _varint_bytes(offset_delta) + _varint_bytes(timestamp_delta)
    body += _varint_bytes(-1) if key is None else _varint_bytes(len(key)) + len(key)
    body += _varint_bytes(-1) if value is None else _varint_bytes(len(value)) + len(value)
    header_list = list(headers)
    body += _varint_bytes(len(header_list))
    for name, header_value in header_list:
        name_bytes = name.encode()
        body += _varint_bytes(len(name_bytes)) + len(name_bytes)
        body += (_varint_bytes(-1) if header_value is None
                 else _varint_bytes(len(header_value)) + len(header_value))
    return _varint_bytes(body) + body


# --- settings -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Settings:
    """What one enqueue reads of the configs (Kafka's ``ShareGroupDLQMetadataCacheHelper``)."""

    topic_name: str
    copy_record: bool
    prefix: str
    auto_create: bool


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() == "true"


@dataclass(frozen=True)
class _TopicView:
    """What the writer reads of a DLQ topic's configs."""

    group_enable: bool
    max_message_bytes: int


def _backoff_s(attempt: int) -> float:
    """Kafka's ``ExponentialBackoff.backoff(attempt)`` in seconds."""
    backoff_ms = min(BACKOFF_MAX_MS, BACKOFF_MS * 2 ** attempt)
    return float(backoff_ms * random.uniform(1 - BACKOFF_JITTER, 1 + BACKOFF_JITTER) / 1000)


async def _with_retries(read: Callable[[], Awaitable[_T]]) -> _T:
    """``read()`` (a ListOffsets or Fetch to the DLQ partition's leader, or a look at this
    broker's replica), again after Kafka's backoff while the leader is not known or not
    ready (a partition just created or just moved) or the request got no answer, at most
    :data:`MAX_ATTEMPTS` times."""
    for attempt in range(1, MAX_ATTEMPTS):
        try:
            return await read()
        except (InterBrokerError, _NoLeaderError) as exc:
            log.info("share DLQ: reading the DLQ partition: %s; again", exc)
            await asyncio.sleep(_backoff_s(attempt))
    return await read()


class _NoLeaderError(errors.SeglogError):
    """The DLQ partition has no live leader (Kafka: the writer's ``ConfigException``)."""

    kafka_error_code = codes.LEADER_NOT_AVAILABLE


@dataclass(frozen=True)
class DlqWriteResult:
    """What :meth:`ShareDlqManager.enqueue` wrote: the DLQ partition, how many records were
    appended, how many offsets were already there (a range resumed after a restart) and how
    many carried the source record's key and value."""

    dlq_tp: TopicPartition
    written: int
    already_written: int
    copied: int


@dataclass(frozen=True)
class _Pending:
    """One DLQ record to write: its source offset, key, value and headers."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


class ShareDlqManager:
    """The broker's DLQ writer (Kafka's ``DefaultShareGroupDLQManager``); see the module
    docstring. Runs on the broker's event loop.

    ``group_config(group_id, name)``: the group config's value, None when the group does
    not set it (default: the broker's group configs, :mod:`seglog.server.apis.group_configs`)."""

    def __init__(self, broker: BrokerState, *,
                 group_config: Callable[[str, str], str | None] | None = None):
        self._broker = broker
        self._group_config = group_config or _group_config_source(broker)
        self._progress_path = os.path.join(str(broker.store.path), PROGRESS_FILE)
        self._progress: list[dict[str, Any]] = _load_progress(self._progress_path)
        self._lock = asyncio.Lock()
        self._create_lock = asyncio.Lock()
        self._remote_client: RemoteDlqPartitions | None = None
        self._writes = 0

    # --- configs -------------------------------------------------------------------------

    def _broker_config(self, name: str, default: Any) -> Any:
        try:
            from .apis.admin_state import dynamic_configs
            return dynamic_configs(self._broker).effective.get(name, default)
        except (AttributeError, KeyError, OSError, errors.SeglogError):
            # A BrokerState without the admin configs' data (handler-level tests).
            return self._broker.config.get(name, default)

    def _settings(self, group_id: str) -> _Settings:
        topic = self._group_config(group_id, TOPIC_NAME_CONFIG) or ""
        copy = self._group_config(group_id, COPY_RECORD_ENABLE_CONFIG)
        prefix = self._broker_config(TOPIC_NAME_PREFIX_CONFIG, "dlq.")
        return _Settings(topic_name=str(topic), copy_record=_bool(copy or "false"),
                         prefix="" if prefix is None else str(prefix),
                         auto_create=_bool(self._broker_config(
                             AUTO_CREATE_TOPICS_ENABLE_CONFIG, False)))

    def dlq_topic(self, group_id: str) -> str:
        """The group's DLQ topic name ("" when it has none)."""
        return self._settings(group_id).topic_name

    def dlq_enabled(self, group_id: str) -> bool:
        """Kafka's ``SharePartition.isDLQEnabledForGroup``: ``share.version`` >= 2 and the
        group names a DLQ topic (the share partition's ``SharePartitionConfig.dlq_enabled``)."""
        return self._share_version() >= SHARE_VERSION_DLQ and bool(self.dlq_topic(group_id))

    def _share_version(self) -> int:
        from .finalized_features import FINALIZED_FEATURES_KEY
        features = self._broker.extensions.get(FINALIZED_FEATURES_KEY)
        if features is None:
            return SHARE_VERSION_DLQ  # Kafka 4.4's default finalized level
        return int(features.current()[1].get("share.version", 0))

    # --- the DLQ topic -------------------------------------------------------------------

    async def _topic_view(self, name: str) -> _TopicView | None:
        """What the writer needs of DLQ topic ``name``'s configs, from the cluster's view
        (Kafka's ``isDlqEnabledOnTopic`` / ``dlqTopicMaxMessageBytes`` over the metadata
        cache); None when the topic does not exist. A topic this broker holds: its Store's
        config; any other: the cluster's overrides (``/config/topics/<t>`` in ZooKeeper), the
        flag false unless set (Kafka's ``LogConfig`` default), ``max.message.bytes`` else the
        broker's ``message.max.bytes``."""
        if self._broker.cluster.partition_count(name) is None:
            return None
        try:
            config = self._broker.store.topic(name).config
        except errors.SeglogError:
            config = None
        if config is not None:
            return _TopicView(bool(config.errors_deadletterqueue_group_enable),
                              int(config.max_message_bytes))
        overrides = await self._broker.cluster.topic_config_overrides(name) or {}
        max_message_bytes = int(self._broker_config("message.max.bytes", 1048588))
        with contextlib.suppress(ValueError):
            max_message_bytes = int(overrides.get("max.message.bytes", max_message_bytes))
        return _TopicView(_bool(overrides.get(GROUP_ENABLE_TOPIC_CONFIG, "false")),
                          max_message_bytes)

    def _validate(self, group_id: str, settings: _Settings, view: _TopicView | None) -> None:
        """Kafka's ``validateDlqTopic``, in its order and words (``view``: the topic's
        configs, None when it does not exist)."""
        name = settings.topic_name
        if not name:
            raise errors.InvalidConfigError(
                f"Configured DLQ topic name in share group: {group_id} is empty.")
        if name.startswith("__"):
            raise errors.InvalidConfigError(
                f"Configured DLQ topic name in share group: {group_id} cannot start with __, "
                f"topic: {name}.")
        if view is not None:
            if not view.group_enable:
                raise errors.InvalidConfigError(
                    f"DLQ is not enabled on configured DLQ topic for share group: {group_id}, "
                    f"topic: {name}.")
        elif not settings.auto_create:
            raise errors.InvalidConfigError(
                f"DLQ topic does not exist and auto create is disabled on cluster for share "
                f"group: {group_id}, topic: {name}.")
        if settings.prefix and not name.startswith(settings.prefix):
            raise errors.InvalidConfigError(
                f"Configured DLQ topic name does not comply with the DLQ topic prefix in share "
                f"group: {group_id}, topic: {name}, prefix: {settings.prefix}.")

    async def _ensure_topic(self, name: str) -> int:
        """The DLQ topic's partition count, creating it first when it does not exist (as
        Kafka's CreateTopics with -1 partitions and replication factor and the two configs)."""
        count = self._broker.cluster.partition_count(name)
        if count is not None:
            return count
        # One creation at a time: the batches of one acknowledgement are enqueued together
        # and must not race to create the same topic (Kafka's sender thread serialises them).
        async with self._create_lock:
            return await self._create_topic(name)

    async def _create_topic(self, name: str) -> int:
        cluster = self._broker.cluster
        count = cluster.partition_count(name)
        if count is not None:
            return count
        from .apis.admin_configs import topic_config_from
        from .apis.admin_state import topic_defaults
        from .apis.admin_wire import broker_setting, topic_name_error
        why = topic_name_error(name)
        if why:
            raise errors.InvalidTopicError(why)
        overrides = {GROUP_ENABLE_TOPIC_CONFIG: "true", "message.timestamp.type": "CreateTime"}
        config = topic_config_from(topic_defaults(self._broker), overrides)
        assignment = cluster.plan_topic(
            num_partitions=-1, replication_factor=-1, manual=None,
            default_partitions=broker_setting(self._broker, "num.partitions", 1),
            default_replication_factor=broker_setting(self._broker,
                                                      "default.replication.factor", 1))
        try:
            await cluster.create_topic(name, assignment, config, overrides,
                                       timeout_s=PRODUCE_TIMEOUT_S)
            log.info("created DLQ topic %s (%d partitions)", name, len(assignment))
        except errors.TopicExistsError:
            pass  # made meanwhile by another enqueue: Kafka retries and finds it
        count = cluster.partition_count(name)
        if count is None:
            raise errors.UnknownTopicOrPartitionError(
                f"DLQ topic {name} could not be found after its creation")
        return count

    # --- enqueue -------------------------------------------------------------------------

    async def enqueue(self, group_id: str, tp: TopicPartition, topic_id: uuid.UUID | None,
                      first_offset: int, last_offset: int, delivery_count: int | None,
                      cause: str | None, *, share_partition: Any = None,
                      persist: Callable[[], Awaitable[bool]] | None = None,
                      lock: asyncio.Lock | None = None) -> DlqWriteResult | None:
        """Write the DLQ records of ``tp``'s offsets ``[first_offset, last_offset]`` archived
        by share group ``group_id`` (``cause``: :data:`CLIENT_REJECT` or
        :data:`DELIVERY_COUNT_EXCEEDED`).

        With ``share_partition`` (the :class:`~seglog.coordinator.share_partition
        .SharePartition` whose ``take_dlq_batches()`` gave the range): Kafka's
        ``initiateDLQAndArchive``: after the write, whether it succeeded or not (a failure
        is logged, and None returned), ``share_partition.archiving_done(first, last)`` and
        ``await persist()`` (the caller writes the partition's ``pending_write()``; True once
        persisted, which drops the range's exactly-once record), both under ``lock`` when
        given (the caller's lock of that share partition).

        Without it, raises :class:`~seglog.errors.InvalidArgumentError` for bad parameters
        (Kafka's ``validate``), :class:`~seglog.errors.InvalidConfigError` with Kafka's
        messages when the group's DLQ topic cannot be used, and the
        :class:`~seglog.errors.SeglogError` of a failed write."""
        if share_partition is None:
            return await self._write(group_id, tp, topic_id, first_offset, last_offset,
                                     delivery_count, cause)
        result: DlqWriteResult | None = None
        try:
            result = await self._write(group_id, tp, topic_id, first_offset, last_offset,
                                       delivery_count, cause)
        except Exception as exc:  # Kafka: logged, archived regardless
            log.error("Failed to write to DLQ, proceeding to ARCHIVED regardless. "
                      "(group %s, %s-%d, offsets %d-%d: %s)", group_id, tp.topic,
                      tp.partition, first_offset, last_offset, exc)
        async with (lock if lock is not None else contextlib.nullcontext()):
            try:
                share_partition.archiving_done(first_offset, last_offset)
            except errors.SeglogError as exc:  # not pending there (any more): nothing to do
                log.error("share DLQ: archiving %s-%d offsets %d-%d of group %s: %s",
                          tp.topic, tp.partition, first_offset, last_offset, group_id, exc)
                return result
            persisted = bool(await persist()) if persist is not None else False
        if persisted:
            await self.forget(group_id, tp, topic_id, first_offset, last_offset)
        return result

    async def _write(self, group_id: str, tp: TopicPartition, topic_id: uuid.UUID | None,
                     first_offset: int, last_offset: int, delivery_count: int | None,
                     cause: str | None) -> DlqWriteResult:
        """The DLQ write of :meth:`enqueue`. The connections to other brokers are closed
        when no write is left (DLQ writes are rare, and the writer is not a handler module
        with a stop hook: nothing is left open when the broker stops)."""
        self._writes += 1
        try:
            return await self._write_range(group_id, tp, topic_id, first_offset, last_offset,
                                           delivery_count, cause)
        finally:
            self._writes -= 1
            if not self._writes:
                await self.close()

    async def _write_range(self, group_id: str, tp: TopicPartition,
                           topic_id: uuid.UUID | None, first_offset: int, last_offset: int,
                           delivery_count: int | None, cause: str | None) -> DlqWriteResult:
        """The DLQ write of :meth:`enqueue` (see the module docstring)."""
        _check_parameters(group_id, tp, first_offset, last_offset)
        settings = self._settings(group_id)
        self._validate(group_id, settings, await self._topic_view(settings.topic_name))
        count = await self._ensure_topic(settings.topic_name)
        dlq_tp = TopicPartition(settings.topic_name, tp.partition % count)
        view = await self._topic_view(settings.topic_name)
        if view is None or not view.group_enable:
            raise errors.InvalidConfigError(
                f"DLQ is not enabled on configured DLQ topic for share group: {group_id}, "
                f"topic: {settings.topic_name}.")
        max_message_bytes = view.max_message_bytes
        key = _progress_key(group_id, tp, topic_id)
        async with self._lock:
            recorded = self._recorded(key, first_offset, last_offset)
            if recorded is not None and (recorded.get("dlq_topic"), recorded.get(
                    "dlq_partition")) != (dlq_tp.topic, dlq_tp.partition):
                # The group's DLQ moved meanwhile: what was written went elsewhere.
                self._progress.remove(recorded)
                recorded = None
        # The reads at the leader are made outside the lock (they may wait for a leader:
        # other groups' writes go on meanwhile); a range is enqueued by one caller at a time.
        if recorded is None:
            dlq_from = await _with_retries(lambda: self._committed_end(dlq_tp))
            async with self._lock:
                await self._record(key, first_offset, last_offset, dlq_tp, dlq_from)
            done: set[int] = set()
        else:
            dlq_from = int(recorded["dlq_from"])
            done = await _with_retries(lambda: self._already_written(
                dlq_tp, dlq_from, group_id, tp, first_offset, last_offset))
        pending = (p for p in self._pending(group_id, tp, first_offset, last_offset,
                                            delivery_count, cause, settings,
                                            max_message_bytes)
                   if p.offset not in done)
        written = copied = 0
        for chunk in _chunks(pending, max_message_bytes):
            sent = await self._produce(dlq_tp, chunk, dlq_from, group_id, tp)
            written += len(sent)
            copied += sum(1 for p in sent if p.key is not None or p.value is not None)
        return DlqWriteResult(dlq_tp, written, len(done), copied)

    async def _leader(self, dlq_tp: TopicPartition) -> tuple[Any | None, int]:
        """``(replica, leader)``: this broker's leader replica of ``dlq_tp`` and its id, or
        None and the live broker that leads it. While the partition has no live leader (a
        topic just created, a leader being elected) it is asked again a few times; then
        :class:`_NoLeaderError` in Kafka's words."""
        cluster = self._broker.cluster
        for delay_s in LEADER_WAITS_S + (0.0,):
            replica = cluster.leader_replica(dlq_tp)
            if replica is not None:
                return replica, int(cluster.broker_id)
            state = cluster.states.get(dlq_tp)
            if state is not None and state.leader >= 0 and state.leader != cluster.broker_id \
                    and state.leader in cluster.live_brokers:
                return None, int(state.leader)
            if delay_s:
                await asyncio.sleep(delay_s)
        raise _NoLeaderError(
            f"DLQ topic partition leader node for share group with DLQ topic {dlq_tp.topic} "
            f"and partition {dlq_tp.partition} could not be found.")

    async def _committed_end(self, dlq_tp: TopicPartition) -> int:
        """The DLQ partition's high watermark at its leader: no record of this range is
        below it, and what is below it is never truncated (a leader change keeps it)."""
        replica, leader = await self._leader(dlq_tp)
        if replica is not None:
            return int(replica.log.high_watermark)
        high_watermark, _end = await self._remote().offsets(leader, dlq_tp)
        return high_watermark

    def _remote(self) -> RemoteDlqPartitions:
        if self._remote_client is None:
            self._remote_client = RemoteDlqPartitions(
                self._broker.cluster, request_timeout_ms=int(PRODUCE_TIMEOUT_S * 1000),
                backend=getattr(self._broker.store, "backend", None))
        return self._remote_client

    async def close(self) -> None:
        """Close the connections to other brokers."""
        if self._remote_client is not None:
            await self._remote_client.close()

    def _pending(self, group_id: str, tp: TopicPartition, first_offset: int,
                 last_offset: int, delivery_count: int | None, cause: str | None,
                 settings: _Settings, max_message_bytes: int) -> Iterator[_Pending]:
        """Every offset of the range with its DLQ record's key, value and headers."""
        originals = self._source_records(tp, first_offset, last_offset) \
            if settings.copy_record else iter(())
        following = next(originals, None)
        for offset in range(first_offset, last_offset + 1):
            while following is not None and following.offset < offset:
                following = next(originals, None)
            key = value = None
            if following is not None and following.offset == offset:
                # Kafka's fetcher leaves out a record larger than its budget (the DLQ
                # topic's max.message.bytes): headers only then.
                if record_size_bytes(0, 0, following.key, following.value,
                                     following.headers) <= max_message_bytes:
                    key, value = following.key, following.value
            yield _Pending(offset, key, value,
                           dlq_headers(tp.topic, tp.partition, offset, group_id,
                                       delivery_count, cause))

    def _source_records(self, tp: TopicPartition, first_offset: int,
                        last_offset: int) -> Iterator[Any]:
        """The source records of the range, read as Kafka's fetcher reads them (high
        watermark isolation, control records left out); nothing when they cannot be read
        (Kafka then writes headers only)."""
        replica = self._broker.cluster.leader_replica(tp)
        if replica is None:
            log.warning("share DLQ: %s-%d is not led here; DLQ records without the records",
                        tp.topic, tp.partition)
            return
        try:
            yield from replica.log.records(first_offset, last_offset + 1)
        except (errors.SeglogError, OSError) as exc:
            log.warning("share DLQ: reading %s-%d at %d failed (%s); the rest headers only",
                        tp.topic, tp.partition, first_offset, exc)

    async def _produce(self, dlq_tp: TopicPartition, chunk: Sequence[_Pending],
                       dlq_from: int, group_id: str, tp: TopicPartition) -> list[_Pending]:
        """Write ``chunk`` as one batch to the DLQ partition's leader, here (the seam's
        append) or at another broker (Produce); what was written by this call.

        Kafka's retries (``handleProduceResponse``): NOT_LEADER_OR_FOLLOWER, and a request
        that got no answer (the connection lost, the request timed out), are sent again
        after Kafka's backoff to the leader then known, at most :data:`MAX_ATTEMPTS`
        sends; any other error fails the write. Kafka resends the whole batch; seglog first
        reads the partition from ``dlq_from`` and leaves out the records already there (a
        first send appended before its answer was lost), so nothing is written twice."""
        pending = list(chunk)
        for attempt in range(MAX_ATTEMPTS):
            if attempt:
                await asyncio.sleep(_backoff_s(attempt))
                done = await _with_retries(lambda: self._already_written(
                    dlq_tp, dlq_from, group_id, tp, pending[0].offset, pending[-1].offset))
                pending = [p for p in pending if p.offset not in done]
                if not pending:
                    return []
            try:
                code = await self._send(dlq_tp, pending)
            except InterBrokerError as exc:
                log.info("share DLQ: produce to %s-%d got no answer (%s)", dlq_tp.topic,
                         dlq_tp.partition, exc)
                code = codes.NETWORK_EXCEPTION
            except _NoLeaderError as exc:
                log.info("share DLQ: %s", exc)
                code = codes.NOT_LEADER_OR_FOLLOWER
            if code == codes.NONE:
                return pending
            if code not in _RETRIABLE:
                break
            log.info("share DLQ: produce to %s-%d answered %s (attempt %d of %d)",
                     dlq_tp.topic, dlq_tp.partition, codes.BY_CODE[code].name, attempt + 1,
                     MAX_ATTEMPTS)
        raise errors.SeglogError(
            f"writing DLQ records to {dlq_tp.topic}-{dlq_tp.partition} failed with "
            f"error {codes.BY_CODE[code].name if code in codes.BY_CODE else code}")

    async def _send(self, dlq_tp: TopicPartition, chunk: Sequence[_Pending]) -> int:
        """One DLQ batch to the partition's leader, acks=-1 (Kafka's Produce): through the
        seam's append when this broker leads it, else a Produce request; the error code."""
        now_ms = self._broker.now_ms()
        replica, leader = await self._leader(dlq_tp)
        if replica is None:
            topic = self._broker.cluster.assignments.get(dlq_tp.topic)
            if topic is None or topic.topic_id is None:
                return codes.UNKNOWN_TOPIC_ID
            batch = get_backend(getattr(self._broker.store, "backend", None)).encode_batch(
                [p.value for p in chunk], keys=[p.key for p in chunk],
                timestamps_ms=[now_ms] * len(chunk), headers=[p.headers for p in chunk])
            return await self._remote().produce(
                leader, dlq_tp, topic.topic_id, batch, acks=PRODUCE_ACKS,
                timeout_ms=int(PRODUCE_TIMEOUT_S * 1000))

        def write(log_: Any) -> int:
            _first, last = log_.append_batch(
                [p.value for p in chunk], keys=[p.key for p in chunk],
                timestamps_ms=[now_ms] * len(chunk), headers=[p.headers for p in chunk])
            return int(last)

        result = await self._broker.cluster.append(
            dlq_tp, write, acks=PRODUCE_ACKS, origin=AppendOrigin.CLIENT,
            timeout_s=PRODUCE_TIMEOUT_S)
        return int(result.error_code)

    # --- the share partition's side ------------------------------------------------------

    async def archive_batches(self, group_id: str, tp: TopicPartition,
                              topic_id: uuid.UUID | None, share_partition: Any,
                              batches: Sequence[Any], *,
                              persist: Callable[[], Awaitable[bool]] | None = None,
                              lock: asyncio.Lock | None = None) -> None:
        """:meth:`enqueue` with ``share_partition`` for each of ``batches`` (its
        ``take_dlq_batches()``: ``first_offset``, ``last_offset``, ``delivery_count``,
        ``cause``), one after the other."""
        for batch in batches:
            await self.enqueue(group_id, tp, topic_id, int(batch.first_offset),
                               int(batch.last_offset), int(batch.delivery_count),
                               str(batch.cause), share_partition=share_partition,
                               persist=persist, lock=lock)

    async def forget(self, group_id: str, tp: TopicPartition, topic_id: uuid.UUID | None,
                     first_offset: int, last_offset: int) -> None:
        """Drop the exactly-once record of a range whose ARCHIVED state is persisted."""
        key = _progress_key(group_id, tp, topic_id)
        async with self._lock:
            kept = [e for e in self._progress
                    if not (e["key"] == key and e["first"] <= last_offset
                            and first_offset <= e["last"])]
            if len(kept) != len(self._progress):
                self._progress = kept
                await self._save()

    def pending_ranges(self) -> list[tuple[str, int, int]]:
        """The ranges whose exactly-once record is kept: ``(key, first, last)``."""
        return [(e["key"], int(e["first"]), int(e["last"])) for e in self._progress]

    # --- exactly-once bookkeeping --------------------------------------------------------

    def _recorded(self, key: str, first: int, last: int) -> dict[str, Any] | None:
        for entry in self._progress:
            if entry["key"] == key and entry["first"] <= last and first <= entry["last"]:
                return entry
        return None

    async def _record(self, key: str, first: int, last: int, dlq_tp: TopicPartition,
                      dlq_from: int) -> None:
        self._progress.append({"key": key, "first": first, "last": last,
                               "dlq_topic": dlq_tp.topic, "dlq_partition": dlq_tp.partition,
                               "dlq_from": dlq_from})
        await self._save()

    async def _save(self) -> None:
        data = json.dumps({"version": 1, "ranges": self._progress}, sort_keys=True)
        await self._broker.run_blocking(_write_atomically, self._progress_path, data)

    async def _already_written(self, dlq_tp: TopicPartition, dlq_from: int,
                               group_id: str, tp: TopicPartition, first: int,
                               last: int) -> set[int]:
        """The source offsets of ``[first, last]`` whose DLQ records are in the DLQ
        partition from ``dlq_from`` on (by their ``__dlq.errors.*`` headers).

        Here: the leader's log to its end. At another broker: a consumer's Fetches to the
        high watermark, once that has reached the log end offset the leader answered
        first (a record appended by a send whose answer was lost is then either committed,
        and seen, or gone for good: acks=-1 and no unclean election); waited for at most
        :data:`PRODUCE_TIMEOUT_S`, then the write fails rather than risk a duplicate."""
        replica, leader = await self._leader(dlq_tp)
        if replica is not None:
            dlq_log = replica.log
            start = max(dlq_from, int(dlq_log.start_offset))
            records: Iterable[Any] = () if start >= int(dlq_log.end_offset) else \
                dlq_log.records(start, max_offset=int(dlq_log.end_offset))
            return _offsets_in(records, group_id, tp, first, last)
        remote = self._remote()
        _hw, end_offset = await remote.offsets(leader, dlq_tp)
        deadline = asyncio.get_running_loop().time() + PRODUCE_TIMEOUT_S
        while True:
            found: set[int] = set()
            high_watermark = await remote.read(
                leader, dlq_tp, dlq_from,
                lambda record: found.update(_offsets_in((record,), group_id, tp, first, last)))
            if high_watermark >= end_offset:
                return found
            if asyncio.get_running_loop().time() > deadline:
                raise errors.SeglogError(
                    f"{dlq_tp.topic}-{dlq_tp.partition}: the high watermark ({high_watermark})"
                    f" did not reach the end offset {end_offset} in {PRODUCE_TIMEOUT_S} s")
            await asyncio.sleep(0.1)


def _offsets_in(records: Iterable[Any], group_id: str, tp: TopicPartition, first: int,
                last: int) -> set[int]:
    """The source offsets in ``[first, last]`` named by DLQ records of ``tp`` and group
    ``group_id`` among ``records``."""
    found: set[int] = set()
    want = {HEADER_TOPIC: tp.topic.encode(), HEADER_PARTITION: str(tp.partition).encode(),
            HEADER_GROUP: group_id.encode()}
    for record in records:
        headers = dict(record.headers)
        if all(headers.get(name) == value for name, value in want.items()):
            try:
                offset = int(headers.get(HEADER_OFFSET) or b"-1")
            except ValueError:
                continue
            if first <= offset <= last:
                found.add(offset)
    return found


def _chunks(pending: Iterable[_Pending], max_message_bytes: int) -> Iterator[list[_Pending]]:
    """Kafka's ``topicProduceData`` loop: records added while the batch (61 bytes of header
    plus each record's size) stays within ``max_message_bytes``; a batch has at least one
    record. Timestamp deltas are 0 (one clock reading per batch)."""
    chunk: list[_Pending] = []
    size_bytes = _BATCH_OVERHEAD_BYTES
    for p in pending:
        record_bytes = record_size_bytes(len(chunk), 0, p.key, p.value, p.headers)
        if size_bytes + record_bytes > max_message_bytes and chunk:
            yield chunk
            chunk, size_bytes = [], _BATCH_OVERHEAD_BYTES
            record_bytes = record_size_bytes(0, 0, p.key, p.value, p.headers)
        chunk.append(p)
        size_bytes += record_bytes
    if chunk:
        yield chunk


def _check_parameters(group_id: str, tp: TopicPartition, first_offset: int,
                      last_offset: int) -> None:
    """Kafka's ``DefaultShareGroupDLQManager.validate``, in its words."""
    prefix = "DLQ records parameters"
    if not group_id:
        raise errors.InvalidArgumentError(f"{prefix} group cannot be null or empty.")
    if tp.partition < 0:
        raise errors.InvalidArgumentError(f"{prefix} partition cannot be negative.")
    if first_offset < 0:
        raise errors.InvalidArgumentError(f"{prefix} first offset cannot be negative.")
    if last_offset < 0:
        raise errors.InvalidArgumentError(f"{prefix} last offset cannot be negative.")
    if last_offset < first_offset:
        raise errors.InvalidArgumentError(
            f"{prefix} last offset cannot be less than first offset.")


def _progress_key(group_id: str, tp: TopicPartition, topic_id: uuid.UUID | None) -> str:
    # The topic id keeps a recreated topic of the same name apart.
    return json.dumps([group_id, tp.topic, str(topic_id) if topic_id else "", tp.partition])


def _load_progress(path: str) -> list[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        log.warning("share DLQ: %s unreadable (%s); ranges resumed are written as Kafka "
                    "writes them (possibly twice)", path, exc)
        return []
    ranges = data.get("ranges") if isinstance(data, dict) else None
    return [r for r in ranges or () if isinstance(r, dict)
            and {"key", "first", "last", "dlq_from"} <= set(r)]


def _write_atomically(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a fsync'd temporary file and a rename."""
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
    directory = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _group_config_source(broker: BrokerState) -> Callable[[str, str], str | None]:
    """The configs group ``group_id`` sets, as the broker's group configs
    (:func:`seglog.server.apis.group_configs.group_configs`) hold them, or none set (every
    group without a DLQ) while that module is not there."""
    try:
        from .apis import group_configs as gc
    except ImportError:
        return lambda _group_id, _name: None

    def lookup(group_id: str, name: str) -> str | None:
        value = gc.group_configs(broker).get(group_id).get(name)
        return None if value is None else str(value)

    return lookup


def share_dlq_manager(broker: BrokerState) -> ShareDlqManager:
    """The broker's :class:`ShareDlqManager`, made on first use (in ``broker.extensions``)."""
    manager = broker.extensions.get(EXTENSION_KEY)
    if not isinstance(manager, ShareDlqManager):
        manager = broker.extensions[EXTENSION_KEY] = ShareDlqManager(broker)
    return manager


def dlq_enabled(broker: BrokerState, group_id: str) -> bool:
    """Whether share group ``group_id`` has a DLQ (Kafka's ``isDLQEnabledForGroup``; the
    share partition's ``SharePartitionConfig.dlq_enabled``)."""
    return share_dlq_manager(broker).dlq_enabled(group_id)


def find_dlq_manager(broker: BrokerState) -> ShareDlqManager:
    """The name the share fetch path (:mod:`seglog.server.share_partitions`) looks up:
    :func:`share_dlq_manager`."""
    return share_dlq_manager(broker)
