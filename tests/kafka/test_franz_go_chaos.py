"""franz-go's ETL tests under its chaos dialer (``KGO_TEST_CHAOS=1``: every connection the
tests' clients dial dies 0.5-1.5 s after it opens), against one Kafka 4.4 broker and one
``seglog serve``: ``TestGroupETL`` (a producer, then a chain of classic, cooperative, static and
KIP-848 consumer groups that each consume, re-produce and commit, every record exactly once in
order per key) and ``TestShareGroupETL`` (share groups over the same chain). The dying
connections drive what a quiet run never does: in-flight produce requests lost mid-answer
and retried on a new connection (idempotent sequences rewound), fetches and commits cut off,
group members reconnecting in the middle of a rebalance. Every test that passes on Kafka must
pass on seglog (run again once alone on a fresh broker before it fails this test, as the
cluster comparison does).

Measured here (session 19, ``tools/franz_go.py --chaos --count 2`` on single brokers and
``--count 3`` with TestTxnEtl on three-broker clusters): all passed on both kinds. About three
minutes, so behind the ``franz_go`` marker (``python -m pytest -q -m franz_go
tests/kafka/test_franz_go_chaos.py``); needs ``go``, the Go module proxy (or the module in the
Go module cache), Java and the Kafka jars.
"""

from __future__ import annotations

import pytest

from franz_go_runner import compare_with_kafka, skip_unless_selected

pytestmark = pytest.mark.franz_go

#: KGO_TEST_RECORDS: records per ETL test (franz-go's default is 500,000).
ETL_RECORDS = 5000
TESTS = "^(TestGroupETL|TestShareGroupETL)$"


@pytest.fixture(autouse=True)
def _selected(request):
    skip_unless_selected(request, "franz-go's ETL tests under chaos", needs_kafka=True)


def test_franz_go_etl_under_connection_chaos_passes_on_seglog_as_on_kafka(tmp_path,
                                                                          monkeypatch):
    passed = compare_with_kafka(tmp_path, monkeypatch, reference="kafka",
                                candidate="seglog", pattern=TESTS, passed_min=2,
                                records=ETL_RECORDS, chaos=True)
    assert passed == ["TestGroupETL", "TestShareGroupETL"]
