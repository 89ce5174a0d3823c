"""The controller mutation quota (issue 23, KIP-599): ``controller_mutation_rate`` bounds the
partitions a client creates or deletes per second, a token bucket with a burst of
``controller.quota.window.num * controller.quota.window.size.seconds * rate`` (11 * 1 s by
Kafka's defaults). CreateTopics v6+, CreatePartitions v3+ and DeleteTopics v5+ are strict
(a topic past the quota is THROTTLING_QUOTA_EXCEEDED, the response carries the throttle
time); older versions are permissive (done, then throttled: the connection is muted)."""

from __future__ import annotations

import datetime
import os
import time

import pytest

from kafka_waits import eventually
from quota_helpers import RawClient, alter_quotas, describe_quotas
from seglog.bench.kafka import KafkaBroker, find_kafka
from seglog import error_codes as codes
from seglog.server import quotas as q

CLIENT = "client-id"
TIMEOUT = datetime.timedelta(seconds=30)
THROTTLED = int(codes.THROTTLING_QUOTA_EXCEEDED)
#: Kafka 4.4 answers no message (its ApiError drops the error's default one).
MESSAGE = None


def _ms(delta: datetime.timedelta) -> int:
    return int(delta.total_seconds() * 1000)


def test_strict_quota_refuses_once_the_bucket_is_below_zero():
    manager = q.ControllerMutationQuotaManager()
    manager.update_quota(((CLIENT, "c"),), 2.0)
    quota = manager.quota_for("ANONYMOUS", "c", strict=True)
    assert quota.burst == 22.0
    assert quota.record(20) and quota.record(5)  # 22 -> 2 -> -3: taken while not below 0
    assert not quota.record(1)  # -3: refused, nothing counted
    # The throttle time refills the bucket to zero: 3 tokens at 2/s.
    assert 1400 <= quota.throttle_ms() <= 1500
    # Another client id has no quota; a permissive quota always counts.
    assert manager.quota_for("ANONYMOUS", "other", strict=True).record(1000)
    permissive = manager.quota_for("ANONYMOUS", "c", strict=False)
    assert permissive.record(1)
    assert 1900 <= permissive.throttle_ms() <= 2000


def _create(client: RawClient, version: int, topics: list[tuple[str, int]]):
    m = client.m(19, version)
    r = client.call(19, version, topics=tuple(
        m.CreatableTopic(name=name, num_partitions=count, replication_factor=1,
                         assignments=(), configs=()) for name, count in topics),
        timeout=TIMEOUT, validate_only=False)
    return {t.name: (int(t.error_code), t.error_message) for t in r.topics}, r.throttle_time


def test_create_topics_v7_over_the_burst_is_throttled_and_another_client_is_not(broker):
    with RawClient(broker.bootstrap) as admin:
        assert alter_quotas(admin, [([(CLIENT, "limited")], {"controller_mutation_rate": 2})]) \
            == [(((CLIENT, "limited"),), 0, None)]
    with RawClient(broker.bootstrap, client_id="limited") as limited:
        # Burst 22: 20 then 5 are taken (the bucket was not below zero), then it is.
        results, throttle = _create(limited, 7, [("a", 20), ("b", 5), ("c", 1)])
        assert results == {"a": (0, None), "b": (0, None), "c": (THROTTLED, MESSAGE)}
        assert 1000 <= _ms(throttle) <= 1500
    with RawClient(broker.bootstrap, client_id="limited") as limited:
        # DeleteTopics v5+ and CreatePartitions v3+ are strict too.
        m = limited.m(20, 6)
        r = limited.call(20, 6, topics=(m.DeleteTopicState(name="a", topic_id=None),),
                         timeout=TIMEOUT)
        assert [(t.name, int(t.error_code)) for t in r.responses] == [("a", THROTTLED)]
        assert _ms(r.throttle_time) > 0
    # (A fresh connection: the muted one would be read again only once the bucket refilled.)
    with RawClient(broker.bootstrap, client_id="limited") as limited:
        m = limited.m(37, 3)
        r = limited.call(37, 3, topics=(m.CreatePartitionsTopic(name="b", count=6,
                                                                  assignments=None),),
                         timeout=TIMEOUT, validate_only=False)
        assert [(t.name, int(t.error_code)) for t in r.results] == [("b", THROTTLED)]
    with RawClient(broker.bootstrap, client_id="free") as free:
        results, throttle = _create(free, 7, [("d", 40), ("e", 1)])
        assert results == {"d": (0, None), "e": (0, None)}
        assert _ms(throttle) == 0


