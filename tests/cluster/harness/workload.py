"""The workload of the cluster scenarios (R§6.3): bounded producers and consumers made of real,
unmodified clients (confluent-kafka, i.e. librdkafka), recording every send and poll in a
:class:`~harness.history.History`; the final read after healing; the replicas' batches read
from their data directories.

Outcome of a send (R§6.3, exactly):

* **ok**: a delivery report with an offset.
* **fail** (definitely not written): ``NOT_ENOUGH_REPLICAS`` (19) and the errors raised before
  any append (``INVALID_REQUIRED_ACKS``, unknown topic/partition, a produce() the client
  refused locally), and 19 only when the producer does not retry (``retries=0``): with
  retries, an earlier attempt may have been written.
* **info** (indeterminate): everything else, ``NOT_ENOUGH_REPLICAS_AFTER_APPEND`` (20: it
  *was* written) included, timeouts, ``NOT_LEADER_OR_FOLLOWER`` and sends never reported
  before the run ended.

A transactional producer (:class:`TxnProducer`) writes a few records to several partitions
per transaction and then commits or aborts it, as a seeded RNG says; its transactions'
outcomes are recorded (committed, aborted, or unknown when a commit failed or timed out).

Every loop is bounded by a count and a time; every client wait has a timeout.
"""

from __future__ import annotations

import itertools
import os
import random
import struct
import threading
import time
from pathlib import Path
from typing import Any

from seglog import format as fmt
from seglog.filenames import (
    LEADER_EPOCH_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT, partition_dir_name,
)
from seglog.storage.checkpoints import LeaderEpochCheckpointFile, OffsetCheckpointFile

from .history import (
    ABORTED, ASSIGN, COMMITTED, FAIL, FINAL_READ, INFO, INVOKE, META, OK, POLL, PRODUCER,
    READ_COMMITTED, READ_UNCOMMITTED, REPLICA, SEND, TXN, UNKNOWN, History,
)

#: Kafka error codes that mean "not written" when the producer does not retry (R§6.3).
DEFINITE_FAILURES_NO_RETRY = frozenset({19})
#: Error codes that are raised before any append, whatever the retries.
DEFINITE_FAILURES = frozenset({21, 3})  # INVALID_REQUIRED_ACKS, UNKNOWN_TOPIC_OR_PARTITION

