"""One exception tree for everything seglog raises on bad input, bad bytes or bad state.

Every class derives from :class:`SeglogError`. Where Kafka has an error code for the same
condition the class is named after it and carries that code in ``kafka_error_code`` (the value
the broker puts in its responses), taken from Kafka's table in :mod:`seglog.error_codes`;
conditions Kafka has no code for carry UNKNOWN_SERVER_ERROR (-1). Both backends raise the same
class for the same input. ``retriable`` is True for the classes Kafka's clients retry (its
``RetriableException`` subclasses): the producer sends such a batch again, with the same
sequence numbers.

``OSError`` from the operating system is not wrapped: it propagates unchanged.
"""

from __future__ import annotations

from . import error_codes as codes


class SeglogError(Exception):
    """Base class of every seglog error."""

    kafka_error_code: int = codes.UNKNOWN_SERVER_ERROR
    retriable: bool = False


class CorruptRecordError(SeglogError):
    """Bytes that fail a format check: bad length, magic, CRC32C, or offsets out of order.

    ``reason`` is one of the fixed reason strings in :mod:`seglog.format` (``REASON_*``);
    ``position`` is the byte position of the bad batch in its buffer or file, or -1.
    """

    kafka_error_code = codes.CORRUPT_MESSAGE

    def __init__(self, message: str, *, reason: str = "", position: int = -1):
        super().__init__(message)
        self.reason = reason or message
        self.position = position


class PartitionOfflineError(CorruptRecordError):
    """A partition whose files failed to load (a segment that lost flushed data, bytes that
    are not valid where no recovery may cut them, a corrupt partition checkpoint): it stays
    offline alone, every other partition serves. Kafka takes the log dir holding such a
    partition offline and answers KAFKA_STORAGE_ERROR (retriable) for it; ``seglog recover``
    truncates it to its last valid offset (docs/server.md, "Offline partitions").
    ``topic`` and ``partition`` name it; ``reason`` and ``position`` are the load error's."""

    kafka_error_code = codes.KAFKA_STORAGE_ERROR
    retriable = True

    def __init__(self, message: str, *, topic: str = "", partition: int = -1,
                 reason: str = "", position: int = -1):
        super().__init__(message, reason=reason, position=position)
        self.topic = topic
        self.partition = partition


class InvalidRecordError(SeglogError):
    """A record or batch that is well-formed bytes but breaks a rule (bad field, null key on a
    compacted topic, a value that is not bytes-like, ...)."""

    kafka_error_code = codes.INVALID_RECORD


class UnexpectedAppendOffsetError(InvalidRecordError):
    """A follower append (``Log.append_as_follower``) whose first offset is below the log end
    offset (Kafka's ``UnexpectedAppendOffsetException``). ``first_offset`` and
    ``last_offset`` are the append's; nothing was written."""

    def __init__(self, message: str, *, first_offset: int, last_offset: int):
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class OffsetsOutOfOrderError(InvalidRecordError):
    """A follower append whose batches' offsets do not strictly increase (Kafka's
    ``OffsetsOutOfOrderException``); nothing was written."""


class RecordTooLargeError(SeglogError):
    """A record batch larger than ``max_message_bytes`` (Kafka: MESSAGE_TOO_LARGE)."""

    kafka_error_code = codes.MESSAGE_TOO_LARGE


class RecordBatchTooLargeError(SeglogError):
    """A set of batches larger than a whole segment may hold (``segment_bytes``)."""

    kafka_error_code = codes.RECORD_LIST_TOO_LARGE


class InvalidTimestampError(SeglogError):
    """A timestamp outside the allowed range."""

    kafka_error_code = codes.INVALID_TIMESTAMP


class UnsupportedCompressionError(SeglogError):
    """A compression codec that is unknown, or whose optional package is not installed."""

    kafka_error_code = codes.UNSUPPORTED_COMPRESSION_TYPE


class OffsetOutOfRangeError(SeglogError):
    """A requested offset below the log start offset or above the end offset."""

    kafka_error_code = codes.OFFSET_OUT_OF_RANGE


class InvalidOffsetError(SeglogError):
    """An index or segment asked to store an offset that breaks its ordering or 32-bit range."""

    kafka_error_code = codes.UNKNOWN_SERVER_ERROR


