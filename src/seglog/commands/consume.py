"""``seglog consume TOPIC``: print a topic's records.

On a data directory (``--data-dir``) through :meth:`seglog.Store.consumer`; on any Kafka
broker (``--bootstrap-server``) through confluent-kafka's Consumer.

Where it starts (as ``kafka-console-consumer``): the end (latest) by default;
``--from-beginning``; ``--offset N|earliest|latest``; ``--timestamp MS`` (the first record at
or after it). With ``--group G`` a partition with a committed offset starts there (the start
options then only say where a partition without one starts, as Kafka's
``auto.offset.reset``; ``--offset N`` and ``--timestamp`` are refused with a group: use
``seglog groups reset-offsets``), and the offsets are committed after the records are
printed (at-least-once: a crash between printing and committing prints them again).

It follows new records until Ctrl-C or SIGTERM (exit 0, the consumer closed cleanly,
leaving its group), unless ``-e`` (stop at the end of every partition, kcat's ``-e``) or
``-c N`` (stop after N records).

Without a group, ``--data-dir`` opens the directory read-only and follows its writer (a
``seglog produce --data-dir`` in another process may write meanwhile); with a group it opens
it for writing (commits are writes), so nothing else may write it while it runs.

Output: ``--format plain`` (the value per line; ``--print-key``), ``--format json`` (or
``--output json``: JSON lines, binary data as :mod:`seglog.commands.record_format` says:
``"value_b64"`` for bytes that are not UTF-8, or always with ``--binary base64``), or kcat's
``-f FORMAT``.

Exit codes: 0 done or interrupted; 1 the store or broker failed (Kafka's error name);
2 bad usage; 3 the topic (or partition) does not exist.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import uuid
from types import FrameType
from typing import Any, Callable, Iterable

from ..errors import InvalidConfigError, SeglogError
from .produce import ToolError, client_config, local_error_text, open_store
from .record_format import (BINARY_MODES, OutputRecord, RecordFormatError, compile_format,
                            decode_escapes, plain_line, record_json)
from .target import (EXIT_ERROR, EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, Target,
                     ToolMessages, add_target_options, kafka_error_text, target_from_args)

__all__ = ["add_parser", "main"]

TOOL = "consume"
#: How long one poll waits before the loop looks at signals and the end again (ms).
_POLL_MS = 200
#: How long the broker mode waits for the topic's metadata (s).
_METADATA_TIMEOUT_S = 10.0

EPILOG = """\
examples:
  seglog consume clicks --data-dir ./data --from-beginning -e
  seglog consume clicks -b 127.0.0.1:9092 --from-beginning -e --format json
  seglog consume clicks -b 127.0.0.1:9092 -g readers -c 10
  seglog consume clicks -b 127.0.0.1:9092 -p 0 --offset 42 -e -f '%p:%o %k=%s\\n'
  seglog consume clicks -b 127.0.0.1:9092 --timestamp 1700000000000 --print-key

-f fields (kcat's): %t topic, %p partition, %o offset, %k key, %s value, %K key size,
%S value size (-1 null), %T timestamp (ms), %h headers (k=v,k2=v2), %% a percent sign;
\\n \\t \\r escapes. JSON lines: {"topic","partition","offset","timestamp","key","value",
"headers":[{"key","value"}]}; bytes that are not UTF-8 appear as "key_b64"/"value_b64"
(base64) instead of "key"/"value" (always, with --binary base64).
"""


def _offset_option(text: str) -> str | int:
    if text in ("earliest", "latest"):
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an offset >= 0, earliest or latest, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"an offset must be >= 0, not {text!r}")
    return value


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text!r}")
    return value


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``seglog consume``."""
    parser = sub.add_parser(
        TOOL, help="print a topic's records (follows new ones until Ctrl-C unless -e / -c)",
        description="Print TOPIC's records from a data directory or a Kafka broker.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("topic", metavar="TOPIC", help="the topic to read")
    add_target_options(parser)
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true",
                       help="start at each partition's first record (default: the end)")
    start.add_argument("--offset", type=_offset_option, metavar="N|earliest|latest",
                       help="start at offset N of each partition (or earliest / latest)")
    start.add_argument("--timestamp", type=_non_negative, metavar="MS",
                       help="start at the first record with a timestamp >= MS (ms since "
                            "the epoch)")
    parser.add_argument("--partition", "-p", type=_non_negative, metavar="N",
                        help="read only partition N (default: all)")
    parser.add_argument("--group", "-g", metavar="GROUP",
                        help="join consumer group GROUP and commit what was printed (with "
                             "--data-dir the directory is then opened for writing: nothing "
                             "else may write it meanwhile)")
    parser.add_argument("--max-messages", "-c", type=_positive, metavar="N",
                        help="stop after N records")
    parser.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"),
                        default="read_uncommitted",
                        help="read_committed: only committed transactions' records "
                             "(default read_uncommitted, as Kafka's)")
    fmt = parser.add_mutually_exclusive_group()
    fmt.add_argument("--format", choices=("plain", "json"), default=None,
                     help="plain: the value per line (default); json: JSON lines")
    fmt.add_argument("-f", dest="format_string", metavar="FORMAT",
                     help="kcat's format string, e.g. '%%k=%%s\\n' (see below)")
    parser.add_argument("--exit-at-end", "-e", action="store_true",
                        help="stop at the end of every partition instead of following")
    parser.add_argument("--print-key", action="store_true",
                        help="plain: print the key, the key separator, then the value")
    parser.add_argument("--key-separator", default="\\t", metavar="SEP",
                        help="plain with --print-key: between key and value (default a tab)")
    parser.add_argument("--binary", choices=BINARY_MODES, default="auto",
                        help="json: auto prints text when it is UTF-8 and base64 otherwise "
                             "(\"value_b64\"); base64 always (default auto)")
    parser.set_defaults(run=main)
    return parser


