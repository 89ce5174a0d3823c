"""The share consumer: many workers taking records from one queue on the log (KIP-932).

A consumer group gives each partition to one member; a *share group* lets every member take
records from every partition, one record to one member at a time. :meth:`ShareConsumer.poll`
*acquires* records for ``share.record.lock.duration.ms`` (the group's config, 30 s by
default); the consumer then acknowledges each one: ACCEPT (done), RELEASE (back to the queue,
delivered again, to any member, with ``delivery_count`` one higher) or REJECT (never
delivered again). A record not acknowledged before its lock runs out goes back to the queue
too, and one delivered ``share.delivery.count.limit`` times (5) is archived. The semantics
are those of Kafka's ``KafkaShareConsumer``:

* ``share_acknowledgement_mode="implicit"`` (Kafka's default): the records of a poll are
  accepted by the next :meth:`~ShareConsumer.poll`, :meth:`~ShareConsumer.commit_sync`,
  :meth:`~ShareConsumer.commit_async` or :meth:`~ShareConsumer.close`;
  :meth:`~ShareConsumer.acknowledge` raises :class:`~seglog.errors.IllegalStateError`.
* ``"explicit"``: every record of a poll must be acknowledged before the next poll
  (:class:`~seglog.errors.IllegalStateError` otherwise).
* Acknowledgements are kept in the consumer until a poll (which sends them with its fetch),
  :meth:`~ShareConsumer.commit_sync` (which sends them and returns each partition's outcome)
  or :meth:`~ShareConsumer.commit_async`; an outcome is reported to the callback of
  :meth:`~ShareConsumer.set_acknowledgement_commit_callback`.
* :meth:`~ShareConsumer.close` sends what was acknowledged (in implicit mode, accepts the
  last poll's records) and leaves the group: records it still holds go back to the queue.

The broker side is the Store's (:meth:`Store.share_groups
<seglog.store.Store.share_groups>`, :mod:`seglog.store_share_groups`): one share-partition
state machine per (group, partition) shared by every ShareConsumer of the Store under a lock,
its state written to ``__share_group_state`` as Kafka's share coordinator writes it, so a
reopened Store redelivers exactly the records that were not acknowledged. The consumer talks
to it only through :class:`~seglog.broker_api.ShareGroupsApi`.

Threads share a queue through one Store, each with its own ShareConsumer. A data directory
has one writer, so processes share a queue through ``seglog serve`` with any Kafka share
consumer (confluent-kafka's ``ShareConsumer``, Kafka's ``KafkaShareConsumer``).

Thread safety: a :class:`ShareConsumer` is used by one thread at a time, as Kafka's is.
"""

from __future__ import annotations

import itertools
import time
from enum import IntEnum
from typing import Any, Callable, Iterable

from .. import error_codes
from ..arguments import check_int_argument
from ..broker_api import BrokerApi
from ..errors import (
    CorruptRecordError,
    IllegalStateError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    InvalidGroupIdError,
    InvalidRecordStateError,
    LogClosedError,
    SeglogError,
    ShareAcknowledgeError,
)
from ..types import ConsumerRecord, ShareConsumerRecord, TopicPartition

__all__ = ["AcknowledgeType", "ShareConsumer", "ShareConsumerRecord",
           "SHARE_ACKNOWLEDGEMENT_MODES"]

#: Kafka's ``share.acknowledgement.mode`` values; ``implicit`` is its default.
SHARE_ACKNOWLEDGEMENT_MODES = ("implicit", "explicit")
#: Kafka's ``max.poll.records`` default.
MAX_POLL_RECORDS_DEFAULT = 500
#: Longest wait of one round while no Producer of this store signals (appends straight on a
#: Log are seen within it).
_WAIT_SLICE_MS = 20
#: Kafka's acknowledge type id of an offset the fetch acquired that holds no record (a
#: control record, or one removed by compaction).
_GAP = 0

_client_ids = itertools.count(1)


class AcknowledgeType(IntEnum):
    """How a share consumer settles a record (Kafka's ``AcknowledgeType``, with its ids on
    the wire): ACCEPT processed; RELEASE back to the queue for another delivery; REJECT
    never delivered again; RENEW keep the acquisition lock for another lock duration."""

    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


