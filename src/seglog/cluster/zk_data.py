"""The znodes of a Kafka 2.8 cluster in ZooKeeper: their paths and their JSON, byte for byte.

This is ``kafka/zk/ZkData.scala`` (Kafka 2.8.2) for the znodes a seglog cluster uses
(research R§1.1-1.2; docs/cluster.md, "ZooKeeper layout"): every path, and for every znode an
``encode_*`` that writes the bytes a Kafka 2.8 broker (the Scala 2.13 build, on Java 11 or
later) writes, and a ``decode_*`` that reads what either writes. Pure: no I/O, no kazoo.

**Byte compatibility.** Kafka writes its JSON with Jackson from Scala maps, so the key order
is the iteration order of the Scala (or Java) map it built, not the order in the source:

- maps of up to 4 entries (``/controller``, ``/cluster/id``, ``/latest_producer_id_block``,
  config changes, log-dir events) keep insertion order (Scala's ``Map1``-``Map4``);
- the ``state`` znode's 5-entry immutable map comes out as
  ``controller_epoch, leader, version, leader_epoch, isr`` (a CHAMP trie's order);
- the broker registration and the topic assignment are ``mutable.HashMap``\\s: their fixed key
  orders are :data:`BROKER_KEY_ORDER` and :data:`TOPIC_KEY_ORDER`, and the partition maps
  (``"0"``, ``"1"``, ...) follow :func:`scala_mutable_hashmap_order`;
- ``/config/topics/<t>``'s ``config`` is a ``java.util.Properties``, a ``ConcurrentHashMap``
  since Java 9: :func:`java_properties_order` (insertion order decides only within a bucket).

The orders were taken from the JVM (Scala 2.13 ``scala-library``, Jackson, Java 17) and are
pinned by tests/cluster/test_zk_data.py with the exact strings. A Scala 2.12 build of Kafka
orders its hash maps differently; readers never care (JSON objects are unordered), which is why
every ``decode_*`` accepts any order. Strings are escaped as Jackson's ``writeValueAsBytes``
does (``\\"``, ``\\\\``, ``\\b \\t \\n \\f \\r``, other control characters as ``\\u00XX`` in
upper case, characters outside the BMP as their surrogate pair ``\\uD83D\\uDE00``; everything
else, the rest of non-ASCII included, as UTF-8).

**Bad bytes.** Every decoder raises :class:`ZkDataError` (a :class:`~seglog.errors.SeglogError`)
for bytes that are not the JSON it expects: not UTF-8, not JSON, a missing key, a wrong type, an
int outside Java's ``int``/``long``. Kafka's readers are lenient in the same places
(``ConfigEntityZNode.decode`` of no data is an empty config; a topic znode without
``partitions`` has none), and so are these.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import uuid
from typing import Any, Iterable, Mapping, NamedTuple, Sequence
from urllib.parse import quote, unquote

from seglog.errors import SeglogError
from seglog.types import TopicPartition

__all__ = [
    "ZkDataError", "BrokerRegistration", "BrokerInfo", "TopicAssignment", "PartitionState",
    "ProducerIdBlock", "ControllerEpoch",
]

# --------------------------------------------------------------------------------- errors


class ZkDataError(SeglogError):
    """A znode's bytes are not what Kafka writes there (bad UTF-8, bad JSON, a missing key, a
    value of the wrong type or range). ``path`` names the znode when the caller knew it."""

    def __init__(self, message: str, *, path: str = ""):
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path


# ---------------------------------------------------------------------------------- paths

CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
BROKER_SEQUENCE_ID_PATH = "/brokers/seqid"
CONFIG_PATH = "/config"
CONFIG_CHANGES_PATH = "/config/changes"
#: The prefix of the persistent sequential nodes under :data:`CONFIG_CHANGES_PATH`.
CONFIG_CHANGE_PREFIX = "config_change_"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
CLUSTER_PATH = "/cluster"
CLUSTER_ID_PATH = "/cluster/id"
CONSUMERS_PATH = "/consumers"
FEATURE_PATH = "/feature"

#: Kafka's ``ConfigType.all`` (2.8): the entity types under ``/config``.
CONFIG_TYPE_TOPIC = "topics"
CONFIG_TYPE_BROKER = "brokers"
CONFIG_TYPES = (CONFIG_TYPE_TOPIC, "clients", "users", CONFIG_TYPE_BROKER, "ips")
#: Client-metrics subscriptions (KIP-714; KRaft-only in Kafka, kept by seglog's ZooKeeper
#: cluster under ``/config/client-metrics/<name>`` like the other config entities).
CONFIG_TYPE_CLIENT_METRICS = "client-metrics"
#: Group configs (ConfigResource GROUP; KRaft-only in Kafka, kept by seglog's ZooKeeper
#: cluster under ``/config/groups/<group id>``).
CONFIG_TYPE_GROUP = "groups"
#: ``ConfigEntityName.Default``: the entity name of the defaults of a type
#: (``/config/brokers/<default>``: the dynamic broker configs of the whole cluster).
DEFAULT_ENTITY_NAME = "<default>"

#: ``ZkData.PersistentZkPaths``: what every broker makes sure exists at start, in Kafka's order.
PERSISTENT_PATHS = (
    CONSUMERS_PATH, BROKER_IDS_PATH, TOPICS_PATH, CONFIG_CHANGES_PATH, DELETE_TOPICS_PATH,
    BROKER_SEQUENCE_ID_PATH, ISR_CHANGE_NOTIFICATION_PATH, PRODUCER_ID_BLOCK_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    *(f"{CONFIG_PATH}/{entity_type}" for entity_type in CONFIG_TYPES),
)

#: ``KafkaController.InitialControllerEpoch``: ``/controller_epoch``'s value before any
#: election (the first controller writes 1).
INITIAL_CONTROLLER_EPOCH = 0
#: ``LeaderAndIsr.NoLeader``: ``state.leader`` when no replica can lead.
NO_LEADER = -1
#: ``ProducerIdManager.PidBlockSize``: producer ids per block.
PRODUCER_ID_BLOCK_SIZE = 1000
#: The broker registration version Kafka 2.8 writes (IBP >= 2.7: with ``features``).
BROKER_VERSION = 5
#: The listener name and security protocol a seglog broker registers (one PLAINTEXT listener).
PLAINTEXT = "PLAINTEXT"

_INT_MIN, _INT_MAX = -(2 ** 31), 2 ** 31 - 1
_LONG_MIN, _LONG_MAX = -(2 ** 63), 2 ** 63 - 1


def broker_path(broker_id: int) -> str:
    """``/brokers/ids/<id>`` (ephemeral: the broker's registration)."""
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    """``/brokers/topics/<topic>`` (the replica assignment)."""
    return f"{TOPICS_PATH}/{topic}"


def topic_partitions_path(topic: str) -> str:
    """``/brokers/topics/<topic>/partitions`` (an empty intermediate node)."""
    return f"{topic_path(topic)}/partitions"


def topic_partition_path(tp: TopicPartition) -> str:
    """``/brokers/topics/<topic>/partitions/<p>`` (an empty intermediate node)."""
    return f"{topic_partitions_path(tp[0])}/{tp[1]}"


def partition_state_path(tp: TopicPartition) -> str:
    """``/brokers/topics/<topic>/partitions/<p>/state`` (leader, leader epoch, ISR)."""
    return f"{topic_partition_path(tp)}/state"


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize`` of a user or client-id in a config znode's name:
    ``URLEncoder`` (letters, digits and ``.-_`` kept), ``*`` as ``%2A``, a space as ``%20``,
    ``~`` as ``%7E`` (Python's ``quote`` keeps ``~``; Java's URLEncoder does not)."""
    return quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    """Kafka's ``Sanitizer.desanitize`` (URL decoding)."""
    return unquote(name)


def config_entity_path(entity_type: str, entity_name: str) -> str:
    """``/config/<type>/<name>`` (config overrides of one entity)."""
    return f"{CONFIG_PATH}/{entity_type}/{entity_name}"


def topic_config_path(topic: str) -> str:
    """``/config/topics/<topic>``."""
    return config_entity_path(CONFIG_TYPE_TOPIC, topic)


def broker_config_entity(broker_id: int | None) -> str:
    """The entity name of a broker's dynamic configs under ``/config/brokers``: its id, or
    :data:`DEFAULT_ENTITY_NAME` for the cluster-wide defaults (``broker_id`` None), as
    ``AdminZkClient.changeBrokerConfig``."""
    return DEFAULT_ENTITY_NAME if broker_id is None else str(int(broker_id))


def entity_change_path(entity_type: str, entity_name: str) -> str:
    """The ``entity_path`` a version-2 change notification names: ``<type>/<name>``
    (``topics/clicks``, ``brokers/<default>``)."""
    return f"{entity_type}/{entity_name}"


def split_entity_change_path(entity_path: str) -> tuple[str, str]:
    """``(type, name)`` of a notification's ``entity_path`` (the name may itself hold
    slashes, as ``users/<u>/clients/<c>``); :class:`ZkDataError` when it has no ``/``
    (``DynamicConfigManager.processEntityConfigChangeVersion2``)."""
    entity_type, slash, entity_name = entity_path.partition("/")
    if not slash or not entity_type or not entity_name:
        raise ZkDataError(f"entity_path must be <type>/<name>, not {entity_path!r:.100}",
                          path=CONFIG_CHANGES_PATH)
    return entity_type, entity_name


def config_change_sequence(name: str) -> int | None:
    """The sequence number of a ``config_change_<seq>`` child (``changeNumber``), or None for
    a child that is not a config change notification."""
    if not name.startswith(CONFIG_CHANGE_PREFIX):
        return None
    digits = name[len(CONFIG_CHANGE_PREFIX):]
    return int(digits) if digits.isdigit() else None


def delete_topic_path(topic: str) -> str:
    """``/admin/delete_topics/<topic>`` (a request to delete the topic)."""
    return f"{DELETE_TOPICS_PATH}/{topic}"


def sequence_number(name: str, prefix: str) -> str:
    """The 10-digit sequence number of a sequential node's ``name`` (``isr_change_0000000003``
    -> ``"0000000003"``), as Kafka's ``sequenceNumber``."""
    return name[name.rfind(prefix) + len(prefix):] if prefix in name else ""


# ------------------------------------------------------------------------- the data classes


@dataclasses.dataclass(frozen=True)
class BrokerRegistration:
    """What a broker registers under ``/brokers/ids/<id>``: its id, its advertised listener
    (``host``, ``port``: the PLAINTEXT one when ``endpoints`` is empty), its rack (None: no
    rack) and ``endpoints``: every advertised listener as ``(listener name, security
    protocol, host, port)``, in order (empty: the one PLAINTEXT listener ``host:port``)."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[tuple[str, str, str, int], ...] = ()


@dataclasses.dataclass(frozen=True)
class BrokerInfo:
    """A live broker as read back: id, the advertised endpoint (``host``, ``port``: the
    PLAINTEXT listener's, else the first listener's), rack, ``epoch``, the registration
    znode's czxid (Kafka's broker epoch, KIP-380; -1 when unknown), and ``endpoints``: every
    advertised listener as ``(listener name, host, port)`` (empty for a version 1
    registration, which names one address only)."""

    broker_id: int
    host: str
    port: int
    rack: str | None
    epoch: int
    endpoints: tuple[tuple[str, str, int], ...] = ()

    def address(self, listener_name: str) -> tuple[str, int] | None:
        """``(host, port)`` of listener ``listener_name`` (normalised, ``"SSL"``); None when
        the broker has no such listener. A registration without named endpoints answers
        its one address for any listener."""
        if not self.endpoints:
            return self.host, self.port
        for name, host, port in self.endpoints:
            if name == listener_name:
                return host, port
        return None


@dataclasses.dataclass(frozen=True)
class TopicAssignment:
    """``/brokers/topics/<topic>``: the topic id (None for a znode written before topic ids)
    and each partition's replica list, in order (the first is the preferred leader).
    ``adding_replicas``/``removing_replicas`` are a reassignment's, empty otherwise."""

    topic: str
    topic_id: uuid.UUID | None
    partitions: dict[int, list[int]]
    adding_replicas: dict[int, list[int]] = dataclasses.field(default_factory=dict)
    removing_replicas: dict[int, list[int]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class PartitionState:
    """``.../partitions/<p>/state``: ``leader`` (:data:`NO_LEADER` when none), ``leader_epoch``,
    ``isr`` (a tuple, in the writer's order), ``controller_epoch`` (of the controller that made
    the current leadership decision) and ``zk_version``, the znode's version when read (the
    expected version of the next CAS; ignored when encoding)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = -1


@dataclasses.dataclass(frozen=True)
class ProducerIdBlock:
    """``/latest_producer_id_block``: the block of producer ids ``start..end`` (inclusive) a
    broker claimed."""

    broker_id: int
    start: int
    end: int


class ControllerEpoch(NamedTuple):
    """``/controller_epoch``: the epoch, and the znode's version that fences every write of
    the controller holding that epoch (R§1.3.2)."""

    epoch: int
    zk_version: int


# ------------------------------------------------------------------ JSON, as Jackson writes it

_JACKSON_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n",
                          "\f": "\\f", "\r": "\\r"}


def _json_string(text: str) -> str:
    out = ['"']
    for char in text:
        escaped = _JACKSON_SHORT_ESCAPES.get(char)
        if escaped is not None:
            out.append(escaped)
        elif char < " ":
            out.append(f"\\u{ord(char):04X}")
        elif char > "\uffff":
            # Jackson's UTF8JsonGenerator (writeValueAsBytes) escapes a character outside the
            # BMP as its UTF-16 surrogate pair instead of writing its 4 UTF-8 bytes.
            code = ord(char) - 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _json(value: Any) -> str:
    """Compact JSON of ``value`` with dicts in their given order (no recursion limit worth a
    name: the values written here nest at most three deep)."""
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{_json_string(k)}:{_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_json(v) for v in value) + "]"
    raise TypeError(f"not a JSON value of a znode: {value!r}")


def _to_bytes(value: Any) -> bytes:
    try:
        return _json(value).encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate in a str
        raise ZkDataError(f"not encodable as UTF-8: {exc}") from None


def _ordered(mapping: Mapping[str, Any], order: Sequence[str]) -> dict[str, Any]:
    return {key: mapping[key] for key in order if key in mapping}


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` of ``text`` (over UTF-16 code units), as a signed int32."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def scala_mutable_hashmap_order(keys: Sequence[str]) -> list[str]:
    """The iteration order of a Scala 2.13 ``mutable.HashMap`` into which the distinct string
    ``keys`` were put one by one, starting empty (capacity 16, load factor 0.75).

    Scala keeps each bucket sorted by the improved hash ``h ^ (h >>> 16)`` (signed compare),
    the bucket being ``improved & (length - 1)``; the table doubles before the put that would
    reach 3/4 of it. So the order is (bucket, improved hash, insertion) for the final length.
    """
    length, size = 16, 0
    for _ in keys:
        if size + 1 >= int(length * 0.75):
            length *= 2
        size += 1
    ranked = []
    for index, key in enumerate(keys):
        h = java_string_hash(key) & 0xFFFFFFFF
        improved = h ^ (h >> 16)
        signed = improved - (1 << 32) if improved & 0x80000000 else improved
        ranked.append((improved & (length - 1), signed, index, key))
    ranked.sort()
    return [key for *_, key in ranked]


#: A ConcurrentHashMap bin this long would be treeified (or force a resize): the emulation of
#: :func:`java_properties_order` stops there and keeps insertion order instead.
_CHM_TREEIFY_THRESHOLD = 8


def java_properties_order(keys: Sequence[str]) -> list[str]:
    """The iteration order of a ``java.util.Properties`` (Java 9+: a ``ConcurrentHashMap`` of
    initial capacity 8, so a table of 16) into which the distinct ``keys`` were put in order.

    A key goes to bin ``spread(h) & (n - 1)`` (``spread(h) = (h ^ (h >>> 16)) & 0x7fffffff``),
    appended to the bin's list; after the put that brings the count to 3/4 of the table, the
    table doubles and each bin splits in two the way ``transfer`` does it (the tail run that
    goes one way is kept, the nodes before it are prepended, reversing them). Iteration walks
    the bins in order. Bins of 8 or more (never seen with config names) are not emulated:
    insertion order is returned then.
    """
    length = 16
    table: list[list[tuple[int, str]]] = [[] for _ in range(length)]
    for count, key in enumerate(keys, start=1):
        h = java_string_hash(key) & 0xFFFFFFFF
        spread = (h ^ (h >> 16)) & 0x7FFFFFFF
        bin_ = table[spread & (length - 1)]
        bin_.append((spread, key))
        if len(bin_) >= _CHM_TREEIFY_THRESHOLD:
            return list(keys)
        if count >= length - (length >> 2):
            table = _chm_transfer(table, length)
            length *= 2
    return [key for bin_ in table for _, key in bin_]


def _chm_transfer(table: list[list[tuple[int, str]]], length: int) -> list[list[tuple[int, str]]]:
    grown: list[list[tuple[int, str]]] = [[] for _ in range(2 * length)]
    for index, nodes in enumerate(table):
        if not nodes:
            continue
        run_bit, last_run = nodes[0][0] & length, 0
        for position in range(1, len(nodes)):
            bit = nodes[position][0] & length
            if bit != run_bit:
                run_bit, last_run = bit, position
        low = list(nodes[last_run:]) if run_bit == 0 else []
        high = list(nodes[last_run:]) if run_bit != 0 else []
        for node in nodes[:last_run]:
            if node[0] & length == 0:
                low.insert(0, node)
            else:
                high.insert(0, node)
        grown[index], grown[index + length] = low, high
    return grown


# ------------------------------------------------------------------------ reading JSON back


def _parse(data: bytes | None, path: str) -> Any:
    if data is None:
        raise ZkDataError("no data", path=path)
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ZkDataError(f"not UTF-8: {exc}", path=path) from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ZkDataError(f"not JSON: {exc}: {text[:200]!r}", path=path) from None


def _object(data: bytes | None, path: str) -> dict[str, Any]:
    value = _parse(data, path)
    if not isinstance(value, dict):
        raise ZkDataError(f"not a JSON object: {value!r:.200}", path=path)
    return value


def _get(obj: Mapping[str, Any], key: str, path: str) -> Any:
    if key not in obj:
        raise ZkDataError(f"no {key!r} in {dict(obj)!r:.200}", path=path)
    return obj[key]


def _int(value: Any, what: str, path: str, *, low: int = _INT_MIN, high: int = _INT_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ZkDataError(f"{what} is not an int in [{low}, {high}]: {value!r:.100}", path=path)
    return value


def _str(value: Any, what: str, path: str) -> str:
    if not isinstance(value, str):
        raise ZkDataError(f"{what} is not a string: {value!r:.100}", path=path)
    return value


def _int_list(value: Any, what: str, path: str) -> list[int]:
    if not isinstance(value, list):
        raise ZkDataError(f"{what} is not a list: {value!r:.100}", path=path)
    return [_int(item, what, path) for item in value]


def _long_string(value: Any, what: str, path: str) -> int:
    # Kafka writes producer ids as decimal strings and reads them with String.toLong.
    text = _str(value, what, path)
    if not re.fullmatch(r"[+-]?[0-9]{1,19}", text):
        raise ZkDataError(f"{what} is not a decimal long: {text!r:.100}", path=path)
    return _int(int(text), what, path, low=_LONG_MIN, high=_LONG_MAX)


def _int_string(text: str, what: str, path: str) -> int:
    # Java's Integer.parseInt: an optional sign and decimal digits, within int.
    if not re.fullmatch(r"[+-]?[0-9]{1,10}", text):
        raise ZkDataError(f"{what} is not a decimal int: {text!r:.100}", path=path)
    return _int(int(text), what, path)


# ------------------------------------------------------------------ Kafka's Uuid as a string


def uuid_to_string(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def uuid_from_string(text: str, *, path: str = "") -> uuid.UUID:
    """Kafka's ``Uuid.fromString``; :class:`ZkDataError` unless it is 16 bytes of URL-safe
    base64 (padding optional)."""
    if not isinstance(text, str) or not re.fullmatch(r"[A-Za-z0-9_-]{22}(==)?", text):
        raise ZkDataError(f"not a Kafka Uuid (22 chars of URL-safe base64): {text!r:.100}",
                          path=path)
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text[:22] + "=="))


def new_topic_id() -> uuid.UUID:
    """A random topic id (Kafka's ``Uuid.randomUuid``: never the zero id, and, as Kafka 3.x
    does for tools' sake, never one whose string starts with ``-``)."""
    for _ in range(1000):  # bounded: each draw fails with probability 1/64
        value = uuid.uuid4()
        if value.int != 0 and not uuid_to_string(value).startswith("-"):
            return value
    raise AssertionError("uuid4 kept drawing ids starting with '-'")


def new_cluster_id() -> str:
    """A new cluster id, as ``CoreUtils.generateUuidAsBase64``: 22 chars of URL-safe base64."""
    return uuid_to_string(uuid.uuid4())


# --------------------------------------------------------------------- /controller, epoch


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    """``/controller``: ``{"version":1,"brokerid":<id>,"timestamp":"<ms>"}``."""
    return _to_bytes({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes | None) -> int:
    """The controller's broker id from ``/controller`` (only ``brokerid`` is read, as Kafka)."""
    obj = _object(data, CONTROLLER_PATH)
    return _int(_get(obj, "brokerid", CONTROLLER_PATH), "brokerid", CONTROLLER_PATH)


def encode_controller_epoch(epoch: int) -> bytes:
    """``/controller_epoch``: the bare decimal epoch (not JSON)."""
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes | None) -> int:
    """The epoch in ``/controller_epoch`` (Java's ``toInt`` of its text)."""
    if data is None:
        raise ZkDataError("no data", path=CONTROLLER_EPOCH_PATH)
    try:
        text = bytes(data).decode("ascii")
    except UnicodeDecodeError:
        raise ZkDataError(f"not a decimal int: {bytes(data)[:50]!r}",
                          path=CONTROLLER_EPOCH_PATH) from None
    return _int_string(text, "the controller epoch", CONTROLLER_EPOCH_PATH)


# ---------------------------------------------------------------------- /brokers/ids/<id>

#: The key order of a broker registration (a Scala ``mutable.HashMap`` of these keys).
BROKER_KEY_ORDER = ("features", "listener_security_protocol_map", "endpoints", "rack",
                    "jmx_port", "port", "host", "version", "timestamp")

# Kafka's EndPoint.uriParseExp: LISTENER://host:port, the host maybe in [brackets] (IPv6).
_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


def encode_broker(registration: BrokerRegistration, *, timestamp_ms: int,
                  jmx_port: int = -1) -> bytes:
    """``/brokers/ids/<id>``, version 5 as Kafka 2.8 writes it (``BrokerIdZNode.encode``):
    every endpoint as ``NAME://host:port``, the listener name to security protocol map, and
    the PLAINTEXT endpoint's host and port as the top-level ``host``/``port`` (null and -1
    without one); no supported features."""
    endpoints = registration.endpoints or (
        (PLAINTEXT, PLAINTEXT, registration.host, registration.port),)
    plaintext = next(((h, p) for _n, protocol, h, p in endpoints if protocol == PLAINTEXT),
                     (None, -1))

    def shown(host: str) -> str:
        return f"[{host}]" if ":" in host else host

    fields: dict[str, Any] = {
        "version": BROKER_VERSION, "host": plaintext[0], "port": plaintext[1],
        "endpoints": [f"{name}://{shown(h)}:{p}" for name, _protocol, h, p in endpoints],
        "jmx_port": jmx_port,
        "timestamp": str(timestamp_ms),
        "listener_security_protocol_map": {name: protocol
                                           for name, protocol, _h, _p in endpoints},
        "features": {},
    }
    if registration.rack is not None:
        fields["rack"] = registration.rack
    return _to_bytes(_ordered(fields, BROKER_KEY_ORDER))


def decode_broker(broker_id: int, data: bytes | None, *, epoch: int = -1,
                  listener: str = PLAINTEXT) -> BrokerInfo:
    """A broker registration of any version (1-5). The endpoint is the one of ``listener``
    (the first endpoint when none has that name; version 1: the top-level host and port)."""
    path = broker_path(broker_id)
    obj = _object(data, path)
    version = _int(_get(obj, "version", path), "version", path)
    if version < 1:
        raise ZkDataError(f"unsupported broker registration version {version}", path=path)
    named: tuple[tuple[str, str, int], ...] = ()
    if version == 1:
        host = _str(_get(obj, "host", path), "host", path)
        port = _int(_get(obj, "port", path), "port", path)
    else:
        endpoints = _get(obj, "endpoints", path)
        if not isinstance(endpoints, list) or not endpoints:
            raise ZkDataError(f"endpoints is not a non-empty list: {endpoints!r:.100}", path=path)
        parsed = []
        for endpoint in endpoints:
            match = _ENDPOINT.match(_str(endpoint, "an endpoint", path))
            if match is None:
                raise ZkDataError(f"unparsable endpoint {endpoint!r:.100}", path=path)
            parsed.append((match.group(1), match.group(2),
                           _int_string(match.group(3), "an endpoint's port", path)))
        name, host, port = next((e for e in parsed if e[0] == listener), parsed[0])
        named = tuple((n.upper(), h, p) for n, h, p in parsed)
    rack = obj.get("rack")
    if rack is not None:
        rack = _str(rack, "rack", path)
    return BrokerInfo(broker_id=broker_id, host=host, port=port, rack=rack, epoch=epoch,
                      endpoints=named)


# ---------------------------------------------------------------------- /brokers/topics/<t>

#: The key order of a topic assignment (a Scala ``mutable.HashMap`` of these keys).
TOPIC_KEY_ORDER = ("partitions", "topic_id", "adding_replicas", "removing_replicas", "version")


def _replica_map(replicas: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
    # Kafka fills an empty mutable.Map[String, List] partition by partition.
    as_text = {str(int(partition)): [int(r) for r in brokers]
               for partition, brokers in replicas.items()}
    return {key: as_text[key] for key in scala_mutable_hashmap_order(list(as_text))}


def encode_topic(assignment: TopicAssignment) -> bytes:
    """``/brokers/topics/<topic>``, version 3 (with ``topic_id`` when it has one)."""
    fields: dict[str, Any] = {
        "version": 3,
        "partitions": _replica_map(assignment.partitions),
        "adding_replicas": _replica_map(assignment.adding_replicas),
        "removing_replicas": _replica_map(assignment.removing_replicas),
    }
    if assignment.topic_id is not None:
        fields["topic_id"] = uuid_to_string(assignment.topic_id)
    return _to_bytes(_ordered(fields, TOPIC_KEY_ORDER))


def _decode_replica_map(value: Any, what: str, path: str) -> dict[int, list[int]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ZkDataError(f"{what} is not an object: {value!r:.100}", path=path)
    result = {}
    for key, replicas in value.items():
        partition = _int_string(key, f"a partition of {what}", path)
        if partition < 0:
            raise ZkDataError(f"negative partition {key!r} in {what}", path=path)
        result[partition] = _int_list(replicas, f"the replicas of {what}[{key}]", path)
    return dict(sorted(result.items()))


def decode_topic(topic: str, data: bytes | None) -> TopicAssignment:
    """A topic assignment of any version (1-3); no ``partitions``: no partitions, as Kafka.
    ``partitions`` comes back sorted by partition."""
    path = topic_path(topic)
    obj = _object(data, path)
    topic_id = obj.get("topic_id")
    return TopicAssignment(
        topic=topic,
        topic_id=None if topic_id is None else uuid_from_string(topic_id, path=path),
        partitions=_decode_replica_map(obj.get("partitions"), "partitions", path),
        adding_replicas=_decode_replica_map(obj.get("adding_replicas"), "adding_replicas", path),
        removing_replicas=_decode_replica_map(obj.get("removing_replicas"), "removing_replicas",
                                              path),
    )


# ----------------------------------------------------------- .../partitions/<p>/state

#: The key order of a partition state (a 5-entry Scala immutable map, a CHAMP trie).
STATE_KEY_ORDER = ("controller_epoch", "leader", "version", "leader_epoch", "isr")


def encode_partition_state(state: PartitionState) -> bytes:
    """``.../partitions/<p>/state``, version 1 (``zk_version`` is not part of the data)."""
    fields = {"version": 1, "leader": state.leader, "leader_epoch": state.leader_epoch,
              "controller_epoch": state.controller_epoch, "isr": [int(r) for r in state.isr]}
    return _to_bytes(_ordered(fields, STATE_KEY_ORDER))


def decode_partition_state(data: bytes | None, *, zk_version: int,
                           path: str = "") -> PartitionState:
    """A partition state read with its znode's ``zk_version``."""
    path = path or "state"
    obj = _object(data, path)
    return PartitionState(
        leader=_int(_get(obj, "leader", path), "leader", path),
        leader_epoch=_int(_get(obj, "leader_epoch", path), "leader_epoch", path),
        isr=tuple(_int_list(_get(obj, "isr", path), "isr", path)),
        controller_epoch=_int(_get(obj, "controller_epoch", path), "controller_epoch", path),
        zk_version=zk_version,
    )


# ------------------------------------------------------------------ /config/<type>/<name>


def encode_entity_config(config: Mapping[str, str]) -> bytes:
    """``/config/<type>/<name>``: ``{"version":1,"config":{...}}``, the values strings, the
    keys in a ``Properties``' order (:func:`java_properties_order` of ``config``'s order)."""
    as_text = {str(k): str(v) for k, v in config.items()}
    ordered = {key: as_text[key] for key in java_properties_order(list(as_text))}
    return _to_bytes({"version": 1, "config": ordered})


def decode_entity_config(data: bytes | None, *, path: str = "") -> dict[str, str]:
    """The config overrides; no data or no ``config`` object: none (Kafka's lenient reader).
    A value that is not a string is a :class:`ZkDataError`."""
    if data is None:
        return {}
    obj = _parse(data, path)
    config = obj.get("config") if isinstance(obj, dict) else None
    if not isinstance(config, dict):
        return {}
    return {key: _str(value, f"config {key!r}", path) for key, value in config.items()}


def encode_config_change(entity_path: str) -> bytes:
    """``/config/changes/config_change_<seq>``: ``{"version":2,"entity_path":"topics/<t>"}``."""
    return _to_bytes({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes | None, *, path: str = CONFIG_CHANGES_PATH) -> str:
    """The ``entity_path`` of a config change notification: version 2's, or
    ``<entity_type>/<entity_name>`` of a version 1 (older Kafka tools; its type ``topics`` or
    ``clients``, as ``DynamicConfigManager`` accepts)."""
    obj = _object(data, path)
    version = _int(_get(obj, "version", path), "version", path)
    if version == 1:
        entity_type = _str(_get(obj, "entity_type", path), "entity_type", path)
        if entity_type not in (CONFIG_TYPE_TOPIC, "clients"):
            raise ZkDataError(f"a version 1 notification's entity_type must be topics or "
                              f"clients, not {entity_type!r:.100}", path=path)
        return f"{entity_type}/{_str(_get(obj, 'entity_name', path), 'entity_name', path)}"
    if version != 2:
        raise ZkDataError(f"unsupported config change version {version}", path=path)
    return _str(_get(obj, "entity_path", path), "entity_path", path)


# ------------------------------------------------------- notifications and admin requests


def _partition_list(partitions: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    return [{"topic": tp[0], "partition": int(tp[1])} for tp in partitions]


def _decode_partition_list(data: bytes | None, path: str) -> list[TopicPartition]:
    obj = _object(data, path)
    items = _get(obj, "partitions", path)
    if not isinstance(items, list):
        raise ZkDataError(f"partitions is not a list: {items!r:.100}", path=path)
    result = []
    for item in items:
        if not isinstance(item, dict):
            raise ZkDataError(f"a partition is not an object: {item!r:.100}", path=path)
        result.append(TopicPartition(_str(_get(item, "topic", path), "topic", path),
                                     _int(_get(item, "partition", path), "partition", path)))
    return result


def encode_isr_change(partitions: Iterable[TopicPartition]) -> bytes:
    """``/isr_change_notification/isr_change_<seq>``:
    ``{"version":1,"partitions":[{"topic":..,"partition":..},...]}`` in the given order (Kafka's
    order for up to 4 partitions; beyond, Kafka's is its Set's hash order)."""
    return _to_bytes({"version": 1, "partitions": _partition_list(partitions)})


def decode_isr_change(data: bytes | None, *, path: str = ISR_CHANGE_NOTIFICATION_PATH
                      ) -> list[TopicPartition]:
    """The partitions of an ISR change notification."""
    return _decode_partition_list(data, path)


def encode_preferred_replica_election(partitions: Iterable[TopicPartition]) -> bytes:
    """``/admin/preferred_replica_election``: the shape of :func:`encode_isr_change`."""
    return _to_bytes({"version": 1, "partitions": _partition_list(partitions)})


def decode_preferred_replica_election(data: bytes | None) -> list[TopicPartition]:
    """The partitions of a preferred replica election request."""
    return _decode_partition_list(data, PREFERRED_REPLICA_ELECTION_PATH)


def encode_reassign_partitions(reassignment: Mapping[TopicPartition, Sequence[int]]) -> bytes:
    """``/admin/reassign_partitions`` (deprecated since 2.4):
    ``{"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..]},...]}``."""
    return _to_bytes({"version": 1, "partitions": [
        {"topic": tp[0], "partition": int(tp[1]), "replicas": [int(r) for r in replicas]}
        for tp, replicas in reassignment.items()]})


def decode_reassign_partitions(data: bytes | None) -> dict[TopicPartition, list[int]]:
    """The target replicas of each partition of a reassignment request."""
    path = REASSIGN_PARTITIONS_PATH
    obj = _object(data, path)
    items = _get(obj, "partitions", path)
    if not isinstance(items, list):
        raise ZkDataError(f"partitions is not a list: {items!r:.100}", path=path)
    result = {}
    for item in items:
        if not isinstance(item, dict):
            raise ZkDataError(f"a partition is not an object: {item!r:.100}", path=path)
        tp = TopicPartition(_str(_get(item, "topic", path), "topic", path),
                            _int(_get(item, "partition", path), "partition", path))
        result[tp] = _int_list(_get(item, "replicas", path), "replicas", path)
    return result


#: ``LogDirEventNotificationSequenceZNode.LogDirFailureEvent``.
LOG_DIR_FAILURE_EVENT = 1


def encode_log_dir_event(broker_id: int) -> bytes:
    """``/log_dir_event_notification/log_dir_event_<seq>``: ``{"version":1,"broker":..,"event":1}``."""
    return _to_bytes({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes | None) -> int:
    """The broker id of a log-dir failure notification."""
    path = LOG_DIR_EVENT_NOTIFICATION_PATH
    obj = _object(data, path)
    return _int(_get(obj, "broker", path), "broker", path)


# ----------------------------------------------------- /cluster/id, /latest_producer_id_block


def encode_cluster_id(cluster_id: str) -> bytes:
    """``/cluster/id``: ``{"version":"1","id":"<id>"}`` (the version is a string here)."""
    return _to_bytes({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    """The cluster id in ``/cluster/id``."""
    obj = _object(data, CLUSTER_ID_PATH)
    return _str(_get(obj, "id", CLUSTER_ID_PATH), "id", CLUSTER_ID_PATH)


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    """``/latest_producer_id_block``:
    ``{"version":1,"broker":..,"block_start":"<start>","block_end":"<end>"}`` (inclusive)."""
    return _to_bytes({"version": 1, "broker": block.broker_id,
                      "block_start": str(block.start), "block_end": str(block.end)})


def decode_producer_id_block(data: bytes | None) -> ProducerIdBlock:
    """The block in ``/latest_producer_id_block`` (its ids are decimal strings)."""
    path = PRODUCER_ID_BLOCK_PATH
    obj = _object(data, path)
    return ProducerIdBlock(
        broker_id=_int(_get(obj, "broker", path), "broker", path),
        start=_long_string(_get(obj, "block_start", path), "block_start", path),
        end=_long_string(_get(obj, "block_end", path), "block_end", path),
    )


def next_producer_id_block(current: ProducerIdBlock | None, broker_id: int) -> ProducerIdBlock:
    """The block after ``current`` for ``broker_id`` (the first block, 0..999, when None), as
    ``ProducerIdManager.getNewProducerIdBlock``; :class:`ZkDataError` when the ids would
    exceed a long."""
    if current is None:
        return ProducerIdBlock(broker_id, 0, PRODUCER_ID_BLOCK_SIZE - 1)
    if current.end > _LONG_MAX - PRODUCER_ID_BLOCK_SIZE:
        raise ZkDataError(f"producer ids exhausted (the last block ends at {current.end})",
                          path=PRODUCER_ID_BLOCK_PATH)
    return ProducerIdBlock(broker_id, current.end + 1, current.end + PRODUCER_ID_BLOCK_SIZE)
