"""Store(topic_config_defaults=..., offsets_retention_ms=...): a broker's ``log.*`` settings
as its topics' defaults (Kafka's broker-level topic config defaults), on both backends."""

from __future__ import annotations

import json
import time

import pytest

from seglog import LogConfig, Store
from seglog.errors import InvalidConfigError

HOUR_MS = 3600 * 1000


@pytest.fixture(params=["native", "pure"])
def backend_name(request):
    return request.param


def test_new_topics_take_the_defaults_and_their_own_settings_over_them(tmp_path, backend_name):
    defaults = {"retention.ms": HOUR_MS, "segment.bytes": 1 << 20}
    with Store(tmp_path, backend=backend_name, topic_config_defaults=defaults) as store:
        plain = store.create_topic("plain")
        own = store.create_topic("own", config={"retention.ms": "1000"})
        assert (plain.config.retention_ms, plain.config.segment_bytes) == (HOUR_MS, 1 << 20)
        assert (own.config.retention_ms, own.config.segment_bytes) == (1000, 1 << 20)
        assert store.create_topic("typed", config=LogConfig()).config == LogConfig()
    registry = json.loads((tmp_path / "seglog-topics.json").read_text())["topics"]
    # Only what differs from the store's defaults is recorded as the topic's own.
    assert registry["plain"]["config"] == {}
    assert registry["own"]["config"] == {"retention.ms": "1000"}


def test_reopened_topics_follow_new_defaults_where_they_set_nothing(tmp_path, backend_name):
    with Store(tmp_path, backend=backend_name,
               topic_config_defaults={"retention.ms": HOUR_MS}) as store:
        store.create_topic("plain")
        store.create_topic("own", config={"retention.ms": "1000"})
    with Store(tmp_path, backend=backend_name,
               topic_config_defaults={"retention.ms": 2 * HOUR_MS}) as store:
        assert store.topic("plain").config.retention_ms == 2 * HOUR_MS
        assert store.topic("own").config.retention_ms == 1000
    with Store(tmp_path, backend=backend_name) as store:
        assert store.topic("plain").config.retention_ms == LogConfig().retention_ms


def test_altered_configs_fall_back_to_the_store_defaults(tmp_path, backend_name):
    with Store(tmp_path, backend=backend_name,
               topic_config_defaults={"retention.ms": HOUR_MS}) as store:
        store.create_topic("t", config={"retention.ms": "1000", "segment.ms": "5000"})
        topic = store.alter_topic_config("t", {"segment.ms": "6000"})
        assert (topic.config.retention_ms, topic.config.segment_ms) == (HOUR_MS, 6000)


def test_bad_defaults_are_refused(tmp_path):
    with pytest.raises(InvalidConfigError):
        Store(tmp_path, topic_config_defaults={"retention.ms": "soon"})
    with pytest.raises(InvalidConfigError):
        Store(tmp_path, topic_config_defaults={"log.retention.ms": "1"})  # a broker name


def test_offsets_retention_is_the_default_of_expire_offsets(tmp_path, backend_name):
    with Store(tmp_path, backend=backend_name, offsets_topic_partitions=1,
               offsets_retention_ms=1000) as store:
        store.create_topic("t")
        producer = store.producer()
        producer.send("t", b"v")
        producer.flush()
        consumer = store.consumer("g", topics=["t"])
        consumer.poll(timeout_ms=1000)
        consumer.commit()
        consumer.close()
        soon_ms = int(time.time() * 1000) + 60_000  # a minute on: within 7 days, past 1 s
        assert list(store.expire_offsets(now_ms=soon_ms)) == ["g"]
    with pytest.raises(ValueError):
        Store(tmp_path / "other", offsets_retention_ms=0)
