"""Differential: group configs (ConfigResource GROUP = 32) on the raw wire against the real
Kafka 4.4 broker and against seglog serve: DescribeConfigs (values, sources, synonyms, types,
documentation), IncrementalAlterConfigs (every validation message: types, ConfigDef
validators, the broker's group.*.min/max bounds, unknown names, APPEND/SUBTRACT, duplicates,
nulls, the empty name), the legacy AlterConfigs and ListConfigResources give the same
answers on both (:mod:`group_configs_scenario`)."""

from __future__ import annotations

import pytest
from group_configs_scenario import scenario
from test_admin_differential import real_kafka  # noqa: F401 - the module's Kafka 4.4 broker

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_group_configs_answer_as_kafka_does(real_kafka, broker):
    expected = scenario(real_kafka.bootstrap)
    got = scenario(broker.bootstrap)
    assert len(got) == len(expected)
    for want, have in zip(expected, got):
        assert have == want