class _Printer:
    """Writes records to stdout in the chosen form; counts them."""

    def __init__(self, args: argparse.Namespace, target: Target):
        self.count = 0
        self._out = sys.stdout.buffer
        if args.format_string is not None:
            render = compile_format(args.format_string)
            self._line: Callable[[OutputRecord], bytes] = render
        elif args.format == "json" or (args.format is None and target.json):
            binary = args.binary
            self._line = lambda r: json.dumps(record_json(r, binary)).encode("utf-8") + b"\n"
        else:
            sep = decode_escapes(args.key_separator).encode("utf-8")
            print_key = args.print_key
            self._line = lambda r: plain_line(r, print_key=print_key, key_separator=sep) + b"\n"

    def write(self, records: Iterable[OutputRecord]) -> None:
        for record in records:
            self._out.write(self._line(record))
            self.count += 1
        self._out.flush()


class _Stop:
    """Set by SIGINT / SIGTERM: the loop ends at its next turn and closes cleanly."""

    def __init__(self) -> None:
        self.requested = False

    def install(self) -> None:
        def handler(signum: int, frame: FrameType | None) -> None:
            self.requested = True
        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)


def _check_start_options(args: argparse.Namespace) -> None:
    if args.group is not None and (isinstance(args.offset, int) or args.timestamp is not None):
        raise ToolError("--offset N and --timestamp do not go with --group (a group starts at "
                        "its committed offsets): use `seglog groups reset-offsets`, or "
                        "--offset earliest|latest for partitions without one", EXIT_USAGE)


def _reset_policy(args: argparse.Namespace) -> str:
    return "earliest" if args.from_beginning or args.offset == "earliest" else "latest"


def _remaining(args: argparse.Namespace, printer: _Printer) -> int:
    if args.max_messages is None:
        return 500
    return min(500, args.max_messages - printer.count)


def _consume_local(target: Target, args: argparse.Namespace, printer: _Printer,
                   stop: _Stop) -> None:
    assert target.data_dir is not None
    if not os.path.isdir(target.data_dir):
        raise ToolError(f"{target.data_dir}: no such data directory", EXIT_PROBLEMS)
    grouped = args.group is not None
    store = open_store(target.data_dir, read_only=not grouped)
    try:
        if args.topic not in store:
            raise ToolError(f"UNKNOWN_TOPIC_OR_PARTITION: topic {args.topic} does not exist "
                            f"in {target.data_dir}", EXIT_PROBLEMS)
        count = store.topic(args.topic).partitions
        if args.partition is not None and args.partition >= count:
            raise ToolError(f"UNKNOWN_TOPIC_OR_PARTITION: {args.topic} has {count} "
                            f"partition{'s' if count != 1 else ''}, no {args.partition}",
                            EXIT_PROBLEMS)
        consumer = store.consumer(args.group, auto_offset_reset=_reset_policy(args),
                                  isolation_level=args.isolation_level)
        try:
            _local_loop(store, consumer, count, args, printer, stop)
        finally:
            consumer.close()
    finally:
        store.close()


