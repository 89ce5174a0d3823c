"""Where a cluster keeps its finalized feature levels (KIP-584): the
:class:`FinalizedFeaturesStore` protocol and the lone broker's implementation, a small file in
its data directory (``seglog-finalized-features.json``, replaced atomically by
``checkpoints.atomic_write_bytes``). A ZooKeeper cluster keeps them in Kafka 2.8's
``/feature`` znode (:mod:`.features_zk`). The partition seam hands the broker the store of its
mode (``PartitionSeam.finalized_features_store``), so the UpdateFeatures handler never asks
which mode it runs in.

An epoch orders the versions of the finalized set: the file's counter (one more at every
write), the znode's version in ZooKeeper (as Kafka 2.8's ``FinalizedFeatureCache``). A write
names the epoch it read; a store that holds another one refuses it
(:class:`FeatureEpochMismatch`), so two brokers deciding on different sets cannot both win.
"""

from __future__ import annotations

import os
from typing import Any, Awaitable, Callable, Mapping, Protocol

from ..errors import CorruptCheckpointError, SeglogError
from ..feature_updates import decode_feature_file, encode_feature_file
from ..storage import checkpoints

__all__ = ["FEATURES_FILE_NAME", "FeatureEpochMismatch", "FileFeatureStore",
           "FinalizedFeaturesStore", "read_feature_file", "write_feature_file"]

#: The lone broker's file of finalized features, in its data directory.
FEATURES_FILE_NAME = "seglog-finalized-features.json"


class FeatureEpochMismatch(SeglogError):
    """The store's finalized features changed since the epoch a write named."""


class FinalizedFeaturesStore(Protocol):
    """A cluster's durable finalized feature levels. ``epoch``: the epoch last read or
    written (None: nothing written yet), what a write names as expected."""

    epoch: int | None

    async def load(self) -> tuple[int, dict[str, int]] | None:
        """``(epoch, levels)`` held, or None when nothing was ever written (the broker then
        keeps a new cluster's defaults); a cluster's store also starts following changes
        made through other brokers (at its first load), handing each to its
        ``on_change(epoch, levels)``. Called again after a :class:`FeatureEpochMismatch`."""

    async def write(self, levels: Mapping[str, int], expected_epoch: int | None) -> int:
        """Make ``levels`` the finalized set, durably, if the store still holds
        ``expected_epoch`` (None: nothing written yet); returns the new epoch.
        :class:`FeatureEpochMismatch` otherwise."""

    async def stop(self) -> None:
        """Stop following changes."""


def read_feature_file(data_dir: str | os.PathLike[str]) -> tuple[int, dict[str, int]] | None:
    """``(epoch, levels)`` of ``data_dir``'s file, None without one;
    :class:`~seglog.errors.CorruptCheckpointError` for a file that does not decode."""
    path = os.path.join(data_dir, FEATURES_FILE_NAME)
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 20)
    except FileNotFoundError:
        return None
    try:
        return decode_feature_file(data)
    except ValueError as exc:
        raise CorruptCheckpointError(f"{path}: {exc}") from None


def write_feature_file(data_dir: str | os.PathLike[str], epoch: int,
                       levels: Mapping[str, int]) -> None:
    """Replace ``data_dir``'s file with ``epoch`` and ``levels``, atomically and durably."""
    checkpoints.atomic_write_bytes(os.path.join(data_dir, FEATURES_FILE_NAME),
                                   encode_feature_file(epoch, levels))


class FileFeatureStore:
    """A lone broker's :class:`FinalizedFeaturesStore`: the file of ``data_dir``, read and
    replaced through ``run_blocking(fn, *args)`` (off the loop). Nothing but this broker
    changes it, so there is nothing to follow."""

    def __init__(self, data_dir: str | os.PathLike[str],
                 run_blocking: Callable[..., Awaitable[Any]]):
        self.data_dir = data_dir
        self._run_blocking = run_blocking
        self.epoch: int | None = None

    async def load(self) -> tuple[int, dict[str, int]] | None:
        """The file's ``(epoch, levels)``, None without one."""
        held: tuple[int, dict[str, int]] | None = await self._run_blocking(
            read_feature_file, self.data_dir)
        self.epoch = None if held is None else held[0]
        return held

    async def write(self, levels: Mapping[str, int], expected_epoch: int | None) -> int:
        """Write ``levels`` at the next epoch (see the protocol)."""
        if expected_epoch != self.epoch:
            raise FeatureEpochMismatch(
                f"finalized features are at epoch {self.epoch}, not {expected_epoch}")
        epoch = 0 if self.epoch is None else self.epoch + 1
        await self._run_blocking(write_feature_file, self.data_dir, epoch, dict(levels))
        self.epoch = epoch
        return epoch

    async def stop(self) -> None:
        """Nothing to stop."""
