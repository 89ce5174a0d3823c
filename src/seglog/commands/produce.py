"""``seglog produce TOPIC``: records from stdin or a file into a topic.

On a data directory (``--data-dir``) through :meth:`seglog.Store.producer`; on any Kafka
broker (``--bootstrap-server``) through confluent-kafka's Producer. Input is lines (kcat's
``-K`` splits a key off each) or JSON lines (:mod:`seglog.commands.record_format`).

A topic that does not exist: a broker decides (its ``auto.create.topics.enable``); a data
directory creates it with one partition and the directory's topic defaults, as Kafka's
default ``auto.create.topics.enable=true`` would, and says so on stderr.

With ``--transactional-id`` the whole input is one transaction: committed at the end,
aborted on any error (a bad input line, a failed write, Ctrl-C), so a reader with
``read_committed`` sees all of it or none.

Prints ``produced N records to TOPIC`` on stderr, or with ``--output json`` one JSON object
on stdout: ``{"topic", "records", "partitions": {"P": {"first_offset", "last_offset"}}}``
(offsets are unknown with ``--acks 0`` on a broker: no partitions are listed then).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, BinaryIO, Callable, Iterator

from .. import error_codes
from ..errors import InvalidConfigError, LogLockedError, SeglogError
from .record_format import (InputRecord, RecordFormatError, decode_escapes,
                            parse_header_option, parse_json_line, parse_line)
from .target import (EXIT_ERROR, EXIT_OK, EXIT_USAGE, Target, add_target_options,
                     ToolMessages, kafka_error_text, target_from_args)

__all__ = ["add_parser", "main", "open_store", "local_error_text", "client_config",
           "ToolError"]

TOOL = "produce"
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
#: Records sent between two waits for their offsets in the local mode (bounds memory).
_LOCAL_DRAIN_EVERY = 10_000
#: How long the broker mode waits to reach the broker before it gives up (s).
_CONNECT_TIMEOUT_S = 10.0

EPILOG = """\
examples:
  printf 'a\\nb\\n' | seglog produce clicks --data-dir ./data
  printf 'user1:hello\\n' | seglog produce clicks -b 127.0.0.1:9092 -K : -H source=cli
  seglog produce clicks -b 127.0.0.1:9092 --format json --file records.jsonl -z zstd
  seglog produce clicks -b 127.0.0.1:9092 --transactional-id loader-1 < batch.txt

JSON lines input: {"key": "k", "value": "v", "headers": {"h": "x"}, "partition": 0,
"timestamp": 1700000000000}; every field optional; "key_b64"/"value_b64" carry binary
data as base64 (what `seglog consume --format json` prints for bytes that are not UTF-8);
consume's "topic" and "offset" are ignored, so its output can be produced again:
  seglog consume clicks -b HOST:9092 --from-beginning -e -o json |
    seglog produce clicks-copy -b HOST:9092 --format json
"""


class ToolError(Exception):
    """A failure to report as ``seglog <tool>: message`` with an exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR):
        super().__init__(message)
        self.exit_code = exit_code


def local_error_text(exc: BaseException) -> str:
    """A store error as ``KAFKA_ERROR_NAME: message`` (Kafka's name of its error code)."""
    code = getattr(exc, "kafka_error_code", None)
    if isinstance(code, int) and code != 0:
        return f"{error_codes.name(code)}: {exc}"
    return str(exc)


def open_store(data_dir: str, *, read_only: bool = False) -> Any:
    """``seglog.Store(data_dir)``, its lock failure said plainly (a broker may serve it)."""
    from ..store import Store
    try:
        return Store(data_dir, read_only=read_only)
    except LogLockedError as exc:
        raise ToolError(f"{data_dir} is locked by another writer ({exc}): is a broker "
                        f"serving it? use --bootstrap-server") from None


