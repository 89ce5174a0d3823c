"""The article's examples, run through the real Store, Producer and Consumer.

"The article" is the one this project grew from (not in the repository), section 03 "Offsets
and consumer groups". Its model reads a ten-record partition (m0..m9) in batches of five; the consumer
dies while handling m7 (once), restarts and resumes from its group's last committed offset:

    process then commit: handled 12 records, duplicates=['m5', 'm6'], lost=[]
    commit then process: handled 7 records, duplicates=[], lost=['m7', 'm8', 'm9']

and its group example: ten consumers on six partitions leave four idle, and a second group
reading the same topic gets the whole stream again with its own offsets.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from seglog.store import Store

RECORDS = [f"m{i}" for i in range(10)]


class ConsumerDied(RuntimeError):
    pass


def open_store(path, backend):
    return Store(path, backend=backend, offsets_topic_partitions=1)


def write_article_partition(store):
    store.create_topic("article", partitions=1)
    with store.producer(linger_ms=60_000) as producer:
        for value in RECORDS:
            producer.send("article", value.encode())


def summary(handled):
    duplicates = sorted({r for r in handled if handled.count(r) > 1})
    lost = [r for r in RECORDS if r not in handled]
    return len(handled), duplicates, lost


def run_in_process(store, group, *, commit_first, crash_at="m7", batch=5):
    """The article's ``run``, with the Consumer doing the offset bookkeeping. The crash is
    an exception in the handler; the dead consumer is closed, which leaves the group without
    committing, and a fresh consumer of the same group resumes from the last commit."""
    handled, crashed, restarts = [], False, 0
    while restarts <= 1:
        consumer = store.consumer(group, ["article"], auto_offset_reset="earliest")
        try:
            while True:
                records = consumer.poll(max_records=batch, timeout_ms=0)
                if not records:
                    consumer.close()
                    return handled
                if commit_first:
                    consumer.commit()  # the offset says "done" up front
                for record in records:
                    value = record.value.decode()
                    if value == crash_at and not crashed:
                        crashed = True
                        raise ConsumerDied(value)
                    handled.append(value)
                if not commit_first:
                    consumer.commit()  # the offset moves after the work
        except ConsumerDied:
            consumer.close()  # dies mid-batch: no commit
            restarts += 1
    raise AssertionError("restarted more than once")


def test_process_then_commit_is_at_least_once(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        write_article_partition(store)
        handled = run_in_process(store, "at-least-once", commit_first=False)
        assert summary(handled) == (12, ["m5", "m6"], [])
        assert handled == RECORDS[:7] + RECORDS[5:]
        assert store.group("at-least-once").committed(("article", 0)) == 10


def test_commit_then_process_is_at_most_once(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        write_article_partition(store)
        handled = run_in_process(store, "at-most-once", commit_first=True)
        assert summary(handled) == (7, [], ["m7", "m8", "m9"])
        assert handled == RECORDS[:7]


def test_both_orders_side_by_side_on_one_partition(tmp_path, backend):
    """Two groups on the same ten records: each keeps its own committed offset."""
    with open_store(tmp_path, backend) as store:
        write_article_partition(store)
        first = run_in_process(store, "process-then-commit", commit_first=False)
        second = run_in_process(store, "commit-then-process", commit_first=True)
        lines = [f"{name}: handled {n} records, duplicates={d}, lost={l}"
                 for name, (n, d, l) in (("process then commit", summary(first)),
                                         ("commit then process", summary(second)))]
        assert lines == [
            "process then commit: handled 12 records, duplicates=['m5', 'm6'], lost=[]",
            "commit then process: handled 7 records, duplicates=[], lost=['m7', 'm8', 'm9']",
        ]


# A consumer process that really dies: os._exit while handling m7, with nothing flushed or
# closed. Its handled records go to a file (the "side effect" of handling them).
CRASHING_CONSUMER = r"""
import os, sys
from seglog.store import Store
data, backend, mode, handled_path, crashed_flag = sys.argv[1:]
store = Store(data, backend=backend, offsets_topic_partitions=1)
consumer = store.consumer(mode, ["article"], auto_offset_reset="earliest")
with open(handled_path, "a") as out:
    while True:
        records = consumer.poll(max_records=5, timeout_ms=0)
        if not records:
            break
        if mode == "commit-then-process":
            consumer.commit()
        for record in records:
            value = record.value.decode()
            if value == "m7" and not os.path.exists(crashed_flag):
                open(crashed_flag, "w").close()
                out.flush()
                os._exit(3)  # the process dies mid-batch: no commit, no close
            out.write(value + "\n")
        out.flush()
        if mode == "process-then-commit":
            consumer.commit()
