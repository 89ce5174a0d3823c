"""A cluster's SCRAM credentials in ZooKeeper, where Kafka 2.x keeps them:
``/config/users/<sanitized user>`` holds ``{"version":1,"config":{"SCRAM-SHA-256":
"salt=...,stored_key=...,server_key=...,iterations=4096", ...}}``, and each change is
announced by a ``/config/changes/config_change_<seq>`` naming ``users/<sanitized user>``
(``AdminZkClient.changeUserOrUserClientIdConfig``).

The same znode holds the user's client quotas (``producer_byte_rate``, ...: another module's):
a change here reads the znode, replaces only the ``SCRAM-SHA-*`` keys and writes it back with
the version it read (a lost race is read and applied again), so no other key is ever
dropped.

:class:`ZkCredentialStore` keeps every user's credentials in memory (a login looks them up
without I/O): all of them read at start (a credential that does not parse is
:class:`~seglog.errors.CorruptCredentialsError`: the broker does not start), then one user
again whenever a notification names it (:meth:`ZkCredentialStore.user_changed`, called by
the config change manager) or this broker changed it. User names are sanitized as Kafka's
``Sanitizer`` does (URL encoding, ``*`` as ``%2A``).

Runs on the broker's event loop; ZooKeeper calls go through ``run_blocking``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable, Iterable

from ..errors import CorruptCredentialsError
from ..sasl.scram import MECHANISMS, ScramCredential, ScramMechanism
from . import zk_data
from .zk_data import desanitize, sanitize
from .zk_client import NodeExistsError

__all__ = ["USERS_ENTITY_TYPE", "ZkCredentialStore"]

log = logging.getLogger("seglog.cluster.scram_users")

#: The config entity type of users.
USERS_ENTITY_TYPE = "users"
#: How many times a change is read and written again after losing a race on the znode.
RACE_ATTEMPTS_MAX = 20


def _credentials_of(values: dict[str, str], *, path: str) -> dict[str, ScramCredential]:
    out: dict[str, ScramCredential] = {}
    for name in MECHANISMS:
        if name in values:
            try:
                out[name] = ScramCredential.from_kafka(str(values[name]))
            except ValueError as exc:
                raise CorruptCredentialsError(f"{path}: {name}: {exc}", path=path) from None
    return out


class ZkCredentialStore:
    """SCRAM credentials in ZooKeeper (see the module docstring): ``zk`` is the broker's
    :class:`~seglog.cluster.zk_client.KafkaZkClient`, ``run_blocking(fn, *args)`` runs a
    blocking call off the loop. Same interface as the lone broker's file store."""

    def __init__(self, zk: Any, run_blocking: Callable[..., Awaitable[Any]]):
        self._zk = zk
        self._run_blocking = run_blocking
        self._users: dict[str, dict[str, ScramCredential]] = {}
        self._lock = asyncio.Lock()

    def _path(self, user: str) -> str:
        return zk_data.config_entity_path(USERS_ENTITY_TYPE, sanitize(user))

    def _read_user(self, user: str) -> tuple[dict[str, str], int]:
        """Blocking: the znode's whole config and its version."""
        path = self._path(user)
        data, version = self._zk.get_data_and_version(path)
        return zk_data.decode_entity_config(data, path=path), version

    async def load(self) -> None:
        """Read every user's credentials; CorruptCredentialsError for one that does not
        parse."""
        names = await self._run_blocking(
            self._zk.get_children, f"{zk_data.CONFIG_PATH}/{USERS_ENTITY_TYPE}")
        users = {}
        for name in names:
            user = desanitize(name)
            try:
                values, _ = await self._run_blocking(self._read_user, user)
            except zk_data.ZkDataError as exc:
                raise CorruptCredentialsError(str(exc), path=self._path(user)) from None
            credentials = _credentials_of(values, path=self._path(user))
            if credentials:
                users[user] = credentials
        self._users = users

    async def user_changed(self, sanitized_name: str | None) -> None:
        """A notification named ``users/<sanitized_name>``: read that user again (None:
        every user, after a new ZooKeeper session). A value that does not parse is logged and
        the user's old credentials dropped (a running broker stays up; the next start
        refuses)."""
        if sanitized_name is None:
            try:
                await self.load()
            except CorruptCredentialsError as exc:
                log.error("SCRAM credentials are unreadable: %s", exc)
            return
        user = desanitize(sanitized_name)
        try:
            values, _ = await self._run_blocking(self._read_user, user)
            credentials = _credentials_of(values, path=self._path(user))
        except (zk_data.ZkDataError, CorruptCredentialsError) as exc:
            log.error("SCRAM credentials of user %r are unreadable: %s", user, exc)
            credentials = {}
        if credentials:
            self._users[user] = credentials
        else:
            self._users.pop(user, None)

    def get(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        """``user``'s credential for ``mechanism``, None when none."""
        return self._users.get(user, {}).get(mechanism.name)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        """Every user's credentials."""
        return {user: dict(creds) for user, creds in self._users.items()}

    async def alter(self, changes: Iterable[tuple[str, str, ScramCredential | None]]) -> None:
        """Write the changes to each user's znode (read-modify-write of the SCRAM keys only),
        then announce each user changed; raises the ZooKeeper client's errors."""
        by_user: dict[str, list[tuple[str, ScramCredential | None]]] = {}
        for user, mechanism, credential in changes:
            by_user.setdefault(user, []).append((mechanism, credential))
        async with self._lock:
            for user, user_changes in by_user.items():
                await self._run_blocking(self._write_user, user, user_changes)
                await self.user_changed(sanitize(user))

    def _write_user(self, user: str, changes: list[tuple[str, ScramCredential | None]]) -> None:
        """Blocking: the compare-and-set loop on one user's znode, then the notification."""
        path = self._path(user)
        for _ in range(RACE_ATTEMPTS_MAX):
            values, version = self._read_user(user)
            for mechanism, credential in changes:
                if credential is None:
                    values.pop(mechanism, None)
                else:
                    values[mechanism] = credential.to_kafka()
            data = zk_data.encode_entity_config(values)
            if version < 0:
                try:
                    self._zk.create_recursive(path, data)
                except NodeExistsError:  # created meanwhile (quotas, another broker)
                    continue
            else:
                done, _ = self._zk.conditional_update_path(path, data, version)
                if not done:
                    continue
            self._zk.create_config_change_notification(
                zk_data.entity_change_path(USERS_ENTITY_TYPE, sanitize(user)))
            return
        raise RuntimeError(f"gave up writing {path} after {RACE_ATTEMPTS_MAX} races")

