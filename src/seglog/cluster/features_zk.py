"""A ZooKeeper cluster's finalized features (KIP-584) in Kafka 2.8's ``/feature`` znode
(``FeatureZNode``: ``{"version":1,"status":1,"features":{name:{"min_version_level":..,
"max_version_level":..}}}``), its epoch the znode's version, as Kafka 2.8's
``FinalizedFeatureChangeListener`` and ``FinalizedFeatureCache`` read it. Every broker watches
the znode and hands each new set to its ``on_change(epoch, levels)`` on the loop (the broker's
``Server.set_finalized_features``); a write is a conditional ``setData`` on the version read
(or a create when the znode does not exist), so two brokers writing at once cannot both win.

A znode that does not decode is logged and ignored (the broker keeps what it had), as
Kafka's listener refuses it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable, Mapping

from ..feature_updates import decode_feature_znode, encode_feature_znode
from .features_store import FeatureEpochMismatch
from .zk_client import UNKNOWN_VERSION, NodeExistsError

__all__ = ["FEATURE_PATH", "ZkFeatureStore", "read_feature_znode"]

log = logging.getLogger("seglog.cluster")

#: Kafka's ``FeatureZNode.path``.
FEATURE_PATH = "/feature"


def read_feature_znode(zk: Any) -> tuple[int, dict[str, int]] | None:
    """``(znode version, levels)`` of ``/feature``, None when it does not exist (blocking);
    ValueError for data that does not decode."""
    data, version = zk.get_data_and_version(FEATURE_PATH)
    if version == UNKNOWN_VERSION:
        return None
    return version, decode_feature_znode(data or b"")


class ZkFeatureStore:
    """One broker's view of ``/feature``: ``zk`` (the broker's
    :class:`~seglog.cluster.zk_client.KafkaZkClient`), ``loop``, ``run_blocking(fn, *args)``
    and ``on_change(epoch, levels)``, called on the loop at every change of the znode."""

    def __init__(self, *, zk: Any, loop: asyncio.AbstractEventLoop,
                 run_blocking: Callable[..., Awaitable[Any]],
                 on_change: Callable[[int, dict[str, int]], None]):
        self.zk = zk
        self.loop = loop
        self._run_blocking = run_blocking
        self._on_change = on_change
        self._watch: Any = None
        #: The znode version last read or written (None: no znode).
        self.epoch: int | None = None

    async def load(self) -> tuple[int, dict[str, int]] | None:
        """Watch ``/feature`` (at the first call) and return what it holds now (None when
        absent; a znode that does not decode is logged and read as absent, but its version
        kept for the next write)."""
        if self._watch is None:
            self._watch = await self._run_blocking(self.zk.watch_data, FEATURE_PATH,
                                                   self._on_data)
        data, version = await self._run_blocking(self.zk.get_data_and_version, FEATURE_PATH)
        if version == UNKNOWN_VERSION:
            self.epoch = None
            return None
        self.epoch = version
        try:
            return version, decode_feature_znode(data or b"")
        except ValueError as exc:
            log.error("ignoring %s: %s", FEATURE_PATH, exc)
            return None

    def _on_data(self, data: bytes | None, stat: Any) -> None:
        # kazoo's thread: decode here, hand over on the loop.
        if data is None or stat is None:
            return
        try:
            levels = decode_feature_znode(data)
        except ValueError as exc:
            log.error("ignoring %s (version %s): %s", FEATURE_PATH, stat.version, exc)
            return
        self.loop.call_soon_threadsafe(self._on_change, stat.version, levels)

    async def write(self, levels: Mapping[str, int], expected_epoch: int | None) -> int:
        """Write ``levels`` if ``/feature`` is still at ``expected_epoch`` (None: absent);
        returns the new znode version."""
        data = encode_feature_znode(levels)
        result: int = await self._run_blocking(self._write, data, expected_epoch)
        self.epoch = result
        return result

    def _write(self, data: bytes, expected_epoch: int | None) -> int:
        if expected_epoch is None:
            try:
                self.zk.create_recursive(FEATURE_PATH, data)
            except NodeExistsError:
                raise FeatureEpochMismatch(f"{FEATURE_PATH} was created meanwhile") from None
            return 0
        done, version = self.zk.conditional_update_path(FEATURE_PATH, data, expected_epoch)
        if not done:
            raise FeatureEpochMismatch(f"{FEATURE_PATH} is no longer at version "
                                       f"{expected_epoch}")
        return int(version)

    async def stop(self) -> None:
        """Stop watching. Idempotent."""
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.stop()