class CorruptIndexError(SeglogError):
    """An index file whose size or entries are inconsistent (it is rebuilt from the log)."""

    kafka_error_code = codes.UNKNOWN_SERVER_ERROR


class IndexFullError(SeglogError):
    """An append to an index that has no free entry left (the segment must roll first)."""

    kafka_error_code = codes.UNKNOWN_SERVER_ERROR


class LogClosedError(SeglogError):
    """An operation on a segment, log or store that was closed."""

    kafka_error_code = codes.KAFKA_STORAGE_ERROR


class KafkaStorageError(SeglogError, OSError):
    """The disk refused a write the storage needed: no space (ENOSPC), over quota (EDQUOT) or
    an I/O error, raised where seglog reserves disk blocks before it writes (an index's
    reservation, ``OffsetIndex.reserve`` / ``TimeIndex.reserve``). Kafka's
    ``KafkaStorageException`` (KAFKA_STORAGE_ERROR, retriable: the client retries, and the
    append succeeds once space is freed). Also an ``OSError``: ``errno``, ``strerror`` and
    ``filename`` are the failed call's, and ``except OSError`` still catches it."""

    kafka_error_code = codes.KAFKA_STORAGE_ERROR
    retriable = True


class LogLockedError(SeglogError):
    """A second writer tried to open a partition directory another writer holds: ``path``,
    the directory (or lock file) refused, and ``holder_pid``, the holder's process id when its
    lock file names one (else None)."""

    kafka_error_code = codes.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str, *, path: str = "", holder_pid: int | None = None):
        super().__init__(message)
        self.path = path
        self.holder_pid = holder_pid


class ReadOnlyError(SeglogError):
    """A write to a log or segment opened with ``read_only=True``."""

    kafka_error_code = codes.UNKNOWN_SERVER_ERROR


class ViewsOutstandingError(SeglogError):
    """A truncation would cut bytes that a live memoryview from ``read()`` still maps.

    Truncating a file under a live mapping would turn the next access into SIGBUS; release
    the views (``del`` them, or ``view.release()``) and try again.
    """

    kafka_error_code = codes.UNKNOWN_SERVER_ERROR


class InvalidConfigError(SeglogError):
    """An unknown configuration name or a value outside its range."""

    kafka_error_code = codes.INVALID_CONFIG


class NotEnoughReplicasError(SeglogError):
    """Fewer in-sync replicas than ``min_insync_replicas`` (replication, later)."""

    kafka_error_code = codes.NOT_ENOUGH_REPLICAS
    retriable = True


class NotEnoughReplicasAfterAppendError(SeglogError):
    """The batch was written to the leader's log, but fewer in-sync replicas than required
    acknowledged it: the producer cannot know it is safe and sends it again (retriable)."""

    kafka_error_code = codes.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    retriable = True


class RequestTimedOutError(SeglogError):
    """No acknowledgement arrived in time: the batch may or may not have been written
    (retriable; an idempotent producer's retry is then recognised as a duplicate)."""

    kafka_error_code = codes.REQUEST_TIMED_OUT
    retriable = True


class DuplicateSequenceError(SeglogError):
    """Kept for the wire protocol; the log answers duplicates with their original offsets."""

    kafka_error_code = codes.DUPLICATE_SEQUENCE_NUMBER


class OutOfOrderSequenceError(SeglogError):
    """An idempotent batch whose sequence leaves a gap or partially overlaps what was written."""

    kafka_error_code = codes.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(SeglogError):
    """A producer epoch lower than the one the log has seen."""

    kafka_error_code = codes.INVALID_PRODUCER_EPOCH


class ProducerFencedError(SeglogError):
    """A transactional producer replaced by a newer one with the same transactional id."""

    kafka_error_code = codes.PRODUCER_FENCED


class InvalidTxnStateError(SeglogError):
    """A non-transactional append while the producer has a transaction open, or the reverse."""

    kafka_error_code = codes.INVALID_TXN_STATE


class TransactionAbortedError(SeglogError):
    """A record that was still waiting in the producer when its transaction was aborted: it
    was never written (Kafka's client-side ``TransactionAbortedException``)."""

    kafka_error_code = codes.UNKNOWN_SERVER_ERROR