def client_config(target: Target, say: Callable[[str], None]) -> dict[str, Any]:
    """librdkafka's configuration for the tools: the target's, with librdkafka's own log
    lines (a line every few ms while a broker is unreachable) kept off stderr; its errors
    (``error_cb``) are said once per kind instead, as ``NAME: message``."""
    import logging
    config: dict[str, Any] = dict(target.client_config)
    quiet = logging.getLogger("seglog.commands.librdkafka")
    quiet.propagate = False
    quiet.addHandler(logging.NullHandler())
    config["logger"] = quiet
    seen: set[str] = set()

    def on_error(err: Any) -> None:
        text = kafka_error_text(err)
        kind = text.split(":", 1)[0]
        if kind not in seen:
            seen.add(kind)
            say(text)

    config["error_cb"] = on_error
    return config


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``seglog produce``."""
    parser = sub.add_parser(
        TOOL, help="write records from stdin or a file to a topic",
        description="Write records (lines or JSON lines) from stdin or --file to TOPIC, on a "
                    "data directory or a Kafka broker.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("topic", metavar="TOPIC", help="the topic to write to")
    add_target_options(parser)
    parser.add_argument("--file", metavar="FILE",
                        help="read records from FILE instead of stdin")
    parser.add_argument("--format", choices=("lines", "json"), default="lines",
                        help="lines: one value per line (default); json: one JSON record per "
                             "line")
    parser.add_argument("--key-separator", "-K", metavar="SEP",
                        help="lines: the key is the text before the first SEP, the value the "
                             "rest (kcat's -K; escapes such as \\t work)")
    parser.add_argument("--header", "-H", dest="headers", action="append", default=[],
                        metavar="NAME=VALUE",
                        help="a header on every record (repeatable)")
    parser.add_argument("--partition", "-p", type=int, metavar="N",
                        help="write every record to partition N (a JSON record's own "
                             "\"partition\" wins; default: the partitioner: keys by murmur2, "
                             "keyless records spread)")
    parser.add_argument("--compression", "-z", choices=COMPRESSIONS, default="none",
                        help="compression of each batch (Kafka's compression.type; default "
                             "none)")
    parser.add_argument("--acks", choices=("0", "1", "all", "-1"), default="all",
                        help="what a write waits for (Kafka's acks; default all; 0 is "
                             "refused with --data-dir, where every write knows its offset)")
    parser.add_argument("--idempotence", dest="idempotence", action="store_true",
                        default=None,
                        help="an idempotent producer (Kafka's enable.idempotence; the "
                             "default with --acks all)")
    parser.add_argument("--no-idempotence", dest="idempotence", action="store_false",
                        help="a plain producer (no producer id or sequence numbers)")
    parser.add_argument("--transactional-id", metavar="ID",
                        help="write the whole input in one transaction (committed at the "
                             "end, aborted on any error)")
    parser.set_defaults(run=main)
    return parser


def _read_records(stream: BinaryIO, args: argparse.Namespace,
                  key_separator: bytes | None) -> Iterator[InputRecord]:
    """Input records with the command's headers and partition applied; RecordFormatError
    names the bad line's number."""
    common_headers = [parse_header_option(h) for h in args.headers]
    for number, raw in enumerate(stream, start=1):
        line = raw[:-1] if raw.endswith(b"\n") else raw
        if args.format == "json":
            if not line.strip():
                continue  # blank lines between JSON records are not records
            try:
                record = parse_json_line(line)
            except RecordFormatError as exc:
                raise RecordFormatError(f"line {number}: {exc}") from None
        else:
            try:
                record = parse_line(line, key_separator)
            except RecordFormatError as exc:
                raise RecordFormatError(f"line {number}: {exc}") from None
        if common_headers:
            record.headers = common_headers + record.headers
        if record.partition is None:
            record.partition = args.partition
        yield record


class _Offsets:
    """First and last offset written per partition, and the count."""

    def __init__(self) -> None:
        self.records = 0
        self.partitions: dict[int, list[int]] = {}

    def add(self, partition: int, offset: int | None) -> None:
        self.records += 1
        if offset is None or offset < 0:
            return  # acks=0: the broker said nothing (librdkafka gives None or -1001)
        span = self.partitions.get(partition)
        if span is None:
            self.partitions[partition] = [offset, offset]
        else:
            span[0] = min(span[0], offset)
            span[1] = max(span[1], offset)

    def report(self, topic: str, as_json: bool) -> None:
        if as_json:
            doc = {"topic": topic, "records": self.records,
                   "partitions": {str(p): {"first_offset": a, "last_offset": b}
                                  for p, (a, b) in sorted(self.partitions.items())}}
            print(json.dumps(doc), flush=True)
        else:
            print(f"produced {self.records} record{'s' if self.records != 1 else ''} to "
                  f"{topic}", file=sys.stderr, flush=True)


