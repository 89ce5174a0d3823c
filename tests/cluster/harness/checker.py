"""The Jepsen-style checker of R§6.4 over a recorded history (:mod:`.history`).

Built from Jepsen's queue checker (``jepsen.tests.kafka``; the anomaly names are those of
the jepsen-io/redpanda README), Kafka's ``validate_delivery`` (``tests/kafkatest/utils/
util.py``) and the replica comparison of Kafka's ``EpochDrivenReplicationProtocolAcceptance
Test`` (``crcSeq``). :func:`check` reports every anomaly it finds; which kinds a scenario
tolerates (acks=1 allows ``lost-write``; an unclean election allows ``committed-read-lost``)
is the scenario's decision, never the checker's.

Kinds (each an :class:`Anomaly` with the events that show it):

* ``lost-write``: an ok send at offset *o* whose value is not at *o* in the final read; with
  no final read of the partition, one whose offset was never polled while a later offset was.
* ``inconsistent-offsets``: two different values at one offset of one partition, across ok
  sends, polls and the final read.
* ``duplicate``: one value at two offsets. Forbidden with idempotence; without it allowed
  (then a *note*) for a value whose send was indeterminate or may have been retried
  (``retries`` > 0).
* ``G1a`` (aborted read): a value whose send definitely failed appears anywhere.
* ``phantom``: a value no producer ever sent appears (garbage or a mixed-up run).
* ``ok-without-offset``: a send acknowledged without an offset (librdkafka reports a success
  with no offset when the broker answers a base offset of -1, or DUPLICATE_SEQUENCE_NUMBER,
  which neither Kafka 4.x nor seglog sends); the send then counts as indeterminate.
* ``nonmonotonic-send``: one producer's later send lands at a lower offset of a partition
  than its earlier one. Forbidden with idempotence and <= 5 in flight, and with
  ``max.in.flight`` = 1 where the client keeps a partition to one request in flight (the Java
  client and kafka-python mute the partition until its batch is answered); otherwise a note.
  librdkafka (``client`` = ``librdkafka`` in the producer's settings) does not, without
  idempotence: when a partition is handed back to a broker (a Metadata answer without a
  leader, a leader change) it may send the partition's next batch on the same connection
  before the previous one is answered, and when the first is refused (NOT_LEADER_OR_FOLLOWER:
  the new leader had not taken over yet, which Kafka's own brokers also answer while a
  LeaderAndIsr is under way) and retried, the second lands first (seen with
  ``debug=msg,broker,topic``: two ProduceRequests for one partition 51 ms apart, the first
  refused, the second stored). So for a non-idempotent librdkafka producer it is a note.
* ``nonmonotonic-poll`` / ``poll-skip``: one consumer, with no reassignment in between, goes
  backwards, or jumps over offsets that exist (in the final read, or when there is none in
  what the history saw).
* ``committed-read-lost``: a value polled during the run is not at its offset in the final
  read (consumers only see records below the high watermark: never allowed, even with
  acks=1, unless the scenario elected uncleanly or deleted a disk).
* ``unseen`` (always a note): ok sends never polled, one note per partition.
* ``replica-divergence`` (a batch that differs), ``replica-missing`` (a replica holding a
  strict prefix), ``replica-epoch-divergence``, ``replica-hw-above-leo``,
  ``replica-nonmonotonic-offsets``: after healing, the replicas of a partition must hold the
  same (base offset, CRC) sequence below the leader's high watermark, agree on the last
  ``leader-epoch-checkpoint`` entry that starts below it, keep HW <= LEO and never let
  offsets go down inside a log.

Transactions (R§6.4 #10), from the ``txn`` events and the ``txn`` of each send; "visible"
means seen by a read_committed poll or in the read_committed final read (``final-read`` with
``isolation`` = ``read_committed``):

* ``aborted-read`` (Jepsen's G1a for transactions): a value of an *aborted* transaction is
  visible.
* ``txn-lost``: a *committed* transaction's acknowledged records on a partition are all
  missing from the read_committed final read (below the last stable offset it read to).
* ``txn-partial``: a transaction's acknowledged records on a partition are partly there: a
  *committed* one missing some of them, or an *unknown* one (its commit failed or timed
  out) that is visible somewhere yet missing records elsewhere. An unknown transaction must be
  all or nothing: wholly visible or wholly invisible.
* ``G0`` and ``int-send-skip`` (always notes: Kafka's model allows them, as Jepsen's
  ``:bad-error-types`` leaves them out): two committed transactions that wrote two partitions
  in opposite orders (a write cycle), and a transaction whose records on one partition have
  another producer's record between them.

A read_committed consumer skips the offsets of aborted records and transaction markers, so
its ``poll-skip`` is judged against the read_committed final read (or, without one, against
what the history saw minus the values of transactions not known to be committed).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections import defaultdict
from typing import Any, Iterable

from .history import (
    ABORTED, ASSIGN, COMMITTED, FAIL, FINAL_READ, INFO, INVOKE, META, OK, POLL, PRODUCER,
    READ_COMMITTED, READ_UNCOMMITTED, REPLICA, SEND, TXN, UNKNOWN, partition_values,
)

#: Clients whose ``max.in.flight`` = 1 does not keep a non-idempotent producer's retried
#: batches in order (see ``nonmonotonic-send`` above), by the ``client`` of its settings.
UNORDERED_RETRY_CLIENTS = frozenset({"librdkafka"})

#: Every kind :func:`check` can report, anomaly or note.
KINDS = frozenset({
    "lost-write", "inconsistent-offsets", "duplicate", "G1a", "phantom", "nonmonotonic-send",
    "nonmonotonic-poll", "poll-skip", "committed-read-lost", "unseen", "replica-divergence",
    "replica-missing", "replica-epoch-divergence", "replica-hw-above-leo",
    "replica-nonmonotonic-offsets", "aborted-read", "txn-lost", "txn-partial", "G0",
    "int-send-skip", "ok-without-offset",
})


@dataclasses.dataclass(frozen=True)
class Anomaly:
    """One finding: its ``kind`` (see :data:`KINDS`), where (``partition``, ``offset``,
    ``value`` where they apply), a human ``detail`` and the ``events`` that show it."""

    kind: str
    detail: str
    events: tuple[dict[str, Any], ...] = ()
    partition: int | None = None
    offset: int | None = None
    value: int | None = None

    def __str__(self) -> str:
        where = "".join(f" {name}={v}" for name, v in (
            ("partition", self.partition), ("offset", self.offset), ("value", self.value))
            if v is not None)
        indexes = ",".join(str(e.get("index")) for e in self.events[:8])
        more = "..." if len(self.events) > 8 else ""
        return f"{self.kind}:{where} {self.detail} (events {indexes}{more})"


@dataclasses.dataclass
class CheckResult:
    """What :func:`check` found: ``anomalies`` break a rule, ``notes`` are reported and
    allowed (unseen sends, duplicates a non-idempotent producer may make, reorderings its
    settings allow); ``stats`` counts what the history held."""

    anomalies: list[Anomaly]
    notes: list[Anomaly]
    stats: dict[str, int]

    @property
    def valid(self) -> bool:
        """No anomaly of any kind."""
        return not self.anomalies

    def kinds(self) -> set[str]:
        """The kinds among :attr:`anomalies`."""
        return {a.kind for a in self.anomalies}

    def of_kind(self, kind: str) -> list[Anomaly]:
        """The anomalies of one kind."""
        return [a for a in self.anomalies if a.kind == kind]

    def excluding(self, *kinds: str) -> list[Anomaly]:
        """The anomalies whose kind is not among ``kinds`` (what a scenario that tolerates
        those kinds must find empty)."""
        return [a for a in self.anomalies if a.kind not in kinds]

    def summary(self, limit: int = 20) -> str:
        """A readable report: the stats, then up to ``limit`` anomalies and notes."""
        lines = [" ".join(f"{k}={v}" for k, v in sorted(self.stats.items()))]
        for title, items in (("anomalies", self.anomalies), ("notes", self.notes)):
            lines.append(f"{len(items)} {title}")
            lines += [f"  {a}" for a in items[:limit]]
            if len(items) > limit:
                lines.append(f"  ... {len(items) - limit} more")
        return "\n".join(lines)


@dataclasses.dataclass
class _Send:
    process: str
    value: int
    invoke: dict[str, Any] | None = None
    completion: dict[str, Any] | None = None

    @property
    def outcome(self) -> str:
        # A send never completed (the run ended first) is indeterminate.
        return self.completion["type"] if self.completion is not None else INFO

    @property
    def txn(self) -> str | None:
        return self.invoke.get("txn") if self.invoke is not None else None

    @property
    def placed(self) -> tuple[int, int] | None:
        """(partition, offset) of an acknowledged send, else None."""
        c = self.completion
        if c is None or c["type"] != OK:
            return None
        return int(c["partition"]), int(c["offset"])


@dataclasses.dataclass
class _Txn:
    txn: str
    invoke: dict[str, Any] | None = None
    completion: dict[str, Any] | None = None
    sends: list[_Send] = dataclasses.field(default_factory=list)

    @property
    def outcome(self) -> str:
        # A transaction never completed (the run ended first) may have been committed.
        return self.completion["outcome"] if self.completion is not None else UNKNOWN

    def shown(self) -> tuple[dict[str, Any], ...]:
        return tuple(e for e in (self.invoke, self.completion) if e is not None)


def check(events: Iterable[dict[str, Any]]) -> CheckResult:
    """Check a history (events in the order they were recorded) and report every anomaly."""
    events = list(events)
    producers: dict[str, dict[str, Any]] = {}
    sends: dict[int, _Send] = {}
    polls: list[dict[str, Any]] = []
    final: dict[int, dict[int, int]] = {}
    final_events: dict[int, dict[str, Any]] = {}
    # The read_committed final read, apart: it legitimately lacks aborted records.
    final_rc: dict[int, dict[int, int]] = {}
    final_rc_events: dict[int, dict[str, Any]] = {}
    txns: dict[str, _Txn] = {}
    replicas: dict[int, list[dict[str, Any]]] = defaultdict(list)
    stats: dict[str, int] = defaultdict(int)

    for event in events:
        kind, f = event["type"], event["f"]
        if f == PRODUCER and kind == META:
            producers[event["process"]] = event
        elif f == SEND:
            value = int(event["value"])
            send = sends.setdefault(value, _Send(event["process"], value))
            if kind == INVOKE:
                send.invoke = event
            else:
                send.completion = event
        elif f == POLL:
            polls.append(event)
        elif f == TXN:
            txn = txns.setdefault(event["txn"], _Txn(event["txn"]))
            if kind == INVOKE:
                txn.invoke = event
            else:
                txn.completion = event
        elif f == FINAL_READ:
            partition = int(event["partition"])
            records = {int(o): int(v) for o, v in event["records"]}
            if event.get("isolation", READ_UNCOMMITTED) == READ_COMMITTED:
                final_rc[partition], final_rc_events[partition] = records, event
            else:
                final[partition], final_events[partition] = records, event
        elif f == REPLICA:
            replicas[int(event["partition"])].append(event)
    anomalies: list[Anomaly] = []
    for send in sends.values():
        c = send.completion
        if c is not None and c["type"] == OK and c.get("offset") is None:
            anomalies.append(Anomaly(
                "ok-without-offset", "acknowledged without an offset; counted as "
                "indeterminate", (c,) if send.invoke is None else (send.invoke, c),
                c.get("partition"), None, send.value))
            send.completion = dict(c, type=INFO)
        stats[f"send-{send.outcome}"] += 1
        if send.txn is not None:
            txns.setdefault(send.txn, _Txn(send.txn)).sends.append(send)
    for txn in txns.values():
        stats[f"txn-{txn.outcome}"] += 1
    stats["polls"] = len(polls)
    stats["final-partitions"] = len(final)
    if final_rc:
        stats["final-rc-partitions"] = len(final_rc)

    notes: list[Anomaly] = []

    # Every observation of (partition, offset) -> value, and of value -> positions.
    at: dict[tuple[int, int], dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    polled: dict[tuple[int, int], dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for send in sends.values():
        c = send.completion
        if c is not None and c["type"] == OK:
            at[(int(c["partition"]), int(c["offset"]))][send.value].append(c)
    for event in polls:
        for partition, pairs in partition_values(event["values"]).items():
            for offset, value in pairs:
                at[(partition, offset)][value].append(event)
                polled[(partition, offset)][value].append(event)
    for partition, records in final.items():
        for offset, value in records.items():
            at[(partition, offset)][value].append(final_events[partition])
    for partition, records in final_rc.items():
        for offset, value in records.items():
            at[(partition, offset)][value].append(final_rc_events[partition])

    # inconsistent-offsets
    for (partition, offset), values in sorted(at.items()):
        if len(values) > 1:
            anomalies.append(Anomaly(
                "inconsistent-offsets", f"values {sorted(values)} at one offset",
                _events(values.values()), partition, offset))

    # duplicate, G1a, phantom
    positions: dict[int, dict[tuple[int, int], list[dict]]] = defaultdict(dict)
    for position, values in at.items():
        for value, evs in values.items():
            positions[value][position] = evs
    for value, where in sorted(positions.items()):
        send = sends.get(value)
        shown = _events(where.values())
        if send is None or send.invoke is None:
            anomalies.append(Anomaly("phantom", f"seen at {sorted(where)}, never sent",
                                     shown, value=value))
            continue
        if send.outcome == FAIL:
            anomalies.append(Anomaly(
                "G1a", f"send failed ({send.completion.get('error')}) but seen at "
                       f"{sorted(where)}", (send.completion,) + shown, value=value))
        if len(where) > 1:
            settings = producers.get(send.process, {})
            allowed = (settings.get("idempotent") is False
                       and (send.outcome == INFO or int(settings.get("retries", 0)) > 0))
            finding = Anomaly("duplicate", f"at {sorted(where)}", (send.invoke,) + shown,
                              value=value)
            (notes if allowed else anomalies).append(finding)

    # lost-write, unseen
    unseen: dict[int, list[_Send]] = defaultdict(list)
    polled_max: dict[int, int] = {}
    for partition, offset in polled:
        polled_max[partition] = max(polled_max.get(partition, -1), offset)
    for send in sends.values():
        c = send.completion
        if c is None or c["type"] != OK:
            continue
        partition, offset = int(c["partition"]), int(c["offset"])
        if partition in final:
            found = final[partition].get(offset)
            if found != send.value:
                anomalies.append(Anomaly(
                    "lost-write", f"acknowledged at offset {offset}; the final read has "
                                  f"{'nothing' if found is None else found} there",
                    (send.invoke, c, final_events[partition]), partition, offset, send.value))
        elif (partition, offset) not in polled and polled_max.get(partition, -1) > offset \
                and (send.txn is None or txns[send.txn].outcome == COMMITTED):
            # (A read_committed consumer skips the records of aborted transactions.)
            anomalies.append(Anomaly(
                "lost-write", f"acknowledged at offset {offset}, never polled, and offset "
                              f"{polled_max[partition]} was", (send.invoke, c),
                partition, offset, send.value))
        if send.value not in polled.get((partition, offset), {}):
            unseen[partition].append(send)
    for partition, missed in sorted(unseen.items()):
        if polls:
            values = sorted(s.value for s in missed)
            notes.append(Anomaly(
                "unseen", f"{len(values)} acknowledged sends never polled: {values[:20]}"
                          f"{'...' if len(values) > 20 else ''}",
                tuple(s.completion for s in missed[:50]), partition))

    # committed-read-lost
    for (partition, offset), values in sorted(polled.items()):
        if partition not in final:
            continue
        found = final[partition].get(offset)
        for value, evs in values.items():
            if found != value:
                anomalies.append(Anomaly(
                    "committed-read-lost", f"polled during the run; the final read has "
                                           f"{'nothing' if found is None else found} there",
                    tuple(evs[:5]) + (final_events[partition],), partition, offset, value))

    anomalies += _send_order(sends, producers, notes)
    uncommitted_values = {s.value for t in txns.values() if t.outcome != COMMITTED
                          for s in t.sends}
    anomalies += _poll_order(events, final, at, final_rc, uncommitted_values)
    anomalies += _transactions(txns, polls, final_rc, final_rc_events)
    _transaction_orders(txns, at, notes)
    for partition, listing in sorted(replicas.items()):
        anomalies += _replicas(partition, listing)
    return CheckResult(anomalies, notes, dict(stats))


def _events(groups: Iterable[list[dict]]) -> tuple[dict, ...]:
    seen: dict[int, dict] = {}
    for group in groups:
        for event in group:
            seen.setdefault(event["index"], event)
    return tuple(seen[i] for i in sorted(seen))


def _send_order(sends: dict[int, _Send], producers: dict[str, dict],
                notes: list[Anomaly]) -> list[Anomaly]:
    """nonmonotonic-send: per producer and partition, ok sends in invoke order must land at
    increasing offsets."""
    found = []
    by_producer: dict[tuple[str, int], list[_Send]] = defaultdict(list)
    for send in sends.values():
        c = send.completion
        if c is not None and c["type"] == OK and send.invoke is not None:
            by_producer[(send.process, int(c["partition"]))].append(send)
    for (process, partition), ordered in sorted(by_producer.items()):
        ordered.sort(key=lambda s: s.invoke["index"])
        settings = producers.get(process, {})
        in_flight = int(settings.get("max_in_flight", 1_000_000))
        idempotent = settings.get("idempotent") is True
        one_at_a_time = in_flight == 1 and (idempotent or settings.get("client")
                                            not in UNORDERED_RETRY_CLIENTS)
        forbidden = one_at_a_time or (idempotent and in_flight <= 5)
        highest: _Send | None = None
        for send in ordered:
            offset = int(send.completion["offset"])
            if highest is not None and offset < int(highest.completion["offset"]):
                finding = Anomaly(
                    "nonmonotonic-send",
                    f"sent after value {highest.value} (offset "
                    f"{highest.completion['offset']}) but landed at {offset}",
                    (highest.invoke, send.invoke, highest.completion, send.completion),
                    partition, offset, send.value)
                (found if forbidden else notes).append(finding)
            if highest is None or offset > int(highest.completion["offset"]):
                highest = send
    return found


def _poll_order(events: list[dict], final: dict[int, dict[int, int]],
                at: dict[tuple[int, int], dict], final_rc: dict[int, dict[int, int]],
                uncommitted_values: set[int]) -> list[Anomaly]:
    """nonmonotonic-poll and poll-skip, per consumer and partition, reset by reassignment.
    A read_committed consumer's skips are judged against what read_committed can see."""
    found = []
    existing: dict[int, set[int]] = defaultdict(set)
    for partition, offset in at:
        if partition not in final:
            existing[partition].add(offset)
    for partition, records in final.items():
        existing[partition] = set(records)
    existing_rc: dict[int, set[int]] = defaultdict(set)
    for (partition, offset), values in at.items():
        if partition not in final_rc and not set(values) & uncommitted_values:
            existing_rc[partition].add(offset)
    for partition, records in final_rc.items():
        existing_rc[partition] = set(records)
    last: dict[tuple[str, int], tuple[int, dict]] = {}
    for event in events:
        if event["type"] != OK:
            continue
        consumer = event["process"]
        if event["f"] == ASSIGN:
            for key in [k for k in last if k[0] == consumer]:
                del last[key]
            continue
        if event["f"] != POLL:
            continue
        visible = existing_rc if event.get("isolation") == READ_COMMITTED else existing
        for partition, pairs in partition_values(event["values"]).items():
            for offset, value in pairs:
                previous = last.get((consumer, partition))
                if previous is not None:
                    before, before_event = previous
                    if offset <= before:
                        found.append(Anomaly(
                            "nonmonotonic-poll", f"offset {offset} polled after {before}",
                            (before_event, event), partition, offset, value))
                    else:
                        skipped = sorted(o for o in visible[partition] if before < o < offset)
                        if skipped:
                            found.append(Anomaly(
                                "poll-skip", f"jumped from {before} to {offset} over "
                                             f"existing offsets {skipped[:10]}",
                                (before_event, event), partition, offset, value))
                if previous is None or offset > previous[0]:
                    last[(consumer, partition)] = (offset, event)
    return found