def _local_loop(store: Any, consumer: Any, count: int, args: argparse.Namespace,
                printer: _Printer, stop: _Stop) -> None:
    grouped = args.group is not None
    tps = [(args.topic, p) for p in range(count)
           if args.partition is None or p == args.partition]
    if grouped and args.partition is None:
        consumer.subscribe([args.topic])
    else:
        consumer.assign(tps)
        if not grouped:
            for tp in tps:
                if args.from_beginning or args.offset == "earliest":
                    consumer.seek_to_beginning([tp])
                elif isinstance(args.offset, int):
                    consumer.seek(tp, args.offset)
                elif args.timestamp is not None:
                    found = store.log(tp).offset_for_timestamp(args.timestamp)
                    if found is None:
                        consumer.seek_to_end([tp])
                    else:
                        consumer.seek(tp, found)
                else:
                    consumer.seek_to_end([tp])
    while not stop.requested:
        wanted = _remaining(args, printer)
        if wanted <= 0:
            return
        records = consumer.poll(max_records=wanted, timeout_ms=_POLL_MS)
        if records:
            printer.write(records)
            if grouped:
                last: dict[tuple[str, int], int] = {}
                for r in records:
                    last[(r.topic, r.partition)] = r.offset + 1
                consumer.commit(last)
            continue
        if store.read_only and store.refresh():
            continue  # the writer appended: poll again before deciding we are at the end
        if args.exit_at_end:
            assigned = consumer.assignment()
            ends = consumer.end_offsets(assigned)
            if assigned and all(consumer.position(tp) >= ends[tp] for tp in assigned):
                return


# librdkafka error codes that end the command (others are reported and retried).
_FATAL_NAMES = frozenset({"UNKNOWN_TOPIC_OR_PART", "TOPIC_AUTHORIZATION_FAILED",
                          "GROUP_AUTHORIZATION_FAILED", "_UNKNOWN_PARTITION",
                          "_UNKNOWN_TOPIC", "SASL_AUTHENTICATION_FAILED", "_AUTHENTICATION",
                          "OFFSET_OUT_OF_RANGE", "_AUTO_OFFSET_RESET"})
_MISSING_NAMES = frozenset({"UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC"})


def _topic_partitions(consumer: Any, args: argparse.Namespace) -> int:
    """The topic's partition count from the broker's metadata (exit 3 when it has none)."""
    from confluent_kafka import KafkaError, KafkaException
    deadline = time.monotonic() + _METADATA_TIMEOUT_S
    while True:
        try:
            meta = consumer.list_topics(args.topic, timeout=_METADATA_TIMEOUT_S)
        except KafkaException as exc:
            raise ToolError(kafka_error_text(exc)) from None
        topic = meta.topics.get(args.topic)
        error = None if topic is None else topic.error
        if topic is not None and error is None and topic.partitions:
            return len(topic.partitions)
        code = None if error is None else error.code()
        if code == KafkaError.UNKNOWN_TOPIC_OR_PART or topic is None:
            raise ToolError(f"UNKNOWN_TOPIC_OR_PARTITION: topic {args.topic} does not exist",
                            EXIT_PROBLEMS)
        if time.monotonic() >= deadline:
            raise ToolError(kafka_error_text(error) if error is not None
                            else f"topic {args.topic} has no partitions")
        time.sleep(0.2)  # LEADER_NOT_AVAILABLE of a topic just created: ask again


