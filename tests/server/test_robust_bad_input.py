"""Bad input from many raw sockets at once against a broker with data, while a real client
produces and consumes (issue 11, "Behaviour under bad input and load"; the single cases are
tests/server/test_core_limits.py and the data helper's tests, this is them all together).

Attacker threads open connection after connection and send, each from a seeded generator:
random bytes behind a random size, absurd sizes (above ``socket.request.max.bytes``, negative,
zero), frames cut short and abandoned, unknown API keys, valid headers of Produce and Fetch
with garbage bodies, an ApiVersions followed by garbage on the same connection, and a real
Produce v3 request (to a topic of its own) with bytes flipped anywhere; a few connections
announce a frame of the largest allowed size and trickle bytes into it, held open for the
whole test. Meanwhile a confluent-kafka producer (acks=all) and consumer work on another topic.

Checked: the real client's records are all acknowledged and all consumed back in order; every
attack whose answer Kafka fixes (a closed connection) gets it; a bystander's ApiVersions is
answered after the storm; the store holds exactly the acknowledged records and every record
of the attacked topic still reads back with valid CRCs; once everyone hangs up the broker
holds no connection. Every wait is bounded (socket timeouts, deadlines, loop counts).
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time

import pytest

from core_helpers import connect, read_frame, request_frame
from seglog.pure.codec import encode_batch

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.clients

API_VERSIONS, PRODUCE, FETCH = 18, 0, 1
REAL_TOPIC, NOISE_TOPIC = "real", "noise"
RECORDS = 3_000
ATTACKERS = 6
ATTACKS_PER_THREAD = 60
TRICKLERS = 8
REQUEST_MAX_BYTES = 1 << 20
WAIT_S = 30.0
#: An attack's reads wait at most this long (an answer, a close, or nothing: a request the
#: broker legitimately waits on, such as a frame not yet complete).
ATTACK_READ_S = 0.3


def _produce_v3(topic: str, partition: int, batch: bytes, acks: int = -1) -> bytes:
    """The body of a Produce v3 request with one partition's record batch."""
    name = topic.encode()
    return (struct.pack(">hhi", -1, acks, 5000) + struct.pack(">i", 1)
            + struct.pack(">h", len(name)) + name + struct.pack(">i", 1)
            + struct.pack(">ii", partition, len(batch)) + batch)


def _closed(sock: socket.socket) -> bool:
    """Whether the broker closes ``sock`` (read_frame returns None) within the socket's
    timeout; a timeout (the broker still holding the connection) is False."""
    try:
        while True:
            if read_frame(sock) is None:
                return True
    except socket.timeout:
        return False


