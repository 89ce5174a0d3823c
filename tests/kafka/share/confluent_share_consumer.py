"""confluent-kafka's ``ShareConsumer`` run by a script: the twin of
``java/ShareScenarioConsumer.java`` (same arguments, rules, stdin control and output lines;
see that file and ``share_driver.py``). Run as ``python confluent_share_consumer.py bootstrap
group topic member run_seconds [rule ...]``."""

from __future__ import annotations

import os
import sys
import threading
import time

from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

POLL_S = 0.2
COMMIT_S = 30.0


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _mod(value: str) -> tuple[int, int]:
    m, r = value.split(":")
    return int(m), int(r)


def main(argv: list[str]) -> int:
    """Run one consumer to the end of its script."""
    bootstrap, group, topic, member, run_s = argv[:5]
    until = time.monotonic() + float(run_s)
    release_below, hold_after, max_poll, pause_ms = 0, -1, -1, 0
    release_mod: tuple[int, int] | None = None
    reject_mod: tuple[int, int] | None = None
    for rule in argv[5:]:
        key, _, value = rule.partition("=")
        if key == "release-below":
            release_below = int(value)
        elif key == "release-mod":
            release_mod = _mod(value)
        elif key == "reject-mod":
            reject_mod = _mod(value)
        elif key == "hold-after":
            hold_after = int(value)
        elif key == "max-poll":
            max_poll = int(value)
        elif key == "pause-ms":
            pause_ms = int(value)
        else:
            raise SystemExit(f"unknown rule {rule}")
    stop = threading.Event()

    def control() -> None:
        for line in sys.stdin:
            if line.strip() == "STOP":
                break
        stop.set()

    threading.Thread(target=control, daemon=True).start()
    config = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": member,
              "share.acknowledgement.mode": "explicit"}
    if max_poll > 0:
        config["max.poll.records"] = max_poll
    consumer = ShareConsumer(config)
    consumer.subscribe([topic])
    _out(f"READY {member}")
    delivered = 0
    while not stop.is_set() and time.monotonic() < until:
        try:
            messages = consumer.poll(POLL_S)
        except KafkaException as exc:
            _out(f"ERROR {member} KafkaException: {exc}")
            time.sleep(0.1)
            continue
        records = []
        for message in messages:
            if message.error() is not None:
                _out(f"ERROR {member} {message.error()}")
                continue
            records.append(message)
        if not records:
            continue
        poll_ms = int(time.time() * 1000)
        if 0 <= hold_after <= delivered:
            for m in records:
                _out(f"DELIVERY {poll_ms} {member} {m.topic()} {m.partition()} {m.offset()} "
                     f"{m.delivery_count()} HOLD {poll_ms} -")
            stop.wait()
            _out(f"HALTED {member}")
            os._exit(0)
        lines = []
        for m in records:
            count = m.delivery_count()
            count = -1 if count is None else count
            ack, name = AcknowledgeType.ACCEPT, "ACCEPT"
            if reject_mod and m.offset() % reject_mod[0] == reject_mod[1]:
                ack, name = AcknowledgeType.REJECT, "REJECT"
            elif release_mod and m.offset() % release_mod[0] == release_mod[1]:
                ack, name = AcknowledgeType.RELEASE, "RELEASE"
            elif count < release_below:
                ack, name = AcknowledgeType.RELEASE, "RELEASE"
            consumer.acknowledge(m, ack)
            lines.append((m.topic(), m.partition(), m.offset(), count, name))
            delivered += 1
        results: dict[tuple[str, int], str] = {}
        try:
            done = consumer.commit_sync(COMMIT_S)
            for tp, error in (done or {}).items():
                results[(tp.topic, tp.partition)] = "ok" if error is None else type(error).__name__
        except KafkaException as exc:
            _out(f"ERROR {member} KafkaException: {exc}")
        commit_ms = int(time.time() * 1000)
        for topic_name, partition, offset, count, name in lines:
            result = results.get((topic_name, partition), "none")
            _out(f"DELIVERY {poll_ms} {member} {topic_name} {partition} {offset} {count} {name} "
                 f"{commit_ms} {result}")
        if pause_ms:
            time.sleep(pause_ms / 1000)
    try:
        consumer.close()
    except KafkaException as exc:
        _out(f"ERROR {member} KafkaException: {exc}")
    _out(f"CLOSED {member}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
