"""Transactions v2 (KIP-890) against ``seglog serve``: Kafka 4.4's Java producer negotiates
``transaction.version`` 2 (ApiVersions finalizes it), sends no AddPartitionsToTxn (the
partition leader adds the partition when it verifies the first batch: Produce v12+), ends
each transaction with EndTxn v5, and the coordinator bumps the producer epoch at every
commit and abort: the markers carry the new epoch, the data batches of the next
transaction too. A read_committed consumer sees exactly the committed records, across a
restart of the broker.

The Java producer is ``java/TxnSteps.java`` (compiled with ``javac`` at test time; skips
without java, the Kafka jars or a JDK, fails under ``SEGLOG_REQUIRE_KAFKA=1``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CTP

from seglog.bench.kafka import find_kafka
from seglog.coordinator import txn_schema

_REF, _WHY = find_kafka()
_REQUIRED = os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0")
pytestmark = [pytest.mark.kafka, pytest.mark.clients,
              pytest.mark.skipif(_REF is None and not _REQUIRED, reason=_WHY)]

SOURCE = Path(__file__).resolve().parent / "java" / "TxnSteps.java"
RUN_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def txn_steps(tmp_path_factory):
    """``run(bootstrap, topic, transactional_id, *steps)`` -> the Java producer's lines."""
    assert _REF is not None, _WHY
    javac = shutil.which("javac") or str(Path(_REF.java).with_name("javac"))
    if not Path(javac).exists() and shutil.which(javac) is None:
        why = "needs javac (a JDK) to compile tests/server/java/TxnSteps.java"
        if _REQUIRED:
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but it {why}", pytrace=False)
        pytest.skip(why)
    out_dir = tmp_path_factory.mktemp("txnsteps")
    subprocess.run([javac, "-cp", _REF.classpath, "-d", str(out_dir), str(SOURCE)],
                   check=True, timeout=RUN_TIMEOUT_S, capture_output=True)

    def run(bootstrap: str, topic: str, transactional_id: str, *steps: str) -> list[str]:
        done = subprocess.run(
            [_REF.java, "-cp", f"{out_dir}:{_REF.classpath}", "TxnSteps", bootstrap, topic,
             transactional_id, *steps], timeout=RUN_TIMEOUT_S, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        return done.stdout.split()

    return run


def _batches(log) -> list:
    """Every batch header of ``log`` (data and control), in offset order."""
    found = []
    offset = log.start_offset
    for _ in range(10_000):  # bounded: each round moves past at least one batch
        if offset >= log.end_offset:
            break
        result = log.read(offset, 1 << 20, max_offset=log.end_offset)
        batches = list(log.backend.iter_batches(result.buffer))
        if not batches:
            break
        found.extend((b.producer_epoch, b.is_control, b.is_transactional, b.record_count)
                     for b in batches)
        offset = batches[-1].next_offset
    return found


def _read_committed(bootstrap: str, topic: str, partitions: int, expected: int) -> list[str]:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "v2-reader",
                       "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                       "enable.auto.commit": False})
    values: list[str] = []
    try:
        reader.assign([CTP(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 20
        idle_until = None
        while time.monotonic() < deadline:
            message = reader.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value().decode())
            if len(values) >= expected:
                # a little longer: a record beyond the expected ones must show up now
                idle_until = idle_until or time.monotonic() + 1.0
                if time.monotonic() >= idle_until:
                    break
    finally:
        reader.close()
    return values


def _committed(transactional_id: str, steps: list[str], step_base: int = 3) -> list[str]:
    return [f"{transactional_id}-{step_base + i}-{j}-c" for i, step in enumerate(steps)
            if step[0] == "c" for j in range(int(step[1:]))]


def test_java_producer_tv2_epoch_bump_across_restart(broker_factory, tmp_path, txn_steps):
    data = tmp_path / "data"
    broker = broker_factory(data_dir=data)
    broker.store.create_topic("v2", 2)
    first = ["c3", "a2", "c4"]
    assert txn_steps(broker.bootstrap, "v2", "tx2", *first) == [
        "commit", "3", "abort", "2", "commit", "4", "done"]
    # The producer sent no AddPartitionsToTxn: every Ongoing state was written by the
    # partition leaders' add (client transaction version 2 in a version 1 record).
    state_log = broker.store.log(("__transaction_state", 0))
    ongoing = [txn_schema.decode_value(r.value) for r in state_log.records(
        state_log.start_offset, max_offset=state_log.end_offset) if r.value is not None]
    ongoing = [(v.client_transaction_version, v.version) for v in ongoing
               if v.status == txn_schema.ONGOING]
    assert ongoing and set(ongoing) == {(2, 1)}
    description = broker.store.transaction_coordinator().describe("tx2")
    # InitProducerId gives epoch 0, each of the three EndTxn v5 bumps it.
    assert (description.state, description.producer_epoch) == ("CompleteCommit", 3)
    # Every transaction's data batches carry its epoch, its markers the next one.
    for partition in range(2):
        headers = _batches(broker.store.log(("v2", partition)))
        epochs = [(epoch, control) for epoch, control, transactional, _n in headers
                  if transactional]
        markers = [epoch for epoch, control in epochs if control]
        assert markers == [1, 2, 3]
        data_epochs = sorted({epoch for epoch, control in epochs if not control})
        assert data_epochs == [0, 1, 2]
    broker.stop()

    broker = broker_factory(data_dir=data)
    assert broker.store.transaction_coordinator().describe("tx2").producer_epoch == 3
    second = ["a1", "c2"]
    assert txn_steps(broker.bootstrap, "v2", "tx2", *second) == [
        "abort", "1", "commit", "2", "done"]
    # A new InitProducerId bumps to 4, the two EndTxn to 6.
    assert broker.store.transaction_coordinator().describe("tx2").producer_epoch == 6
    expected = _committed("tx2", first) + _committed("tx2", second)
    values = _read_committed(broker.bootstrap, "v2", 2, len(expected))
    assert sorted(values) == sorted(expected)
