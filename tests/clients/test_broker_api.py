"""The clients reach the broker side only through ``seglog.broker_api.BrokerApi``.

Three checks: the Store implements every method of the Protocol; the client modules import
neither the store nor a coordinator; and Producer and Consumer do a whole round (produce,
group consume, commit, a transaction with an offset commit, restart of the group) against an
object that exposes *only* the Protocol's names, so a client reaching anything else of the
Store fails here.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import seglog
from seglog.broker_api import BrokerApi
from seglog.clients.consumer import Consumer
from seglog.clients.producer import Producer
from seglog.store import Store
from seglog.storage.transactions import READ_COMMITTED
from seglog.types import TopicPartition

CLIENTS_DIR = Path(seglog.__file__).parent / "clients"


def protocol_names(protocol: type) -> set[str]:
    """The public members a Protocol declares (methods, properties, annotated attributes)."""
    names = {n for n in vars(protocol) if not n.startswith("_")}
    names |= {n for n in getattr(protocol, "__annotations__", {}) if not n.startswith("_")}
    return names


class OnlyTheInterface:
    """Forwards exactly the names of ``BrokerApi`` to a Store; anything else is an
    AttributeError, as it would be on the wire broker's client-side stub."""

    def __init__(self, store: Store):
        self._target = store
        self._names = protocol_names(BrokerApi)

    def __getattr__(self, name: str):
        if name not in self._names:
            raise AttributeError(f"{name!r} is not part of BrokerApi")
        return getattr(self._target, name)


@pytest.fixture
def store(tmp_path, backend):
    with Store(tmp_path, backend=backend, offsets_topic_partitions=2) as s:
        yield s


def test_store_implements_every_method_of_the_interface(store):
    for name in sorted(protocol_names(BrokerApi)):
        assert hasattr(store, name), f"Store lacks BrokerApi.{name}"
        declared = getattr(BrokerApi, name, None)
        if inspect.isfunction(declared):
            wanted = list(inspect.signature(declared).parameters)
            have = list(inspect.signature(getattr(Store, name)).parameters)
            assert have == wanted, f"Store.{name}{have} differs from BrokerApi.{name}{wanted}"


def test_client_modules_import_neither_the_store_nor_a_coordinator():
    for path in sorted(CLIENTS_DIR.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = ("." * node.level) + (node.module or "")
                targets = [module] + [f"{module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in targets:
                bare = target.lstrip(".")
                assert not (bare.startswith("store") or bare.startswith("seglog.store")
                            or "coordinator" in bare), \
                    f"{path.name}:{node.lineno} imports {target}"


def test_a_whole_round_through_the_interface_only(store):
    store.create_topic("in", partitions=3)
    store.create_topic("out", partitions=1)
    broker = OnlyTheInterface(store)

    producer = Producer(broker, linger_ms=0)
    for i in range(30):
        producer.send("in", b"v%d" % i, key=b"k%d" % (i % 5))
    producer.flush()
    idempotent = Producer(broker, idempotent=True, linger_ms=0)
    assert idempotent.producer_id >= 0 and idempotent.producer_epoch == 0
    idempotent.send("in", b"once", partition=0).result()

    first = Consumer(broker, "g", auto_offset_reset="earliest")
    second = Consumer(broker, "g", auto_offset_reset="earliest")
    first.subscribe(["in"])
    second.subscribe(["in"])
    assert first.assignment() | second.assignment() == {TopicPartition("in", p)
                                                        for p in range(3)}
    seen = first.poll(max_records=1000) + second.poll(max_records=1000)
    assert len(seen) == 31
    first.commit()
    second.commit()
    second.close()  # leaves the group: its partitions move to the first member
    assert first.assignment() == {TopicPartition("in", p) for p in range(3)}
    assert first.poll(max_records=1000) == []

    # consume-transform-produce: output and offsets commit together
    txn = Producer(broker, transactional_id="t1", linger_ms=0)
    reader = Consumer(broker, "g2", auto_offset_reset="earliest")
    reader.assign([("in", 0)])
    records = reader.poll(max_records=1000)
    txn.begin_transaction()
    for record in records:
        txn.send("out", record.value)
    txn.send_offsets_to_transaction({("in", 0): records[-1].offset + 1}, "g2")
    committed_reader = Consumer(broker, "g3", auto_offset_reset="earliest",
                                isolation_level=READ_COMMITTED)
    committed_reader.assign([("out", 0)])
    assert committed_reader.poll() == []  # not committed yet
    assert reader.committed(("in", 0)) is None
    txn.commit_transaction()
    assert [r.value for r in committed_reader.poll(max_records=1000)] == \
        [r.value for r in records]
    assert reader.committed(("in", 0)) == records[-1].offset + 1
    for client in (producer, idempotent, txn):
        client.close()
    for client in (first, reader, committed_reader):
        client.close()
