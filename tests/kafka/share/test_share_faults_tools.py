"""Share groups through a broker crash and through Kafka 4.4's ``kafka-share-groups`` tool,
against Kafka 4.4 and ``seglog serve`` (issue 25, "Tests"; see ``test_share_scenarios.py``).

- kill -9 in the middle: two share consumers accept records (10 per poll, then 50 ms of
  "work"); once 100 acknowledgements are confirmed the broker process is SIGKILLed (by pid)
  and started again on the same data dir and port, while a producer adds more records. The
  checker: every record has a confirmed ACCEPT, none is lost, and no record is delivered
  again after its ACCEPT was confirmed (a redelivery is only of records whose
  acknowledgement the crash lost). Delivery counts may start over for such records: Kafka
  persists a record's state on acknowledgement, not on acquisition.
- the tool (``org.apache.kafka.tools.consumer.group.ShareGroupCommand``): ``--describe
  --members`` while a consumer runs; ``--list``, ``--describe --offsets`` once every record is
  accepted (lag 0); ``--reset-offsets --to-earliest --execute`` brings
  every record back (delivered again with delivery count 1); ``--delete-offsets`` and
  ``--delete`` remove the state and the group.
"""

from __future__ import annotations

import re

import pytest

from share_driver import (
    CLIENTS, ShareConsumerProcess, SlowProducer, check_accepted_exactly_once,
    check_counts_increase, check_no_delivery_after_ack, confirmed_accepts,
    confluent_share_missing, history, wait_until)

pytestmark = [pytest.mark.kafka, pytest.mark.kafka_share]

RUN_S = 240
WAIT_S = 120.0
SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


def _context(consumers):
    return lambda: {c.member: c.tail() for c in consumers}


@pytest.mark.parametrize("client", CLIENTS)
def test_broker_kill_in_the_middle(share_broker, client, request):
    if client == "confluent" and confluent_share_missing():
        pytest.skip(confluent_share_missing())
    # 150 records at first; once 100 are accepted, 450 more are produced slowly while the
    # broker is killed and restarted: the kill always comes with records still to come (the
    # clients poll in batches, so how many are acquired and unacknowledged at the kill varies).
    first, records, kill_after = 150, 600, 100
    topic = share_broker.new_topic("share-kill", records=first)
    group = share_broker.new_group("share-kill")
    java = request.getfixturevalue("share_java") if client == "java" else None
    consumers = [ShareConsumerProcess(client, java, share_broker.bootstrap, group, topic,
                                      f"k{i}", run_s=RUN_S,
                                      rules=["max-poll=10", "pause-ms=50"])
                 for i in range(2)]
    wanted = [(0, o) for o in range(records)]
    producer = SlowProducer(share_broker.bootstrap, topic, first, records - first, WAIT_S)

    def accepted():
        return set(confirmed_accepts(d for c in consumers for d in c.deliveries()))
    try:
        wait_until(lambda: len(accepted()) >= kill_after, f"{kill_after} accepted", WAIT_S,
                   _context(consumers))
        producer.start()
        share_broker.kill_and_restart()
        wait_until(lambda: set(wanted) <= accepted(), "every record accepted after the restart",
                   WAIT_S, _context(consumers))
    finally:
        for c in consumers:
            c.stop()
        producer.join(WAIT_S)
    assert producer.errors == [] and producer.unflushed == 0, producer.errors[:5]
    h = history(consumers)
    assert set(wanted) <= set(confirmed_accepts(h)), "a record was lost"
    assert check_no_delivery_after_ack(h) == []
    # Exactly once among the confirmed ACCEPTs: a confirmed one was persisted, so the record
    # cannot be acquired again.
    assert check_accepted_exactly_once(h, wanted) == []


# --- kafka-share-groups ------------------------------------------------------------------------

def _tool(kafka_ref, share_broker, tmp_path, *args):
    done = kafka_ref.run_tool(SHARE_GROUP_COMMAND,
                              ["--bootstrap-server", share_broker.bootstrap, *args],
                              run_dir=tmp_path, timeout_s=120)
    return done.returncode, done.stdout, done.stderr


