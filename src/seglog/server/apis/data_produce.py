"""Produce (API key 0, v3-v13; v0-v2 advertised and refused, as Kafka): each partition's record batch appended with
:meth:`Log.append_raw <seglog.storage.log.Log.append_raw>` exactly as the client built it, and
Kafka's answer for every way it can fail (``KafkaApis.handleProduceRequest``,
``ProduceRequest.validateRecords``, ``ReplicaManager.appendRecords`` / ``appendToLocalLog``,
``Partition.appendRecordsToLeader``).

Per partition, in Kafka's order: an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION
(UNKNOWN_TOPIC_ID for an unknown id in v13); the records must be exactly one RecordBatch of
magic 2 (INVALID_RECORD; CORRUPT_MESSAGE for a size or magic no batch can have; bytes after
the first whole batch that are not a whole batch are ignored, as Kafka's batch iterator does);
zstd needs v7+ (UNSUPPORTED_COMPRESSION_TYPE). Then, when every check passed: acks other than
-1, 0, 1 is INVALID_REQUIRED_ACKS; an internal topic is INVALID_TOPIC_EXCEPTION unless the
client is Kafka's admin client (``__admin_client``), whose records there must be ones the
coordinator can load back (INVALID_RECORD otherwise, where Kafka appends them and then
fails the coordinator partition's load: :mod:`seglog.coordinator.internal_records`). acks=-1 is acks=1 here: Kafka checks
the in-sync replicas against ``min(min.insync.replicas, replication factor)``
(``Partition.effectiveMinIsr``), and the replication factor of every partition is 1, so a
single broker never answers NOT_ENOUGH_REPLICAS (the real Kafka 4.4 broker, one node,
``min.insync.replicas=2``, acks=-1: success). The Log's errors carry their Kafka codes
(MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, CORRUPT_MESSAGE, INVALID_RECORD, INVALID_TIMESTAMP,
OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE,
KAFKA_STORAGE_ERROR...). A retried idempotent batch the producer state recognises is answered
as a success with its original offsets, as Kafka answers a duplicate. The batch is written
with the leader epoch (0) in its partition leader epoch field, as Kafka's leader stamps it.

In a cluster (``zookeeper.connect``; :mod:`seglog.cluster.replica_manager`), Kafka 2.8's
rules: a partition this broker does not lead is NOT_LEADER_OR_FOLLOWER; acks=-1 with a
committed ISR smaller than the topic's ``min.insync.replicas`` is NOT_ENOUGH_REPLICAS before
anything is written; the Log stamps the current leader epoch; an acks=-1 append then waits
(``DelayedProduce``, bounded by the request's ``timeout_ms``) until the high watermark passes
it: success, NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank meanwhile (the records are
kept), NOT_LEADER_OR_FOLLOWER when leadership moved, REQUEST_TIMED_OUT.

Error responses carry base offset -1, log append time -1 and, as Kafka, the log start offset
only for the errors of the append that Kafka computes it for (not for the request checks,
nor the unknown-partition, too-large, corrupt and storage errors). INVALID_TIMESTAMP and
INVALID_RECORD from the Log also carry the error message and the failing records' indexes
(``record_errors``, v8+: out-of-range timestamps, keyless records of a compacted topic). A
success answers the base offset, the log append time (-1 unless the topic uses
LogAppendTime) and the log start offset.

Transactions (``ReplicaManager.handleProduceAppend``). Transactional batches in a request
without a transactional id fail the whole request with TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
and transactional batches of more than one producer id with INVALID_PRODUCER_ID_MAPPING.
The first transactional batch of a producer in a partition (the partition's producer state
has no transaction of that producer and epoch open) goes to the transaction coordinator
before anything is appended (KIP-890, :func:`.txn.verify_produce_partitions`: verified,
``transaction.partition.verification.enable``, or from Produce v12+ added to the
transaction; TRANSACTION_ABORTABLE from v11 where older versions get INVALID_TXN_STATE),
and checked again with a local coordinator under its lock as it is appended:
INVALID_TXN_STATE "Partition was not added to the transaction" unless AddPartitionsToTxn
added it, INVALID_PRODUCER_ID_MAPPING / INVALID_PRODUCER_EPOCH for another producer, and
NOT_ENOUGH_REPLICAS while the transaction completes (Kafka's answer to CONCURRENT_TRANSACTIONS
here), each before anything is written.

With acks=0 there is no response; when any partition failed the connection is closed
(:class:`ProduceFailedWithoutAck`), as Kafka closes it so that the producer refreshes its
metadata.
"""

