"""``seglog topics``: list, describe, create, alter, add partitions to and delete topics, as
Kafka's ``kafka-topics`` and ``kafka-configs --entity-type topics`` do.

Two modes (:mod:`seglog.commands.target`):

* ``--data-dir DIR``: the data directory through :class:`seglog.Store`'s public API. A data
  directory is one broker: every partition's leader, replica and in-sync replica is that
  broker's id (``meta.properties``' node id, 0 when it has none). No broker may be serving
  the directory (the Store's writer lock says so, and so does the error).
* ``--bootstrap-server HOST:PORT``: any Kafka-protocol broker through confluent-kafka's
  AdminClient (Metadata, DescribeTopicPartitions, DescribeConfigs, CreateTopics,
  IncrementalAlterConfigs, CreatePartitions, DeleteTopics). Sizes on disk come from
  DescribeLogDirs (API 35), which librdkafka lacks: one request per broker holding the
  described topics' replicas, through :mod:`seglog.commands.wire` (the same TLS and SASL
  settings); a partition's size is its leader's replica's. When a broker cannot be asked
  (refused, or a setting the wire client does not build) the sizes are left out (null, "?")
  and stderr says why.

``--output json`` of ``list``::

    {"topics": ["clicks", "orders"]}

and of ``describe`` (``size_bytes`` is null where the size is unknown; ``configs`` holds the
configs that are not at their default, with Kafka's config source name)::

    {"topics": [{"name": "clicks", "topic_id": "...", "internal": false,
                 "partition_count": 2, "replication_factor": 1,
                 "configs": {"retention.ms": {"value": "1000",
                                              "source": "DYNAMIC_TOPIC_CONFIG"}},
                 "partitions": [{"partition": 0, "leader": 0, "replicas": [0],
                                 "isr": [0], "size_bytes": 1234}, ...]}]}

Exit codes: 0 done; 1 the store or the broker refused (``TOPIC_ALREADY_EXISTS``,
``INVALID_CONFIG``, ... with Kafka's error name and message) or failed; 2 bad usage; 3 a named
topic does not exist (``--if-exists`` on delete makes that a success).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import warnings
from typing import Any, Iterable, Mapping, Sequence

from .. import error_codes as codes
from ..errors import LogLockedError, SeglogError
from .target import (EXIT_ERROR, EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, Target,
                     add_target_options, target_from_args)

__all__ = ["add_parser", "main", "TopicsFailed"]

#: How long one AdminClient call may take before the command gives up, unless
#: ``--command-config`` sets ``request.timeout.ms`` (librdkafka's default, 30 s).
ADMIN_TIMEOUT_S = 30.0
#: Kafka's config source of a topic's own setting (a data directory has no other kind).
_TOPIC_SOURCE = "DYNAMIC_TOPIC_CONFIG"


class TopicsFailed(Exception):
    """A refusal or failure the command reports as ``seglog topics: <message>`` with exit
    code ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR):
        super().__init__(message)
        self.exit_code = exit_code


def _unknown_topic(name: str) -> TopicsFailed:
    return TopicsFailed(f"UNKNOWN_TOPIC_OR_PARTITION: topic '{name}' does not exist",
                        EXIT_PROBLEMS)


def _seglog_error_text(exc: SeglogError | ValueError | TypeError) -> str:
    code = getattr(exc, "kafka_error_code", codes.UNKNOWN_SERVER_ERROR)
    return f"{codes.name(code)}: {exc}"


def _config_pairs(values: Sequence[str] | None) -> dict[str, str]:
    """``["k=v", ...]`` -> ``{"k": "v"}``; TopicsFailed (usage) for an item without ``=``."""
    out: dict[str, str] = {}
    for item in values or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise TopicsFailed(f"--config {item!r}: expected NAME=VALUE", EXIT_USAGE)
        out[name.strip()] = value
    return out


def _check_partition_count(count: int) -> None:
    """The seglog broker's refusal of a count above a store's limit, in its words."""
    from ..store import TOPIC_PARTITIONS_MAX
    if count > TOPIC_PARTITIONS_MAX:
        raise TopicsFailed(f"INVALID_PARTITIONS: seglog topics have at most "
                           f"{TOPIC_PARTITIONS_MAX} partitions")


# --- local mode: the Store ------------------------------------------------------------------

