"""ApiVersions parity with Apache Kafka 4.4 (issue 24): the same ApiVersions v4 request goes to
a real Kafka 4.4 broker (KRaft, its default configuration) and to ``seglog serve``, and the
answers are compared key by key. Every API key Kafka advertises must be advertised by seglog at
the same min and max version, except those in :data:`NOT_SERVED` (not served by design, with
the reason) and :data:`NOT_YET_SERVED` (being built: each is checked to be *still* missing or
lower, so the list only shrinks). seglog advertises no key Kafka does not. The features
seglog lists (supported and finalized) are a subset of Kafka's, at levels no higher.

``docs/compatibility.md`` carries the two tables, generated from the constants here:
:func:`test_compatibility_doc_lists_the_exceptions` keeps it equal (it runs without Kafka);
``PYTHONPATH=src python tests/kafka/test_kafka_api_versions.py`` rewrites it.
"""

from __future__ import annotations

import re
import socket
import struct
from pathlib import Path
from typing import NamedTuple

import pytest
from kio.serial import entity_reader

from seglog.schemas import load_response_schema
from seglog.server.broker import Broker
from seglog.server.registry import api_name

pytestmark = pytest.mark.kafka

API_VERSIONS = 18
WAIT_S = 30.0
DOC = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"

#: API keys Kafka 4.4 advertises that seglog does not serve, by design: ``{key: reason}``.
NOT_SERVED: dict[int, str] = {
    55: "KRaft quorum API (DescribeQuorum): a ZooKeeper-era cluster has no Raft quorum.",
    64: "KRaft controller API (UnregisterBroker): brokers leave a ZooKeeper cluster by their "
        "ephemeral registration znode.",
    80: "KRaft quorum API (AddRaftVoter): no Raft quorum.",
    81: "KRaft quorum API (RemoveRaftVoter): no Raft quorum.",
    94: "KRaft controller API (UnregisterController): no KRaft controllers.",
}

#: API keys being built now (issue 24), not yet served at Kafka 4.4's versions:
#: ``{key: reason}``. Temporary: :func:`test_not_yet_served_is_still_needed` fails once a key
#: here is served at Kafka's range, so that it is removed from this table.
NOT_YET_SERVED: dict[int, str] = {
}


class Answer(NamedTuple):
    """One broker's ApiVersions v4 answer."""

    apis: dict[int, tuple[int, int]]
    supported: dict[str, tuple[int, int]]
    finalized: dict[str, tuple[int, int]]


def _compact(text: bytes) -> bytes:
    return bytes([len(text) + 1]) + text


def _recv(sock: socket.socket, size_bytes: int) -> bytes:
    out = bytearray()
    while len(out) < size_bytes:
        chunk = sock.recv(size_bytes - len(out))
        if not chunk:
            raise ConnectionError("closed by the broker")
        out += chunk
    return bytes(out)


def api_versions(bootstrap: str) -> Answer:
    """ApiVersions v4 of the broker at ``bootstrap`` (v4: supported features with a minimum
    level of 0 are listed too)."""
    host, port = bootstrap.rsplit(":", 1)
    # Header v2: key, version, correlation id, client id, no tagged fields; body v4: client
    # software name and version (compact strings), no tagged fields.
    body = struct.pack(">hhih", API_VERSIONS, 4, 1, 6) + b"parity" + b"\x00"
    body += _compact(b"seglog-parity") + _compact(b"1.0") + b"\x00"
    with socket.create_connection((host, int(port)), timeout=WAIT_S) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        (size_bytes,) = struct.unpack(">i", _recv(sock, 4))
        frame = _recv(sock, size_bytes)
    (correlation_id,) = struct.unpack_from(">i", frame, 0)
    assert correlation_id == 1
    response, _ = entity_reader(load_response_schema(API_VERSIONS, 4))(frame, 4)
    assert response.error_code == 0
    return Answer(
        {k.api_key: (k.min_version, k.max_version) for k in response.api_keys},
        {f.name: (f.min_version, f.max_version) for f in response.supported_features},
        {f.name: (f.min_version_level, f.max_version_level)
         for f in response.finalized_features})