from __future__ import annotations

import struct
import time
import uuid
from typing import TYPE_CHECKING, Any

from ... import error_codes as codes
from ... import errors
from ... import format as fmt
from ...cluster.coordinators import TRANSACTION_STATE_TOPIC, partition_in
from ...cluster.seam import AppendOrigin, AppendResult, PartitionSeam
from ...coordinator.internal_records import internal_record_errors
from ...types import TopicPartition
from .. import quotas
from ..authorization import (
    AUTHORIZER_KEY,
    AclOperation,
    ResourceType,
    authorize,
    filter_authorized,
)
from ..context import CloseConnection, RawResponse, RequestContext
from . import txn
from .data_produce_codec import RecordErrors, TopicKey, encode_produce_response
from .data_produce_request import read_produce_request
from .data_topics import (
    LEADER_EPOCH,
    error_code_for,
    gone_or_storage_error,
    partition_seam,
    topic_ids,
    topic_or_none,
)

if TYPE_CHECKING:
    from ...store import Topic
    from ...storage.log import Log

__all__ = ["API_KEY", "VERSION_MIN", "VERSION_SERVED_MIN", "VERSION_MAX",
           "ProduceFailedWithoutAck", "handle_produce", "handle_produce_body",
           "check_produce_records"]

API_KEY = 0
#: Advertised from v0, served from v3, as Kafka 4.x does (KAFKA-18659): librdkafka before
#: 2.10 (kcat's 2.0.2, for one) silently sends uncompressed batches when ApiVersions does not
#: include Produce v2; a v0-v2 request (no schema in kio, none served since Kafka 4.0) closes
#: the connection, as the real broker closes it.
VERSION_MIN = 0
VERSION_SERVED_MIN = 3
VERSION_MAX = 13

#: Kafka's ``AdminUtils.ADMIN_CLIENT_ID``: the one client allowed to write internal topics.
ADMIN_CLIENT_ID = "__admin_client"
#: The errors of an append after which Kafka answers log start offset -1
#: (``appendToLocalLog``'s first catch); every other append failure carries the partition's
#: log start offset. Failures before the append (the request checks) answer -1 too.
_NO_LOG_START_ERRORS = frozenset({
    codes.UNKNOWN_TOPIC_OR_PARTITION, codes.UNKNOWN_TOPIC_ID, codes.MESSAGE_TOO_LARGE,
    codes.RECORD_LIST_TOO_LARGE, codes.CORRUPT_MESSAGE, codes.KAFKA_STORAGE_ERROR})
#: Errors Kafka answers with the exception's message and the failing records' indexes
#: (``hasCustomErrorMessage``: its RecordValidationException).
_MESSAGE_ERRORS = frozenset({codes.INVALID_RECORD, codes.INVALID_TIMESTAMP})
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_INT64 = struct.Struct(">q")


class ProduceFailedWithoutAck(CloseConnection):
    """A Produce request with acks=0 failed on some partition: Kafka answers nothing and
    closes the connection (the broker core closes it when this escapes the handler)."""