class _LocalTopics:
    """The subcommands on a data directory (one broker: its node id leads every partition)."""

    def __init__(self, data_dir: str, *, create_dir: bool):
        from ..store import Store
        if not create_dir and not os.path.isdir(data_dir):
            raise TopicsFailed(f"{data_dir}: no such data directory")
        if not create_dir and not os.path.exists(os.path.join(data_dir, "meta.properties")):
            # opening would make one there: only create may start a new data directory
            raise TopicsFailed(f"{data_dir}: not a data directory (no meta.properties)")
        try:
            self.store = Store(data_dir)
        except LogLockedError as exc:
            raise TopicsFailed(f"{exc}; is a broker serving it? use --bootstrap-server "
                               f"with that broker's address") from exc
        self._offline: Mapping[Any, str] = {}
        meta = self.store.meta
        #: The one broker's id: meta.properties' node id, 0 without one.
        self.node_id = meta.node_id if meta is not None and meta.node_id is not None else 0

    def close(self) -> None:
        self.store.close()

    def _topic(self, name: str) -> Any:
        if name not in self.store:
            raise _unknown_topic(name)
        return self.store.topic(name)

    def names(self, include_internal: bool) -> list[str]:
        return [n for n in self.store.topics()
                if include_internal or not self.store.topic(n).is_internal]

    def describe(self, name: str) -> dict[str, Any]:
        topic = self._topic(name)
        overrides = topic.config.to_kafka(include_defaults=False, topic_only=True)
        partitions = []
        for p, log in enumerate(topic.logs):
            online = log is not None and (name, p) not in self._offline
            partitions.append({
                "partition": p, "leader": self.node_id if online else -1,
                # an offline partition keeps its last ISR, as Kafka's controller does (and
                # a broker serving this directory reports)
                "replicas": [self.node_id], "isr": [self.node_id],
                "size_bytes": log.size_bytes if online and log is not None else None})
        return {"name": name, "topic_id": topic.topic_id, "internal": topic.is_internal,
                "partition_count": topic.partitions, "replication_factor": 1,
                "configs": {k: {"value": v, "source": _TOPIC_SOURCE}
                            for k, v in sorted(overrides.items())},
                "partitions": partitions}

    def create(self, name: str, partitions: int | None, replication_factor: int | None,
               configs: dict[str, str], if_not_exists: bool) -> bool:
        from ..errors import TopicExistsError
        from ..server.apis.admin_wire import topic_name_error
        bad_name = topic_name_error(name)
        if bad_name is not None:
            # Kafka 4.4's words (the Store's are the older Topic.validate's)
            raise TopicsFailed(f"INVALID_TOPIC_EXCEPTION: {bad_name}")
        if replication_factor is not None and replication_factor != 1:
            # Kafka's controller's words (ReplicationControlManager) for one broker.
            raise TopicsFailed(
                f"INVALID_REPLICATION_FACTOR: Unable to replicate the partition "
                f"{replication_factor} time(s): The target replication factor of "
                f"{replication_factor} cannot be reached because only 1 broker(s) are "
                f"registered or some brokers have all their log directories cordoned.")
        count = partitions if partitions is not None else 1
        _check_partition_count(count)
        try:
            self.store.create_topic(name, count, configs)
        except TopicExistsError:
            if if_not_exists and name in self.store:
                return False
            raise
        return True

    def alter(self, name: str, sets: dict[str, str], deletes: Sequence[str]) -> None:
        topic = self._topic(name)
        current = topic.config.to_kafka(include_defaults=False, topic_only=True)
        # Deleting a config the topic does not set (or one that does not exist) changes
        # nothing, as Kafka's IncrementalAlterConfigs DELETE; the store checks every new value
        # (Kafka's names and messages) before anything changes.
        for key in deletes:
            current.pop(key, None)
        current.update(sets)
        self.store.alter_topic_config(name, current)

    def add_partitions(self, name: str, total: int) -> None:
        self._topic(name)
        _check_partition_count(total)
        self.store.create_partitions(name, total)

    def delete(self, name: str) -> None:
        self._topic(name)
        self.store.delete_topic(name)

    def prepare(self, names: Sequence[str]) -> None:
        """Check every active segment now (as a broker does at start), so that a partition
        whose flushed data is gone is told offline."""
        self.store.check_active_segments()
        self._offline = self.store.offline_partitions()

    def sizes_note(self) -> str | None:
        return None


# --- broker mode: confluent-kafka's AdminClient ----------------------------------------------

