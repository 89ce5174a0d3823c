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


# One real Kafka 4.4 broker for the whole session (issue: the default suite's time). A
# broker costs a format and a start (two JVMs, 10-15 s on the 2-core machine) and a stop;
# the differential modules whose Kafka side reads only what it made itself share this one
# instead of each starting their own.
_SHARED_KAFKA: dict[str, object] = {}


@pytest.fixture(scope="session")
def kafka_shared(tmp_path_factory):
    """One real Kafka 4.4 broker with Kafka's defaults (single-node KRaft, 127.0.0.1, free
    ports), formatted fresh and started on first use, stopped when the session ends; skips
    without java or the Kafka jars (fails under ``SEGLOG_REQUIRE_KAFKA=1``).

    Other modules use it before and after a test: a test on it must name its topics, groups
    and transactional ids uniquely (the module's name in them), read back only what it made,
    and leave broker-wide state (dynamic broker configs, quotas, ACLs, features) as it found
    it. A scenario that lists the whole cluster, or needs other settings than Kafka's
    defaults, starts its own broker."""
    from seglog.bench.kafka import KafkaBroker, find_kafka

    ref, why = find_kafka()
    if ref is None:
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {why}", pytrace=False)
        pytest.skip(why)
    broker = KafkaBroker(ref, tmp_path_factory.mktemp("kafka-shared"))
    _SHARED_KAFKA["broker"] = broker
    try:
        broker.format()
        broker.start()
        yield broker
    finally:
        broker.stop()
        _SHARED_KAFKA.pop("broker", None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    broker = _SHARED_KAFKA.get("broker")
    if report.failed and broker is not None \
            and "kafka_shared" in getattr(item, "fixturenames", ()):
        report.sections.append(
            (f"shared Kafka broker log ({broker.log_path}), last lines", broker.log_tail(80)))
