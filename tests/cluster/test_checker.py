"""The checker's own negative control (R§6.4): a clean synthetic history it must pass, and
one synthetic history per anomaly that it must flag, with the offending events. Without
these a green scenario would prove nothing about the checker.

The anomaly definitions come from Jepsen's queue checker (jepsen-io/redpanda README),
Kafka's ``validate_delivery`` and ``EpochDrivenReplicationProtocolAcceptanceTest``'s
``crcSeq`` comparison (see :mod:`harness.checker`).
"""

from __future__ import annotations

import pytest

from harness import checker
from harness.history import History, HistoryError, load

PARTITIONS = (0, 1)


def clean_history(*, idempotent: bool = True, max_in_flight: int = 5, retries: int = 3,
                  replicas: bool = True, client: str | None = None) -> History:
    """A run with nothing wrong: producer p0 sends values 0..9 alternately to partitions 0
    and 1 (offsets 0..4 each), consumer c0 polls them all, the final read and three
    identical replicas agree."""
    h = History()
    settings: dict[str, object] = {} if client is None else {"client": client}
    h.record("p0", "meta", "producer", idempotent=idempotent, max_in_flight=max_in_flight,
             retries=retries, acks="all", **settings)
    offsets = {p: 0 for p in PARTITIONS}
    placed: dict[int, list[list[int]]] = {p: [] for p in PARTITIONS}
    for value in range(10):
        partition = value % 2
        h.record("p0", "invoke", "send", key=str(partition), value=value)
        h.record("p0", "ok", "send", key=str(partition), value=value, partition=partition,
                 offset=offsets[partition])
        placed[partition].append([offsets[partition], value])
        offsets[partition] += 1
    h.record("c0", "ok", "assign", partitions=list(PARTITIONS))
    h.record("c0", "ok", "poll", values={str(p): placed[p][:3] for p in PARTITIONS})
    h.record("c0", "ok", "poll", values={str(p): placed[p][3:] for p in PARTITIONS})
    for p in PARTITIONS:
        h.record("final", "ok", "final-read", partition=p, records=placed[p])
    if replicas:
        for p in PARTITIONS:
            for broker in (0, 1, 2):
                h.record("replicas", "ok", "replica", broker=broker, partition=p,
                         batches=[[o, o, 1000 + 10 * p + o] for o in range(5)],
                         epochs=[[0, 0], [1, 3]], high_watermark=5, log_end_offset=5)
    return h


def events_of(h: History) -> list[dict]:
    return [dict(e) for e in h.events]


def find(events: list[dict], **match) -> dict:
    """The first event whose fields equal ``match``."""
    for e in events:
        if all(e.get(k) == v for k, v in match.items()):
            return e
    raise LookupError(match)


def test_clean_history_passes():
    result = checker.check(clean_history().events)
    assert result.valid, result.summary()
    assert result.notes == []
    assert result.stats["send-ok"] == 10


def test_clean_history_round_trips_through_a_file(tmp_path):
    path = tmp_path / "history.jsonl"
    with History(path) as h:
        h.extend(clean_history().events)
    events = load(path)
    assert len(events) == len(clean_history().events)
    assert checker.check(events).valid


def test_torn_last_line_is_dropped_and_garbage_is_an_error(tmp_path):
    path = tmp_path / "history.jsonl"
    with History(path) as h:
        h.record("p0", "invoke", "send", key="0", value=1)
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"index": 1, "type": "ok"')
    assert len(load(path)) == 1
    path.write_text('{"index": 0}\n{"index": 1}\n', encoding="utf-8")
    with pytest.raises(HistoryError):
        load(path)


def only(result: checker.CheckResult, kind: str) -> list[checker.Anomaly]:
    found = result.of_kind(kind)
    assert found, f"the checker missed {kind}:\n{result.summary()}"
    for anomaly in found:
        assert anomaly.events, anomaly
    return found


def test_lost_write_against_the_final_read():
    events = events_of(clean_history())
    final = find(events, f="final-read", partition=1)
    final["records"] = [r for r in final["records"] if r[0] != 2]  # value 5 at offset 2
    found = only(checker.check(events), "lost-write")
    assert [(a.partition, a.offset, a.value) for a in found] == [(1, 2, 5)]
    assert any(e["f"] == "send" and e["type"] == "ok" for e in found[0].events)