def _kafka_failure(exc: Exception, topic: str | None = None) -> TopicsFailed:
    """A librdkafka KafkaException as TopicsFailed with Kafka's error name (exit 3 for an
    unknown topic)."""
    inner: Any = exc.args[0] if exc.args else None
    code = inner.code() if inner is not None and hasattr(inner, "code") else None
    if code == codes.UNKNOWN_TOPIC_OR_PARTITION and topic is not None:
        return _unknown_topic(topic)
    if code is not None and code >= codes.UNKNOWN_SERVER_ERROR:
        # Kafka's name (librdkafka abbreviates some); below -1 are librdkafka's own errors.
        return TopicsFailed(f"{codes.name(code)}: {inner.str()}")
    if inner is not None and hasattr(inner, "name"):
        return TopicsFailed(f"{inner.name()}: {inner.str()}")
    return TopicsFailed(str(exc))


def _kafka_uuid_text(topic_id: Any) -> str:
    """A topic id as Kafka prints it (``Uuid.toString``: URL-safe base64, unpadded);
    librdkafka's text is the standard alphabet."""
    return str(topic_id).replace("+", "-").replace("/", "_").rstrip("=")


def _source_name(source: Any) -> str:
    """Kafka's name of a config source (librdkafka gives an int or a ConfigSource)."""
    from confluent_kafka.admin import ConfigSource
    try:
        return ConfigSource(source).name
    except ValueError:
        return str(source)


