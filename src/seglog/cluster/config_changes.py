"""Config znodes and their change notifications: how a config change made through one broker
reaches every broker of the cluster, as Kafka 2.x does it on ZooKeeper.

**Writing** (``AdminZkClient.changeConfigs`` -> ``changeEntityConfig``): the broker that
answers AlterConfigs / IncrementalAlterConfigs writes the entity's whole override set to its
config znode (``/config/topics/<t>``, ``/config/brokers/<id>``, ``/config/brokers/<default>``;
``{"version":1,"config":{...}}``), *then* creates a persistent sequential
``/config/changes/config_change_<seq>`` holding ``{"version":2,"entity_path":"<type>/<name>"}``.
The notification is only a trigger: the value lives once, in the entity's znode.

**Reading** (:class:`ConfigChangeManager`: ``DynamicConfigManager`` over
``ZkNodeChangeNotificationListener``): every broker watches the children of
``/config/changes``. On each change it lists them, and for each notification whose sequence
number is above the last one it processed, in order, reads the named entity's znode and hands
the config to the handler of its type (a topic's to the replica manager, which gives it to the
local topic's Logs; a dynamic broker layer to the broker's live config); it then remembers that
sequence number. Notifications it already processed that are older than
:data:`CHANGE_EXPIRATION_MS` (Kafka's 15 minutes) are deleted: whichever broker gets there
first purges them, which is harmless as everyone has seen them by then.

Client-metrics subscriptions (``client-metrics/<name>``, KIP-714; Kafka keeps them in KRaft
only) are read the same way and handed to the client-metrics listeners
(:meth:`ConfigChangeManager.add_client_metrics_listener`).

Group configs (``groups/<group id>``; Kafka keeps them in KRaft only) are read the same way
and handed to the group config listeners (:meth:`ConfigChangeManager.add_group_config_listener`).

Client quota entities (``users/<u>``, ``users/<u>/clients/<c>``, ``clients/<c>``, ``ips/<ip>``;
:mod:`~seglog.cluster.client_quotas_zk`) are read the same way and handed, quota keys only,
to the client quota listeners (:meth:`ConfigChangeManager.add_client_quota_listener`).

At start, and again after a new ZooKeeper session (a notification may have been created and
purged while the session was away), it reads every config znode of the types it handles
(``fetchAllEntityConfigs``), so a restarted broker takes the current values whatever it missed.
The children are listed *before* that full read and the last processed sequence number is set
to the newest of them: a change announced during the read is processed again, never lost.

Kafka's own remark holds here too: two quick changes may be applied as one (the second value
was already in the znode when the first notification was read) and a notification may cause
a needless re-read; both are harmless.

Threads: the manager runs on the broker's event loop; the blocking ZooKeeper calls go through
the ``run_blocking`` it is given, and kazoo's watch and session callbacks only wake the loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable, Mapping

from ..errors import SeglogError
from . import client_quotas_zk, zk_data
from .zk_client import ZooKeeperClientError, check_entity_name
from ..log_limits import REPEATS

__all__ = ["CHANGE_EXPIRATION_MS", "ClientMetricsListener", "ClientQuotaListener",
           "ConfigChangeManager",
           "TopicConfigHandler", "BrokerConfigListener", "USERS_CONFIG_TYPE",
           "UserConfigListener", "write_entity_config"]

log = logging.getLogger("seglog.cluster.config_changes")

#: ``DynamicConfigManager.changeExpirationMs``: processed notifications older than this are
#: deleted.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
#: Back-off after a pass that failed on ZooKeeper (it is tried again from the same place).
RETRY_DELAY_S = 0.5
#: How often, and how many times, a topic change that arrived before the topic was created
#: locally is tried again (a creation in flight read the znode before the change).
TOPIC_RETRY_DELAY_S = 0.5
TOPIC_RETRIES_MAX = 60

#: ``on_topic_config(topic, overrides)``: give a local topic the overrides in its znode;
#: returns False when the topic does not exist on this broker (yet).
TopicConfigHandler = Callable[[str, dict[str, str]], Awaitable[bool]]
#: ``listener(per_broker, values)``: the dynamic broker layer of this broker (``per_broker``
#: True, ``/config/brokers/<id>``) or of the whole cluster (False, ``<default>``) is now
#: ``values``. Called on the loop; must not block for long.
BrokerConfigListener = Callable[[bool, dict[str, str]], None]
#: ``listener(sanitized_user)``: ``/config/users/<sanitized_user>`` changed (None: re-read
#: every user). Awaited on the loop.
UserConfigListener = Callable[[str | None], Awaitable[None]]
#: The config entity type of users (``/config/users/<u>``).
USERS_CONFIG_TYPE = "users"
#: ``listener(name, configs)``: client-metrics subscription ``name``
#: (``/config/client-metrics/<name>``) now holds ``configs`` (empty: none, the subscription is
#: gone). Called on the loop; must not block for long.
ClientMetricsListener = Callable[[str, dict[str, str]], None]
#: ``listener(entity, values)``: client quota entity ``entity`` (``(type, name)`` pairs, a
#: name of None for ``<default>``) now holds ``values`` (quota key -> value; empty: none).
#: Called on the loop; must not block for long.
ClientQuotaListener = Callable[[tuple[tuple[str, "str | None"], ...], dict[str, float]], None]


def write_entity_config(zk: Any, entity_type: str, entity_name: str,
                        config: Mapping[str, str]) -> str:
    """``AdminZkClient.changeEntityConfig``: write ``config`` (the entity's whole override
    set) to ``/config/<type>/<name>``, then create the change notification; returns the
    notification's path. Blocking. Raises the ZooKeeper client's errors (nothing is announced
    when the config write failed) and ``ValueError`` / InvalidTopicError for a bad name."""
    path: str = zk.set_entity_config(entity_type, entity_name, dict(config))
    return path


class ConfigChangeManager:
    """One broker's reader of config changes (see the module docstring).

    ``zk``: the broker's :class:`~seglog.cluster.zk_client.KafkaZkClient`; ``broker_id``;
    ``loop``: the broker's event loop; ``run_blocking(fn, *args)``: runs a blocking call off
    the loop (awaitable); ``on_topic_config``: a :data:`TopicConfigHandler`;
    ``change_expiration_ms``: see :data:`CHANGE_EXPIRATION_MS`; ``now_ms``: the clock the
    purge compares ZooKeeper's creation times with. Every method runs on the loop thread.
    """

    def __init__(self, *, zk: Any, broker_id: int, loop: asyncio.AbstractEventLoop,
                 run_blocking: Callable[..., Awaitable[Any]],
                 on_topic_config: TopicConfigHandler,
                 change_expiration_ms: int = CHANGE_EXPIRATION_MS,
                 now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000):
        self.zk = zk
        self.broker_id = broker_id
        self.loop = loop
        self._run_blocking = run_blocking
        self._on_topic_config = on_topic_config
        self.change_expiration_ms = change_expiration_ms
        self._now_ms = now_ms
        #: The sequence number of the last notification processed (-1: none yet).
        self.last_executed_change = -1
        #: The dynamic broker layers as last read: True -> this broker's, False -> the
        #: cluster default's (absent: no znode seen yet).
        self.broker_layers: dict[bool, dict[str, str]] = {}
        self._broker_listeners: list[BrokerConfigListener] = []
        self._user_listeners: list[UserConfigListener] = []
        #: The client quota entities as last read, and who is told of them.
        self.client_quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]] = {}
        self._quota_listeners: list[ClientQuotaListener] = []
        #: The client-metrics subscriptions as last read (name -> configs, never empty), and
        #: who is told of them.
        self.client_metrics: dict[str, dict[str, str]] = {}
        self._client_metrics_listeners: list[ClientMetricsListener] = []
        #: The group configs as last read (group id -> configs, never empty), and who is told
        #: of them.
        self.group_configs: dict[str, dict[str, str]] = {}
        self._group_config_listeners: list[ClientMetricsListener] = []
        #: Topics whose change came before the topic existed here: tries left.
        self._topic_retries: dict[str, int] = {}
        #: Creation times (ms) of the notifications seen, for the purge.
        self._created_ms: dict[str, int] = {}
        self._reload = True
        self._session_lost = False
        self._closing = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._watch: Any = None

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Watch ``/config/changes`` and the session, read every config znode once (the
        values a restart must keep), then process notifications as they come. Returns after
        that first read; a ZooKeeper failure in it is retried by the loop, not raised."""
        self._watch = await self._run_blocking(self.zk.watch_children,
                                               zk_data.CONFIG_CHANGES_PATH, self._on_children)
        await self._run_blocking(self.zk.add_session_listener, self._on_session_state)
        try:
            await self._pass()
        except ZooKeeperClientError:
            REPEATS.log(log, logging.WARNING, "broker %d: reading the config znodes failed; "
                        "retrying", self.broker_id, exc_info=True)
            self._wake.set()
        self._task = self.loop.create_task(self._run(), name="seglog-config-changes")

    async def stop(self) -> None:
        """Stop watching and processing. Idempotent."""
        self._closing = True
        if self._watch is not None:
            self._watch.stop()
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

    def add_broker_config_listener(self, listener: BrokerConfigListener) -> None:
        """Call ``listener(per_broker, values)`` whenever this broker's dynamic layer
        (``/config/brokers/<id>``) or the cluster default (``/config/brokers/<default>``)
        changes in ZooKeeper, and at once for the layers already read (so a listener added
        after :meth:`start` misses nothing). What it raises is logged and ignored."""
        self._broker_listeners.append(listener)
        for per_broker, values in list(self.broker_layers.items()):
            self._tell(listener, per_broker, values)

    def add_client_quota_listener(self, listener: ClientQuotaListener) -> None:
        """Call ``listener(entity, values)`` whenever a client quota entity changes in
        ZooKeeper (made through any broker), and at once for each entity already read.
        What it raises is logged and ignored."""
        self._quota_listeners.append(listener)
        for entity, values in list(self.client_quotas.items()):
            self._tell_quota(listener, entity, values)

    def add_client_metrics_listener(self, listener: ClientMetricsListener) -> None:
        """Call ``listener(name, configs)`` whenever a client-metrics subscription changes in
        ZooKeeper (made through any broker), and at once for each one already read. What it
        raises is logged and ignored."""
        self._client_metrics_listeners.append(listener)
        for name, values in list(self.client_metrics.items()):
            self._tell_client_metrics(listener, name, values)

    def add_group_config_listener(self, listener: ClientMetricsListener) -> None:
        """Call ``listener(group_id, configs)`` whenever a group's configs change in ZooKeeper
        (made through any broker), and at once for each group already read. What it raises
        is logged and ignored."""
        self._group_config_listeners.append(listener)
        for name, values in list(self.group_configs.items()):
            self._tell_named(listener, name, values)

    def _take_group_configs(self, group_id: str, values: dict[str, str]) -> None:
        if self.group_configs.get(group_id, {}) == values:
            return
        if values:
            self.group_configs[group_id] = dict(values)
        else:
            self.group_configs.pop(group_id, None)
        log.info("broker %d: configs of group %s are now %s", self.broker_id, group_id, values)
        for listener in list(self._group_config_listeners):
            self._tell_named(listener, group_id, values)

    def _tell_named(self, listener: ClientMetricsListener, name: str,
                    values: dict[str, str]) -> None:
        try:
            listener(name, dict(values))
        except Exception:  # noqa: BLE001 - a listener must not stop the changes
            log.exception("broker %d: config listener of %s failed", self.broker_id, name)

    def _take_client_metrics(self, name: str, values: dict[str, str]) -> None:
        if self.client_metrics.get(name, {}) == values:
            return
        if values:
            self.client_metrics[name] = dict(values)
        else:
            self.client_metrics.pop(name, None)
        log.info("broker %d: client-metrics subscription %s is now %s", self.broker_id, name,
                 values)
        for listener in list(self._client_metrics_listeners):
            self._tell_client_metrics(listener, name, values)

    def _tell_client_metrics(self, listener: ClientMetricsListener, name: str,
                             values: dict[str, str]) -> None:
        try:
            listener(name, dict(values))
        except Exception:  # noqa: BLE001 - a listener must not stop the changes
            log.exception("broker %d: client-metrics listener failed", self.broker_id)

    def _take_client_quota(self, entity: tuple[tuple[str, str | None], ...],
                           values: dict[str, float]) -> None:
        if self.client_quotas.get(entity, {}) == values:
            return
        if values:
            self.client_quotas[entity] = dict(values)
        else:
            self.client_quotas.pop(entity, None)
        log.info("broker %d: client quotas of %s are now %s", self.broker_id, entity, values)
        for listener in list(self._quota_listeners):
            self._tell_quota(listener, entity, values)

    def _tell_quota(self, listener: ClientQuotaListener,
                    entity: tuple[tuple[str, str | None], ...], values: dict[str, float]
                    ) -> None:
        try:
            listener(entity, dict(values))
        except Exception:  # noqa: BLE001 - a listener must not stop the changes
            log.exception("broker %d: client quota listener failed", self.broker_id)
    def add_user_config_listener(self, listener: UserConfigListener) -> None:
        """Await ``listener(sanitized_user)`` for each notification naming
        ``users/<sanitized_user>`` (the user's znode changed: SCRAM credentials, quotas), and
        ``listener(None)`` after every full re-read (a new ZooKeeper session). What it raises
        is logged and ignored."""
        self._user_listeners.append(listener)

    async def _tell_users(self, sanitized_user: str | None) -> None:
        for listener in list(self._user_listeners):
            try:
                await listener(sanitized_user)
            except Exception:  # noqa: BLE001 - a listener must not stop the changes
                log.exception("broker %d: user config listener failed", self.broker_id)

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
        name = str(getattr(state, "name", state)).upper()
        if "LOST" in name:
            self._session_lost = True
        elif "CONNECTED" in name and self._session_lost:
            # A new session (Kafka's afterInitializingSession): what was announced, and maybe
            # purged, while it was away is read from the znodes themselves.
            self._session_lost = False
            self._reload = True
            self._wake_threadsafe()

    # --- processing --------------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._closing:
            timeout_s = TOPIC_RETRY_DELAY_S if self._topic_retries else None
            try:
                await asyncio.wait_for(self._wake.wait(), timeout_s)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            if self._closing:
                return
            try:
                await self._pass()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - ZooKeeper away: the same pass again later
                REPEATS.log(log, logging.WARNING, "broker %d: processing config changes failed; "
                            "retrying", self.broker_id, exc_info=True)
                await asyncio.sleep(RETRY_DELAY_S)
                self._wake.set()

    async def _pass(self) -> None:
        children = await self._run_blocking(self.zk.get_children, zk_data.CONFIG_CHANGES_PATH)
        sequences = sorted((seq, name) for name in children
                           if (seq := zk_data.config_change_sequence(name)) is not None)
        if self._reload:
            await self._read_all()
            self._reload = False
            if sequences:
                self.last_executed_change = max(self.last_executed_change, sequences[-1][0])
        for seq, name in sequences:
            if seq > self.last_executed_change:
                await self._process_notification(name)
                self.last_executed_change = seq
        await self._retry_topics()
        await self._purge(sequences)

    async def _read_all(self) -> None:
        """``DynamicConfigManager.startup``'s ``fetchAllEntityConfigs`` for topics and
        brokers: every config znode, handed to its handler."""
        for entity_type in (zk_data.CONFIG_TYPE_TOPIC, zk_data.CONFIG_TYPE_BROKER):
            names = await self._run_blocking(self.zk.entity_names, entity_type)
            for entity_name in names:
                await self._take_entity(entity_type, entity_name, retry_missing_topic=False)
        names = await self._run_blocking(self.zk.entity_names,
                                         zk_data.CONFIG_TYPE_CLIENT_METRICS)
        for name in [n for n in self.client_metrics if n not in names]:
            self._take_client_metrics(name, {})
        for name in names:
            await self._take_entity(zk_data.CONFIG_TYPE_CLIENT_METRICS, name,
                                    retry_missing_topic=False)
        names = await self._run_blocking(self.zk.entity_names, zk_data.CONFIG_TYPE_GROUP)
        for name in [n for n in self.group_configs if n not in names]:
            self._take_group_configs(name, {})
        for name in names:
            await self._take_entity(zk_data.CONFIG_TYPE_GROUP, name, retry_missing_topic=False)
        await self._tell_users(None)
        table = await self._run_blocking(client_quotas_zk.read_all, self.zk)
        for entity in [e for e in self.client_quotas if e not in table]:
            self._take_client_quota(entity, {})
        for entity, values in table.items():
            self._take_client_quota(entity, values)

    async def _process_notification(self, name: str) -> None:
        """One notification: read it, then the entity it names. Bad bytes are logged and
        skipped (Kafka logs the error and goes on); ZooKeeper errors propagate (the pass is
        tried again from this notification)."""
        path = f"{zk_data.CONFIG_CHANGES_PATH}/{name}"
        found = await self._run_blocking(self.zk.get_data_and_ctime, path)
        if found is None:
            return  # purged meanwhile: too old to matter (a full read covered it)
        data, created_ms = found
        self._created_ms[name] = created_ms
        try:
            entity_path = zk_data.decode_config_change(data, path=path)
        except zk_data.ZkDataError as exc:
            log.error("broker %d: ignoring config change %s: %s", self.broker_id, name, exc)
            return
        try:
            entity_type, entity_name = zk_data.split_entity_change_path(entity_path)
        except zk_data.ZkDataError as exc:
            log.error("broker %d: ignoring config change %s: %s", self.broker_id, name, exc)
            return
        log.info("broker %d: processing config change %s for %s", self.broker_id, name,
                 entity_path)
        await self._take_entity(entity_type, entity_name, retry_missing_topic=True)

    async def _take_entity(self, entity_type: str, entity_name: str, *,
                           retry_missing_topic: bool) -> None:
        if entity_type == USERS_CONFIG_TYPE and "/" not in entity_name:
            # users/<u> holds SCRAM credentials and the user's quotas (users/<u>/clients/<c>:
            # quotas only): the credential store re-reads it, the quotas are taken below.
            await self._tell_users(entity_name)
        if entity_type not in (zk_data.CONFIG_TYPE_TOPIC, zk_data.CONFIG_TYPE_BROKER,
                               zk_data.CONFIG_TYPE_CLIENT_METRICS, zk_data.CONFIG_TYPE_GROUP):
            quota_entity = client_quotas_zk.entity_of_change(entity_type, entity_name)
            if quota_entity is None:
                log.info("broker %d: ignoring config of %s/%s (no handler for it)",
                         self.broker_id, entity_type, entity_name)
                return
            try:
                values = await self._run_blocking(client_quotas_zk.read_entity, self.zk,
                                                  quota_entity)
            except (zk_data.ZkDataError, ValueError) as exc:
                log.error("broker %d: ignoring config of %s/%s: %s", self.broker_id,
                          entity_type, entity_name, exc)
                return
            self._take_client_quota(quota_entity, values)
            return
        try:
            check_entity_name(entity_type, entity_name)
        except (ValueError, SeglogError) as exc:
            log.error("broker %d: ignoring config of %s/%s: %s", self.broker_id, entity_type,
                      entity_name, exc)
            return
        if entity_type == zk_data.CONFIG_TYPE_BROKER and entity_name not in (
                zk_data.DEFAULT_ENTITY_NAME, str(self.broker_id)):
            return  # another broker's own layer
        try:
            config = await self._run_blocking(self.zk.entity_config, entity_type, entity_name)
        except zk_data.ZkDataError as exc:
            log.error("broker %d: ignoring config of %s/%s: %s", self.broker_id, entity_type,
                      entity_name, exc)
            return
        if entity_type == zk_data.CONFIG_TYPE_TOPIC:
            await self._take_topic(entity_name, config, retry_missing=retry_missing_topic)
        elif entity_type == zk_data.CONFIG_TYPE_CLIENT_METRICS:
            self._take_client_metrics(entity_name, config)
        elif entity_type == zk_data.CONFIG_TYPE_GROUP:
            self._take_group_configs(entity_name, config)
        else:
            self._take_broker_layer(entity_name != zk_data.DEFAULT_ENTITY_NAME, config)

    async def _take_topic(self, topic: str, config: dict[str, str], *,
                          retry_missing: bool) -> None:
        try:
            taken = await self._on_topic_config(topic, config)
        except Exception:  # noqa: BLE001 - one topic's failure must not stop the others
            log.exception("broker %d: applying the config of topic %s failed", self.broker_id,
                          topic)
            taken = True
        if taken:
            self._topic_retries.pop(topic, None)
        elif retry_missing and topic not in self._topic_retries:
            self._topic_retries[topic] = TOPIC_RETRIES_MAX

    async def _retry_topics(self) -> None:
        """Topics whose change arrived before the topic existed here (its creation may have
        read the znode just before the change): read the znode again and give it them."""
        for topic in list(self._topic_retries):
            left = self._topic_retries[topic] - 1
            config = await self._run_blocking(self.zk.entity_config, zk_data.CONFIG_TYPE_TOPIC,
                                              topic)
            if await self._on_topic_config(topic, config) or left <= 0:
                self._topic_retries.pop(topic, None)
            else:
                self._topic_retries[topic] = left

    def _take_broker_layer(self, per_broker: bool, values: dict[str, str]) -> None:
        if self.broker_layers.get(per_broker) == values:
            return
        self.broker_layers[per_broker] = dict(values)
        log.info("broker %d: dynamic %s broker configs are now %s", self.broker_id,
                 "per-broker" if per_broker else "cluster-default", values)
        for listener in list(self._broker_listeners):
            self._tell(listener, per_broker, values)

    def _tell(self, listener: BrokerConfigListener, per_broker: bool,
              values: dict[str, str]) -> None:
        try:
            listener(per_broker, dict(values))
        except Exception:  # noqa: BLE001 - a listener must not stop the changes
            log.exception("broker %d: broker config listener failed", self.broker_id)

    async def _purge(self, sequences: list[tuple[int, str]]) -> None:
        """``purgeObsoleteNotifications``: delete the processed notifications created more
        than ``change_expiration_ms`` ago."""
        present = {name for _, name in sequences}
        for name in [n for n in self._created_ms if n not in present]:
            del self._created_ms[name]
        now_ms = self._now_ms()
        for seq, name in sequences:
            if seq > self.last_executed_change:
                break
            created_ms = self._created_ms.get(name)
            if created_ms is None:
                found = await self._run_blocking(self.zk.get_data_and_ctime,
                                                 f"{zk_data.CONFIG_CHANGES_PATH}/{name}")
                created_ms = -1 if found is None else found[1]
                self._created_ms[name] = created_ms
            if created_ms >= 0 and now_ms - created_ms > self.change_expiration_ms:
                log.debug("broker %d: purging config change %s", self.broker_id, name)
                await self._run_blocking(self.zk.delete_path,
                                         f"{zk_data.CONFIG_CHANGES_PATH}/{name}")
                self._created_ms.pop(name, None)

