"""A cluster's ACLs in ZooKeeper, in Kafka 2.x's layout (``AclAuthorizer``, ``ZkData``), and
their change notifications: ACLs created through one broker apply on every broker.

**The znodes.** One per resource pattern, holding every ACL of that pattern:
``/kafka-acl/<ResourceType>/<name>`` for a LITERAL pattern (``*`` included),
``/kafka-acl-extended/prefixed/<ResourceType>/<name>`` for a PREFIXED one, with
``<ResourceType>`` Kafka's ``Topic``, ``Group``, ``Cluster``, ``TransactionalId``,
``DelegationToken``, ``User`` and the data
``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}``.
A pattern left without ACLs loses its znode.

**Writing** (``AclAuthorizer.updateResourceAcls``): read the pattern's znode and its version,
apply the change, write it back only if the version is unchanged (retried from the read on a
lost race: two brokers changing one pattern at once both land), then create the change
notification, a persistent sequential ``/kafka-acl-changes/acl_changes_<seq>`` holding
``TOPIC:<name>`` (``ResourceType:name``) for a LITERAL pattern, or
``/kafka-acl-extended-changes/acl_changes_<seq>`` holding
``{"version":1,"resourceType":"TOPIC","name":"<name>","patternType":"PREFIXED"}``.

**Reading.** Every broker watches the children of both change paths; on any change it reads
all ACL znodes again and hands the whole set to its authorizer (Kafka re-reads the one pattern
named; a full read is simpler and the ACLs of a cluster are few). It reads them all at start
and after a new ZooKeeper session too. Notifications older than Kafka's 15 minutes are
deleted by whichever broker sees them first.

Threads: the blocking ZooKeeper calls run through ``run_blocking``; kazoo's watch callbacks
only wake the loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, Awaitable, Callable, Iterable

from ..security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from .zk_client import ZooKeeperClientError
from ..log_limits import REPEATS

__all__ = ["ACL_CHANGES_PATH", "EXTENDED_ACL_CHANGES_PATH", "EXTENDED_ACL_PATH", "LITERAL_ACL_PATH",
           "ZkAclStore", "acl_paths", "decode_acls", "encode_acls", "resource_path"]

log = logging.getLogger("seglog.cluster.acl_changes")

LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended/prefixed"
ACL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES_PATH = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
#: ``ZkNodeChangeNotificationListener``'s expiration of processed notifications.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
#: Most tries of one pattern's read-modify-write before giving up (a lost race each time).
UPDATE_TRIES_MAX = 20
_RETRY_DELAY_S = 0.5

#: Kafka's ``SecurityUtils.resourceTypeName``.
_TYPE_NAMES = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group",
               ResourceType.CLUSTER: "Cluster", ResourceType.TRANSACTIONAL_ID: "TransactionalId",
               ResourceType.DELEGATION_TOKEN: "DelegationToken", ResourceType.USER: "User"}
_TYPES_BY_NAME = {name: rtype for rtype, name in _TYPE_NAMES.items()}

#: ``(resource type, pattern type, name)``: one ACL znode.
Pattern = tuple[ResourceType, PatternType, str]


def _pascal(name: str) -> str:
    # Kafka's SecurityUtils.operationName / permissionTypeName: READ -> Read,
    # CLUSTER_ACTION -> ClusterAction.
    return "".join(part.capitalize() for part in name.split("_"))


_OPERATIONS = {_pascal(op.name): op for op in AclOperation}
_PERMISSIONS = {_pascal(p.name): p for p in AclPermissionType}


def resource_path(pattern: Pattern) -> str:
    """The znode of one resource pattern."""
    resource_type, pattern_type, name = pattern
    root = LITERAL_ACL_PATH if pattern_type is PatternType.LITERAL else EXTENDED_ACL_PATH
    return f"{root}/{_TYPE_NAMES[resource_type]}/{name}"


def encode_acls(bindings: Iterable[AclBinding]) -> bytes:
    """The znode data of one pattern's ACLs (Kafka's ``ResourceZNode.encode``)."""
    acls = sorted(({"principal": b.principal, "permissionType": _pascal(b.permission.name),
                    "operation": _pascal(b.operation.name), "host": b.host} for b in bindings),
                  key=lambda a: json.dumps(a, sort_keys=True))
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode("utf-8")


def decode_acls(pattern: Pattern, data: bytes | None) -> frozenset[AclBinding]:
    """The ACLs of one pattern's znode data; ValueError when it is not Kafka's format."""
    if not data:
        return frozenset()
    try:
        parsed = json.loads(data.decode("utf-8"))
        out = set()
        for acl in parsed["acls"]:
            out.add(AclBinding(pattern[0], pattern[2], pattern[1], str(acl["principal"]),
                               str(acl["host"]), _OPERATIONS[acl["operation"]],
                               _PERMISSIONS[acl["permissionType"]]))
        return frozenset(out)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise ValueError(f"bad ACL znode {resource_path(pattern)}: {e}") from None


def _change_notification(pattern: Pattern) -> tuple[str, bytes]:
    """``(path prefix, data)`` of the notification of a change to ``pattern``."""
    resource_type, pattern_type, name = pattern
    if pattern_type is PatternType.LITERAL:
        return f"{ACL_CHANGES_PATH}/{CHANGE_PREFIX}", f"{resource_type.name}:{name}".encode()
    event = {"version": 1, "resourceType": resource_type.name, "name": name,
             "patternType": pattern_type.name}
    return (f"{EXTENDED_ACL_CHANGES_PATH}/{CHANGE_PREFIX}",
            json.dumps(event, separators=(",", ":")).encode("utf-8"))


def acl_paths() -> tuple[str, ...]:
    """The persistent paths the layout needs."""
    return (LITERAL_ACL_PATH, EXTENDED_ACL_PATH, ACL_CHANGES_PATH, EXTENDED_ACL_CHANGES_PATH)


class ZkAclStore:
    """One broker's view of the cluster's ACLs (module docstring): ``zk`` (the broker's
    :class:`~seglog.cluster.zk_client.KafkaZkClient`), ``loop``, ``run_blocking(fn, *args)``
    and ``on_change(bindings)``, called on the loop with the whole set each time it is read
    again. Every method runs on the loop thread."""

    def __init__(self, *, zk: Any, loop: asyncio.AbstractEventLoop,
                 run_blocking: Callable[..., Awaitable[Any]],
                 on_change: Callable[[frozenset[AclBinding]], None]):
        self.zk = zk
        self.loop = loop
        self._run_blocking = run_blocking
        self._on_change = on_change
        self._wake = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._watches: list[Any] = []

    async def load(self) -> frozenset[AclBinding]:
        """:meth:`start` (the :class:`~seglog.security.acl_store.AclStore` protocol)."""
        return await self.start()

    async def start(self) -> frozenset[AclBinding]:
        """Create the layout's paths, watch the change paths and the session, and return
        every ACL as read now."""
        await self._run_blocking(self._ensure_paths)
        for path in (ACL_CHANGES_PATH, EXTENDED_ACL_CHANGES_PATH):
            self._watches.append(await self._run_blocking(
                self.zk.watch_children, path, self._on_children))
        await self._run_blocking(self.zk.add_session_listener, self._on_session_state)
        bindings: frozenset[AclBinding] = await self._run_blocking(self.read_all)
        self._task = self.loop.create_task(self._run(), name="seglog-acl-changes")
        return bindings

    async def stop(self) -> None:
        """Stop watching. Idempotent."""
        self._closing = True
        for watch in self._watches:
            watch.stop()
        self._watches.clear()
        try:
            self.zk.remove_session_listener(self._on_session_state)
        except Exception:  # noqa: BLE001 - the session may be closed already
            pass
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass

    async def apply(self, added: Iterable[AclBinding], removed: Iterable[AclBinding]
                    ) -> frozenset[AclBinding]:
        """Add ``added`` and remove ``removed`` in ZooKeeper (each pattern read, changed and
        written back conditionally, then announced); returns every ACL as read after."""
        changes: dict[Pattern, tuple[set[AclBinding], set[AclBinding]]] = {}
        for binding in added:
            changes.setdefault(_pattern_of(binding), (set(), set()))[0].add(binding)
        for binding in removed:
            changes.setdefault(_pattern_of(binding), (set(), set()))[1].add(binding)
        for pattern, (plus, minus) in changes.items():
            await self._run_blocking(self._update, pattern, plus, minus)
        result: frozenset[AclBinding] = await self._run_blocking(self.read_all)
        return result

    # --- blocking, off the loop ----------------------------------------------------------

    def _ensure_paths(self) -> None:
        for path in acl_paths():
            self.zk.create_recursive(path, throw_if_exists=False)

    def read_all(self) -> frozenset[AclBinding]:
        """Every ACL in ZooKeeper (blocking). A znode that is not Kafka's format is logged
        and skipped (Kafka logs it too and goes on)."""
        out: set[AclBinding] = set()
        for root, pattern_type in ((LITERAL_ACL_PATH, PatternType.LITERAL),
                                   (EXTENDED_ACL_PATH, PatternType.PREFIXED)):
            for type_name in self.zk.get_children(root):
                resource_type = _TYPES_BY_NAME.get(type_name)
                if resource_type is None:
                    continue
                for name in self.zk.get_children(f"{root}/{type_name}"):
                    pattern = (resource_type, pattern_type, name)
                    data, _version = self.zk.get_data_and_version(resource_path(pattern))
                    try:
                        out |= decode_acls(pattern, data)
                    except ValueError as e:
                        log.error("%s", e)
        return frozenset(out)

    def _update(self, pattern: Pattern, plus: set[AclBinding], minus: set[AclBinding]) -> None:
        from .zk_client import NodeExistsError

        path = resource_path(pattern)
        for _ in range(UPDATE_TRIES_MAX):
            data, version = self.zk.get_data_and_version(path)
            exists = self.zk.path_exists(path) if data is None else True
            current = decode_acls(pattern, data)
            wanted = (current | plus) - minus
            if wanted == current and exists == bool(wanted):
                return
            if not wanted:
                if exists:
                    self.zk.delete_path(path)
                break
            encoded = encode_acls(wanted)
            if not exists:
                try:
                    self.zk.create_recursive(path, encoded)
                except NodeExistsError:
                    continue  # another broker made it first: read it again
                break
            written, _new_version = self.zk.conditional_update_path(path, encoded, version)
            if written:
                break
        else:
            raise ZooKeeperClientError(f"ACL znode {path}: lost the race {UPDATE_TRIES_MAX} "
                                       "times")
        prefix, payload = _change_notification(pattern)
        self.zk.create_sequential(prefix, payload)

    def _purge(self) -> None:
        now_ms = time.time_ns() // 1_000_000
        for root in (ACL_CHANGES_PATH, EXTENDED_ACL_CHANGES_PATH):
            for child in self.zk.get_children(root):
                found = self.zk.get_data_and_ctime(f"{root}/{child}")
                if found is not None and now_ms - found[1] > CHANGE_EXPIRATION_MS:
                    self.zk.delete_path(f"{root}/{child}")

    # --- kazoo's threads: wake the loop, nothing else --------------------------------------

    def _wake_threadsafe(self) -> None:
        try:
            self.loop.call_soon_threadsafe(self._wake.set)
        except RuntimeError:
            pass  # the loop is closed: the broker is gone

    def _on_children(self, _children: list[str]) -> bool:
        self._wake_threadsafe()
        return not self._closing

    def _on_session_state(self, state: Any) -> None:
        # A new session may have missed notifications: read everything again.
        if "CONNECTED" in str(getattr(state, "name", state)).upper():
            self._wake_threadsafe()

    async def _run(self) -> None:
        while not self._closing:
            await self._wake.wait()
            self._wake.clear()
            if self._closing:
                return
            try:
                bindings = await self._run_blocking(self.read_all)
                await self._run_blocking(self._purge)
            except ZooKeeperClientError:
                REPEATS.log(log, logging.WARNING, "reading the ACLs from ZooKeeper failed; "
                            "retrying", exc_info=True)
                await asyncio.sleep(_RETRY_DELAY_S)
                self._wake.set()
                continue
            self._on_change(bindings)


def _pattern_of(binding: AclBinding) -> Pattern:
    return (binding.resource_type, binding.pattern_type, binding.name)