def check_produce_records(records: Any, api_version: int) -> tuple[int, memoryview | None]:
    """Kafka's ``ProduceRequest.validateRecords`` on one partition's records: ``(error code,
    the first batch's bytes)``; the error code is NONE when the records are exactly one
    RecordBatch of magic 2 (bytes after it that make no whole batch are cut off, as Kafka's
    batch iterator ignores them) in a codec ``api_version`` allows."""
    if records is None:
        return codes.INVALID_RECORD, None
    view = memoryview(records)
    size_bytes = len(view)
    if size_bytes < fmt.LOG_OVERHEAD:
        return codes.INVALID_RECORD, None
    batch_length = _INT32.unpack_from(view, fmt.BATCH_LENGTH_POSITION)[0]
    if batch_length < fmt.MIN_BATCH_LENGTH:
        return codes.CORRUPT_MESSAGE, None
    if size_bytes < fmt.HEADER_SIZE_UP_TO_MAGIC:
        return codes.INVALID_RECORD, None
    magic = view[fmt.MAGIC_POSITION]
    if magic > 2:  # a signed byte: 128..255 are negative
        return codes.CORRUPT_MESSAGE, None
    batch_bytes = fmt.LOG_OVERHEAD + batch_length
    if size_bytes < batch_bytes or magic != 2:
        return codes.INVALID_RECORD, None
    if size_bytes - batch_bytes >= fmt.LOG_OVERHEAD:
        second_length = _INT32.unpack_from(view, batch_bytes + fmt.BATCH_LENGTH_POSITION)[0]
        if second_length < fmt.MIN_BATCH_LENGTH:
            return codes.CORRUPT_MESSAGE, None
        if size_bytes - batch_bytes >= fmt.LOG_OVERHEAD + second_length:
            return codes.INVALID_RECORD, None  # a second whole batch
    if api_version < 7 and batch_bytes >= fmt.ATTRIBUTES_POSITION + 2 and \
            view[fmt.ATTRIBUTES_POSITION + 1] & fmt.COMPRESSION_CODEC_MASK == fmt.COMPRESSION_ZSTD:
        return codes.UNSUPPORTED_COMPRESSION_TYPE, None
    return codes.NONE, view[:batch_bytes] if batch_bytes != size_bytes else view


class _Outcome:
    """One partition's answer."""

    __slots__ = ("error_code", "base_offset", "log_append_time_ms", "log_start_offset",
                 "error_message", "record_errors", "last_offset")

    def __init__(self, error_code: int, base_offset: int = -1, log_append_time_ms: int = -1,
                 log_start_offset: int = -1, error_message: str | None = None,
                 record_errors: RecordErrors = ()):
        self.error_code = error_code
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms
        self.log_start_offset = log_start_offset
        self.error_message = error_message
        self.record_errors = record_errors
        #: The batch's last offset after a successful append (what acks=-1 waits for).
        self.last_offset = -1


def _failure(code: int, log: Log | None = None, message: str | None = None,
             record_errors: RecordErrors = ()) -> _Outcome:
    """A failed partition; ``log`` is given for failures of the append itself."""
    start = -1
    if log is not None and code not in _NO_LOG_START_ERRORS:
        try:
            start = log.start_offset
        except errors.SeglogError:
            start = -1
    custom = code in _MESSAGE_ERRORS and log is not None
    return _Outcome(code, log_start_offset=start, error_message=message if custom else None,
                    record_errors=record_errors if custom else ())


def _record_errors(code: int, log: Log, batch: memoryview, now_ms: int) -> RecordErrors:
    """``((record index, message), ...)`` of the records Kafka's LogValidator names for an
    INVALID_TIMESTAMP (timestamps outside ``message.timestamp.before/after.max.ms``) or an
    INVALID_RECORD of a compacted topic (records without a key); () otherwise."""
    config = log.config
    try:
        columns = next(iter(log.backend.iter_batches(batch))).columns()
    except (errors.SeglogError, StopIteration, ValueError):
        return ()
    if code == codes.INVALID_TIMESTAMP:
        low_ms = now_ms - config.message_timestamp_before_max_ms
        high_ms = now_ms + config.message_timestamp_after_max_ms
        return tuple(
            (i, f"Timestamp {int(ts)} of message with offset {i} is out of range. The "
                f"timestamp should be within [{low_ms}, {high_ms}]")
            for i, ts in enumerate(columns.timestamps_ms) if not low_ms <= int(ts) <= high_ms)
    if code == codes.INVALID_RECORD and config.compaction_enabled:
        message = "Compacted topic cannot accept message without key in topic partition."
        return tuple((i, message) for i, length in enumerate(columns.key_lengths)
                     if int(length) < 0)
    return ()


