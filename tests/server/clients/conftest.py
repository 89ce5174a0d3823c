"""The differential harness: every real-client scenario runs against the real Apache Kafka
broker and against ``seglog serve``, and the two must see the same thing.

``target`` is parametrized over ``kafka`` (Kafka 4.4.0 from the tests/kafka harness: one JVM
for the whole directory, started once, since a start takes seconds; marked ``kafka``) and
``seglog`` (a ``seglog serve`` broker in this process over the native storage backend, one
per test module), and ``seglog-pure`` (the same over the pure-Python twin) in the modules
that set ``SEGLOG_BACKENDS = ("native", "pure")`` (the data path). All run
with :data:`BROKER_CONFIG`: no initial rebalance delay, a minimum session timeout short enough
for :data:`clients_runner.SESSION_TIMEOUT_MS`, one-partition internal topics. A
:class:`Target` gives ``bootstrap`` and ``restart()`` (stop and start on the same data and
port); ``unique`` names a scenario's topics and groups the same on both brokers. Every test
here is marked ``clients``; without java and the Kafka jars the ``kafka`` side skips (fails
under ``SEGLOG_REQUIRE_KAFKA=1``) and the ``seglog`` side still checks Kafka's documented
results.

A test runs its scenario, checks what Kafka's documented behaviour says, and hands the result
to ``differential``: each later target's result must equal the earlier ones' (pytest runs all
of a module's ``kafka`` tests before its ``seglog`` ones, ``target`` being module-scoped). Results
carry only what two brokers must agree on (offsets, keys, values, headers, error codes,
assignment sizes), never timestamps or cluster and member ids.

Where the seglog side still fails for a reason named in :data:`SEGLOG_XFAIL` (a handler that
is missing or wrong), that test is marked ``xfail(strict=True)`` with the exact failure, so it
turns into an error as soon as it passes.
"""

from __future__ import annotations

import os

import pytest

from seglog.bench.kafka import KafkaBroker, find_kafka

REQUIRE_KAFKA = os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0")

#: Broker settings both targets run with (Kafka's names): groups join at once, a killed
#: member is evicted after the clients' short session timeout, and the internal topics have
#: one partition (as the tests/kafka harness and Kafka's own integration tests run).
BROKER_CONFIG = {
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 500,
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.num.partitions": 1,
}

#: Scenario (test function name) -> the exact failure of its seglog side, for scenarios that
#: still fail there; each becomes ``xfail(strict=True)`` on the seglog parametrization only.
SEGLOG_XFAIL: dict[str, str] = {}

_RESULTS: dict[tuple, dict[str, object]] = {}


class Target:
    """A broker under test: ``name`` (``kafka`` or ``seglog``), ``bootstrap`` and
    :meth:`restart` (same data dir, same port)."""

    def __init__(self, name: str, bootstrap_fn, restart_fn):
        self.name = name
        self._bootstrap_fn = bootstrap_fn
        self._restart_fn = restart_fn

    @property
    def bootstrap(self) -> str:
        """``host:port`` for clients."""
        return self._bootstrap_fn()

    def restart(self) -> None:
        """Stop the broker cleanly and start it again on the same data dir and port."""
        self._restart_fn()

    def __repr__(self) -> str:
        return f"Target({self.name}, {self.bootstrap})"


