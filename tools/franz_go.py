"""franz-go's own integration tests (``pkg/kgo``) against ``seglog serve`` and Apache Kafka.

franz-go is a Go Kafka client whose package tests run against a live broker named by
``KGO_SEEDS``; they exercise produce, consume, groups (classic and KIP-848), transactions and
admin paths the way a demanding client does. This tool fetches the pinned module from the Go
module proxy (``go mod download``), copies ``pkg/kgo`` to a scratch dir, starts the brokers it
is asked for (a fresh ``python -m seglog serve``, or real Kafka 4.4 from
``ci/kafka-ref.sh``'s jars), runs ``go test -json`` against each, and prints one line per
top-level test: PASS, FAIL or SKIP on each broker, then the counts. The exit status is 1
when a test that passes against Kafka does not pass against seglog.

    PYTHONPATH=src python tools/franz_go.py                        # both brokers
    PYTHONPATH=src python tools/franz_go.py --brokers seglog --run 'TestGroup'
    PYTHONPATH=src python tools/franz_go.py --json results.json
    PYTHONPATH=src python tools/franz_go.py --run '^TestShareGroup' --records 2000
    PYTHONPATH=src python tools/franz_go.py --brokers kafka-cluster,seglog-cluster

``kafka-cluster`` and ``seglog-cluster`` are three brokers each (Kafka 4.4 in KRaft mode with
one controller node; seglog on its own ZooKeeper, as ``seglog cluster`` starts it), and the
tests run with franz-go's own default of replication factor 3 (``KGO_TEST_RF``), so every
produce with acks=all waits for two followers and the coordinators' topics are replicated:
the same suite as judge of the replicated path. A test that passes on ``kafka-cluster`` and
not on ``seglog-cluster`` is a regression too.

``kafka-tls`` and ``seglog-tls`` are one broker each with an SSL listener beside the PLAINTEXT
one (a CA and the broker's certificate made with ``openssl``, a PEM keystore, Kafka's settings
on both) and a SASL_PLAINTEXT one asking SCRAM-SHA-256 (a user made at format time); the tests
connect only to the SSL listener (franz-go's ``KGO_TEST_TLS``), so every request and response
of the suite, the large fetches included, crosses TLS, and its SCRAM tests log in on the SASL
listener. franz-go's TestIssue769 sets its own dialer, which its TLS option refuses (the test
then panics and ends the run): skip it there (``--skip '^TestIssue769$'``).

The share-group tests (``TestShareGroup*``: KIP-932 share consumers, the chained share ETL,
acknowledgement on close, the share-group offsets admin APIs) need nothing more than the
broker configs below; franz-go skips them when the broker lacks ShareFetch/ShareAcknowledge
v2. ``--records`` bounds their ETL (franz-go's default of 500,000 records takes long);
``tests/kafka/share/test_share_franz_go.py`` runs them under the ``franz_go`` marker.

Needs ``go`` (1.22+) and network access to the Go module proxy; Java 17+ for Kafka. Each
``go test`` is bounded by ``--timeout-s``; the brokers are stopped by pid afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FRANZ_GO = "github.com/twmb/franz-go"
FRANZ_GO_VERSION = "v1.22.3"
#: Broker configs both brokers get: franz-go's tests create topics themselves and expect
#: auto-creation off; transactions and share groups (``__share_group_state``) with one broker
#: need the internal topics at RF 1.
BROKER_CONFIG = {
    "auto.create.topics.enable": "false",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}


def module_dir() -> Path:
    """The franz-go module's directory in the Go module cache (downloaded when missing)."""
    proc = subprocess.run(["go", "mod", "download", "-json", f"{FRANZ_GO}@{FRANZ_GO_VERSION}"],
                          capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"go mod download failed: {proc.stderr.strip() or proc.stdout}")
    return Path(json.loads(proc.stdout)["Dir"])


def prepare(scratch: Path) -> Path:
    """A writable copy of the module (the cache is read-only); returns its ``pkg/kgo``."""
    copy = scratch / "franz-go"
    shutil.copytree(module_dir(), copy, dirs_exist_ok=True)
    for path in copy.rglob("*"):
        path.chmod(path.stat().st_mode | 0o200)
    return copy / "pkg" / "kgo"