def _producer_of(batch: memoryview) -> tuple[int, int, bool]:
    """``(producer id, producer epoch, is transactional)`` from a checked batch's header."""
    attributes = _INT16.unpack_from(batch, fmt.ATTRIBUTES_POSITION)[0]
    return (_INT64.unpack_from(batch, fmt.PRODUCER_ID_POSITION)[0],
            _INT16.unpack_from(batch, fmt.PRODUCER_EPOCH_POSITION)[0],
            bool(attributes & fmt.TRANSACTIONAL_FLAG_MASK))


def _verify_transaction(ctx: RequestContext, transactional_id: str, topic: Topic, partition: int,
                        log: Log, batch: memoryview) -> _Outcome | None:
    """Kafka's verification of a transactional batch with the coordinator (see the module
    docstring); None when the batch may be appended."""
    producer_id, producer_epoch, transactional = _producer_of(batch)
    if not transactional or producer_id < 0 or not (
            txn.verification_enabled(ctx) or ctx.api_version >= txn.PRODUCE_ADDS_PARTITIONS_SINCE):
        return None
    cluster = partition_seam(ctx.broker)
    coordinator_partition = partition_in(cluster, TRANSACTION_STATE_TOPIC, transactional_id)
    if coordinator_partition is None or cluster.leader_replica(
            TopicPartition(TRANSACTION_STATE_TOPIC, coordinator_partition)) is None:
        # The transaction's coordinator is another broker (the leader of its
        # __transaction_state partition), which this one would have to ask
        # (AddPartitionsToTxn v4 verify_only; Kafka 2.8 has no verification at all).
        return None
    entry = log.producer_state.last_entry(producer_id)
    if entry is not None and entry.current_txn_first_offset is not None \
            and entry.producer_epoch == producer_epoch:
        return None  # the transaction is already open here: verified when it began
    try:
        ctx.broker.store.transaction_coordinator().verify_transactional_append(
            transactional_id, producer_id, producer_epoch,
            TopicPartition(topic.name, partition))
    except errors.InvalidTxnStateError:
        return _Outcome(errors.InvalidTxnStateError.kafka_error_code,
                        error_message="Partition was not added to the transaction")
    except errors.ConcurrentTransactionsError as e:
        return _Outcome(codes.NOT_ENOUGH_REPLICAS, error_message=(
            "Unable to verify the partition has been added to the transaction. Underlying "
            f"error: CONCURRENT_TRANSACTIONS ({e})"))
    except (errors.SeglogError, OSError) as e:
        return _Outcome(error_code_for(e))
    return None


def _append(ctx: RequestContext, topic: Topic, partition: int, batch: memoryview,
            transactional_id: str | None, log: Log) -> _Outcome:
    """Validate and append one partition's batch to its leader ``log`` (the writer the seam's
    append runs): the outcome, whatever went wrong as its error code."""
    if topic.is_internal:
        if ctx.client_id != ADMIN_CLIENT_ID:
            # Kafka's UNKNOWN_LOG_APPEND_INFO: log start offset -1.
            return _failure(codes.INVALID_TOPIC_EXCEPTION)
        refused = _refuse_unloadable_internal_records(topic, partition, batch, log)
        if refused is not None:
            return refused
    if transactional_id is not None:
        refused = _verify_transaction(ctx, transactional_id, topic, partition, log, batch)
        if refused is not None:
            return refused
    config = log.config  # the broker's log.* defaults under the topic's overrides
    now_ms = ctx.broker.now_ms()
    try:
        # A replicated leader's Log stamps its own epoch (Log.become_leader); the standalone
        # broker is leader at epoch 0, as a single Kafka node is.
        first, _last = log.append_raw(batch, now_ms=now_ms, partition_leader_epoch=LEADER_EPOCH)
    except (errors.SeglogError, OSError) as e:
        code = gone_or_storage_error(ctx.broker.store, topic, e)
        record_errors = _record_errors(code, log, batch, now_ms) \
            if code in _MESSAGE_ERRORS else ()
        return _failure(code, log, str(e), record_errors)
    append_time_ms = now_ms if config.message_timestamp_type == "LogAppendTime" else -1
    outcome = _Outcome(codes.NONE, first, append_time_ms, log.start_offset)
    outcome.last_offset = _last
    ctx.broker.metrics.appended(topic.name, _last - first + 1, len(batch))
    return outcome


