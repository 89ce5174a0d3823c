"""Group configs (GROUP = 32) on a lone broker, without Kafka's jars (the differential
against Kafka 4.4 is test_group_configs_differential.py): the view readers use (a group's
value, else the broker's; clamped into the broker's bounds as they are now; listeners), and
persistence across a restart in the data directory."""

from __future__ import annotations

import pytest
from group_configs_scenario import SET, DELETE, describe, inc, listed
from test_admin_differential import Client

from seglog.group_configs import GROUP_CONFIGS, parse_iso8601_duration_ms
from seglog.config_table import BROKER_CONFIGS
from seglog.server.apis.group_configs import GROUP_CONFIGS_FILE, group_configs


def test_every_broker_config_named_is_in_the_config_table():
    for d in GROUP_CONFIGS.values():
        for name in (d.broker_synonym, d.low_from, d.high_from):
            assert name is None or name in BROKER_CONFIGS, name


@pytest.mark.parametrize("text,ms", [
    ("PT1H", 3_600_000), ("p1dt2h30m0.5s", 95_400_500), ("PT0S", 0), ("-PT1S", -1000),
    ("PT-0.0001S", -1), ("P2D", 172_800_000), ("PT1.123456789S", 1123)])
def test_iso8601_durations_as_java_reads_them(text, ms):
    assert parse_iso8601_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "P", "PT", "1H", "PT1", "PT1.S1", "P1H", "PT1D",
                                  "P106751991167301D", "PT9223372036854775808S"])
def test_iso8601_durations_java_refuses(text):
    with pytest.raises(ValueError):
        parse_iso8601_duration_ms(text)


def test_the_view_gives_a_groups_value_else_the_brokers_and_tells_listeners(broker_factory):
    b = broker_factory(config={"group.consumer.session.timeout.ms": 50000})
    view = group_configs(b.state)
    changed: list[str] = []
    view.add_listener(changed.append)
    c = Client(b.bootstrap)
    try:
        assert view.value("g", "consumer.session.timeout.ms") == 50000
        assert view.effective("g", "share.record.lock.duration.ms") == "30000"
        assert view.effective("g", "share.auto.offset.reset") == "latest"
        assert view.value("g", "streams.assignor.name") == "sticky"
        assert inc(c, "g", ("consumer.session.timeout.ms", SET, " 46000 "),
                   ("share.auto.offset.reset", SET, "earliest"),
                   ("errors.deadletterqueue.copy.record.enable", SET, "TRUE")) == [
            (0, None, 32, "g")]
        assert changed == ["g"]
        assert view.get("g") == {"consumer.session.timeout.ms": "46000",
                                 "share.auto.offset.reset": "earliest",
                                 "errors.deadletterqueue.copy.record.enable": "true"}
        assert view.value("g", "consumer.session.timeout.ms") == 46000
        assert view.value("g", "errors.deadletterqueue.copy.record.enable") is True
        assert view.value("other", "consumer.session.timeout.ms") == 50000
        # validate_only and a change to the same values tell no one.
        assert inc(c, "g", ("share.auto.offset.reset", SET, "earliest")) == [
            (0, None, 32, "g")]
        assert inc(c, "g", ("share.delivery.count.limit", SET, "3"),
                   validate_only=True) == [(0, None, 32, "g")]
        assert changed == ["g"]
        assert inc(c, "g", ("consumer.session.timeout.ms", DELETE, None),
                   ("share.auto.offset.reset", DELETE, None),
                   ("errors.deadletterqueue.copy.record.enable", DELETE, None)) == [
            (0, None, 32, "g")]
        assert changed == ["g", "g"]
        assert view.get("g") == {} and listed(c) == [0, []]
    finally:
        c.close()


