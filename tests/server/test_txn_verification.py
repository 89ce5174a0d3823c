"""KIP-890 part 1 on a lone broker: ``transaction.partition.verification.enable`` (Kafka's
default true) makes the partition leader ask the transaction coordinator before the first
transactional batch of a producer in a partition (INVALID_TXN_STATE with Kafka's message for
Produce up to v10, TRANSACTION_ABORTABLE from v11, nothing appended); false lets it through
(Kafka's behaviour without verification). Produce v12+ (a ``transaction.version`` 2
producer) adds the partition to the transaction whatever the config says (part 2). The
answers themselves are compared with Kafka 4.4 in test_txn_v2_differential.py.
"""

from __future__ import annotations

import datetime
import time

import pytest

from seglog import error_codes as codes
from seglog import get_backend
from seglog.types import TopicPartition

from test_admin_differential import Client

TIMEOUT = datetime.timedelta(seconds=10)


def _produce(client: Client, version: int, producer_id: int, epoch: int, sequence: int):
    m = client.m(0, version)
    records = get_backend("native").encode_batch(
        [b"v"], None, [int(time.time() * 1000)], None, producer_id=producer_id,
        producer_epoch=epoch, base_sequence=sequence, is_transactional=True)
    response = client.call(0, version, transactional_id="vx", acks=-1, timeout=TIMEOUT,
                           topic_data=(m.TopicProduceData(name="vt", partition_data=(
                               m.PartitionProduceData(index=0, records=records),)),))
    answer = response.responses[0].partition_responses[0]
    return int(answer.error_code), getattr(answer, "error_message", None)


@pytest.mark.parametrize("enabled", [True, False])
def test_verification_follows_the_config(broker_factory, tmp_path, enabled):
    broker = broker_factory(data_dir=tmp_path / "data", **{
        "transaction.partition.verification.enable": enabled})
    broker.store.create_topic("vt", 1)
    client = Client(broker.bootstrap)
    try:
        init = client.call(22, 5, transactional_id="vx",
                           transaction_timeout=datetime.timedelta(seconds=60),
                           producer_id=-1, producer_epoch=-1)
        pid, epoch = int(init.producer_id), int(init.producer_epoch)
        log = broker.store.log(("vt", 0))
        if enabled:
            assert _produce(client, 9, pid, epoch, 0) == (
                codes.INVALID_TXN_STATE, "Partition was not added to the transaction")
            assert _produce(client, 11, pid, epoch, 0)[0] == codes.TRANSACTION_ABORTABLE
            assert log.end_offset == 0
        else:
            assert _produce(client, 9, pid, epoch, 0)[0] == codes.NONE
            assert log.end_offset == 1  # (a transaction no coordinator knows: it hangs)
        # v12: the leader adds the partition, whatever the config.
        fresh = client.call(22, 5, transactional_id="vx2",
                            transaction_timeout=datetime.timedelta(seconds=60),
                            producer_id=-1, producer_epoch=-1)
        m = client.m(0, 12)
        records = get_backend("native").encode_batch(
            [b"w"], None, [int(time.time() * 1000)], None, producer_id=int(fresh.producer_id),
            producer_epoch=int(fresh.producer_epoch), base_sequence=0, is_transactional=True)
        response = client.call(0, 12, transactional_id="vx2", acks=-1, timeout=TIMEOUT,
                               topic_data=(m.TopicProduceData(name="vt", partition_data=(
                                   m.PartitionProduceData(index=0, records=records),)),))
        assert int(response.responses[0].partition_responses[0].error_code) == codes.NONE
        description = broker.store.transaction_coordinator().describe("vx2")
        assert (description.state, description.partitions) == (
            "Ongoing", (TopicPartition("vt", 0),))
    finally:
        client.close()