def _idempotence(args: argparse.Namespace) -> bool:
    if args.idempotence is not None:
        return bool(args.idempotence)
    # Kafka's producer default: idempotent unless acks is not "all" (then it turns it off).
    return args.acks in ("all", "-1")


def _say_written_before_error(offsets: _Offsets, say: Callable[[str], None]) -> None:
    if offsets.records:
        say(f"{offsets.records} record{'s' if offsets.records != 1 else ''} before the error "
            f"{'were' if offsets.records != 1 else 'was'} written")


def _produce_local(target: Target, args: argparse.Namespace,
                   records: Iterator[InputRecord], offsets: _Offsets,
                   say: Callable[[str], None]) -> None:
    if args.acks == "0":
        raise ToolError("--acks 0 is refused with --data-dir: the store's producer writes "
                        "in-process and always knows each record's offset; use 1 or all",
                        EXIT_USAGE)
    assert target.data_dir is not None
    store = open_store(target.data_dir)
    try:
        if args.topic not in store:
            store.create_topic(args.topic)
            say(f"created topic {args.topic} with 1 partition (auto.create.topics.enable: "
                f"the data directory's topic defaults)")
        acks: Any = "all" if args.acks in ("all", "-1") else 1
        transactional = args.transactional_id is not None
        if transactional and args.idempotence is False:
            raise ToolError("--transactional-id needs an idempotent producer: drop "
                            "--no-idempotence", EXIT_USAGE)
        producer = store.producer(compression=args.compression, acks=acks,
                                  idempotent=None if transactional else _idempotence(args),
                                  transactional_id=args.transactional_id)
        try:
            if transactional:
                producer.begin_transaction()
            pending: list[Any] = []

            def drain() -> None:
                producer.flush()
                for future in pending:
                    meta = future.result()
                    offsets.add(meta.partition, meta.offset)
                pending.clear()

            for record in records:
                pending.append(producer.send(
                    args.topic, record.value, record.key, partition=record.partition,
                    timestamp_ms=record.timestamp_ms, headers=record.headers or None))
                if len(pending) >= _LOCAL_DRAIN_EVERY:
                    drain()
            drain()
            if transactional:
                producer.commit_transaction()
        except BaseException:
            if transactional and producer.in_transaction:
                try:
                    producer.abort_transaction()
                    say(f"transaction {args.transactional_id} aborted")
                except SeglogError:
                    pass
            elif not transactional:
                # As Kafka's console producer: the records before the error are written.
                try:
                    drain()
                except SeglogError:
                    pass
                _say_written_before_error(offsets, say)
            raise
        finally:
            producer.close()
    finally:
        store.close()