def test_create_topics_v5_is_permissive_and_mutes_the_connection(broker):
    with RawClient(broker.bootstrap) as admin:
        assert alter_quotas(admin, [([(CLIENT, "old")], {"controller_mutation_rate": 2})]) \
            == [(((CLIENT, "old"),), 0, None)]
    with RawClient(broker.bootstrap, client_id="old") as old:
        # 24 partitions against a burst of 22: done, throttled 2 / 2 per s = 1 s.
        results, throttle = _create(old, 5, [("p", 24)])
        assert results == {"p": (0, None)}
        throttled_ms = _ms(throttle)
        assert 500 <= throttled_ms <= 1000
        sent = time.monotonic()
        results, _ = _create(old, 5, [("p2", 1)])
        assert results == {"p2": (0, None)}
        # The connection read nothing from this client for the throttle time.
        assert time.monotonic() - sent >= 0.8 * throttled_ms / 1000.0


# --- the same requests to real Kafka 4.4 (differential) --------------------------------------

_REF, _WHY = find_kafka()
#: Bounds of one wait.
WAIT_S = 20.0


@pytest.fixture(scope="module")
def real_kafka(tmp_path_factory):
    if _REF is None:
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {_WHY}", pytrace=False)
        pytest.skip(_WHY)
    kafka = KafkaBroker(_REF, tmp_path_factory.mktemp("kafka"))
    kafka.format()
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.stop()


def _mutation_scenario(bootstrap: str) -> list:
    out: list = []
    with RawClient(bootstrap) as admin:
        out.append(alter_quotas(admin, [([(CLIENT, "diff")], {"controller_mutation_rate": 2})]))
        # Kafka's broker learns the controller's records a moment after the answer: wait,
        # bounded, until the quota shows (both brokers alike).
        eventually(lambda: describe_quotas(admin, ((CLIENT, 0, "diff"),)),
                   lambda described: bool(described[2]), timeout_s=WAIT_S)
    with RawClient(bootstrap, client_id="diff") as client:
        results, throttle = _create(client, 7, [("a", 20), ("b", 5), ("c", 1)])
        out.append((sorted(results.items()), _ms(throttle) > 0))
    with RawClient(bootstrap, client_id="diff") as client:
        m = client.m(20, 6)
        r = client.call(20, 6, topics=(m.DeleteTopicState(name="a", topic_id=None),),
                        timeout=TIMEOUT)
        out.append(([(t.name, int(t.error_code), t.error_message) for t in r.responses],
                    _ms(r.throttle_time) > 0))
    with RawClient(bootstrap, client_id="diff") as client:
        m = client.m(37, 3)
        r = client.call(37, 3, topics=(m.CreatePartitionsTopic(name="b", count=6,
                                                                 assignments=None),),
                        timeout=TIMEOUT, validate_only=False)
        out.append(([(t.name, int(t.error_code), t.error_message) for t in r.results],
                    _ms(r.throttle_time) > 0))
    with RawClient(bootstrap, client_id="diff") as client:
        # Permissive (v5): done however far below zero the bucket is, and throttled.
        results, throttle = _create(client, 5, [("p", 3)])
        out.append((sorted(results.items()), _ms(throttle) > 0))
    with RawClient(bootstrap, client_id="other") as client:
        results, throttle = _create(client, 7, [("d", 30)])
        out.append((sorted(results.items()), _ms(throttle)))
    return out


@pytest.mark.kafka
@pytest.mark.slow
def test_mutation_quota_answers_as_kafka_does(real_kafka, broker):
    expected = _mutation_scenario(real_kafka.bootstrap)
    got = _mutation_scenario(broker.bootstrap)
    assert got == expected, (got, expected)