def _consume_broker(target: Target, args: argparse.Namespace, printer: _Printer,
                    stop: _Stop, say: Callable[[str], None]) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    grouped = args.group is not None
    config = client_config(target, say)
    # librdkafka's Consumer needs a group.id even to assign(): without --group one that is
    # never joined nor committed to, so no group appears on the broker.
    config["group.id"] = args.group if grouped else f"seglog-consume-{uuid.uuid4().hex}"
    config["enable.auto.commit"] = False
    config["enable.partition.eof"] = True
    config["isolation.level"] = args.isolation_level
    config["auto.offset.reset"] = _reset_policy(args)
    if args.exit_at_end:
        # The end is seen when a fetch comes back empty: do not let the broker hold an empty
        # fetch for librdkafka's default 500 ms (following, the wait saves requests).
        config.setdefault("fetch.wait.max.ms", 100)
    try:
        consumer: Any = Consumer(config)
    except KafkaException as exc:
        raise ToolError(kafka_error_text(exc), EXIT_USAGE) from None
    try:
        count = _topic_partitions(consumer, args)
        if args.partition is not None and args.partition >= count:
            raise ToolError(f"UNKNOWN_TOPIC_OR_PARTITION: {args.topic} has {count} "
                            f"partition{'s' if count != 1 else ''}, no {args.partition}",
                            EXIT_PROBLEMS)
        partitions = [p for p in range(count) if args.partition is None or p == args.partition]
        subscribed = grouped and args.partition is None
        if subscribed:
            consumer.subscribe([args.topic])
        elif grouped:
            consumer.assign([TopicPartition(args.topic, p) for p in partitions])
        else:
            consumer.assign(_start_positions(consumer, args, partitions))
        at_eof: set[tuple[str, int]] = set()
        warned: set[str] = set()
        while not stop.requested:
            wanted = _remaining(args, printer)
            if wanted <= 0:
                return
            messages = consumer.consume(num_messages=wanted, timeout=_POLL_MS / 1000)
            batch: list[OutputRecord] = []
            for msg in messages:
                err = msg.error()
                where: tuple[str, int] = (msg.topic(), msg.partition())
                if err is not None:
                    # librdkafka's end-of-partition event (kcat -e's signal), by its name.
                    if err.name() == "_PARTITION_EOF":
                        at_eof.add(where)
                        continue
                    if err.name() in _FATAL_NAMES or err.fatal():
                        raise ToolError(kafka_error_text(err),
                                        EXIT_PROBLEMS if err.name() in _MISSING_NAMES
                                        else EXIT_ERROR)
                    if err.name() not in warned:  # transient (a broker down): say it once
                        warned.add(err.name())
                        say(kafka_error_text(err))
                    continue
                at_eof.discard(where)
                batch.append(_output_record(msg))
            if batch:
                printer.write(batch)
                if grouped:
                    last: dict[tuple[str, int], int] = {}
                    for r in batch:
                        last[(r.topic, r.partition)] = r.offset + 1
                    consumer.commit(offsets=[TopicPartition(t, p, o)
                                             for (t, p), o in last.items()],
                                    asynchronous=False)
            if args.exit_at_end and not batch:
                assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
                if assigned and assigned <= at_eof:
                    return
    except KafkaException as exc:
        raise ToolError(kafka_error_text(exc)) from None
    finally:
        consumer.close()


def _output_record(msg: Any) -> OutputRecord:
    """A librdkafka message (not an error event) as an :class:`OutputRecord`."""
    _ts_type, ts = msg.timestamp()
    headers: list[tuple[str, bytes | None]] = list(msg.headers() or ())
    return OutputRecord(msg.topic(), msg.partition(), msg.offset(), ts, msg.key(),
                        msg.value(), tuple(headers))


def _start_positions(consumer: Any, args: argparse.Namespace, partitions: list[int]) -> list[Any]:
    """The assignment of a group-less consumer: each partition at its start offset."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition
    if args.from_beginning or args.offset == "earliest":
        return [TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in partitions]
    if isinstance(args.offset, int):
        return [TopicPartition(args.topic, p, args.offset) for p in partitions]
    if args.timestamp is not None:
        found = consumer.offsets_for_times(
            [TopicPartition(args.topic, p, args.timestamp) for p in partitions],
            timeout=_METADATA_TIMEOUT_S)
        # A partition with no record that new gives -1: start at its end (Kafka's rule).
        return [TopicPartition(args.topic, tp.partition,
                               tp.offset if tp.offset >= 0 else OFFSET_END) for tp in found]
    return [TopicPartition(args.topic, p, OFFSET_END) for p in partitions]


def main(args: argparse.Namespace) -> int:
    """Run ``seglog consume``; returns the exit code."""
    messages = ToolMessages(TOOL, quiet=bool(getattr(args, "quiet", False)))
    say, fail = messages.say, messages.fail

    try:
        target = target_from_args(args)
        _check_start_options(args)
        printer = _Printer(args, target)
    except InvalidConfigError as exc:
        return fail(str(exc), EXIT_USAGE)
    except RecordFormatError as exc:
        return fail(f"-f: {exc}", EXIT_USAGE)
    except ToolError as exc:
        return fail(str(exc), exc.exit_code)
    stop = _Stop()
    stop.install()
    try:
        if target.local:
            _consume_local(target, args, printer, stop)
        else:
            _consume_broker(target, args, printer, stop, say)
    except BrokenPipeError:
        # The reader went away (`| head`): not an error of ours. Point stdout at /dev/null
        # so the interpreter's final flush does not complain again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except ToolError as exc:
        return fail(str(exc), exc.exit_code)
    except (SeglogError, ValueError, TypeError) as exc:
        return fail(local_error_text(exc), EXIT_ERROR)
    except OSError as exc:
        return fail(str(exc), EXIT_ERROR)
    # Kafka's console consumer's last line, on stderr so stdout stays the records.
    say(f"processed a total of {printer.count} record{'s' if printer.count != 1 else ''}")
    return EXIT_OK
