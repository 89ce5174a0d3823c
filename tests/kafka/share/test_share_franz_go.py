"""franz-go's share-group tests (``TestShareGroup*`` of ``pkg/kgo`` v1.22.3: a 200-record share
consumer, the chained share-group ETL with release, reject, short-lived consumers and
rebalances, acknowledgement on close, and the share-group offsets admin APIs; and
``TestConsumeRegexShareSkipsInternal``) against
``seglog serve`` and, as the reference, Kafka 4.4, through ``tools/franz_go.py``.

franz-go skips its share tests when the broker does not offer ShareFetch and ShareAcknowledge
v2; a skip counts as a failure here. Minutes (a Go build and the ETL), so behind the
``franz_go`` marker (``python -m pytest -q -m franz_go tests/kafka/share``); needs ``go`` and
the Go module proxy (or the module already in the Go module cache).
"""

from __future__ import annotations

import os

import pytest

from franz_go_runner import load_tool, skip_unless_selected, use_this_checkout

pytestmark = pytest.mark.franz_go

#: The share-group tests of pkg/kgo v1.22.3: ``TestShareGroup*`` and the regex subscription
#: of a share consumer that must skip internal topics.
SHARE_TESTS = ("TestShareGroup", "TestShareGroupAckOnClose", "TestShareGroupETL",
               "TestShareGroupOffsetsAdmin", "TestConsumeRegexShareSkipsInternal")
RUN = "^(TestShareGroup.*|TestConsumeRegexShareSkipsInternal)$"
#: KGO_TEST_RECORDS: records of the ETL (franz-go's default is 500,000).
ETL_RECORDS = 2000
TIMEOUT_S = 900.0


@pytest.fixture(autouse=True)
def _selected(request):
    skip_unless_selected(request, "franz-go's share tests")


@pytest.mark.parametrize("kind", ["kafka", "seglog"])
def test_franz_go_share_group_tests(kind, tmp_path, monkeypatch):
    if kind == "kafka":
        from seglog.bench.kafka import find_kafka
        if find_kafka()[0] is None:
            pytest.skip("needs java + the Kafka jars")
    use_this_checkout(monkeypatch)
    franz_go = load_tool()
    kgo = franz_go.prepare(tmp_path)
    broker = {"kafka": franz_go.start_kafka, "seglog": franz_go.start_seglog}[kind](tmp_path)
    try:
        # One test at a time: on this small machine the ETL beside the offsets test made the
        # latter's 30 s deadline pass once against Kafka.
        output: dict[str, list[str]] = {}
        outcome = franz_go.run_tests(kgo, broker.bootstrap, run=RUN, timeout_s=TIMEOUT_S,
                                     records=ETL_RECORDS, parallel=1, test_output=output)
    finally:
        broker.stop()
    failed = {t: output.get(t, [])[-30:] for t in SHARE_TESTS if outcome.get(t) != "PASS"}
    assert {t: outcome.get(t, "not run") for t in SHARE_TESTS} == {
        t: "PASS" for t in SHARE_TESTS}, failed
    assert os.environ.get("PYTHONPATH")  # the seglog broker imported this checkout
