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

#: The fixtures that run Apache Kafka (a test using one, directly or through another fixture,
#: is marked ``kafka``).
KAFKA_FIXTURES = frozenset({"kafka_ref", "kafka_shared", "kafka_shared_groups",
                            "_kafka_session_brokers", "kafka_broker_factory"})

#: The groups of tests the README's run leaves out (minutes each; .ci/run runs each as a
#: step of its own): name -> (the -m words that select it, the variable that runs it
#: anyway, whether naming its test file selects it too, what the skip line says).
OPT_IN_GROUPS = {
    "kafka": (("kafka", "kafka_tools", "kafka_share", "franz_go"), "SEGLOG_KAFKA_TESTS", True,
              "the tests against Apache Kafka 4.4 (a JVM broker each module or session) take "
              "about 10 minutes"),
    "cluster": (("cluster", "soak"), "SEGLOG_CLUSTER_TESTS", True,
                "the cluster tests (ZooKeeper and broker processes) take minutes"),
    "kafka_tools": (("kafka_tools",), KAFKA_TOOLS_ENV, False,
                    "Kafka's command-line tools take minutes"),
}


def _opt_in_groups(item) -> tuple[str, ...]:
    """The groups of :data:`OPT_IN_GROUPS` ``item`` belongs to: ``kafka`` when it is marked
    so or uses a Kafka fixture, ``cluster`` when it lives in tests/cluster."""
    groups = []
    if item.get_closest_marker("kafka") is not None \
            or KAFKA_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        groups.append("kafka")
    if "cluster" in item.path.parent.parts[-1:]:
        groups.append("cluster")
    return tuple(groups)


def _skipped_by(item, skips: dict) -> str | None:
    """The group whose skip ``item`` takes: a kafka_tools test's own (a JVM per step, even
    when its file is named), else its groups' when none of them is selected."""
    if item.get_closest_marker("kafka_tools") is not None and "kafka_tools" in skips:
        return "kafka_tools"
    groups = _opt_in_groups(item)
    for group in groups:
        if item.get_closest_marker(group) is None:
            item.add_marker(getattr(pytest.mark, group))
    if groups and all(group in skips for group in groups):
        return groups[0]
    return None


def _named_on_the_command_line(config) -> bool:
    """Whether the run names test files or tests (``pytest tests/x/test_y.py[::test]``): then
    what is named runs, whatever its group; a run of directories leaves the groups out."""
    return any("::" in arg or arg.split("::")[0].endswith(".py") for arg in config.args)


def pytest_collection_modifyitems(config, items):
    """The README's command (``pytest -q``) runs in about ten minutes; what takes longer runs
    when selected, as .ci/run does, each group in a step of its own:

    - ``kafka`` (every test that runs a real Kafka 4.4 broker: marked so, or using one of
      :data:`KAFKA_FIXTURES`, which marks it): ``-m kafka`` or ``SEGLOG_KAFKA_TESTS=1``;
    - ``cluster`` (every test in tests/cluster, marked so here: ZooKeeper and broker
      processes): ``-m cluster`` or ``SEGLOG_CLUSTER_TESTS=1`` (the scenarios among them also
      with SEGLOG_CLUSTER_SCENARIOS=1);
    - ``kafka_tools`` (Kafka 4.4's command-line tools run against Kafka and seglog: a JVM per
      step; their requests are compared raw by the kafka run's differentials): ``-m
      kafka_tools`` or ``SEGLOG_KAFKA_TOOLS=1``.

    A test file or test named on the command line runs whatever its group (the tools' JVM
    steps still need ``-m kafka_tools``). Left-out tests are skipped with one line saying how
    to run them."""
    import re

    markexpr = config.option.markexpr or ""
    words = set(re.findall(r"[A-Za-z_]+", markexpr))
    named = _named_on_the_command_line(config)
    skips = {}
    for group, (selectors, env, named_selects, why) in OPT_IN_GROUPS.items():
        selected = (named and named_selects) or bool(words.intersection(selectors)) \
            or os.environ.get(env, "") not in ("", "0")
        if not selected:
            skips[group] = pytest.mark.skip(
                reason=f"{why}: run them with -m {group} or {env}=1 (.ci/run does)")
    for item in items:
        group = _skipped_by(item, skips)
        if group is not None:
            item.add_marker(skips[group])