def run_tests(kgo: Path, seeds: str, *, run: str | None, timeout_s: float,
              skip: str | None = None,
              records: int | None = None, parallel: int | None = None, rf: int = 1,
              test_output: dict[str, list[str]] | None = None, log_level: str = "none",
              raw_output: Path | None = None, chaos: bool = False,
              count: int = 1, client_env: dict[str, str] | None = None) -> dict[str, str]:
    """``{test name: PASS|FAIL|SKIP}`` of the top-level tests of ``go test -json`` against
    ``seeds`` (``run``, ``skip``: go test's -run and -skip patterns); a test that never
    finished (the run timed out, or another test's panic ended the run) is FAIL.
    ``test_output``, when given, gets each top-level test's output lines (its subtests'
    included). ``parallel``:
    ``go test -parallel`` (how many ``t.Parallel`` tests run at once; Go's default is
    GOMAXPROCS). ``rf``: the replication factor of the topics the tests create (1 for one
    broker; franz-go's own default is 3). ``log_level``: franz-go's client log level in the
    tests (``KGO_LOG_LEVEL``: none, error, warn, info, debug); ``raw_output``: a file for
    ``go test -json``'s whole output. ``chaos``: franz-go's ``KGO_TEST_CHAOS`` (every
    connection the tests' clients dial dies 0.5-1.5 s after it opens, forcing reconnects,
    produce retries and sequence rewinds); ``count``: ``go test -count``, each test run that
    many times, and a test is FAIL when any of its runs failed. ``client_env``: more of the
    tests' settings (``KGO_TEST_TLS`` for brokers whose ``seeds`` are TLS listeners)."""
    env = dict(os.environ, KGO_SEEDS=seeds, KGO_TEST_RF=str(rf), KGO_LOG_LEVEL=log_level,
               GOFLAGS="-mod=mod", **(client_env or {}))
    if records:  # franz-go's KGO_TEST_RECORDS: records per ETL test (default 500,000)
        env["KGO_TEST_RECORDS"] = str(records)
    if chaos:
        env["KGO_TEST_CHAOS"] = "1"
    cmd = ["go", "test", "-json", f"-count={count}", f"-timeout={int(timeout_s)}s"]
    if run:
        cmd += ["-run", run]
    if skip:
        cmd += ["-skip", skip]
    if parallel:
        cmd.append(f"-parallel={parallel}")
    cmd.append(".")
    outcome: dict[str, str] = {}
    started: set[str] = set()
    try:
        proc = subprocess.run(cmd, cwd=kgo, env=env, capture_output=True, text=True,
                              timeout=timeout_s + 120, check=False)
        output = proc.stdout
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
    if raw_output is not None:
        raw_output.write_text(output, encoding="utf-8")
    for line in output.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        test = event.get("Test")
        if test_output is not None and test and event.get("Action") == "output":
            line_out = event.get("Output", "").rstrip()
            test_output.setdefault(test.split("/")[0], []).append(line_out)
        if not test or "/" in test:  # subtests are counted in their parent
            continue
        action = event.get("Action")
        if action == "run":
            started.add(test)
        elif action in ("pass", "fail", "skip") and outcome.get(test) != "FAIL":
            outcome[test] = action.upper()
    for test in started - outcome.keys():
        outcome[test] = "FAIL"
    return outcome


def start_seglog(scratch: Path):  # -> SeglogServe
    """A fresh ``seglog serve`` on a free loopback port."""
    from seglog.bench.broker import SeglogServe

    broker = SeglogServe(scratch / "seglog-data", config=BROKER_CONFIG)
    broker.start()
    return broker


def start_kafka(scratch: Path):  # -> KafkaBroker
    """A fresh Kafka 4.4 broker (KRaft, one node) from ``ci/kafka-ref.sh``'s jars."""
    from seglog.bench.kafka import KafkaBroker, find_kafka

    ref, why = find_kafka()
    if ref is None:
        raise RuntimeError(f"no Kafka jars: {why}")
    broker = KafkaBroker(ref, scratch / "kafka", extra_properties=BROKER_CONFIG)
    broker.format()
    broker.start()
    return broker


