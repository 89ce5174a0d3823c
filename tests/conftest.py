"""Shared fixtures: every core test takes ``backend`` and runs on native and pure alike.

The test run refuses to fall back silently: if the native extension is not built, every
native-parametrized test errors (unless SEGLOG_BACKEND=pure asks for the twin only).
"""

from __future__ import annotations

import os

import pytest

import seglog

os.environ.setdefault("SEGLOG_REQUIRE_NATIVE", "1")

_ONLY = os.environ.get("SEGLOG_BACKEND", "").strip().lower()
BACKENDS = [_ONLY] if _ONLY else list(seglog.BACKEND_NAMES)


@pytest.fixture(params=BACKENDS)
def backend(request):
    """The backend module under test (``seglog._native`` or ``seglog.pure``)."""
    return seglog.get_backend(request.param)


@pytest.fixture
def native():
    """The native backend (errors if it is not built)."""
    return seglog.get_backend("native")


@pytest.fixture
def pure():
    """The pure-Python twin."""
    return seglog.get_backend("pure")


# Real Kafka 4.4 brokers for the whole session (the default suite's time): a broker costs a
# format and a start (two JVMs, 10-15 s on the 2-core machine) and a stop; the differential
# modules whose Kafka side reads only what it made itself share one instead of each starting
# their own. One broker per distinct set of properties, started on first use.
_SHARED_KAFKA: dict[tuple, object] = {}

#: The properties of ``kafka_shared_groups``: groups join at once (classic: no initial
#: rebalance delay; consumer groups: assignments at once, in the coordinator's thread) and
#: ``__consumer_offsets`` has one partition, as Kafka's own integration tests run.
GROUPS_CONFIG = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "1",
    "group.consumer.assignment.interval.ms": "0",
    "group.consumer.assignor.offload.enable": "false",
}


@pytest.fixture(scope="session")
def kafka_ref():
    """The usable Kafka 4.4 (:class:`seglog.bench.kafka.KafkaRef`: java and the jars
    ``ci/kafka-ref.sh`` caches), for its tools and brokers; skips without them (fails under
    ``SEGLOG_REQUIRE_KAFKA=1``)."""
    from seglog.bench.kafka import find_kafka

    ref, why = find_kafka()
    if ref is None:
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {why}", pytrace=False)
        pytest.skip(why)
    return ref


@pytest.fixture(scope="session")
def _kafka_session_brokers(tmp_path_factory):
    """``get(**properties) -> KafkaBroker``: one started broker per set of properties for the
    whole session; skips without java or the Kafka jars (fails under
    ``SEGLOG_REQUIRE_KAFKA=1``); all are stopped when the session ends."""
    from seglog.bench.kafka import KafkaBroker, find_kafka

    ref, why = find_kafka()
    if ref is None:
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {why}", pytrace=False)
        pytest.skip(why)

    def get(**properties):
        key = tuple(sorted((name, str(value)) for name, value in properties.items()))
        if key not in _SHARED_KAFKA:
            broker = KafkaBroker(ref, tmp_path_factory.mktemp("kafka-shared"),
                                 extra_properties=dict(key))
            try:
                broker.format()
                broker.start()
            except BaseException:
                broker.stop()
                raise
            _SHARED_KAFKA[key] = broker
        return _SHARED_KAFKA[key]

    try:
        yield get
    finally:
        for broker in _SHARED_KAFKA.values():
            broker.stop()
        _SHARED_KAFKA.clear()


# A test on a shared broker runs after and before other modules' tests on it: it must name
# its topics, groups and transactional ids uniquely (the module's name in them), read back
# only what it made, and leave broker-wide state (dynamic broker configs, quotas, ACLs,
# features) as it found it. A scenario that lists the whole cluster starts its own broker.

@pytest.fixture(scope="session")
def kafka_shared(_kafka_session_brokers):
    """One real Kafka 4.4 broker with Kafka's defaults (single-node KRaft, 127.0.0.1, free
    ports) for the whole session (see the rules above)."""
    return _kafka_session_brokers()


@pytest.fixture(scope="session")
def kafka_shared_groups(_kafka_session_brokers):
    """One real Kafka 4.4 broker with :data:`GROUPS_CONFIG` for the whole session (see the
    rules above), for the group protocol conversations."""
    return _kafka_session_brokers(**GROUPS_CONFIG)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    for name, key in (("kafka_shared", ()), ("kafka_shared_groups",
                                             tuple(sorted(GROUPS_CONFIG.items())))):
        broker = _SHARED_KAFKA.get(key)
        if broker is not None and name in getattr(item, "fixturenames", ()):
            report.sections.append(
                (f"shared Kafka broker log ({broker.log_path}), last lines",
                 broker.log_tail(80)))


#: Set (to anything but 0) to run the ``kafka_tools`` tests without ``-m kafka_tools``.
KAFKA_TOOLS_ENV = "SEGLOG_KAFKA_TOOLS"


def pytest_collection_modifyitems(config, items):
    """``kafka_tools`` tests (Kafka 4.4's command-line tools run against Kafka and seglog: a
    JVM per step, minutes in all; their requests are compared raw by the default run's
    differentials) run only when selected: ``-m kafka_tools`` (as .ci/run does) or
    ``SEGLOG_KAFKA_TOOLS=1``; the README's command skips them, saying so."""
    if os.environ.get(KAFKA_TOOLS_ENV, "") not in ("", "0") \
            or "kafka_tools" in (config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(reason="Kafka's command-line tools take minutes: run with "
                                   f"-m kafka_tools or {KAFKA_TOOLS_ENV}=1 (.ci/run does)")
    for item in items:
        if item.get_closest_marker("kafka_tools") is not None:
            item.add_marker(skip)