def test_lost_write_from_polls_alone():
    """No final read: an acknowledged offset never polled while a later one was."""
    events = [e for e in events_of(clean_history(replicas=False)) if e["f"] != "final-read"]
    poll = find(events, f="poll", type="ok")
    poll["values"]["0"] = [pair for pair in poll["values"]["0"] if pair[0] != 1]
    result = checker.check(events)
    assert [(a.partition, a.offset) for a in only(result, "lost-write")] == [(0, 1)]
    assert [(a.partition, a.offset) for a in only(result, "poll-skip")] == [(0, 2)]


def test_inconsistent_offsets():
    events = events_of(clean_history())
    poll = find(events, f="poll", type="ok")
    poll["values"]["0"][1] = [1, 99]  # offset 1 held value 2
    result = checker.check(events)
    found = only(result, "inconsistent-offsets")
    assert [(a.partition, a.offset) for a in found] == [(0, 1)]
    assert "phantom" in result.kinds()  # 99 was never sent


def test_ok_without_offset_is_an_anomaly_and_counts_as_indeterminate():
    """A success report with no offset (librdkafka's for a base offset of -1) is flagged; the
    send is then indeterminate, so its value found in the final read is no G1a and nothing
    else is reported."""
    events = events_of(clean_history())
    send = find(events, f="send", value=5, type="ok")
    send["offset"] = None
    result = checker.check(events)
    found = only(result, "ok-without-offset")
    assert [(a.partition, a.value) for a in found] == [(1, 5)]
    assert result.kinds() == {"ok-without-offset"}, result.summary()
    assert result.stats["send-info"] == 1


def duplicated(idempotent: bool, retries: int, outcome: str = "ok") -> list[dict]:
    """Value 4 (partition 0, offset 2) also appears at a new offset 5 of partition 0."""
    events = events_of(clean_history(idempotent=idempotent, retries=retries))
    send = find(events, f="send", value=4, type="ok")
    if outcome != "ok":
        send["type"] = outcome
        send.pop("offset")
        send.pop("partition")
    final = find(events, f="final-read", partition=0)
    final["records"].append([5, 4])
    return events


def test_duplicate_is_forbidden_with_idempotence():
    found = only(checker.check(duplicated(idempotent=True, retries=3)), "duplicate")
    assert [a.value for a in found] == [4]


def test_duplicate_without_idempotence_is_allowed_only_for_retried_or_indeterminate_sends():
    no_retries = checker.check(duplicated(idempotent=False, retries=0))
    assert [a.value for a in only(no_retries, "duplicate")] == [4]
    for events in (duplicated(idempotent=False, retries=3),
                   duplicated(idempotent=False, retries=0, outcome="info")):
        result = checker.check(events)
        assert "duplicate" not in result.kinds(), result.summary()
        assert [a.value for a in result.notes if a.kind == "duplicate"] == [4]


def test_aborted_read_g1a():
    """A send that definitely failed (NOT_ENOUGH_REPLICAS) must never be read."""
    events = events_of(clean_history())
    send = find(events, f="send", value=6, type="ok")
    send.update(type="fail", error="NOT_ENOUGH_REPLICAS")
    del send["offset"]
    found = only(checker.check(events), "G1a")
    assert [a.value for a in found] == [6]
    assert any(e.get("error") == "NOT_ENOUGH_REPLICAS" for e in found[0].events)


def test_info_sends_are_not_aborted_reads():
    """NOT_ENOUGH_REPLICAS_AFTER_APPEND is indeterminate (written!): reading it is fine."""
    events = events_of(clean_history())
    send = find(events, f="send", value=6, type="ok")
    send.update(type="info", error="NOT_ENOUGH_REPLICAS_AFTER_APPEND")
    del send["offset"]
    result = checker.check(events)
    assert result.valid, result.summary()


