"""Group config resources (ConfigResource type GROUP = 32) on the wire and on disk, as Kafka
4.4 answers them: DescribeConfigs (``ConfigHelper.createGroupConfigEntry``: the group's value
as DYNAMIC_GROUP_CONFIG, then its broker synonym's layers or GroupConfig's default),
IncrementalAlterConfigs and the legacy AlterConfigs (``ControllerConfigurationValidator``:
``GroupConfig.validate`` over the group's whole resulting set; no APPEND/SUBTRACT, as Kafka's
controller knows no group config as a list), ListConfigResources (the groups that set a
config). The table, validation and view are :mod:`seglog.group_configs`'; the handlers of
APIs 32, 33 and 44 (``admin_config_apis``) and 74 (``config_resources``) call in here.

Kept as client-metrics subscriptions are: a lone broker in its data directory
(:data:`GROUP_CONFIGS_FILE`), a ZooKeeper cluster in ``/config/groups/<group>`` (Kafka keeps
them in KRaft only), which every broker follows through its config change notifications. A
group's configs exist while at least one is set, whether or not the group does.

Readers (the consumer, streams and share group code, the DLQ writer) use
:func:`group_configs` ``(state)``: a :class:`~seglog.group_configs.GroupConfigsView` whose
``value`` / ``effective`` give what a group runs with and whose listeners hear of changes.
"""

from __future__ import annotations

import logging
from typing import Any, Collection

from ... import error_codes as codes
from ...config_table import BROKER_CONFIGS
from ...errors import InvalidConfigError, SeglogError
from ...group_configs import GROUP_CONFIGS, GroupConfigsView, broker_default, normalized
from ...group_configs_file import GROUP_CONFIGS_FILE, read_group_configs, write_group_configs
from ...group_configs import validate as validate_group
from ...configdef import format_value
from ..config import CONFIG_DEFS
from ..registry import ApiHandler
from . import admin_configs as cfg
from .admin_state import dynamic_configs
from .admin_wire import Refused, code_of
from .broker_view import BrokerView
from .data_topics import partition_seam

__all__ = ["EXTENSION_KEY", "GROUP_CONFIGS_FILE", "HANDLERS", "RESOURCE_GROUP",
           "SOURCE_GROUP", "alter", "broker_value", "describe_entries", "group_configs",
           "start", "stop"]

log = logging.getLogger("seglog.server.apis.group_configs")

#: ConfigResource.Type.GROUP.
RESOURCE_GROUP = 32
#: DescribeConfigsResponse.ConfigSource.DYNAMIC_GROUP_CONFIG.
SOURCE_GROUP = 8
#: Where a lone broker keeps its group configs, in its data directory.
#: Where the view lives in ``BrokerState.extensions``: this module's name.
EXTENSION_KEY = "seglog.server.apis.group_configs"


def broker_value(state: BrokerView, name: str) -> Any:
    """The effective (typed) value of broker config ``name``: the broker's dynamic and static
    layers for a config seglog takes, Kafka's default for one it refuses (its
    ``group.share.*`` bounds until share groups take them)."""
    if name in CONFIG_DEFS:
        return dynamic_configs(state).effective[name]
    return BROKER_CONFIGS[name].default


def _save(state: BrokerView, view: GroupConfigsView) -> None:
    write_group_configs(state.store.path, view.all())


def group_configs(state: BrokerView) -> GroupConfigsView:
    """The broker's group configs (made, from the data directory's file, on first use)."""
    view: GroupConfigsView | None = state.extensions.get(EXTENSION_KEY)
    if view is None:
        view = GroupConfigsView(lambda name: broker_value(state, name),
                                read_group_configs(state.store.path))
        state.extensions[EXTENSION_KEY] = view
    return view


def _type_id(kind: str) -> int:
    return cfg.config_type_id(kind)


