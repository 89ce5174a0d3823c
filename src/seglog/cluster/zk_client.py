"""``KafkaZkClient``: Kafka 2.8's ZooKeeper client (``kafka/zk/KafkaZkClient.scala``) over kazoo.

One broker's ZooKeeper session and every read and write a seglog cluster makes in it, with
Kafka's fencing rules (research R§1.3):

- **checked ephemeral registration** (:meth:`KafkaZkClient.register_broker`): one ``multi`` of
  ``create(EPHEMERAL)`` + ``setData(version 0)`` yields the znode's czxid, the broker epoch.
  On NODEEXISTS the owner decides: this session (ours: done), the session of our previous
  registration while we are on a new one (a ZOOKEEPER-2985 leftover: delete and re-create, the
  KAFKA-7165 rule, :func:`should_recreate_ephemeral`), any other session (another live broker
  with this id: :class:`NodeExistsError`);
- **controller election** (:meth:`~KafkaZkClient.try_elect_controller`): one ``multi`` of
  ``create(/controller, EPHEMERAL)`` + ``setData(/controller_epoch, epoch + 1, version)``; on
  NODEEXISTS or BADVERSION the candidate re-reads and counts the win only if ``/controller``
  names it *and* the epoch is the one it wrote (a reply lost in a reconnect);
- **controller writes** (``*_partition_states``, ``delete_*`` with
  ``controller_epoch_zk_version``) are each ``multi(check(/controller_epoch, zk_version), op)``:
  a failed check is :class:`ControllerMovedError`, and nothing is written;
- **a leader's ISR write** (:meth:`~KafkaZkClient.update_isr`) is a zkVersion CAS; on
  BADVERSION the znode is re-read and the write counts as done when it already holds this very
  state (``ReplicationUtils.checkLeaderAndIsrZkData``), else :class:`BadVersionError`;
- **producer-id blocks** (:meth:`~KafkaZkClient.allocate_producer_id_block`): read, write the
  next block of 1000 with a CAS, retry on BADVERSION (``ProducerIdManager``).

**Connection loss.** Like Kafka's ``retryRequestsUntilConnected``, an operation that fails for
connection loss, an expired session or a timed-out request waits for the client to be connected
again and is sent again, all within ``connection_timeout_ms`` of the call; after that it raises
:class:`ZooKeeperUnreachableError`. (A write retried this way may have been applied the first
time: creates then see NODEEXISTS and CASes BADVERSION, which the rules above resolve as Kafka
does.) kazoo itself reconnects for ever in the background, with a new session after expiry.

**Watches and sessions.** :meth:`~KafkaZkClient.watch_data` and
:meth:`~KafkaZkClient.watch_children` are kazoo's ``DataWatch``/``ChildrenWatch`` recipes, which
re-arm themselves after a reconnect and after a new session (a plain ZooKeeper watch is
one-shot and dies with its session, kazoo #151). Their functions, and the session listeners of
:meth:`~KafkaZkClient.add_session_listener`, run on kazoo's threads: they must not block and
must not call ZooKeeper (kazoo #355); hand the event to a queue or an event loop.

Errors are this module's (:class:`BadVersionError`, :class:`NoNodeError`,
:class:`NodeExistsError`, :class:`NotEmptyError`, :class:`ControllerMovedError`,
:class:`ZooKeeperUnreachableError`, all :class:`ZooKeeperClientError`); kazoo's exceptions are
not part of the API. Bytes that are not Kafka's JSON raise
:class:`seglog.cluster.zk_data.ZkDataError`.

Blocking. Thread-safe as kazoo is: any thread may call any method (not from a kazoo callback).
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
from typing import Any, Callable, Iterable, Mapping

from kazoo.client import KazooClient, KazooState
from kazoo import exceptions as kx
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from seglog import error_codes as codes
from seglog.log_limits import limit_logger
from seglog.errors import InvalidTopicError, SeglogError, TopicExistsError
from seglog.types import TopicPartition

from . import zk_data
from .zk_data import (
    BrokerInfo,
    BrokerRegistration,
    ControllerEpoch,
    PartitionState,
    ProducerIdBlock,
    TopicAssignment,
)

_log = logging.getLogger(__name__)

__all__ = [
    "KafkaZkClient", "Watch", "expire_session", "should_recreate_ephemeral",
    "ZooKeeperClientError", "BadVersionError", "NoNodeError", "NodeExistsError", "NotEmptyError",
    "ControllerMovedError", "ZooKeeperUnreachableError",
    "CONNECTED", "SUSPENDED", "LOST",
]

#: The session states a session listener receives (kazoo's ``KazooState`` values).
CONNECTED = KazooState.CONNECTED
SUSPENDED = KazooState.SUSPENDED
LOST = KazooState.LOST

#: ``ZkVersion.MatchAnyVersion``: a version that matches any (an unconditional write).
MATCH_ANY_VERSION = -1
#: ``ZkVersion.UnknownVersion``: the version reported for a znode that does not exist.
UNKNOWN_VERSION = -2

#: Attempts of a loop that re-reads after losing a race (checked ephemeral, producer-id
#: blocks, chroot creation); far above what contention among a few brokers needs.
RACE_ATTEMPTS_MAX = 100
#: Operations per ``multi`` when deleting a tree under the controller-epoch check (ZooKeeper
#: caps a request at jute.maxbuffer, 1 MiB by default).
MULTI_OPS_MAX = 500
#: kazoo's reconnection schedule: retry for ever, at most 1 s apart (fault tests reconnect fast).
_RECONNECT_RETRY = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0}

# Kafka's Topic.legalChars and maxNameLength; "." and ".." are not topics.
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


# ------------------------------------------------------------------------------- errors


class ZooKeeperClientError(SeglogError):
    """Base class of this module's errors. ``path`` is the znode concerned ("" if none)."""

    def __init__(self, message: str = "", *, path: str = ""):
        super().__init__(f"{message}: {path}" if path and message else (message or path))
        self.path = path


class NoNodeError(ZooKeeperClientError):
    """The znode does not exist (ZooKeeper's NONODE)."""


class NodeExistsError(ZooKeeperClientError):
    """The znode already exists (NODEEXISTS); from :meth:`KafkaZkClient.register_broker`:
    another live session registered this broker id."""