#: The SCRAM user both secured brokers are formatted with (franz-go's TestSCRAMAuth logs in
#: as it; TestSCRAMAuthBadCredentials must be refused with another).
SCRAM_USER, SCRAM_PASSWORD = "franz", "franz-secret"
SCRAM_FORMAT = f"SCRAM-SHA-256=[name={SCRAM_USER},password={SCRAM_PASSWORD}]"


#: The SASL_PLAINTEXT listener's mechanism, in Kafka's settings (the same for both brokers).
SCRAM_LISTENER_CONFIG = {
    "sasl.enabled.mechanisms": "SCRAM-SHA-256",
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
        "org.apache.kafka.common.security.scram.ScramLoginModule required;"}


class _SecuredBroker:
    """A started broker with a PLAINTEXT, an SSL and a SASL_PLAINTEXT (SCRAM-SHA-256)
    listener. The tests reach it through the SSL one (``KGO_TEST_TLS``: every client the suite
    makes with its helpers dials TLS and trusts the CA that signed the broker's certificate),
    so Metadata, the coordinators and every data request go over TLS; franz-go's SCRAM tests
    log in on the SASL one (``KGO_TEST_SCRAM``, ``KGO_TEST_SCRAM_SEEDS``)."""

    def __init__(self, broker: Any, ssl_port: int, sasl_port: int, ca_cert: Path):
        self.broker = broker
        self.ssl_port = ssl_port
        self.client_env = {"KGO_TEST_TLS": f"ca:{ca_cert}",
                           "KGO_TEST_SCRAM": f"{SCRAM_USER}:{SCRAM_PASSWORD}",
                           "KGO_TEST_SCRAM_SEEDS": f"127.0.0.1:{sasl_port}"}

    @property
    def bootstrap(self) -> str:
        """The SSL listener's address."""
        return f"127.0.0.1:{self.ssl_port}"

    def stop(self) -> None:
        """Stop the broker."""
        self.broker.stop()


def _certificates(scratch: Path) -> tuple[Path, Path]:
    """``(ca_cert, broker_pem)`` in ``scratch/tls-certs`` (made once per scratch dir)."""
    from seglog.bench.broker_tls import make_certificates

    directory = scratch / "tls-certs"
    if (directory / "broker.pem").exists():
        return directory / "ca.crt", directory / "broker.pem"
    return make_certificates(directory)


def start_seglog_secured(scratch: Path) -> _SecuredBroker:
    """A fresh ``seglog serve`` as :func:`start_seglog`, with the SSL and SCRAM listeners of
    :class:`_SecuredBroker` (its SCRAM user made by ``seglog format --add-scram``)."""
    from seglog.bench.broker import SeglogServe
    from seglog.bench.broker_tls import seglog_ssl_listener_config
    from seglog.bench.kafka import free_port

    ca_cert, broker_pem = _certificates(scratch)
    ssl_port, sasl_port = free_port(), free_port()
    config = {**BROKER_CONFIG, **SCRAM_LISTENER_CONFIG, **seglog_ssl_listener_config(
        ssl_port, broker_pem, sasl_plaintext_port=sasl_port)}
    data_dir = scratch / "seglog-tls-data"
    subprocess.run([sys.executable, "-m", "seglog", "format", "--data-dir", str(data_dir),
                    "--add-scram", SCRAM_FORMAT], check=True, capture_output=True,
                   timeout=120)
    broker = SeglogServe(data_dir, config=config)
    broker.start()
    return _SecuredBroker(broker, ssl_port, sasl_port, ca_cert)


def start_kafka_secured(scratch: Path) -> _SecuredBroker:
    """A fresh Kafka 4.4 broker as :func:`start_kafka`, with the same listeners and settings
    as :func:`start_seglog_secured` (its SCRAM user made by ``kafka-storage format
    --add-scram``)."""
    from seglog.bench.broker_tls import add_kafka_ssl_listener
    from seglog.bench.kafka import KafkaBroker, find_kafka, free_port

    ref, why = find_kafka()
    if ref is None:
        raise RuntimeError(f"no Kafka jars: {why}")
    ca_cert, broker_pem = _certificates(scratch)
    ssl_port, sasl_port = free_port(), free_port()
    broker = KafkaBroker(ref, scratch / "kafka-tls",
                         extra_properties={**BROKER_CONFIG, **SCRAM_LISTENER_CONFIG})
    add_kafka_ssl_listener(broker, ssl_port, broker_pem, sasl_plaintext_port=sasl_port)
    broker.format(add_scram=[SCRAM_FORMAT])
    broker.start()
    return _SecuredBroker(broker, ssl_port, sasl_port, ca_cert)