def _produce_broker(target: Target, args: argparse.Namespace,
                    records: Iterator[InputRecord], offsets: _Offsets,
                    say: Callable[[str], None]) -> None:
    from confluent_kafka import KafkaException, Producer

    config = client_config(target, say)
    config["acks"] = "all" if args.acks in ("all", "-1") else args.acks
    config["compression.type"] = args.compression
    if args.transactional_id is not None:
        config["transactional.id"] = args.transactional_id
        if args.idempotence is False:
            raise ToolError("--transactional-id needs an idempotent producer: drop "
                            "--no-idempotence", EXIT_USAGE)
    else:
        config["enable.idempotence"] = _idempotence(args)
    try:
        producer = Producer(config)
    except KafkaException as exc:
        raise ToolError(kafka_error_text(exc), EXIT_USAGE) from None
    failures: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        # An exception escaping a librdkafka callback surfaces as a SystemError elsewhere:
        # keep any inside and report it as a failure.
        try:
            if err is not None:
                failures.append(kafka_error_text(err))
            else:
                offsets.add(msg.partition(), msg.offset())
        except Exception as exc:  # noqa: BLE001 - reported below as the command's failure
            failures.append(f"delivery report: {exc!r}")

    transactional = args.transactional_id is not None
    in_txn = False
    try:
        # Reach the broker before reading any input: an unreachable one is said at once, not
        # after the records' delivery timeout.
        producer.list_topics(timeout=_CONNECT_TIMEOUT_S)
        if transactional:
            producer.init_transactions(30.0)
            producer.begin_transaction()
            in_txn = True
        for record in records:
            kwargs: dict[str, Any] = {"value": record.value, "key": record.key,
                                      "on_delivery": delivered}
            if record.partition is not None:
                kwargs["partition"] = record.partition
            if record.timestamp_ms is not None:
                kwargs["timestamp"] = record.timestamp_ms
            if record.headers:
                kwargs["headers"] = list(record.headers)
            for _attempt in range(10_000):  # the local queue full: wait for deliveries
                try:
                    producer.produce(args.topic, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.1)
            else:
                raise ToolError("the producer's queue stayed full")
            producer.poll(0)
            if failures:
                break
        if transactional and not failures:
            producer.commit_transaction(60.0)  # flushes first
            in_txn = False
        else:
            remaining = producer.flush(60.0)
            if remaining:
                failures.append(f"{remaining} records not delivered within 60 s")
        if failures:
            raise ToolError(failures[0])
    except BaseException as exc:
        if in_txn:
            try:
                producer.abort_transaction(30.0)
                say(f"transaction {args.transactional_id} aborted")
            except KafkaException:
                pass
        elif not transactional:
            # As Kafka's console producer: the records before the error are written.
            producer.flush(_CONNECT_TIMEOUT_S)
            _say_written_before_error(offsets, say)
        if isinstance(exc, KafkaException):
            raise ToolError(kafka_error_text(exc)) from None
        raise


def main(args: argparse.Namespace) -> int:
    """Run ``seglog produce``; returns the exit code."""
    messages = ToolMessages(TOOL, quiet=bool(getattr(args, "quiet", False)))
    say, fail = messages.say, messages.fail

    try:
        target = target_from_args(args)
        key_separator = (decode_escapes(args.key_separator).encode("utf-8")
                         if args.key_separator else None)
        if key_separator is not None and args.format == "json":
            return fail("--key-separator is for --format lines (JSON records carry \"key\")",
                        EXIT_USAGE)
        for header in args.headers:
            parse_header_option(header)
        if args.idempotence and args.acks not in ("all", "-1"):
            # Kafka's producer refuses the same (ConfigException).
            return fail("--idempotence needs --acks all (Kafka: \"Must set acks to all in "
                        "order to use the idempotent producer\")", EXIT_USAGE)
        if args.transactional_id is not None and args.acks not in ("all", "-1"):
            return fail("--transactional-id needs --acks all (a transactional producer is "
                        "idempotent)", EXIT_USAGE)
    except InvalidConfigError as exc:
        return fail(str(exc), EXIT_USAGE)
    except RecordFormatError as exc:
        return fail(str(exc), EXIT_USAGE)
    try:
        stream: BinaryIO = open(args.file, "rb") if args.file else sys.stdin.buffer
    except OSError as exc:
        return fail(f"--file: {exc}", EXIT_ERROR)
    offsets = _Offsets()
    try:
        records = _read_records(stream, args, key_separator)
        if target.local:
            _produce_local(target, args, records, offsets, say)
        else:
            _produce_broker(target, args, records, offsets, say)
    except RecordFormatError as exc:
        return fail(f"bad input, {exc}", EXIT_USAGE)
    except ToolError as exc:
        return fail(str(exc), exc.exit_code)
    except (SeglogError, ValueError, TypeError) as exc:
        return fail(local_error_text(exc), EXIT_ERROR)
    except OSError as exc:
        return fail(str(exc), EXIT_ERROR)
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    finally:
        if args.file:
            stream.close()
    offsets.report(args.topic, target.json)
    return EXIT_OK
