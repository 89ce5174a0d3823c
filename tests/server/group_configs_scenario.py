"""The raw-wire scenario of group configs (ConfigResource GROUP = 32) that
test_group_configs_differential.py runs against Kafka 4.4 and seglog: every answer as data."""

from __future__ import annotations

import datetime
import time
import uuid

from kafka_waits import eventually
from test_admin_differential import Client

GROUP = 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def inc(c: Client, name: str, *changes, validate_only: bool = False, version: int = 1) -> list:
    """IncrementalAlterConfigs of group ``name``: ``changes`` are (config, op, value)."""
    m = c.m(44, version)
    r = c.call(44, version, resources=(m.AlterConfigsResource(
        resource_type=GROUP, resource_name=name, configs=tuple(
            m.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in changes)),),
        validate_only=validate_only)
    return [(int(x.error_code), x.error_message, x.resource_type, x.resource_name)
            for x in r.responses]


def legacy_alter(c: Client, name: str, *configs) -> list:
    """AlterConfigs v2 (the legacy API) of group ``name``."""
    m = c.m(33, 2)
    r = c.call(33, 2, resources=(m.AlterConfigsResource(
        resource_type=GROUP, resource_name=name, configs=tuple(
            m.AlterableConfig(name=k, value=v) for k, v in configs)),), validate_only=False)
    return [(int(x.error_code), x.error_message) for x in r.responses]


def describe(c: Client, name: str, keys=None, *, synonyms: bool = True,
             documentation: bool = False) -> list:
    """DescribeConfigs v4 of group ``name``: error, message and every entry."""
    d = c.m(32, 4)
    r = c.call(32, 4, resources=(d.DescribeConfigsResource(
        resource_type=GROUP, resource_name=name, configuration_keys=keys),),
        include_synonyms=synonyms, include_documentation=documentation)
    res = r.results[0]
    return [int(res.error_code), res.error_message, sorted(
        (e.name, e.value, e.config_source, e.read_only, e.is_sensitive, e.config_type,
         e.documentation, [(s.name, s.value, s.source) for s in e.synonyms])
        for e in res.configs)]


def listed(c: Client) -> list:
    """ListConfigResources v1 of GROUP resources."""
    r = c.call(74, 1, resource_types=(GROUP,))
    return [int(r.error_code), sorted((x.resource_name, x.resource_type)
                                      for x in r.config_resources)]


def _value(described: list, key: str) -> str | None:
    """The value a :func:`describe` answer gives ``key`` (None: not listed)."""
    return next((entry[1] for entry in described[2] if entry[0] == key), None)


def shows(c: Client, name: str, answer: list, values: dict[str, str]) -> None:
    """When the alter that gave ``answer`` was accepted, describe group ``name`` again,
    bounded, until it shows ``values``: Kafka (KRaft) answers the alter once its controller
    committed it, and its broker's metadata image (which DescribeConfigs, ListConfigResources
    and the group coordinator read) applies it a moment later. Both brokers wait alike; the
    answers compared afterwards judge what they show."""
    if all(row[0] == 0 for row in answer):
        eventually(lambda: describe(c, name, list(values)),
                   lambda d: all(_value(d, k) == v for k, v in values.items()))

#: How long a join may wait for the group coordinator (Kafka creates __consumer_offsets on
#: the first FindCoordinator).
JOIN_S_MAX = 30.0


def join(c: Client, group_id: str) -> tuple:
    """A KIP-848 member joins ``group_id`` (ConsumerGroupHeartbeat v1, epoch 0): the error
    and the heartbeat interval the coordinator gives it (the group's config, else the
    broker's)."""
    c.call(10, 4, key_type=0, coordinator_keys=(group_id,))
    deadline = time.monotonic() + JOIN_S_MAX
    while True:
        r = c.call(68, 1, group_id=group_id, member_id=str(uuid.uuid4()), member_epoch=0,
                   instance_id=None, rack_id=None, rebalance_timeout=datetime.timedelta(seconds=30),
                   subscribed_topic_names=("no-such-topic",), subscribed_topic_regex=None,
                   server_assignor=None, topic_partitions=())
        code = int(r.error_code)
        if code not in (14, 15, 16) or time.monotonic() > deadline:  # coordinator not ready
            return code, int(r.heartbeat_interval.total_seconds() * 1000)
        time.sleep(0.2)


