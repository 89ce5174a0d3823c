"""The embedded transactional API: store.producer(transactional_id=...), the transaction
coordinator in the Store, transactional offset commits, fencing, read_committed consumers, and
a consume-transform-produce loop that crashes (in-process and as a real process) and resumes
with every input producing exactly one committed output."""

from __future__ import annotations

import collections
import os
import subprocess
import sys

import pytest

from seglog.coordinator import txn_schema
from seglog.errors import (
    IllegalStateError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    ProducerFencedError,
    RequestTimedOutError,
    TransactionAbortedError,
)
from seglog.clients.producer import append_to_log
from seglog.store import Store, TopicPartition as TP


def open_store(path, backend):
    return Store(path, backend=backend, offsets_topic_partitions=1)


@pytest.fixture
def store(tmp_path, backend):
    with open_store(tmp_path, backend) as s:
        yield s


def read_all(store, topic, isolation):
    consumer = store.consumer(None, isolation_level=isolation, auto_offset_reset="earliest")
    consumer.assign(store.topic(topic).topic_partitions())
    out = []
    while records := consumer.poll(max_records=1000):
        out += records
    consumer.close()
    return [r.value for r in sorted(out, key=lambda r: (r.partition, r.offset))]


def test_commit_makes_records_and_offsets_visible_together(store):
    store.create_topic("in")
    store.create_topic("out", partitions=2)
    producer = store.producer(transactional_id="tx", linger_ms=60_000)
    group = store.group("g")
    producer.begin_transaction()
    producer.send("out", b"x", partition=0)
    producer.send("out", b"y", partition=1)
    producer.send_offsets_to_transaction({("in", 0): 7}, "g")
    producer.flush()
    assert read_all(store, "out", "read_uncommitted") == [b"x", b"y"]
    assert read_all(store, "out", "read_committed") == []
    assert group.committed(("in", 0)) is None  # pending until the COMMIT marker
    described = store.describe_transaction("tx")
    assert described.state == "Ongoing"
    assert set(described.partitions) == {TP("out", 0), TP("out", 1),
                                         TP("__consumer_offsets", 0)}
    producer.commit_transaction()
    assert read_all(store, "out", "read_committed") == [b"x", b"y"]
    assert group.committed(("in", 0)) == 7
    assert store.describe_transaction("tx").state == "CompleteCommit"
    # Every partition of the transaction ends with a COMMIT marker of this producer.
    for tp in described.partitions:
        log = store.log(tp)
        batches = list(log.backend.iter_batches(log.read(0, max_offset=log.end_offset).buffer))
        assert batches[-1].is_control and batches[-1].producer_id == producer.producer_id
        assert batches[-1].producer_epoch == producer.producer_epoch
    assert group.committed_offsets()[TP("in", 0)].offset == 7