def _transactions(txns: dict[str, _Txn], polls: list[dict], final_rc: dict[int, dict[int, int]],
                  final_rc_events: dict[int, dict]) -> list[Anomaly]:
    """aborted-read, txn-lost and txn-partial (module docstring)."""
    found: list[Anomaly] = []
    if not txns:
        return found
    # Every value visible to read_committed, with the events that show it.
    visible: dict[int, list[dict]] = defaultdict(list)
    for event in polls:
        if event.get("isolation") == READ_COMMITTED:
            for pairs in partition_values(event["values"]).values():
                for _offset, value in pairs:
                    visible[value].append(event)
    final_values: dict[int, set[int]] = {}
    for partition, records in final_rc.items():
        final_values[partition] = set(records.values())
        for value in records.values():
            visible[value].append(final_rc_events[partition])
    for txn in sorted(txns.values(), key=lambda t: t.txn):
        outcome = txn.outcome
        if outcome == ABORTED:
            for send in txn.sends:
                if send.value in visible:
                    placed = send.placed
                    found.append(Anomaly(
                        "aborted-read", f"transaction {txn.txn} was aborted; read_committed "
                                        f"saw its value (G1a)",
                        txn.shown() + tuple(visible[send.value][:5]),
                        placed[0] if placed else None, placed[1] if placed else None,
                        send.value))
            continue
        if outcome == UNKNOWN and not any(s.value in visible for s in txn.sends):
            continue  # wholly invisible: it ended aborted
        # Committed, or unknown and visible: every acknowledged record must be there.
        by_partition: dict[int, list[_Send]] = defaultdict(list)
        for send in txn.sends:
            placed = send.placed
            if placed is None or placed[0] not in final_rc:
                continue
            if placed[1] >= int(final_rc_events[placed[0]].get("high_watermark", 1 << 62)):
                continue  # above the last stable offset read to: not judged
            by_partition[placed[0]].append(send)
        for partition, wrote in sorted(by_partition.items()):
            missing = [s for s in wrote if s.value not in final_values[partition]]
            if not missing:
                continue
            kind = "txn-lost" if outcome == COMMITTED and len(missing) == len(wrote) \
                else "txn-partial"
            found.append(Anomaly(
                kind, f"{outcome} transaction {txn.txn}: {len(missing)} of its {len(wrote)} "
                      f"acknowledged records here missing from the read_committed final read: "
                      f"{sorted(s.value for s in missing)[:20]}",
                txn.shown() + tuple(s.completion for s in missing[:10])
                + (final_rc_events[partition],), partition, missing[0].placed[1],
                missing[0].value))
    return found