class _LastLine(logging.Handler):
    """Keeps librdkafka's last log line (of level WARNING and above)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        #: The last line, or None.
        self.text: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.text = record.getMessage()


class _BrokerTopics:
    """The subcommands against a broker through librdkafka's AdminClient."""

    def __init__(self, target: Target):
        from confluent_kafka.admin import AdminClient
        self.target = target
        config: dict[str, Any] = dict(target.client_config)
        # A CLI run ends by closing its connections: librdkafka must not log that as a fault.
        config.setdefault("log.connection.close", "false")
        # librdkafka's log lines (a connection refused every 50 ms while it retries) would
        # flood the terminal: the last one is kept and told with the error, if there is one.
        self.last_log = _LastLine()
        logger = logging.getLogger("seglog.commands.topics.librdkafka")
        logger.propagate = False
        logger.handlers[:] = [self.last_log]
        self.admin = AdminClient(config, logger=logger)
        try:
            self.timeout_s = int(config.get("request.timeout.ms", ADMIN_TIMEOUT_S * 1000)) \
                / 1000.0
        except ValueError:
            raise TopicsFailed("request.timeout.ms is not an integer") from None
        self._described: dict[str, Any] = {}
        #: ``{(broker id, topic, partition): size_bytes}`` from :meth:`prepare`.
        self._sizes: dict[tuple[int, str, int], int] = {}
        self._sizes_note: str | None = None

    def close(self) -> None:
        pass

    def _failure(self, exc: Exception, topic: str | None = None) -> TopicsFailed:
        failed = _kafka_failure(exc, topic)
        inner: Any = exc.args[0] if exc.args else None
        code = inner.code() if inner is not None and hasattr(inner, "code") else 0
        self.admin.poll(0)  # serves the queued log lines to the handler
        if code < codes.UNKNOWN_SERVER_ERROR and self.last_log.text:
            # librdkafka's own error (transport, timeout): its last log line says why
            return TopicsFailed(f"{failed} ({self.last_log.text})", failed.exit_code)
        return failed

    def _result(self, future: Any, topic: str | None = None) -> Any:
        from confluent_kafka import KafkaException
        try:
            # a little longer than the request's own timeout, so that the broker's (or
            # librdkafka's) answer is the one told; TimeoutError (an OSError) otherwise
            return future.result(timeout=self.timeout_s + 5.0)
        except KafkaException as exc:
            raise self._failure(exc, topic) from exc

    def _all_names(self) -> list[str]:
        from confluent_kafka import KafkaException
        try:
            metadata = self.admin.list_topics(timeout=self.timeout_s)
        except KafkaException as exc:
            raise self._failure(exc) from exc
        return sorted(metadata.topics)

    def _descriptions(self, names: Sequence[str]) -> dict[str, Any]:
        if not names:
            return {}
        futures = self.admin.describe_topics(self._collection(names),
                                             request_timeout=self.timeout_s)
        return {name: self._result(f, name) for name, f in futures.items()}

    def names(self, include_internal: bool) -> list[str]:
        names = self._all_names()
        if include_internal:
            return names
        if not names:
            return []
        internal = set()
        for name, future in self.admin.describe_topics(
                self._collection(names), request_timeout=self.timeout_s).items():
            try:
                if self._result(future, name).is_internal:
                    internal.add(name)
            except TopicsFailed as exc:
                if exc.exit_code != EXIT_PROBLEMS:
                    raise
                internal.add(name)  # deleted since it was listed: not listed either
        return [n for n in names if n not in internal]

    def _configs(self, name: str) -> dict[str, dict[str, Any]]:
        from confluent_kafka.admin import ConfigResource, ResourceType
        futures = self.admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)],
                                              request_timeout=self.timeout_s)
        out: dict[str, dict[str, Any]] = {}
        for future in futures.values():
            for key, entry in sorted(self._result(future, name).items()):
                if entry.is_default:
                    continue
                out[key] = {"value": None if entry.is_sensitive else entry.value,
                            "source": _source_name(entry.source)}
        return out

    def prepare(self, names: Sequence[str]) -> None:
        """Describe ``names`` in one DescribeTopicPartitions and ask every broker holding
        their replicas for the sizes on disk (one DescribeLogDirs each)."""
        found: dict[str, Any] = {}
        for name, future in self.admin.describe_topics(
                self._collection(names), request_timeout=self.timeout_s).items():
            try:
                found[name] = self._result(future, name)
            except TopicsFailed as exc:
                if exc.exit_code != EXIT_PROBLEMS:
                    raise
        self._described = found
        brokers = sorted({n.id for d in found.values() for p in d.partitions
                          for n in p.replicas})
        if not found:
            return
        try:
            self._sizes = _describe_log_dirs(
                self.target, brokers, {n: len(d.partitions) for n, d in found.items()})
        except (OSError, SeglogError) as exc:
            self._sizes_note = f"sizes on disk unknown: {exc}"

    @staticmethod
    def _collection(names: Sequence[str]) -> Any:
        from confluent_kafka import TopicCollection
        return TopicCollection(list(names))

    def describe(self, name: str) -> dict[str, Any]:
        desc = self._described.get(name)
        if desc is None:
            desc = self._descriptions([name])[name]
        partitions = []
        for p in sorted(desc.partitions, key=lambda p: p.id):
            leader = p.leader.id if p.leader is not None else -1
            partitions.append({
                "partition": p.id, "leader": leader,
                "replicas": [n.id for n in p.replicas], "isr": [n.id for n in p.isr],
                "size_bytes": self._sizes.get((leader, name, p.id))})
        return {"name": name, "topic_id": _kafka_uuid_text(desc.topic_id),
                "internal": desc.is_internal,
                "partition_count": len(partitions),
                "replication_factor": len(desc.partitions[0].replicas) if desc.partitions
                else 0,
                "configs": self._configs(name), "partitions": partitions}

    def sizes_note(self) -> str | None:
        return self._sizes_note

    def create(self, name: str, partitions: int | None, replication_factor: int | None,
               configs: dict[str, str], if_not_exists: bool) -> bool:
        from confluent_kafka.admin import NewTopic
        new = NewTopic(name, num_partitions=partitions if partitions is not None else -1,
                       replication_factor=replication_factor
                       if replication_factor is not None else -1, config=configs)
        futures = self.admin.create_topics([new], request_timeout=self.timeout_s,
                                           operation_timeout=self.timeout_s)
        try:
            self._result(futures[name])
        except TopicsFailed as exc:
            if if_not_exists and str(exc).startswith("TOPIC_ALREADY_EXISTS"):
                return False
            raise
        return True

    def alter(self, name: str, sets: dict[str, str], deletes: Sequence[str]) -> None:
        from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                           ResourceType)
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                   for k, v in sets.items()]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                    for k in deletes]
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        futures = self.admin.incremental_alter_configs([resource],
                                                       request_timeout=self.timeout_s)
        for future in futures.values():
            self._result(future, name)

    def add_partitions(self, name: str, total: int) -> None:
        from confluent_kafka.admin import NewPartitions
        futures = self.admin.create_partitions([NewPartitions(name, total)],
                                               request_timeout=self.timeout_s,
                                               operation_timeout=self.timeout_s)
        self._result(futures[name], name)

    def delete(self, name: str) -> None:
        futures = self.admin.delete_topics([name], request_timeout=self.timeout_s,
                                           operation_timeout=self.timeout_s)
        self._result(futures[name], name)