def _refuse_unloadable_internal_records(topic: Any, partition: int, batch: Any,
                                        log: Any) -> _Outcome | None:
    """INVALID_RECORD (with the records' indexes and reasons) when the admin client's batch
    for an internal topic holds a record its coordinator could not load back
    (:mod:`seglog.coordinator.internal_records`: Kafka appends it and then fails that
    coordinator partition's load; seglog refuses it); None when every record loads. A batch
    that does not decode answers the decoder's error (CORRUPT_MESSAGE for a bad CRC)."""
    try:
        records = [record for whole in log.backend.iter_batches(batch)
                   for record in whole.records(check_crcs=True)]
    except (errors.SeglogError, ValueError) as e:
        return _failure(error_code_for(e), log, str(e))
    bad = internal_record_errors(topic.name, partition, topic.partitions, records)
    if not bad:
        return None
    return _failure(codes.INVALID_RECORD, log,
                    f"{len(bad)} record(s) cannot be loaded by the coordinator of "
                    f"{topic.name}-{partition}; the first, at index {bad[0][0]}: {bad[0][1]}",
                    tuple(bad))


async def handle_produce_body(ctx: RequestContext, body: memoryview) -> RawResponse | None:
    """:func:`handle_produce` on a request body (the broker's path: a raw-request handler).
    The common request (see :func:`_one_partition`), read by the backend's fast path
    (``wire.read_produce_single``), takes the short way, with the same answer; any other is
    read by :mod:`.data_produce_request`, and a body that does not decode closes the
    connection, as any request body that does not decode."""
    short = _short_path(ctx, body)
    if short is not None:
        key, index, outcome, delayed, timeout_ms = short
        if delayed:
            cluster = partition_seam(ctx.broker)
            if not _acks_completed_now(cluster, delayed):
                await _wait_for_acks(cluster, delayed, timeout_ms / 1000.0)
            _acks_failed(delayed)
        if outcome.error_message is None and not outcome.record_errors:
            part: bytes = ctx.broker.wire.encode_produce_single(
                ctx.api_version, key.bytes if isinstance(key, uuid.UUID) else key, index,
                outcome.error_code, outcome.base_offset, outcome.log_append_time_ms,
                outcome.log_start_offset)
        else:
            part = encode_produce_response(ctx.api_version, ((key, ((index, outcome),)),))
        return _new_raw_response(RawResponse, ((part,), 0))
    try:
        request = read_produce_request(ctx.api_version, body)
    except errors.InvalidRequestError as exc:
        raise CloseConnection(str(exc)) from None
    return await handle_produce(ctx, request)


#: ``tuple.__new__``: a RawResponse without the NamedTuple's Python-level ``__new__``.
_new_raw_response = tuple.__new__


def _short_path(ctx: RequestContext, body: memoryview
                ) -> tuple[TopicKey, int, _Outcome, list[tuple[AppendResult, _Outcome]], int
                           ] | None:
    """:func:`_one_partition` on ``body`` when the backend's fast path reads it (one topic of
    one partition), plus the request's timeout in milliseconds; None (nothing done) when the
    general path must answer it."""
    single = ctx.broker.wire.read_produce_single(ctx.api_version, body)
    if single is None:
        return None
    transactional_id, acks, timeout_ms, name, raw_id, index, records = single
    key: TopicKey = name
    if ctx.api_version >= 13:
        key = None if raw_id is None else uuid.UUID(bytes=raw_id)
    done = _one_partition(ctx, transactional_id, acks, key, index, records)
    if done is None:
        return None
    return key, index, done[0], done[1], timeout_ms