@pytest.fixture(scope="session")
def _kafka_broker(tmp_path_factory):
    """One real Kafka broker for the whole directory (formatted fresh, stopped at the end)."""
    ref, why = find_kafka()
    if ref is None:
        if REQUIRE_KAFKA:
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {why}", pytrace=False)
        pytest.skip(why)
    broker = KafkaBroker(ref, tmp_path_factory.mktemp("kafka-clients"),
                         extra_properties=BROKER_CONFIG)
    try:
        broker.format()
        broker.start()
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def _seglog_brokers(tmp_path_factory):
    """``get(backend) -> (state, restart)``: one ``seglog serve`` broker per storage backend
    for one test module, over a Store in a temp dir, started when first asked for;
    ``restart`` stops it cleanly and starts a new one on the same dir and port."""
    from seglog.server.broker import Broker

    made: dict[str, tuple] = {}

    def get(backend: str):
        if backend in made:
            return made[backend]
        data_dir = tmp_path_factory.mktemp(f"seglog-clients-{backend}")
        state = {"broker": Broker(data_dir, listen=("127.0.0.1", 0), config=BROKER_CONFIG,
                                  backend=backend)}
        state["broker"].start()
        port = state["broker"].port

        def restart():
            state["broker"].stop()
            state["broker"] = Broker(data_dir, listen=("127.0.0.1", port),
                                     config=BROKER_CONFIG, backend=backend)
            state["broker"].start()

        made[backend] = (state, restart)
        return made[backend]

    try:
        yield get
    finally:
        for state, _restart in made.values():
            state["broker"].stop()


def pytest_generate_tests(metafunc):
    """``target`` over the real Kafka broker and ``seglog serve`` on the native backend, and
    also on the pure-Python one for a module that sets ``SEGLOG_BACKENDS = ("native",
    "pure")`` (the data path: storage behaviour matters there)."""
    if "target" not in metafunc.fixturenames:
        return
    backends = getattr(metafunc.module, "SEGLOG_BACKENDS", ("native",))
    params = [pytest.param("kafka", marks=pytest.mark.kafka)]
    params += ["seglog" if backend == "native" else f"seglog-{backend}" for backend in backends]
    metafunc.parametrize("target", params, indirect=True, scope="module")


@pytest.fixture(scope="module")
def target(request):
    """The broker a scenario runs against: the real Kafka 4.4.0, then ``seglog serve``
    (``seglog``: native storage; ``seglog-pure``: the pure-Python twin)."""
    if request.param == "kafka":
        broker = request.getfixturevalue("_kafka_broker")

        def restart():
            broker.stop()
            broker.start()

        return Target("kafka", lambda: broker.bootstrap, restart)
    backend = request.param.partition("-")[2] or "native"
    state, restart = request.getfixturevalue("_seglog_brokers")(backend)
    return Target(request.param, lambda: f"127.0.0.1:{state['broker'].port}", restart)


@pytest.fixture
def differential(request, target):
    """``check(result)``: records what this scenario saw on this target and asserts it equals
    what the other target saw (when that ran first)."""
    callspec = getattr(request.node, "callspec", None)
    others = tuple(sorted((k, repr(v)) for k, v in (callspec.params.items() if callspec else ())
                          if k != "target"))
    key = (request.node.module.__name__, request.node.originalname, others)

    def check(result):
        seen = _RESULTS.setdefault(key, {})
        seen[target.name] = result
        other = {name: r for name, r in seen.items() if name != target.name}
        for name, r in other.items():
            assert result == r, f"{target.name} saw something else than {name}"
        return result

    return check


@pytest.fixture
def unique(request):
    """A name for this scenario's topics and groups, unique within a broker's life and the same
    on both targets: the test's name and its parameters other than ``target``."""
    callspec = getattr(request.node, "callspec", None)
    params = [str(v) for k, v in sorted(callspec.params.items()) if k != "target"] \
        if callspec else []
    return "-".join([request.node.originalname.removeprefix("test_"), *params]).replace("_", "-")


def pytest_collection_modifyitems(items):
    for item in items:
        if "/server/clients/" not in str(item.fspath).replace(os.sep, "/"):
            continue
        item.add_marker(pytest.mark.clients)
        callspec = getattr(item, "callspec", None)
        if callspec is not None and str(callspec.params.get("target")).startswith("seglog"):
            reason = SEGLOG_XFAIL.get(item.originalname)
            if reason:
                item.add_marker(pytest.mark.xfail(strict=True, reason=reason))
