"""Issue 23's "brick" finding, end to end with ``seglog serve`` subprocesses on both backends.

1. The admin client (client id ``__admin_client``) may produce to ``__consumer_offsets`` and
   ``__transaction_state``; a record its coordinator could not load back is refused with
   INVALID_RECORD (Kafka appends it and then fails the partition's load), so the broker
   restarts and every group and topic serves.
2. A data dir whose coordinator partition is already corrupt (written straight into the
   partition's log, as an older seglog let the admin client do) starts: that partition's
   groups and transactional ids answer NOT_COORDINATOR (Kafka's answer for a FAILED
   coordinator partition), the log names the partition, offset and reason, and every other
   group, transactional id and topic serves.
"""

from __future__ import annotations

import datetime
import io
import queue
import socket
import struct
import subprocess
import threading
import time

import pytest
from seglog.schemas import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from core_helpers import read_frame, request_frame
from seglog import get_backend
from seglog.coordinator import offsets_schema
from seglog.coordinator.offsets_schema import offsets_partition_for_group
from seglog.coordinator.txn_schema import partition_for_transactional_id
from seglog.server.apis.data_metadata import build
from seglog.store import Store
from seglog.types import OffsetAndMetadata, TopicPartition
from test_core_serve import LISTENING, START_TIMEOUT_S, _serve

OFFSETS = "__consumer_offsets"
TXN_STATE = "__transaction_state"
PARTITIONS = 4  # of each internal topic: the groups below are picked by their partition
NOT_COORDINATOR = 16
INVALID_RECORD = 87
SERVE_CONFIG = ("--config", f"offsets.topic.num.partitions={PARTITIONS}",
                "--config", f"transaction.state.log.num.partitions={PARTITIONS}")


def _name_in(partition_of, partition: int, prefix: str) -> str:
    return next(f"{prefix}-{i}" for i in range(1000)
                if partition_of(f"{prefix}-{i}", PARTITIONS) == partition)


GOOD_GROUP = _name_in(offsets_partition_for_group, 0, "good")
BAD_GROUP = _name_in(offsets_partition_for_group, 1, "bad")
GOOD_TXN = _name_in(partition_for_transactional_id, 0, "good-txn")
BAD_TXN = _name_in(partition_for_transactional_id, 1, "bad-txn")


def _module(cls):
    return __import__(cls.__module__, fromlist=["_"])


def _call(port: int, api_key: int, version: int, request, *, flexible: bool,
          client_id: bytes = b"robust-test"):
    """Send one kio request over a fresh connection and return the decoded response."""
    body = io.BytesIO()
    entity_writer(type(request))(body, request)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.settimeout(10)
        sock.sendall(request_frame(api_key, version, 7, body.getvalue(),
                                   client_id=client_id, flexible=flexible))
        frame = read_frame(sock)
    assert frame is not None, "the broker closed the connection"
    assert struct.unpack_from(">i", frame)[0] == 7
    start = 5 if flexible else 4  # correlation id, then (flexible) empty tagged fields
    response, _ = entity_reader(load_response_schema(api_key, version))(
        memoryview(frame), start)
    return response


def _produce(port: int, topic: str, partition: int, batch: bytes, *, client_id: bytes):
    cls = load_request_schema(0, 9)
    mod = _module(cls)
    request = build(cls, transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=5),
                    topic_data=(build(mod.TopicProduceData, name=topic, partition_data=(
                        build(mod.PartitionProduceData, index=partition, records=batch),)),))
    (topic_response,) = _call(port, 0, 9, request, flexible=True,
                              client_id=client_id).responses
    (answer,) = topic_response.partition_responses
    return answer


def _offset_fetch(port: int, group: str):
    """(error code, {(topic, partition): committed offset}) of OffsetFetch v5, all topics."""
    cls = load_request_schema(9, 5)
    response = _call(port, 9, 5, build(cls, group_id=group, topics=None), flexible=False)
    return int(response.error_code), {(t.name, p.partition_index): int(p.committed_offset)
                                      for t in response.topics for p in t.partitions}


def _init_producer_id(port: int, transactional_id: str) -> int:
    cls = load_request_schema(22, 1)
    request = build(cls, transactional_id=transactional_id,
                    transaction_timeout=datetime.timedelta(seconds=60))
    return int(_call(port, 22, 1, request, flexible=False).error_code)


def _batch(backend: str, keys, values) -> bytes:
    return bytes(get_backend(backend).encode_batch(list(values), list(keys), None, None,
                                                   base_offset=0))


def _prepare(data_dir, backend: str) -> None:
    """A data dir with a topic, committed offsets of both groups and a transactional id in
    each of the two partitions."""
    with Store(data_dir, backend=backend, offsets_topic_partitions=PARTITIONS,
               transaction_state_partitions=PARTITIONS) as store:
        store.create_topic("kept", partitions=1)
        producer = store.producer()
        producer.send("kept", b"v", partition=0)
        producer.flush()
        for group, offset in ((GOOD_GROUP, 3), (BAD_GROUP, 5)):
            store.offset_commit(group, member_id=None, generation_id=-1,
                                offsets={TopicPartition("kept", 0): OffsetAndMetadata(offset)})
        for transactional_id in (GOOD_TXN, BAD_TXN):
            store.init_producer_id(transactional_id)