#: :data:`BROKER_CONFIG` without the internal topics' replication settings: the clusters keep
#: their own (factor 3, min ISR 2).
CLUSTER_CONFIG = {k: v for k, v in BROKER_CONFIG.items()
                  if "replication.factor" not in k and "min.isr" not in k}


class _Cluster:
    """A started cluster (:class:`~seglog.cluster.local.LocalCluster` or
    :class:`~seglog.bench.cluster.KafkaCluster`) as :func:`main` uses a broker:
    ``bootstrap`` and ``stop()``."""

    def __init__(self, cluster: Any):
        self.cluster = cluster

    @property
    def bootstrap(self) -> str:
        """Every broker's ``host:port``."""
        return str(self.cluster.bootstrap_servers)

    def stop(self) -> None:
        """Every node (the seglog cluster: brokers, then ZooKeeper; Kafka's: SIGKILL)."""
        self.cluster.down()


def start_seglog_cluster(scratch: Path) -> _Cluster:
    """Three ``seglog serve`` brokers on their own ZooKeeper, each ready (the readiness
    check's own ZooKeeper client closed: idle through the tests, its session would expire)."""
    from seglog.cluster.local import LocalCluster

    cluster = LocalCluster(scratch / "seglog-cluster", 3, broker_configs=CLUSTER_CONFIG)
    cluster.up()
    cluster.close_clients()
    return _Cluster(cluster)


def start_kafka_cluster(scratch: Path) -> _Cluster:
    """Kafka 4.4 in KRaft mode: one controller node and three brokers, formatted and
    started."""
    from seglog.bench.cluster import KafkaCluster
    from seglog.bench.kafka import find_kafka

    ref, why = find_kafka()
    if ref is None:
        raise RuntimeError(f"no Kafka jars: {why}")
    cluster = KafkaCluster(ref, scratch / "kafka-cluster", 3)
    extra = "".join(f"{k}={v}\n" for k, v in CLUSTER_CONFIG.items())
    for node in cluster.brokers.values():  # a later key wins in a .properties file
        with open(node.properties_path, "a", encoding="utf-8") as f:
            f.write(extra)
    cluster.up()
    return _Cluster(cluster)


def lost_tests(reference: dict[str, str], candidate: dict[str, str]) -> list[str]:
    """The tests that pass on ``reference`` and not on ``candidate`` (``{test: outcome}``
    each, as :func:`run_tests` returns), sorted."""
    return sorted(t for t, outcome in reference.items()
                  if outcome == "PASS" and candidate.get(t) != "PASS")


#: Each broker kind: how it starts and the replication factor of the tests' topics.
STARTERS = {"kafka": (start_kafka, 1), "seglog": (start_seglog, 1),
            "kafka-cluster": (start_kafka_cluster, 3),
            "seglog-cluster": (start_seglog_cluster, 3),
            "kafka-tls": (start_kafka_secured, 1), "seglog-tls": (start_seglog_secured, 1)}
#: (reference, candidate): a test the reference passes and the candidate does not fails the run.
PAIRS = (("kafka", "seglog"), ("kafka-cluster", "seglog-cluster"), ("kafka-tls", "seglog-tls"))


