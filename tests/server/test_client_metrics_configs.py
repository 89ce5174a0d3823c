"""Client-metrics config resources and ListConfigResources on a lone broker, without Kafka's
jars (the differential against Kafka 4.4 is test_admin_configs_differential.py): Kafka's
validation messages, the subscription's life (it exists while a config is set) and its
persistence across a restart in the dynamic configs file."""

from __future__ import annotations

import json

from test_admin_differential import Client

from seglog.server.apis.admin_configs import DYNAMIC_CONFIGS_FILE


def _alter(c: Client, name: str, *configs, op: int = 0, validate_only: bool = False) -> list:
    m = c.m(44, 1)
    r = c.call(44, 1, resources=(m.AlterConfigsResource(
        resource_type=16, resource_name=name, configs=tuple(
            m.AlterableConfig(name=k, config_operation=op, value=v) for k, v in configs)),),
        validate_only=validate_only)
    return [(int(x.error_code), x.error_message) for x in r.responses]


def _describe(c: Client, name: str, keys=None) -> list:
    d = c.m(32, 4)
    r = c.call(32, 4, resources=(d.DescribeConfigsResource(
        resource_type=16, resource_name=name, configuration_keys=keys),),
        include_synonyms=True, include_documentation=False)
    result = r.results[0]
    return [int(result.error_code), [(e.name, e.value, e.config_source,
                                      [(s.name, s.value, s.source) for s in e.synonyms])
                                     for e in result.configs]]


def test_validation_as_kafka(broker):
    c = Client(broker.bootstrap)
    try:
        assert _alter(c, "cm", ("interval.ms", "99")) == [
            (42, "Invalid value 99 for interval.ms, interval must be between 100 and 3600000 "
                 "(1 hour)")]
        assert _alter(c, "cm", ("interval.ms", "1e3")) == [
            (40, "Invalid value 1e3 for configuration interval.ms: Not a number of type INT")]
        assert _alter(c, "cm", ("match", "client_id=a=b")) == [
            (40, "Illegal client matching pattern: client_id=a=b")]
        assert _alter(c, "cm", ("match", "client_id=ok,client_port=1")) == [
            (40, "Illegal client matching pattern: client_port=1")]
        assert _alter(c, "cm", ("match", "client_id=(")) == [
            (40, "Illegal client matching pattern: client_id=(")]
        assert _alter(c, "cm", ("nope", "1")) == [
            (42, "Unknown client metrics configuration: nope")]
        assert _alter(c, "cm", ("metrics", "a"), op=3) == [
            (40, "Can't SUBTRACT to key metrics because its type is not LIST.")]
        assert _alter(c, "", ("metrics", "a")) == [(42, "Subscription name can't be empty")]
        # validate_only checks and keeps nothing.
        assert _alter(c, "cm", ("interval.ms", "100"), validate_only=True) == [(0, None)]
        assert c.call(74, 0).config_resources == ()
        assert _describe(c, "") == [42, []]
    finally:
        c.close()


def test_a_subscription_lives_while_a_config_is_set_and_survives_a_restart(
        broker_factory, tmp_path):
    data = tmp_path / "data"
    first = broker_factory(data_dir=data)
    c = Client(first.bootstrap)
    try:
        assert _alter(c, "kept", ("interval.ms", "700"), ("match", "client_id=x.*")) == [
            (0, None)]
        assert _alter(c, "gone", ("metrics", "org.apache.kafka.")) == [(0, None)]
        assert _alter(c, "gone", ("metrics", None), op=1) == [(0, None)]
        r = c.call(74, 1, resource_types=(16,))
        assert [(x.resource_name, x.resource_type) for x in r.config_resources] == [
            ("kept", 16)]
        # A type v1 does not list (the cluster, 1 = UNKNOWN) fails the whole request.
        r = c.call(74, 1, resource_types=(16, 1))
        assert (int(r.error_code), r.config_resources) == (35, ())
    finally:
        c.close()
    first.stop()
    saved = json.loads((data / DYNAMIC_CONFIGS_FILE).read_text(encoding="utf-8"))
    assert saved["client_metrics"] == {"kept": {"interval.ms": "700", "match": "client_id=x.*"}}
    second = broker_factory(data_dir=data)
    c = Client(second.bootstrap)
    try:
        assert [x.resource_name for x in c.call(74, 0).config_resources] == ["kept"]
        assert _describe(c, "kept") == [0, [
            ("interval.ms", "700", 7, [("interval.ms", "700", 7)]),
            ("match", "client_id=x.*", 7, [("match", "client_id=x.*", 7)]),
            ("metrics", "", 5, [])]]
        assert _describe(c, "kept", keys=("metrics",)) == [0, [("metrics", "", 5, [])]]
    finally:
        c.close()