class BadVersionError(ZooKeeperClientError):
    """A compare-and-set lost: the znode's version is not the expected one (BADVERSION)."""

    kafka_error_code = codes.INVALID_UPDATE_VERSION  # what a lost ISR CAS answers in Kafka


class NotEmptyError(ZooKeeperClientError):
    """The znode has children (NOTEMPTY)."""


class ControllerMovedError(ZooKeeperClientError):
    """A controller write's check of ``/controller_epoch``'s version failed: another controller
    was elected since (Kafka's ``ControllerMovedException``); nothing was written."""


class ZooKeeperUnreachableError(ZooKeeperClientError):
    """No connection to ZooKeeper within the connection timeout (or the client is closed)."""


_CONNECTION_ERRORS = (kx.ConnectionLoss, kx.SessionExpiredError, kx.OperationTimeoutError)

_TRANSLATED = (
    (kx.NoNodeError, NoNodeError),
    (kx.NodeExistsError, NodeExistsError),
    (kx.BadVersionError, BadVersionError),
    (kx.NotEmptyError, NotEmptyError),
)


def _translate(exc: BaseException, path: str = "") -> BaseException:
    """kazoo's error -> this module's (other errors are returned unchanged)."""
    for kazoo_type, ours in _TRANSLATED:
        if isinstance(exc, kazoo_type):
            return ours(type(exc).__name__, path=path)
    if isinstance(exc, kx.ConnectionClosedError):
        return ZooKeeperUnreachableError("the client is closed", path=path)
    return exc


def should_recreate_ephemeral(owner_session_id: int, current_session_id: int,
                              registered_session_id: int | None) -> bool:
    """The KAFKA-7165 rule (``KafkaZkClient.shouldReCreateEphemeralZNode``): an ephemeral znode
    owned by the session of our previous registration, while we are on another session, is a
    leftover of ZOOKEEPER-2985 (an expired session's ephemeral that survived) and may be
    deleted and created again."""
    return (registered_session_id is not None and owner_session_id == registered_session_id
            and current_session_id != registered_session_id)


def check_topic_name(topic: str) -> None:
    """Kafka's topic name rule (legal characters, at most 249, not ``.``/``..``); raises
    :class:`~seglog.errors.InvalidTopicError`. Every path built from a name passes here first."""
    if not isinstance(topic, str) or not _TOPIC_NAME.fullmatch(topic) or topic in (".", ".."):
        raise InvalidTopicError(f"invalid topic name {topic!r}")


def check_entity_name(entity_type: str, entity_name: str) -> str:
    """``entity_name`` when it may name a config znode of ``entity_type``: a topic name (see
    :func:`check_topic_name`), a broker id or ``<default>`` for brokers; raises
    :class:`~seglog.errors.InvalidTopicError` or ``ValueError`` otherwise (never a path that
    climbs out of ``/config/<type>``)."""
    if entity_type == zk_data.CONFIG_TYPE_TOPIC:
        check_topic_name(entity_name)
    elif entity_type == zk_data.CONFIG_TYPE_BROKER:
        if entity_name != zk_data.DEFAULT_ENTITY_NAME and not (
                entity_name.isascii() and entity_name.isdigit()):
            raise ValueError(f"not a broker config entity: {entity_name!r:.100}")
    elif entity_type in (zk_data.CONFIG_TYPE_CLIENT_METRICS, zk_data.CONFIG_TYPE_GROUP):
        if (not entity_name or "/" in entity_name or entity_name in (".", "..")
                or not entity_name.isprintable()):
            raise ValueError(f"not a {entity_type} config entity: {entity_name!r:.100}")
    else:
        raise ValueError(f"config entity type {entity_type!r} is not supported")
    return entity_name


class Watch:
    """A running :meth:`KafkaZkClient.watch_data` / :meth:`~KafkaZkClient.watch_children`.
    :meth:`stop` ends it: its function is not called again (kazoo drops the recipe the next
    time the znode changes)."""

    def __init__(self, path: str):
        self.path = path
        self._active = True

    @property
    def active(self) -> bool:
        """False once stopped (by :meth:`stop` or by the function returning False)."""
        return self._active

    def stop(self) -> None:
        """Stop calling the function. Idempotent; safe from any thread."""
        self._active = False


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# ---------------------------------------------------------------------------- the client


