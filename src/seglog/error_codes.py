"""Kafka's error codes as one table: code, name, retriable and default message of every entry
of Kafka 4.4's ``org.apache.kafka.common.protocol.Errors``, from -1 (UNKNOWN_SERVER_ERROR) to
the highest code Kafka defines.

Every Kafka error code in seglog comes from here: a use site writes
``from seglog import error_codes as codes`` (relative inside the package) and then
``codes.NOT_LEADER_OR_FOLLOWER``; no other module defines a code as an integer literal (a
layout test, ``tests/test_error_codes.py``, reads every module for one).

The table is written the way ``Errors.java`` writes its enum, one entry per name::

    NOT_LEADER_OR_FOLLOWER: Final = _error(6, retriable=True, message="For requests ...")

so each code, flag and message is typed once, and the module constant is the entry's own
line: ``_error`` records the entry and returns its code, and :data:`ERRORS` takes each entry's
name from the constant it was assigned to. mypy sees every constant as an ``int``, so a
misspelt name is a type error, not an ``AttributeError`` on a rarely taken error path.

The fields mean what Kafka's do:

- ``code``: the int16 on the wire;
- ``name``: the enum constant's name (``Errors.name()``), the name Kafka's tools print;
- ``retriable``: whether Kafka's exception for the code is a ``RetriableException`` (a client
  may send the same request again; the producer resends with the same sequence numbers);
- ``message``: ``Errors.message()``, the exception's default message that Kafka's brokers put in
  a response's ``error_message`` when they have nothing more specific (for NONE, which has no
  exception, Kafka answers its name).

``tests/test_error_codes.py`` compares every field of every entry with the ``Errors.values()``
of the ``kafka-clients`` jar of the Kafka release named by :data:`KAFKA_VERSION`.

This module is a leaf: it imports nothing from seglog, so any layer may use it.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Final, Mapping

__all__ = [
    "KAFKA_VERSION", "KafkaError", "ERRORS", "BY_CODE", "by_code", "name", "message",
    "is_retriable",
]

#: The Kafka release whose ``Errors`` this table is (the test checks it against that jar).
KAFKA_VERSION: Final = "4.4.0"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class KafkaError:
    """One entry of Kafka's ``Errors``: ``code`` (the int16 on the wire), ``name`` (Kafka's
    enum name), ``retriable`` (Kafka's exception is a ``RetriableException``) and ``message``
    (Kafka's default message). Immutable; safe to share between threads."""

    code: int
    name: str
    retriable: bool
    message: str


# Entries recorded by _error in the order they are written: (code, retriable, message). Names
# are attached at the end of the module, from the constants the codes were assigned to.
_ROWS: list[tuple[int, bool, str]] = []


def _error(code: int, *, retriable: bool, message: str) -> int:
    """Record one entry of the table and return its code (the value of its module constant)."""
    _ROWS.append((code, retriable, message))
    return code


# --- the table, in code order (Errors.java) ---------------------------------------------------

UNKNOWN_SERVER_ERROR: Final = _error(
    -1, retriable=False,
    message="The server experienced an unexpected error when processing the request.")
NONE: Final = _error(0, retriable=False, message="NONE")
OFFSET_OUT_OF_RANGE: Final = _error(
    1, retriable=False,
    message="The requested offset is not within the range of offsets maintained by the server.")
CORRUPT_MESSAGE: Final = _error(
    2, retriable=True,
    message="This message has failed its CRC checksum, exceeds the valid size, has a null key "
            "for a compacted topic, or is otherwise corrupt.")
UNKNOWN_TOPIC_OR_PARTITION: Final = _error(
    3, retriable=True, message="This server does not host this topic-partition.")
INVALID_FETCH_SIZE: Final = _error(
    4, retriable=False, message="The requested fetch size is invalid.")
LEADER_NOT_AVAILABLE: Final = _error(
    5, retriable=True,
    message="There is no leader for this topic-partition as we are in the middle of a leadership "
            "election.")
NOT_LEADER_OR_FOLLOWER: Final = _error(
    6, retriable=True,
    message="For requests intended only for the leader, this error indicates that the broker is "
            "not the current leader. For requests intended for any replica, this error indicates "
            "that the broker is not a replica of the topic partition.")
REQUEST_TIMED_OUT: Final = _error(7, retriable=True, message="The request timed out.")
BROKER_NOT_AVAILABLE: Final = _error(8, retriable=False, message="The broker is not available.")
REPLICA_NOT_AVAILABLE: Final = _error(
    9, retriable=True,
    message="The replica is not available for the requested topic-partition. Produce/Fetch "
            "requests and other requests intended only for the leader or follower return "
            "NOT_LEADER_OR_FOLLOWER if the broker is not a replica of the topic-partition.")
MESSAGE_TOO_LARGE: Final = _error(
    10, retriable=False,
    message="The request included a message larger than the max message size the server will "
            "accept.")
STALE_CONTROLLER_EPOCH: Final = _error(
    11, retriable=False, message="The controller moved to another broker.")
OFFSET_METADATA_TOO_LARGE: Final = _error(
    12, retriable=False, message="The metadata field of the offset request was too large.")
NETWORK_EXCEPTION: Final = _error(
    13, retriable=True, message="The server disconnected before a response was received.")
COORDINATOR_LOAD_IN_PROGRESS: Final = _error(
    14, retriable=True, message="The coordinator is loading and hence can't process requests.")
COORDINATOR_NOT_AVAILABLE: Final = _error(
    15, retriable=True, message="The coordinator is not available.")
NOT_COORDINATOR: Final = _error(16, retriable=True, message="This is not the correct coordinator.")
INVALID_TOPIC_EXCEPTION: Final = _error(
    17, retriable=False,
    message="The request attempted to perform an operation on an invalid topic.")
RECORD_LIST_TOO_LARGE: Final = _error(
    18, retriable=False,
    message="The request included message batch larger than the configured segment size on the "
            "server.")
NOT_ENOUGH_REPLICAS: Final = _error(
    19, retriable=True,
    message="Messages are rejected since there are fewer in-sync replicas than required.")
NOT_ENOUGH_REPLICAS_AFTER_APPEND: Final = _error(
    20, retriable=True,
    message="Messages are written to the log, but to fewer in-sync replicas than required.")
INVALID_REQUIRED_ACKS: Final = _error(
    21, retriable=False, message="Produce request specified an invalid value for required acks.")
ILLEGAL_GENERATION: Final = _error(
    22, retriable=False, message="Specified group generation id is not valid.")
INCONSISTENT_GROUP_PROTOCOL: Final = _error(
    23, retriable=False,
    message="The group member's supported protocols are incompatible with those of existing "
            "members or first group member tried to join with empty protocol type or empty "
            "protocol list.")
INVALID_GROUP_ID: Final = _error(24, retriable=False, message="The group id is invalid.")
UNKNOWN_MEMBER_ID: Final = _error(
    25, retriable=False, message="The coordinator is not aware of this member.")
INVALID_SESSION_TIMEOUT: Final = _error(
    26, retriable=False,
    message="The session timeout is not within the range allowed by the broker (as configured by "
            "group.min.session.timeout.ms and group.max.session.timeout.ms).")
REBALANCE_IN_PROGRESS: Final = _error(
    27, retriable=False, message="The group is rebalancing, so a rejoin is needed.")
INVALID_COMMIT_OFFSET_SIZE: Final = _error(
    28, retriable=False, message="The committing offset data size is not valid.")
TOPIC_AUTHORIZATION_FAILED: Final = _error(
    29, retriable=False, message="Topic authorization failed.")
GROUP_AUTHORIZATION_FAILED: Final = _error(
    30, retriable=False, message="Group authorization failed.")
CLUSTER_AUTHORIZATION_FAILED: Final = _error(
    31, retriable=False, message="Cluster authorization failed.")
INVALID_TIMESTAMP: Final = _error(
    32, retriable=False, message="The timestamp of the message is out of acceptable range.")
UNSUPPORTED_SASL_MECHANISM: Final = _error(
    33, retriable=False, message="The broker does not support the requested SASL mechanism.")
ILLEGAL_SASL_STATE: Final = _error(
    34, retriable=False, message="Request is not valid given the current SASL state.")
UNSUPPORTED_VERSION: Final = _error(
    35, retriable=False, message="The version of API is not supported.")
TOPIC_ALREADY_EXISTS: Final = _error(
    36, retriable=False, message="Topic with this name already exists.")
INVALID_PARTITIONS: Final = _error(37, retriable=False, message="Number of partitions is below 1.")
INVALID_REPLICATION_FACTOR: Final = _error(
    38, retriable=False,
    message="Replication factor is below 1 or larger than the number of available brokers.")
INVALID_REPLICA_ASSIGNMENT: Final = _error(
    39, retriable=False, message="Replica assignment is invalid.")
INVALID_CONFIG: Final = _error(40, retriable=False, message="Configuration is invalid.")
NOT_CONTROLLER: Final = _error(
    41, retriable=True, message="This is not the correct controller for this cluster.")
INVALID_REQUEST: Final = _error(
    42, retriable=False,
    message="This most likely occurs because of a request being malformed by the client library "
            "or the message was sent to an incompatible broker. See the broker logs for more "
            "details.")
UNSUPPORTED_FOR_MESSAGE_FORMAT: Final = _error(
    43, retriable=False,
    message="The message format version on the broker does not support the request.")
POLICY_VIOLATION: Final = _error(
    44, retriable=False, message="Request parameters do not satisfy the configured policy.")
OUT_OF_ORDER_SEQUENCE_NUMBER: Final = _error(
    45, retriable=False, message="The broker received an out of order sequence number.")
DUPLICATE_SEQUENCE_NUMBER: Final = _error(
    46, retriable=False, message="The broker received a duplicate sequence number.")
INVALID_PRODUCER_EPOCH: Final = _error(
    47, retriable=False, message="Producer attempted to produce with an old epoch.")
INVALID_TXN_STATE: Final = _error(
    48, retriable=False,
    message="The producer attempted a transactional operation in an invalid state.")
INVALID_PRODUCER_ID_MAPPING: Final = _error(
    49, retriable=False,
    message="The producer attempted to use a producer id which is not currently assigned to its "
            "transactional id.")
INVALID_TRANSACTION_TIMEOUT: Final = _error(
    50, retriable=False,
    message="The transaction timeout is larger than the maximum value allowed by the broker (as "
            "configured by transaction.max.timeout.ms).")
CONCURRENT_TRANSACTIONS: Final = _error(
    51, retriable=True,
    message="The producer attempted to update a transaction while another concurrent operation "
            "on the same transaction was ongoing.")
TRANSACTION_COORDINATOR_FENCED: Final = _error(
    52, retriable=False,
    message="Indicates that the transaction coordinator sending a WriteTxnMarker is no longer "
            "the current coordinator for a given producer.")
TRANSACTIONAL_ID_AUTHORIZATION_FAILED: Final = _error(
    53, retriable=False, message="Transactional Id authorization failed.")
SECURITY_DISABLED: Final = _error(54, retriable=False, message="Security features are disabled.")
OPERATION_NOT_ATTEMPTED: Final = _error(
    55, retriable=False,
    message="The broker did not attempt to execute this operation. This may happen for batched "
            "RPCs where some operations in the batch failed, causing the broker to respond "
            "without trying the rest.")
KAFKA_STORAGE_ERROR: Final = _error(
    56, retriable=True, message="Disk error when trying to access log file on the disk.")
LOG_DIR_NOT_FOUND: Final = _error(
    57, retriable=False,
    message="The user-specified log directory is not found in the broker config.")
SASL_AUTHENTICATION_FAILED: Final = _error(
    58, retriable=False, message="SASL Authentication failed.")
UNKNOWN_PRODUCER_ID: Final = _error(
    59, retriable=False,
    message="This exception is raised by the broker if it could not locate the producer metadata "
            "associated with the producerId in question. This could happen if, for instance, the "
            "producer's records were deleted because their retention time had elapsed. Once the "
            "last records of the producerId are removed, the producer's metadata is removed from "
            "the broker, and future appends by the producer will return this exception.")
REASSIGNMENT_IN_PROGRESS: Final = _error(
    60, retriable=False, message="A partition reassignment is in progress.")
DELEGATION_TOKEN_AUTH_DISABLED: Final = _error(
    61, retriable=False, message="Delegation Token feature is not enabled.")
DELEGATION_TOKEN_NOT_FOUND: Final = _error(
    62, retriable=False, message="Delegation Token is not found on server.")
DELEGATION_TOKEN_OWNER_MISMATCH: Final = _error(
    63, retriable=False, message="Specified Principal is not valid Owner/Renewer.")
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: Final = _error(
    64, retriable=False,
    message="Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on "
            "delegation token authenticated channels.")
DELEGATION_TOKEN_AUTHORIZATION_FAILED: Final = _error(
    65, retriable=False, message="Delegation Token authorization failed.")
DELEGATION_TOKEN_EXPIRED: Final = _error(
    66, retriable=False, message="Delegation Token is expired.")
INVALID_PRINCIPAL_TYPE: Final = _error(
    67, retriable=False, message="Supplied principalType is not supported.")
NON_EMPTY_GROUP: Final = _error(68, retriable=False, message="The group is not empty.")
GROUP_ID_NOT_FOUND: Final = _error(69, retriable=False, message="The group id does not exist.")
FETCH_SESSION_ID_NOT_FOUND: Final = _error(
    70, retriable=True, message="The fetch session ID was not found.")
INVALID_FETCH_SESSION_EPOCH: Final = _error(
    71, retriable=True, message="The fetch session epoch is invalid.")
LISTENER_NOT_FOUND: Final = _error(
    72, retriable=True,
    message="There is no listener on the leader broker that matches the listener on which "
            "metadata request was processed.")
TOPIC_DELETION_DISABLED: Final = _error(73, retriable=False, message="Topic deletion is disabled.")
FENCED_LEADER_EPOCH: Final = _error(
    74, retriable=True,
    message="The leader epoch in the request is older than the epoch on the broker.")
UNKNOWN_LEADER_EPOCH: Final = _error(
    75, retriable=True,
    message="The leader epoch in the request is newer than the epoch on the broker.")
UNSUPPORTED_COMPRESSION_TYPE: Final = _error(
    76, retriable=False,
    message="The requesting client does not support the compression type of given partition.")
STALE_BROKER_EPOCH: Final = _error(77, retriable=False, message="Broker epoch has changed.")
OFFSET_NOT_AVAILABLE: Final = _error(
    78, retriable=True,
    message="The leader high watermark has not caught up from a recent leader election so the "
            "offsets cannot be guaranteed to be monotonically increasing.")
MEMBER_ID_REQUIRED: Final = _error(
    79, retriable=False,
    message="The group member needs to have a valid member id before actually entering a "
            "consumer group.")
PREFERRED_LEADER_NOT_AVAILABLE: Final = _error(
    80, retriable=True, message="The preferred leader was not available.")
GROUP_MAX_SIZE_REACHED: Final = _error(
    81, retriable=False, message="The group has reached its maximum size.")
FENCED_INSTANCE_ID: Final = _error(
    82, retriable=False,
    message="The broker rejected this static consumer since another consumer with the same "
            "group.instance.id has registered with a different member.id.")
ELIGIBLE_LEADERS_NOT_AVAILABLE: Final = _error(
    83, retriable=True, message="Eligible topic partition leaders are not available.")
ELECTION_NOT_NEEDED: Final = _error(
    84, retriable=True, message="Leader election not needed for topic partition.")
NO_REASSIGNMENT_IN_PROGRESS: Final = _error(
    85, retriable=False, message="No partition reassignment is in progress.")
GROUP_SUBSCRIBED_TO_TOPIC: Final = _error(
    86, retriable=False,
    message="Deleting offsets of a topic is forbidden while the consumer group is actively "
            "subscribed to it.")
INVALID_RECORD: Final = _error(
    87, retriable=False,
    message="This record has failed the validation on broker and hence will be rejected.")
UNSTABLE_OFFSET_COMMIT: Final = _error(
    88, retriable=True, message="There are unstable offsets that need to be cleared.")
THROTTLING_QUOTA_EXCEEDED: Final = _error(
    89, retriable=True, message="The throttling quota has been exceeded.")
PRODUCER_FENCED: Final = _error(
    90, retriable=False,
    message="There is a newer producer with the same transactionalId which fences the current "
            "one.")
RESOURCE_NOT_FOUND: Final = _error(
    91, retriable=False, message="A request illegally referred to a resource that does not exist.")
DUPLICATE_RESOURCE: Final = _error(
    92, retriable=False, message="A request illegally referred to the same resource twice.")
UNACCEPTABLE_CREDENTIAL: Final = _error(
    93, retriable=False, message="Requested credential would not meet criteria for acceptability.")
INCONSISTENT_VOTER_SET: Final = _error(
    94, retriable=False,
    message="Indicates that the either the sender or recipient of a voter-only request is not "
            "one of the expected voters.")
INVALID_UPDATE_VERSION: Final = _error(
    95, retriable=False, message="The given update version was invalid.")
FEATURE_UPDATE_FAILED: Final = _error(
    96, retriable=False,
    message="Unable to update finalized features due to an unexpected server error.")
PRINCIPAL_DESERIALIZATION_FAILURE: Final = _error(
    97, retriable=False,
    message="Request principal deserialization failed during forwarding. This indicates an "
            "internal error on the broker cluster security setup.")
SNAPSHOT_NOT_FOUND: Final = _error(
    98, retriable=False, message="Requested snapshot was not found.")
POSITION_OUT_OF_RANGE: Final = _error(
    99, retriable=False,
    message="Requested position is not greater than or equal to zero, and less than the size of "
            "the snapshot.")
UNKNOWN_TOPIC_ID: Final = _error(
    100, retriable=True, message="This server does not host this topic ID.")
DUPLICATE_BROKER_REGISTRATION: Final = _error(
    101, retriable=False, message="This broker ID is already in use.")
BROKER_ID_NOT_REGISTERED: Final = _error(
    102, retriable=False, message="The given broker ID was not registered.")
INCONSISTENT_TOPIC_ID: Final = _error(
    103, retriable=True, message="The log's topic ID did not match the topic ID in the request.")
INCONSISTENT_CLUSTER_ID: Final = _error(
    104, retriable=False,
    message="The clusterId in the request does not match that found on the server.")
TRANSACTIONAL_ID_NOT_FOUND: Final = _error(
    105, retriable=False, message="The transactionalId could not be found.")
FETCH_SESSION_TOPIC_ID_ERROR: Final = _error(
    106, retriable=True, message="The fetch session encountered inconsistent topic ID usage.")
INELIGIBLE_REPLICA: Final = _error(
    107, retriable=False, message="The new ISR contains at least one ineligible replica.")
NEW_LEADER_ELECTED: Final = _error(
    108, retriable=False,
    message="The AlterPartition request successfully updated the partition state but the leader "
            "has changed.")
OFFSET_MOVED_TO_TIERED_STORAGE: Final = _error(
    109, retriable=False, message="The requested offset is moved to tiered storage.")
FENCED_MEMBER_EPOCH: Final = _error(
    110, retriable=False,
    message="The member epoch is fenced by the group coordinator. The member must abandon all "
            "its partitions and rejoin.")
UNRELEASED_INSTANCE_ID: Final = _error(
    111, retriable=False,
    message="The instance ID is still used by another member in the consumer group. That member "
            "must leave first.")
UNSUPPORTED_ASSIGNOR: Final = _error(
    112, retriable=False,
    message="The assignor or its version range is not supported by the consumer group.")
STALE_MEMBER_EPOCH: Final = _error(
    113, retriable=False,
    message="The member epoch is stale. The member must retry after receiving its updated member "
            "epoch via the ConsumerGroupHeartbeat API.")
MISMATCHED_ENDPOINT_TYPE: Final = _error(
    114, retriable=False, message="The request was sent to an endpoint of the wrong type.")
UNSUPPORTED_ENDPOINT_TYPE: Final = _error(
    115, retriable=False, message="This endpoint type is not supported yet.")
UNKNOWN_CONTROLLER_ID: Final = _error(
    116, retriable=False, message="This controller ID is not known.")
UNKNOWN_SUBSCRIPTION_ID: Final = _error(
    117, retriable=False,
    message="Client sent a push telemetry request with an invalid or outdated subscription ID.")
TELEMETRY_TOO_LARGE: Final = _error(
    118, retriable=False,
    message="Client sent a push telemetry request larger than the maximum size the broker will "
            "accept.")
INVALID_REGISTRATION: Final = _error(
    119, retriable=False,
    message="The controller has considered the broker registration to be invalid.")
TRANSACTION_ABORTABLE: Final = _error(
    120, retriable=False,
    message="The server encountered an error with the transaction. The client can abort the "
            "transaction to continue using this transactional ID.")
INVALID_RECORD_STATE: Final = _error(
    121, retriable=False,
    message="The record state is invalid. The acknowledgement of delivery could not be "
            "completed.")
SHARE_SESSION_NOT_FOUND: Final = _error(
    122, retriable=True, message="The share session was not found.")
INVALID_SHARE_SESSION_EPOCH: Final = _error(
    123, retriable=True, message="The share session epoch is invalid.")
FENCED_STATE_EPOCH: Final = _error(
    124, retriable=False,
    message="The coordinator rejected the request because the state epoch did not match.")
INVALID_VOTER_KEY: Final = _error(
    125, retriable=False, message="The voter key doesn't match the receiving replica's key.")
DUPLICATE_VOTER: Final = _error(
    126, retriable=False, message="The voter is already part of the set of voters.")
VOTER_NOT_FOUND: Final = _error(
    127, retriable=False, message="The voter is not part of the set of voters.")
INVALID_REGULAR_EXPRESSION: Final = _error(
    128, retriable=False, message="The regular expression is not valid.")
REBOOTSTRAP_REQUIRED: Final = _error(
    129, retriable=False,
    message="Client metadata is stale. The client should rebootstrap to obtain new metadata.")
STREAMS_INVALID_TOPOLOGY: Final = _error(
    130, retriable=False, message="The supplied topology is invalid.")
STREAMS_INVALID_TOPOLOGY_EPOCH: Final = _error(
    131, retriable=False, message="The supplied topology epoch is invalid.")
STREAMS_TOPOLOGY_FENCED: Final = _error(
    132, retriable=False, message="The supplied topology epoch is outdated.")
SHARE_SESSION_LIMIT_REACHED: Final = _error(
    133, retriable=True, message="The limit of share sessions has been reached.")
GROUP_DELETION_FAILED: Final = _error(
    134, retriable=False,
    message="DeleteGroups could not complete; see the error message on the per-group result for "
            "details.")
STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED: Final = _error(
    135, retriable=False,
    message="The broker could not process the topology description update; see the error message "
            "for details.")
CONTROLLER_ID_NOT_REGISTERED: Final = _error(
    136, retriable=False, message="The given controller ID was not registered.")

# --- the table as data, and lookups -----------------------------------------------------------


def _collect(namespace: Mapping[str, object]) -> tuple[KafkaError, ...]:
    """The entries recorded above, each named after the module constant holding its code."""
    names_by_code: dict[int, str] = {}
    for constant, value in namespace.items():
        if constant.isupper() and type(value) is int:
            assert value not in names_by_code, f"two names for code {value}"
            names_by_code[value] = constant
    entries = tuple(KafkaError(code=code, name=names_by_code[code], retriable=retriable,
                               message=text)
                    for code, retriable, text in _ROWS)
    codes = [entry.code for entry in entries]
    # Kafka's codes run from -1 without a gap; a slip in the table above shows up here.
    assert codes == list(range(-1, len(codes) - 1)), "codes out of order or with a gap"
    assert len(names_by_code) == len(entries), "a module constant that is not an entry"
    return entries


#: Every entry, in code order: ``ERRORS[0]`` is UNKNOWN_SERVER_ERROR (-1), ``ERRORS[1]`` NONE.
ERRORS: Final[tuple[KafkaError, ...]] = _collect(globals())
#: Every entry by its code (read-only).
BY_CODE: Final[Mapping[int, KafkaError]] = types.MappingProxyType(
    {entry.code: entry for entry in ERRORS})


def by_code(code: int) -> KafkaError:
    """The entry of ``code``. Raises ``KeyError`` for a code Kafka 4.4 does not define (unlike
    Kafka's ``Errors.forCode``, which answers UNKNOWN_SERVER_ERROR: a caller that wants that
    writes ``BY_CODE.get(code, BY_CODE[UNKNOWN_SERVER_ERROR])``)."""
    return BY_CODE[code]


def name(code: int) -> str:
    """Kafka's name of ``code`` (``"NOT_LEADER_OR_FOLLOWER"`` for 6), for logs and messages.
    Any int is accepted: a code this table does not know (a newer peer's) is named
    ``"UNKNOWN_ERROR_CODE_<code>"``; never raises."""
    entry = BY_CODE.get(code)
    return entry.name if entry is not None else f"UNKNOWN_ERROR_CODE_{code}"


def message(code: int) -> str:
    """Kafka's default message of ``code`` (what a Kafka broker puts in ``error_message`` when
    it has nothing more specific). Raises ``KeyError`` for a code Kafka 4.4 does not define."""
    return BY_CODE[code].message


def is_retriable(code: int) -> bool:
    """Whether a client may send the request again after ``code`` (Kafka's exception for it is a
    ``RetriableException``). Any int is accepted: an unknown code is not retriable, as Kafka's
    ``Errors.forCode`` maps it to UNKNOWN_SERVER_ERROR."""
    entry = BY_CODE.get(code)
    return entry is not None and entry.retriable