store.close()
"""


def run_crashing_process(data, backend, mode, tmp_path):
    src = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, "src"))
    env = dict(os.environ, PYTHONPATH=src)
    handled_path = tmp_path / f"{mode}.handled"
    flag = tmp_path / f"{mode}.crashed"
    codes = []
    for _ in range(2):  # the first run dies at m7; the restart finishes
        proc = subprocess.run([sys.executable, "-c", CRASHING_CONSUMER, str(data), backend.name,
                               mode, str(handled_path), str(flag)], env=env, timeout=120,
                              capture_output=True, text=True)
        codes.append(proc.returncode)
        assert proc.returncode in (0, 3), proc.stderr
        if proc.returncode == 0:
            break
    assert codes == [3, 0]
    return handled_path.read_text().split()


@pytest.mark.parametrize("mode, expected", [
    ("process-then-commit", (12, ["m5", "m6"], [])),
    ("commit-then-process", (7, [], ["m7", "m8", "m9"])),
])
def test_article_commit_order_with_a_real_process_crash(tmp_path, backend, mode, expected):
    data = tmp_path / "data"
    with open_store(data, backend) as store:
        write_article_partition(store)
    handled = run_crashing_process(data, backend, mode, tmp_path)
    assert summary(handled) == expected
    with open_store(data, backend) as store:  # the commits survived the crash and restart
        assert store.group(mode).committed(("article", 0)) == 10


def test_ten_consumers_on_six_partitions_four_idle_second_group_rereads(tmp_path, backend):
    """Ten consumers, each in its own thread, share six partitions: six read, four idle, and
    every record is handled exactly once. A second group gets the whole stream again."""
    with open_store(tmp_path, backend) as store:
        store.create_topic("clicks", partitions=6)
        with store.producer(linger_ms=5) as producer:
            for i in range(600):
                producer.send("clicks", f"click-{i}".encode(), key=f"user-{i % 50}".encode())
        total = 600

        def run_group(group_id, members):
            consumers = [store.consumer(group_id, ["clicks"], auto_offset_reset="earliest")
                         for _ in range(members)]
            seen: list[list] = [[] for _ in consumers]
            done = threading.Event()
            errors = []

            def work(i):
                try:
                    while not done.is_set():
                        records = consumers[i].poll(max_records=50, timeout_ms=20)
                        seen[i].extend((r.partition, r.offset) for r in records)
                        if records:
                            consumers[i].commit()
                        if sum(map(len, seen)) >= total:
                            done.set()
                except Exception as e:  # noqa: BLE001
                    errors.append(e)
                    done.set()

            threads = [threading.Thread(target=work, args=(i,)) for i in range(members)]
            for t in threads:
                t.start()
            done.wait(timeout=60)
            done.set()
            for t in threads:
                t.join()
            assert not errors
            assignment_sizes = sorted(len(c.assignment()) for c in consumers)
            for c in consumers:
                c.close()
            return seen, assignment_sizes

        seen, sizes = run_group("fraud", 10)
        assert sizes == [0, 0, 0, 0, 1, 1, 1, 1, 1, 1]
        assert sum(1 for s in seen if not s) == 4  # four idle members handled nothing
        everything = sorted(x for s in seen for x in s)
        assert len(everything) == total and len(set(everything)) == total  # once each
        ends = store.topic("clicks").end_offsets()
        assert all(store.group("fraud").committed(("clicks", p)) == ends[p] for p in range(6))

        seen2, sizes2 = run_group("report", 3)
        assert sizes2 == [2, 2, 2]
        assert sorted(x for s in seen2 for x in s) == everything  # the same records again