class Attacker(threading.Thread):
    """One thread of bad connections (see the module docstring)."""

    def __init__(self, port: int, seed: int, produce_body: bytes, batch_size: int):
        super().__init__(daemon=True)
        self.port = port
        self.batch_size = batch_size
        self.rng = random.Random(seed)
        self.produce_body = produce_body
        self.failures: list[str] = []
        self.counts: dict[str, int] = {}

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=WAIT_S)
        sock.settimeout(ATTACK_READ_S)
        return sock

    def _expect_closed(self, kind: str, sock: socket.socket) -> None:
        sock.settimeout(WAIT_S)  # the broker must close it: wait long enough to be sure
        if not _closed(sock):
            self.failures.append(f"{kind}: the broker kept the connection")

    def run(self) -> None:
        kinds = [self.random_bytes, self.absurd_size, self.truncated, self.unknown_key,
                 self.garbage_body, self.good_then_garbage, self.mutated_produce,
                 self.produce_then_reset, self.long_poll_then_leave]
        try:
            for _ in range(ATTACKS_PER_THREAD):
                attack = self.rng.choice(kinds)
                self.counts[attack.__name__] = self.counts.get(attack.__name__, 0) + 1
                with self._connect() as sock:
                    try:
                        attack(sock)
                    except (ConnectionResetError, BrokenPipeError):
                        pass  # the broker hung up mid-send: an answer too
        except Exception as exc:  # noqa: BLE001 - reported to the test
            self.failures.append(f"{type(exc).__name__}: {exc}")

    def _garbage(self, size: int) -> bytes:
        """Random bytes, any lengths they spell included (seglog.server.request_lengths
        checks every length against the bytes left before kio allocates anything)."""
        return self.rng.randbytes(size)

    def random_bytes(self, sock: socket.socket) -> None:
        size = self.rng.choice([self.rng.randrange(0, 64), self.rng.randrange(-2**31, 2**31)])
        # An API key no one serves (0x7fxx), then random bytes.
        sock.sendall(struct.pack(">i", size) + b"\x7f"
                     + self.rng.randbytes(self.rng.randrange(0, 200)))
        _closed(sock)  # answered, closed, or waiting for the rest: all fine, bounded

    def absurd_size(self, sock: socket.socket) -> None:
        size = self.rng.choice([REQUEST_MAX_BYTES + 1, 2**31 - 1, -1, -(2**31), 0])
        sock.sendall(struct.pack(">i", size) + b"\x00" * 8)
        self._expect_closed("absurd size", sock)

    def truncated(self, sock: socket.socket) -> None:
        frame = request_frame(PRODUCE, 3, 1, self.produce_body)
        sock.sendall(frame[:self.rng.randrange(1, len(frame) - 1)])
        # Then the client goes away mid-frame.

    def unknown_key(self, sock: socket.socket) -> None:
        sock.sendall(request_frame(self.rng.choice([-1, 99, 1000, 32767]), 0, 1))
        self._expect_closed("unknown api key", sock)

    def garbage_body(self, sock: socket.socket) -> None:
        key, version = self.rng.choice([(PRODUCE, 3), (PRODUCE, 9), (FETCH, 4), (FETCH, 12)])
        body = self._garbage(self.rng.randrange(0, 64))
        sock.sendall(request_frame(key, version, 1, body, flexible=version >= 9))
        _closed(sock)  # a body that happens to decode may be answered

    def good_then_garbage(self, sock: socket.socket) -> None:
        sock.sendall(request_frame(API_VERSIONS, 0, 7)
                     + request_frame(self.rng.choice([1000, -5]), 0, 8, b"junk"))
        sock.settimeout(WAIT_S)
        answer = read_frame(sock)
        # Kafka answers the ApiVersions first (test_answers_before_a_bad_frame_are_written);
        # here only the close is required.
        if answer is not None:
            if struct.unpack_from(">ih", answer) != (7, 0):
                self.failures.append(f"good then garbage: ApiVersions answered {answer!r:.40}")
            self._expect_closed("good then garbage", sock)

    def mutated_produce(self, sock: socket.socket) -> None:
        frame = bytearray(request_frame(PRODUCE, 3, 1, self.produce_body))
        # Flips in the record batch (what the data path must check), not in the request's
        # array counts (see _garbage).
        batch_start = len(frame) - self.batch_size
        for _ in range(self.rng.randrange(1, 4)):
            position = self.rng.randrange(batch_start, len(frame))
            frame[position] ^= 1 << self.rng.randrange(8)
        sock.sendall(frame)
        _closed(sock)  # answered with an error or a success (to the noise topic), or closed


    def produce_then_reset(self, sock: socket.socket) -> None:
        # A whole request, then a reset (SO_LINGER 0) before its answer can be read.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.sendall(request_frame(PRODUCE, 3, 1, self.produce_body))

    def long_poll_then_leave(self, sock: socket.socket) -> None:
        # A Fetch v4 at the end of the noise topic waiting up to 10 minutes, then the
        # client goes: the broker must let the long poll go with the connection.
        name = NOISE_TOPIC.encode()
        body = (struct.pack(">iiiib", -1, 600_000, 1, 1 << 20, 0) + struct.pack(">i", 1)
                + struct.pack(">h", len(name)) + name + struct.pack(">i", 1)
                + struct.pack(">iqi", 0, 1 << 40, 1 << 20))
        sock.sendall(request_frame(FETCH, 4, 1, body))