def _transaction_orders(txns: dict[str, _Txn], at: dict[tuple[int, int], dict],
                        notes: list[Anomaly]) -> None:
    """The notes G0 (two committed transactions that wrote two partitions in opposite orders)
    and int-send-skip (another record between one transaction's records on a partition)."""
    firsts: dict[str, dict[int, int]] = {}
    observed: dict[int, list[int]] = defaultdict(list)  # partition -> sorted offsets seen
    for partition, offset in sorted(at):
        observed[partition].append(offset)
    for txn in sorted(txns.values(), key=lambda t: t.txn):
        mine = {s.value for s in txn.sends}
        offsets: dict[int, list[int]] = defaultdict(list)
        for send in txn.sends:
            if send.placed is not None:
                offsets[send.placed[0]].append(send.placed[1])
        for partition, placed in sorted(offsets.items()):
            low, high = min(placed), max(placed)
            seen = observed[partition]
            between = [o for o in seen[bisect.bisect_right(seen, low):
                                       bisect.bisect_left(seen, high)]
                       if set(at[(partition, o)]) - mine]
            if between:
                notes.append(Anomaly(
                    "int-send-skip", f"transaction {txn.txn}: other records at {between[:10]} "
                                     f"between its offsets {low} and {high}",
                    txn.shown(), partition, between[0]))
        if txn.outcome == COMMITTED and len(offsets) >= 2:
            firsts[txn.txn] = {p: min(o) for p, o in offsets.items()}
    names = sorted(firsts)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            common = sorted(set(firsts[a]) & set(firsts[b]))
            before = {p for p in common if firsts[a][p] < firsts[b][p]}
            after = set(common) - before
            if before and after:
                p, q = min(before), min(after)
                notes.append(Anomaly(
                    "G0", f"transactions {a} and {b}: {a} first on partition {p}, {b} first "
                          f"on partition {q}", txns[a].shown() + txns[b].shown(), p))


