"""What TLS costs, in the broker part: the confluent-kafka producer (acks=1) and consumer
through a PLAINTEXT and an SSL listener of the same broker, for ``seglog serve`` and (where
Kafka's jars are cached) the real Kafka broker with the same PEM keystore.

Under TLS seglog's zero-copy path ends at the TLS layer: the record sets a Fetch response
holds as views of the segments are encrypted (copied) a write chunk at a time, and Kafka
cannot use sendfile either (its SSL transport copies through the JVM's SSLEngine). The
certificates (a CA and the broker's, SAN 127.0.0.1) are made with ``openssl`` in the part's
scratch directory; without ``openssl`` the TLS rows are reported as not measured.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable

from .kafka import KafkaBroker, free_port
from .table import Table

__all__ = ["TLS_ROWS", "add_kafka_ssl_listener", "make_certificates", "measure_tls",
           "seglog_ssl_listener_config", "seglog_tls_config"]

OPENSSL_TIMEOUT_S = 60
#: (figure key, row label) of the TLS rows: each measured on both listeners of a broker.
TLS_ROWS = (("ck.produce.acks_1", "confluent-kafka producer, acks=1"),
            ("ck.consume", "confluent-kafka consumer"))


def make_certificates(directory: Path) -> tuple[Path, Path]:
    """``(ca_cert, broker_pem)``: a CA and a broker key and certificate (SAN 127.0.0.1,
    localhost) in one PEM file, made with ``openssl``. RuntimeError without it."""
    if shutil.which("openssl") is None:
        raise RuntimeError("no openssl command")
    directory.mkdir(parents=True, exist_ok=True)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True,
                       timeout=OPENSSL_TIMEOUT_S)

    for name in ("ca", "broker"):
        openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-out", f"{name}.key")
    openssl("req", "-x509", "-new", "-key", "ca.key", "-out", "ca.crt", "-days", "2",
            "-subj", "/O=seglog bench/CN=bench-ca")
    openssl("req", "-new", "-key", "broker.key", "-out", "broker.csr",
            "-subj", "/O=seglog bench/CN=broker")
    (directory / "broker.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "broker.crt", "-days", "2", "-extfile", "broker.ext")
    pem = directory / "broker.pem"
    pem.write_text((directory / "broker.key").read_text() + (directory / "broker.crt")
                   .read_text() + (directory / "ca.crt").read_text())
    return directory / "ca.crt", pem


def seglog_tls_config(broker_pem: Path) -> dict[str, str]:
    """The ssl.* settings both brokers run with (Kafka's names)."""
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(broker_pem)}


def _more_listeners(ssl_port: int, sasl_plaintext_port: int | None) -> str:
    sasl = (f",SASL_PLAINTEXT://127.0.0.1:{sasl_plaintext_port}"
            if sasl_plaintext_port is not None else "")
    return f"SSL://127.0.0.1:{ssl_port}{sasl}"


def seglog_ssl_listener_config(ssl_port: int, broker_pem: Path, *,
                               sasl_plaintext_port: int | None = None) -> dict[str, str]:
    """``seglog serve``'s configs for a PLAINTEXT listener (moved by ``--listen``) and an SSL
    one on 127.0.0.1:``ssl_port`` with ``broker_pem`` as its PEM keystore (and a
    SASL_PLAINTEXT one on ``sasl_plaintext_port`` when given: its mechanisms are the
    caller's settings)."""
    return {"listeners": "PLAINTEXT://127.0.0.1:0,"
                         + _more_listeners(ssl_port, sasl_plaintext_port),
            **seglog_tls_config(broker_pem)}


def add_kafka_ssl_listener(broker: KafkaBroker, ssl_port: int, broker_pem: Path, *,
                           sasl_plaintext_port: int | None = None) -> None:
    """Give a Kafka broker, not yet started, an SSL listener on 127.0.0.1:``ssl_port`` beside
    its PLAINTEXT one, with ``broker_pem`` as its PEM keystore, and a SASL_PLAINTEXT one on
    ``sasl_plaintext_port`` when given (the same listeners as
    :func:`seglog_ssl_listener_config`)."""
    listeners = (f"PLAINTEXT://127.0.0.1:{broker.port},"
                 + _more_listeners(ssl_port, sasl_plaintext_port)
                 + f",CONTROLLER://127.0.0.1:{broker.controller_port}")
    protocols = "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL" + (
        ",SASL_PLAINTEXT:SASL_PLAINTEXT" if sasl_plaintext_port is not None else "")
    extra = {"listeners": listeners, "advertised.listeners": listeners,
             "listener.security.protocol.map": protocols,
             **seglog_tls_config(broker_pem)}
    with broker.properties_path.open("a", encoding="utf-8") as out:
        for key, value in extra.items():
            out.write(f"{key}={value}\n")  # the last of a repeated key wins


