"""One scenario run (R§6.5): a :class:`~seglog.cluster.local.LocalCluster` with R§6.1's
shortened timeouts, a replicated topic, the workload recording a history, faults, then heal,
final read, replica listing and the checker.

Every wait is bounded (:meth:`ScenarioRun.wait_for`); the run's directory keeps the history,
the brokers' output and data directories and the checker's summary, for replay.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from seglog.cluster.local import LocalCluster

from . import checker, faults, workload
from .history import FINAL_READ, OK, POLL, READ_COMMITTED, READ_UNCOMMITTED, SEND, History

#: Broker settings of R§6.1: timeouts shortened but not razor-thin, no leader rebalancing.
BROKER_CONFIGS = {
    "zookeeper.session.timeout.ms": 4000,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 200,
    "auto.leader.rebalance.enable": False,
    "unclean.leader.election.enable": False,
    "group.initial.rebalance.delay.ms": 0,
}
#: Bound on waits for the cluster's state (an election takes up to the session timeout).
STATE_TIMEOUT_S = 30.0


class ScenarioRun:
    """A cluster of ``brokers`` on ZooKeeper ``zk_connect`` (None: a ZooKeeper of its own,
    which the run may freeze) under ``run_dir`` (see module docstring). ``broker_configs``
    are added to :data:`BROKER_CONFIGS`; ``test_breaks`` are the negative controls every
    broker runs with (e.g. ``("ack_on_append",)``, passed as ``seglog serve --test-break``);
    ``session_hook`` lets :meth:`LocalCluster.expire_session` work (``seglog serve
    --test-expose-zk-session``)."""

    def __init__(self, run_dir: str | Path, zk_connect: str | None, *, brokers: int = 3,
                 broker_configs: dict[str, Any] | None = None,
                 test_breaks: tuple[str, ...] = (), session_hook: bool = False,
                 topic: str = "scenario",
                 partitions: int = 3, zookeeper_relays: bool = False):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        #: With ``zookeeper_relays``: broker id -> the :class:`faults.Relay` between that
        #: broker and ZooKeeper (block one to cut that broker from ZooKeeper alone).
        self.relays: dict[int, faults.Relay] = {}
        broker_zookeeper = {}
        if zookeeper_relays:
            assert zk_connect is not None, "relays need the ZooKeeper's address up front"
            address, _, chroot = zk_connect.partition("/")
            host, _, port = address.rpartition(":")
            for broker_id in range(brokers):
                relay = faults.Relay((host, int(port)))
                self.relays[broker_id] = relay
                broker_zookeeper[broker_id] = relay.address + (f"/{chroot}" if chroot else "")
        self.cluster = LocalCluster(self.run_dir / "cluster", brokers, zookeeper=zk_connect,
                                    broker_configs={**BROKER_CONFIGS, **(broker_configs or {})},
                                    test_breaks=test_breaks, session_hook=session_hook,
                                    broker_zookeeper=broker_zookeeper)
        self.topic = topic
        self.partitions = list(range(partitions))
        self.history = History(self.run_dir / "history.jsonl")
        self.values = workload.Values()
        self.producers: list[workload.Producer | workload.TxnProducer] = []
        self.consumers: list[workload.Consumer] = []
        #: False when :meth:`heal_and_check` gave up waiting for full ISRs.
        self.isr_full = True

    # ----------------------------------------------------------------- set-up

    def up(self, *, topic_config: dict[str, Any] | None = None,
           replication_factor: int = 3) -> "ScenarioRun":
        """Start the cluster, create the topic and wait until every partition has a leader
        and a full ISR."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        self.cluster.up()
        admin = AdminClient({"bootstrap.servers": self.cluster.bootstrap_servers})
        config = {k: str(v).lower() if isinstance(v, bool) else str(v)
                  for k, v in (topic_config or {}).items()}
        deadline = time.monotonic() + STATE_TIMEOUT_S
        while True:
            futures = admin.create_topics(
                [NewTopic(self.topic, len(self.partitions), replication_factor, config=config)],
                operation_timeout=STATE_TIMEOUT_S, request_timeout=STATE_TIMEOUT_S)
            try:
                for future in futures.values():
                    future.result(timeout=STATE_TIMEOUT_S)
                break
            except KafkaException as exc:
                # The broker that creates it may not have seen the last broker register yet
                # (its live-broker view comes from a watch): Kafka's own test utilities wait
                # for the brokers to be in the metadata the same way.
                error = exc.args[0]
                if error.code() != KafkaError.INVALID_REPLICATION_FACTOR \
                        or time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)
        self.wait_isr_full(replication_factor)
        return self

    # ----------------------------------------------------------------- the cluster's state

    def state(self, partition: int) -> dict[str, Any] | None:
        """The partition's ``state`` znode (leader, leader_epoch, isr), None before it exists."""
        return self.cluster.partition_state(self.topic, partition)

    def leader(self, partition: int) -> int:
        """The partition's leader (-1 when offline); the partition must exist."""
        state = self.state(partition)
        assert state is not None, f"{self.topic}-{partition} has no state znode"
        return int(state["leader"])

    def isr(self, partition: int) -> list[int]:
        """The partition's ISR from ZooKeeper."""
        state = self.state(partition)
        return list(state["isr"]) if state is not None else []

    def wait_for(self, what: str, predicate: Callable[[], Any],
                 timeout_s: float = STATE_TIMEOUT_S) -> Any:
        """Poll ``predicate`` until it returns something true (returned), at most
        ``timeout_s``; AssertionError naming ``what`` otherwise."""
        deadline = time.monotonic() + timeout_s
        while True:
            result = predicate()
            if result:
                return result
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out after {timeout_s} s waiting for {what}; "
                                     f"states: {self.states()}")
            time.sleep(0.1)

    def states(self) -> dict[int, Any]:
        """Every partition's state (for messages)."""
        return {p: self.state(p) for p in self.partitions}

    def wait_isr_full(self, replicas: int = 3, timeout_s: float = STATE_TIMEOUT_S) -> None:
        """Wait until every partition has a leader and ``replicas`` ISR members."""
        self.wait_for(f"every ISR to hold {replicas} replicas", lambda: all(
            (s := self.state(p)) is not None and s["leader"] >= 0 and len(s["isr"]) == replicas
            for p in self.partitions), timeout_s)

    # ----------------------------------------------------------------- the workload

    def start_producer(self, name: str, **settings: Any) -> workload.Producer:
        """Start a producer over every partition (see :class:`workload.Producer`)."""
        settings.setdefault("duration_s", 90.0)
        producer = workload.Producer(self.history, self.cluster.bootstrap_servers, self.topic,
                                     self.partitions, self.values, name=name, **settings)
        producer.start()
        self.producers.append(producer)
        return producer

    def start_txn_producer(self, name: str, **settings: Any) -> workload.TxnProducer:
        """Start a transactional producer over every partition (see
        :class:`workload.TxnProducer`; ``name`` is its ``transactional.id``)."""
        settings.setdefault("duration_s", 90.0)
        producer = workload.TxnProducer(self.history, self.cluster.bootstrap_servers,
                                        self.topic, self.partitions, self.values, name=name,
                                        **settings)
        producer.start()
        self.producers.append(producer)
        return producer

    def start_consumer(self, name: str = "c0", *,
                       isolation: str = READ_UNCOMMITTED) -> workload.Consumer:
        """Start an assigned consumer over every partition (``isolation``: Kafka's
        ``isolation.level``)."""
        consumer = workload.Consumer(self.history, self.cluster.bootstrap_servers, self.topic,
                                     self.partitions, name=name, duration_s=120.0,
                                     isolation=isolation)
        consumer.start()
        self.consumers.append(consumer)
        return consumer

    def sends(self, partition: int, *, outcome: str = OK, invoked_after_ns: int = 0,
              invoked_before_ns: int | None = None, error: str | None = None) -> list[dict]:
        """Completed sends to ``partition`` with ``outcome`` (and ``error``) whose invoke
        happened in the given window (by the invoke's ``time_ns``)."""
        invokes = {e["value"]: e["time_ns"] for e in list(self.history.events)
                   if e["f"] == SEND and e["type"] == "invoke"}
        found = []
        for event in list(self.history.events):
            if event["f"] != SEND or event["type"] != outcome:
                continue
            if event.get("partition") != partition:
                continue
            if error is not None and event.get("error") != error:
                continue
            t = invokes.get(event["value"], 0)
            if t > invoked_after_ns and (invoked_before_ns is None or t < invoked_before_ns):
                found.append(event)
        return found

    def wait_sends(self, what: str, partition: int, count: int = 5, *, outcome: str = OK,
                   invoked_after_ns: int = 0, error: str | None = None,
                   timeout_s: float = STATE_TIMEOUT_S) -> list[dict]:
        """Wait until ``count`` sends matching :meth:`sends` completed."""
        return self.wait_for(what, lambda: (
            found if len(found := self.sends(partition, outcome=outcome,
                                              invoked_after_ns=invoked_after_ns,
                                              error=error)) >= count else None), timeout_s)

    def polled_values(self) -> set[int]:
        """Every value a consumer has polled so far."""
        values = set()
        for event in list(self.history.events):
            if event["f"] == POLL:
                for pairs in event["values"].values():
                    values.update(v for _o, v in pairs)
        return values

    def wait_polled(self, what: str, sends: list[dict],
                    timeout_s: float = STATE_TIMEOUT_S) -> None:
        """Wait until a consumer has polled the values of every send in ``sends``."""
        wanted = {e["value"] for e in sends}
        self.wait_for(what, lambda: wanted <= self.polled_values(), timeout_s)

    def isr_changes(self) -> list[str]:
        """The leaders' ISR shrink/expand log lines about this run's topic so far (the replica
        manager logs ``broker N: shrink ISR of <topic>-<p> from [...] to [...]``)."""
        lines = []
        for broker in self.cluster.brokers.values():
            try:
                text = Path(broker.log_path).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            lines += [line for line in text.splitlines()
                      if f"ISR of {self.topic}-" in line
                      and (" shrink ISR" in line or " expand ISR" in line)]
        return sorted(lines)

    def check_baseline(self) -> None:
        """Before the first fault (R§6.1): every ISR full and no shrink so far. A run whose
        baseline shrank is invalid (the machine was too loaded to judge it), not passed:
        AssertionError."""
        shrinks = [line for line in self.isr_changes() if " shrink ISR" in line]
        states = self.states()
        assignment = self.cluster.topic_assignment(self.topic)
        full = all(s is not None and len(s["isr"]) == len(assignment.get(p, ()))
                   for p, s in states.items())
        if shrinks or not full:
            raise AssertionError(f"INVALID RUN: the ISR shrank before any fault (machine too "
                                 f"loaded?): {shrinks or states}")

    # ----------------------------------------------------------------- the end

    def heal_and_check(self, replicas: int = 3, *,
                       require_full_isr: bool = True) -> checker.CheckResult:
        """Stop the producers, resume and restart every broker, wait for full ISRs, stop the
        consumers, read every partition (read_committed too when the run has a transactional
        producer or a read_committed consumer), stop the brokers, list the replicas and check.
        With ``require_full_isr=False`` (a broken broker may never rejoin) the ISR wait is
        bounded to 15 s and its failure only noted in ``isr_full``.
        The checker's summary is written to ``run_dir/checker.txt``."""
        for producer in self.producers:
            producer.stop()
        for relay in self.relays.values():
            relay.heal()
        for producer in self.producers:
            producer.join(timeout=60)
            assert not producer.is_alive(), f"producer {producer.process} did not end"
            assert producer.error is None, producer.error
        for row in self.cluster.status():
            if row["state"] == "paused":
                self.cluster.resume(row["broker_id"])
            elif row["state"] == "down":
                self.cluster.start(row["broker_id"])
        if require_full_isr:
            self.wait_isr_full(replicas, timeout_s=60)
        else:
            try:
                self.wait_isr_full(replicas, timeout_s=15)
            except AssertionError:
                self.isr_full = False
        # The consumers stop before the final read, so that no poll comes after it (a poll
        # the read could not have seen would look like a lost record).
        for consumer in self.consumers:
            consumer.stop()
        for consumer in self.consumers:
            consumer.join(timeout=30)
            assert not consumer.is_alive() and consumer.error is None, consumer.error
        # Kept for replay: which broker the final read should find leading what.
        (self.run_dir / "states-before-final-read.json").write_text(
            json.dumps(self.states(), indent=1, default=str) + "\n")
        workload.final_read(self.history, self.cluster.bootstrap_servers, self.topic,
                            self.partitions)
        if any(isinstance(p, workload.TxnProducer) for p in self.producers) or any(
                c.isolation == READ_COMMITTED for c in self.consumers):
            high_watermarks = {int(e["partition"]): int(e["high_watermark"])
                               for e in list(self.history.events) if e["f"] == FINAL_READ}
            workload.final_read_committed(self.history, self.cluster.bootstrap_servers,
                                          self.topic, self.partitions, high_watermarks)
        assignment = self.cluster.topic_assignment(self.topic)
        assert sorted(assignment) == self.partitions, assignment
        self.cluster.down()
        workload.read_replicas(self.history, {b: p.data_dir for b, p in
                                              self.cluster.brokers.items()},
                               self.topic, assignment)
        self.history.close()
        result = checker.check(self.history.events)
        changes = self.isr_changes()
        (self.run_dir / "checker.txt").write_text(
            result.summary(limit=200) + f"\n{len(changes)} ISR changes\n"
            + "".join(f"  {line}\n" for line in changes))
        return result

    def close(self) -> None:
        """Stop everything still running (after a failed run; idempotent)."""
        for thread in self.producers + self.consumers:
            thread.stop()
        for relay in self.relays.values():
            relay.heal()
        self.cluster.down()
        for relay in self.relays.values():
            relay.close()
        self.history.close()