def _start(data_dir, backend: str):
    """``(proc, port, lines)``: a ``seglog serve`` and its output so far, once listening.

    A thread reads the output (test_core_serve's ``_wait_listening`` selects on the pipe
    and can miss a listening line that arrived in one read with the error lines before
    it, which stay in the text buffer where select does not see them)."""
    proc = _serve("--data-dir", str(data_dir), "--listen", "127.0.0.1:0",
                  "--backend", backend, "--log-level", "INFO", *SERVE_CONFIG)
    lines: queue.Queue = queue.Queue()

    def read_all() -> None:
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)  # the end of the output

    threading.Thread(target=read_all, daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        match = LISTENING.search(line)
        if match:
            proc.output = lines  # the rest, for _stop
            return proc, int(match.group(1)), seen
    proc.kill()
    proc.wait(10)
    raise AssertionError("seglog serve did not say it was listening:\n" + "".join(seen))


def _stop(proc) -> str:
    """Stop ``proc`` with SIGTERM (exit 0 asserted); the output after the listening line."""
    proc.terminate()
    try:
        code = proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    rest = []
    while (line := proc.output.get(timeout=10)) is not None:
        rest.append(line)
    out = "".join(rest)
    assert code == 0, out
    return out


@pytest.mark.parametrize("backend", ["native", "pure"])
def test_admin_produce_of_unloadable_records_is_refused_and_the_broker_restarts(
        tmp_path, backend):
    data_dir = tmp_path / "data"
    _prepare(data_dir, backend)
    proc, port, _ = _start(data_dir, backend)
    try:
        bad_offsets = _produce(port, OFFSETS, 1, _batch(backend, [b"\x00\x01junk"], [b"v"]),
                               client_id=b"__admin_client")
        bad_txn = _produce(port, TXN_STATE, 1, _batch(backend, [b"\x00"], [b"v"]),
                           client_id=b"__admin_client")
        # The key: version 1 (offset commit) then bytes that are no group string.
        for answer in (bad_offsets, bad_txn):
            assert int(answer.error_code) == INVALID_RECORD, answer
            assert answer.record_errors and answer.record_errors[0].batch_index == 0
            assert "cannot be loaded by the coordinator" in answer.error_message
        # A record the coordinator loads is still the admin client's to write.
        key, value = offsets_schema.offset_commit_record(GOOD_GROUP, "kept", 0, 9,
                                                         commit_timestamp_ms=1)
        good = _produce(port, OFFSETS, 0, _batch(backend, [key], [value]),
                        client_id=b"__admin_client")
        assert int(good.error_code) == 0
        # Anyone else: INVALID_TOPIC_EXCEPTION, as before.
        other = _produce(port, OFFSETS, 0, _batch(backend, [key], [value]),
                         client_id=b"someone")
        assert int(other.error_code) == 17
    finally:
        _stop(proc)
    proc, port, _ = _start(data_dir, backend)  # before the fix: exit 1 here, every start
    try:
        assert _offset_fetch(port, GOOD_GROUP) == (0, {("kept", 0): 9})
        assert _offset_fetch(port, BAD_GROUP) == (0, {("kept", 0): 5})
        assert _init_producer_id(port, BAD_TXN) == 0
        kept = _produce(port, "kept", 0, _batch(backend, [None], [b"w"]), client_id=b"c")
        assert (int(kept.error_code), int(kept.base_offset)) == (0, 1)
    finally:
        _stop(proc)


@pytest.mark.parametrize("backend", ["native", "pure"])
def test_a_corrupt_coordinator_partition_stays_offline_alone(tmp_path, backend):
    data_dir = tmp_path / "data"
    _prepare(data_dir, backend)
    # What an older seglog let the admin client append: written straight into the logs.
    with Store(data_dir, backend=backend) as store:
        offsets_log = store.log((OFFSETS, 1))
        corrupt_at = offsets_log.end_offset
        offsets_log.append_raw(_batch(backend, [b"\x00\x01junk"], [b"v"]))
        txn_corrupt_at = store.log((TXN_STATE, 1)).end_offset
        store.log((TXN_STATE, 1)).append_raw(_batch(backend, [b"\x00\x00\xff"], [b"v"]))
    proc, port, lines = _start(data_dir, backend)
    try:
        assert _offset_fetch(port, BAD_GROUP)[0] == NOT_COORDINATOR
        assert _offset_fetch(port, GOOD_GROUP) == (0, {("kept", 0): 3})
        assert _init_producer_id(port, BAD_TXN) == NOT_COORDINATOR
        assert _init_producer_id(port, GOOD_TXN) == 0
        kept = _produce(port, "kept", 0, _batch(backend, [None], [b"w"]), client_id=b"c")
        assert int(kept.error_code) == 0
    finally:
        out = "".join(lines) + _stop(proc)
    # The reason, where an operator reads it: the partition, the offset and what is wrong.
    assert f"{OFFSETS}-1" in out and f"offset {corrupt_at}" in out, out
    assert "invalid offsets-topic key" in out, out
    assert f"{TXN_STATE}-1" in out and "transaction log key" in out, out
    # The documented recovery (docs/server.md): with the broker stopped, truncate the
    # partition before the offset the log line names; the next start serves it again.
    with Store(data_dir, backend=backend) as store:
        store.log((OFFSETS, 1)).truncate_to(corrupt_at)
        store.log((TXN_STATE, 1)).truncate_to(txn_corrupt_at)
    proc, port, _ = _start(data_dir, backend)
    try:
        assert _offset_fetch(port, BAD_GROUP) == (0, {("kept", 0): 5})
        assert _init_producer_id(port, BAD_TXN) == 0
    finally:
        _stop(proc)