@pytest.fixture(scope="module")
def kafka_answer(kafka_broker_factory) -> Answer:
    broker = kafka_broker_factory("versions")
    broker.start()
    try:
        return api_versions(broker.bootstrap)
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def seglog_answer(tmp_path_factory) -> Answer:
    broker = Broker(tmp_path_factory.mktemp("seglog"), listen=("127.0.0.1", 0))
    broker.start()
    try:
        return api_versions(broker.bootstrap)
    finally:
        broker.stop()


def test_every_kafka_api_is_served_at_kafka_versions(kafka_answer, seglog_answer):
    differ = {
        key: (api_name(key), span, seglog_answer.apis.get(key))
        for key, span in sorted(kafka_answer.apis.items())
        if key not in NOT_SERVED and key not in NOT_YET_SERVED
        and seglog_answer.apis.get(key) != span
    }
    assert differ == {}, "API keys (name, Kafka's range, seglog's) that differ"


def test_seglog_advertises_no_key_kafka_does_not(kafka_answer, seglog_answer):
    assert set(seglog_answer.apis) - set(kafka_answer.apis) == set()
    for key, span in seglog_answer.apis.items():
        low, high = kafka_answer.apis[key]
        assert low <= span[0] <= span[1] <= high, (api_name(key), span, (low, high))


def test_not_served_keys_are_not_advertised(kafka_answer, seglog_answer):
    # The exceptions are real: Kafka advertises each, seglog none.
    assert set(NOT_SERVED) <= set(kafka_answer.apis)
    assert set(NOT_SERVED) & set(seglog_answer.apis) == set()
    assert set(NOT_SERVED) & set(NOT_YET_SERVED) == set()


def test_not_yet_served_is_still_needed(kafka_answer, seglog_answer):
    # A key served at Kafka's range must leave NOT_YET_SERVED (the list only shrinks).
    done = {key: api_name(key) for key in NOT_YET_SERVED
            if seglog_answer.apis.get(key) == kafka_answer.apis.get(key)}
    assert done == {}, "served at Kafka's versions now: remove from NOT_YET_SERVED"
    assert set(NOT_YET_SERVED) <= set(kafka_answer.apis)


def test_features_are_a_subset_of_kafkas(kafka_answer, seglog_answer):
    for listed_seglog, listed_kafka in ((seglog_answer.supported, kafka_answer.supported),
                                        (seglog_answer.finalized, kafka_answer.finalized)):
        assert set(listed_seglog) <= set(listed_kafka)
        for name, (low, high) in listed_seglog.items():
            assert low <= high <= listed_kafka[name][1], (name, (low, high), listed_kafka[name])
    for name, (low, high) in seglog_answer.finalized.items():
        supported = seglog_answer.supported[name]
        assert supported[0] <= low <= high <= supported[1]


def exceptions_markdown() -> str:
    """The exception tables of ``docs/compatibility.md``, from :data:`NOT_SERVED` and
    :data:`NOT_YET_SERVED`."""
    lines = ["| Key | API | Reason |", "|---|---|---|"]
    lines += [f"| {key} | {api_name(key)} | {reason} |"
              for key, reason in sorted(NOT_SERVED.items())]
    lines += ["", "Not yet at Kafka 4.4's versions (being built; the list only shrinks):", "",
              "| Key | API | Reason |", "|---|---|---|"]
    lines += [f"| {key} | {api_name(key)} | {reason} |"
              for key, reason in sorted(NOT_YET_SERVED.items())]
    return "\n".join(lines) + "\n"


def test_compatibility_doc_lists_the_exceptions():
    text = DOC.read_text()
    match = re.search(r"<!-- api-exceptions -->\n(.*?)<!-- /api-exceptions -->", text, re.S)
    assert match is not None, f"{DOC} lacks the <!-- api-exceptions --> markers"
    assert match.group(1) == exceptions_markdown(), (
        "docs/compatibility.md is stale: run "
        "`PYTHONPATH=src python tests/kafka/test_kafka_api_versions.py` to rewrite it")


def _rewrite_doc() -> None:
    text = DOC.read_text()
    DOC.write_text(re.sub(r"(<!-- api-exceptions -->\n).*?(<!-- /api-exceptions -->)",
                          lambda m: m.group(1) + exceptions_markdown() + m.group(2), text,
                          flags=re.S))


if __name__ == "__main__":
    _rewrite_doc()