class TransactionCoordinatorFencedError(SeglogError):
    """A transaction marker with an older coordinator epoch than the one stored."""

    kafka_error_code = codes.TRANSACTION_COORDINATOR_FENCED


class CorruptSnapshotError(SeglogError):
    """A producer-state snapshot with a bad version, size or CRC (it is deleted)."""

    kafka_error_code = codes.UNKNOWN_SERVER_ERROR


class CorruptCheckpointError(SeglogError):
    """A checkpoint or metadata file (offset or leader-epoch checkpoint, partition.metadata,
    meta.properties) with a wrong version, a wrong entry count or a malformed line.

    ``path`` is the file; ``line`` the offending line, or None.
    """

    kafka_error_code = codes.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str, *, path: str = "", line: str | None = None):
        super().__init__(message)
        self.path = path
        self.line = line


class UnknownTopicOrPartitionError(SeglogError):
    """A topic or partition that does not exist in the store."""

    kafka_error_code = codes.UNKNOWN_TOPIC_OR_PARTITION


class TopicExistsError(SeglogError):
    """``create_topic`` for a name that already exists."""

    kafka_error_code = codes.TOPIC_ALREADY_EXISTS


class InvalidTopicError(SeglogError):
    """A topic name Kafka would reject (empty, too long, bad characters, '.' or '..')."""

    kafka_error_code = codes.INVALID_TOPIC_EXCEPTION


class NoOffsetForPartitionError(SeglogError):
    """A consumer with ``auto_offset_reset='none'`` and no committed offset."""

    kafka_error_code = codes.UNKNOWN_SERVER_ERROR


class IllegalStateError(SeglogError):
    """A call that is not allowed in the object's current state."""

    kafka_error_code = codes.UNKNOWN_SERVER_ERROR


class CommitFailedError(SeglogError):
    """A commit refused because the group rebalanced and took partitions from this consumer
    since its last poll (Kafka's ``CommitFailedException``; broker code ILLEGAL_GENERATION).
    The consumer has adopted its new assignment; the records it handled from the partitions
    it lost will be read again by their new owner from the last commit."""

    kafka_error_code = codes.ILLEGAL_GENERATION


class CorruptSegmentError(CorruptRecordError):
    """A batch header in a segment's ``.log`` that cannot be parsed below the segment's end
    (bad length, bad magic, a batch running past the end): corruption, never a silent end of
    data. Besides ``reason`` and ``position`` (of the bad batch in the ``.log``) it carries
    ``path`` (the ``.log`` file) and ``base_offset`` (the segment's). Raised by both backends'
    ``Segment`` read paths; only ``Segment.recover()`` cuts such bytes."""

    def __init__(self, message: str, *, reason: str = "", position: int = -1,
                 path: str = "", base_offset: int = -1):
        super().__init__(message, reason=reason, position=position)
        self.path = path
        self.base_offset = base_offset


# --- argument errors of the clients, the coordinators and the assignors -----------------------
#
# Each also derives from the built-in exception Python code expects for a bad argument
# (ValueError, TypeError, KeyError), so ``except ValueError`` keeps working, and carries the
# Kafka error code a broker answers with for the same request field.


class InvalidArgumentError(SeglogError, ValueError):
    """An argument with a value out of its range or not one of its allowed values (a
    negative offset, ``max_poll_records=0``, an unknown ``auto_offset_reset``, ...).
    Kafka error code INVALID_REQUEST (42): a broker answers a request field it cannot accept
    with it when no more precise code exists."""

    kafka_error_code = codes.INVALID_REQUEST


class InvalidArgumentTypeError(SeglogError, TypeError):
    """An argument of the wrong type (``1.5`` for a count, a str for a list of topics, a
    pair that is not a ``(topic, partition)``). Kafka error code INVALID_REQUEST (42): on the
    wire a wrong type is a request that does not parse."""

    kafka_error_code = codes.INVALID_REQUEST


class InvalidGroupIdError(InvalidArgumentError):
    """A group id that is empty or not a str. Kafka error code INVALID_GROUP_ID (24)."""

    kafka_error_code = codes.INVALID_GROUP_ID