#: Kafka's acknowledge type ids a share consumer sends (GAP is the consumer's own).
_ACKNOWLEDGE_IDS = {int(t): int(t) for t in AcknowledgeType}
_RENEW = int(AcknowledgeType.RENEW)


def _error_for(code: int, tp: TopicPartition) -> SeglogError:
    if code == error_codes.INVALID_RECORD_STATE:
        return InvalidRecordStateError(f"{tp}: {error_codes.message(code)}")
    return ShareAcknowledgeError(f"{tp}: {error_codes.name(code)}: {error_codes.message(code)}",
                                 code)


def _ranges(acks: dict[int, int]) -> list[tuple[int, int, tuple[int, ...]]]:
    """``{offset: type}`` as ``(first, last, (type,))`` runs of consecutive offsets with one
    type (one AcknowledgementBatch each, as Kafka's client sends them)."""
    out: list[tuple[int, int, tuple[int, ...]]] = []
    first = last = kind = -1
    for offset in sorted(acks):
        ack = acks[offset]
        if offset == last + 1 and ack == kind:
            last = offset
            continue
        if first >= 0:
            out.append((first, last, (kind,)))
        first = last = offset
        kind = ack
    if first >= 0:
        out.append((first, last, (kind,)))
    return out


class ShareConsumer:
    """A member of share group ``group_id`` on a :class:`~seglog.store.Store` (see the
    module docstring).

    ``ShareConsumer(store, group_id, *, share_acknowledgement_mode="implicit",
    max_poll_records=500, client_id=None, check_crcs=True)``, or
    :meth:`Store.share_consumer <seglog.store.Store.share_consumer>`.

    * ``share_acknowledgement_mode``: ``"implicit"`` or ``"explicit"`` (Kafka's
      ``share.acknowledgement.mode``).
    * ``max_poll_records``: the most records a poll acquires (Kafka's ``max.poll.records``;
      whole batches may make a poll return a few more, as Kafka's batch-optimised
      acquisition does).
    * ``check_crcs``: verify each batch's CRC32C before decoding it; a corrupt batch's
      records are REJECTed and :meth:`poll` raises :class:`~seglog.errors.CorruptRecordError`
      (Kafka's client does the same).

    The lock duration, delivery-count limit and where a new group starts
    (``share.auto.offset.reset``, ``latest`` by default) are the group's configs:
    ``store.share_groups().alter_group_config(group_id, {...})``.

    Raises :class:`~seglog.errors.InvalidGroupIdError` for an empty group id,
    :class:`~seglog.errors.InvalidArgumentError` for an unknown mode,
    :class:`~seglog.errors.ReadOnlyError` on a read-only store. Not thread-safe: one
    ShareConsumer per thread.
    """

    def __init__(self, store: BrokerApi, group_id: str, *,
                 share_acknowledgement_mode: str = "implicit",
                 max_poll_records: int = MAX_POLL_RECORDS_DEFAULT,
                 client_id: str | None = None, check_crcs: bool = True):
        if not isinstance(group_id, str) or not group_id:
            raise InvalidGroupIdError(f"group_id must be a non-empty str, got {group_id!r}")
        if share_acknowledgement_mode not in SHARE_ACKNOWLEDGEMENT_MODES:
            raise InvalidArgumentError(
                f"Invalid value {share_acknowledgement_mode!r} for configuration "
                f"share.acknowledgement.mode. The value must either be 'implicit' or "
                f"'explicit'.")
        self.max_poll_records = check_int_argument("max_poll_records", max_poll_records,
                                                   minimum=1)
        self._store = store
        self._groups = store.share_groups()
        self.group_id = group_id
        self.share_acknowledgement_mode = share_acknowledgement_mode
        self._implicit = share_acknowledgement_mode == "implicit"
        self.client_id = client_id or f"share-consumer-{group_id}-{next(_client_ids)}"
        self.check_crcs = bool(check_crcs)
        self._member_id: str | None = None
        self._subscription: frozenset[str] = frozenset()
        # The last poll's records not acknowledged yet, and the acknowledgements not sent.
        # Keyed by TopicPartition, looked up by plain (topic, partition) tuples (equal).
        self._in_flight: dict[tuple[str, int], dict[int, ShareConsumerRecord]] = {}
        self._pending: dict[tuple[str, int], dict[int, int]] = {}
        # RENEWed records waiting for the broker's answer, then for the next poll.
        self._renewing: dict[tuple[str, int, int], ShareConsumerRecord] = {}
        self._renewed: dict[tuple[str, int, int], ShareConsumerRecord] = {}
        self._callback: Callable[[dict, Exception | None], Any] | None = None
        self._next_fetch = 0
        self._closed = False

    # --- subscription ------------------------------------------------------------------------

    @property
    def member_id(self) -> str | None:
        """This member's id in the share group, or None before :meth:`subscribe`."""
        return self._member_id

    def subscribe(self, topics: Iterable[str]) -> None:
        """Join the share group for ``topics`` (replacing the subscription; empty:
        :meth:`unsubscribe`); a topic that does not exist yet is read once it does. Raises
        ``TypeError`` for a str, ``ValueError`` for an empty topic name."""
        self._check_open()
        if isinstance(topics, str):
            raise InvalidArgumentTypeError(
                "topics must be a collection of topic names, not a str")
        topics = frozenset(topics)
        if any(not isinstance(t, str) or not t.strip() for t in topics):
            raise InvalidArgumentError(
                "Topic collection to subscribe to cannot contain null or empty topic")
        if not topics:
            self.unsubscribe()
            return
        self._member_id = self._groups.join(self.group_id, topics, member_id=self._member_id)
        self._subscription = topics

    def subscription(self) -> set[str]:
        """The subscribed topics."""
        self._check_open()
        return set(self._subscription)

    def unsubscribe(self) -> None:
        """Send what was acknowledged, then leave the group (the records still held go back
        to the queue)."""
        self._check_open()
        self._leave()

    def _leave(self) -> None:
        if self._member_id is None:
            return
        if self._implicit:
            self._accept_in_flight()
        try:
            self._send(report=True)
        finally:
            self._groups.leave(self.group_id, self._member_id)
            self._member_id = None
            self._subscription = frozenset()
            self._in_flight.clear()
            self._pending.clear()
            self._renewing.clear()
            self._renewed.clear()

    # --- polling -----------------------------------------------------------------------------

    def poll(self, timeout_ms: int = 0, max_records: int | None = None
             ) -> list[ShareConsumerRecord]:
        """Acquire and return records (each with its ``delivery_count``), waiting up to
        ``timeout_ms`` when none is available. First, in implicit mode, the last poll's
        records are accepted; the acknowledgements made since the last send go with the
        fetch, their outcome to the acknowledgement commit callback.

        Raises :class:`~seglog.errors.IllegalStateError` when not subscribed, after close,
        or in explicit mode while a record of the last poll is not acknowledged;
        :class:`~seglog.errors.CorruptRecordError` for a batch failing its CRC (its records
        are rejected).
        """
        self._check_open()
        if self._member_id is None:
            raise IllegalStateError("Consumer is not subscribed to any topics.")
        if self._implicit:
            self._accept_in_flight()
        elif any(self._in_flight.values()):
            raise IllegalStateError(
                "All records must be acknowledged in explicit acknowledgement mode.")
        self._in_flight.clear()
        max_records = self.max_poll_records if max_records is None else \
            check_int_argument("max_records", max_records, minimum=1)
        timeout_ms = check_int_argument("timeout_ms", timeout_ms)
        self._send(report=True)
        if self._renewed:
            # Kafka's client hands the renewed records out again, before any new fetch.
            renewed = sorted(self._renewed.values(), key=lambda r: (r.topic, r.partition,
                                                                    r.offset))
            self._renewed.clear()
            for record in renewed:
                self._in_flight.setdefault((record.topic, record.partition),
                                           {})[record.offset] = record
            return renewed
        deadline = time.monotonic() + max(0, timeout_ms) / 1000
        while True:
            seq = self._store.append_count
            records = self._fetch(max_records)
            remaining_s = deadline - time.monotonic()
            if records or remaining_s <= 0:
                return records
            wait_s = min(remaining_s, _WAIT_SLICE_MS / 1000)
            lock_deadline_ms = self._groups.next_lock_deadline_ms(self.group_id)
            if lock_deadline_ms is not None:
                wait_s = min(wait_s, max(0.0, lock_deadline_ms / 1000 - time.time()) + 0.001)
            self._store.wait_for_appends(seq, wait_s)

    def _fetch(self, max_records: int) -> list[ShareConsumerRecord]:
        assert self._member_id is not None
        self._next_fetch += 1
        fetched = self._groups.fetch(self.group_id, self._member_id, max_records=max_records,
                                     start_index=self._next_fetch)
        out: list[ShareConsumerRecord] = []
        corrupt: CorruptRecordError | None = None
        for tp, batches, acquired in fetched:
            try:
                records = self._decode(tp, batches, acquired)
            except CorruptRecordError as exc:
                corrupt = corrupt or exc
                continue
            self._in_flight[tp] = {r.offset: r for r in records}
            out.extend(records)
        if corrupt is not None:
            self._send(report=True)  # the corrupt batches' rejections
            if not out:
                raise corrupt
        return out

    def _decode(self, tp: TopicPartition, batches: list, acquired: list
                ) -> list[ShareConsumerRecord]:
        """The acquired records of ``batches`` with their delivery counts; acquired offsets
        with no record (control records, compacted away) are acknowledged as GAP, as
        Kafka's client does. A corrupt batch's acquired records are REJECTed and
        CorruptRecordError raised once the rest is handed out."""
        topic, partition = tp
        pending = self._pending.setdefault(tp, {})
        out: list[ShareConsumerRecord] = []
        rejected: set[int] = set()
        corrupt: CorruptRecordError | None = None
        ranges = sorted(acquired)
        new = tuple.__new__  # a ShareConsumerRecord without a Python-level _make call
        for batch in batches:
            if batch.is_control:
                continue
            base, last_in_batch = batch.base_offset, batch.last_offset
            overlapping = [r for r in ranges if r[0] <= last_in_batch and r[1] >= base]
            if not overlapping:
                continue
            try:
                records = batch.consumer_records(ConsumerRecord, topic, partition,
                                                 overlapping[0][0],
                                                 check_crcs=self.check_crcs)
            except CorruptRecordError as exc:
                corrupt = corrupt or exc
                for first, last, _count in overlapping:
                    for offset in range(max(first, base), min(last, last_in_batch) + 1):
                        pending[offset] = AcknowledgeType.REJECT
                        rejected.add(offset)
                continue
            first, last, count = overlapping[0]
            if len(overlapping) == 1 and last >= last_in_batch:
                # The usual case: one acquired range covers the rest of the batch.
                out.extend([new(ShareConsumerRecord, (*r, count)) for r in records])
                continue
            index = 0
            for record in records:
                offset = record.offset
                while index < len(overlapping) and overlapping[index][1] < offset:
                    index += 1
                if index == len(overlapping):
                    break
                first, _last, count = overlapping[index]
                if offset >= first:
                    out.append(new(ShareConsumerRecord, (*record, count)))
        acquired_count = sum(last - first + 1 for first, last, _count in ranges)
        if len(out) + len(rejected) < acquired_count:
            # Offsets acquired with no record in them: control records, compacted away.
            seen = {r.offset for r in out} | rejected
            for first, last, _count in ranges:
                for offset in range(first, last + 1):
                    if offset not in seen:
                        pending[offset] = _GAP
        if corrupt is not None and not out:
            raise corrupt
        return out

    # --- acknowledgements --------------------------------------------------------------------

    def acknowledge(self, record: ShareConsumerRecord,
                    type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """Settle ``record`` (of the last poll) as ``type``; sent by the next poll,
        :meth:`commit_sync`, :meth:`commit_async` or :meth:`close`. RENEW keeps the record
        for another lock duration (when the group's ``share.renew.acknowledge.enable``
        allows it) and the next poll returns it again, before anything new. Raises
        :class:`~seglog.errors.IllegalStateError` in implicit mode, after close, or for a
        record not in the last poll or already acknowledged;
        :class:`~seglog.errors.InvalidArgumentError` for an unknown type."""
        self._acknowledge(record[0], record[1], record[2], type)

    def acknowledge_offset(self, topic: str, partition: int, offset: int,
                           type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """:meth:`acknowledge` by coordinates (confluent-kafka's ``acknowledge_offset``)."""
        self._acknowledge(topic, partition, offset, type)

    def _acknowledge(self, topic: str, partition: int, offset: int, type: int) -> None:
        # Per record in a worker's loop: plain tuples and dicts, no enum or NamedTuple call.
        if self._closed:
            raise IllegalStateError("This consumer has already been closed.")
        if self._implicit:
            raise IllegalStateError("Implicit acknowledgement of delivery is being used.")
        ack = _ACKNOWLEDGE_IDS.get(type) if type.__class__ is not bool else None
        if ack is None:
            raise InvalidArgumentError(f"Unknown acknowledge type: {type!r}")
        key = (topic, partition)
        in_flight = self._in_flight.get(key)
        if in_flight is None or offset not in in_flight:
            raise IllegalStateError("The record cannot be acknowledged.")
        record = in_flight.pop(offset)
        if ack == _RENEW:
            # Held again for a lock duration once the broker takes the RENEW; then the next
            # poll returns it (Kafka's ShareInFlightBatch.renew / takeRenewals).
            self._renewing[(topic, partition, offset)] = record
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[TopicPartition(topic, partition)] = {}
        pending[offset] = ack

    def _accept_in_flight(self) -> None:
        for tp, records in self._in_flight.items():
            pending = self._pending.setdefault(tp, {})
            for offset in records:
                pending[offset] = AcknowledgeType.ACCEPT
            records.clear()

    def _send(self, *, report: bool) -> dict[TopicPartition, SeglogError | None]:
        """Send the pending acknowledgements; each partition's outcome (None: done)."""
        acks = {TopicPartition(*tp): _ranges(offsets)
                for tp, offsets in self._pending.items() if offsets}
        self._pending.clear()
        if not acks or self._member_id is None:
            return {}
        codes = self._groups.acknowledge(self.group_id, self._member_id, acks)
        results: dict[TopicPartition, SeglogError | None] = {
            tp: None if code == error_codes.NONE else _error_for(code, tp)
            for tp, code in codes.items()}
        if self._renewing:
            for where, record in self._renewing.items():
                if results.get(TopicPartition(where[0], where[1]), True) is None:
                    self._renewed[where] = record
            self._renewing.clear()
        if report and self._callback is not None:
            for tp, error in results.items():
                offsets = {tp: {o for first, last, _t in acks[tp] for o in range(first, last + 1)}}
                self._callback(offsets, error)
        return results

    def commit_sync(self) -> dict[TopicPartition, SeglogError | None]:
        """Send the acknowledgements (in implicit mode, first accept the last poll's
        records) and return each partition's outcome: None when acknowledged and
        persisted, else a :mod:`seglog.errors` exception (not raised), e.g.
        :class:`~seglog.errors.InvalidRecordStateError` for records whose lock had run out
        (Kafka's ``commitSync`` answer). Raises :class:`~seglog.errors.IllegalStateError`
        after close."""
        self._check_open()
        if self._implicit:
            self._accept_in_flight()
        return self._send(report=True)

    def commit_async(self) -> None:
        """As :meth:`commit_sync`, the outcome going only to the acknowledgement commit
        callback (in-process, the acknowledgements are applied before it returns)."""
        self.commit_sync()

    def set_acknowledgement_commit_callback(
            self, callback: Callable[[dict, Exception | None], Any] | None) -> None:
        """``callback(offsets, exception)`` after each partition's acknowledgements are
        sent: ``offsets`` ``{TopicPartition: set of offsets}``, ``exception`` None or the
        :mod:`seglog.errors` exception (Kafka's AcknowledgementCommitCallback)."""
        self._check_open()
        self._callback = callback

    @property
    def acquisition_lock_timeout_ms(self) -> int:
        """The group's acquisition lock duration (``share.record.lock.duration.ms``)."""
        return int(self._groups.group_config(self.group_id)["share.record.lock.duration.ms"])

    # --- lifecycle ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("This consumer has already been closed.")
        if self._store.closed:
            raise LogClosedError(f"store {self._store.path} is closed")

    def close(self) -> None:
        """Send what was acknowledged (implicit mode: accept the last poll's records) and
        leave the group; records still held go back to the queue at once. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._store.closed:
            return
        self._leave()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __enter__(self) -> "ShareConsumer":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"ShareConsumer({self.client_id!r}, group={self.group_id!r}, "
                f"topics={sorted(self._subscription)})")