def scenario(bootstrap: str) -> list:
    """Every answer, in order."""
    c = Client(bootstrap)
    out: list = []
    try:
        out.append(("describe-none", describe(c, "g1")))
        out.append(("describe-empty-name", describe(c, "")))
        out.append(("list-none", listed(c)))
        out.append(("set", inc(c, "g1", ("share.auto.offset.reset", SET, "earliest"),
                               ("share.record.lock.duration.ms", SET, "20000"))))
        shows(c, "g1", out[-1][1], {"share.auto.offset.reset": "earliest",
                                    "share.record.lock.duration.ms": "20000"})
        out.append(("describe-set", describe(c, "g1")))
        out.append(("describe-keys", describe(c, "g1", ["share.auto.offset.reset",
                                                         "consumer.session.timeout.ms"],
                                              documentation=True)))
        out.append(("describe-no-synonyms", describe(c, "g1", synonyms=False)))
        out.append(("list-one", listed(c)))
        bad = [
            ("share.auto.offset.reset", SET, "bogus"),
            ("share.auto.offset.reset", SET, "by_duration:PT1H"),
            ("share.auto.offset.reset", SET, "by_duration:-PT1H"),
            ("share.auto.offset.reset", SET, "EARLIEST"),
            ("share.auto.offset.reset", SET, "none"),
            ("share.auto.offset.reset", SET, "by_duration:"),
            ("share.auto.offset.reset", SET, "by_duration:PT"),
            ("share.auto.offset.reset", SET, "by_duration:p1dt2h30m0.5s"),
            ("share.auto.offset.reset", SET, " latest "),
            ("share.auto.offset.reset", SET, "by_duration:P106751991167301D"),
            ("share.auto.offset.reset", SET, "by_duration:PT9223372036854775807S"),
            ("share.auto.offset.reset", SET, "by_duration:PT-1S"),
            ("share.auto.offset.reset", SET, "by_duration:-PT-1S"),
            ("share.isolation.level", SET, "READ_COMMITTED"),
            ("share.isolation.level", SET, "read_committed"),
            ("share.record.lock.duration.ms", SET, "100"),
            ("share.record.lock.duration.ms", SET, "2000"),
            ("share.record.lock.duration.ms", SET, "60001"),
            ("share.record.lock.duration.ms", SET, "abc"),
            ("share.record.lock.duration.ms", SET, " 20000 "),
            ("share.delivery.count.limit", SET, "11"),
            ("share.delivery.count.limit", SET, "1"),
            ("share.partition.max.record.locks", SET, "99"),
            ("share.partition.max.record.locks", SET, "4001"),
            ("share.session.timeout.ms", SET, "44999"),
            ("share.heartbeat.interval.ms", SET, "15001"),
            ("share.renew.acknowledge.enable", SET, "yes"),
            ("share.renew.acknowledge.enable", SET, "FALSE"),
            ("consumer.session.timeout.ms", SET, "60001"),
            ("consumer.heartbeat.interval.ms", SET, "4999"),
            ("consumer.assignor.offload.enable", SET, "false"),
            ("streams.num.standby.replicas", SET, "3"),
            ("streams.num.warmup.replicas", SET, "21"),
            ("streams.task.offset.interval.ms", SET, "14999"),
            ("streams.assignor.name", SET, "nope"),
            ("streams.assignor.name", SET, "sticky"),
            ("streams.rack.aware.assignment.tags", SET, "a,a"),
            ("streams.acceptable.recovery.lag", SET, "-1"),
            ("errors.deadletterqueue.topic.name", SET, "__dlq"),
            ("errors.deadletterqueue.topic.name", SET, "dlq"),
            ("errors.deadletterqueue.copy.record.enable", SET, "true"),
            ("no.such.config", SET, "1"),
            ("group.share.record.lock.duration.ms", SET, "20000"),
            ("share.auto.offset.reset", SET, None),
        ]
        for change in bad:
            out.append(("validate", change, inc(c, "g2", change, validate_only=True)))
        out.append(("session-not-above-heartbeat",
                    inc(c, "g2", ("consumer.session.timeout.ms", SET, "50000"),
                        ("consumer.heartbeat.interval.ms", SET, "50000"), validate_only=True)))
        out.append(("set-session", inc(c, "g2", ("consumer.session.timeout.ms", SET, "46000"))))
        out.append(("heartbeat-above-set-session",
                    inc(c, "g2", ("consumer.heartbeat.interval.ms", SET, "15000"))))
        out.append(("heartbeat-ok", inc(c, "g2", ("consumer.heartbeat.interval.ms", SET,
                                                    "6000"))))
        # The join reads the group's configs from the image too.
        shows(c, "g2", out[-1][1], {"consumer.session.timeout.ms": "46000",
                                    "consumer.heartbeat.interval.ms": "6000"})
        out.append(("join-g2", join(c, "g2")))
        out.append(("join-plain", join(c, "g-plain")))
        out.append(("duplicate", inc(c, "g2", ("share.delivery.count.limit", SET, "3"),
                                     ("share.delivery.count.limit", SET, "4"))))
        out.append(("append-list", inc(c, "g2", ("streams.rack.aware.assignment.tags",
                                                 APPEND, "zone"))))
        out.append(("append-list-2", inc(c, "g2", ("streams.rack.aware.assignment.tags",
                                                   APPEND, "rack,zone"))))
        out.append(("subtract-list", inc(c, "g2", ("streams.rack.aware.assignment.tags",
                                                   SUBTRACT, "zone"))))
        # "zone", then "zone,rack" (APPEND adds what is not there yet), then "rack".
        shows(c, "g2", out[-3][1] + out[-2][1] + out[-1][1],
              {"streams.rack.aware.assignment.tags": "rack"})
        out.append(("append-int", inc(c, "g2", ("share.delivery.count.limit", APPEND, "3"))))
        out.append(("append-unknown", inc(c, "g2", ("no.such", APPEND, "3"))))
        out.append(("describe-g2", describe(c, "g2")))
        out.append(("list-two", listed(c)))
        out.append(("delete-unset", inc(c, "g2", ("share.delivery.count.limit", DELETE, None))))
        out.append(("delete-unknown", inc(c, "g2", ("no.such", DELETE, None))))
        out.append(("empty-name", inc(c, "", ("share.delivery.count.limit", SET, "3"))))
        out.append(("legacy-alter", legacy_alter(c, "g3", ("share.delivery.count.limit", "3"))))
        shows(c, "g3", out[-1][1], {"share.delivery.count.limit": "3"})
        out.append(("describe-g3", describe(c, "g3", ["share.delivery.count.limit"])))
        out.append(("set-internal", inc(c, "g4", ("consumer.assignor.offload.enable", SET, "false"),
                                        ("streams.num.warmup.replicas", SET, "3"))))
        shows(c, "g4", out[-1][1], {"streams.num.warmup.replicas": "3"})
        out.append(("describe-internal", describe(c, "g4")))
        out.append(("describe-internal-unset", describe(c, "g1", [
            "share.assignor.offload.enable", "share.isolation.level"])))
        # Kafka lists a group's configs from its metadata image, which may not have the last
        # alter yet (seen under load: g4 missing): wait, bounded, until it has g4.

        def listing() -> tuple[int, list]:
            r = c.call(74, 1, resource_types=())
            return int(r.error_code), sorted(x.resource_name for x in r.config_resources
                                             if x.resource_type == GROUP)

        code, names = eventually(listing, lambda answer: "g4" in answer[1])
        out.append(("list-every-type", code, names))
        out.append(("delete-all-g1", inc(c, "g1", ("share.auto.offset.reset", DELETE, None),
                                         ("share.record.lock.duration.ms", DELETE, None))))
        if all(row[0] == 0 for row in out[-1][1]):  # g1 has no config left
            eventually(lambda: listed(c), lambda answer: ("g1", GROUP) not in answer[1])
        out.append(("list-after-delete", listed(c)))
        out.append(("describe-after-delete", describe(c, "g1", ["share.auto.offset.reset"])))
    finally:
        c.close()
    return out