class InvalidTransactionTimeoutError(InvalidArgumentError):
    """A transaction timeout outside 1 ms..``transaction.max.timeout.ms``. Kafka error code
    INVALID_TRANSACTION_TIMEOUT (50)."""

    kafka_error_code = codes.INVALID_TRANSACTION_TIMEOUT


class OffsetMetadataTooLargeError(InvalidArgumentError):
    """A committed offset's metadata string longer than ``offset.metadata.max.bytes``
    (4096). Kafka error code OFFSET_METADATA_TOO_LARGE (12)."""

    kafka_error_code = codes.OFFSET_METADATA_TOO_LARGE


class InvalidRequiredAcksError(InvalidArgumentError):
    """A producer ``acks`` value other than 0, 1, -1 or ``"all"``. Kafka error code
    INVALID_REQUIRED_ACKS (21)."""

    kafka_error_code = codes.INVALID_REQUIRED_ACKS


class UnknownCompressionTypeError(UnsupportedCompressionError, ValueError):
    """A producer ``compression`` name that is not one of Kafka's (``none``, ``gzip``,
    ``snappy``, ``lz4``, ``zstd``). Kafka error code UNSUPPORTED_COMPRESSION_TYPE (76)."""


class UnknownAssignorError(SeglogError, KeyError):
    """A partition assignment strategy the group coordinator does not know (seglog knows
    ``range`` and ``roundrobin``). Kafka error code INCONSISTENT_GROUP_PROTOCOL (23): a
    JoinGroup whose protocols the group cannot run."""

    kafka_error_code = codes.INCONSISTENT_GROUP_PROTOCOL


# --- the classic group coordinator of the wire broker (groups) --------------------------------
#
# Raised by :meth:`seglog.coordinator.classic_group.ClassicGroupCoordinator.check_member` (the
# generation/member check a TxnOffsetCommit needs), each carrying the code a broker answers.


class GroupMembershipError(SeglogError):
    """A request naming a group member, generation or instance id the group coordinator does
    not accept (the base class of the four below)."""

    kafka_error_code = codes.UNKNOWN_SERVER_ERROR


class IllegalGenerationError(GroupMembershipError):
    """The request's generation id is not the group's current one. Kafka error code
    ILLEGAL_GENERATION (22)."""

    kafka_error_code = codes.ILLEGAL_GENERATION


class UnknownMemberIdError(GroupMembershipError):
    """The member id is not a member of the group (it was evicted, or the group is gone).
    Kafka error code UNKNOWN_MEMBER_ID (25)."""

    kafka_error_code = codes.UNKNOWN_MEMBER_ID


class FencedInstanceIdError(GroupMembershipError):
    """A static member's ``group.instance.id`` now belongs to a newer member id. Kafka error
    code FENCED_INSTANCE_ID (82)."""

    kafka_error_code = codes.FENCED_INSTANCE_ID


class StaleMemberEpochError(GroupMembershipError):
    """A consumer group member (KIP-848) committed with a member epoch that is not its
    current one. Kafka error code STALE_MEMBER_EPOCH (113)."""

    kafka_error_code = codes.STALE_MEMBER_EPOCH


class RebalanceInProgressError(GroupMembershipError):
    """The group is rebalancing: the member must rejoin first. Kafka error code
    REBALANCE_IN_PROGRESS (27)."""

    kafka_error_code = codes.REBALANCE_IN_PROGRESS


# --- the wire broker's core (server core) -----------------------------------------------------


class InvalidRequestError(SeglogError):
    """A request frame the broker cannot parse: a truncated or malformed header or body, bytes
    left after the body, a size out of bounds. Kafka error code INVALID_REQUEST (42); the
    broker closes the connection, as Kafka's SocketServer does."""

    kafka_error_code = codes.INVALID_REQUEST


class UnsupportedVersionError(SeglogError):
    """An API key this broker does not serve, or a version of it outside the advertised range.
    Kafka error code UNSUPPORTED_VERSION (35)."""

    kafka_error_code = codes.UNSUPPORTED_VERSION


# --- the admin APIs of the wire broker (admin) -------------------------------------------------