#: Client settings of R§6.1 (shortened, not razor-thin), set explicitly on every client.
CLIENT_TIMEOUTS = {"socket.timeout.ms": 5000, "metadata.max.age.ms": 5000,
                   "topic.metadata.refresh.interval.ms": 1000,
                   "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 1000}
#: The producers' own timeouts (R§6.1: request 5 s, delivery 20 s).
PRODUCER_TIMEOUTS = {"request.timeout.ms": 5000, "message.timeout.ms": 20000}


class ForeignRecordError(AssertionError):
    """A consumer read a record no producer of the harness writes (every value is a decimal
    integer): a null value (a tombstone nobody sent) or bytes that are not a number, e.g. a
    record set read from a region of the log that changed under the read."""


def value_of(message: Any, reader: str) -> int:
    """The integer a polled ``message`` carries; :class:`ForeignRecordError` naming the
    partition, offset, key, timestamp and the raw value when it carries none."""
    value = message.value()
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ForeignRecordError(
            f"{reader}: partition {message.partition()} offset {message.offset()} holds a "
            f"record the harness never writes: value {value!r}, key {message.key()!r}, "
            f"timestamp {message.timestamp()}, headers {message.headers()}") from None


class Values:
    """The run's unique integer values, shared by its producers (thread-safe)."""

    def __init__(self, start: int = 0):
        self.counter = itertools.count(start)
        self.lock = threading.Lock()

    def next(self) -> int:
        """A value no producer of this run has sent."""
        with self.lock:
            return next(self.counter)


def classify(error: Any, retries: int) -> str:
    """The history type of a failed send's confluent-kafka ``KafkaError`` (module
    docstring)."""
    return classify_code(error.code(), retries)


def classify_code(code: int | None, retries: int) -> str:
    """The history type of a send that failed with Kafka error ``code`` (None: a local
    error), by a producer with ``retries``."""
    if code in DEFINITE_FAILURES or (code in DEFINITE_FAILURES_NO_RETRY and retries == 0):
        return FAIL
    return INFO


def error_name(error: Any) -> str:
    """A KafkaError's name (``NOT_ENOUGH_REPLICAS``, ``_MSG_TIMED_OUT``, ...)."""
    return error.name() if hasattr(error, "name") else str(error)


class Producer(threading.Thread):
    """One confluent-kafka producer sending unique values to ``partitions`` of ``topic`` (value
    ``v`` to partition ``v % len(partitions)``, key = the partition), one send every
    ``interval_s``, until ``count`` sends, ``duration_s`` or :meth:`stop`; then it flushes for
    at most ``flush_s`` and records the sends never reported as *info*.

    ``acks``, ``idempotent``, ``retries`` and ``max_in_flight`` are always set explicitly
    (librdkafka's defaults differ from Java's); ``config`` adds or overrides settings.
    """

    #: The client library, recorded with the producer's settings: what the checker may
    #: expect of its ordering depends on it (``checker.ORDERING_CLIENTS``).
    CLIENT = "librdkafka"

    def __init__(self, history: History, bootstrap: str, topic: str, partitions: list[int],
                 values: Values, *, name: str = "p0", acks: str = "all", idempotent: bool = True,
                 retries: int = 1_000_000, max_in_flight: int = 5, count: int = 100_000,
                 duration_s: float = 30.0, interval_s: float = 0.005, flush_s: float = 25.0,
                 config: dict[str, Any] | None = None):
        super().__init__(name=f"producer-{name}", daemon=True)
        self.history, self.topic, self.partitions = history, topic, list(partitions)
        self.values, self.process = values, name
        self.count, self.duration_s, self.interval_s, self.flush_s = (
            count, duration_s, interval_s, flush_s)
        self.retries = retries
        self.producer = self._open(bootstrap, acks=acks, idempotent=idempotent, retries=retries,
                                   max_in_flight=max_in_flight, config=config or {})
        history.record(name, META, PRODUCER, idempotent=idempotent, max_in_flight=max_in_flight,
                       retries=retries, acks=acks, client=self.CLIENT)
        self.pending: dict[int, dict] = {}
        self.pending_lock = threading.Lock()
        self.stopping = threading.Event()
        self.outcomes: dict[str, int] = {OK: 0, FAIL: 0, INFO: 0}
        self.errors: dict[str, int] = {}
        self.error: BaseException | None = None

    def stop(self) -> None:
        """Ask the producer to stop sending (it still flushes)."""
        self.stopping.set()

    def _open(self, bootstrap: str, *, acks: str, idempotent: bool, retries: int,
              max_in_flight: int, config: dict[str, Any]) -> Any:
        from confluent_kafka import Producer as KafkaProducer

        return KafkaProducer({
            "bootstrap.servers": bootstrap, "acks": acks, "enable.idempotence": idempotent,
            "retries": retries, "max.in.flight.requests.per.connection": max_in_flight,
            "linger.ms": 2, "client.id": self.process, **CLIENT_TIMEOUTS, **PRODUCER_TIMEOUTS,
            **config})

    def _send(self, value: int, key: str, partition: int) -> None:
        try:
            self.producer.produce(self.topic, value=str(value).encode(), key=key.encode(),
                                  partition=partition, on_delivery=self._delivered(value, key))
        except BufferError:
            self._complete(value, key, FAIL, error="local queue full")
        except Exception as exc:  # noqa: BLE001 - KafkaException: refused locally
            self._complete(value, key, FAIL, error=f"produce() raised {exc}")
        self.producer.poll(self.interval_s)

    def _drain(self, deadline: float) -> None:
        while len(self.producer) and time.monotonic() < deadline:
            self.producer.flush(0.5)

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - reported by the scenario through .error
            self.error = exc

    def _run(self) -> None:
        deadline = time.monotonic() + self.duration_s
        for _ in range(self.count):
            if self.stopping.is_set() or time.monotonic() >= deadline:
                break
            value = self.values.next()
            partition = self.partitions[value % len(self.partitions)]
            key = str(partition)
            with self.pending_lock:
                self.pending[value] = self.history.record(
                    self.process, INVOKE, SEND, key=key, value=value, partition=partition)
            self._send(value, key, partition)
        self._drain(time.monotonic() + self.flush_s)
        with self.pending_lock:
            never = list(self.pending.items())
        for value, invoke in never:
            self._complete(value, invoke["key"], INFO, error="never reported")
        self._close()

    def _close(self) -> None:
        self.producer = None  # librdkafka's threads end with the last reference

    def _delivered(self, value: int, key: str):
        def report(err, msg) -> None:
            if err is None:
                self._complete(value, key, OK, partition=msg.partition(), offset=msg.offset())
            else:
                self._complete(value, key, classify(err, self.retries),
                               error=error_name(err), code=err.code(), partition=msg.partition())
        return report

    def _complete(self, value: int, key: str, outcome: str, **fields: Any) -> None:
        with self.pending_lock:
            if self.pending.pop(value, None) is None:
                return
            self.outcomes[outcome] += 1
            if "error" in fields:
                self.errors[fields["error"]] = self.errors.get(fields["error"], 0) + 1
        self.history.record(self.process, outcome, SEND, key=key, value=value, **fields)


class KafkaPythonProducer(Producer):
    """The same producer made of kafka-python (a second, independent client implementation):
    errors arrive as exceptions whose ``errno`` is Kafka's error code (19
    ``NotEnoughReplicasError``, 20 ``NotEnoughReplicasAfterAppendError``), classified the
    same way (:func:`classify_code`)."""

    CLIENT = "kafka-python"

    def _open(self, bootstrap: str, *, acks: str, idempotent: bool, retries: int,
              max_in_flight: int, config: dict[str, Any]) -> Any:
        from kafka import KafkaProducer

        return KafkaProducer(
            bootstrap_servers=bootstrap.split(","), acks=acks if acks == "all" else int(acks),
            enable_idempotence=idempotent, retries=retries,
            max_in_flight_requests_per_connection=max_in_flight, linger_ms=2,
            client_id=self.process, request_timeout_ms=PRODUCER_TIMEOUTS["request.timeout.ms"],
            delivery_timeout_ms=PRODUCER_TIMEOUTS["message.timeout.ms"],
            metadata_max_age_ms=CLIENT_TIMEOUTS["metadata.max.age.ms"],
            retry_backoff_ms=CLIENT_TIMEOUTS["retry.backoff.ms"], **config)

    def _send(self, value: int, key: str, partition: int) -> None:
        try:
            future = self.producer.send(self.topic, value=str(value).encode(),
                                        key=key.encode(), partition=partition)
        except Exception as exc:  # noqa: BLE001 - raised before anything was sent
            self._complete(value, key, FAIL, error=f"send() raised {type(exc).__name__}")
        else:
            future.add_callback(lambda meta: self._complete(
                value, key, OK, partition=meta.partition, offset=meta.offset))
            future.add_errback(lambda exc: self._failed(value, key, partition, exc))
        time.sleep(self.interval_s)

    def _failed(self, value: int, key: str, partition: int, exc: BaseException) -> None:
        code = getattr(exc, "errno", None)
        self._complete(value, key, classify_code(code, self.retries), error=type(exc).__name__,
                       code=code, partition=partition)

    def _drain(self, deadline: float) -> None:
        try:
            self.producer.flush(timeout=max(0.0, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001 - KafkaTimeoutError: the rest is recorded as info
            pass

    def _close(self) -> None:
        self.producer.close(timeout=5)
        self.producer = None


class TxnProducer(threading.Thread):
    """One confluent-kafka transactional producer (``transactional.id`` = ``name``; idempotent,
    acks=all, as Kafka requires) running transactions over ``partitions`` of ``topic`` until
    ``count`` transactions, ``duration_s`` or :meth:`stop` (a transaction begun is always
    finished).

    Each transaction writes 1-3 records (``records_max``) to each of 2 or more partitions,
    flushes, then aborts with probability ``abort_ratio`` (a seeded ``random.Random(seed)``;
    always when a send failed or was never reported) and commits otherwise. Outcomes
    (history module): ``committed`` when commit_transaction returned (a retriable error is
    retried, at most ``commit_attempts`` times), ``aborted`` when no commit was ever asked,
    ``unknown`` when a commit was asked and failed. After an unknown outcome or a fatal error
    the producer is closed and a new one with the same ``transactional.id`` is opened
    (InitProducerId fences the old one). Every client call has a timeout (``txn_timeout_s``).
    """

    def __init__(self, history: History, bootstrap: str, topic: str, partitions: list[int],
                 values: Values, *, name: str = "tx0", seed: int = 0,
                 abort_ratio: float = 0.4, records_max: int = 3, count: int = 10_000,
                 duration_s: float = 30.0, interval_s: float = 0.05,
                 txn_timeout_s: float = 10.0, commit_attempts: int = 3,
                 transaction_timeout_ms: int = 10000, config: dict[str, Any] | None = None):
        super().__init__(name=f"txn-producer-{name}", daemon=True)
        assert len(partitions) >= 2, "a transaction spans several partitions"
        self.history, self.bootstrap, self.topic = history, bootstrap, topic
        self.partitions, self.values, self.process = list(partitions), values, name
        self.rng = random.Random(seed)
        self.abort_ratio, self.records_max = abort_ratio, records_max
        self.count, self.duration_s, self.interval_s = count, duration_s, interval_s
        self.txn_timeout_s, self.commit_attempts = txn_timeout_s, commit_attempts
        self.transaction_timeout_ms = transaction_timeout_ms
        self.config = config or {}
        history.record(name, META, PRODUCER, idempotent=True, max_in_flight=5,
                       retries=1_000_000, acks="all", transactional_id=name,
                       client=Producer.CLIENT)
        self.producer: Any = None
        self.pending: dict[int, dict] = {}
        self.pending_lock = threading.Lock()
        self.stopping = threading.Event()
        self.outcomes: dict[str, int] = {COMMITTED: 0, ABORTED: 0, UNKNOWN: 0}
        #: Transactions with a send completed other than ok (they are aborted).
        self.failed_txns: set[str] = set()
        self.errors: dict[str, int] = {}
        self.error: BaseException | None = None

    def stop(self) -> None:
        """Ask the producer to stop after the transaction in progress."""
        self.stopping.set()

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - reported by the scenario through .error
            self.error = exc
        finally:
            self.producer = None  # librdkafka's threads end with the last reference

    def _open(self, deadline: float) -> bool:
        """A fresh producer with its transactions initialised; False when the deadline (or a
        stop) came first."""
        from confluent_kafka import KafkaException
        from confluent_kafka import Producer as KafkaProducer

        while time.monotonic() < deadline and not self.stopping.is_set():
            self.producer = KafkaProducer({
                "bootstrap.servers": self.bootstrap, "transactional.id": self.process,
                "transaction.timeout.ms": self.transaction_timeout_ms, "acks": "all",
                "enable.idempotence": True, "max.in.flight.requests.per.connection": 5,
                "retries": 1_000_000, "linger.ms": 2, "client.id": self.process,
                **CLIENT_TIMEOUTS, **PRODUCER_TIMEOUTS,
                # librdkafka refuses a message timeout above the transaction timeout.
                "message.timeout.ms": min(PRODUCER_TIMEOUTS["message.timeout.ms"],
                                          self.transaction_timeout_ms),
                **self.config})
            try:
                self.producer.init_transactions(self.txn_timeout_s)
                return True
            except KafkaException as exc:
                self._count_error(f"init_transactions: {error_name(exc.args[0])}")
                self.producer = None
                time.sleep(0.5)
        return False

    def _count_error(self, name: str) -> None:
        self.errors[name] = self.errors.get(name, 0) + 1

    def _run(self) -> None:
        deadline = time.monotonic() + self.duration_s
        for number in range(self.count):
            if self.stopping.is_set() or time.monotonic() >= deadline:
                break
            if self.producer is None and not self._open(deadline):
                break
            self._transaction(f"{self.process}-{number}")
            time.sleep(self.interval_s)

    def _transaction(self, txn: str) -> None:
        from confluent_kafka import KafkaException

        try:
            self.producer.begin_transaction()
        except KafkaException as exc:
            self._count_error(f"begin_transaction: {error_name(exc.args[0])}")
            self.producer = None  # a fatal state: start again with a fresh producer
            return
        self.history.record(self.process, INVOKE, TXN, txn=txn)
        written = []
        count = self.rng.randint(2, len(self.partitions))
        for partition in sorted(self.rng.sample(self.partitions, count)):
            for _ in range(self.rng.randint(1, self.records_max)):
                value = self.values.next()
                written.append(value)
                self._send(txn, value, partition)
        self.producer.flush(self.txn_timeout_s)
        with self.pending_lock:
            clean = not any(invoke.get("txn") == txn for invoke in self.pending.values())
        with self.pending_lock:
            failed = txn in self.failed_txns
        intent = "commit" if clean and not failed and self.rng.random() >= self.abort_ratio \
            else "abort"
        if intent == "abort":
            outcome, error = ABORTED, None
            try:
                self.producer.abort_transaction(self.txn_timeout_s)
            except KafkaException as exc:
                # No commit was ever asked: the coordinator can only abort it (its timeout,
                # or the next InitProducerId fencing this producer).
                error = error_name(exc.args[0])
                self._count_error(f"abort_transaction: {error}")
                self.producer = None
        else:
            outcome, error = self._commit()
        self._settle(txn)
        self.outcomes[outcome] += 1
        fields = {"error": error} if error is not None else {}
        self.history.record(self.process, OK if outcome != UNKNOWN else INFO, TXN, txn=txn,
                            outcome=outcome, intent=intent, values=written, **fields)

    def _commit(self) -> tuple[str, str | None]:
        from confluent_kafka import KafkaException

        error = None
        for _ in range(self.commit_attempts):
            try:
                self.producer.commit_transaction(self.txn_timeout_s)
                return COMMITTED, None
            except KafkaException as exc:
                kafka_error = exc.args[0]
                error = error_name(kafka_error)
                self._count_error(f"commit_transaction: {error}")
                if not kafka_error.retriable():
                    break
        # Asked and failed: it may have been committed or not. The producer starts afresh.
        if self.producer is not None:
            try:
                self.producer.abort_transaction(self.txn_timeout_s)
            except KafkaException:
                pass
        self.producer = None
        return UNKNOWN, error

    def _settle(self, txn: str) -> None:
        """Serve the last delivery reports (an abort purges what was still queued), then
        record the sends never reported as *info*."""
        if self.producer is not None:
            self.producer.poll(0)
        with self.pending_lock:
            never = [(v, e) for v, e in self.pending.items() if e.get("txn") == txn]
        for value, invoke in never:
            self._complete(value, invoke, INFO, error="never reported")

    def _send(self, txn: str, value: int, partition: int) -> None:
        key = str(partition)
        with self.pending_lock:
            invoke = self.history.record(self.process, INVOKE, SEND, key=key, value=value,
                                         partition=partition, txn=txn)
            self.pending[value] = invoke
        try:
            self.producer.produce(self.topic, value=str(value).encode(), key=key.encode(),
                                  partition=partition,
                                  on_delivery=self._delivered(value, invoke))
        except BufferError:
            self._complete(value, invoke, FAIL, error="local queue full")
        except Exception as exc:  # noqa: BLE001 - KafkaException: refused locally
            self._complete(value, invoke, FAIL, error=f"produce() raised {exc}")
        self.producer.poll(0)

    def _delivered(self, value: int, invoke: dict):
        def report(err, msg) -> None:
            if err is None:
                self._complete(value, invoke, OK, partition=msg.partition(),
                               offset=msg.offset())
            else:
                self._complete(value, invoke, classify(err, 1_000_000), error=error_name(err),
                               code=err.code(), partition=msg.partition())
        return report

    def _complete(self, value: int, invoke: dict, outcome: str, **fields: Any) -> None:
        with self.pending_lock:
            if self.pending.pop(value, None) is None:
                return
            if outcome != OK:
                self.failed_txns.add(invoke["txn"])
        self.history.record(self.process, outcome, SEND, key=invoke["key"], value=value,
                            txn=invoke["txn"], **fields)


class Consumer(threading.Thread):
    """One confluent-kafka consumer assigned ``partitions`` of ``topic`` from offset 0 (no
    group), polling until :meth:`stop` or ``duration_s``; each batch is one ``poll`` event
    (with the consumer's ``isolation``)."""

    def __init__(self, history: History, bootstrap: str, topic: str, partitions: list[int], *,
                 name: str = "c0", duration_s: float = 60.0, isolation: str = "read_uncommitted",
                 config: dict[str, Any] | None = None):
        super().__init__(name=f"consumer-{name}", daemon=True)
        from confluent_kafka import Consumer as KafkaConsumer

        self.history, self.topic, self.partitions, self.process = (
            history, topic, list(partitions), name)
        self.duration_s, self.isolation = duration_s, isolation
        self.consumer = KafkaConsumer({
            "bootstrap.servers": bootstrap, "group.id": f"seglog-harness-{name}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "isolation.level": isolation, "client.id": name, "fetch.wait.max.ms": 100,
            **CLIENT_TIMEOUTS, **(config or {})})
        self.stopping = threading.Event()
        self.polled = 0
        self.error: BaseException | None = None

    def stop(self) -> None:
        """Ask the consumer to stop (at its next poll)."""
        self.stopping.set()

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - reported by the scenario through .error
            self.error = exc
        finally:
            self.consumer.close()

    def _run(self) -> None:
        from confluent_kafka import TopicPartition

        self.consumer.assign([TopicPartition(self.topic, p, 0) for p in self.partitions])
        self.history.record(self.process, OK, ASSIGN, partitions=self.partitions)
        deadline = time.monotonic() + self.duration_s
        while not self.stopping.is_set() and time.monotonic() < deadline:
            messages = self.consumer.consume(num_messages=500, timeout=0.2)
            values: dict[str, list[list[int]]] = {}
            for message in messages:
                if message.error() is not None:
                    continue  # a leader change, a reset: the client recovers by itself
                values.setdefault(str(message.partition()), []).append(
                    [message.offset(), value_of(message, self.process)])
            if values:
                self.polled += sum(len(v) for v in values.values())
                self.history.record(self.process, OK, POLL, values=values,
                                    isolation=self.isolation)


class GroupConsumer(threading.Thread):
    """One confluent-kafka consumer in group ``group`` subscribed to ``topic``, committing
    synchronously after every non-empty batch (at-least-once); each batch is a ``poll`` event,
    each new assignment an ``assign`` event (a rebalance may rewind: that is allowed). Runs
    until :meth:`stop` or ``duration_s``; closing leaves the group after a last commit."""

    def __init__(self, history: History, bootstrap: str, topic: str, group: str, *,
                 name: str = "g0", duration_s: float = 60.0):
        super().__init__(name=f"group-consumer-{name}", daemon=True)
        from confluent_kafka import Consumer as KafkaConsumer

        self.history, self.topic, self.process, self.duration_s = (
            history, topic, name, duration_s)
        self.consumer = KafkaConsumer({
            "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "client.id": name, "fetch.wait.max.ms": 100,
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000, **CLIENT_TIMEOUTS})
        self.stopping = threading.Event()
        self.polled = 0
        self.commits: dict[str, int] = {"ok": 0, "failed": 0}
        self.last_polled: dict[int, int] = {}
        self.first_polled: dict[int, int] = {}
        #: ``{partition: next offset}`` as of the last successful commit.
        self.committed: dict[int, int] = {}
        self.error: BaseException | None = None

    def stop(self) -> None:
        """Ask the consumer to stop (at its next poll)."""
        self.stopping.set()

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - reported by the scenario through .error
            self.error = exc
        finally:
            self.consumer.close()

    def _assigned(self, _consumer: Any, partitions: list) -> None:
        self.history.record(self.process, OK, ASSIGN,
                            partitions=sorted(tp.partition for tp in partitions))

    def _run(self) -> None:
        from confluent_kafka import KafkaException

        self.consumer.subscribe([self.topic], on_assign=self._assigned)
        deadline = time.monotonic() + self.duration_s
        while not self.stopping.is_set() and time.monotonic() < deadline:
            messages = self.consumer.consume(num_messages=200, timeout=0.2)
            values: dict[str, list[list[int]]] = {}
            for message in messages:
                if message.error() is not None:
                    continue
                partition, offset = message.partition(), message.offset()
                values.setdefault(str(partition), []).append(
                    [offset, value_of(message, self.process)])
                self.first_polled.setdefault(partition, offset)
                self.last_polled[partition] = offset
            if not values:
                continue
            self.polled += sum(len(v) for v in values.values())
            self.history.record(self.process, OK, POLL, values=values)
            try:
                self.consumer.commit(asynchronous=False)
                self.commits["ok"] += 1
                self.committed = {p: o + 1 for p, o in self.last_polled.items()}
            except KafkaException:
                self.commits["failed"] += 1  # a coordinator moving: the next commit covers it


def final_read(history: History, bootstrap: str, topic: str, partitions: list[int], *,
               timeout_s: float = 30.0, settle_s: float = 10.0,
               stable_s: float = 3.0) -> dict[int, int]:
    """A fresh consumer reads every partition from offset 0 to its high watermark and records
    one ``final-read`` event per partition. Returns ``{partition: records read}``. Raises
    ``TimeoutError`` when a partition cannot be read whole within ``timeout_s`` (each
    partition has its own budget, after its settle wait).

    A new leader's high watermark stays where its follower's was until every ISR follower has
    fetched from it (Kafka's makeLeader), so right after a failover (or a follower's restart
    by the heal) it can sit below offsets consumers read or producers were acknowledged at.
    Before reading a partition this waits until its high watermark covers the highest offset
    polled or acknowledged during the run, for at most ``settle_s``, and less when the high
    watermark has not moved for ``stable_s`` (a lossy scenario, an unclean election or acks=1,
    lost them for good: the checker reports what is missing). Waiting for the polled offsets
    alone was not enough: a consumer stalled by a failover may have polled nothing recent,
    and the read then stopped at a high watermark that was still catching up (S6, seen
    2026-12-03: the read ended at 1,000 of 1,936 records, which all replicas held).
    """
    from confluent_kafka import Consumer as KafkaConsumer
    from confluent_kafka import KafkaError, TopicPartition

    consumer = KafkaConsumer({
        "bootstrap.servers": bootstrap, "group.id": "seglog-harness-final",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "isolation.level": READ_UNCOMMITTED, "client.id": "final",
        "enable.partition.eof": True, **CLIENT_TIMEOUTS})
    counts = {}
    try:
        for partition in partitions:
            tp = TopicPartition(topic, partition)
            wanted = max(_highest_polled(history, partition),
                         _highest_acknowledged(history, partition)) + 1
            high = _settled_high_watermark(consumer, tp, wanted, settle_s=settle_s,
                                           stable_s=stable_s, timeout_s=timeout_s)
            deadline = time.monotonic() + timeout_s
            records: list[list[int]] = []
            consumer.assign([TopicPartition(topic, partition, 0)])
            next_offset = 0
            while next_offset < high:
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"final read of {topic}-{partition}: at {next_offset} "
                                       f"of {high} after {timeout_s} s")
                for message in consumer.consume(num_messages=1000, timeout=0.5):
                    if message.partition() != partition:
                        continue  # left over from the previous partition's assignment
                    error = message.error()
                    if error is None:
                        records.append([message.offset(), value_of(message, "final")])
                        next_offset = message.offset() + 1
                    elif error.code() == KafkaError._PARTITION_EOF:
                        # The last offsets may hold transaction markers, which no consumer
                        # returns: the end of the partition says the read is whole.
                        next_offset = max(next_offset, message.offset())
            history.record("final", OK, FINAL_READ, partition=partition, records=records,
                           high_watermark=high, isolation=READ_UNCOMMITTED)
            counts[partition] = len(records)
    finally:
        consumer.close()
    return counts


def final_read_committed(history: History, bootstrap: str, topic: str, partitions: list[int],
                         high_watermarks: dict[int, int], *, timeout_s: float = 30.0,
                         settle_s: float = 30.0) -> dict[int, int]:
    """A fresh read_committed consumer reads every partition from offset 0 to its last stable
    offset and records one ``final-read`` event per partition with ``isolation`` =
    ``read_committed``, ``high_watermark`` = the last stable offset it read to and
    ``log_high_watermark`` = the partition's high watermark (``high_watermarks``, from the
    read_uncommitted final read). Returns ``{partition: records read}``.

    Before reading it waits, at most ``settle_s``, for the last stable offset to reach that
    high watermark: every transaction decided (a coordinator that moved resends its markers;
    one left open is aborted after ``transaction.timeout.ms``). The read ends at the
    partition's end-of-file event at or past the last stable offset (aborted records and
    markers leave no record to count offsets by). Raises ``TimeoutError`` when a partition
    cannot be read within ``timeout_s``.
    """
    from confluent_kafka import Consumer as KafkaConsumer
    from confluent_kafka import KafkaError, TopicPartition

    consumer = KafkaConsumer({
        "bootstrap.servers": bootstrap, "group.id": "seglog-harness-final-committed",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "isolation.level": READ_COMMITTED, "client.id": "final-committed",
        "enable.partition.eof": True, **CLIENT_TIMEOUTS})
    counts = {}
    try:
        for partition in partitions:
            tp = TopicPartition(topic, partition)
            wanted = high_watermarks.get(partition, 0)
            settle_until = time.monotonic() + settle_s
            while True:
                # A read_committed consumer's watermark query answers the last stable offset.
                _low, stable = consumer.get_watermark_offsets(tp, timeout=timeout_s)
                if stable >= wanted or time.monotonic() >= settle_until:
                    break
                time.sleep(0.2)
            deadline = time.monotonic() + timeout_s
            records: list[list[int]] = []
            consumer.assign([TopicPartition(topic, partition, 0)])
            at_end = stable == 0
            while not at_end:
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"read_committed final read of {topic}-{partition}: "
                                       f"{len(records)} records, no end at {stable} after "
                                       f"{timeout_s} s")
                for message in consumer.consume(num_messages=1000, timeout=0.5):
                    if message.partition() != partition:
                        continue  # left over from the previous partition's assignment
                    error = message.error()
                    if error is None:
                        records.append([message.offset(),
                                        value_of(message, "final-committed")])
                    elif error.code() == KafkaError._PARTITION_EOF \
                            and message.offset() >= stable:
                        at_end = True
            history.record("final", OK, FINAL_READ, partition=partition, records=records,
                           high_watermark=stable, log_high_watermark=wanted,
                           isolation=READ_COMMITTED)
            counts[partition] = len(records)
    finally:
        consumer.close()
    return counts


def _settled_high_watermark(consumer: Any, tp: Any, wanted: int, *, settle_s: float,
                            stable_s: float, timeout_s: float) -> int:
    """``tp``'s high watermark once it is >= ``wanted``, or has not moved for ``stable_s``,
    or ``settle_s`` passed (see :func:`final_read`)."""
    settle_until = time.monotonic() + settle_s
    last_high, last_change = None, time.monotonic()
    from confluent_kafka import KafkaError, KafkaException

    ask_again = {KafkaError._UNKNOWN_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                 KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.REPLICA_NOT_AVAILABLE,
                 KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH}
    give_up_at = time.monotonic() + timeout_s
    while True:
        try:
            _low, high = consumer.get_watermark_offsets(tp, timeout=timeout_s)
        except KafkaException as e:
            # A fresh client may not know the partition yet (its metadata arrives after the
            # first question): librdkafka answers a local UNKNOWN_PARTITION, asked again; a
            # leader that moved after the faults is asked again once the client's metadata
            # has caught up (what any Kafka client does with these codes).
            if e.args[0].code() not in ask_again or time.monotonic() >= give_up_at:
                raise
            time.sleep(0.2)
            continue
        now = time.monotonic()
        if high != last_high:
            last_high, last_change = high, now
        if high >= wanted or now >= settle_until or now - last_change >= stable_s:
            return high
        time.sleep(0.2)


def _highest_acknowledged(history: History, partition: int) -> int:
    """The highest offset of ``partition`` a send of ``history`` was acknowledged at (-1:
    none)."""
    highest = -1
    for event in history.events:
        if event.get("f") == SEND and event.get("type") == OK \
                and event.get("partition") == partition and event.get("offset") is not None:
            highest = max(highest, int(event["offset"]))
    return highest


def _highest_polled(history: History, partition: int) -> int:
    """The highest offset of ``partition`` any poll of ``history`` recorded (-1: none)."""
    highest = -1
    for event in history.events:
        if event.get("f") == POLL:
            for offset, _value in event.get("values", {}).get(str(partition), ()):
                highest = max(highest, offset)
    return highest


def read_batches(partition_dir: str | os.PathLike) -> list[list[int]]:
    """``[[base_offset, last_offset, crc], ...]`` of every batch in a partition directory's
    ``.log`` files, in base-offset order (the files of a stopped broker; a torn tail ends
    the listing)."""
    batches = []
    logs = sorted(Path(partition_dir).glob("*.log"), key=lambda p: int(p.stem))
    for path in logs:
        data = path.read_bytes()
        position = 0
        while position + fmt.RECORD_BATCH_OVERHEAD <= len(data):
            base_offset, length = struct.unpack_from(">qi", data, position)
            if length < fmt.MIN_BATCH_LENGTH or position + fmt.LOG_OVERHEAD + length > len(data):
                break
            crc = struct.unpack_from(">I", data, position + fmt.CRC_POSITION)[0]
            delta = struct.unpack_from(">i", data, position + fmt.LAST_OFFSET_DELTA_POSITION)[0]
            batches.append([base_offset, base_offset + delta, crc])
            position += fmt.LOG_OVERHEAD + length
    return batches


def read_replicas(history: History, data_dirs: dict[int, str], topic: str,
                  assignment: dict[int, list[int]]) -> None:
    """Record one ``replica`` event per replica of ``assignment`` (``{partition: [broker
    ids]}``): its batches, ``leader-epoch-checkpoint`` entries, high watermark (from
    ``replication-offset-checkpoint``, 0 when absent) and log end offset (a replica without
    its directory is recorded empty). The brokers must be stopped (their files settled)."""
    for broker_id, data_dir in sorted(data_dirs.items()):
        checkpoint = OffsetCheckpointFile(Path(data_dir) / REPLICATION_OFFSET_CHECKPOINT)
        high_watermarks = checkpoint.read()
        for partition, replicas in sorted(assignment.items()):
            if broker_id not in replicas:
                continue
            partition_dir = Path(data_dir) / partition_dir_name(topic, partition)
            batches = read_batches(partition_dir) if partition_dir.is_dir() else []
            epochs = (LeaderEpochCheckpointFile(partition_dir / LEADER_EPOCH_CHECKPOINT).read()
                      if partition_dir.is_dir() else [])
            end = batches[-1][1] + 1 if batches else 0
            history.record("replicas", OK, REPLICA, broker=broker_id, partition=partition,
                           batches=batches, epochs=[[e.epoch, e.start_offset] for e in epochs],
                           high_watermark=high_watermarks.get((topic, partition), 0),
                           log_end_offset=end)

