"""Where SCRAM credentials live: :class:`CredentialStore`, and a lone broker's
:class:`FileCredentialStore` (a file in the data directory).

Every store keeps the credentials in memory (a SCRAM login looks them up on the event loop,
without I/O) and persists each change before it is acknowledged: AlterUserScramCredentials
answers only once the change is durable. A cluster's store (ZooKeeper's ``/config/users``)
is :class:`seglog.cluster.scram_users.ZkCredentialStore`, with the same interface.

The file (``scram-credentials.json``) is ``{"version": 1, "users": {"<user>":
{"SCRAM-SHA-256": "salt=...,stored_key=...,server_key=...,iterations=4096"}}}``: per user,
Kafka's own string form of each credential, as ZooKeeper keeps it. It is replaced whole:
written to a temporary file, fsynced, renamed over the old one, and the directory fsynced. A
file that does not parse is :class:`~seglog.errors.CorruptCredentialsError` at start: the
broker does not start with no users rather than the ones it was given.

Mutated on the event loop thread only (the file write runs on a worker thread, one at a
time).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Iterable, Mapping, Protocol

from ...errors import CorruptCredentialsError
from ...sasl.scram import MECHANISMS, ScramCredential, ScramMechanism
from ...storage import checkpoints

__all__ = ["CREDENTIALS_FILE", "CredentialStore", "FileCredentialStore", "Upsertion",
           "decode_user_credentials", "write_durably"]

#: The credential file's name in the data directory.
CREDENTIALS_FILE = "scram-credentials.json"
_VERSION = 1

#: ``(user, mechanism name, credential)`` to set, or ``(user, mechanism name, None)`` to
#: delete.
Upsertion = tuple[str, str, "ScramCredential | None"]


class CredentialStore(Protocol):
    """The SCRAM credentials of the cluster (see the module docstring)."""

    def get(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        """``user``'s credential for ``mechanism``, None when none."""

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        """Every user's credentials: ``{user: {mechanism name: credential}}``."""

    async def alter(self, changes: Iterable[Upsertion]) -> None:
        """Apply ``changes`` and persist them before returning (raises OSError or the
        ZooKeeper client's errors when that fails: nothing was acknowledged)."""


def decode_user_credentials(values: Mapping[str, str], *, path: str
                            ) -> dict[str, ScramCredential]:
    """The SCRAM credentials among an entity's config ``values`` (its ``SCRAM-SHA-*`` keys;
    other keys, client quotas, are not ours); CorruptCredentialsError naming ``path`` for a
    credential that does not parse."""
    out: dict[str, ScramCredential] = {}
    for name in MECHANISMS:
        text = values.get(name)
        if text is None:
            continue
        try:
            out[name] = ScramCredential.from_kafka(str(text))
        except ValueError as exc:
            raise CorruptCredentialsError(f"{path}: {name}: {exc}", path=path) from None
    return out


class FileCredentialStore:
    """A lone broker's credentials in ``<data dir>/scram-credentials.json`` (see the module
    docstring). :meth:`load` reads the file (absent: no users)."""

    def __init__(self, data_dir: str):
        self.path = os.path.join(data_dir, CREDENTIALS_FILE)
        self._users: dict[str, dict[str, ScramCredential]] = {}
        self._lock = asyncio.Lock()

    def load(self) -> None:
        """Read the file; CorruptCredentialsError when it does not parse."""
        try:
            with open(self.path, "rb") as file:
                raw = file.read()
        except FileNotFoundError:
            self._users = {}
            return
        try:
            document = json.loads(raw)
            if not isinstance(document, dict) or document.get("version") != _VERSION \
                    or not isinstance(document.get("users"), dict):
                raise ValueError("not a version 1 credential file")
            users: dict[str, dict[str, ScramCredential]] = {}
            for user, values in document["users"].items():
                if not isinstance(values, dict):
                    raise ValueError(f"user {user!r}: not an object")
                users[user] = decode_user_credentials(values, path=self.path)
        except (ValueError, UnicodeDecodeError) as exc:
            raise CorruptCredentialsError(f"SCRAM credential file {self.path} is corrupt: "
                                          f"{exc}", path=self.path) from None
        self._users = {user: creds for user, creds in users.items() if creds}

    def get(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        """See :class:`CredentialStore`."""
        return self._users.get(user, {}).get(mechanism.name)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        """See :class:`CredentialStore`."""
        return {user: dict(creds) for user, creds in self._users.items()}

    async def alter(self, changes: Iterable[Upsertion]) -> None:
        """See :class:`CredentialStore`: the new file is durable before the memory changes."""
        async with self._lock:
            users = self.users()
            for user, mechanism, credential in changes:
                if credential is None:
                    users.get(user, {}).pop(mechanism, None)
                else:
                    users.setdefault(user, {})[mechanism] = credential
            users = {user: creds for user, creds in users.items() if creds}
            document = {"version": _VERSION, "users": {
                user: {name: cred.to_kafka() for name, cred in sorted(creds.items())}
                for user, creds in sorted(users.items())}}
            data = json.dumps(document, indent=1).encode("utf-8")
            await asyncio.get_running_loop().run_in_executor(None, write_durably,
                                                             self.path, data)
            self._users = users


def write_durably(path: str, data: bytes) -> None:
    """Replace the secret file ``path`` with ``data`` durably (temp file, fsync, rename,
    fsync of the directory), readable by the broker's user only."""
    checkpoints.atomic_write_bytes(path, data, mode=0o600)

