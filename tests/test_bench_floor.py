"""``bench/producefloor.py`` (issue 27, the produce-CPU floor): a real confluent-kafka producer
with librdkafka's defaults (acks=all) gets every record acknowledged by the floor, at the
offsets the floor counts, and the floor's file holds exactly the batches it was sent (read back
and decoded by seglog's codec, CRCs checked). A few thousand records for a fraction of a
second; the measurement itself runs from the command line (``producewire.py --floor``).
``bench/fetchfloor.py`` (the consume-CPU floor) gives those records back to ``fetchcpu.py``'s
raw Fetch walk at their offsets, by both of its send modes."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

_BENCH = Path(__file__).resolve().parents[1] / "bench"


def _bench_module(name: str):
    """A bench script as a module (the floors and fetchcpu import their siblings by name,
    from the bench directory)."""
    if str(_BENCH) not in sys.path:
        sys.path.insert(0, str(_BENCH))
    return importlib.import_module(name)


def test_the_floor_takes_a_default_confluent_kafka_producers_records(tmp_path):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from seglog.pure import codec

    floor = _bench_module("producefloor").FloorServe(tmp_path / "floor")
    floor.start()
    try:
        producer = confluent_kafka.Producer({"bootstrap.servers": floor.bootstrap,
                                             "acks": "all"})
        offsets: list[int] = []
        errors: list[object] = []

        def delivered(err, msg) -> None:
            if err is not None:
                errors.append(err)
            else:
                offsets.append(msg.offset())

        for index in range(3000):
            producer.produce("floor", b"v%05d" % index, partition=0, on_delivery=delivered)
            producer.poll(0)
        assert producer.flush(30) == 0
        assert errors == []
        assert sorted(offsets) == list(range(3000))
    finally:
        floor.stop()
    stored = (tmp_path / "floor" / "floor.log").read_bytes()
    values = [record.value for batch in codec.iter_batches(stored) for record in batch.records()]
    assert values == [b"v%05d" % index for index in range(3000)]


@pytest.mark.parametrize("send_mode", ["sendfile", "view"])
def test_the_fetch_floor_serves_fetchcpus_walk_with_every_record(tmp_path, send_mode):
    """``bench/fetchfloor.py`` (issue 27, the consume-CPU floor), filled by a default
    confluent-kafka producer, answers ``fetchcpu.py``'s raw Fetch v16 walk with the records
    at their offsets, by sendfile and by a mapped view, and an empty answer at the end."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    import socket

    from seglog.pure import codec

    fetchcpu = _bench_module("fetchcpu")
    floor = _bench_module("fetchfloor").FetchFloorServe(tmp_path / "floor",
                                                        send_mode=send_mode)
    floor.start()
    try:
        producer = confluent_kafka.Producer({"bootstrap.servers": floor.bootstrap})
        for index in range(3000):
            producer.produce("walk", b"v%05d" % index + b"." * 400, partition=0)
            producer.poll(0)
        assert producer.flush(30) == 0
        host, port = floor.bootstrap.rsplit(":", 1)
        buffer = bytearray(4 << 20)
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            topic_id = fetchcpu.metadata_topic_id(sock, "walk", buffer)
            offsets: list[int] = []
            values: list[bytes] = []
            for correlation_id in range(100):  # 1.2 MB in 128 KiB answers: ~10 Fetches
                if len(offsets) == 3000:
                    break
                request = fetchcpu.fetch_request(topic_id, len(offsets), 500,
                                                 partition_max_bytes=128 * 1024)
                sock.sendall(fetchcpu.frame(1, fetchcpu.FETCH_VERSION, correlation_id,
                                            request))
                response = fetchcpu.receive(sock, buffer)
                assert int.from_bytes(response[:4], "big") == correlation_id
                for batch in codec.iter_batches(bytes(fetchcpu.whole_batches(response)[0])):
                    for record in batch.records():
                        offsets.append(record.offset)
                        values.append(record.value)
            assert offsets == list(range(3000))
            assert values == [b"v%05d" % index + b"." * 400 for index in range(3000)]
            sock.sendall(fetchcpu.frame(1, fetchcpu.FETCH_VERSION, 1000,
                                        fetchcpu.fetch_request(topic_id, 3000, 0)))
            end = fetchcpu.receive(sock, buffer)
            assert fetchcpu.whole_batches(end) == (b"", -1)
    finally:
        floor.stop()


def test_fetchcpus_walk_stops_on_a_broker_that_does_not_move_it_on():
    """A broker answering every Fetch with the same batch (offsets 0 and 1, as the produce
    floor's unstamped batches would) would keep ``fetchcpu.walk`` asking forever: the walk
    raises at the second answer instead."""
    import socket
    import threading
    import uuid

    from seglog.pure import codec
    from seglog.server.apis.data_wire import uvarint

    fetchcpu = _bench_module("fetchcpu")
    batch = codec.encode_batch([b"a", b"b"])
    payload = bytes(fetchcpu.RECORDS_AT) + uvarint(len(batch) + 1) + batch
    answer = len(payload).to_bytes(4, "big") + payload
    client, broker = socket.socketpair()
    requests: list[int] = []

    def serve() -> None:
        with broker:
            for _ in range(10):  # bounded: the walk must stop at the second
                head = broker.recv(4, socket.MSG_WAITALL)
                if len(head) < 4:
                    return
                broker.recv(int.from_bytes(head, "big"), socket.MSG_WAITALL)
                requests.append(1)
                broker.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    with client:
        client.settimeout(30)
        with pytest.raises(RuntimeError, match="a Fetch at offset 2 answered up to 2"):
            fetchcpu.walk(client, uuid.uuid4(), 100, bytearray(1 << 16), empty=False)
    thread.join(30)
    assert len(requests) == 2
