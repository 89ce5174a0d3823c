"""kill -9 under produce load, then restart (issue 11, "Behaviour under bad input and load").

A ``seglog serve`` process (``python -m seglog serve``, flush per message:
``log.flush.interval.messages=1``) takes an idempotent confluent-kafka producer's acks=all
load on three partitions; it is SIGKILLed (by its pid) in the middle of it, a torn batch is
appended to one partition's active segment (a write cut short by the crash), and the broker is
started again on the same data directory and port while the producer keeps going (librdkafka
reconnects and retries the requests whose answers the kill lost).

Checked, on both storage backends:

- what the killed broker left opens as Kafka's Log recovers it (no clean-shutdown marker, the
  active segments revalidated, exactly the torn bytes cut) and holds every record acknowledged
  before the kill (a copy of the directory is opened in this process while the broker
  restarts on the original);
- after the restart every record the producer got an acknowledgement for is stored exactly
  once, at the offset its acknowledgement named, in the order produced per partition; and
  since the producer is idempotent and every send was eventually acknowledged, every record
  produced is stored exactly once: the retried batches the dead broker had already written
  were recognised as duplicates (producer state rebuilt from the log).

Every wait is bounded (the producer's loop by a record count and deadlines, flushes by
timeouts, the broker's start by ``SeglogServe.start``'s ready timeout).
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from seglog.bench import broker as bench
from seglog.store import Store

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402

pytestmark = pytest.mark.clients

TOPIC = "load"
PARTITIONS = 3
#: The kill comes once KILL_AFTER_ACKED records are acknowledged; the producer sends
#: AFTER_KILL more after it (while the broker is down and restarting), and never more than
#: RECORDS_MAX in all (a bound on its loop).
KILL_AFTER_ACKED = 800
AFTER_KILL = 1_500
RECORDS_MAX = 100_000
#: The producer's pace: a burst of this many records, then a short sleep, so that the load
#: spans the kill, the down time and the restart.
BURST = 20
BURST_PAUSE_S = 0.01
WAIT_S = 60.0
#: The bytes of a batch header a crash left behind: its size field promises more than follows.
TORN_BYTES = 37


def _value(seq: int) -> bytes:
    return b"%08d" % seq


class LoadProducer(threading.Thread):
    """An idempotent acks=all producer sending numbered records round-robin to the
    partitions until AFTER_KILL past :attr:`killed`; ``acked[seq] = (partition, offset)``
    from its delivery reports."""

    def __init__(self, bootstrap: str):
        super().__init__(daemon=True)
        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 2, "message.timeout.ms": int(WAIT_S * 1000),
            "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200,
            "retry.backoff.ms": 20, "retry.backoff.max.ms": 200})
        self.acked: dict[int, tuple[int, int]] = {}
        self.failed: list[str] = []
        self.fatal: str | None = None
        self.sent = 0
        self.killed = threading.Event()
        self.left_unflushed: int | None = None

    def _report(self, err, msg) -> None:
        seq = int(msg.value())
        if err is None:
            self.acked[seq] = (msg.partition(), msg.offset())
        else:
            self.failed.append(f"{seq}: {err}")

    def run(self) -> None:
        deadline = time.monotonic() + WAIT_S
        try:
            after_kill = 0
            for seq in range(RECORDS_MAX):
                if self.killed.is_set():
                    after_kill += 1
                    if after_kill > AFTER_KILL:
                        break
                while True:
                    try:
                        self.producer.produce(TOPIC, _value(seq), partition=seq % PARTITIONS,
                                              on_delivery=self._report)
                        break
                    except BufferError:
                        self.producer.poll(0.01)
                        if time.monotonic() > deadline:
                            return
                self.sent = seq + 1
                self.producer.poll(0)
                if seq % BURST == BURST - 1:
                    time.sleep(BURST_PAUSE_S)
            self.left_unflushed = self.producer.flush(max(1.0, deadline - time.monotonic()))
        except Exception as exc:  # noqa: BLE001 - the test asserts on it
            self.fatal = f"{type(exc).__name__}: {exc}"


def _create_topic(bootstrap: str) -> str:
    """Create the topic; its ``flush.messages`` as the broker describes it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)],
                                  operation_timeout=30, request_timeout=30)
    futures[TOPIC].result(timeout=30)
    resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    described = admin.describe_configs([resource], request_timeout=30)[resource].result(30)
    return described["flush.messages"].value