def swapped(**settings) -> list[dict]:
    """:func:`clean_history` with ``settings`` where the later send to partition 1 (value 3)
    landed before the earlier one (value 1), polls and the final read agreeing."""
    events = events_of(clean_history(**settings))
    first = find(events, f="send", value=1, type="ok")
    second = find(events, f="send", value=3, type="ok")
    first["offset"], second["offset"] = second["offset"], first["offset"]
    for e in events:  # keep polls and the final read consistent with the swap
        if e["f"] == "final-read" and e["partition"] == 1:
            e["records"][0], e["records"][1] = [0, 3], [1, 1]
        if e["f"] == "poll":
            pairs = e["values"]["1"]
            if pairs and pairs[0][0] == 0:
                pairs[0], pairs[1] = [0, 3], [1, 1]
    return events


def test_nonmonotonic_send_depends_on_the_producers_settings():
    strict = checker.check(swapped(max_in_flight=1))
    found = only(strict, "nonmonotonic-send")
    assert [(a.partition, a.value) for a in found] == [(1, 3)]
    assert strict.kinds() == {"nonmonotonic-send"}
    loose = checker.check(swapped(idempotent=False, max_in_flight=10))
    assert loose.valid and [a.kind for a in loose.notes] == ["nonmonotonic-send"]


def test_nonmonotonic_send_with_one_in_flight_depends_on_the_client():
    """librdkafka's max.in.flight = 1 does not keep a non-idempotent producer's retries in
    order (the checker's docstring says what was seen): a note for it, an anomaly for
    kafka-python (which mutes the partition, as the Java client) and for librdkafka with
    idempotence."""
    librdkafka = checker.check(swapped(max_in_flight=1, idempotent=False, client="librdkafka"))
    assert librdkafka.valid and [a.kind for a in librdkafka.notes] == ["nonmonotonic-send"]
    for settings in ({"idempotent": False, "client": "kafka-python"},
                     {"idempotent": True, "client": "librdkafka"}):
        strict = checker.check(swapped(max_in_flight=1, **settings))
        assert strict.kinds() == {"nonmonotonic-send"}, settings


def test_nonmonotonic_poll_and_reassignment_reset():
    events = events_of(clean_history())
    h = History()
    h.extend(events)
    h.record("c0", "ok", "poll", values={"0": [[1, 2]]})
    found = only(checker.check(h.events), "nonmonotonic-poll")
    assert [(a.partition, a.offset) for a in found] == [(0, 1)]
    # The same re-read after a reassignment (a rebalance, a seek) is allowed.
    h2 = History()
    h2.extend(events)
    h2.record("c0", "ok", "assign", partitions=[0])
    h2.record("c0", "ok", "poll", values={"0": [[1, 2]]})
    assert checker.check(h2.events).valid


def test_poll_skip():
    events = events_of(clean_history())
    polls = [e for e in events if e["f"] == "poll"]
    polls[1]["values"]["0"] = polls[1]["values"]["0"][1:]  # offset 3 skipped
    result = checker.check(events)
    found = only(result, "poll-skip")
    assert [(a.partition, a.offset) for a in found] == [(0, 4)]
    assert [a.kind for a in result.notes] == ["unseen"]


def test_committed_read_lost():
    """A polled record missing at the end (the unclean-election signature)."""
    events = events_of(clean_history())
    final = find(events, f="final-read", partition=0)
    final["records"] = final["records"][:2]  # offsets 2.. gone
    result = checker.check(events)
    lost = only(result, "committed-read-lost")
    assert sorted(a.offset for a in lost) == [2, 3, 4]
    assert sorted(a.offset for a in result.of_kind("lost-write")) == [2, 3, 4]


def test_unseen_is_a_note_not_an_anomaly():
    events = [e for e in events_of(clean_history())
              if not (e["f"] == "poll" and e["values"]["0"][0][0] == 3)]
    result = checker.check(events)
    assert result.valid, result.summary()
    unseen = [a for a in result.notes if a.kind == "unseen"]
    assert [(a.partition, len(a.events)) for a in unseen] == [(0, 2), (1, 2)]


