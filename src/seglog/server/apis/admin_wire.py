"""What the admin API modules share: the one-resource error (:class:`Refused`), building kio
responses of any version (:func:`make`), topic-name and replica-assignment checks, and reading
a broker setting. Kafka's error codes and messages are :mod:`seglog.error_codes`."""

from __future__ import annotations

import datetime
import sys
import uuid
from typing import Any, Iterable, TypeVar

from ...schemas import load_response_schema
from kio.schema.errors import ErrorCode

from ... import error_codes as codes
from ..context import BrokerState

_T = TypeVar("_T")

#: Kafka's zero uuid (no topic id).
ZERO_UUID = uuid.UUID(int=0)
NO_THROTTLE = datetime.timedelta(0)
#: Most partitions a topic may have: the Store's ``TOPIC_PARTITIONS_MAX`` (the server may not
#: import the store module, which loads the embedded clients; a test checks they agree).
TOPIC_PARTITIONS_MAX = 10000
#: Kafka's ``QuorumController.MAX_RECORDS_PER_USER_OP``: the most metadata records (one per
#: topic, config and partition) one CreateTopics may write, and the most partitions one
#: CreateTopics or CreatePartitions may ask for.
RECORDS_PER_REQUEST_MAX = 10000

#: Kafka's default messages of UNKNOWN_TOPIC_OR_PARTITION and UNKNOWN_TOPIC_ID (Errors.java).
UNKNOWN_TOPIC_MESSAGE = codes.message(codes.UNKNOWN_TOPIC_OR_PARTITION)
UNKNOWN_TOPIC_ID_MESSAGE = codes.message(codes.UNKNOWN_TOPIC_ID)

# ConfigResource.Type ids.
RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER = 2, 4, 8
# IncrementalAlterConfigs operations.
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
OP_NAMES = {OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}
#: The cluster operations an unsecured Kafka broker reports (no authorizer: all of them).
CLUSTER_AUTHORIZED_OPERATIONS = 8096


class Refused(Exception):
    """One resource's error: ``code`` and ``message`` go into its result."""

    def __init__(self, code: int, message: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message


# --- building kio responses of any version --------------------------------------------------


def response_classes(api_key: int, version: int) -> tuple[type, Any]:
    """kio's response class of ``api_key`` ``version`` and its module (the nested classes)."""
    response = load_response_schema(api_key, version)
    return response, sys.modules[response.__module__]


def make(cls: Any, **values: Any) -> Any:
    """``cls(**values)`` keeping only the fields this version of ``cls`` has; error codes
    become kio's ErrorCode and throttle times timedeltas."""
    fields = cls.__dataclass_fields__
    kwargs = {}
    for name, value in values.items():
        f = fields.get(name)
        if f is None:
            continue
        kind = f.metadata.get("kafka_type")
        if kind == "error_code" and not isinstance(value, ErrorCode):
            value = ErrorCode(value)
        elif kind == "timedelta_i32" and isinstance(value, int):
            value = datetime.timedelta(milliseconds=value)
        kwargs[name] = value
    return cls(**kwargs)


def code_of(exc: BaseException) -> int:
    """The Kafka error code a seglog error carries (UNKNOWN_SERVER_ERROR for others)."""
    code = getattr(exc, "kafka_error_code", codes.UNKNOWN_SERVER_ERROR)
    return code if code in codes.BY_CODE else codes.UNKNOWN_SERVER_ERROR


def broker_setting(state: BrokerState, name: str, default: Any) -> Any:
    """The broker config ``name`` (``state.config[name]``), or ``default`` when the config has
    no such name."""
    try:
        return state.config[name]
    except KeyError:
        return default


# --- topic names ------------------------------------------------------------------------------


def topic_name_error(name: Any) -> str | None:
    """Kafka 4.4's ``Topic.validate`` message for an illegal topic name, or None."""
    if not isinstance(name, str) or not name:
        return "Topic name is invalid: the empty string is not allowed"
    if name in (".", ".."):
        return f"Topic name is invalid: '{name}' is not allowed"
    if len(name) > 249:
        return (f"Topic name is invalid: the length of '{name}' is longer than the max "
                "allowed length 249")
    if not all(c.isascii() and (c.isalnum() or c in "._-") for c in name):
        return (f"Topic name is invalid: '{name}' contains one or more characters other than "
                "ASCII alphanumerics, '.', '_' and '-'")
    return None


def duplicates(names: Iterable[_T]) -> set[_T]:
    """The items of ``names`` seen more than once."""
    seen: set[_T] = set()
    dups: set[_T] = set()
    for name in names:
        (dups if name in seen else seen).add(name)
    return dups
