"""seglog.commands.record_format: the input lines and JSON records ``seglog produce`` reads,
and the JSON lines and kcat format strings ``seglog consume`` prints (in-process; the
commands themselves run in test_produce_consume.py)."""

from __future__ import annotations

import base64
import json

import pytest

from seglog.commands.record_format import (OutputRecord, RecordFormatError, compile_format,
                                           decode_escapes, parse_header_option,
                                           parse_json_line, parse_line, plain_line,
                                           record_json)

RECORD = OutputRecord("t", 2, 41, 1700000000123, b"k", b"v\xff", (("a", b"1"), ("n", None)))


def test_lines_split_at_the_first_key_separator_only():
    record = parse_line(b"user:a:b", b":")
    assert (record.key, record.value) == (b"user", b"a:b")
    assert parse_line(b"\xfe\x00", None).value == b"\xfe\x00"
    with pytest.raises(RecordFormatError, match="no key separator"):
        parse_line(b"nokey", b":")


def test_json_records_take_text_base64_and_both_header_forms():
    record = parse_json_line(json.dumps({
        "key_b64": base64.b64encode(b"\x00\x01").decode(), "value": "v",
        "headers": [["a", "1"], {"key": "b", "value_b64": "AA=="}, ["n", None]],
        "partition": 3, "timestamp": 5}).encode())
    assert record.key == b"\x00\x01" and record.value == b"v"
    assert record.headers == [("a", b"1"), ("b", b"\x00"), ("n", None)]
    assert (record.partition, record.timestamp_ms) == (3, 5)
    assert parse_json_line(b'{"headers": {"h": "x"}}').headers == [("h", b"x")]
    assert parse_json_line(b"{}").value is None  # a tombstone


@pytest.mark.parametrize("line, why", [
    (b"[1]", "must be an object"),
    (b"{bad", "not JSON"),
    (b'{"valeu": "x"}', "unknown field 'valeu'"),
    (b'{"value": 3}', "must be a string or null"),
    (b'{"value_b64": "***"}', "not base64"),
    (b'{"value": "a", "value_b64": "YQ=="}', 'both "value" and "value_b64"'),
    (b'{"partition": -1}', "partition"),
    (b'{"partition": true}', "partition"),
    (b'{"timestamp": "now"}', "timestamp"),
    (b'{"headers": [1]}', "a header must be"),
])
def test_bad_json_records_are_refused_by_name(line, why):
    with pytest.raises(RecordFormatError, match=why.replace("(", r"\(")):
        parse_json_line(line)


def test_json_output_is_text_when_utf8_and_base64_otherwise():
    out = record_json(RECORD)
    assert out == {"topic": "t", "partition": 2, "offset": 41, "timestamp": 1700000000123,
                   "key": "k", "value_b64": base64.b64encode(b"v\xff").decode(),
                   "headers": [{"key": "a", "value": "1"}, {"key": "n", "value": None}]}
    always = record_json(RECORD, "base64")
    assert always["key_b64"] == "aw==" and "key" not in always
    # What consume prints, produce reads back to the same record (topic and offset ignored).
    back = parse_json_line(json.dumps(out).encode())
    assert (back.key, back.value, back.headers) == (b"k", b"v\xff", [("a", b"1"), ("n", None)])
    assert (back.partition, back.timestamp_ms) == (2, 1700000000123)


def test_kcat_format_fields_and_escapes():
    render = compile_format(r"%t/%p/%o/%T|%k|%s|%K|%S|%h|%%\n")
    assert render(RECORD) == b"t/2/41/1700000000123|k|v\xff|1|2|a=1,n|%\n"
    tombstone = OutputRecord("t", 0, 0, 0, None, None, ())
    assert compile_format("%K %S")(tombstone) == b"-1 -1"
    with pytest.raises(RecordFormatError, match="unknown format field %x"):
        compile_format("%x")
    with pytest.raises(RecordFormatError, match="lone %"):
        compile_format("abc%")


def test_plain_lines_as_kafkas_console_consumer():
    assert plain_line(RECORD, print_key=False, key_separator=b"\t") == b"v\xff"
    tombstone = OutputRecord("t", 0, 0, 0, None, None, ())
    assert plain_line(tombstone, print_key=True, key_separator=b"=") == b"null=null"


def test_escapes_and_header_options():
    assert decode_escapes(r"a\tb\nc\\d\q") == "a\tb\nc\\d\\q"
    assert parse_header_option("k=v=w") == ("k", b"v=w")
    assert parse_header_option("k") == ("k", None)
    with pytest.raises(RecordFormatError):
        parse_header_option("=v")


@pytest.mark.parametrize("command", ["produce", "consume"])
def test_help_shows_examples_and_every_option(command, capsys):
    from seglog.cli import build_parser
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args([command, "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "examples:\n  " in text and f"seglog {command} clicks" in text
    for option in ("--data-dir", "--bootstrap-server", "--command-config"):
        assert option in text
    wanted = (["--key-separator", "--header", "--partition", "--compression", "--acks",
               "--idempotence", "--transactional-id", "--format", "--file"]
              if command == "produce" else
              ["--from-beginning", "--offset", "--timestamp", "--group", "--max-messages",
               "--isolation-level", "--exit-at-end", "--print-key", "--binary", "-f FORMAT"])
    for option in wanted:
        assert option in text, option