def test_replica_divergence_below_the_high_watermark():
    events = events_of(clean_history())
    replica = find(events, f="replica", partition=1, broker=2)
    replica["batches"][3][2] = 7  # another CRC at offset 3
    found = only(checker.check(events), "replica-divergence")
    assert [(a.partition, a.offset) for a in found] == [(1, 3)]
    # Above the high watermark a follower may still differ (not yet committed).
    events = events_of(clean_history())
    for broker in (0, 1, 2):
        find(events, f="replica", partition=1, broker=broker)["high_watermark"] = 3
    find(events, f="replica", partition=1, broker=2)["batches"][3][2] = 7
    assert checker.check(events).valid


def test_replica_missing_committed_batches():
    events = events_of(clean_history())
    replica = find(events, f="replica", partition=0, broker=1)
    replica["batches"] = replica["batches"][:3]
    replica["log_end_offset"] = 3
    replica["high_watermark"] = 3
    result = checker.check(events)
    assert [a.partition for a in only(result, "replica-missing")] == [0]
    assert "replica-divergence" not in result.kinds()


def test_replica_epoch_checkpoint_tails_differ():
    events = events_of(clean_history())
    find(events, f="replica", partition=0, broker=0)["epochs"] = [[0, 0], [2, 4]]
    assert [a.partition for a in
            only(checker.check(events), "replica-epoch-divergence")] == [0]


def test_an_epoch_without_data_yet_is_on_the_leader_alone():
    """A leader assigns its new epoch at its LEO when elected; followers learn the epoch
    from its first batch. With no data in it yet, that entry is not a divergence."""
    events = events_of(clean_history())
    find(events, f="replica", partition=0, broker=0)["epochs"] = [[0, 0], [1, 3], [2, 5]]
    assert checker.check(events).valid


def test_replica_high_watermark_above_log_end():
    events = events_of(clean_history())
    find(events, f="replica", partition=0, broker=0)["log_end_offset"] = 4
    result = checker.check(events)
    assert [a.partition for a in only(result, "replica-hw-above-leo")] == [0]


def test_replica_offsets_going_down():
    events = events_of(clean_history())
    batches = find(events, f="replica", partition=1, broker=0)["batches"]
    batches[2], batches[3] = batches[3], batches[2]
    result = checker.check(events)
    assert [a.partition for a in only(result, "replica-nonmonotonic-offsets")] == [1]


class TxnHistory:
    """A transactional run built record by record: ``write`` places a transaction's value at
    an explicit (partition, offset), ``end`` decides it, ``finish`` adds a read_uncommitted
    consumer and final read holding everything written, and a read_committed consumer and
    final read holding exactly the committed transactions' values (plus the unknown ones
    named ``visible``). Markers take the offsets left free."""

    def __init__(self):
        self.h = History()
        self.h.record("tx", "meta", "producer", idempotent=True, max_in_flight=5,
                      retries=1_000_000, acks="all", transactional_id="tx")
        self.placed: dict[int, dict[int, int]] = {p: {} for p in PARTITIONS}
        self.members: dict[str, list[int]] = {}
        self.outcomes: dict[str, str] = {}

    def begin(self, txn: str) -> None:
        self.h.record("tx", "invoke", "txn", txn=txn)
        self.members[txn] = []

    def write(self, txn: str, value: int, partition: int, offset: int) -> None:
        self.h.record("tx", "invoke", "send", key=str(partition), value=value,
                      partition=partition, txn=txn)
        self.h.record("tx", "ok", "send", key=str(partition), value=value, txn=txn,
                      partition=partition, offset=offset)
        self.placed[partition][offset] = value
        self.members[txn].append(value)

    def end(self, txn: str, outcome: str) -> None:
        self.outcomes[txn] = outcome
        self.h.record("tx", "info" if outcome == "unknown" else "ok", "txn", txn=txn,
                      outcome=outcome, intent="abort" if outcome == "aborted" else "commit",
                      values=self.members[txn])

    def finish(self, visible: tuple[str, ...] = ()) -> list[dict]:
        shown = {v for t, values in self.members.items()
                 if self.outcomes[t] == "committed" or t in visible for v in values}
        everything = {p: sorted(self.placed[p].items()) for p in PARTITIONS}
        committed = {p: [(o, v) for o, v in everything[p] if v in shown] for p in PARTITIONS}
        for name, isolation, records in (("c0", "read_uncommitted", everything),
                                         ("rc", "read_committed", committed)):
            self.h.record(name, "ok", "assign", partitions=list(PARTITIONS))
            self.h.record(name, "ok", "poll", isolation=isolation,
                          values={str(p): [list(r) for r in records[p]] for p in PARTITIONS})
        for p in PARTITIONS:
            end = max(self.placed[p], default=-1) + 2  # the last marker
            self.h.record("final", "ok", "final-read", partition=p,
                          records=[list(r) for r in everything[p]], high_watermark=end,
                          isolation="read_uncommitted")
            self.h.record("final", "ok", "final-read", partition=p,
                          records=[list(r) for r in committed[p]], high_watermark=end,
                          isolation="read_committed")
        return events_of(self.h)


