"""Where a broker keeps its ACLs: the :class:`AclStore` protocol, implemented by a lone
broker's file (:class:`seglog.security.acl_file.AclFileStore`) and by a cluster's ZooKeeper
layout (:class:`seglog.cluster.acl_changes.ZkAclStore`). The partition seam hands the broker
the one of its mode (``PartitionSeam.acl_store``), so the ACL handlers never ask which mode
they run in."""

from __future__ import annotations

from typing import Iterable, Protocol

from .acl import AclBinding

__all__ = ["AclStore"]


class AclStore(Protocol):
    """A broker's durable set of ACLs."""

    async def load(self) -> frozenset[AclBinding]:
        """Every ACL held (at start; a cluster's store also starts following changes made
        through other brokers, handing each new whole set to its ``on_change``)."""

    async def apply(self, added: Iterable[AclBinding], removed: Iterable[AclBinding]
                    ) -> frozenset[AclBinding]:
        """Add ``added``, remove ``removed``, durably, and return the whole set after."""

    async def stop(self) -> None:
        """Stop following changes."""
