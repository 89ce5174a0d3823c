"""The admin APIs' per-broker state: the dynamic broker configs
(:class:`~seglog.server.apis.admin_configs.DynamicConfigs`, kept in ``state.extensions``), the
effective broker config they make (``state.config``) and the store's topic defaults, and the
hooks that load them when the broker starts."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from ...errors import InvalidConfigError, SeglogError
from ..config import BrokerConfig
from ...storage.config import LogConfig
from . import admin_configs as cfg
from .broker_view import BrokerView
from .data_topics import partition_seam

if TYPE_CHECKING:
    from ...store import Store, Topic

log = logging.getLogger("seglog.server.apis.admin")


#: Where the state lives in ``BrokerState.extensions``: the admin module's name.
EXTENSION_KEY = "seglog.server.apis.admin"


async def start(state: BrokerView) -> None:
    """Load the persisted dynamic broker configs and make ``state.config`` the effective one
    (static configs under them); the store's topic defaults become the effective ones, and
    topics that override nothing follow them."""
    static = state.config if isinstance(state.config, BrokerConfig) else BrokerConfig(
        dict(getattr(state.config, "overrides", {})))
    dynamic = cfg.DynamicConfigs(state.store.path, static)
    state.extensions[EXTENSION_KEY] = dynamic
    state.config = dynamic.effective
    if not state.store.read_only:
        await state.run_blocking(use_topic_defaults, state.store, dynamic,
                                 dynamic.effective.log_config())
        if not os.path.exists(dynamic.path):
            save_configs(state)  # a new cluster's dynamic defaults (see admin_configs)
    # The cluster's dynamic layers (a ZooKeeper cluster's /config/brokers), now and on change.
    partition_seam(state).add_broker_config_listener(
        lambda per_broker, values: take_dynamic_layer(state, per_broker, values))


async def stop(state: BrokerView) -> None:
    """Nothing to release: dynamic configs are written when they change."""


def dynamic_configs(state: BrokerView) -> cfg.DynamicConfigs:
    """The broker's :class:`~seglog.server.apis.admin_configs.DynamicConfigs` (made on first
    use when the ``start`` hook did not run, as in handler-level tests)."""
    dynamic: cfg.DynamicConfigs | None = state.extensions.get(EXTENSION_KEY)
    if dynamic is None:
        static = state.config if isinstance(state.config, BrokerConfig) else BrokerConfig()
        dynamic = cfg.DynamicConfigs(state.store.path, static)
        state.extensions[EXTENSION_KEY] = dynamic
    return dynamic


def set_dynamic_layer(state: BrokerView, *, per_broker: bool, values: dict[str, str],
                      effective: BrokerConfig) -> None:
    """Make ``values`` the dynamic layer of this broker (``per_broker``) or of the cluster
    default, ``effective`` (what :meth:`~.admin_configs.DynamicConfigs.merged` made of it) the
    broker's live config and its topic defaults; persisted."""
    dynamic = dynamic_configs(state)
    if per_broker:
        dynamic.per_broker = dict(values)
    else:
        dynamic.cluster_default = dict(values)
    dynamic.effective = effective
    state.config = effective
    use_topic_defaults(state.store, dynamic, effective.log_config())
    save_configs(state)


def take_dynamic_layer(state: BrokerView, per_broker: bool, values: dict[str, str]) -> None:
    """A dynamic layer as the cluster holds it (``/config/brokers/<id>`` or ``<default>``,
    changed through any broker): applied as :func:`set_dynamic_layer`; a layer this broker
    cannot take (a name or value it refuses) is logged and left out, as Kafka's
    ``DynamicBrokerConfig`` logs an invalid update and keeps the old config."""
    dynamic = dynamic_configs(state)
    if (dynamic.per_broker if per_broker else dynamic.cluster_default) == values:
        return
    layers = (values, dynamic.cluster_default) if per_broker else (dynamic.per_broker, values)
    try:
        effective = dynamic.merged(*layers)
    except InvalidConfigError as exc:
        log.error("dynamic %s broker configs %s not applied: %s",
                  "per-broker" if per_broker else "cluster-default", values, exc)
        return
    if state.store.read_only:
        return
    set_dynamic_layer(state, per_broker=per_broker, values=values, effective=effective)


def topic_defaults(state: BrokerView) -> LogConfig:
    """The topic defaults of the effective broker config (``BrokerConfig.log_config``)."""
    return dynamic_configs(state).effective.log_config()


def topic_overrides_of(state: BrokerView, topic: Topic) -> dict[str, str]:
    """Topic ``topic``'s overrides (see ``DynamicConfigs.overrides_of``)."""
    return dynamic_configs(state).overrides_of(topic.topic_id, topic.config,
                                               topic_defaults(state))


def save_configs(state: BrokerView) -> None:
    """Persist the dynamic configs and the explicit overrides of the topics that exist."""
    store = state.store
    live: set[str] = set()
    for name in store.topics():
        try:
            live.add(store.topic(name).topic_id)
        except SeglogError:
            continue
    dynamic_configs(state).save(live)


def use_topic_defaults(store: Store, dynamic: cfg.DynamicConfigs, new_defaults: LogConfig
                       ) -> None:
    """Make ``new_defaults`` the store's topic defaults and give every topic them under its
    overrides, in one registry write."""
    old_defaults = store.topic_config_defaults
    store.set_topic_config_defaults(new_defaults)
    if new_defaults != old_defaults:
        rebase_topics(store, dynamic, old_defaults, new_defaults)


def rebase_topics(store: Store, dynamic: cfg.DynamicConfigs, old_defaults: LogConfig,
                  new_defaults: LogConfig) -> None:
    """Give every topic ``new_defaults`` under its overrides (those relative to
    ``old_defaults``), in one registry write."""
    changes: dict[str, LogConfig] = {}
    for name in store.topics():
        topic = store.topic(name)
        overrides = dynamic.overrides_of(topic.topic_id, topic.config, old_defaults)
        new = cfg.topic_config_from(new_defaults, overrides)
        if new != topic.config:
            changes[name] = new
    if changes:
        store.alter_topic_configs(changes)