#: Kafka's DescribeLogDirs API key (librdkafka's AdminClient does not offer it).
DESCRIBE_LOG_DIRS_KEY = 35


def _describe_log_dirs(target: Target, broker_ids: Iterable[int],
                       topics: Mapping[str, int]) -> dict[tuple[int, str, int], int]:
    """``{(broker id, topic, partition): size_bytes}`` of the replicas of ``topics`` (name ->
    partition count) on each of
    ``broker_ids``, from DescribeLogDirs over :mod:`seglog.commands.wire` (the tools' protocol
    client: same TLS and SASL settings as librdkafka's). A replica being moved between log
    dirs counts its current dir only. Raises WireError (SeglogError) when a broker cannot be
    asked or refuses (the caller leaves the sizes out, saying why)."""
    from .wire import KafkaResponseError, WireClient, build
    sizes: dict[tuple[int, str, int], int] = {}
    with WireClient(target.client_config) as client:
        client.metadata(list(topics))  # the brokers' addresses, for sends by broker id
        for broker_id in broker_ids:
            def make(module: Any, version: int) -> Any:
                # Kafka answers for the partitions named (an empty list names none)
                wanted = tuple(build(module.DescribableLogDirTopic, topic=t,
                                     partitions=tuple(range(count)))
                               for t, count in topics.items())
                return build(module.DescribeLogDirsRequest, topics=wanted)
            response = client.send(DESCRIBE_LOG_DIRS_KEY, make, node_id=broker_id,
                                   min_version=1)
            if getattr(response, "error_code", 0):
                raise KafkaResponseError(int(response.error_code),
                                         what=f"DescribeLogDirs to broker {broker_id}")
            for result in response.results:
                if result.error_code:
                    continue  # an offline log dir holds no readable replica
                for topic in result.topics:
                    for p in topic.partitions:
                        if not p.is_future_key:
                            sizes[(broker_id, topic.name, int(p.partition_index))] = \
                                int(p.partition_size)
    return sizes


# --- the command ----------------------------------------------------------------------------

def _open(target: Target, *, create_dir: bool = False) -> _LocalTopics | _BrokerTopics:
    if target.local:
        assert target.data_dir is not None
        return _LocalTopics(target.data_dir, create_dir=create_dir)
    return _BrokerTopics(target)


def _print_json(doc: Any) -> None:
    print(json.dumps(doc, indent=2, sort_keys=False))


def _node_list(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids)


def _describe_text(doc: dict[str, Any]) -> list[str]:
    configs = ",".join(
        f"{k}={v['value'] if v['value'] is not None else '(sensitive)'}"
        + ("" if v["source"] == "DYNAMIC_TOPIC_CONFIG" else f" ({v['source']})")
        for k, v in doc["configs"].items())
    lines = [f"Topic: {doc['name']}\tTopicId: {doc['topic_id']}\t"
             f"PartitionCount: {doc['partition_count']}\t"
             f"ReplicationFactor: {doc['replication_factor']}\tConfigs: {configs}"]
    for p in doc["partitions"]:
        leader = p["leader"] if p["leader"] >= 0 else "none"
        size = p["size_bytes"] if p["size_bytes"] is not None else "?"
        lines.append(f"\tTopic: {doc['name']}\tPartition: {p['partition']}\tLeader: {leader}\t"
                     f"Replicas: {_node_list(p['replicas'])}\tIsr: {_node_list(p['isr'])}\t"
                     f"Size: {size}")
    return lines


def _partition_filter(args: argparse.Namespace) -> Any:
    """describe's ``--under-replicated-partitions`` / ``--unavailable-partitions`` as a
    predicate on a partition's JSON (None: no filter)."""
    if getattr(args, "under_replicated_partitions", False):
        return lambda p: len(p["isr"]) < len(p["replicas"])
    if getattr(args, "unavailable_partitions", False):
        return lambda p: p["leader"] < 0
    return None