def txn_history() -> TxnHistory:
    """Three transactions, one after the other, each over both partitions, each followed by
    its markers: tx-0 committed (10, 11 on p0; 12 on p1), tx-1 aborted (13 on p0, 14 on p1),
    tx-2 unknown (its commit timed out) and committed after all (15 on p0, 16 on p1)."""
    t = TxnHistory()
    t.begin("tx-0")
    t.write("tx-0", 10, 0, 0)
    t.write("tx-0", 11, 0, 1)
    t.write("tx-0", 12, 1, 0)
    t.end("tx-0", "committed")
    t.begin("tx-1")
    t.write("tx-1", 13, 0, 3)
    t.write("tx-1", 14, 1, 2)
    t.end("tx-1", "aborted")
    t.begin("tx-2")
    t.write("tx-2", 15, 0, 5)
    t.write("tx-2", 16, 1, 4)
    t.end("tx-2", "unknown")
    return t


def test_clean_transactional_history_passes():
    """Committed, aborted and unknown-but-whole transactions; the read_committed consumer
    skips the aborted records and the markers (no poll-skip), the read_uncommitted one sees
    the aborted records (allowed)."""
    events = txn_history().finish(visible=("tx-2",))
    result = checker.check(events)
    assert result.valid, result.summary()
    assert result.notes == []
    assert (result.stats["txn-committed"], result.stats["txn-aborted"],
            result.stats["txn-unknown"]) == (1, 1, 1)
    ru_poll = find(events, f="poll", process="c0")
    assert [3, 13] in ru_poll["values"]["0"]


def test_unknown_transaction_wholly_invisible_passes():
    events = txn_history().finish()
    result = checker.check(events)
    assert result.valid, result.summary()


def test_aborted_read_in_a_read_committed_poll():
    events = txn_history().finish(visible=("tx-2",))
    poll = find(events, f="poll", process="rc")
    poll["values"]["0"].insert(2, [3, 13])
    found = only(checker.check(events), "aborted-read")
    assert [(a.partition, a.offset, a.value) for a in found] == [(0, 3, 13)]
    assert any(e["f"] == "txn" and e.get("outcome") == "aborted" for e in found[0].events)


def test_aborted_read_in_the_read_committed_final_read():
    events = txn_history().finish(visible=("tx-2",))
    final = find(events, f="final-read", partition=1, isolation="read_committed")
    final["records"].insert(1, [2, 14])
    result = checker.check(events)
    assert [(a.partition, a.value) for a in only(result, "aborted-read")] == [(1, 14)]
    # The consumer that ran meanwhile skipped offset 2, which the final read now shows.
    assert result.kinds() == {"aborted-read", "poll-skip"}


def test_committed_transaction_lost_on_a_partition():
    """All of tx-0's records on p1 missing from read_committed's final read."""
    events = txn_history().finish(visible=("tx-2",))
    final = find(events, f="final-read", partition=1, isolation="read_committed")
    final["records"] = [r for r in final["records"] if r[1] != 12]
    poll = find(events, f="poll", process="rc")
    poll["values"]["1"] = [r for r in poll["values"]["1"] if r[1] != 12]
    result = checker.check(events)
    assert [(a.partition, a.value) for a in only(result, "txn-lost")] == [(1, 12)]
    assert "txn-partial" not in result.kinds()