def main(argv: list[str] | None = None) -> int:
    """Run the tests; print the table and counts; exit 1 when seglog fails what Kafka passes."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", default="kafka,seglog",
                        help="comma-separated: kafka, seglog, kafka-cluster, seglog-cluster, "
                             "kafka-tls, seglog-tls (default kafka,seglog)")
    parser.add_argument("--run", default=None, help="go test -run pattern (default: all)")
    parser.add_argument("--skip", default=None, help="go test -skip pattern (default: none)")
    parser.add_argument("--timeout-s", type=float, default=1200.0,
                        help="go test -timeout per broker (default 1200)")
    parser.add_argument("--records", type=int, default=None,
                        help="KGO_TEST_RECORDS: records per ETL test (franz-go's default "
                             "500000)")
    parser.add_argument("--parallel", type=int, default=None,
                        help="go test -parallel: tests run at once (default GOMAXPROCS)")
    parser.add_argument("--json", default=None, help="write the results to this JSON file")
    parser.add_argument("--keep-dir", default=None, metavar="DIR",
                        help="work in DIR and keep it (the brokers' data and logs) instead of a "
                             "temporary directory removed at the end")
    parser.add_argument("--log-level", default="none",
                        choices=("none", "error", "warn", "info", "debug"),
                        help="franz-go's client log level in the tests (KGO_LOG_LEVEL); with "
                             "--keep-dir each broker's whole go test output is kept there")
    parser.add_argument("--chaos", action="store_true",
                        help="KGO_TEST_CHAOS=1: the tests' connections die 0.5-1.5 s after "
                             "they open (franz-go's chaos dialer)")
    parser.add_argument("--count", type=int, default=1,
                        help="go test -count: run each test this many times (a test fails "
                             "when any run fails)")
    parser.add_argument("--show-failures", type=int, default=0, metavar="LINES",
                        help="print the last LINES output lines of each failed test")
    args = parser.parse_args(argv)
    if shutil.which("go") is None:
        print("franz_go: go not found", file=sys.stderr)
        return 2
    results: dict[str, dict[str, str]] = {}
    with contextlib.ExitStack() as stack:
        if args.keep_dir:
            scratch = Path(args.keep_dir).resolve()
            scratch.mkdir(parents=True, exist_ok=True)
        else:
            scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="franz-go-")))
        kgo = prepare(scratch)
        for name in [b.strip() for b in args.brokers.split(",") if b.strip()]:
            if name not in STARTERS:
                parser.error(f"unknown broker {name!r}: one of {', '.join(STARTERS)}")
            starter, rf = STARTERS[name]
            broker = starter(scratch)
            t0 = time.monotonic()
            output: dict[str, list[str]] = {}
            try:
                results[name] = run_tests(kgo, broker.bootstrap, run=args.run, skip=args.skip,
                                          timeout_s=args.timeout_s, records=args.records,
                                          parallel=args.parallel, rf=rf,
                                          test_output=output, log_level=args.log_level,
                                          raw_output=(scratch / f"{name}-go-test.jsonl"
                                                      if args.keep_dir else None),
                                          chaos=args.chaos, count=args.count,
                                          client_env=getattr(broker, "client_env", None))
            finally:
                broker.stop()
            for test, outcome in sorted(results[name].items()):
                if outcome == "FAIL" and args.show_failures > 0:
                    print(f"--- {name}: {test} failed:", file=sys.stderr)
                    print("\n".join(output.get(test, [])[-args.show_failures:]),
                          file=sys.stderr)
            print(f"{name}: {time.monotonic() - t0:.0f} s", file=sys.stderr)
    names = sorted({test for outcome in results.values() for test in outcome})
    brokers = list(results)
    width = max([8] + [len(b) + 2 for b in brokers])
    print("test".ljust(48) + "".join(b.ljust(width) for b in brokers))
    for test in names:
        print(test.ljust(48) + "".join(results[b].get(test, "-").ljust(width) for b in brokers))
    for b in brokers:
        counts = {k: sum(1 for v in results[b].values() if v == k)
                  for k in ("PASS", "FAIL", "SKIP")}
        print(f"{b}: {counts['PASS']} passed, {counts['FAIL']} failed, "
              f"{counts['SKIP']} skipped ({FRANZ_GO} {FRANZ_GO_VERSION} pkg/kgo)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    regressions = []
    for reference, candidate in PAIRS:
        if reference in results and candidate in results:
            lost = lost_tests(results[reference], results[candidate])
            if lost:
                print(f"pass on {reference}, not on {candidate}: " + ", ".join(lost))
            regressions += lost
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
