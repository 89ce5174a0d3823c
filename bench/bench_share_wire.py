"""Share groups on the wire: librdkafka ShareConsumers against ``seglog serve`` and Kafka 4.4.

Not a test. For each broker (``seglog serve`` as a subprocess, so its CPU time is its own, and
a real Kafka 4.4 KRaft broker when its jars are cached): one topic of one partition, ``--records``
records of ``--record-bytes`` bytes produced once; then, per round and per consumer count
(``--consumers 1,4``), a new share group (``share.auto.offset.reset=earliest`` set through
IncrementalAlterConfigs on the GROUP resource) whose confluent-kafka ``ShareConsumer``s (each a
process of its own, implicit acknowledgement) consume until every record was delivered once,
then close (which sends the last acknowledgements).

Reported per broker and consumer count, min/median/max over ``--rounds`` rounds:

- ``records/s``: distinct records / (first record seen by any consumer .. the last
  consumer's ``commit_sync()`` (the last acknowledgements, answered) and close done);
- ``CPU s/M``: the broker's user + system CPU seconds (``/proc/<pid>/stat``) from the
  consumers' start to their close, per million records.

    PYTHONPATH=src python bench/bench_share_wire.py [--records 100000] [--rounds 3]
        [--batch-records 10] [--consumers 1,4] [--brokers seglog,kafka] [--round-timeout-s 120]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

from seglog.bench.broker import SeglogServe, process_cpu_s
from seglog.bench.kafka import KafkaBroker, find_kafka

TOPIC = "q"
#: How long a consumer waits for more once the total is reached by others (seconds).
POLL_S = 0.5


def _produce(bootstrap: str, records: int, record_bytes: int, batch_records: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.size": 1 << 20, "acks": "all",
                         "batch.num.messages": batch_records})
    value = b"x" * record_bytes
    for _ in range(records):
        while True:
            try:
                producer.produce(TOPIC, value)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) != 0:
        raise RuntimeError("produce did not finish")


def _group_earliest(bootstrap: str, group: str) -> None:
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                       ConfigResource, ResourceType)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest",
                    incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def _consume(bootstrap: str, group: str, total, target: int, deadline: float, out) -> None:
    """One ShareConsumer process: poll until ``total`` (shared) reaches ``target`` or
    ``deadline`` (time.time()) passes; report (count, first_t, last_t)."""
    from confluent_kafka import ShareConsumer
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.subscribe([TOPIC])
    count, first, offsets = 0, None, []
    while total.value < target and time.time() < deadline:
        messages = consumer.poll(POLL_S)
        got = 0
        for m in messages:
            if m.error() is None:
                got += 1
                offsets.append(m.offset())
        if got:
            first = first if first is not None else time.time()
            count += got
            with total.get_lock():
                total.value += got
    # librdkafka's close() does not acknowledge the records of the last poll (Kafka 4.4 then
    # delivers them again, as seglog does): commit them first, and wait for the answers.
    consumer.commit_sync(30)
    consumer.close()
    out.put((count, first, time.time(), offsets))


def _round(bootstrap: str, pid: int, group: str, consumers: int, records: int,
           timeout_s: float) -> tuple[float, float, int, int]:
    """(records/s, broker CPU s per million distinct records, records delivered (with
    redeliveries), distinct offsets delivered)."""
    _group_earliest(bootstrap, group)
    ctx = multiprocessing.get_context("spawn")
    total = ctx.Value("q", 0)
    out = ctx.Queue()
    deadline = time.time() + timeout_s
    cpu0 = process_cpu_s(pid)
    procs = [ctx.Process(target=_consume, args=(bootstrap, group, total, records, deadline, out))
             for _ in range(consumers)]
    for p in procs:
        p.start()
    results = [out.get(timeout=timeout_s + 60) for _ in procs]
    for p in procs:
        p.join(30)
        if p.is_alive():
            p.kill()
    cpu = process_cpu_s(pid) - cpu0
    delivered = sum(r[0] for r in results)
    unique = len({o for r in results for o in r[3]})
    firsts = [r[1] for r in results if r[1] is not None]
    span = (max(r[2] for r in results) - min(firsts)) if firsts else float("inf")
    rate = unique / span if span > 0 else float("nan")
    return rate, cpu / unique * 1e6 if unique else float("nan"), delivered, unique


def _run_broker(name: str, bootstrap: str, pid: int, args, rows: list) -> None:
    t0 = time.perf_counter()
    _produce(bootstrap, args.records, args.record_bytes, args.batch_records)
    print(f"{name}: produced {args.records} in {time.perf_counter() - t0:.1f} s", flush=True)
    for consumers in args.consumers:
        rates, cpus = [], []
        for r in range(args.rounds):
            group = f"g-{consumers}-{r}"
            rate, cpu, delivered, unique = _round(bootstrap, pid, group, consumers,
                                                  args.records, args.round_timeout_s)
            print(f"  {name} consumers={consumers} round={r}: {rate:,.0f} records/s, "
                  f"{cpu:.1f} CPU s/M, delivered {delivered} ({unique} distinct)", flush=True)
            if unique < args.records:
                print(f"  {name}: round {r} delivered {unique} < {args.records}", flush=True)
            rates.append(rate)
            cpus.append(cpu)
        rows.append((name, consumers, rates, cpus))


def _spread(values: list[float], fmt: str) -> str:
    return " / ".join(format(v, fmt) for v in (min(values), statistics.median(values),
                                                 max(values)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-records", type=int, default=10,
                        help="records per produced batch (librdkafka's batch.num.messages)")
    parser.add_argument("--consumers", default="1,4")
    parser.add_argument("--brokers", default="seglog,kafka")
    parser.add_argument("--round-timeout-s", type=float, default=120.0)
    parser.add_argument("--pause", action="store_true",
                        help="print the seglog pid and wait for Enter before consuming "
                             "(to attach py-spy)")
    args = parser.parse_args(argv)
    args.consumers = [int(c) for c in args.consumers.split(",")]
    brokers = args.brokers.split(",")
    rows: list = []
    with tempfile.TemporaryDirectory(prefix="bench-share-wire-") as tmp:
        if "seglog" in brokers:
            serve = SeglogServe(Path(tmp) / "seglog",
                                config={"offsets.topic.num.partitions": "1"})
            serve.start()
            try:
                if args.pause:
                    input(f"seglog serve pid {serve.pid}; Enter to go on ")
                _run_broker("seglog", serve.bootstrap, serve.pid, args, rows)
            finally:
                serve.stop()
        if "kafka" in brokers:
            ref, why = find_kafka()
            if ref is None:
                print(f"kafka: skipped ({why})")
            else:
                kafka = KafkaBroker(ref, Path(tmp) / "kafka", extra_properties={
                    "share.coordinator.state.topic.min.isr": 1,
                    "share.coordinator.state.topic.replication.factor": 1})
                kafka.format()
                kafka.start()
                try:
                    _run_broker("kafka", kafka.bootstrap, kafka.pid, args, rows)
                finally:
                    kafka.stop()
    print(f"\n{args.records} records of {args.record_bytes} bytes in batches of "
          f"{args.batch_records}, {args.rounds} rounds "
          "(min / median / max)")
    print("| broker | consumers | records/s | broker CPU s per M records |")
    print("|---|---:|---:|---:|")
    for name, consumers, rates, cpus in rows:
        print(f"| {name} | {consumers} | {_spread(rates, ',.0f')} | {_spread(cpus, '.1f')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