def test_committed_transaction_partly_visible():
    """One of tx-0's two records on p0 missing: not all-or-nothing."""
    events = txn_history().finish(visible=("tx-2",))
    final = find(events, f="final-read", partition=0, isolation="read_committed")
    final["records"] = [r for r in final["records"] if r[1] != 11]
    found = only(checker.check(events), "txn-partial")
    assert [(a.partition, a.offset, a.value) for a in found] == [(0, 1, 11)]


def test_unknown_transaction_must_be_all_or_nothing():
    """tx-2 (commit timed out) visible on p0 but not on p1."""
    events = txn_history().finish(visible=("tx-2",))
    final = find(events, f="final-read", partition=1, isolation="read_committed")
    final["records"] = [r for r in final["records"] if r[1] != 16]
    poll = find(events, f="poll", process="rc")
    poll["values"]["1"] = [r for r in poll["values"]["1"] if r[1] != 16]
    found = only(checker.check(events), "txn-partial")
    assert [(a.partition, a.value) for a in found] == [(1, 16)]


def test_read_committed_poll_skip_over_a_committed_record():
    """Skipping aborted records is read_committed's job; skipping a committed one is not."""
    events = txn_history().finish(visible=("tx-2",))
    poll = find(events, f="poll", process="rc")
    poll["values"]["0"] = [r for r in poll["values"]["0"] if r[1] != 11]
    found = only(checker.check(events), "poll-skip")
    assert [(a.partition, a.offset) for a in found] == [(0, 5)]


def test_g0_and_int_send_skip_are_notes():
    """Two concurrent committed transactions: tx-a first on p0, tx-b first on p1 (a write
    cycle, G0), and tx-b's records on p1 have tx-a's between them (int-send-skip). Kafka
    allows both: reported as notes, the history stays valid."""
    t = TxnHistory()
    t.begin("tx-a")
    t.begin("tx-b")
    t.write("tx-a", 20, 0, 0)
    t.write("tx-b", 21, 0, 1)
    t.write("tx-b", 22, 1, 0)
    t.write("tx-a", 23, 1, 1)
    t.write("tx-b", 24, 1, 2)
    t.end("tx-a", "committed")
    t.end("tx-b", "committed")
    result = checker.check(t.finish())
    assert result.valid, result.summary()
    kinds = sorted(a.kind for a in result.notes)
    assert kinds == ["G0", "int-send-skip"], result.summary()
    skip = next(a for a in result.notes if a.kind == "int-send-skip")
    assert (skip.partition, skip.offset) == (1, 1)


def test_every_kind_has_a_negative_control():
    """Each kind the checker knows is provoked by a test above (this list is the check)."""
    provoked = {"lost-write", "inconsistent-offsets", "duplicate", "G1a", "phantom",
                "nonmonotonic-send", "nonmonotonic-poll", "poll-skip", "committed-read-lost",
                "unseen", "replica-divergence", "replica-missing", "replica-epoch-divergence",
                "replica-hw-above-leo", "replica-nonmonotonic-offsets", "aborted-read",
                "txn-lost", "txn-partial", "G0", "int-send-skip", "ok-without-offset"}
    assert provoked == checker.KINDS


class _Message:
    """The accessors of confluent-kafka's ``Message`` that ``value_of`` reads."""

    def __init__(self, value):
        self._value = value

    def value(self):
        return self._value

    def partition(self):
        return 2

    def offset(self):
        return 41

    def key(self):
        return b"k"

    def timestamp(self):
        return (1, 1700000000000)

    def headers(self):
        return None


def test_a_record_the_harness_never_writes_is_named_where_it_was_read():
    """The consumers' values are decimal integers; a null value or other bytes fail the
    reader with the partition and offset, not a bare TypeError."""
    from harness.workload import ForeignRecordError, value_of

    assert value_of(_Message(b"17"), "c0") == 17
    for value in (None, b"\x00\x01"):
        with pytest.raises(ForeignRecordError, match="c0: partition 2 offset 41"):
            value_of(_Message(value), "c0")
