"""KIP-890 part 2: a ``transaction.version`` 2 producer (EndTxn v5) may abort a transaction
with nothing in it, and every such abort bumps its epoch, as Kafka 4.4 answers it. franz-go
(v1.22) relies on this: when a transaction's produces were attempted but none succeeded, it
aborts (the Produce v12 may have added a partition before its append failed), whatever the
state the coordinator is in. The same raw-wire sequence against real Kafka 4.4 and
``seglog serve``: aborts from Empty, CompleteCommit and CompleteAbort, their retries from the
epoch before the bump (and the other outcome from that epoch), a commit of nothing, and a
transaction at the epoch after those aborts give the same error codes and the same epochs
relative to the first one.
"""

from __future__ import annotations

import datetime
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from seglog import error_codes as codes

from test_admin_differential import Client, real_kafka  # noqa: F401 - the fixture
from test_txn_v2_differential import RETRY_S_MAX, _batch, _end_txn, _produce

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

TXN_ID = "v2e-tx"
TOPIC = "v2e"


def _init(client: Client) -> tuple[int, int, int]:
    deadline = time.monotonic() + RETRY_S_MAX
    while True:  # the coordinator's topic is made on first use (FindCoordinator)
        client.call(10, 4, key_type=1, coordinator_keys=(TXN_ID,))
        init = client.call(22, 5, transactional_id=TXN_ID, transaction_timeout=
                           datetime.timedelta(seconds=60), producer_id=-1, producer_epoch=-1)
        if init.error_code not in (codes.COORDINATOR_NOT_AVAILABLE, codes.NOT_COORDINATOR,
                                   codes.COORDINATOR_LOAD_IN_PROGRESS,
                                   codes.CONCURRENT_TRANSACTIONS) \
                or time.monotonic() > deadline:
            return int(init.error_code), int(init.producer_id), int(init.producer_epoch)
        time.sleep(0.2)


def scenario(bootstrap: str) -> list:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(20)
    client = Client(bootstrap)
    try:
        error, pid, e0 = _init(client)
        out: list = [("init", error)]

        def rel(answer: tuple[int, int, int]) -> tuple:
            error, producer_id, epoch = answer
            return (error, producer_id == pid if producer_id != -1 else -1,
                    epoch - e0 if epoch != -1 else -1)

        def end(label: str, epoch: int, commit: bool) -> None:
            out.append((label, rel(_end_txn(client, TXN_ID, pid, e0 + epoch, commit))))

        end("abort empty", 0, False)
        end("abort empty retry", 0, False)
        end("commit after empty abort retry", 0, True)
        end("commit empty", 1, True)
        end("abort empty again", 1, False)
        out.append(("produce after empty aborts",
                    _produce(client, 12, TXN_ID, TOPIC, _batch(pid, e0 + 2, 0, b"a"))))
        end("commit", 2, True)
        end("abort from the epoch before the commit", 2, False)
        end("abort after commit", 3, False)
        end("abort after abort", 4, False)
        end("abort retry after abort", 4, False)
        out.append(("produce next", _produce(client, 12, TXN_ID, TOPIC,
                                             _batch(pid, e0 + 5, 0, b"b"))))
        end("abort ongoing", 5, False)
        end("commit of an abort's retry", 5, True)
        out.append(("init again",) + tuple(
            x - e0 if i == 2 else (x == pid if i == 1 else x)
            for i, x in enumerate(_init(client))))
        return out
    finally:
        client.close()


def test_aborts_of_empty_transactions_answer_as_kafka_does(real_kafka, broker):  # noqa: F811
    kafka = scenario(real_kafka.bootstrap)
    seglog = scenario(broker.bootstrap)
    assert kafka[0] == ("init", 0)
    for ours, theirs in zip(seglog, kafka):
        assert ours == theirs, (ours, theirs)
    assert len(seglog) == len(kafka)