def test_transactional_offsets_replay_with_their_markers(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        store.create_topic("in")
        producer = store.producer(transactional_id="tx", linger_ms=0)
        for offset, commit in ((3, True), (5, False), (8, None)):
            producer.begin_transaction()
            producer.send_offsets_to_transaction({("in", 0): offset}, "g")
            if commit:
                producer.commit_transaction()
            elif commit is False:
                producer.abort_transaction()
        store._producers.discard(producer)  # leave the last one open across the restart
    with open_store(tmp_path, backend) as store:
        group = store.group("g")
        assert group.committed(("in", 0)) == 3  # 5 aborted, 8 still pending
        store.producer(transactional_id="tx")  # aborts the open one
        assert group.committed(("in", 0)) == 3
        producer = store.producer(transactional_id="tx")
        producer.begin_transaction()
        producer.send_offsets_to_transaction({("in", 0): 13}, "g")
        producer.commit_transaction()
    with open_store(tmp_path, backend) as store:
        assert store.group("g").committed(("in", 0)) == 13


def test_read_committed_hides_an_aborted_transaction_read_uncommitted_shows_it(store):
    store.create_topic("t")
    store.create_topic("in")
    producer = store.producer(transactional_id="tx", linger_ms=0)
    committed_reader = store.consumer("rc", ["t"], auto_offset_reset="earliest",
                                      isolation_level="read_committed")
    uncommitted_reader = store.consumer("ru", ["t"], auto_offset_reset="earliest")
    producer.begin_transaction()
    producer.send("t", b"kept-1")
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send("t", b"aborted-1")
    producer.send("t", b"aborted-2")
    producer.send_offsets_to_transaction({("in", 0): 3}, "g")
    producer.abort_transaction()
    producer.begin_transaction()
    producer.send("t", b"kept-2")
    producer.commit_transaction()
    assert [r.value for r in committed_reader.poll()] == [b"kept-1", b"kept-2"]
    assert [r.value for r in uncommitted_reader.poll()] == [
        b"kept-1", b"aborted-1", b"aborted-2", b"kept-2"]
    assert store.group("g").committed(("in", 0)) is None  # the aborted commit was dropped
    assert store.describe_transaction("tx").state == "CompleteCommit"


def test_abort_drops_records_still_waiting(store):
    log = store.create_topic("t").log(0)
    producer = store.producer(transactional_id="tx", linger_ms=60_000)
    producer.begin_transaction()
    futures = [producer.send("t", b"v") for _ in range(3)]
    producer.abort_transaction()
    for future in futures:
        with pytest.raises(TransactionAbortedError):
            future.result()
    # The partition joined the transaction at the first send, so only its ABORT marker is
    # in the log.
    assert log.end_offset == 1
    assert read_all(store, "t", "read_uncommitted") == []
    producer.begin_transaction()
    producer.send("t", b"w")
    producer.commit_transaction()
    assert read_all(store, "t", "read_committed") == [b"w"]


def test_state_errors_keep_kafkas_names(store):
    store.create_topic("t")
    producer = store.producer(transactional_id="tx", linger_ms=0)
    producer.init_transactions()  # done on creation; accepted again
    with pytest.raises(InvalidTxnStateError):
        producer.send("t", b"no transaction")
    with pytest.raises(InvalidTxnStateError):
        producer.commit_transaction()
    with pytest.raises(InvalidTxnStateError):
        producer.abort_transaction()
    with pytest.raises(InvalidTxnStateError):
        producer.send_offsets_to_transaction({("t", 0): 1}, "g")
    producer.begin_transaction()
    with pytest.raises(InvalidTxnStateError):
        producer.begin_transaction()
    producer.commit_transaction()  # an empty transaction: nothing to mark
    plain = store.producer()
    for call in (plain.begin_transaction, plain.commit_transaction, plain.abort_transaction,
                 plain.init_transactions):
        with pytest.raises(IllegalStateError):
            call()
    with pytest.raises(ValueError):
        store.producer(transactional_id="x", idempotent=False)
    with pytest.raises(ValueError):
        store.producer(transactional_id="")
    with pytest.raises(ValueError):
        store.producer(transactional_id="y", transaction_timeout_ms=0)
    assert producer.idempotent and producer.transactional


def test_a_new_producer_fences_the_zombie_and_aborts_its_transaction(store):
    store.create_topic("t", partitions=2)
    store.create_topic("in")
    zombie = store.producer(transactional_id="tx", linger_ms=0)
    assert (zombie.producer_epoch, store.describe_transaction("tx").producer_epoch) == (0, 0)
    zombie.begin_transaction()
    zombie.send("t", b"zombie-0", partition=0)
    zombie.send_offsets_to_transaction({("in", 0): 1}, "g")
    replacement = store.producer(transactional_id="tx", linger_ms=0)
    # Kafka's coordinator: one bump to fence and abort, one for the new producer.
    assert replacement.producer_id == zombie.producer_id
    assert replacement.producer_epoch == 2
    assert store.describe_transaction("tx").state == "Empty"
    log = store.topic("t").log(0)
    assert log.last_stable_offset == log.end_offset  # the zombie's transaction was aborted
    assert read_all(store, "t", "read_committed") == []
    assert store.group("g").committed(("in", 0)) is None
    with pytest.raises(ProducerFencedError):
        zombie.send("t", b"zombie-1", partition=1)
    with pytest.raises(ProducerFencedError):
        zombie.commit_transaction()
    with pytest.raises(ProducerFencedError):
        zombie.begin_transaction()
    # The log fences the old epoch too, wherever the abort marker went.
    with pytest.raises(InvalidProducerEpochError):
        append_to_log(log, [b"late"], producer_id=zombie.producer_id, producer_epoch=0,
                      base_sequence=1, is_transactional=True)
    replacement.begin_transaction()
    replacement.send("t", b"new", partition=0)
    replacement.send_offsets_to_transaction({("in", 0): 1}, "g")
    replacement.commit_transaction()
    assert read_all(store, "t", "read_committed") == [b"new"]
    assert store.group("g").committed(("in", 0)) == 1
    zombie.close()  # writes nothing, raises nothing
    assert read_all(store, "t", "read_uncommitted") == [b"zombie-0", b"new"]


def test_a_zombie_batch_still_lingering_never_lands(store):
    store.create_topic("t")
    zombie = store.producer(transactional_id="tx", linger_ms=60_000)
    zombie.begin_transaction()
    future = zombie.send("t", b"late")  # waiting in the producer, partition already added
    store.producer(transactional_id="tx")
    with pytest.raises(ProducerFencedError):
        zombie.flush()
    with pytest.raises(ProducerFencedError):
        future.result()
    assert read_all(store, "t", "read_uncommitted") == []


def test_ids_and_epochs_survive_restarts_in_kafkas_schema(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        first = store.producer(transactional_id="tx")
        other = store.producer(transactional_id="other")
        plain = store.producer(idempotent=True)
        ids = {first.producer_id, other.producer_id, plain.producer_id}
        assert len(ids) == 3
    with open_store(tmp_path, backend) as store:
        again = store.producer(transactional_id="tx")
        assert (again.producer_id, again.producer_epoch) == (first.producer_id, 1)
        fresh = store.producer(transactional_id="fresh")
        assert fresh.producer_id > max(ids)
        topic = store.topic("__transaction_state")
        assert topic.is_internal and topic.config.compaction_enabled
        states = {}
        for p in range(topic.partitions):
            for record in topic.log(p).records():
                states[txn_schema.decode_key(record.key)] = txn_schema.decode_value(record.value)
        assert states["tx"].producer_id == first.producer_id
        assert states["tx"].producer_epoch == 1
        assert states["tx"].status == txn_schema.EMPTY
        assert sorted(states) == ["fresh", "other", "tx"]


def test_open_transaction_survives_a_restart_until_the_next_producer_aborts_it(tmp_path,
                                                                                backend):
    with open_store(tmp_path, backend) as store:
        store.create_topic("t")
        producer = store.producer(transactional_id="tx", linger_ms=0)
        producer.begin_transaction()
        producer.send("t", b"v")
        # Abandoned: the store's close aborts what its producers left open (Kafka's close),
        # so tear the producer out of the store's list to leave the transaction open.
        store._producers.discard(producer)
    with open_store(tmp_path, backend) as store:
        log = store.topic("t").log(0)
        assert store.describe_transaction("tx").state == "Ongoing"
        assert log.last_stable_offset == 0
        store.producer(transactional_id="tx")
        assert log.last_stable_offset == log.end_offset == 2
        assert read_all(store, "t", "read_committed") == []


def test_timed_out_transaction_is_aborted_by_maintain(store):
    store.create_topic("t")
    producer = store.producer(transactional_id="tx", linger_ms=0, transaction_timeout_ms=1000)
    producer.begin_transaction()
    producer.send("t", b"v")
    started = store.describe_transaction("tx").start_timestamp_ms
    assert store.abort_timed_out_transactions(now_ms=started + 999) == []
    report = store.maintain(now_ms=started + 1000)
    assert report["aborted_transactions"] == ["tx"]
    assert store.topic("t").log(0).last_stable_offset == 2
    with pytest.raises(ProducerFencedError):
        producer.commit_transaction()


def test_close_aborts_an_open_transaction(store):
    store.create_topic("t")
    with store.producer(transactional_id="tx", linger_ms=0) as producer:
        producer.begin_transaction()
        producer.send("t", b"v")
    assert store.describe_transaction("tx").state == "CompleteAbort"
    assert read_all(store, "t", "read_committed") == []


def test_unknown_outcome_must_abort_and_bumps_the_epoch(store):
    store.create_topic("t")
    producer = store.producer(transactional_id="tx", linger_ms=0, retries=1, retry_backoff_ms=0)

    def lose_every_ack(log, values, **fields):
        append_to_log(log, values, **fields)
        raise RequestTimedOutError("lost")

    producer.log_append = lose_every_ack
    producer.begin_transaction()
    with pytest.raises(RequestTimedOutError):
        producer.send("t", b"v").result()
    with pytest.raises(InvalidTxnStateError):
        producer.send("t", b"w")
    with pytest.raises(InvalidTxnStateError):
        producer.commit_transaction()
    producer.abort_transaction()
    assert producer.producer_epoch == 1  # KIP-360: the sequences start again at 0
    producer.log_append = append_to_log
    producer.begin_transaction()
    producer.send("t", b"x")
    producer.commit_transaction()
    assert read_all(store, "t", "read_committed") == [b"x"]


def test_transactional_and_plain_commits_order_by_append(store):
    """Kafka's rule: a transactional commit applied on COMMIT replaces the committed offset
    only if it was appended after it."""
    store.create_topic("in")
    producer = store.producer(transactional_id="tx", linger_ms=0)
    group = store.group("g")
    producer.begin_transaction()
    producer.send_offsets_to_transaction({("in", 0): 5}, "g")
    group.alter_offsets({("in", 0): 9})  # appended later, committed at once
    producer.commit_transaction()
    assert group.committed(("in", 0)) == 9


# --- consume, transform, produce: crashed mid-way and resumed ---------------------------------

INPUTS = [f"in-{i:02d}" for i in range(40)]
POLL_RECORDS = 7


def transform(value: bytes) -> bytes:
    return value.replace(b"in-", b"out-")


def write_inputs(store):
    store.create_topic("in", partitions=2)
    store.create_topic("out", partitions=3)
    with store.producer(linger_ms=60_000) as producer:
        for value in INPUTS:
            producer.send("in", value.encode(), key=value.encode())


def process(store, *, crash_after_sends=None):
    """Read ``in`` (read_committed) in group ``etl``, write the transformed records to
    ``out`` and the consumed positions with ``send_offsets_to_transaction``, one transaction
    per poll. With ``crash_after_sends`` it returns, mid-transaction, the open producer as
    it is after that many sends (the caller abandons it or kills the process)."""
    consumer = store.consumer("etl", ["in"], auto_offset_reset="earliest",
                              isolation_level="read_committed")
    producer = store.producer(transactional_id="etl-0", linger_ms=0, batch_size_bytes=200)
    sends = 0
    while records := consumer.poll(max_records=POLL_RECORDS):
        producer.begin_transaction()
        for record in records:
            producer.send("out", transform(record.value), key=record.key)
            sends += 1
            if sends == crash_after_sends:
                consumer.close()  # a dead member leaves the group (session timeout)
                return producer
        positions = {tp: consumer.position(tp) for tp in consumer.assignment()}
        producer.send_offsets_to_transaction(positions, "etl")
        producer.commit_transaction()
    consumer.close()
    producer.close()
    return None


def check_exactly_once(store):
    committed = read_all(store, "out", "read_committed")
    assert collections.Counter(committed) == collections.Counter(
        transform(v.encode()) for v in INPUTS)
    group = store.group("etl")
    assert {tp: group.committed(tp) for tp in store.topic("in").topic_partitions()} \
        == {TP("in", p): end for p, end in store.topic("in").end_offsets().items()}
    return read_all(store, "out", "read_uncommitted")


def test_consume_transform_produce_abandoned_in_process_and_resumed(tmp_path, backend):
    with open_store(tmp_path, backend) as store:
        write_inputs(store)
        zombie = process(store, crash_after_sends=POLL_RECORDS + 3)  # 1 txn done, 1 open
        assert zombie.in_transaction
        assert process(store) is None  # a new instance: fences the zombie, aborts its txn
        everything = check_exactly_once(store)
        assert len(everything) == len(INPUTS) + 3  # the aborted sends are there, hidden
        with pytest.raises(ProducerFencedError):
            zombie.commit_transaction()
    with open_store(tmp_path, backend) as store:  # and after a restart
        check_exactly_once(store)


CRASHING_PROCESSOR = r"""
import os, sys
sys.path.insert(0, sys.argv[3])
from test_transactions_api import open_store, process
store = open_store(sys.argv[1], sys.argv[2])
producer = process(store, crash_after_sends=int(sys.argv[4]))
producer.flush()  # the records of the open transaction are in the log
os._exit(3)  # the process dies before commit: nothing closed, nothing aborted
"""


def test_consume_transform_produce_killed_process_resumed(tmp_path, backend):
    data = tmp_path / "data"
    with open_store(data, backend) as store:
        write_inputs(store)
    src = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "src"))
    tests = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.run([sys.executable, "-c", CRASHING_PROCESSOR, str(data), backend.name,
                           tests, str(2 * POLL_RECORDS + 4)],
                          env=dict(os.environ, PYTHONPATH=src), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 3, proc.stderr
    with open_store(data, backend) as store:
        assert store.describe_transaction("etl-0").state == "Ongoing"
        # Two transactions committed before the crash; the third is open with 4 records.
        assert len(read_all(store, "out", "read_committed")) == 2 * POLL_RECORDS
        assert len(read_all(store, "out", "read_uncommitted")) == 2 * POLL_RECORDS + 4
        assert sum(o.offset for o in store.group("etl").committed_offsets().values()) \
            == 2 * POLL_RECORDS
        assert process(store) is None
        everything = check_exactly_once(store)
        assert len(everything) == len(INPUTS) + 4
    with open_store(data, backend) as store:
        check_exactly_once(store)


DYING_COMMITTER = r"""
import os, sys
sys.path.insert(0, sys.argv[3])
from test_transactions_api import open_store
from seglog.storage.log import Log
store = open_store(sys.argv[1], sys.argv[2])
store.create_topic("t", partitions=2)
store.create_topic("in")
producer = store.producer(transactional_id="tx", linger_ms=0)
producer.begin_transaction()
producer.send("t", b"a", partition=0)
producer.send("t", b"b", partition=1)
producer.send_offsets_to_transaction({("in", 0): 4}, "g")
write_marker = Log.append_txn_marker

def write_one_marker_then_die(self, **kwargs):
    write_marker(self, **kwargs)
    os._exit(3)  # PrepareCommit is in __transaction_state, one marker of three is written

Log.append_txn_marker = write_one_marker_then_die
producer.commit_transaction()
"""


def test_a_commit_cut_short_by_a_crash_is_completed_on_open(tmp_path, backend):
    tests = os.path.dirname(os.path.abspath(__file__))
    src = os.path.abspath(os.path.join(tests, os.pardir, os.pardir, "src"))
    proc = subprocess.run([sys.executable, "-c", DYING_COMMITTER, str(tmp_path), backend.name,
                           tests], env=dict(os.environ, PYTHONPATH=src), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    with open_store(tmp_path, backend) as store:
        # The coordinator found PrepareCommit and wrote the markers again on open.
        assert store.describe_transaction("tx").state == "CompleteCommit"
        assert read_all(store, "t", "read_committed") == [b"a", b"b"]
        assert store.group("g").committed(("in", 0)) == 4


def test_read_committed_member_waits_for_a_pending_offset_commit(store):
    """KIP-447: a read_committed member does not start a partition whose offset a transaction
    is committing; it starts from the new offset once the transaction commits."""
    store.create_topic("in")
    with store.producer(linger_ms=0) as plain:
        for i in range(5):
            plain.send("in", b"%d" % i)
    producer = store.producer(transactional_id="tx", linger_ms=0)
    producer.begin_transaction()
    producer.send_offsets_to_transaction({("in", 0): 3}, "g")
    member = store.consumer("g", ["in"], auto_offset_reset="earliest",
                            isolation_level="read_committed")
    assert member.poll(timeout_ms=50) == []
    relaxed = store.consumer("g2", ["in"], auto_offset_reset="earliest")
    assert len(relaxed.poll()) == 5  # another group is not held up
    producer.commit_transaction()
    assert [r.offset for r in member.poll()] == [3, 4]
