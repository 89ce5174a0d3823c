"""Differential, at the wire: the same sequence of transaction requests (InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn, DescribeTransactions,
ListTransactions, built with kio) sent to the real Kafka 4.4 broker and to ``seglog serve``
gets the same error codes, epochs and producer ids (relative to the first one given).
Written by the txn helper (seglog.server.apis.txn) on this directory's ``target`` harness.

Kafka writes transaction markers asynchronously: right after an EndTxn (or the abort an
InitProducerId starts) it answers CONCURRENT_TRANSACTIONS until they are written; seglog
writes them before it answers. Steps marked ``settle`` are therefore retried while the answer
is CONCURRENT_TRANSACTIONS (bounded), and the answer compared is the one after that; the
step that must see CONCURRENT_TRANSACTIONS itself (InitProducerId while a transaction is
ongoing) is compared on its first answer.
"""

from __future__ import annotations

import datetime
import io
import socket
import struct
import sys
import time

from seglog.schemas import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from clients_runner import create_topic

TIMEOUT = datetime.timedelta(milliseconds=60000)
CONCURRENT, LOADING, NOT_AVAILABLE, NOT_COORDINATOR = 51, 14, 15, 16
WAIT_S = 30


class Wire:
    """A blocking Kafka connection speaking kio's entities (socket timeouts bound waits)."""

    def __init__(self, bootstrap: str):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=WAIT_S)
        self.correlation_id = 0

    def call(self, api_key: int, version: int, **fields):
        request = load_request_schema(api_key, version)(**fields)
        header_type = request.__header_schema__
        self.correlation_id += 1
        header = dict(request_api_key=i16(api_key), request_api_version=i16(version),
                      correlation_id=i32(self.correlation_id))
        if "client_id" in header_type.__dataclass_fields__:
            header["client_id"] = "txn-differential"
        out = io.BytesIO()
        entity_writer(header_type)(out, header_type(**header))
        entity_writer(type(request))(out, request)
        body = out.getvalue()
        self.sock.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", self._read(4))
        data = memoryview(self._read(size))
        response_type = load_response_schema(api_key, version)
        _, offset = entity_reader(response_type.__header_schema__)(data, 0)
        return entity_reader(response_type)(data, offset)[0]

    def _read(self, count: int) -> bytes:
        chunks = []
        while count:
            chunk = self.sock.recv(count)
            if not chunk:
                raise EOFError("the broker closed the connection")
            chunks.append(chunk)
            count -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self.sock.close()


def _first_error(response) -> int:
    """The request-level error code, else the first partition's."""
    if hasattr(response, "error_code"):
        return int(response.error_code)
    for coordinator in getattr(response, "coordinators", ()):
        return int(coordinator.error_code)
    for name in ("results_by_topic_v3_and_below", "topics"):
        for topic in getattr(response, name, ()):
            for part in getattr(topic, "results_by_partition", ()) or topic.partitions:
                return int(getattr(part, "partition_error_code", getattr(part, "error_code", 0)))
    return 0


def _nested(api_key: int, version: int, name: str):
    return getattr(sys.modules[load_request_schema(api_key, version).__module__], name)