class InvalidPartitionsError(SeglogError):
    """A partition count that is not allowed: not positive at creation, or not an increase
    when partitions are added (``Store.create_partitions``). Kafka error code
    INVALID_PARTITIONS (37)."""

    kafka_error_code = codes.INVALID_PARTITIONS


class InvalidReplicationFactorError(SeglogError):
    """A replication factor that cannot be placed: not positive, or larger than the number of
    live brokers (Kafka's ``AdminUtils.assignReplicasToBrokers``: "Replication factor: X larger
    than available brokers: Y"). Kafka error code INVALID_REPLICATION_FACTOR (38)."""

    kafka_error_code = codes.INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(SeglogError):
    """A manual replica assignment that cannot be used: an empty or repeated replica list, an
    unknown broker, partitions that are not 0..n-1, replica counts that differ. Kafka error
    code INVALID_REPLICA_ASSIGNMENT (39)."""

    kafka_error_code = codes.INVALID_REPLICA_ASSIGNMENT


class InvalidCreationRequestError(SeglogError):
    """A CreateTopics entry whose fields contradict each other (a manual assignment together
    with a partition count or replication factor). Kafka error code INVALID_REQUEST (42), in
    the answer of that topic only: the connection stays open (unlike
    :class:`InvalidRequestError`)."""

    kafka_error_code = codes.INVALID_REQUEST


# --- transactions over the wire (txn) ----------------------------------------------------------


class InvalidProducerIdMappingError(SeglogError):
    """A transactional request whose transactional id is unknown to the coordinator, or whose
    producer id is not the id's current one (Kafka's INVALID_PRODUCER_ID_MAPPING, 49)."""

    kafka_error_code = codes.INVALID_PRODUCER_ID_MAPPING


class ConcurrentTransactionsError(SeglogError):
    """The coordinator is still completing the id's previous transaction (its producer was just
    fenced and the transaction is being aborted); retriable (Kafka's CONCURRENT_TRANSACTIONS,
    51)."""

    kafka_error_code = codes.CONCURRENT_TRANSACTIONS


# --- SASL authentication (issue 23) ------------------------------------------------------------


class SaslAuthenticationError(SeglogError):
    """A SASL login that failed (wrong password, unknown user, a malformed token). Kafka error
    code SASL_AUTHENTICATION_FAILED (58); the message is what the client is told (Kafka's),
    so it never says whether the user exists."""

    kafka_error_code = codes.SASL_AUTHENTICATION_FAILED


class IllegalSaslStateError(SeglogError):
    """A request that the SASL exchange of its connection does not allow now (a Produce before
    authentication, a second SaslHandshake). Kafka error code ILLEGAL_SASL_STATE (34)."""

    kafka_error_code = codes.ILLEGAL_SASL_STATE


class UnsupportedSaslMechanismError(SeglogError):
    """A SASL mechanism that is not enabled on the listener or not built. Kafka error code
    UNSUPPORTED_SASL_MECHANISM (33)."""

    kafka_error_code = codes.UNSUPPORTED_SASL_MECHANISM


class CorruptCredentialsError(SeglogError):
    """A stored SCRAM credential (the data directory's credential file, a ``/config/users``
    znode) that does not parse: the broker refuses to start rather than serve with no users.
    ``path`` names the file or znode."""

    def __init__(self, message: str, *, path: str = ""):
        super().__init__(message)
        self.path = path


# --- share groups (KIP-932) --------------------------------------------------------------------


class InvalidRecordStateError(SeglogError):
    """An acknowledgement of records the member does not hold: their acquisition lock ran
    out (they went back to the queue, maybe to another member), or they were acknowledged
    already (Kafka's ``InvalidRecordStateException``, INVALID_RECORD_STATE, 121)."""

    kafka_error_code = codes.INVALID_RECORD_STATE


class ShareAcknowledgeError(SeglogError):
    """An acknowledgement of a share consumer that failed with another Kafka error code
    (e.g. the share-group state could not be written); ``kafka_error_code`` is that code,
    set per instance."""

    def __init__(self, message: str, kafka_error_code: int = codes.UNKNOWN_SERVER_ERROR):
        super().__init__(message)
        self.kafka_error_code = kafka_error_code