def _run(args: argparse.Namespace, target: Target) -> int:
    action = args.action
    topics = _open(target, create_dir=action == "create")
    try:
        if action == "list":
            names = topics.names(args.include_internal)
            if target.json:
                _print_json({"topics": names})
            else:
                for name in names:
                    print(name)
            return EXIT_OK
        if action == "describe":
            names = list(args.names) or topics.names(args.include_internal)
            docs, missing = [], []
            topics.prepare(names)
            for name in names:
                try:
                    docs.append(topics.describe(name))
                except TopicsFailed as exc:
                    if exc.exit_code != EXIT_PROBLEMS:
                        raise
                    missing.append(name)
            wanted = _partition_filter(args)
            if wanted is not None:
                docs = [{**d, "partitions": [p for p in d["partitions"] if wanted(p)]}
                        for d in docs]
                docs = [d for d in docs if d["partitions"]]
            if target.json:
                _print_json({"topics": docs})
            else:
                for doc in docs:
                    lines = _describe_text(doc)
                    # as kafka-topics: a filter prints the matching partitions' lines only
                    print("\n".join(lines[1:] if wanted is not None else lines))
                if isinstance(topics, _LocalTopics) and docs:
                    print(f"(a data directory is one broker: node {topics.node_id} leads and "
                          f"replicates every partition)", file=sys.stderr)
            note = topics.sizes_note()
            if note:
                print(f"seglog topics: {note}", file=sys.stderr)
            for name in missing:
                print(f"seglog topics: {_unknown_topic(name)}", file=sys.stderr)
            return EXIT_PROBLEMS if missing else EXIT_OK
        if action == "create":
            made = topics.create(args.name, args.partitions, args.replication_factor,
                                 _config_pairs(args.config), args.if_not_exists)
            print(f"Created topic {args.name}." if made
                  else f"Topic {args.name} already exists.", file=sys.stderr)
            return EXIT_OK
        if action == "alter":
            sets = _config_pairs(args.config)
            deletes = list(args.delete_config or ())
            if not sets and not deletes:
                raise TopicsFailed("alter: give --config NAME=VALUE and/or --delete-config "
                                   "NAME", EXIT_USAGE)
            topics.alter(args.name, sets, deletes)
            print(f"Completed updating config for topic {args.name}.", file=sys.stderr)
            return EXIT_OK
        if action == "add-partitions":
            topics.add_partitions(args.name, args.partitions)
            print(f"Topic {args.name} now has {args.partitions} partitions.", file=sys.stderr)
            return EXIT_OK
        if action == "delete":
            code = EXIT_OK
            for name in args.names:
                try:
                    topics.delete(name)
                    print(f"Deleted topic {name}.", file=sys.stderr)
                except TopicsFailed as exc:
                    if exc.exit_code == EXIT_PROBLEMS and args.if_exists:
                        continue
                    print(f"seglog topics: {exc}", file=sys.stderr)
                    code = max(code, exc.exit_code)
            return code
        raise TopicsFailed(f"unknown action {action!r}", EXIT_USAGE)
    finally:
        topics.close()


