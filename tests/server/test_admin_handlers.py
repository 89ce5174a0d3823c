"""The admin handlers called directly, over a real Store: the error codes and messages Kafka
4.4 answers (taken from the real broker; tests/server/test_admin_clients.py checks the same
through real clients), versions old and new, and that what they change is durable."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import sys
import uuid

import pytest
from seglog.schemas import load_request_schema

from seglog.server.apis import admin
from seglog.server.apis.admin_configs import DYNAMIC_CONFIGS_FILE
from seglog.server.config import BrokerConfig
from seglog.server.context import AppendNotifier, BrokerState, RequestContext
from seglog.storage import checkpoints
from seglog.store import Store

NODE_ID = 1
TIMEOUT = datetime.timedelta(seconds=10)


def request(api_key, version, **fields):
    """The kio request of ``api_key`` ``version`` and its module (for nested classes)."""
    cls = load_request_schema(api_key, version)
    return cls, sys.modules[cls.__module__]


class Harness:
    """A BrokerState over a Store in ``path`` on a fresh event loop; ``call`` runs one
    handler. Use as a context manager."""

    def __init__(self, path, backend="native", config=None):
        self.path = path
        self.loop = asyncio.new_event_loop()
        broker_config = BrokerConfig(config or {})
        # As the Broker opens its Store: the static log.* settings are the topic defaults.
        self.store = Store(path, backend=backend, offsets_topic_partitions=1,
                           topic_config_defaults=broker_config.log_config())
        self.state = BrokerState(store=self.store, config=broker_config,
                                 node_id=NODE_ID, cluster_id="test-cluster", host="127.0.0.1",
                                 port=9092, loop=self.loop, appended=AppendNotifier(self.loop))
        self.loop.run_until_complete(admin.start(self.state))

    def call(self, api_key, version, req):
        handler = {h.api_key: h for h in admin.HANDLERS}[api_key]
        assert handler.min_version <= version <= handler.max_version
        ctx = RequestContext(api_key=api_key, api_version=version, correlation_id=1,
                             client_id="t", connection_id=1, client_host="127.0.0.1",
                             client_port=1, broker=self.state)
        return self.loop.run_until_complete(handler.handle(ctx, req))

    def close(self):
        self.loop.run_until_complete(admin.stop(self.state))
        self.store.close()
        self.loop.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- request builders

    def create(self, topics, *, version=7, validate_only=False):
        cls, m = request(19, version)
        return self.call(19, version, cls(topics=tuple(
            m.CreatableTopic(name=t[0], num_partitions=t[1], replication_factor=t[2],
                             assignments=tuple(m.CreatableReplicaAssignment(
                                 partition_index=p, broker_ids=tuple(b))
                                 for p, b in (t[4] if len(t) > 4 else ())),
                             configs=tuple(m.CreatableTopicConfig(name=k, value=v)
                                           for k, v in (t[3] if len(t) > 3 else {}).items()))
            for t in topics), timeout=TIMEOUT, validate_only=validate_only))

    def incremental(self, resource_type, name, ops, *, validate_only=False):
        cls, m = request(44, 1)
        return self.call(44, 1, cls(resources=(m.AlterConfigsResource(
            resource_type=resource_type, resource_name=name, configs=tuple(
                m.AlterableConfig(name=n, config_operation=o, value=v) for n, o, v in ops)),),
            validate_only=validate_only)).responses[0]

    def alter(self, resource_type, name, configs, *, version=2, validate_only=False):
        cls, m = request(33, version)
        return self.call(33, version, cls(resources=(m.AlterConfigsResource(
            resource_type=resource_type, resource_name=name, configs=tuple(
                m.AlterableConfig(name=n, value=v) for n, v in configs.items())),),
            validate_only=validate_only)).responses[0]

    def describe(self, resources, *, version=4, synonyms=False, documentation=False):
        cls, m = request(32, version)
        kwargs = {"include_documentation": documentation} if version >= 3 else {}
        return self.call(32, version, cls(resources=tuple(
            m.DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=k)
            for t, n, k in resources), include_synonyms=synonyms, **kwargs)).results

    def topic_configs(self, name, keys=None):
        result = self.describe([(2, name, keys)], synonyms=True)[0]
        assert result.error_code == 0, result
        return {c.name: c for c in result.configs}


def test_partition_limit_is_the_stores():
    from seglog.store import TOPIC_PARTITIONS_MAX
    assert admin.TOPIC_PARTITIONS_MAX == TOPIC_PARTITIONS_MAX


def errors(results):
    return [(r.name, int(r.error_code), r.error_message) for r in results]


def test_create_topics_answers_as_kafka(tmp_path):
    with Harness(tmp_path / "d") as h:
        r = h.create([("ok", 3, -1, {"retention.ms": "1000", "cleanup.policy": "compact"}),
                      ("co.x", 1, -1)])
        ok = r.topics[0]
        assert (ok.error_code, ok.num_partitions, ok.replication_factor) == (0, 3, 1)
        assert ok.topic_id == checkpoints.uuid_from_kafka_str(h.store.topic("ok").topic_id)
        configs = {c.name: c for c in ok.configs}
        assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == (
            "1000", 1)
        assert (configs["segment.bytes"].value, configs["segment.bytes"].config_source) == (
            "1073741824", 5)
        assert [c.name for c in ok.configs] == sorted(configs)
        topic = h.store.topic("ok")
        assert topic.partitions == 3 and topic.config.retention_ms == 1000
        assert topic.log(2).config.compaction_enabled
        big = "a" * 250
        r = h.create([("rf3", 1, 3), ("rf0", 1, 0), ("np0", 0, 1), ("ok", 1, 1),
                      ("bad/name", 1, 1), ("", 1, 1), (big, 1, 1),
                      ("uc", 1, 1, {"foo.bar": "1"}), ("bc", 1, 1, {"log.retention.ms": "1"}),
                      ("nv", 1, 1, {"retention.ms": None}), ("br", 1, 1, {"retention.ms": "-5"}),
                      ("as2", -1, -1, {}, [(0, [2])]), ("as3", -1, -1, {}, [(0, [1, 1])]),
                      ("as4", 2, -1, {}, [(0, [1])]), ("as5", -1, -1, {}, [(1, [1])]),
                      ("as6", -1, -1, {}, [(0, [])]), ("co_x", 1, 1),
                      ("dup", 1, 1), ("dup", 1, 1)])
        got = errors(r.topics)
        assert got == [
            ("rf3", 38, "Unable to replicate the partition 3 time(s): The target replication "
             "factor of 3 cannot be reached because only 1 broker(s) are registered or some "
             "brokers have all their log directories cordoned."),
            ("rf0", 38, "Replication factor must be larger than 0, or -1 to use the default "
             "value."),
            ("np0", 37, "Number of partitions was set to an invalid non-positive value."),
            ("ok", 36, "Topic 'ok' already exists."),
            ("bad/name", 17, "Topic name is invalid: 'bad/name' contains one or more characters "
             "other than ASCII alphanumerics, '.', '_' and '-'"),
            ("", 17, "Topic name is invalid: the empty string is not allowed"),
            (big, 17, f"Topic name is invalid: the length of '{big}' is longer than the max "
             "allowed length 249"),
            ("uc", 40, "Unknown topic config name: foo.bar"),
            ("bc", 40, "Unknown topic config name: log.retention.ms"),
            ("nv", 40, "Null value not supported for topic configs: retention.ms"),
            ("br", 40, "Invalid value -5 for configuration retention.ms: Value must be at "
             "least -1"),
            ("as2", 39, "The manual partition assignment includes broker 2, but no such broker "
             "is registered."),
            ("as3", 39, "The manual partition assignment includes the broker 1 more than once."),
            ("as4", 42, "A manual partition assignment was specified, but numPartitions was not "
             "set to -1."),
            ("as5", 39, "partitions should be a consecutive 0-based integer sequence"),
            ("as6", 39, "The manual partition assignment includes an empty replica list."),
            ("co_x", 17, "Topic 'co_x' collides with existing topic: co.x"),
            ("dup", 42, "Duplicate topic name."),
        ]
        assert all(t.num_partitions == -1 and t.configs == () for t in r.topics)
        # Kafka refuses a whole request asking for too many partitions, or records.
        r = h.create([("x", 1, 1), ("huge", 100000, 1)], validate_only=True)
        assert errors(r.topics) == [
            ("x", 44, "Excessively large number of partitions per request."),
            ("huge", 44, "Excessively large number of partitions per request.")]
        r = h.create([("x", 5000, 1), ("y", 4999, 1)], validate_only=True)
        assert errors(r.topics) == [
            ("x", 44, "Unable to perform excessively large batch operation."),
            ("y", 44, "Unable to perform excessively large batch operation.")]
        r = h.create([("x", 9999, 1)], validate_only=True)
        assert errors(r.topics) == [("x", 0, None)]
        assert h.store.topics() == ["co.x", "ok"]
        # Config values refused in Kafka's words (ConfigDef.parseType), or taken as Kafka takes
        # them (trimmed, any case).
        r = h.create([("v1", 1, 1, {"retention.ms": "1.5"}), ("v2", 1, 1, {"preallocate": "maybe"}),
                      ("v3", 1, 1, {"cleanup.policy": "compact,foo"}),
                      ("v4", 1, 1, {"preallocate": " TRUE ", "retention.ms": " 12 "})],
                     validate_only=True)
        assert errors(r.topics) == [
            ("v1", 40, "Invalid value 1.5 for configuration retention.ms: Not a number of type "
                       "LONG"),
            ("v2", 40, "Invalid value maybe for configuration preallocate: Expected value to be "
                       "either true or false"),
            ("v3", 40, "Invalid value foo for configuration cleanup.policy: String must be one "
                       "of: compact, delete"),
            ("v4", 0, None)]
        # validate_only: answered as a creation, nothing made; a manual assignment; defaults.
        r = h.create([("vo", 2, 1)], validate_only=True)
        assert (r.topics[0].error_code, r.topics[0].num_partitions) == (0, 2)
        r = h.create([("as", -1, -1, {}, [(0, [1]), (1, [1])]), ("dflt", -1, -1)], version=2)
        assert errors(r.topics) == [("as", 0, None), ("dflt", 0, None)]
        assert h.store.topic("as").partitions == 2 and h.store.topic("dflt").partitions == 1
        assert "vo" not in h.store


def test_create_topics_takes_the_brokers_defaults(tmp_path):
    with Harness(tmp_path / "d", config={"num.partitions": 4, "log.retention.hours": 2,
                                         "default.replication.factor": 1}) as h:
        r = h.create([("t", -1, -1)])
        assert r.topics[0].num_partitions == 4
        assert h.store.topic("t").config.retention_ms == 2 * 3600 * 1000
        retention = h.topic_configs("t")["retention.ms"]
        # Kafka lists the synonyms from log.retention.ms on, and that one is unset: the
        # value is the broker's, the source DEFAULT_CONFIG, no synonyms (as Kafka 4.4 says).
        assert (retention.value, retention.config_source) == ("7200000", 5)
        assert [(s.name, s.value, s.source) for s in retention.synonyms] == []
        segment = h.topic_configs("t")["segment.bytes"]
        assert [(s.name, s.source) for s in segment.synonyms] == [("log.segment.bytes", 5)]


def test_delete_topics_by_name_and_id(tmp_path):
    with Harness(tmp_path / "d") as h:
        h.create([("a", 2, 1), ("b", 1, 1)])
        a_id = checkpoints.uuid_from_kafka_str(h.store.topic("a").topic_id)
        cls, m = request(20, 6)
        zero = uuid.UUID(int=0)
        unknown_id = uuid.uuid4()
        r = h.call(20, 6, cls(topics=tuple(m.DeleteTopicState(name=n, topic_id=i) for n, i in [
            ("nope", zero), (None, unknown_id), (None, a_id), ("x", a_id), (None, zero),
            ("b", zero)]), timeout=TIMEOUT))
        # None is the zero uuid on the wire (as kio decodes Kafka's answer).
        assert [(x.name, x.topic_id, int(x.error_code), x.error_message)
                for x in r.responses] == [
            ("nope", None, 3, "This server does not host this topic-partition."),
            (None, unknown_id, 100, "This server does not host this topic ID."),
            ("a", a_id, 0, None),
            ("x", a_id, 42, "You may not specify both topic name and topic id."),
            (None, None, 42, "Neither topic name nor id were specified."),
            ("b", r.responses[-1].topic_id, 0, None)]
        assert h.store.topics() == []
        h.store.init_producer_id("tx")  # makes __transaction_state
        cls, m = request(20, 4)
        r = h.call(20, 4, cls(topic_names=("__transaction_state", "gone"), timeout=TIMEOUT))
        assert [(x.name, int(x.error_code)) for x in r.responses] == [
            ("__transaction_state", 73), ("gone", 3)]
    with Harness(tmp_path / "e", config={"delete.topic.enable": False}) as h:
        h.create([("a", 1, 1)])
        cls, m = request(20, 5)
        r = h.call(20, 5, cls(topic_names=("a", "nope"), timeout=TIMEOUT))
        assert [(x.name, int(x.error_code), x.error_message) for x in r.responses] == [
            ("a", 73, "Topic deletion is disabled."), ("nope", 73, "Topic deletion is disabled.")]
        cls, m = request(20, 2)
        r = h.call(20, 2, cls(topic_names=("a",), timeout=TIMEOUT))
        assert [(x.name, int(x.error_code)) for x in r.responses] == [("a", 42)]
        assert "a" in h.store


def test_create_partitions(tmp_path, backend):
    with Harness(tmp_path / "d", backend=backend) as h:
        h.create([("t", 2, 1)])
        h.store.topic("t").log(0).append(b"kept")
        cls, m = request(37, 3)

        def grow(name, count, assignments=None, validate_only=False):
            a = None if assignments is None else tuple(
                m.CreatePartitionsAssignment(broker_ids=tuple(b)) for b in assignments)
            r = h.call(37, 3, cls(topics=(m.CreatePartitionsTopic(
                name=name, count=count, assignments=a),), timeout=TIMEOUT,
                validate_only=validate_only))
            return [(int(x.error_code), x.error_message) for x in r.results][0]

        assert grow("t", 1) == (37, "The topic t currently has 2 partition(s); 1 would not be "
                                    "an increase.")
        assert grow("t", 2) == (37, "Topic already has 2 partition(s).")
        assert grow("t", 4, validate_only=True) == (0, None)
        assert grow("t", 3, [[1], [1]]) == (39, "Attempted to add 1 additional partition(s), "
                                                "but only 2 assignment(s) were specified.")
        assert grow("t", 3, [[2]]) == (39, "The manual partition assignment includes broker "
                                           "2, but no such broker is registered.")
        assert grow("nope", 3) == (3, None)
        assert grow("t", 100000) == (44, "Excessively large number of additional "
                                         "partitions per request.")
        assert grow("t", 10002) == (37, "seglog topics have at most 10000 partitions")
        assert h.store.topic("t").partitions == 2
        assert grow("t", 3, [[1]]) == (0, None)
        assert grow("t", 5) == (0, None)
    with Harness(tmp_path / "d", backend=backend) as h:
        topic = h.store.topic("t")
        assert topic.partitions == 5
        assert [r.value for r in topic.log(0).records()] == [b"kept"]


def test_describe_configs(tmp_path):
    with Harness(tmp_path / "d") as h:
        h.create([("t", 1, 1, {"retention.ms": "5000"})])
        for version in (1, 2, 3, 4):
            (result,) = h.describe([(2, "t", ("retention.ms", "cleanup.policy", "nope.x"))],
                                   version=version, synonyms=True, documentation=True)
            configs = {c.name: c for c in result.configs}
            assert set(configs) == {"retention.ms", "cleanup.policy"}
            retention = configs["retention.ms"]
            assert (retention.value, retention.config_source, retention.read_only) == (
                "5000", 1, False)
            assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
                ("retention.ms", "5000", 1)]
            policy = configs["cleanup.policy"]
            assert [(s.name, s.value, s.source) for s in policy.synonyms] == [
                ("log.cleanup.policy", "delete", 5)]
            if version >= 3:
                assert policy.config_type == 7 and retention.config_type == 5
                assert policy.documentation.startswith("This config designates the retention")
        # A broker config is documented with Kafka's text too (the config table's).
        (result,) = h.describe([(4, "1", ("log.message.timestamp.after.max.ms",))],
                               version=4, documentation=True)
        (after,) = result.configs
        assert after.value == "3600000"
        assert after.documentation.startswith("This configuration sets the allowable timestamp "
                                              "difference between the message timestamp")
        results = h.describe([(2, "nope", None), (4, "2", None), (4, "abc", None),
                              (2, "", None), (2, "bad/name", None), (8, "grp", None)])
        assert [(int(r.error_code), r.error_message) for r in results] == [
            (3, ""),
            (42, "Unexpected broker id, expected 1 or empty string, but received 2"),
            (42, "Broker id must be an integer, but it is: abc"),
            (17, "Topic name is invalid: the empty string is not allowed"),
            (17, "Topic name is invalid: 'bad/name' contains one or more characters other "
                 "than ASCII alphanumerics, '.', '_' and '-'"),
            (42, "Broker id must be an integer, but it is: grp")]
        # An unknown resource type fails every resource of the request, as in Kafka.
        results = h.describe([(2, "t", None), (99, "x", None)])
        assert [int(r.error_code) for r in results] == [42, 42]
        (broker,) = h.describe([(4, "1", ("num.partitions", "log.retention.ms",
                                          "message.max.bytes"))], synonyms=True)
        configs = {c.name: c for c in broker.configs}
        assert (configs["num.partitions"].value, configs["num.partitions"].read_only) == (
            "1", True)
        assert configs["log.retention.ms"].value is None
        assert (configs["message.max.bytes"].read_only,
                configs["message.max.bytes"].config_source) == (False, 5)
        # As a new Kafka 4.4 cluster: a cluster-level min.insync.replicas (KRaft's ELR).
        (default,) = h.describe([(4, "", None)])
        assert int(default.error_code) == 0
        assert [(c.name, c.value, c.config_source) for c in default.configs] == [
            ("min.insync.replicas", "1", 3)]
        assert h.topic_configs("t")["min.insync.replicas"].config_source == 3
        assert [(int(r.error_code), r.error_message) for r in (
            h.alter(4, "", {"log.retention.ms": "1"}),
            h.incremental(4, "", [("min.insync.replicas", 1, None)]))] == [
            (40, "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")] * 2


def test_incremental_alter_topic_configs(tmp_path):
    with Harness(tmp_path / "d") as h:
        h.create([("t", 2, 1, {"retention.ms": "5000"})])
        inc = h.incremental
        assert int(inc(2, "t", [("retention.ms", 0, "7000")]).error_code) == 0
        assert h.store.topic("t").log(1).config.retention_ms == 7000
        assert int(inc(2, "t", [("retention.ms", 1, None)]).error_code) == 0
        assert h.topic_configs("t")["retention.ms"].config_source == 5
        assert int(inc(2, "t", [("cleanup.policy", 2, "compact")]).error_code) == 0
        assert h.topic_configs("t")["cleanup.policy"].value == "compact,delete"
        assert int(inc(2, "t", [("cleanup.policy", 3, "delete")]).error_code) == 0
        assert h.store.topic("t").config.compaction_enabled
        assert not h.store.topic("t").config.deletion_enabled
        refused = [inc(2, "t", [("retention.ms", 2, "1")]), inc(2, "t", [("foo.bar", 0, "1")]),
                   inc(2, "t", [("retention.ms", 0, None)]), inc(2, "t", [("retention.ms", 9, "1")]),
                   inc(2, "t", [("retention.ms", 0, "1"), ("retention.ms", 1, None)]),
                   inc(2, "nope", [("retention.ms", 0, "1")]),
                   inc(2, "t", [("retention.ms", 0, "x")])]
        assert [(int(r.error_code), r.error_message) for r in refused[:6]] == [
            (40, "Can't APPEND to key retention.ms because its type is not LIST."),
            (40, "Unknown topic config name: foo.bar"),
            (42, "Null value not supported for : retention.ms"),
            (-1, None),
            (42, "Error due to duplicate config keys"),
            (3, "The topic 'nope' does not exist.")]
        assert int(refused[6].error_code) == 40
        assert int(inc(2, "t", [("retention.ms", 0, "1")], validate_only=True).error_code) == 0
        assert h.store.topic("t").config.retention_ms == 7 * 24 * 3600 * 1000
        # Legacy AlterConfigs replaces the whole override set.
        assert int(h.alter(2, "t", {"segment.ms": "100000"}).error_code) == 0
        overrides = {n: c.value for n, c in h.topic_configs("t").items()
                     if c.config_source == 1}
        assert overrides == {"segment.ms": "100000"}
        assert [(int(r.error_code), r.error_message) for r in (
            h.alter(2, "t", {"retention.ms": None}, version=0),
            h.alter(2, "nope", {"retention.ms": "1"}),
            h.alter(2, "t", {"foo.bar": "1"}))] == [
            (42, "Null value not supported for : retention.ms"),
            (3, "The topic 'nope' does not exist."),
            (40, "Unknown topic config name: foo.bar")]
    with Harness(tmp_path / "d") as h:
        assert h.store.topic("t").config.segment_ms == 100000


def test_dynamic_broker_configs_change_topic_defaults_and_survive_restart(tmp_path):
    with Harness(tmp_path / "d") as h:
        h.create([("plain", 1, 1), ("mine", 1, 1, {"retention.ms": "5000"})])
        inc = h.incremental
        assert [(int(r.error_code), r.error_message) for r in (
            inc(4, "1", [("num.partitions", 0, "3")]),
            inc(4, "", [("log.dirs", 0, "/x")]),
            inc(4, "2", [("log.retention.ms", 0, "1")]),
            inc(4, "1", [("log.retention.ms", 2, "1")]),
            inc(4, "1", [("foo.bar", 0, "1")]))] == [
            (42, "Cannot update these configs dynamically: [num.partitions]"),
            (42, "Cannot update these configs dynamically: [log.dirs]"),
            (42, "Unexpected broker id, expected 1, but received 2"),
            (40, "Config value append is not allowed for config key: log.retention.ms"),
            (40, "Unknown broker config 'foo.bar'")]
        assert int(inc(4, "1", [("log.retention.ms", 0, "abc")]).error_code) == 42
        assert int(inc(4, "", [("log.retention.ms", 0, "3600000")],
                       validate_only=True).error_code) == 0
        assert h.store.topic("plain").config.retention_ms == 7 * 24 * 3600 * 1000
        assert int(inc(4, "", [("log.retention.ms", 0, "3600000")]).error_code) == 0
        assert int(inc(4, "1", [("message.max.bytes", 0, "2000000")]).error_code) == 0
        # The topic that overrides nothing follows the new default; the other keeps its own.
        assert h.store.topic("plain").log(0).config.retention_ms == 3600000
        assert h.store.topic("mine").config.retention_ms == 5000
        assert h.store.topic("plain").config.max_message_bytes == 2000000
        assert h.state.config["message.max.bytes"] == 2000000
        # A topic made without configs (Metadata's auto-create) takes the dynamic defaults.
        assert h.store.create_topic("auto", 1).config.retention_ms == 3600000
        retention = h.topic_configs("plain")["retention.ms"]
        assert (retention.value, retention.config_source) == ("3600000", 3)
        (broker,) = h.describe([(4, "1", ("message.max.bytes",))], synonyms=True)
        assert [(s.name, s.value, s.source) for s in broker.configs[0].synonyms] == [
            ("message.max.bytes", "2000000", 2), ("message.max.bytes", "1048588", 5)]
        (default,) = h.describe([(4, "", None)])
        assert [(c.name, c.value, c.config_source) for c in default.configs] == [
            ("log.retention.ms", "3600000", 3), ("min.insync.replicas", "1", 3)]
    saved = json.loads((tmp_path / "d" / DYNAMIC_CONFIGS_FILE).read_text())
    assert saved["cluster_default"] == {"log.retention.ms": "3600000",
                                        "min.insync.replicas": "1"}
    with Harness(tmp_path / "d") as h:
        assert h.state.config["message.max.bytes"] == 2000000
        assert h.topic_configs("plain")["retention.ms"].value == "3600000"
        assert h.store.topic("auto").config.retention_ms == 3600000
        assert h.store.create_topic("auto2", 1).config.retention_ms == 3600000
        # Deleting the dynamic default: topics go back to the static default.
        assert int(h.incremental(4, "", [("log.retention.ms", 1, None)]).error_code) == 0
        assert h.store.topic("plain").config.retention_ms == 7 * 24 * 3600 * 1000
        assert h.store.topic("mine").config.retention_ms == 5000
    # A static default changed between runs: topics without an override follow it.
    with Harness(tmp_path / "d", config={"log.retention.hours": 1}) as h:
        assert h.store.topic("plain").config.retention_ms == 3600000
        assert h.store.topic("mine").config.retention_ms == 5000


def test_a_corrupt_dynamic_config_file_is_a_typed_error(tmp_path):
    from seglog.errors import CorruptCheckpointError
    os.makedirs(tmp_path / "d")
    (tmp_path / "d" / DYNAMIC_CONFIGS_FILE).write_text('{"version": 0, "broker": {"x": 1}}')
    with pytest.raises(CorruptCheckpointError):
        Harness(tmp_path / "d")


def test_delete_records(tmp_path, backend):
    with Harness(tmp_path / "d", backend=backend) as h:
        h.create([("t", 2, 1)])
        log = h.store.topic("t").log(0)
        for i in range(10):
            log.append(b"v%d" % i)
        cls, m = request(21, 2)

        def delete(name, parts):
            r = h.call(21, 2, cls(topics=(m.DeleteRecordsTopic(name=name, partitions=tuple(
                m.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in parts)),),
                timeout=TIMEOUT))
            return [(x.partition_index, x.low_watermark, int(x.error_code))
                    for x in r.topics[0].partitions]

        assert delete("t", [(0, 3)]) == [(0, 3, 0)]
        assert delete("t", [(0, 2)]) == [(0, 3, 0)]
        assert delete("t", [(0, 11)]) == delete("t", [(0, -2)]) == [(0, -1, 1)]
        # A partition named twice is answered once, for its last offset (as Kafka).
        assert delete("t", [(0, -1), (5, 1), (1, 5), (1, -1)]) == [
            (0, 10, 0), (5, -1, 3), (1, 0, 0)]
        assert delete("nope", [(0, 0)]) == [(0, -1, 3)]
        assert log.start_offset == 10
        # A topic without the delete policy refuses (Kafka: POLICY_VIOLATION).
        h.create([("c", 1, 1, {"cleanup.policy": "compact"})])
        h.store.topic("c").log(0).append(b"v", key=b"k")
        assert delete("c", [(0, 1)]) == [(0, -1, 44)]
        assert h.store.topic("c").log(0).start_offset == 0


def test_describe_cluster_and_log_dirs(tmp_path):
    with Harness(tmp_path / "d") as h:
        for version in (0, 1, 2):
            cls, m = request(60, version)
            kwargs = {"endpoint_type": 1} if version >= 1 else {}
            if version >= 2:
                kwargs["include_fenced_brokers"] = False
            r = h.call(60, version, cls(include_cluster_authorized_operations=False, **kwargs))
            assert (int(r.error_code), r.cluster_id, r.controller_id) == (0, "test-cluster", 1)
            assert [(b.broker_id, b.host, b.port) for b in r.brokers] == [(1, "127.0.0.1", 9092)]
        cls, m = request(60, 1)
        r = h.call(60, 1, cls(include_cluster_authorized_operations=False, endpoint_type=2))
        assert int(r.error_code) == 114
        r = h.call(60, 1, cls(include_cluster_authorized_operations=False, endpoint_type=7))
        assert (int(r.error_code), r.error_message) == (115, "Unsupported endpoint type 7")

        h.create([("t", 2, 1)])
        h.store.topic("t").log(0).append(b"x" * 100)
        for version in (1, 4, 5):
            cls, m = request(35, version)
            r = h.call(35, version, cls(topics=(
                m.DescribableLogDirTopic(topic="t", partitions=(0, 1, 7)),
                m.DescribableLogDirTopic(topic="nope", partitions=(0,)))))
            (result,) = r.results
            assert result.log_dir == os.path.abspath(tmp_path / "d")
            (topic,) = result.topics
            sizes = {p.partition_index: p.partition_size for p in topic.partitions}
            assert set(sizes) == {0, 1} and sizes[1] == 0
            assert sizes[0] == h.store.topic("t").log(0).size_bytes > 100
            if version >= 4:
                assert 0 < result.usable_bytes <= result.total_bytes
        r = h.call(35, 5, cls(topics=None))
        assert [t.name for t in r.results[0].topics] == ["t"]
        r = h.call(35, 5, cls(topics=()))
        assert r.results[0].topics == ()


def _build(cls, **fields):
    """``cls(**fields)`` with only the fields this version of ``cls`` has."""
    return cls(**{k: v for k, v in fields.items() if k in cls.__dataclass_fields__})


def _requests(api_key, version):
    """One request of every shape the handler branches on, for ``api_key`` ``version``."""
    cls, m = request(api_key, version)
    if api_key == 19:
        topic = _build(m.CreatableTopic, name="v%d" % version, num_partitions=1,
                       replication_factor=1, assignments=(), configs=(_build(
                           m.CreatableTopicConfig, name="retention.ms", value="1000"),))
        bad = _build(m.CreatableTopic, name="bad/", num_partitions=1, replication_factor=1,
                     assignments=(), configs=())
        return [_build(cls, topics=(topic, bad), timeout=TIMEOUT, validate_only=False)]
    if api_key == 20:
        if version >= 6:
            return [cls(topics=(m.DeleteTopicState(name="gone", topic_id=uuid.UUID(int=0)),
                                m.DeleteTopicState(name=None, topic_id=uuid.uuid4())),
                        timeout=TIMEOUT)]
        return [cls(topic_names=("gone",), timeout=TIMEOUT)]
    if api_key == 21:
        return [cls(topics=(m.DeleteRecordsTopic(name="base", partitions=(
            m.DeleteRecordsPartition(partition_index=0, offset=-1),
            m.DeleteRecordsPartition(partition_index=9, offset=0))),), timeout=TIMEOUT)]
    if api_key == 32:
        return [_build(cls, resources=(
            m.DescribeConfigsResource(resource_type=2, resource_name="base",
                                      configuration_keys=None),
            m.DescribeConfigsResource(resource_type=4, resource_name="1",
                                      configuration_keys=("num.partitions",)),
            m.DescribeConfigsResource(resource_type=4, resource_name="9",
                                      configuration_keys=None)),
            include_synonyms=True, include_documentation=True)]
    if api_key in (33, 44):
        if api_key == 33:
            config = m.AlterableConfig(name="retention.ms", value="5")
        else:
            config = m.AlterableConfig(name="retention.ms", config_operation=0, value="5")
        return [cls(resources=(m.AlterConfigsResource(resource_type=2, resource_name="base",
                                                      configs=(config,)),
                               m.AlterConfigsResource(resource_type=2, resource_name="nope",
                                                      configs=(config,))),
                    validate_only=True)]
    if api_key == 35:
        return [cls(topics=None), cls(topics=(m.DescribableLogDirTopic(
            topic="base", partitions=(0,)),))]
    if api_key == 37:
        return [cls(topics=(m.CreatePartitionsTopic(name="base", count=3, assignments=None),
                            m.CreatePartitionsTopic(name="nope", count=3, assignments=None)),
                    timeout=TIMEOUT, validate_only=True)]
    if api_key == 60:
        return [_build(cls, include_cluster_authorized_operations=True, endpoint_type=1,
                       include_fenced_brokers=False),
                _build(cls, include_cluster_authorized_operations=False, endpoint_type=2,
                       include_fenced_brokers=False)]
    raise AssertionError(f"no request for API key {api_key}")


def test_every_served_version_answers_what_kio_encodes(tmp_path):
    """Each advertised version of each admin API, called with requests that take its error
    and success paths, returns a response of that version that encodes and decodes back."""
    import io

    from seglog.schemas import load_response_schema
    from kio.serial import entity_reader, entity_writer

    with Harness(tmp_path / "d") as h:
        h.create([("base", 2, 1)])
        for handler in admin.HANDLERS:
            for version in range(handler.min_version, handler.max_version + 1):
                for req in _requests(handler.api_key, version):
                    response = h.call(handler.api_key, version, req)
                    expected = load_response_schema(handler.api_key, version)
                    assert type(response) is expected, (handler.api_key, version)
                    buf = io.BytesIO()
                    entity_writer(expected)(buf, response)
                    decoded, size = entity_reader(expected)(buf.getvalue(), 0)
                    assert size == len(buf.getvalue()) and decoded == response, (
                        handler.api_key, version)


def test_broker_loggers(tmp_path):
    """Log levels through IncrementalAlterConfigs, with Kafka 4.4's refusals (taken from the
    real broker)."""
    import logging
    logger = logging.getLogger("seglog.server.admin")
    before = logger.level
    try:
        with Harness(tmp_path / "d") as h:
            inc = h.incremental
            assert int(inc(8, "1", [("seglog.server.admin", 0, "DEBUG")]).error_code) == 0
            assert logger.level == logging.DEBUG
            (result,) = h.describe([(8, "1", ("seglog.server.admin", "root"))])
            levels = {c.name: c.value for c in result.configs}
            assert levels["seglog.server.admin"] == "DEBUG" and set(levels) == {
                "seglog.server.admin", "root"}
            assert int(inc(8, "1", [("seglog.server.admin", 1, None)]).error_code) == 0
            assert logger.level == logging.NOTSET
            assert [(int(r.error_code), r.error_message) for r in (
                inc(8, "1", [("seglog.server.admin", 0, "LOUD")]),
                inc(8, "1", [("no.such.logger", 0, "INFO")]),
                inc(8, "1", [("root", 1, None)]),
                inc(8, "1", [("root", 2, "INFO")]),
                inc(8, "", [("root", 0, "INFO")]))] == [
                (40, "Cannot set the log level of seglog.server.admin to LOUD as it is not a "
                     "supported log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, "
                     "TRACE, WARN"),
                (40, "Logger no.such.logger does not exist!"),
                (42, "Removing the log level of the root logger is not allowed"),
                (42, "APPEND operation is not allowed for the BROKER_LOGGER resource"),
                (42, "Node id must be an integer, but it is: ")]
    finally:
        logger.setLevel(before)