def test_group_configs_survive_a_restart_and_clamp_to_the_brokers_bounds_of_now(
        broker_factory, tmp_path):
    data = tmp_path / "data"
    first = broker_factory(data_dir=data)
    c = Client(first.bootstrap)
    try:
        assert inc(c, "kept", ("consumer.session.timeout.ms", SET, "59000"),
                   ("share.isolation.level", SET, "read_committed")) == [(0, None, 32, "kept")]
    finally:
        c.close()
    first.stop()
    assert (data / GROUP_CONFIGS_FILE).exists()
    # The broker's upper bound is now below the group's value: Kafka keeps the value (and
    # describes it) but the group runs with the bound (GroupConfig.evaluate).
    second = broker_factory(data_dir=data, config={
        "group.consumer.max.session.timeout.ms": 50000})
    c = Client(second.bootstrap)
    try:
        assert listed(c) == [0, [("kept", 32)]]
        code, _, entries = describe(c, "kept", ["consumer.session.timeout.ms",
                                                "share.isolation.level"])
        assert code == 0
        assert [(e[0], e[1], e[2]) for e in entries] == [
            ("consumer.session.timeout.ms", "59000", 8),
            ("share.isolation.level", "read_committed", 8)]
        view = group_configs(second.state)
        assert view.value("kept", "consumer.session.timeout.ms") == 50000
        assert view.effective("kept", "share.isolation.level") == "read_committed"
        # A new value must be within the bounds of now.
        assert inc(c, "kept", ("consumer.session.timeout.ms", SET, "55000")) == [
            (40, "consumer.session.timeout.ms must be in the range 45000 to 50000 inclusive.",
             32, "kept")]
    finally:
        c.close()


def test_consumer_and_streams_groups_run_with_their_group_configs(broker):
    from seglog.server.apis import groups, streams_groups

    consumer = broker.state.extensions[groups.EXTENSION].consumer
    streams = broker.state.extensions[streams_groups.EXTENSION].coordinator
    c = Client(broker.bootstrap)
    try:
        assert inc(c, "s", ("streams.session.timeout.ms", SET, "50000"),
                   ("streams.num.standby.replicas", SET, "1"),
                   ("consumer.heartbeat.interval.ms", SET, "7000")) == [(0, None, 32, "s")]
    finally:
        c.close()
    got = streams.config_of("s")
    assert (got.session_timeout_ms, got.num_standby_replicas, got.heartbeat_interval_ms) == (
        50000, 1, 5000)
    assert streams.config_of("other") == streams.config
    assert consumer.config_of("s").heartbeat_interval_ms == 7000
    assert consumer.config_of("s").session_timeout_ms == 45000
    assert consumer.config_of("other") == consumer.config


def test_share_partition_settings_of_a_group(broker):
    view = group_configs(broker.state)
    defaults = {"record_lock_duration_ms": 30000, "delivery_count_limit": 5,
                "max_in_flight_records": 2000, "auto_offset_reset": "latest",
                "isolation_level": "read_uncommitted", "renew_acknowledge_enable": True,
                "dlq_topic_name": "", "dlq_copy_record": False}
    assert view.share_partition_settings("q") == defaults
    c = Client(broker.bootstrap)
    try:
        assert inc(c, "q", ("share.record.lock.duration.ms", SET, "15000"),
                   ("share.auto.offset.reset", SET, "by_duration:PT10M"),
                   ("errors.deadletterqueue.topic.name", SET, "q-dlq")) == [(0, None, 32, "q")]
    finally:
        c.close()
    assert view.share_partition_settings("q") == {
        **defaults, "record_lock_duration_ms": 15000, "auto_offset_reset": "by_duration:PT10M",
        "dlq_topic_name": "q-dlq"}


def test_validation_of_any_input_is_kafkas_error_or_a_value():
    """Seeded random names and values: validate() returns the typed values or raises
    InvalidConfigError (INVALID_CONFIG on the wire), nothing else."""
    import random

    from seglog.errors import InvalidConfigError
    from seglog.group_configs import validate

    rng = random.Random(25)
    names = [*GROUP_CONFIGS, "no.such", ""]
    pieces = ["", " ", "-1", "0", "1", "2", "99999999999", "5000", "45000", "true", "FALSE",
              "earliest", "by_duration:", "PT1H", "P", "T", ",", "a,a", "__x", "sticky",
              "\x00", "é", "read_committed", "1e3", "+7", "0x10"]

    def broker_value(name):
        return BROKER_CONFIGS[name].default

    for _ in range(3000):
        values = {rng.choice(names): "".join(rng.choice(pieces)
                                             for _ in range(rng.randint(0, 3)))
                  for _ in range(rng.randint(1, 3))}
        try:
            parsed = validate(values, broker_value)
        except InvalidConfigError:
            continue
        assert set(parsed) == set(values)