def describe_entries(state: BrokerView, group_id: str, *, synonyms: bool,
                     documentation: bool, keys: Collection[str]) -> list[Any]:
    """Kafka's entries of group ``group_id`` (one that sets nothing is described by the
    defaults): every non-internal config and the internal ones it sets, sorted by name, as
    ``admin_config_apis.ConfigEntry`` dicts. Raises Refused for an empty name."""
    if not group_id:
        raise Refused(codes.INVALID_REQUEST, "Group name must not be empty")
    values = group_configs(state).get(group_id)
    dynamic = dynamic_configs(state)
    out: list[Any] = []
    for name in sorted(GROUP_CONFIGS):
        d = GROUP_CONFIGS[name]
        if (d.internal and name not in values) or (keys and name not in keys):
            continue
        kind = d.key.type
        found: list[tuple[str, str | None, int]] = []
        if name in values:
            found.append((name, values[name], SOURCE_GROUP))
        if d.broker_synonym is not None:
            found += dynamic.synonyms(d.broker_synonym)
        elif d.key.default is not None:
            found.append((name, format_value(kind, d.key.default), cfg.SOURCE_DEFAULT))
        if name in values:
            value: str | None = values[name]
        else:
            value = format_value(kind, broker_default(name, lambda n: broker_value(state, n)))
        out.append({"name": name, "value": value, "read_only": False,
                    "config_source": found[0][2] if found else cfg.SOURCE_DEFAULT,
                    "is_sensitive": False, "synonyms": found if synonyms else [],
                    "config_type": _type_id(kind),
                    "documentation": d.key.doc if documentation else None})
    return out


def check(state: BrokerView, group_id: str, values: dict[str, str]) -> dict[str, str]:
    """Group ``group_id``'s whole new config set ``values`` validated as Kafka's controller
    validates it; returns it normalized. Raises Refused (INVALID_REQUEST for an empty name,
    INVALID_CONFIG with Kafka's message otherwise)."""
    if not group_id:
        raise Refused(codes.INVALID_REQUEST, "Default group resources are not allowed.")
    try:
        validate_group(values, lambda n: broker_value(state, n))
    except InvalidConfigError as e:
        raise Refused(codes.INVALID_CONFIG, str(e)) from None
    return normalized(values)


async def alter(state: BrokerView, group_id: str, values: dict[str, str],
                validate_only: bool) -> None:
    """Make ``values`` group ``group_id``'s whole config set (validated first; empty: the
    group's configs are gone): the cluster's (a ZooKeeper cluster's znode, which every
    broker takes) and this broker's, persisted. Raises Refused."""
    new = check(state, group_id, values)
    view = group_configs(state)
    if validate_only or new == dict(view.get(group_id)):
        return
    seam = partition_seam(state)
    if seam.keeps_group_configs:
        try:
            await seam.alter_group_configs(group_id, new)
        except (SeglogError, ValueError) as e:
            raise Refused(code_of(e) if isinstance(e, SeglogError) else codes.INVALID_REQUEST,
                          str(e)) from None
        # The cluster's listener takes it too; taken here so that this broker's next
        # describe sees the change at once.
        view.replace(group_id, new)
        return
    view.replace(group_id, new)
    _save(state, view)


def _take(state: BrokerView, group_id: str, values: dict[str, str]) -> None:
    """A group's configs as the cluster now holds them (empty: none); a value this broker
    cannot read (written by a broker with other bounds) is kept as written, and clamped
    where it is read."""
    try:
        taken = normalized(values)
    except InvalidConfigError as exc:
        log.error("configs %s of group %s not applied: %s", values, group_id, exc)
        return
    group_configs(state).replace(group_id, taken)


async def start(state: Any) -> None:
    """Load the group configs; in a ZooKeeper cluster follow the ones it holds (made through
    any broker) instead."""
    view = group_configs(state)
    seam = partition_seam(state)
    if seam.keeps_group_configs:
        # ZooKeeper is the truth: what the data dir's file may hold is not this cluster's.
        view.replace_all({})
        seam.add_group_config_listener(lambda group_id, values: _take(state, group_id, values))


async def stop(state: Any) -> None:
    """Nothing to release: the configs are written when they change."""


HANDLERS: tuple[ApiHandler, ...] = ()
