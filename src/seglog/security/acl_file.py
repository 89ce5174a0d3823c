"""A lone broker's ACLs on disk: ``seglog-acls.json`` in its data directory.

The file is one JSON object, ``{"version": 1, "acls": [<binding>, ...]}`` (each binding as
:meth:`~seglog.security.acl.AclBinding.to_json` writes it), replaced durably at every change
(written beside, fsynced, renamed, the directory fsynced), so a crash leaves the old set or the
new one. A file that is not such an object is :class:`~seglog.errors.CorruptCheckpointError`
at start: the broker refuses to serve with ACLs it cannot read rather than serve with none.
"""

from __future__ import annotations

import json
import os
from typing import Any, Awaitable, Callable, Iterable

from ..errors import CorruptCheckpointError
from ..storage.checkpoints import atomic_write_bytes
from .acl import AclBinding

__all__ = ["ACLS_FILE", "AclFileStore", "load_acls", "save_acls"]

#: The file's name in the data directory.
ACLS_FILE = "seglog-acls.json"
_VERSION = 1


def load_acls(data_dir: str) -> frozenset[AclBinding]:
    """The ACLs saved in ``data_dir`` (none when the file does not exist);
    CorruptCheckpointError when it cannot be read as the format above."""
    path = os.path.join(data_dir, ACLS_FILE)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return frozenset()
    try:
        data = json.loads(raw.decode("utf-8"))
        if not isinstance(data, dict) or data.get("version") != _VERSION or \
                not isinstance(data.get("acls"), list):
            raise ValueError("not a version 1 ACL file")
        return frozenset(AclBinding.from_json(item) for item in data["acls"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise CorruptCheckpointError(f"{path} is not a valid ACL file: {e}", path=path) from None


def save_acls(data_dir: str, bindings: Iterable[AclBinding]) -> None:
    """Replace the ACL file of ``data_dir`` with ``bindings``, durably."""
    items = sorted((b.to_json() for b in bindings), key=lambda item: json.dumps(item, sort_keys=True))
    text = json.dumps({"version": _VERSION, "acls": items}, indent=1, sort_keys=True)
    atomic_write_bytes(os.path.join(data_dir, ACLS_FILE), text.encode("utf-8"))


class AclFileStore:
    """A lone broker's :class:`~seglog.security.acl_store.AclStore`: the ACL file of
    ``data_dir``, read and replaced through ``run_blocking(fn, *args)`` (off the loop)."""

    def __init__(self, data_dir: str, run_blocking: Callable[..., Awaitable[Any]]):
        self.data_dir = data_dir
        self._run_blocking = run_blocking
        self._bindings: frozenset[AclBinding] = frozenset()

    async def load(self) -> frozenset[AclBinding]:
        """The ACLs in the file (none without one); CorruptCheckpointError for a bad one."""
        self._bindings = await self._run_blocking(load_acls, self.data_dir)
        return self._bindings

    async def apply(self, added: Iterable[AclBinding], removed: Iterable[AclBinding]
                    ) -> frozenset[AclBinding]:
        """Add and remove, saved durably before returning the new whole set."""
        bindings = (self._bindings | frozenset(added)) - frozenset(removed)
        await self._run_blocking(save_acls, self.data_dir, bindings)
        self._bindings = bindings
        return bindings

    async def stop(self) -> None:
        """Nothing to stop: the file is written at each change."""
