"""The share-group scenario driver: share consumers run as scripted processes, their history
recorded, and the checker over it.

A consumer is one process, either Kafka 4.4's Java ``KafkaShareConsumer``
(``java/ShareScenarioConsumer.java``, compiled once per session by :func:`compile_java`) or
confluent-kafka's ``ShareConsumer`` (``confluent_share_consumer.py``). Both take the same
arguments (``bootstrap group topic member run_seconds [rule ...]``; the rules are in the Java
file's header), obey ``STOP`` on stdin and print the same lines; the one that matters
is::

    DELIVERY <poll_ms> <member> <topic> <partition> <offset> <delivery_count> <ack> <commit_ms> <result>

one per record delivered, printed once its acknowledgement (ACCEPT, RELEASE or REJECT; HOLD for
a record kept unacknowledged) was committed with ``commitSync``: ``result`` is ``ok`` when the
broker confirmed it. :class:`Delivery` is one such line and the ``check_*`` functions judge a
list of them (the history of one scenario); each returns the violations it found, an empty
list when the history is right.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

HERE = Path(__file__).resolve().parent
JAVA_SOURCE = HERE / "java" / "ShareScenarioConsumer.java"
JAVA_MAIN = "ShareScenarioConsumer"
CONFLUENT_SCRIPT = HERE / "confluent_share_consumer.py"
#: The two client implementations a scenario runs with.
CLIENTS = ("java", "confluent")


def confluent_share_missing() -> str | None:
    """Why confluent-kafka cannot run a share consumer here (its ``ShareConsumer`` came in
    2.16), or None."""
    import confluent_kafka

    if hasattr(confluent_kafka, "ShareConsumer"):
        return None
    return f"confluent-kafka {confluent_kafka.version()[0]} has no ShareConsumer (2.16+)"


@dataclass(frozen=True)
class Delivery:
    """One DELIVERY line: a record polled by ``member`` with ``delivery_count`` and the
    acknowledgement it got (``result`` "ok" once the broker confirmed it)."""

    poll_ms: int
    member: str
    topic: str
    partition: int
    offset: int
    delivery_count: int
    ack: str
    commit_ms: int
    result: str

    @classmethod
    def parse(cls, line: str) -> "Delivery":
        """The Delivery of a ``DELIVERY ...`` line."""
        f = line.split()
        return cls(int(f[1]), f[2], f[3], int(f[4]), int(f[5]), int(f[6]), f[7], int(f[8]),
                   f[9])

    @property
    def confirmed(self) -> bool:
        """Whether the broker confirmed the acknowledgement."""
        return self.result == "ok"


def compile_java(ref, out_dir: Path) -> tuple[str, str]:
    """``(java, classpath)`` to run the Java driver, compiled into ``out_dir``; raises when
    there is no javac next to ``ref.java``."""
    javac = shutil.which("javac") or str(Path(ref.java).with_name("javac"))
    if not Path(javac).exists():
        raise RuntimeError("needs javac (a JDK)")
    subprocess.run([javac, "-cp", ref.classpath, "-d", str(out_dir), str(JAVA_SOURCE)],
                   check=True, timeout=180, capture_output=True)
    return ref.java, f"{out_dir}:{ref.classpath}"


class ShareConsumerProcess:
    """One scripted share consumer (``client`` "java" or "confluent") running for at most
    ``run_s`` seconds; ``lines`` is what it printed so far."""

    def __init__(self, client: str, java: tuple[str, str] | None, bootstrap: str, group: str,
                 topic: str, member: str, *, run_s: int = 120, rules: Sequence[str] = ()):
        args = [bootstrap, group, topic, member, str(run_s), *rules]
        if client == "java":
            assert java is not None
            cmd = [java[0], "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                   "-cp", java[1], JAVA_MAIN, *args]
        elif client == "confluent":
            cmd = [sys.executable, str(CONFLUENT_SCRIPT), *args]
        else:
            raise ValueError(client)
        self.member = member
        self.process = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, errors="replace")
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:  # type: ignore[union-attr]
            self.lines.append(line.rstrip())

    def deliveries(self) -> list[Delivery]:
        """The DELIVERY lines printed so far."""
        return [Delivery.parse(line) for line in list(self.lines)
                if line.startswith("DELIVERY ")]

    def tail(self, lines: int = 30) -> list[str]:
        """The last lines of its output (the non-DELIVERY ones first: errors, logs)."""
        other = [line for line in self.lines if not line.startswith("DELIVERY ")]
        return other[-lines:] + list(self.lines[-10:])

    def stop(self, timeout_s: float = 60.0) -> int | None:
        """Send STOP, wait for it to exit (killed, by pid, after ``timeout_s``)."""
        try:
            if self.process.poll() is None:
                self.process.stdin.write("STOP\n")  # type: ignore[union-attr]
                self.process.stdin.flush()  # type: ignore[union-attr]
                self.process.stdin.close()  # type: ignore[union-attr]
        except (BrokenPipeError, OSError):
            pass
        try:
            code = self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            code = None
        self._reader.join(10)
        return code

    def kill(self) -> None:
        """SIGKILL it if it still runs."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


