"""The article's idempotent producer (section 06), run through the real Producer and Log.

"The article" is the one this project grew from (not in the repository). Its model loses the
first acknowledgement for every record, so the producer sends each one twice:

    plain retries -> ['a', 'a', 'b', 'b', 'c', 'c']
    idempotent    -> ['a', 'b', 'c']

Here the acknowledgement is lost at the boundary between Producer and Log
(``Producer.log_append``): the batch is really appended to the partition's files, then the
producer is told the request timed out (a retriable error), so it sends the same batch again.
The Log is never mocked: with idempotence, the retry carries the same producer id, epoch and
sequence and the log's producer state answers it with the original offsets.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from seglog.errors import RequestTimedOutError
from seglog.clients.producer import append_to_log
from seglog.store import Store


class LoseFirstAcks:
    """A ``log_append`` that writes every attempt but loses the acknowledgement of the first
    attempt of each batch (the producer retries a batch with the very same ``values`` list,
    so a batch is recognised by identity). ``lost`` counts the acknowledgements lost."""

    def __init__(self, append=append_to_log, *, always: bool = False):
        self._append = append
        self._always = always
        self._seen: list = []  # batches already attempted (kept alive: ids stay unique)
        self.lost = 0
        self.calls: list[dict] = []

    def __call__(self, log, values, **fields):
        offsets = self._append(log, values, **fields)  # on disk: the write succeeded
        self.calls.append(dict(fields, values=values, log=log, offsets=offsets))
        if self._always or not any(seen is values for seen in self._seen):
            self._seen.append(values)
            self.lost += 1
            raise RequestTimedOutError("the acknowledgement was lost")
        return offsets


def send_all(store, values, *, idempotent):
    """The article's ``send_all``: each value is one batch, its first ack lost."""
    topic = "plain" if not idempotent else "idempotent"
    log = store.create_topic(topic).log(0)
    producer = store.producer(linger_ms=0, idempotent=idempotent, retry_backoff_ms=0)
    lose = producer.log_append = LoseFirstAcks()
    futures = [producer.send(topic, value.encode()) for value in values]
    offsets = [future.result().offset for future in futures]
    assert lose.lost == len(values)
    return [r.value.decode() for r in log.records()], offsets


def test_the_article_example_every_first_ack_lost(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as store:
        plain, plain_offsets = send_all(store, "abc", idempotent=False)
        idempotent, idempotent_offsets = send_all(store, "abc", idempotent=True)
    lines = [f"plain retries -> {plain}", f"idempotent    -> {idempotent}"]
    assert lines == ["plain retries -> ['a', 'a', 'b', 'b', 'c', 'c']",
                     "idempotent    -> ['a', 'b', 'c']"]
    assert plain_offsets == [1, 3, 5]  # the producer is told where the retry went
    assert idempotent_offsets == [0, 1, 2]  # the log answers a retry with the original offsets


def test_lost_acks_in_a_transaction_commit_each_record_once(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as store:
        store.create_topic("t")
        producer = store.producer(transactional_id="article", linger_ms=0, retry_backoff_ms=0)
        lose = producer.log_append = LoseFirstAcks()
        producer.begin_transaction()
        for value in "abc":
            producer.send("t", value.encode())
        producer.commit_transaction()
        assert lose.lost == 3
        consumer = store.consumer(None, isolation_level="read_committed",
                                  auto_offset_reset="earliest")
        consumer.assign([("t", 0)])
        assert [r.value for r in consumer.poll()] == [b"a", b"b", b"c"]


def test_retries_run_out_then_a_new_producer_id(tmp_path, backend):
    """A batch whose every ack is lost fails after ``retries``; it may be in the log, so the
    producer never reuses its sequence: it takes a new producer id (unknown outcome)."""
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as store:
        log = store.create_topic("t").log(0)
        producer = store.producer(linger_ms=0, idempotent=True, retries=2, retry_backoff_ms=0)
        first_id = producer.producer_id
        producer.log_append = LoseFirstAcks(always=True)
        future = producer.send("t", b"a")
        with pytest.raises(RequestTimedOutError):
            future.result()
        assert [r.value for r in log.records()] == [b"a"]  # written once, three attempts
        assert producer.producer_id != first_id
        producer.log_append = append_to_log
        assert producer.send("t", b"b").result().offset == 1
        assert [r.value for r in log.records()] == [b"a", b"b"]


def test_plain_producer_does_not_retry_other_errors(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as store:
        store.create_topic("t")
        producer = store.producer(linger_ms=0, retry_backoff_ms=0)
        calls = []

        def refuse(log, values, **fields):
            calls.append(values)
            from seglog.errors import InvalidRecordError
            raise InvalidRecordError("not retriable")

        producer.log_append = refuse
        with pytest.raises(Exception):
            producer.send("t", b"a").result()
        assert len(calls) == 1


# --- duplicate detection after the store reopens --------------------------------------------

WRITER = r"""
import os, sys
from seglog.store import Store
data, backend, how = sys.argv[1:]
store = Store(data, backend=backend, offsets_topic_partitions=1)
store.create_topic("t")
producer = store.producer(linger_ms=0, idempotent=True)
for value in (b"a", b"b", b"c"):
    producer.send("t", value).result()
print(producer.producer_id, producer.producer_epoch)
sys.stdout.flush()
if how == "crash":
    os._exit(3)  # nothing flushed, no snapshot at close: the log is replayed on open
store.close()
"""


@pytest.mark.parametrize("how", ["clean", "crash"])
def test_a_retry_after_the_store_reopens_is_still_a_duplicate(tmp_path, backend, how):
    """The broker restarts between the write and the producer's retry: the producer state
    comes back (from the close snapshot, or replayed from the log after a crash) and the
    retry of the last batch is answered with its original offset."""
    src = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, "src"))
    proc = subprocess.run([sys.executable, "-c", WRITER, str(tmp_path), backend.name, how],
                          env=dict(os.environ, PYTHONPATH=src), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == (3 if how == "crash" else 0), proc.stderr
    producer_id, epoch = map(int, proc.stdout.split())
    with Store(tmp_path, backend=backend, offsets_topic_partitions=1) as store:
        log = store.topic("t").log(0)
        retry = dict(producer_id=producer_id, producer_epoch=epoch, base_sequence=2)
        # What the producer's retry of "c" sends (its values, id, epoch and sequence).
        assert append_to_log(log, [b"c"], **retry) == (2, 2)
        # (A snapshot keeps only each producer's last batch, as Kafka's does, so after a
        # clean reopen an older retry is out of order rather than a duplicate.)
        assert [r.value for r in log.records()] == [b"a", b"b", b"c"]
        assert append_to_log(log, [b"d"], producer_id=producer_id, producer_epoch=epoch,
                             base_sequence=3) == (3, 3)
        # A new producer never gets the old id back (blocks reserved durably).
        assert store.producer(idempotent=True).producer_id > producer_id