def _measure_listener(side: Any, *, listener: str, bootstrap: str, ca_cert: Path | None,
                      records: int, record_bytes: int, run_client: Callable[..., dict],
                      progress: Any, suffix: str) -> None:
    options: dict[str, Any] = {} if ca_cert is None else {"ssl_ca": str(ca_cert)}
    topic = f"tls-{listener.lower()}{suffix}"
    progress.step(f"{side.name}: confluent-kafka producer over {listener}")
    side.record(f"tls.{listener.lower()}.ck.produce.acks_1",
                run_client("produce", bootstrap, topic, records=records,
                           record_bytes=record_bytes, acks="1", **options), "records_per_s")
    progress.step(f"{side.name}: confluent-kafka consumer over {listener}")
    side.record(f"tls.{listener.lower()}.ck.consume",
                run_client("consume", bootstrap, topic, records=records, **options),
                "records_per_s")


def measure_tls(sides: dict[str, Any], *, make_side: Callable[[str], Any], scratch: Path,
                ref: Any, records: int, record_bytes: int, rounds: int,
                run_client: Callable[..., dict], seglog_serve: Callable[..., Any],
                progress: Any, notes: list[str]) -> None:
    """Start a seglog broker (and a Kafka one when ``ref``) with PLAINTEXT and SSL
    listeners, measure :data:`TLS_ROWS` on each listener for ``rounds`` rounds into
    ``sides[name]`` (``tls.<listener>.<row>`` figures), stop them."""
    try:
        ca_cert, broker_pem = make_certificates(scratch / "tls-certs")
    except (RuntimeError, subprocess.CalledProcessError, OSError) as exc:
        notes.append(f"TLS rows not measured: {exc}")
        return
    seglog_ssl_port = free_port()
    server = seglog_serve(scratch / "seglog-tls-data",
                          config=seglog_ssl_listener_config(seglog_ssl_port, broker_pem))
    running: list[tuple[str, str, str, Callable[[], object]]] = []
    try:
        progress.step("starting seglog serve with an SSL listener")
        server.start()
        running.append(("seglog", server.bootstrap, f"127.0.0.1:{seglog_ssl_port}",
                        lambda: server.stop()))
        if ref is not None:
            broker = KafkaBroker(ref, scratch / "kafka-tls")
            ssl_port = free_port()
            add_kafka_ssl_listener(broker, ssl_port, broker_pem)
            progress.step("starting the Kafka broker with an SSL listener")
            broker.format()
            broker.start()
            running.append(("kafka", broker.bootstrap, f"127.0.0.1:{ssl_port}",
                            lambda: broker.stop()))
        for round_index in range(rounds):
            for name, plain, over_tls, _stop in running:
                side = sides.setdefault(name, make_side(name))
                for listener, bootstrap, ca in (("PLAINTEXT", plain, None),
                                                ("SSL", over_tls, ca_cert)):
                    _measure_listener(side, listener=listener, bootstrap=bootstrap,
                                      ca_cert=ca, records=records, record_bytes=record_bytes,
                                      run_client=run_client, progress=progress,
                                      suffix=f"-r{round_index}")
    except RuntimeError as exc:
        notes.append(f"TLS rows incomplete: {str(exc)[:300]}")
    finally:
        for _name, _plain, _tls, stop in reversed(running):
            stop()


def tls_table(sides: dict[str, Any], records: int, record_bytes: int,
              cell: Callable[[Any, str, Callable[[float], str]], str],
              fmt: Callable[[float], str]) -> Table:
    """The TLS table: each row's records/s over PLAINTEXT and SSL on each broker, and the
    SSL / PLAINTEXT ratio."""
    table = Table(f"TLS: the same broker's PLAINTEXT and SSL listeners, {records:,} records "
                  f"of {record_bytes} B (records/s)",
                  ["client", "seglog PLAINTEXT", "seglog SSL", "seglog SSL / PLAINTEXT",
                   "Kafka PLAINTEXT", "Kafka SSL", "Kafka SSL / PLAINTEXT"])
    for key, label in TLS_ROWS:
        cells: list[str] = []
        for name in ("seglog", "kafka"):
            side = sides.get(name)
            plain = cell(side, f"tls.plaintext.{key}", fmt)
            over_tls = cell(side, f"tls.ssl.{key}", fmt)
            figures = side.figures if side is not None else {}
            a, b = figures.get(f"tls.plaintext.{key}"), figures.get(f"tls.ssl.{key}")
            cells += [plain, over_tls, f"{b / a:.2f}x" if a and b else "n/a"]
        table.add(label, *cells)
    return table