def _one_partition(ctx: RequestContext, transactional_id: str | None, acks: int, key: TopicKey,
                   index: int, records: memoryview | None
                   ) -> tuple[_Outcome, list[tuple[AppendResult, _Outcome]]] | None:
    """:func:`handle_produce`'s work for the common request, without its general loops:
    one topic (``key``: its name, or its id from v13) with one partition (``index``), led
    here, known, its ``records`` one checked non-transactional batch, no transactional id,
    acks 1 or -1, no authorizer and no quota on the broker. Returns ``(outcome, the acks=-1
    appends to wait for)``, or None (nothing done) for any other request, which
    :func:`handle_produce` answers. Every check of the append itself is the same call as
    handle_produce's (:func:`_append_to_leader`); what this skips is only what cannot apply:
    the transactional checks (no transactional batch, no transactional id), ACLs (no
    authorizer), quotas (none set), the unknown-topic and bad-records answers (those
    requests take the long way)."""
    if transactional_id is not None or (acks != -1 and acks != 1):
        return None
    broker = ctx.broker
    extensions = broker.extensions
    if extensions.get(AUTHORIZER_KEY) is not None or (
            extensions.get(quotas.EXTENSION_KEY) is not None and quotas.any_quota(ctx)):
        return None
    code, batch = check_produce_records(records, ctx.api_version)
    if code != codes.NONE or batch is None \
            or batch[fmt.ATTRIBUTES_POSITION + 1] & fmt.TRANSACTIONAL_FLAG_MASK:
        return None
    if ctx.api_version >= 13:
        topic = topic_ids(broker).topic(key) if isinstance(key, uuid.UUID) else None
    else:
        topic = topic_or_none(broker.store, key) if isinstance(key, str) else None
    if topic is None or not 0 <= index < topic.partitions:
        return None
    delayed: list[tuple[AppendResult, _Outcome]] = []
    outcome = _append_to_leader(ctx, partition_seam(broker), topic, index, batch, None, acks,
                                delayed)
    return outcome, delayed