class KafkaZkClient:
    """One ZooKeeper session of a broker (see the module docstring).

    ``connect``: ``"host:port[,host:port...][/chroot]"``; the chroot is created when missing
    (as Kafka's broker does at start). ``session_timeout_ms``: the session ZooKeeper keeps
    while the client is silent (it clamps it to [2, 20] ticks). ``connection_timeout_ms``: how
    long :meth:`start` waits to connect and how long any operation waits for a connection
    before :class:`ZooKeeperUnreachableError` (default: the session timeout, as Kafka's
    ``zookeeper.connection.timeout.ms`` defaults to it).
    """

    def __init__(self, connect: str, *, session_timeout_ms: int,
                 connection_timeout_ms: int | None = None):
        if session_timeout_ms <= 0:
            raise ValueError(f"session_timeout_ms must be positive, not {session_timeout_ms}")
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        hosts, _, chroot = connect.partition("/")
        self._hosts = hosts
        self._chroot = f"/{chroot}".rstrip("/") if chroot else ""
        # kazoo warns of every failed reconnect (every second while ZooKeeper is away).
        limit_logger("kazoo.client")
        self._kazoo = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000,
                                  connection_retry=dict(_RECONNECT_RETRY),
                                  command_retry=dict(_RECONNECT_RETRY))
        self._connected = threading.Event()
        self._closed = False
        self._started = False
        self._registered_session_id: int | None = None
        self._listeners: dict[Callable[[str], Any], Callable[[str], Any]] = {}
        self._kazoo.add_listener(self._track_state)

    # ------------------------------------------------------------------ the session

    def start(self) -> None:
        """Connect (within ``connection_timeout_ms``) and create the chroot when missing.
        Raises :class:`ZooKeeperUnreachableError` (the client is closed then)."""
        if self._closed:
            raise ZooKeeperUnreachableError("the client is closed")
        if self._chroot:
            self._create_chroot()
        try:
            self._kazoo.start(timeout=self.connection_timeout_ms / 1000)
        except KazooTimeoutError:
            self.close()
            raise ZooKeeperUnreachableError(
                f"no connection to ZooKeeper at {self._hosts} within "
                f"{self.connection_timeout_ms} ms") from None
        self._started = True

    def close(self) -> None:
        """Close the session (its ephemeral znodes go at once) and stop kazoo's threads.
        Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._connected.set()  # wake waiters; they see _closed
        try:
            self._kazoo.stop()
        finally:
            self._kazoo.close()

    @property
    def session_id(self) -> int | None:
        """The current session's id (None before the first connection)."""
        client_id = self._kazoo.client_id
        return client_id[0] if client_id else None

    @property
    def session_password(self) -> bytes | None:
        """The current session's password (with :attr:`session_id`: see :func:`expire_session`)."""
        client_id = self._kazoo.client_id
        return client_id[1] if client_id else None

    @property
    def connected(self) -> bool:
        """True while connected (False while suspended, after a loss, or once closed)."""
        return self._kazoo.connected and not self._closed

    @property
    def registered_session_id(self) -> int | None:
        """The session of this client's last broker registration (KAFKA-7165's
        ``currentZooKeeperSessionId``), None before the first."""
        return self._registered_session_id

    def add_session_listener(self, fn: Callable[[str], Any]) -> None:
        """Call ``fn(state)`` on every change of the connection: :data:`CONNECTED`,
        :data:`SUSPENDED` (disconnected; the session may live), :data:`LOST` (the session
        expired: its ephemerals and watches are gone; kazoo connects again with a new one, then
        :data:`CONNECTED`). On kazoo's connection thread: never block, never call ZooKeeper."""
        def listener(state: str) -> None:
            try:
                fn(state)
            except Exception:  # noqa: BLE001 - kazoo's thread must survive a bad listener
                _log.exception("session listener %r failed", fn)

        self._listeners[fn] = listener
        self._kazoo.add_listener(listener)

    def remove_session_listener(self, fn: Callable[[str], Any]) -> None:
        """Stop calling a listener :meth:`add_session_listener` added (unknown: no-op)."""
        listener = self._listeners.pop(fn, None)
        if listener is not None:
            self._kazoo.remove_listener(listener)

    def _track_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self._connected.set()
        elif not self._closed:
            self._connected.clear()

    def _create_chroot(self) -> None:
        # Kafka's broker creates its chroot with a client on the root first.
        root = KazooClient(hosts=self._hosts, timeout=self.session_timeout_ms / 1000)
        try:
            root.start(timeout=self.connection_timeout_ms / 1000)
        except KazooTimeoutError:
            root.close()
            raise ZooKeeperUnreachableError(
                f"no connection to ZooKeeper at {self._hosts} within "
                f"{self.connection_timeout_ms} ms") from None
        try:
            root.ensure_path(self._chroot)
        finally:
            root.stop()
            root.close()

    # ------------------------------------------------------------------ running requests

    def _run_many(self, makers: list[Callable[[], Any]], paths: list[str]) -> list[Any]:
        """Send every request (``maker()`` returns kazoo's async result) pipelined, and return
        each result or its translated error. Requests that failed for the connection are sent
        again once connected, within ``connection_timeout_ms`` of the call."""
        if self._closed:
            raise ZooKeeperUnreachableError("the client is closed")
        if not self._started:
            raise ZooKeeperUnreachableError("the client is not started")
        deadline = time.monotonic() + self.connection_timeout_ms / 1000
        results: list[Any] = [None] * len(makers)
        pending = list(range(len(makers)))
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._connected.wait(remaining) or self._closed:
                raise ZooKeeperUnreachableError(
                    f"no connection to ZooKeeper at {self._hosts} for "
                    f"{self.connection_timeout_ms} ms" if not self._closed
                    else "the client is closed")
            sent = [(i, makers[i]()) for i in pending]
            retry = []
            for i, async_result in sent:
                try:
                    wait_s = max(0.001, deadline - time.monotonic())
                    results[i] = async_result.get(timeout=wait_s)
                except _CONNECTION_ERRORS:
                    retry.append(i)
                except KazooTimeoutError:
                    retry.append(i)
                except kx.KazooException as exc:
                    results[i] = _translate(exc, paths[i])
            if retry:
                # The state listener clears the connected flag soon after a loss; a short
                # pause keeps this loop from spinning on a request that failed just before.
                time.sleep(0.05)
            pending = retry
        return results

    def _run(self, maker: Callable[[], Any], path: str) -> Any:
        """One request: its result, or its translated error raised."""
        result = self._run_many([maker], [path])[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def _multi(self, build: Callable[[Any], None], path: str) -> list[Any]:
        """One ``multi``: ``build(transaction)`` adds the ops; returns kazoo's per-op results
        (values or kazoo exceptions; a connection failure is retried as any request)."""
        def maker() -> Any:
            transaction = self._kazoo.transaction()
            build(transaction)
            return transaction.commit_async()

        results: list[Any] = self._run(maker, path)  # kazoo is untyped: its values are Any
        return results

    @staticmethod
    def _first_failure(results: list[Any]) -> BaseException | None:
        """The op error that failed a multi (the others report RolledBack/RuntimeInconsistency)."""
        for result in results:
            if isinstance(result, BaseException) and not isinstance(
                    result, (kx.RolledBackError, kx.RuntimeInconsistency)):
                return result
        return None

    def _checked_many(self, ops: list[tuple[str, str, Any]], epoch_zk_version: int
                      ) -> list[Any]:
        """Kafka's ``wrapRequestWithControllerEpochCheck`` for each op (``("create", path,
        data)``, ``("set", path, (data, version))``, ``("delete", path, version)``): each its
        own ``multi(check(/controller_epoch, epoch_zk_version), op)``, pipelined. Returns each
        op's result (zk version for creates and sets, True for deletes) or error; raises
        :class:`ControllerMovedError` when any check failed."""
        if epoch_zk_version < 0:
            raise ValueError(f"controller_epoch_zk_version must be >= 0, not {epoch_zk_version}")

        def maker(kind: str, path: str, arg: Any) -> Callable[[], Any]:
            def make() -> Any:
                transaction = self._kazoo.transaction()
                transaction.check(zk_data.CONTROLLER_EPOCH_PATH, epoch_zk_version)
                if kind == "create":
                    transaction.create(path, arg)
                elif kind == "set":
                    transaction.set_data(path, arg[0], version=arg[1])
                else:
                    transaction.delete(path, version=arg)
                return transaction.commit_async()
            return make

        raw = self._run_many([maker(*op) for op in ops], [op[1] for op in ops])
        results: list[Any] = []
        moved = False
        for (kind, path, _), result in zip(ops, raw):
            if isinstance(result, BaseException):
                results.append(result)
                continue
            check, outcome = result
            if isinstance(check, BaseException) and not isinstance(
                    check, (kx.RolledBackError, kx.RuntimeInconsistency)):
                moved = True
                results.append(ControllerMovedError(
                    "the controller epoch's zkVersion is no longer "
                    f"{epoch_zk_version}", path=zk_data.CONTROLLER_EPOCH_PATH))
            elif isinstance(outcome, BaseException):
                results.append(_translate(outcome, path))
            elif kind == "create":
                results.append(0)
            elif kind == "set":
                results.append(outcome.version)
            else:
                results.append(True)
        if moved:
            raise ControllerMovedError(
                f"controller epoch zkVersion {epoch_zk_version} is stale: another controller "
                "was elected", path=zk_data.CONTROLLER_EPOCH_PATH)
        return results

    # ------------------------------------------------------------- generic, as Kafka's

    def path_exists(self, path: str) -> bool:
        """True when ``path`` exists (``pathExists``)."""
        return self._run(lambda: self._kazoo.exists_async(path), path) is not None

    def get_data_and_version(self, path: str) -> tuple[bytes | None, int]:
        """The data (None when empty) and version of ``path``; ``(None, UNKNOWN_VERSION)`` when
        it does not exist (``getDataAndVersion``)."""
        try:
            data, stat = self._run(lambda: self._kazoo.get_async(path), path)
        except NoNodeError:
            return None, UNKNOWN_VERSION
        return (data or None), stat.version

    def get_children(self, path: str) -> list[str]:
        """The children of ``path`` (none when it does not exist), sorted."""
        try:
            return sorted(self._run(lambda: self._kazoo.get_children_async(path), path))
        except NoNodeError:
            return []

    def create_recursive(self, path: str, data: bytes | None = None, *,
                         throw_if_exists: bool = True) -> None:
        """Create ``path`` with ``data`` and any missing parents (``createRecursive``); an
        existing ``path`` raises :class:`NodeExistsError` when ``throw_if_exists``."""
        if not path.startswith("/"):
            raise ValueError(f"invalid path {path!r}")
        try:
            self._run(lambda: self._kazoo.create_async(path, data or b"", makepath=True), path)
        except NodeExistsError:
            if throw_if_exists:
                raise

    def conditional_update_path(self, path: str, data: bytes, expected_version: int
                                ) -> tuple[bool, int]:
        """``setData`` with ``expected_version``: ``(True, new_version)``, or ``(False,
        UNKNOWN_VERSION)`` on a lost CAS or a missing znode (``conditionalUpdatePath`` without
        a checker)."""
        try:
            stat = self._run(lambda: self._kazoo.set_async(path, data, expected_version), path)
        except (BadVersionError, NoNodeError):
            return False, UNKNOWN_VERSION
        return True, stat.version

    def delete_recursive(self, path: str, *, controller_epoch_zk_version: int | None = None
                         ) -> bool:
        """Delete ``path`` and everything under it, children first; False when it did not
        exist (``deleteRecursive``). With ``controller_epoch_zk_version`` every delete is
        checked (:class:`ControllerMovedError`). Iterative; the tree is read first."""
        if not path.startswith("/"):
            raise ValueError(f"invalid path {path!r}")
        order: list[str] = []
        frontier = [path]
        while frontier:  # breadth first; deleted deepest first below
            following: list[str] = []
            for node in frontier:
                try:
                    children = self._run(functools.partial(self._kazoo.get_children_async, node), node)
                except NoNodeError:
                    continue
                order.append(node)
                following.extend(f"{node}/{child}" for child in children)
            frontier = following
        if not order:
            return False
        doomed = list(reversed(order))
        if controller_epoch_zk_version is None:
            results = self._run_many(
                [functools.partial(self._kazoo.delete_async, p) for p in doomed], doomed)
        else:
            results = self._checked_many([("delete", p, MATCH_ANY_VERSION) for p in doomed],
                                         controller_epoch_zk_version)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, NoNodeError):
                raise result
        return True

    def ensure_persistent_paths(self) -> None:
        """Create Kafka's persistent paths (``ZkData.PersistentZkPaths``) that are missing
        (``createTopLevelPaths``)."""
        for path in zk_data.PERSISTENT_PATHS:
            self.create_recursive(path, throw_if_exists=False)

    # ------------------------------------------------------------------ cluster id

    def get_cluster_id(self) -> str | None:
        """The cluster id in ``/cluster/id``, None when there is none yet."""
        data, _ = self.get_data_and_version(zk_data.CLUSTER_ID_PATH)
        return None if data is None else zk_data.decode_cluster_id(data)

    def get_or_create_cluster_id(self) -> str:
        """The cluster id; the first broker creates it (``createOrGetClusterId``: a race is
        won by one creator, the others read its id)."""
        current = self.get_cluster_id()
        if current is not None:
            return current
        proposed = zk_data.new_cluster_id()
        try:
            self.create_recursive(zk_data.CLUSTER_ID_PATH, zk_data.encode_cluster_id(proposed))
            return proposed
        except NodeExistsError:
            current = self.get_cluster_id()
            if current is None:
                raise ZooKeeperClientError("/cluster/id exists but holds no id",
                                           path=zk_data.CLUSTER_ID_PATH) from None
            return current

    # ------------------------------------------------------------------ brokers

    def register_broker(self, registration: BrokerRegistration) -> int:
        """Register this broker (checked ephemeral ``/brokers/ids/<id>``, R§1.3.4) and return
        its broker epoch, the znode's czxid. Call again after every new session (a
        :data:`LOST` then :data:`CONNECTED`): the epoch changes. Already registered by this
        session: the existing znode's epoch (its data unchanged, as Kafka). Raises
        :class:`NodeExistsError` when another live session holds the id."""
        path = zk_data.broker_path(registration.broker_id)
        data = zk_data.encode_broker(registration, timestamp_ms=_now_ms())
        stat = self._checked_ephemeral_create(path, data)
        _log.info("registered broker %d at %s, broker epoch (czxid) %d", registration.broker_id,
                  path, stat.czxid)
        broker_epoch: int = stat.czxid
        return broker_epoch

    def _checked_ephemeral_create(self, path: str, data: bytes) -> Any:
        for _ in range(RACE_ATTEMPTS_MAX):
            def build(transaction: Any) -> None:
                transaction.create(path, b"", ephemeral=True)
                transaction.set_data(path, data, version=0)

            results = self._multi(build, path)
            failure = self._first_failure(results)
            if failure is None:
                self._registered_session_id = self.session_id
                return results[1]
            if not isinstance(failure, kx.NodeExistsError):
                raise _translate(failure, path)
            try:
                _, stat = self._run(lambda: self._kazoo.get_async(path), path)
            except NoNodeError:
                continue  # went away meanwhile: create again
            current = self.session_id
            if stat.ephemeralOwner == current:
                self._registered_session_id = current
                return stat
            if should_recreate_ephemeral(stat.ephemeralOwner, current or 0,
                                         self.registered_session_id):
                _log.info("%s is owned by our previous session %#x (ZOOKEEPER-2985); "
                          "deleting and re-creating it in session %#x", path,
                          stat.ephemeralOwner, current or 0)
                try:
                    self._run(lambda: self._kazoo.delete_async(path), path)
                except NoNodeError:
                    pass
                continue
            raise NodeExistsError(
                f"owned by session {stat.ephemeralOwner:#x}, not ours ({current or 0:#x}): "
                "another live broker uses this id", path=path)
        raise ZooKeeperClientError(f"gave up after {RACE_ATTEMPTS_MAX} attempts", path=path)

    def live_brokers(self) -> dict[int, BrokerInfo]:
        """Every registered broker by id, with its epoch (czxid). Children of
        ``/brokers/ids`` that are not broker ids are skipped (logged)."""
        ids = []
        for child in self.get_children(zk_data.BROKER_IDS_PATH):
            if re.fullmatch(r"-?[0-9]{1,10}", child) and -(2 ** 31) <= int(child) < 2 ** 31:
                ids.append(int(child))
            else:
                _log.warning("ignoring %s/%s: not a broker id", zk_data.BROKER_IDS_PATH, child)
        paths = [zk_data.broker_path(broker_id) for broker_id in ids]
        results = self._run_many(
            [functools.partial(self._kazoo.get_async, p) for p in paths], paths)
        brokers = {}
        for broker_id, result in zip(ids, results):
            if isinstance(result, NoNodeError):
                continue  # gone between the listing and the read
            if isinstance(result, BaseException):
                raise result
            data, stat = result
            brokers[broker_id] = zk_data.decode_broker(broker_id, data, epoch=stat.czxid)
        return dict(sorted(brokers.items()))

    def broker(self, broker_id: int) -> BrokerInfo | None:
        """One registered broker (with its epoch), None when not registered."""
        path = zk_data.broker_path(broker_id)
        try:
            data, stat = self._run(lambda: self._kazoo.get_async(path), path)
        except NoNodeError:
            return None
        return zk_data.decode_broker(broker_id, data, epoch=stat.czxid)

    # ------------------------------------------------------------------ the controller

    def controller_id(self) -> int | None:
        """The broker id in ``/controller``, None when no controller is elected."""
        data, _ = self.get_data_and_version(zk_data.CONTROLLER_PATH)
        return None if data is None else zk_data.decode_controller(data)

    def controller_epoch(self) -> ControllerEpoch | None:
        """``/controller_epoch``'s epoch and zkVersion, None when it does not exist."""
        path = zk_data.CONTROLLER_EPOCH_PATH
        try:
            data, stat = self._run(lambda: self._kazoo.get_async(path), path)
        except NoNodeError:
            return None
        return ControllerEpoch(zk_data.decode_controller_epoch(data), stat.version)

    def _controller_epoch_or_create(self) -> ControllerEpoch:
        # maybeCreateControllerEpochZNode: create it at the initial epoch 0 (version 0).
        for _ in range(RACE_ATTEMPTS_MAX):
            current = self.controller_epoch()
            if current is not None:
                return current
            path = zk_data.CONTROLLER_EPOCH_PATH
            try:
                self._run(lambda: self._kazoo.create_async(
                    path, zk_data.encode_controller_epoch(zk_data.INITIAL_CONTROLLER_EPOCH)), path)
                return ControllerEpoch(zk_data.INITIAL_CONTROLLER_EPOCH, 0)
            except NodeExistsError:
                continue
        raise ZooKeeperClientError("/controller_epoch keeps vanishing")

    def try_elect_controller(self, broker_id: int) -> ControllerEpoch | None:
        """Run for controller (``registerControllerAndIncrementControllerEpoch``, R§1.3.3):
        ``(new epoch, /controller_epoch's zkVersion)`` when this broker won, None when another
        broker is (or just became) controller. The zkVersion fences every later controller
        write (``controller_epoch_zk_version`` arguments)."""
        current = self._controller_epoch_or_create()
        new_epoch = current.epoch + 1

        def build(transaction: Any) -> None:
            transaction.create(zk_data.CONTROLLER_PATH,
                               zk_data.encode_controller(broker_id, _now_ms()), ephemeral=True)
            transaction.set_data(zk_data.CONTROLLER_EPOCH_PATH,
                                 zk_data.encode_controller_epoch(new_epoch),
                                 version=current.zk_version)

        results = self._multi(build, zk_data.CONTROLLER_PATH)
        failure = self._first_failure(results)
        if failure is None:
            return ControllerEpoch(new_epoch, results[1].version)
        if not isinstance(failure, (kx.NodeExistsError, kx.BadVersionError)):
            raise _translate(failure, zk_data.CONTROLLER_PATH)
        # checkControllerAndEpoch: our multi may have committed with its reply lost.
        if self.controller_id() != broker_id:
            return None
        after = self.controller_epoch()
        if after is not None and after.epoch == new_epoch:
            return ControllerEpoch(new_epoch, after.zk_version)
        return None

    def delete_controller(self, *, controller_epoch_zk_version: int) -> None:
        """Delete ``/controller`` (resigning), checked against the controller epoch
        (``deleteController``); gone already: no-op. Raises :class:`ControllerMovedError`."""
        result = self._checked_many(
            [("delete", zk_data.CONTROLLER_PATH, MATCH_ANY_VERSION)], controller_epoch_zk_version)[0]
        if isinstance(result, BaseException) and not isinstance(result, NoNodeError):
            raise result

    # ------------------------------------------------------------------ topics

    def create_topic(self, assignment: TopicAssignment, config: Mapping[str, str]) -> None:
        """Create a topic as ``AdminZkClient.createTopicWithAssignment``: its config
        (``/config/topics/<t>``, created or replaced) first, then its assignment
        (``/brokers/topics/<t>``), which the controller watches. Raises
        :class:`~seglog.errors.TopicExistsError` (the assignment exists) and
        :class:`~seglog.errors.InvalidTopicError`."""
        topic = assignment.topic
        check_topic_name(topic)
        if self.path_exists(zk_data.topic_path(topic)):
            raise TopicExistsError(f"topic {topic!r} already exists")
        self._set_or_create_entity_config(zk_data.topic_config_path(topic), config)
        try:
            self.create_recursive(zk_data.topic_path(topic), zk_data.encode_topic(assignment))
        except NodeExistsError:
            raise TopicExistsError(f"topic {topic!r} already exists") from None

    def set_topic_assignment(self, assignment: TopicAssignment, *,
                             expected_zk_version: int = MATCH_ANY_VERSION) -> int:
        """Replace a topic's assignment (adding partitions: ``setTopicAssignment``); returns the
        new zkVersion. Raises :class:`NoNodeError` and :class:`BadVersionError`."""
        check_topic_name(assignment.topic)
        path = zk_data.topic_path(assignment.topic)
        data = zk_data.encode_topic(assignment)
        version: int = self._run(
            lambda: self._kazoo.set_async(path, data, expected_zk_version), path).version
        return version

    def topics(self) -> list[str]:
        """Every topic with an assignment, sorted."""
        return self.get_children(zk_data.TOPICS_PATH)

    def topic_assignment(self, topic: str) -> TopicAssignment | None:
        """One topic's assignment, None when it has none."""
        check_topic_name(topic)
        data, version = self.get_data_and_version(zk_data.topic_path(topic))
        if version == UNKNOWN_VERSION:
            return None
        if data is None:
            return TopicAssignment(topic=topic, topic_id=None, partitions={})
        return zk_data.decode_topic(topic, data)

    def topic_assignments(self) -> dict[str, TopicAssignment]:
        """Every topic's assignment by name (read pipelined)."""
        topics = self.topics()
        paths = [zk_data.topic_path(topic) for topic in topics]
        results = self._run_many([functools.partial(self._kazoo.get_async, p) for p in paths], paths)
        assignments = {}
        for topic, result in zip(topics, results):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, BaseException):
                raise result
            data, _ = result
            assignments[topic] = (zk_data.decode_topic(topic, data) if data else
                                  TopicAssignment(topic=topic, topic_id=None, partitions={}))
        return assignments

    def topic_config(self, topic: str) -> dict[str, str]:
        """A topic's config overrides (none: empty)."""
        check_topic_name(topic)
        path = zk_data.topic_config_path(topic)
        data, _ = self.get_data_and_version(path)
        return zk_data.decode_entity_config(data, path=path)

    def set_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        """Replace a topic's config overrides and announce it (a ``config_change_<seq>`` node
        with ``entity_path`` ``topics/<t>``, as ``AdminZkClient.changeTopicConfig``)."""
        check_topic_name(topic)
        self._set_or_create_entity_config(zk_data.topic_config_path(topic), config)
        self.create_config_change_notification(f"{zk_data.CONFIG_TYPE_TOPIC}/{topic}")

    def entity_config(self, entity_type: str, entity_name: str) -> dict[str, str]:
        """The config overrides in ``/config/<type>/<name>`` (none, or no znode: empty;
        ``AdminZkClient.fetchEntityConfig``)."""
        path = zk_data.config_entity_path(entity_type, check_entity_name(entity_type,
                                                                         entity_name))
        data, _ = self.get_data_and_version(path)
        return zk_data.decode_entity_config(data, path=path)

    def entity_names(self, entity_type: str) -> list[str]:
        """The entities of a type that have a config znode (``getAllEntitiesWithConfig``),
        sorted."""
        return self.get_children(f"{zk_data.CONFIG_PATH}/{entity_type}")

    def set_entity_config(self, entity_type: str, entity_name: str,
                          config: Mapping[str, str]) -> str:
        """``AdminZkClient.changeEntityConfig``: write ``config`` (the whole override set) to
        ``/config/<type>/<name>`` (created or replaced), then announce it with a
        ``/config/changes/config_change_<seq>`` naming ``<type>/<name>``; returns the
        notification's path. The notification is created only once the config is written."""
        path = zk_data.config_entity_path(entity_type, check_entity_name(entity_type,
                                                                         entity_name))
        self._set_or_create_entity_config(path, config)
        return self.create_config_change_notification(
            zk_data.entity_change_path(entity_type, entity_name))

    def get_data_and_ctime(self, path: str) -> tuple[bytes | None, int] | None:
        """The data (None when empty) and the creation time in ms (ZooKeeper's ctime) of
        ``path``; None when it does not exist (``getDataAndStat``)."""
        try:
            data, stat = self._run(lambda: self._kazoo.get_async(path), path)
        except NoNodeError:
            return None
        return (data or None), stat.ctime

    def delete_path(self, path: str) -> bool:
        """Delete the leaf znode ``path`` (``deletePath``); False when it did not exist."""
        try:
            self._run(lambda: self._kazoo.delete_async(path), path)
        except NoNodeError:
            return False
        return True

    def _set_or_create_entity_config(self, path: str, config: Mapping[str, str]) -> None:
        data = zk_data.encode_entity_config(config)
        for _ in range(RACE_ATTEMPTS_MAX):
            try:
                self._run(lambda: self._kazoo.set_async(path, data), path)
                return
            except NoNodeError:
                pass
            try:
                self.create_recursive(path, data)
                return
            except NodeExistsError:
                continue
        raise ZooKeeperClientError(f"gave up after {RACE_ATTEMPTS_MAX} attempts", path=path)

    def create_sequential(self, path_prefix: str, data: bytes) -> str:
        """Create the persistent sequential znode ``<path_prefix><seq>`` holding ``data``
        (its parent must exist); returns the created path."""
        created: str = self._run(
            lambda: self._kazoo.create_async(path_prefix, data, sequence=True), path_prefix)
        return created

    def create_config_change_notification(self, entity_path: str) -> str:
        """Create ``/config/changes/config_change_<seq>`` for ``entity_path`` (e.g.
        ``topics/t``); returns the created path."""
        self.create_recursive(zk_data.CONFIG_CHANGES_PATH, throw_if_exists=False)
        path = f"{zk_data.CONFIG_CHANGES_PATH}/{zk_data.CONFIG_CHANGE_PREFIX}"
        data = zk_data.encode_config_change(entity_path)
        created: str = self._run(lambda: self._kazoo.create_async(path, data, sequence=True),
                                 path)
        return created

    def config_change_notifications(self) -> dict[str, str]:
        """Every pending config change: node name -> ``entity_path``, in sequence order."""
        names = [name for name in self.get_children(zk_data.CONFIG_CHANGES_PATH)
                 if name.startswith(zk_data.CONFIG_CHANGE_PREFIX)]
        paths = [f"{zk_data.CONFIG_CHANGES_PATH}/{name}" for name in names]
        results = self._run_many([functools.partial(self._kazoo.get_async, p) for p in paths], paths)
        changes = {}
        for name, path, result in zip(names, paths, results):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, BaseException):
                raise result
            changes[name] = zk_data.decode_config_change(result[0], path=path)
        return changes

    # ------------------------------------------------------------------ deletion

    def delete_topic_request(self, topic: str) -> None:
        """Ask the controller to delete ``topic``: ``/admin/delete_topics/<t>``
        (``createDeleteTopicPath``; already asked: no-op)."""
        check_topic_name(topic)
        self.create_recursive(zk_data.delete_topic_path(topic), throw_if_exists=False)

    def topic_deletion_requests(self) -> list[str]:
        """The topics whose deletion was requested (``getTopicDeletions``), sorted."""
        return self.get_children(zk_data.DELETE_TOPICS_PATH)

    def delete_topic_deletion_request(self, topic: str, *, controller_epoch_zk_version: int
                                      ) -> None:
        """Remove a served deletion request (``deleteTopicDeletions``; checked)."""
        check_topic_name(topic)
        result = self._checked_many(
            [("delete", zk_data.delete_topic_path(topic), MATCH_ANY_VERSION)],
            controller_epoch_zk_version)[0]
        if isinstance(result, BaseException) and not isinstance(result, NoNodeError):
            raise result

    def delete_topic_znodes(self, topic: str, *, controller_epoch_zk_version: int) -> None:
        """Delete a topic's assignment with its partitions and states, then its config
        (``deleteTopicZNode`` + ``deleteTopicConfigs``), each delete checked."""
        check_topic_name(topic)
        self.delete_recursive(zk_data.topic_path(topic),
                              controller_epoch_zk_version=controller_epoch_zk_version)
        result = self._checked_many(
            [("delete", zk_data.topic_config_path(topic), MATCH_ANY_VERSION)],
            controller_epoch_zk_version)[0]
        if isinstance(result, BaseException) and not isinstance(result, NoNodeError):
            raise result

    # ------------------------------------------------------------------ partition states

    def partition_states(self, partitions: Iterable[TopicPartition]
                         ) -> dict[TopicPartition, PartitionState]:
        """The ``state`` of each partition that has one, with its zkVersion (read pipelined;
        ``getTopicPartitionStates``)."""
        tps = [TopicPartition(tp[0], tp[1]) for tp in partitions]
        paths = [zk_data.partition_state_path(tp) for tp in tps]
        results = self._run_many([functools.partial(self._kazoo.get_async, p) for p in paths], paths)
        states = {}
        for tp, path, result in zip(tps, paths, results):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, BaseException):
                raise result
            data, stat = result
            states[tp] = zk_data.decode_partition_state(data, zk_version=stat.version, path=path)
        return states

    def create_partition_states(self, states: Mapping[TopicPartition, PartitionState], *,
                                controller_epoch_zk_version: int
                                ) -> dict[TopicPartition, int | Exception]:
        """Create new partitions' ``state`` znodes (and their empty parents), each checked
        (``createTopicPartitionStatesRaw``): per partition its zkVersion (0) or the error
        (:class:`NodeExistsError`; :class:`NoNodeError` when the topic has no assignment).
        Raises :class:`ControllerMovedError` when the controller epoch moved."""
        tps = [TopicPartition(tp[0], tp[1]) for tp in states]
        topics = sorted({tp.topic for tp in tps})
        for topic in topics:
            check_topic_name(topic)
        # The empty intermediate nodes: existing ones are fine, a missing topic fails below.
        self._checked_many([("create", zk_data.topic_partitions_path(t), b"") for t in topics],
                           controller_epoch_zk_version)
        self._checked_many([("create", zk_data.topic_partition_path(tp), b"") for tp in tps],
                           controller_epoch_zk_version)
        ops = [("create", zk_data.partition_state_path(tp),
                zk_data.encode_partition_state(states[tp])) for tp in tps]
        return dict(zip(tps, self._checked_many(ops, controller_epoch_zk_version)))

    def set_partition_states(self, states: Mapping[TopicPartition, PartitionState], *,
                             controller_epoch_zk_version: int
                             ) -> dict[TopicPartition, int | Exception]:
        """The controller's CAS of each ``state`` at ``state.zk_version``, each checked
        (``setTopicPartitionStatesRaw``): per partition its new zkVersion or the error
        (:class:`BadVersionError`: re-read and decide again; :class:`NoNodeError`). Raises
        :class:`ControllerMovedError` when the controller epoch moved."""
        tps = [TopicPartition(tp[0], tp[1]) for tp in states]
        ops = [("set", zk_data.partition_state_path(tp),
                (zk_data.encode_partition_state(states[tp]), states[tp].zk_version))
               for tp in tps]
        return dict(zip(tps, self._checked_many(ops, controller_epoch_zk_version)))

    def update_isr(self, tp: TopicPartition, state: PartitionState,
                   expected_zk_version: int) -> int:
        """A leader's ISR change: CAS ``state`` at ``expected_zk_version`` (no controller
        check: ``ZkIsrManager`` / ``ReplicationUtils.updateLeaderAndIsr``); returns the new
        zkVersion. On BADVERSION the znode is re-read: holding exactly ``state`` (our write,
        its reply lost) is success at its version; anything else raises
        :class:`BadVersionError` (Kafka's leader then waits for newer metadata). Raises
        :class:`NoNodeError`."""
        path = zk_data.partition_state_path(tp)
        data = zk_data.encode_partition_state(state)
        try:
            version: int = self._run(
                lambda: self._kazoo.set_async(path, data, expected_zk_version), path).version
            return version
        except BadVersionError:
            current = self.partition_states([tp]).get(TopicPartition(tp[0], tp[1]))
            if current is not None and (current.leader, current.leader_epoch, current.isr,
                                        current.controller_epoch) == (
                    state.leader, state.leader_epoch, tuple(state.isr), state.controller_epoch):
                return current.zk_version
            raise

    # ------------------------------------------------------------------ producer ids

    def allocate_producer_id_block(self, broker_id: int) -> ProducerIdBlock:
        """Claim the next block of :data:`~seglog.cluster.zk_data.PRODUCER_ID_BLOCK_SIZE`
        producer ids (``ProducerIdManager.getNewProducerIdBlock``): read
        ``/latest_producer_id_block`` and its version, CAS the next block, re-read on
        BADVERSION (a lost reply whose write holds our block counts as ours)."""
        path = zk_data.PRODUCER_ID_BLOCK_PATH
        self.create_recursive(path, throw_if_exists=False)
        for _ in range(RACE_ATTEMPTS_MAX):
            data, version = self.get_data_and_version(path)
            if version == UNKNOWN_VERSION:
                self.create_recursive(path, throw_if_exists=False)
                continue
            current = None if data is None else zk_data.decode_producer_id_block(data)
            block = zk_data.next_producer_id_block(current, broker_id)
            encoded = zk_data.encode_producer_id_block(block)
            written, _ = self.conditional_update_path(path, encoded, version)
            if written:
                return block
            # checkProducerIdBlockZkData: our write may have landed with its reply lost.
            after, _ = self.get_data_and_version(path)
            if after is not None and zk_data.decode_producer_id_block(after) == block:
                return block
        raise ZooKeeperClientError(f"gave up after {RACE_ATTEMPTS_MAX} attempts", path=path)

    # ------------------------------------------------------------------ watches

    def watch_data(self, path: str, fn: Callable[[bytes | None, Any], Any]) -> Watch:
        """Call ``fn(data, stat)`` now (in this thread) and each time ``path``'s data changes
        or it is created or deleted (``data``/``stat`` None then), on kazoo's thread; across
        reconnects and new sessions (a change missed meanwhile is delivered once connected).
        ``fn`` returning False, or :meth:`Watch.stop`, ends it. ``path`` may not exist yet."""
        watch = Watch(path)

        def on_change(data: bytes | None, stat: Any, _event: Any = None) -> bool:
            if not watch.active:
                return False
            try:
                keep = fn(data, stat)
            except Exception:  # noqa: BLE001 - kazoo's thread must survive a bad callback
                _log.exception("data watch on %s failed", path)
                keep = True
            if keep is False:
                watch.stop()
                return False
            return True

        DataWatch(self._kazoo, path, on_change)
        return watch

    def watch_children(self, path: str, fn: Callable[[list[str]], Any]) -> Watch:
        """Call ``fn(children)`` (sorted) now and each time ``path``'s children change, on
        kazoo's thread, across reconnects and new sessions. ``fn`` returning False, or
        :meth:`Watch.stop`, ends it. Raises :class:`NoNodeError` when ``path`` does not exist
        (the recipe could not watch it)."""
        if not self.path_exists(path):
            raise NoNodeError("cannot watch the children of a missing znode", path=path)
        watch = Watch(path)

        def on_change(children: list[str]) -> bool:
            if not watch.active:
                return False
            try:
                keep = fn(sorted(children))
            except Exception:  # noqa: BLE001 - kazoo's thread must survive a bad callback
                _log.exception("children watch on %s failed", path)
                keep = True
            if keep is False:
                watch.stop()
                return False
            return True

        ChildrenWatch(self._kazoo, path, on_change)
        return watch

    def __enter__(self) -> KafkaZkClient:
        self.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        session = self.session_id
        return (f"KafkaZkClient({self.connect!r}, session="
                f"{'none' if session is None else hex(session)})")


def expire_session(connect: str, session_id: int, password: bytes, *,
                   timeout_s: float = 10.0) -> None:
    """Expire a session now (a test fault, R§1.4): a second client joins the session
    ``(session_id, password)`` and closes it. Its ephemerals go at once; its own client sees
    :data:`LOST` when it next talks to ZooKeeper, then connects with a new session. Raises
    :class:`ZooKeeperUnreachableError` when ZooKeeper does not answer within ``timeout_s``."""
    hosts = connect.partition("/")[0]
    client = KazooClient(hosts=hosts, client_id=(session_id, password), timeout=timeout_s)
    try:
        client.start(timeout=timeout_s)
    except KazooTimeoutError:
        client.close()
        raise ZooKeeperUnreachableError(f"no connection to {hosts} within {timeout_s} s") from None
    try:
        client.stop()  # closeSession: ZooKeeper ends the session for its owner too
    finally:
        client.close()