def _rows(text: str, header: str) -> list[list[str]]:
    """The whitespace-split rows under the table header line starting with ``header``."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.split()[:1] == [header]:
            return [row.split() for row in lines[i + 1:] if row.strip()]
    return []


def test_kafka_share_groups_tool(share_broker, kafka_ref, tmp_path):
    if confluent_share_missing():
        pytest.skip(confluent_share_missing())
    records = 10
    topic = share_broker.new_topic("share-tool", records=records)
    group = share_broker.new_group("share-tool")
    wanted = [(0, o) for o in range(records)]

    def tool(*args):
        return _tool(kafka_ref, share_broker, tmp_path, *args)

    first = ShareConsumerProcess("confluent", None, share_broker.bootstrap, group, topic,
                                 "tool-a", run_s=180)
    try:
        wait_until(lambda: set(wanted) <= set(confirmed_accepts(first.deliveries())),
                   "every record accepted", WAIT_S, _context([first]))
        code, out, err = tool("--describe", "--group", group, "--members")
        assert code == 0, (out, err)
        members = _rows(out, "GROUP")
        assert len(members) == 1, out
        assert members[0][0] == group and "tool-a" in members[0], out
        assert f"{topic}:0" in members[0][-1], out
    finally:
        first.stop()

    def state():
        code, out, err = tool("--describe", "--group", group, "--state")
        rows = _rows(out, "GROUP")
        return rows[0][-2] if code == 0 and rows else (code, out, err)
    wait_until(lambda: state() == "Empty", "the group Empty", 60.0, state)

    code, out, err = tool("--list")
    assert code == 0 and group in out.split(), (out, err)
    code, out, err = tool("--describe", "--group", group, "--offsets")
    assert code == 0, (out, err)
    rows = _rows(out, "GROUP")
    # Every record is acknowledged: lag 0. Kafka 4.4 moves the persisted start offset lazily
    # (the share partition writes it with its next state change), so it may still say 0.
    assert [r[:3] + r[4:] for r in rows] == [[group, topic, "0", "0"]], out
    assert rows[0][3] in ("0", str(records)), out

    code, out, err = tool("--reset-offsets", "--group", group, "--topic", topic,
                          "--to-earliest", "--execute")
    assert code == 0, (out, err)
    assert _rows(out, "GROUP") == [[group, topic, "0", "0"]], out
    code, out, err = tool("--describe", "--group", group, "--offsets")
    assert code == 0, (out, err)
    rows = _rows(out, "GROUP")
    assert [r[:4] for r in rows] == [[group, topic, "0", "0"]], out

    second = ShareConsumerProcess("confluent", None, share_broker.bootstrap, group, topic,
                                  "tool-b", run_s=180)
    try:
        wait_until(lambda: set(wanted) <= set(confirmed_accepts(second.deliveries())),
                   "every record accepted again after the reset", WAIT_S, _context([second]))
    finally:
        second.stop()
    again = second.deliveries()
    assert check_accepted_exactly_once(again, wanted) == []
    assert check_counts_increase(again) == [] and {d.delivery_count for d in again} == {1}
    wait_until(lambda: state() == "Empty", "the group Empty", 60.0, state)

    code, out, err = tool("--delete-offsets", "--group", group, "--topic", topic)
    assert code == 0, (out, err)
    assert _rows(out, "TOPIC") == [[topic, "Successful"]], out
    code, out, err = tool("--describe", "--group", group, "--offsets")
    assert code == 0, (out, err)
    assert f"Share group '{group}' has no offset information." in out, out

    code, out, err = tool("--delete", "--group", group)
    assert code == 0, (out, err)
    assert re.search(rf"Deletion of requested share groups \('{re.escape(group)}'\) was "
                     rf"successful\.", out), out
    code, out, err = tool("--list")
    assert code == 0 and group not in out.split(), (out, err)