async def handle_produce(ctx: RequestContext, request: Any) -> RawResponse | None:
    """Append a Produce request's batches and answer it (see the module docstring): the
    response body (:mod:`.data_produce_codec`), or None for acks=0."""
    started_ns = time.perf_counter_ns()  # the request quota counts the loop time it takes
    version = ctx.api_version
    broker = ctx.broker
    store = broker.store
    acks = request.acks
    by_id = version >= 13
    ids = topic_ids(broker) if by_id else None
    answers: list[tuple[TopicKey, list[tuple[int, _Outcome]]]] = []
    failed = False
    cluster = partition_seam(broker)
    delayed: list[tuple[AppendResult, _Outcome]] = []  # acks=-1: (append, outcome)
    whole_request_error = _transactional_request_error(ctx, request)
    if whole_request_error != codes.NONE:
        answers = [(t.topic_id if by_id else t.name,
                    [(p.index, _failure(whole_request_error)) for p in t.partition_data])
                   for t in request.topic_data]
        if acks == 0:
            raise ProduceFailedWithoutAck(f"produce with acks=0 failed: error "
                                          f"{whole_request_error}")
        return _response(version, answers)
    # KafkaApis: WRITE on each topic named, before its existence is looked at.
    writable = filter_authorized(ctx, AclOperation.WRITE, ResourceType.TOPIC, (
        t.name for t in request.topic_data)) if not by_id else None
    resolved = []
    for topic_data in request.topic_data:
        key = topic_data.topic_id if by_id else topic_data.name
        topic = ids.topic(key) if ids is not None else topic_or_none(store, key)
        denied = (key not in writable) if writable is not None else (
            topic is not None and not authorize(ctx, AclOperation.WRITE, ResourceType.TOPIC,
                                                topic.name))
        resolved.append((topic_data, key, topic, denied))
    unverified = await _verify_transactional(ctx, request, resolved)
    for topic_data, key, topic, denied in resolved:
        outcomes: list[tuple[int, _Outcome]] = []
        for partition_data in topic_data.partition_data:
            index = partition_data.index
            if denied:
                outcome = _failure(codes.TOPIC_AUTHORIZATION_FAILED)
            elif (key, index) in unverified:
                outcome = unverified[(key, index)]
            elif topic is None or not 0 <= index < topic.partitions:
                outcome = _failure(codes.UNKNOWN_TOPIC_ID if by_id and topic is None
                                   else codes.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                code, batch = check_produce_records(partition_data.records, version)
                if code != codes.NONE or batch is None:  # None comes with an error code
                    outcome = _failure(code)
                elif acks not in (-1, 0, 1):
                    outcome = _failure(codes.INVALID_REQUIRED_ACKS)
                else:
                    outcome = _append_to_leader(ctx, cluster, topic, index, batch,
                                                request.transactional_id, acks, delayed)
            failed = failed or outcome.error_code != codes.NONE
            outcomes.append((index, outcome))
        answers.append((key, outcomes))
    # Quotas (KafkaApis: the request is appended, then counted; acks=0 is exempt from the
    # request quota): the larger throttle time goes into the answer and mutes the client.
    throttle_ms = 0 if not quotas.any_quota(ctx) else quotas.produce_throttle_ms(
        ctx, sum(len(p.records or b"") for t in request.topic_data for p in t.partition_data),
        0 if acks == 0 else time.perf_counter_ns() - started_ns)
    if delayed:
        if not _acks_completed_now(cluster, delayed):
            await _wait_for_acks(cluster, delayed, _timeout_s(request))
        failed = _acks_failed(delayed) or failed
    if acks == 0:
        if failed:
            raise ProduceFailedWithoutAck(
                "produce with acks=0 failed: " + ", ".join(
                    f"{key}-{index}: error {o.error_code}" for key, outs in answers
                    for index, o in outs if o.error_code != codes.NONE))
        if throttle_ms:
            # No answer, but the connection is muted all the same (Kafka throttles an acks=0
            # client over its producer_byte_rate too).
            return RawResponse((), throttle_time_ms=throttle_ms)
        return None
    return _response(version, answers, throttle_time_ms=throttle_ms)


async def _verify_transactional(ctx: RequestContext, request: Any,
                                resolved: list[tuple[Any, TopicKey, Topic | None, bool]]
                                ) -> dict[tuple[TopicKey, int], _Outcome]:
    """KIP-890 before any append: the partitions led here where the request's transactional
    producer has no transaction open at its epoch go to the transaction coordinator
    (:func:`.txn.verify_produce_partitions`: verified, or added for a Produce v12+);
    returns the refused ``{(topic key, partition): outcome}``."""
    if request.transactional_id is None:
        return {}
    cluster = partition_seam(ctx.broker)
    keys: dict[TopicPartition, tuple[TopicKey, int]] = {}
    producer: tuple[int, int] | None = None
    for topic_data, key, topic, denied in resolved:
        if denied or topic is None:
            continue
        for partition_data in topic_data.partition_data:
            index = partition_data.index
            code, batch = check_produce_records(partition_data.records, ctx.api_version)
            if not 0 <= index < topic.partitions or code != codes.NONE or batch is None:
                continue  # answered by the append's own checks
            producer_id, producer_epoch, transactional = _producer_of(batch)
            tp = TopicPartition(topic.name, index)
            replica = cluster.leader_replica(tp) if transactional and producer_id >= 0 else None
            if replica is None:
                continue
            entry = replica.log.producer_state.last_entry(producer_id)
            if entry is not None and entry.current_txn_first_offset is not None \
                    and entry.producer_epoch == producer_epoch:
                continue  # its transaction is open here: verified when it began
            producer = (producer_id, producer_epoch)
            keys[tp] = (key, index)
    if producer is None:
        return {}
    refused = await txn.verify_produce_partitions(ctx, request.transactional_id, *producer,
                                                  list(keys))
    return {keys[tp]: _Outcome(code, error_message=message)  # log start offset -1, as Kafka
            for tp, (code, message) in refused.items()}


def _append_to_leader(ctx: RequestContext, cluster: PartitionSeam, topic: Topic, partition: int,
                      batch: memoryview, transactional_id: str | None, acks: int,
                      delayed: list[tuple[AppendResult, _Outcome]]) -> _Outcome:
    """One partition's append through the seam (``Partition.appendRecordsToLeader``): only
    the partition's leader appends (NOT_LEADER_OR_FOLLOWER elsewhere); acks=-1 with fewer
    in-sync replicas than ``min.insync.replicas`` is NOT_ENOUGH_REPLICAS before anything is
    written; an appended acks=-1 partition joins ``delayed``."""
    written: list[_Outcome] = []

    def write(log: Log) -> int | None:
        outcome = _append(ctx, topic, partition, batch, transactional_id, log)
        written.append(outcome)
        return outcome.last_offset if outcome.error_code == codes.NONE else None

    result = cluster.append_now(TopicPartition(topic.name, partition), write, acks=acks,
                                origin=AppendOrigin.CLIENT)
    if not written:
        replica = result.replica
        return _failure(result.error_code, None if replica is None else replica.log)
    outcome = written[0]
    if result.appended and acks == -1:
        delayed.append((result, outcome))
    return outcome


def _acks_completed_now(cluster: PartitionSeam,
                        delayed: list[tuple[AppendResult, _Outcome]]) -> bool:
    """Kafka's first ``DelayedProduce.tryComplete``, before any wait: whether the acks=-1
    appends of ``delayed`` are all decided now (:meth:`PartitionSeam.try_complete_acks`; in
    a cluster of one they always are, in a bigger one when the ISR is the leader alone), so
    that :func:`_wait_for_acks` need not run. :func:`_acks_failed` reads the outcomes."""
    return cluster.try_complete_acks([r for r, _o in delayed])


async def _wait_for_acks(cluster: PartitionSeam, delayed: list[tuple[AppendResult, _Outcome]],
                         timeout_s: float) -> None:
    """Kafka's DelayedProduce for the acks=-1 appends of ``delayed``: every appended
    partition waits for its high watermark, bounded by the request's timeout ``timeout_s``;
    :func:`_acks_failed` reads the outcomes."""
    await cluster.wait_for_acks([r for r, _o in delayed], acks=-1,
                                timeout_s=max(timeout_s, 0.0))


def _acks_failed(delayed: list[tuple[AppendResult, _Outcome]]) -> bool:
    """Copy each decided acks=-1 wait's error code into its outcome (a failed wait changes
    only that: the append's base offset, append time and log start offset stay in the
    answer, as Kafka's); whether any failed."""
    failed = False
    for result, outcome in delayed:
        if result.error_code != codes.NONE:
            outcome.error_code = result.error_code
            failed = True
    return failed


def _timeout_s(request: Any) -> float:
    """The request's timeout in seconds (the hand-read request carries its milliseconds)."""
    timeout_ms = getattr(request, "timeout_ms", None)
    if timeout_ms is not None:
        return float(timeout_ms) / 1000.0
    return float(request.timeout.total_seconds())


def _transactional_request_error(ctx: RequestContext, request: Any) -> int:
    """Kafka's checks of a whole request's transactional batches (``RequestUtils.
    hasTransactionalRecords`` without a transactional id, or without WRITE on it; more than
    one transactional producer id): the error code every partition gets, or NONE."""
    producer_ids: set[int] = set()
    for topic_data in request.topic_data:
        for partition_data in topic_data.partition_data:
            records = partition_data.records
            # The low byte of the attributes holds the transactional bit.
            if records is None or len(records) < fmt.RECORD_BATCH_OVERHEAD \
                    or records[fmt.MAGIC_POSITION] != 2 \
                    or not records[fmt.ATTRIBUTES_POSITION + 1] & fmt.TRANSACTIONAL_FLAG_MASK:
                continue
            producer_id = _INT64.unpack_from(records, fmt.PRODUCER_ID_POSITION)[0]
            if producer_id >= 0:
                producer_ids.add(producer_id)
    if not producer_ids:
        return codes.NONE
    if request.transactional_id is None or not authorize(
            ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if len(producer_ids) > 1:
        return codes.INVALID_PRODUCER_ID_MAPPING
    return codes.NONE


def _response(version: int, answers: list[tuple[TopicKey, list[tuple[int, _Outcome]]]],
              *, throttle_time_ms: int = 0) -> RawResponse:
    return RawResponse((encode_produce_response(version, answers,
                                                throttle_time_ms=throttle_time_ms),),
                       throttle_time_ms=throttle_time_ms)
