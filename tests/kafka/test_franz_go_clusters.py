"""franz-go's whole ``pkg/kgo`` integration suite (v1.22.3) against three brokers of each kind,
through ``tools/franz_go.py --brokers kafka-cluster,seglog-cluster``: Kafka 4.4 in KRaft mode
(one controller node) as the reference and a seglog cluster on its own ZooKeeper, franz-go's
own replication factor 3, so produce, consume, classic and KIP-848 groups, transactions (v2),
share groups and the admin paths run over the replicated path, with coordinators and
partition leaders on different brokers.

Every test that passes on Kafka must pass on seglog, in the whole run or, once, run again
alone on a fresh seglog cluster (TestGroupETL failed once in five whole runs under this
machine's load and passed alone three times of three; the first failure's output is
printed). It found a real divergence the lone-broker
run could not (the transaction coordinator fenced an EndTxn that Kafka answers
CONCURRENT_TRANSACTIONS while a commit's markers are written, fatal to franz-go's
``TestTxnEtl`` and ``TestShareGroupETL``). About five minutes (two runs of 150 s and a Go
build), so behind the ``franz_go`` marker (``python -m pytest -q -m franz_go
tests/kafka/test_franz_go_clusters.py``); needs ``go``, the Go module proxy (or the module
in the Go module cache), Java and the Kafka jars, and ZooKeeper.
"""

from __future__ import annotations

import os
import sys

import pytest

from franz_go_runner import ROOT, load_tool, skip_unless_selected

pytestmark = pytest.mark.franz_go

#: KGO_TEST_RECORDS: records per ETL test (franz-go's default is 500,000).
ETL_RECORDS = 5000
TIMEOUT_S = 1800.0
#: The reference must have run the suite, not skipped it: Kafka 4.4 passed 152 of the 156
#: top-level tests here (the four SCRAM / OAUTHBEARER / old-broker tests skip on both).
KAFKA_PASSED_MIN = 140


@pytest.fixture(autouse=True)
def _selected(request):
    skip_unless_selected(request, "franz-go's suite on two clusters")
    from seglog.bench.kafka import find_kafka
    if find_kafka()[0] is None:
        pytest.skip("needs java + the Kafka jars")


def test_franz_go_suite_passes_on_a_seglog_cluster_as_on_a_kafka_cluster(tmp_path,
                                                                        monkeypatch):
    # The seglog brokers are `python -m seglog serve` processes of this checkout.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH", "")) if p))
    franz_go = load_tool()
    kgo = franz_go.prepare(tmp_path)
    results: dict[str, dict[str, str]] = {}
    output: dict[str, dict[str, list[str]]] = {}

    def run(kind: str, scratch, pattern: str | None) -> None:
        start, rf = franz_go.STARTERS[kind]
        brokers = start(scratch)
        output[kind] = {}
        try:
            results[kind] = franz_go.run_tests(kgo, brokers.bootstrap, run=pattern,
                                               timeout_s=TIMEOUT_S, records=ETL_RECORDS,
                                               rf=rf, test_output=output[kind])
        finally:
            brokers.stop()

    run("kafka-cluster", tmp_path, None)
    run("seglog-cluster", tmp_path, None)
    kafka, seglog = results["kafka-cluster"], results["seglog-cluster"]
    passed_on_kafka = sorted(t for t, outcome in kafka.items() if outcome == "PASS")
    assert len(passed_on_kafka) >= KAFKA_PASSED_MIN, kafka
    lost = franz_go.lost_tests(kafka, seglog)
    if lost:
        # Once, TestGroupETL failed in the whole run (1 of 5 here) and passed alone 3 of 3:
        # a test that fails again alone, on a fresh cluster, fails this test; the first
        # failure's output is printed either way, for the record.
        first = output["seglog-cluster"]
        for test in lost:
            print(f"--- {test} {seglog.get(test, 'not run')} in the whole run:\n"
                  + "\n".join(first.get(test, [])[-60:]), file=sys.stderr)
        run("seglog-cluster", tmp_path / "again", "^(" + "|".join(lost) + ")$")
        again = franz_go.lost_tests({t: "PASS" for t in lost}, results["seglog-cluster"])
        if again:
            pytest.fail("pass on kafka-cluster, not on seglog-cluster (twice): "
                        + ", ".join(again) + "\n" + "\n".join(
                            f"--- {t}:\n" + "\n".join(output["seglog-cluster"].get(t, [])[-60:])
                            for t in again), pytrace=False)
    print(f"{len(passed_on_kafka)} tests pass on both clusters; seglog: "
          f"{sum(o == 'PASS' for o in seglog.values())} passed the whole run"
          + (f", {', '.join(lost)} only when run again alone" if lost else ""),
          file=sys.stderr)