class SlowProducer(threading.Thread):
    """Produces ``count`` records (values ``b"%06d" % i`` from ``first`` on) to partition 0 of
    ``topic``, 10 every 100 ms, acks=all, through broker kills and leader moves (librdkafka
    buffers and retries for ``timeout_s``); after :meth:`join`, ``errors`` holds its delivery
    errors and ``unflushed`` what its final flush left (0 when all were delivered)."""

    def __init__(self, bootstrap: str, topic: str, first: int, count: int, timeout_s: float):
        import confluent_kafka

        super().__init__(daemon=True)
        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
            "message.timeout.ms": int(timeout_s * 1000), "reconnect.backoff.max.ms": 500})
        self.topic, self.first, self.count, self.timeout_s = topic, first, count, timeout_s
        self.errors: list[str] = []
        self.unflushed = -1

    def _delivered(self, error, _message) -> None:
        if error is not None:
            self.errors.append(str(error))

    def run(self) -> None:
        for i in range(self.first, self.first + self.count):
            self.producer.produce(self.topic, b"%06d" % i, partition=0,
                                  on_delivery=self._delivered)
            self.producer.poll(0)
            if i % 10 == 9:
                time.sleep(0.1)
        self.unflushed = self.producer.flush(self.timeout_s)


def wait_until(done: Callable[[], bool], what: str, timeout_s: float,
               context: Callable[[], object] = lambda: "") -> None:
    """Poll ``done()`` every 0.1 s for at most ``timeout_s``; fails with ``what`` and
    ``context()``."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}: "
                                 f"{context()}")
        time.sleep(0.1)


def history(consumers: Iterable[ShareConsumerProcess]) -> list[Delivery]:
    """Every delivery of ``consumers``, in poll-time order."""
    return sorted((d for c in consumers for d in c.deliveries()),
                  key=lambda d: (d.poll_ms, d.offset))


def confirmed_accepts(deliveries: Iterable[Delivery]) -> dict[tuple[int, int], int]:
    """``(partition, offset) -> how many confirmed ACCEPTs``."""
    counts: dict[tuple[int, int], int] = defaultdict(int)
    for d in deliveries:
        if d.ack == "ACCEPT" and d.confirmed:
            counts[(d.partition, d.offset)] += 1
    return counts


# --- the checker -----------------------------------------------------------------------------

def check_accepted_exactly_once(deliveries: Sequence[Delivery],
                                records: Iterable[tuple[int, int]]) -> list[str]:
    """Every record of ``records`` ((partition, offset)) has exactly one confirmed ACCEPT, and
    no ACCEPT was confirmed for a record not produced."""
    wanted = set(records)
    accepts = confirmed_accepts(deliveries)
    out = [f"{r}: never accepted" for r in sorted(wanted - set(accepts))]
    out += [f"{r}: accepted {n} times" for r, n in sorted(accepts.items()) if n > 1]
    out += [f"{r}: accepted but never produced" for r in sorted(set(accepts) - wanted)]
    return out


def check_no_delivery_after_ack(deliveries: Sequence[Delivery]) -> list[str]:
    """No record is delivered again after an acknowledgement of it that ended its life
    (ACCEPT or REJECT) was confirmed: a poll that returned it later than that commit
    returned is a redelivery of an acknowledged record."""
    done_at: dict[tuple[int, int], Delivery] = {}
    for d in deliveries:
        if d.ack in ("ACCEPT", "REJECT") and d.confirmed:
            key = (d.partition, d.offset)
            if key not in done_at or d.commit_ms < done_at[key].commit_ms:
                done_at[key] = d
    out = []
    for d in deliveries:
        first = done_at.get((d.partition, d.offset))
        if first is not None and d is not first and d.poll_ms > first.commit_ms:
            out.append(f"{(d.partition, d.offset)}: delivered to {d.member} (count "
                       f"{d.delivery_count}) at {d.poll_ms} after {first.ack} confirmed at "
                       f"{first.commit_ms}")
    return out


def check_counts_increase(deliveries: Sequence[Delivery]) -> list[str]:
    """The delivery counts of each record, in delivery order, are 1, 2, 3, ..."""
    by_record: dict[tuple[int, int], list[int]] = defaultdict(list)
    for d in deliveries:
        by_record[(d.partition, d.offset)].append(d.delivery_count)
    return [f"{r}: delivery counts {counts}" for r, counts in sorted(by_record.items())
            if counts != list(range(1, len(counts) + 1))]


def check_all_confirmed(deliveries: Sequence[Delivery]) -> list[str]:
    """Every acknowledgement (other than HOLD) was confirmed by the broker."""
    return [f"{(d.partition, d.offset)}: {d.ack} by {d.member} not confirmed: {d.result}"
            for d in deliveries if d.ack != "HOLD" and not d.confirmed]


def deliveries_of(deliveries: Sequence[Delivery], partition: int,
                  offset: int) -> list[tuple[int, str]]:
    """``[(delivery_count, ack), ...]`` of one record in delivery order."""
    return [(d.delivery_count, d.ack) for d in deliveries
            if (d.partition, d.offset) == (partition, offset)]


def env_with_src() -> dict[str, str]:
    """This process's environment with the imported seglog's ``src`` first on PYTHONPATH."""
    import seglog

    src = str(Path(seglog.__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    return env