def _trickle(port: int, stop: threading.Event, errors: list[str]) -> None:
    """Announce a frame of the largest allowed size and send a byte now and then until told
    to stop (Kafka holds such a connection; so may seglog)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as sock:
            sock.sendall(struct.pack(">i", REQUEST_MAX_BYTES) + b"\x00\x12")
            while not stop.wait(0.05):
                sock.sendall(b"\x00")
    except (ConnectionResetError, BrokenPipeError):
        pass  # closed by the broker (e.g. idle or size rules): allowed
    except OSError as exc:
        errors.append(f"trickler: {exc}")


@pytest.mark.parametrize("backend", ["native", "pure"])
def test_concurrent_bad_input_while_a_real_client_produces_and_consumes(broker_factory,
                                                                        backend):
    broker = broker_factory(socket_request_max_bytes=REQUEST_MAX_BYTES, backend=backend)
    broker.store.create_topic(REAL_TOPIC, partitions=2)
    broker.store.create_topic(NOISE_TOPIC, partitions=1)
    noise_batch = encode_batch([b"noise-%d" % i for i in range(5)], timestamps_ms=1_700_000_000_000)
    produce_body = _produce_v3(NOISE_TOPIC, 0, noise_batch)

    # The noise request is well-formed as sent: it is acknowledged as Kafka would.
    with connect(broker) as sock:
        sock.sendall(request_frame(PRODUCE, 3, 5, produce_body))
        assert read_frame(sock) is not None

    acked: dict[tuple[int, int], bytes] = {}
    delivery_errors: list[str] = []
    consumed: list[tuple[int, int, bytes]] = []
    consumer_errors: list[str] = []

    def on_delivery(err, msg):
        if err is None:
            acked[(msg.partition(), msg.offset())] = msg.value()
        else:
            delivery_errors.append(str(err))

    def produce() -> None:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap,
                                             "acks": "all", "linger.ms": 2})
        for i in range(RECORDS):
            producer.produce(REAL_TOPIC, b"v%06d" % i, partition=i % 2, on_delivery=on_delivery)
            producer.poll(0)
            if i % 50 == 49:
                time.sleep(0.005)  # spread the load over the attacks
        if producer.flush(WAIT_S):
            delivery_errors.append("unflushed")

    def consume() -> None:
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap,
                                             "group.id": "unused", "enable.auto.commit": False,
                                             "fetch.wait.max.ms": 100})
        consumer.assign([confluent_kafka.TopicPartition(REAL_TOPIC, p, 0) for p in (0, 1)])
        deadline = time.monotonic() + WAIT_S
        try:
            while len(consumed) < RECORDS and time.monotonic() < deadline:
                message = consumer.poll(0.1)
                if message is None:
                    continue
                if message.error() is not None:
                    consumer_errors.append(str(message.error()))
                    continue
                consumed.append((message.partition(), message.offset(), message.value()))
        finally:
            consumer.close()

    stop_trickle = threading.Event()
    trickle_errors: list[str] = []
    tricklers = [threading.Thread(target=_trickle, args=(broker.port, stop_trickle,
                                                         trickle_errors), daemon=True)
                 for _ in range(TRICKLERS)]
    attackers = [Attacker(broker.port, seed, produce_body, len(noise_batch))
                 for seed in range(ATTACKERS)]
    clients = [threading.Thread(target=produce, daemon=True),
               threading.Thread(target=consume, daemon=True)]
    for thread in tricklers + attackers + clients:
        thread.start()
    for thread in attackers + clients:
        thread.join(WAIT_S + 30)
    stop_trickle.set()
    for thread in tricklers:
        thread.join(WAIT_S)
    assert not any(t.is_alive() for t in tricklers + attackers + clients)

    for attacker in attackers:
        assert attacker.failures == [], (attacker.counts, attacker.failures[:5])
    assert trickle_errors == []
    # Every kind of attack ran.
    kinds = set().union(*(a.counts for a in attackers))
    assert len(kinds) == 9, kinds

    # The real client carried on.
    assert delivery_errors == [] and consumer_errors == []
    assert len(acked) == RECORDS
    by_partition = {p: [(o, v) for q, o, v in consumed if q == p] for p in (0, 1)}
    for partition, rows in by_partition.items():
        assert [o for o, _ in rows] == list(range(len(rows)))
        assert [v for _, v in rows] == [b"v%06d" % i for i in range(partition, RECORDS, 2)]
        assert {(partition, o): v for o, v in rows} == \
            {k: v for k, v in acked.items() if k[0] == partition}

    # The broker still serves, and holds no connection once everyone has hung up.
    with connect(broker) as bystander:
        bystander.sendall(request_frame(API_VERSIONS, 0, 42))
        assert struct.unpack_from(">ih", read_frame(bystander)) == (42, 0)
    deadline = time.monotonic() + WAIT_S
    while broker.server.connections and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not broker.server.connections
    assert broker.server.in_flight == 0  # no request of a gone connection is left running

    # Nothing acknowledged is lost; what the attacks got stored is whole batches with
    # valid CRCs.
    real = broker.store.topic(REAL_TOPIC)
    stored = {(p, r.offset): r.value for p in (0, 1) for r in real.log(p).records()}
    assert stored == acked
    noise = list(broker.store.topic(NOISE_TOPIC).log(0).records())
    assert len(noise) >= 5 and len(noise) % 5 == 0


_BAD_FOLLOW_UPS = {
    "unknown api key": request_frame(1000, 0, 8, b"junk"),
    "size above socket.request.max.bytes": struct.pack(">i", 2**31 - 1) + b"\x00" * 8,
    "negative size": struct.pack(">i", -1) + b"\x00" * 8,
    "produce body that does not decode": request_frame(PRODUCE, 3, 8, b"\x01\x02"),
}


@pytest.mark.parametrize("follow_up", sorted(_BAD_FOLLOW_UPS))
def test_answers_before_a_bad_frame_are_written(broker, follow_up):
    broker.store.create_topic(NOISE_TOPIC, partitions=1)
    batch = encode_batch([b"kept"], timestamps_ms=1_700_000_000_000)
    with connect(broker) as sock:
        sock.sendall(request_frame(PRODUCE, 3, 7, _produce_v3(NOISE_TOPIC, 0, batch, acks=1))
                     + _BAD_FOLLOW_UPS[follow_up])
        answers = []
        while (frame := read_frame(sock)) is not None:  # the socket timeout bounds it
            answers.append(struct.unpack_from(">i", frame)[0])
    # The record is stored either way; Kafka also acknowledges it before closing.
    assert [r.value for r in broker.store.topic(NOISE_TOPIC).log(0).records()] == [b"kept"]
    assert answers == [7]


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if not value:
            return bytes(out + bytes([byte]))
        out.append(byte | 0x80)


def test_a_huge_collection_length_does_not_kill_the_broker(tmp_path):
    from seglog.bench import broker as bench

    server = bench.SeglogServe(tmp_path / "data")
    try:
        server.start()
        with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as sock:
            sock.settimeout(WAIT_S)
            # Metadata v9 (flexible): topics, a compact array of 2**32 - 1 entries.
            sock.sendall(request_frame(3, 9, 1, _uvarint(2**32), flexible=True))
            assert _closed(sock)
        assert bench.api_versions_ok("127.0.0.1", server.port, timeout_s=WAIT_S), \
            server.log_tail(5)
    finally:
        code = server.stop()
    assert code == 0, server.log_tail(5)
