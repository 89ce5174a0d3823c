"""``bench/producefloor.py`` (issue 27, the produce-CPU floor): a real confluent-kafka producer
with librdkafka's defaults (acks=all) gets every record acknowledged by the floor, at the
offsets the floor counts, and the floor's file holds exactly the batches it was sent (read back
and decoded by seglog's codec, CRCs checked). A few thousand records for a fraction of a
second; the measurement itself runs from the command line (``producewire.py --floor``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "bench" / "producefloor.py"


def _floor_module():
    spec = importlib.util.spec_from_file_location("bench_producefloor", _PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_producefloor"] = module
    spec.loader.exec_module(module)
    return module


def test_the_floor_takes_a_default_confluent_kafka_producers_records(tmp_path):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from seglog.pure import codec

    floor = _floor_module().FloorServe(tmp_path / "floor")
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