def main(args: argparse.Namespace) -> int:
    """Run ``seglog topics ACTION ...``; returns the exit code (see the module docstring)."""
    from confluent_kafka import KafkaException
    try:
        # The Store warns of offline partitions (RuntimeWarning): told as one line each,
        # not as Python's warning with a source line.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            try:
                return _run(args, target_from_args(args))
            finally:
                for warning in caught:
                    if issubclass(warning.category, (RuntimeWarning, UserWarning)):
                        print(f"seglog topics: warning: {warning.message}", file=sys.stderr)
    except TopicsFailed as exc:
        print(f"seglog topics: {exc}", file=sys.stderr)
        return exc.exit_code
    except KafkaException as exc:
        failed = _kafka_failure(exc)
        print(f"seglog topics: {failed}", file=sys.stderr)
        return failed.exit_code
    except (SeglogError, ValueError, TypeError) as exc:
        print(f"seglog topics: {_seglog_error_text(exc)}", file=sys.stderr)
        return EXIT_PROBLEMS if getattr(exc, "kafka_error_code", None) \
            == codes.UNKNOWN_TOPIC_OR_PARTITION else EXIT_ERROR
    except OSError as exc:
        print(f"seglog topics: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


_DESCRIBE_NOTES = """\
text: a line per topic (id, partition count, replication factor, configs not at their
default with their source unless it is the topic's own setting), then a line per partition
(leader, replicas, ISR, size on disk in bytes, "?" when unknown), as kafka-topics --describe.
A data directory is one broker: its node id leads and replicates every partition.
Over the wire, sizes come from DescribeLogDirs (the leader's replica).

--output json:
  {"topics": [{"name": "clicks", "topic_id": "...", "internal": false,
               "partition_count": 2, "replication_factor": 1,
               "configs": {"retention.ms": {"value": "1000",
                                            "source": "DYNAMIC_TOPIC_CONFIG"}},
               "partitions": [{"partition": 0, "leader": 1, "replicas": [1],
                               "isr": [1], "size_bytes": 1234}, ...]}]}
exit code 3 when a named topic does not exist (the others are still described)."""


def _sub(actions: Any, name: str, help_text: str, example: str,
         more: str = "") -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = actions.add_parser(
        name, help=help_text, description=help_text,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"example:\n  {example}" + (f"\n\n{more}" if more else ""))
    add_target_options(parser)
    return parser


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``seglog topics`` and its actions on the CLI's subparsers."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "topics", help="list, describe, create, alter and delete topics (kafka-topics)",
        description="List, describe, create, alter, add partitions to and delete topics, on "
                    "a data directory (--data-dir: one broker, whose node id leads every "
                    "partition) or any Kafka broker (--bootstrap-server).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  seglog topics create clicks -p 3 --config retention.ms=86400000 "
               "-b 127.0.0.1:9092\n"
               "  seglog topics describe clicks --data-dir data\n"
               "exit codes: 0 done, 1 refused or failed, 2 bad usage, 3 no such topic")
    parser.set_defaults(run=main)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = _sub(actions, "list", "list the topics' names",
             "seglog topics list -b 127.0.0.1:9092 --include-internal",
             '--output json: {"topics": ["clicks", "orders"]}')
    p.add_argument("--include-internal", action="store_true",
                   help="also list internal topics (__consumer_offsets, ...)")

    p = _sub(actions, "describe",
             "partitions, leader, replicas, ISR, configs not at their default (with their "
             "source) and size on disk of each partition",
             "seglog topics describe clicks orders --data-dir data -o json",
             _DESCRIBE_NOTES)
    p.add_argument("names", nargs="*", metavar="NAME", help="topics (default: every topic)")
    p.add_argument("--include-internal", action="store_true",
                   help="without NAME: describe internal topics too")
    only = p.add_mutually_exclusive_group()
    only.add_argument("--under-replicated-partitions", action="store_true",
                      help="only partitions whose ISR is smaller than their replicas (as "
                           "kafka-topics)")
    only.add_argument("--unavailable-partitions", action="store_true",
                      help="only partitions without a leader (offline; as kafka-topics)")

    p = _sub(actions, "create", "create a topic",
             "seglog topics create clicks -p 3 -r 1 --config cleanup.policy=compact "
             "-b 127.0.0.1:9092")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--partitions", "-p", type=_positive, metavar="N",
                   help="partition count (default: the broker's num.partitions; 1 in a data "
                        "directory)")
    p.add_argument("--replication-factor", "-r", type=_positive, metavar="N",
                   help="replicas per partition (default: the broker's "
                        "default.replication.factor; a data directory holds 1)")
    p.add_argument("--config", "-c", action="append", metavar="NAME=VALUE",
                   help="a topic config (repeatable)")
    p.add_argument("--if-not-exists", action="store_true",
                   help="succeed when the topic already exists (as kafka-topics)")

    p = _sub(actions, "alter", "set or remove topic configs (incremental, as kafka-configs "
                               "--alter --add-config / --delete-config)",
             "seglog topics alter clicks --config retention.ms=3600000 "
             "--delete-config cleanup.policy -b 127.0.0.1:9092")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--config", "-c", action="append", metavar="NAME=VALUE",
                   help="set a topic config (repeatable)")
    p.add_argument("--delete-config", action="append", metavar="NAME",
                   help="return a topic config to its default (repeatable)")

    p = _sub(actions, "add-partitions",
             "grow a topic to N partitions in all (kafka-topics --alter --partitions)",
             "seglog topics add-partitions clicks --partitions 6 -b 127.0.0.1:9092")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--partitions", "-p", type=_positive, metavar="N", required=True,
                   help="the new partition count (more than today's)")

    p = _sub(actions, "delete", "delete topics and their data",
             "seglog topics delete clicks orders --data-dir data --if-exists")
    p.add_argument("names", nargs="+", metavar="NAME")
    p.add_argument("--if-exists", action="store_true",
                   help="succeed for topics that do not exist (as kafka-topics)")
    return parser