def scenario(wire: Wire, topic: str, prefix: str) -> list:
    """The request sequence on ``topic`` (two partitions), transactional ids and the group
    named after ``prefix``; returns what each step answered, comparable across brokers."""
    txn_id, other_id, group = f"{prefix}-tx", f"{prefix}-nobody", f"{prefix}-g"
    results: list = []
    base_pid = [None]

    def step(label, api_key, version, settle=True, **fields):
        deadline = time.monotonic() + WAIT_S
        while True:
            response = wire.call(api_key, version, **fields)
            code = _first_error(response)
            retry = code in (LOADING, NOT_AVAILABLE, NOT_COORDINATOR) or (
                settle and code == CONCURRENT)
            if not retry or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        seen = {"step": label, "error": code}
        if api_key == 22 and code == 0:
            if base_pid[0] is None:
                base_pid[0] = int(response.producer_id)
            seen.update(pid=int(response.producer_id) - base_pid[0],
                        epoch=int(response.producer_epoch))
        if api_key in (24, 28):  # per partition (in sorted order: brokers order them apart)
            del seen["error"]
            seen["partitions"] = sorted(
                (t.name, int(p.partition_index),
                 int(getattr(p, "partition_error_code", getattr(p, "error_code", 0))))
                for t in getattr(response, "results_by_topic_v3_and_below", ())
                or response.topics
                for p in (getattr(t, "results_by_partition", ()) or t.partitions))
        results.append(seen)
        return response

    add_topic = _nested(24, 3, "AddPartitionsToTxnTopic")
    commit_topic = _nested(28, 3, "TxnOffsetCommitRequestTopic")
    commit_part = _nested(28, 3, "TxnOffsetCommitRequestPartition")

    def add(label, pid, epoch, partitions, version=3, txn=txn_id):
        return step(label, 24, version, v3_and_below_transactional_id=txn,
                    v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                    v3_and_below_topics=tuple(add_topic(name=n, partitions=tuple(ps))
                                              for n, ps in partitions.items()))

    def commit_offsets(label, pid, epoch, group=group, metadata="", **fields):
        return step(label, 28, 3, transactional_id=txn_id, group_id=group, producer_id=pid,
                    producer_epoch=epoch, topics=(commit_topic(name=topic, partitions=(
                        commit_part(partition_index=0, committed_offset=5,
                                    committed_metadata=metadata),
                        commit_part(partition_index=7, committed_offset=5,
                                    committed_metadata=""))),), **fields)

    step("find coordinator", 10, 4, key_type=1, coordinator_keys=(txn_id,))
    step("find group coordinator", 10, 4, key_type=0, coordinator_keys=(group,))
    step("idempotent", 22, 4, transactional_id=None, transaction_timeout=TIMEOUT)
    init = step("init", 22, 4, transactional_id=txn_id, transaction_timeout=TIMEOUT)
    pid, epoch = int(init.producer_id), int(init.producer_epoch)
    step("timeout too long", 22, 4, transactional_id=txn_id,
         transaction_timeout=datetime.timedelta(milliseconds=900001))
    step("empty id", 22, 4, transactional_id="", transaction_timeout=TIMEOUT)
    step("half kip-360", 22, 4, transactional_id=txn_id, transaction_timeout=TIMEOUT,
         producer_id=pid)
    add("unknown partitions", pid, epoch, {topic: [0, 9], "no-such-topic": [0]})
    add("internal topic", pid, epoch, {topic: [0], "__consumer_offsets": [0]})
    add("stale epoch v1", pid, epoch + 1, {topic: [0]}, version=1)
    add("stale epoch v3", pid, epoch + 1, {topic: [0]})
    add("other producer id", pid + 1000, epoch, {topic: [0]})
    add("unknown id", pid, epoch, {topic: [0]}, txn=other_id)
    step("end with nothing ongoing", 26, 3, transactional_id=txn_id, producer_id=pid,
         producer_epoch=epoch, committed=True)
    add("add", pid, epoch, {topic: [0, 1]})
    commit_offsets("offsets before AddOffsetsToTxn", pid, epoch)
    step("add offsets stale v1", 25, 1, transactional_id=txn_id, producer_id=pid,
         producer_epoch=epoch + 1, group_id=group)
    step("add offsets", 25, 3, transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
         group_id=group)
    commit_offsets("offsets stale epoch", pid, epoch + 1)
    commit_offsets("offsets", pid, epoch)
    commit_offsets("offsets metadata too large", pid, epoch, metadata="m" * 4097)
    commit_offsets("offsets of a generation the group never had", pid, epoch,
                   generation_id=4, member_id="someone")
    commit_offsets("offsets without a group id", pid, epoch, group="")
    producers = wire.call(61, 0, topics=(
        _nested(61, 0, "TopicRequest")(name=topic, partition_indexes=(0, 9)),
        _nested(61, 0, "TopicRequest")(name="no-such-topic", partition_indexes=(0,)),
        _nested(61, 0, "TopicRequest")(name="bad/name", partition_indexes=(0,))))
    results.append({"step": "describe producers", "partitions": sorted(
        (t.name, int(p.partition_index), int(p.error_code), len(p.active_producers))
        for t in producers.topics for p in t.partitions)})
    step("commit", 26, 3, transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
         committed=True)
    step("commit again", 26, 3, transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
         committed=True)
    step("abort after commit", 26, 3, transactional_id=txn_id, producer_id=pid,
         producer_epoch=epoch, committed=False)
    step("end stale v1", 26, 1, transactional_id=txn_id, producer_id=pid,
         producer_epoch=epoch + 3, committed=True)
    add("add again", pid, epoch, {topic: [1]})
    described = wire.call(65, 0, transactional_ids=(txn_id, other_id))
    results.append({"step": "describe", "states": [
        (s.transactional_id, int(s.error_code), s.transaction_state,
         int(s.producer_epoch) if s.error_code == 0 else None,
         sorted((t.topic, sorted(t.partitions)) for t in s.topics))
        for s in described.transaction_states]})
    step("init while ongoing", 22, 4, settle=False, transactional_id=txn_id,
         transaction_timeout=TIMEOUT)
    fenced = step("init retried", 22, 4, transactional_id=txn_id, transaction_timeout=TIMEOUT)
    new_epoch = int(fenced.producer_epoch)
    step("kip-360 stale v3", 22, 3, transactional_id=txn_id, transaction_timeout=TIMEOUT,
         producer_id=pid, producer_epoch=epoch)
    step("kip-360 stale v4", 22, 4, transactional_id=txn_id, transaction_timeout=TIMEOUT,
         producer_id=pid, producer_epoch=epoch)
    step("kip-360 bump", 22, 4, transactional_id=txn_id, transaction_timeout=TIMEOUT,
         producer_id=pid, producer_epoch=new_epoch)
    step("kip-360 retried", 22, 4, transactional_id=txn_id, transaction_timeout=TIMEOUT,
         producer_id=pid, producer_epoch=new_epoch)
    step("old producer ends", 26, 3, transactional_id=txn_id, producer_id=pid,
         producer_epoch=epoch, committed=True)
    listed = wire.call(66, 1, state_filters=("Empty", "Bogus"), producer_id_filters=(),
                       duration_filter=-1)
    results.append({"step": "list", "unknown": list(listed.unknown_state_filters),
                    "ids": sorted(s.transactional_id for s in listed.transaction_states
                                  if s.transactional_id.startswith(prefix))})
    for label, filters in (("list by producer id", dict(producer_id_filters=(pid,))),
                           ("list long-running", dict(duration_filter=3_600_000))):
        listed = wire.call(66, 1, **{"state_filters": (), "producer_id_filters": (),
                                     "duration_filter": -1, **filters})
        results.append({"step": label, "error": int(listed.error_code), "ids": sorted(
            s.transactional_id for s in listed.transaction_states
            if s.transactional_id.startswith(prefix))})
    return results


def test_transaction_errors_match_kafka(target, differential, unique):
    create_topic(target.bootstrap, unique, 2)
    wire = Wire(target.bootstrap)
    try:
        differential(scenario(wire, unique, unique))
    finally:
        wire.close()
