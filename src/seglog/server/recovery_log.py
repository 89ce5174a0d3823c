"""What the broker's start found on disk, said in the log: a clean start in one line, a
recovery after an unclean shutdown in one line per partition that needed work.

Each open :class:`~seglog.storage.log.Log` keeps its
:class:`~seglog.storage.loader.RecoveryReport` (what opening it validated, cut, deleted and
rebuilt). After the Store opened, :func:`log_open_reports` walks them once and logs, at INFO
on ``seglog.server.recovery``: per partition recovered, which segments were validated,
whose indexes (offset, time and transaction index, and the producer state with them) were
rebuilt, how many bytes were truncated where and which segments were deleted; then a
summary line. A partition that failed to load is logged at ERROR with its reason (it stays
offline until ``seglog recover``). While the broker serves, :class:`OfflineWatch` logs each
partition that goes offline later (a write failed, a segment failed to load at first use,
its log dir failed) and each that comes back.
"""

from __future__ import annotations

import logging
from typing import Any

from ..errors import SeglogError

log = logging.getLogger("seglog.server.recovery")


def _partition_line(name: str, partition: int, report: Any) -> str | None:
    """The line of one partition's report, or None when opening it changed nothing."""
    parts = []
    if report.recovered_segments:
        parts.append(f"{len(report.recovered_segments)} segments validated (from offset "
                     f"{min(report.recovered_segments)})")
    if report.rebuilt_indexes:
        parts.append("indexes and producer state rebuilt for segments "
                     + ", ".join(str(b) for b in report.rebuilt_indexes))
    for t in report.truncations:
        parts.append(f"{t.truncated_bytes} bytes truncated from segment {t.base_offset} at "
                     f"position {t.position} ({t.reason})")
    if report.deleted_segments:
        parts.append("segments deleted: " + ", ".join(str(b) for b in report.deleted_segments))
    if report.completed_swaps:
        parts.append(f"{len(report.completed_swaps)} compaction swaps completed")
    if report.removed_files:
        parts.append(f"{len(report.removed_files)} leftover files removed")
    if report.missing_offsets:
        parts.append("offsets missing: " + ", ".join(
            f"{a}..{b}" for a, b in report.missing_offsets))
    if not parts:
        return None
    return f"{name}-{partition}: " + "; ".join(parts)


def log_open_reports(store: Any) -> dict[str, int]:
    """Log what opening ``store`` (a :class:`~seglog.store.Store`) found: one INFO line per
    partition whose open did work, an ERROR line per offline partition, and a summary.
    Returns the counts logged (``partitions``, ``recovered``, ``offline``,
    ``truncated_bytes``) for tests."""
    offline = store.offline_partitions()
    counts = {"partitions": 0, "recovered": 0, "offline": len(offline), "truncated_bytes": 0}
    unclean = False
    for name in store.topics():
        try:
            topic = store.topic(name)
        except SeglogError:
            continue  # deleted meanwhile
        for partition in range(topic.partitions):
            if (name, partition) in offline:
                continue
            try:
                report = topic.log(partition).recovery_report
            except SeglogError:
                continue
            counts["partitions"] += 1
            unclean = unclean or not report.clean_shutdown
            line = _partition_line(name, partition, report)
            if line is not None:
                counts["recovered"] += 1
                counts["truncated_bytes"] += report.truncated_bytes
                log.info("Recovered %s", line)
    for (name, partition), reason in sorted(offline.items()):
        log.error("Partition %s-%d is offline: %s (seglog recover brings it back)", name,
                  partition, reason)
    if not counts["partitions"] and not offline:
        log.info("Started with no partitions on disk")
    elif unclean:
        log.info("Started after an unclean shutdown: %d partitions loaded, %d recovered "
                 "(%d bytes truncated), %d offline", counts["partitions"], counts["recovered"],
                 counts["truncated_bytes"], counts["offline"])
    else:
        log.info("Started after a clean shutdown: %d partitions loaded, %d offline",
                 counts["partitions"], counts["offline"])
    return counts


class OfflineWatch:
    """Logs the changes of a Store's offline partitions between two :meth:`check` calls
    (the broker's log dir check, every few seconds): ERROR with the reason for each that
    went offline, INFO for each back online."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._known: dict[Any, str] = dict(store.offline_partitions())

    def check(self) -> None:
        """Take offline the dirs where a write failed (``Store.check_log_dirs``), then log
        what changed since the last check."""
        for path in self._store.check_log_dirs():
            log.error("Log dir %s is offline: a write to it failed; its partitions are "
                      "offline", path)
        now = dict(self._store.offline_partitions())
        for tp, reason in sorted(now.items()):
            if tp not in self._known:
                log.error("Partition %s-%d is offline: %s", tp[0], tp[1], reason)
        for tp in sorted(set(self._known) - set(now)):
            log.info("Partition %s-%d is online again", tp[0], tp[1])
        self._known = now