def _wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _active_segment(data_dir: Path, partition: int) -> Path:
    return max((data_dir / f"{TOPIC}-{partition}").glob("*.log"), key=lambda p: int(p.stem))


def _stored(data_dir: Path, backend: str) -> tuple[dict[int, list[tuple[int, int]]], dict]:
    """``{partition: [(offset, seq), ...]}`` of what ``data_dir`` holds (CRCs checked), and
    each partition's recovery report, read by opening it in this process."""
    with Store(data_dir, backend=backend) as store:
        topic = store.topic(TOPIC)
        stored = {p: [(r.offset, int(r.value)) for r in topic.log(p).records()]
                  for p in range(PARTITIONS)}
        reports = {p: topic.log(p).recovery_report for p in range(PARTITIONS)}
    return stored, reports


@pytest.mark.parametrize("backend", ["native", "pure"])
def test_kill_9_under_idempotent_acks_all_load_then_restart(tmp_path, backend):
    data_dir = tmp_path / "data"
    config = {"log.flush.interval.messages": "1", "offsets.topic.num.partitions": "1",
              "transaction.state.log.num.partitions": "1"}
    first = bench.SeglogServe(data_dir, backend=backend, config=config)
    second = None
    load = None
    try:
        first.start()
        assert _create_topic(first.bootstrap) == "1"  # log.flush.interval.messages
        load = LoadProducer(first.bootstrap)
        load.start()
        _wait_for(lambda: len(load.acked) >= KILL_AFTER_ACKED or not load.is_alive(), WAIT_S,
                  f"{KILL_AFTER_ACKED} acknowledgements")
        first.kill()  # SIGKILL by pid, mid-load: the producer goes on sending
        load.killed.set()
        acked_before_kill = dict(load.acked)
        assert len(acked_before_kill) >= KILL_AFTER_ACKED
        assert not (data_dir / ".kafka_cleanshutdown").exists()

        # A crash mid-write: the start of a batch (its size says more follows) at the end of
        # partition 0's active segment.
        segment = _active_segment(data_dir, 0)
        torn_size = segment.stat().st_size
        with open(segment, "rb") as f:
            torn = f.read(TORN_BYTES)
        with open(segment, "ab") as f:
            f.write(torn)
        crashed = tmp_path / "crashed"
        shutil.copytree(data_dir, crashed)

        second = bench.SeglogServe(data_dir, backend=backend, config=config, port=first.port)
        second.start()
        load.join(WAIT_S + 10)
        assert not load.is_alive(), "the producer did not finish"
        assert load.fatal is None, load.fatal
        assert load.failed == [], load.failed[:5]
        assert load.left_unflushed == 0 and load.sent >= len(acked_before_kill) + AFTER_KILL
        assert second.stop() == 0, second.log_tail()
    finally:
        if load is not None and load.is_alive():
            load.join(WAIT_S + 10)
        first.kill()
        if second is not None:
            second.kill()

    # What the killed broker left, recovered as the Log recovers it.
    at_kill, reports = _stored(crashed, backend)
    for partition, report in reports.items():
        assert not report.clean_shutdown
        assert report.recovered_segments, partition
    assert [t.truncated_bytes for t in reports[0].truncations] == [TORN_BYTES]
    assert reports[1].truncations == reports[2].truncations == []
    assert _active_segment(crashed, 0).stat().st_size == torn_size
    kept = {seq: (partition, offset) for partition, rows in at_kill.items()
            for offset, seq in rows}
    for seq, where in acked_before_kill.items():
        assert kept.get(seq) == where, f"record {seq} acknowledged at {where} before the kill"

    # After the restart: each record once, in order, where its acknowledgement said.
    final, _ = _stored(data_dir, backend)
    stored_at: dict[int, tuple[int, int]] = {}
    for partition, rows in final.items():
        seqs = [seq for _, seq in rows]
        assert seqs == sorted(set(seqs)), f"partition {partition}: duplicates or out of order"
        assert [offset for offset, _ in rows] == list(range(len(rows)))
        assert all(seq % PARTITIONS == partition for seq in seqs)
        stored_at.update((seq, (partition, offset)) for offset, seq in rows)
    assert stored_at == load.acked
    assert sorted(stored_at) == list(range(load.sent))
