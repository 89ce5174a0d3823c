"""Apache Kafka as the oracle: fixtures that run the real thing.

``kafka_ref`` (tests/conftest.py) finds java and the jars ``ci/kafka-ref.sh`` caches
(``~/.cache/seglog/kafka-<version>/lib``, or ``$SEGLOG_KAFKA_LIB``;
:func:`seglog.bench.kafka.find_kafka`).
Without them every test here skips with one line, "needs java + the Kafka jars: run
ci/kafka-ref.sh"; ``SEGLOG_REQUIRE_KAFKA=1`` (CI) makes that a failure instead.

``kafka_broker_factory`` makes single-node KRaft brokers (127.0.0.1, free ports, 512 MiB heap)
under the test module's temp dir; each is formatted fresh, and every broker it made is
stopped when the module ends (SIGTERM, killed by pid after a minute). A broker is one JVM
that takes seconds to start on this 2-core machine, so a module starts as few as it can and
reuses them. When a test fails, the tail of each broker's console log is attached to the
report (the whole log stays in the temp dir).

Every test module here sets ``pytestmark = pytest.mark.kafka`` (``pytest -m kafka`` runs them,
``-m "not kafka"`` leaves them out).
"""

from __future__ import annotations

import os

import pytest

from seglog.bench.kafka import SKIP_REASON, KafkaBroker, find_kafka

REQUIRE_KAFKA = os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0")

_REF, _WHY = find_kafka()
_SKIP_LINE = 1  # where the one skip line points (this file)

_BROKERS_BY_MODULE: dict[str, list[KafkaBroker]] = {}


@pytest.fixture(scope="module")
def kafka_broker_factory(kafka_ref, tmp_path_factory, request):
    """``make(name, **extra_properties) -> KafkaBroker``: a formatted, not yet started broker
    in ``<module tmp>/<name>``. All are stopped at the end of the module."""
    base = tmp_path_factory.mktemp("kafka")
    made: list[KafkaBroker] = []
    _BROKERS_BY_MODULE[request.module.__name__] = made

    def make(name: str, **extra_properties) -> KafkaBroker:
        broker = KafkaBroker(kafka_ref, base / name, extra_properties=extra_properties)
        made.append(broker)
        broker.format()
        return broker

    yield make
    for broker in made:
        broker.stop()
    _BROKERS_BY_MODULE.pop(request.module.__name__, None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and _REF is None and isinstance(report.longrepr, tuple) \
            and str(report.longrepr[2]).startswith(("Skipped: " + SKIP_REASON, SKIP_REASON)):
        # Every Kafka test skips for the same reason: point them all at this file, so that
        # "pytest -ra" prints one line for the lot instead of one per test.
        report.longrepr = (__file__, _SKIP_LINE, report.longrepr[2])
    if report.failed:
        for broker in _BROKERS_BY_MODULE.get(item.module.__name__, []):
            report.sections.append(
                (f"Kafka broker log ({broker.log_path}), last lines", broker.log_tail(80)))