def _replicas(partition: int, listing: list[dict]) -> list[Anomaly]:
    """Replica convergence after healing (``crcSeq`` below the leader's high watermark,
    epoch checkpoint tails, HW <= LEO, offsets never decreasing)."""
    found = []
    for replica in listing:
        hw, leo = int(replica["high_watermark"]), int(replica["log_end_offset"])
        if hw > leo:
            found.append(Anomaly("replica-hw-above-leo",
                                 f"broker {replica['broker']}: HW {hw} > LEO {leo}",
                                 (replica,), partition))
        previous_last = None
        for base, last, _crc in replica["batches"]:
            if (previous_last is not None and base <= previous_last) or last < base:
                found.append(Anomaly(
                    "replica-nonmonotonic-offsets",
                    f"broker {replica['broker']}: batch [{base}, {last}] after offset "
                    f"{previous_last}", (replica,), partition, base))
                break
            previous_last = last
    if len(listing) < 2:
        return found
    hw = max(int(r["high_watermark"]) for r in listing)
    committed = {r["broker"]: [(int(b), int(c)) for b, _l, c in r["batches"] if int(b) < hw]
                 for r in listing}
    reference_broker, reference = max(committed.items(), key=lambda kv: len(kv[1]))
    for replica in listing:
        mine = committed[replica["broker"]]
        if mine == reference:
            continue
        diverge = next((i for i, (a, b) in enumerate(zip(mine, reference)) if a != b), None)
        if diverge is None:  # a strict prefix: behind, not conflicting
            found.append(Anomaly(
                "replica-missing",
                f"broker {replica['broker']} holds {len(mine)} of the {len(reference)} "
                f"batches below HW {hw} (broker {reference_broker} holds them all)",
                tuple(listing), partition))
        else:
            found.append(Anomaly(
                "replica-divergence",
                f"broker {replica['broker']} differs from broker {reference_broker} below "
                f"HW {hw} at batch #{diverge} ({mine[diverge]} vs {reference[diverge]})",
                tuple(listing), partition, mine[diverge][0]))
    # Only entries that start below the HW: a leader assigns its epoch's start at its LEO
    # when it becomes leader, and a follower learns that epoch only from a batch written in
    # it, so an epoch with no data yet is on the leader alone (Kafka does the same).
    tails = {}
    for r in listing:
        entries = [tuple(e) for e in r["epochs"] if int(e[1]) < hw]
        tails[r["broker"]] = entries[-1] if entries else None
    if len(set(tails.values())) > 1:
        found.append(Anomaly("replica-epoch-divergence",
                             f"leader-epoch-checkpoint last entries differ: {tails}",
                             tuple(listing), partition))
    return found
