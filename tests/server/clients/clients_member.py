"""A consumer group member in its own process, so that a test can kill it (SIGKILL: no
LeaveGroup, no commit) or close it, and watch what it saw. Run by
:class:`clients_runner.Member`; prints one JSON object per line on stdout.

    python clients_member.py BOOTSTRAP group CLIENT GROUP TOPIC
        CLIENT is confluent, kafka-python or aiokafka; subscribes with the round-robin
        assignor (the one all three share) and prints {"event": "assigned", "partitions":
        [...]} after every rebalance; "close" on stdin closes the consumer (LeaveGroup) and
        exits 0. For confluent-kafka: TOPIC may be a comma-separated list, its events also
        carry "pairs" ("topic:partition"), SEGLOG_MEMBER_INSTANCE_ID makes it static,
        SEGLOG_MEMBER_ASSIGNOR and SEGLOG_MEMBER_METADATA_REFRESH_MS set its assignor and
        metadata refresh, and a fatal error (fenced) prints {"event": "fatal", "reason": ...}
        and exits 4.

    python clients_member.py BOOTSTRAP delivery GROUP TOPIC ORDER CRASH_AT HANDLED_FILE
        The article's delivery example with confluent-kafka: read the partition in batches of
        five; ORDER "commit-after" processes a batch then commits it, "commit-before" commits
        then processes. Processing appends the value to HANDLED_FILE; on the record CRASH_AT,
        the first time (a marker file beside HANDLED_FILE), the process SIGKILLs itself, between
        processing and commit (or after the commit that claimed the batch). Exits 0 at the end
        of the partition, printing {"event": "done"}.

Every wait is bounded by DEADLINE_S; past it the member prints {"event": "timeout"} and exits 3.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

#: Nothing a member does takes this long; past it the member gives up (exit 3).
DEADLINE_S = 60.0
SESSION_TIMEOUT_MS = int(os.environ.get("SEGLOG_MEMBER_SESSION_TIMEOUT_MS", "1500"))
HEARTBEAT_INTERVAL_MS = int(os.environ.get("SEGLOG_MEMBER_HEARTBEAT_INTERVAL_MS", "300"))
BATCH = 5
#: ``group.instance.id`` of a confluent-kafka group member (static membership), if set.
INSTANCE_ID = os.environ.get("SEGLOG_MEMBER_INSTANCE_ID", "")
#: The confluent-kafka member's assignor, and how often it refreshes metadata (new partitions).
ASSIGNOR = os.environ.get("SEGLOG_MEMBER_ASSIGNOR", "roundrobin")
METADATA_REFRESH_MS = int(os.environ.get("SEGLOG_MEMBER_METADATA_REFRESH_MS", "300000"))


def say(**event) -> None:
    print(json.dumps(event), flush=True)


def give_up() -> None:
    say(event="timeout")
    os._exit(3)


def stdin_closed_flag() -> threading.Event:
    """An event set when "close" (or EOF) arrives on stdin."""
    flag = threading.Event()

    def read():
        for line in sys.stdin:
            if line.strip() == "close":
                break
        flag.set()

    threading.Thread(target=read, daemon=True).start()
    return flag


def group_confluent(bootstrap: str, group: str, topic: str) -> None:
    from confluent_kafka import Consumer, KafkaError
    conf = {"bootstrap.servers": bootstrap, "group.id": group,
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            "partition.assignment.strategy": ASSIGNOR,
            "topic.metadata.refresh.interval.ms": METADATA_REFRESH_MS,
            "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    if INSTANCE_ID:
        conf["group.instance.id"] = INSTANCE_ID
    c = Consumer(conf)
    c.subscribe(topic.split(","), on_assign=lambda _c, tps: say(
        event="assigned", partitions=sorted(tp.partition for tp in tps),
        pairs=sorted(f"{tp.topic}:{tp.partition}" for tp in tps)))
    close = stdin_closed_flag()
    deadline = time.monotonic() + DEADLINE_S
    while not close.is_set():
        if time.monotonic() > deadline:
            give_up()
        msg = c.poll(0.05)
        if msg is not None and msg.error() is not None:
            err = msg.error()
            if err.code() == KafkaError._FATAL:
                say(event="fatal", reason=err.str())
                os._exit(4)  # a fatal consumer can only be dropped
            say(event="error", code=err.name())
    c.close()
    say(event="closed")


def group_kafka_python(bootstrap: str, group: str, topic: str) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            pass

        def on_partitions_assigned(self, assigned):
            say(event="assigned", partitions=sorted(tp.partition for tp in assigned))

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                      session_timeout_ms=SESSION_TIMEOUT_MS,
                      heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
                      partition_assignment_strategy=[RoundRobinPartitionAssignor],
                      enable_auto_commit=False, auto_offset_reset="earliest")
    c.subscribe([topic], listener=Listener())
    close = stdin_closed_flag()
    deadline = time.monotonic() + DEADLINE_S
    while not close.is_set():
        if time.monotonic() > deadline:
            give_up()
        c.poll(timeout_ms=50)
    c.close()
    say(event="closed")


def group_aiokafka(bootstrap: str, group: str, topic: str) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):
            pass

        async def on_partitions_assigned(self, assigned):
            say(event="assigned", partitions=sorted(tp.partition for tp in assigned))

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             session_timeout_ms=SESSION_TIMEOUT_MS,
                             heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
                             partition_assignment_strategy=(RoundRobinPartitionAssignor,),
                             enable_auto_commit=False, auto_offset_reset="earliest")
        await c.start()
        c.subscribe([topic], listener=Listener())
        close = stdin_closed_flag()
        deadline = time.monotonic() + DEADLINE_S
        while not close.is_set():
            if time.monotonic() > deadline:
                give_up()
            await c.getmany(timeout_ms=50)
        await c.stop()
        say(event="closed")

    asyncio.run(run())


def delivery(bootstrap: str, group: str, topic: str, order: str, crash_at: str,
             handled_file: str) -> None:
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    marker = handled_file + ".crashed"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "session.timeout.ms": SESSION_TIMEOUT_MS,
                  "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "enable.partition.eof": True})
    c.subscribe([topic])
    deadline = time.monotonic() + DEADLINE_S

    def process(msg):
        value = msg.value().decode()
        if value == crash_at and not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)  # died while handling this record
        with open(handled_file, "a") as f:
            f.write(value + "\n")

    def commit(last):
        c.commit(offsets=[TopicPartition(topic, last.partition(), last.offset() + 1)],
                 asynchronous=False)

    at_end = False
    while not at_end:
        batch = []
        while len(batch) < BATCH and not at_end:
            if time.monotonic() > deadline:
                give_up()
            msg = c.poll(0.1)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end = True
                    continue
                raise RuntimeError(str(msg.error()))
            batch.append(msg)
        if not batch:
            break
        if order == "commit-before":
            commit(batch[-1])
        for msg in batch:
            process(msg)
        if order == "commit-after":
            commit(batch[-1])
    c.close()
    say(event="done")


def main(argv: list[str]) -> None:
    bootstrap, mode, *rest = argv
    if mode == "group":
        client, group, topic = rest
        {"confluent": group_confluent, "kafka-python": group_kafka_python,
         "aiokafka": group_aiokafka}[client](bootstrap, group, topic)
    elif mode == "delivery":
        delivery(bootstrap, *rest)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
