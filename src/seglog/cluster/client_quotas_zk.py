"""Client quota entities in ZooKeeper, as Kafka 2.x keeps them (``ZkAdminManager``,
``AdminZkClient``): one config znode per entity,

- ``/config/users/<user>``, ``/config/users/<user>/clients/<client-id>``,
- ``/config/clients/<client-id>``, ``/config/ips/<ip>``,

each ``{"version":1,"config":{"producer_byte_rate":"1024",...}}``, with ``<default>`` for the
default of a type and user and client-id names *sanitized* (Kafka's ``Sanitizer``: URL
encoding, ``*`` as ``%2A``, space as ``%20``); a change is announced by a
``/config/changes`` notification naming ``users/<u>``, ``users/<u>/clients/<c>``,
``clients/<c>`` or ``ips/<ip>`` (:mod:`~seglog.cluster.config_changes` reads them on every
broker).

A user's znode is shared: SCRAM credentials live in it too (keys ``SCRAM-SHA-256``,
``SCRAM-SHA-512``). A quota change therefore reads the znode, changes only the quota keys it
names and writes it back with the version it read (a lost race is read again), so no other
key is ever dropped; reading quotas keeps the quota keys only.

An entity here is a tuple of ``(type, name)`` pairs (``user`` before ``client-id``; a name of
None is ``<default>``), the shape :mod:`seglog.server.quotas` uses. Blocking calls (the
ZooKeeper client's); callers run them off the event loop.
"""

from __future__ import annotations

from typing import Any, Mapping

from . import zk_data
from .zk_data import desanitize, sanitize
from .zk_client import UNKNOWN_VERSION, NodeExistsError, ZooKeeperClientError

__all__ = ["QUOTA_KEYS", "alter_entity", "entity_of_change",
           "entity_znode", "read_all", "read_entity"]

#: The quota keys of the entity znodes (``QuotaConfig``); every other key is left alone.
QUOTA_KEYS = frozenset({"producer_byte_rate", "consumer_byte_rate", "request_percentage",
                        "controller_mutation_rate", "connection_creation_rate"})
#: A user's entity znodes, and the nested client-id level.
USERS, CLIENTS, IPS = "users", "clients", "ips"
_TYPE_OF = {"user": USERS, "client-id": CLIENTS, "ip": IPS}
#: Attempts at a read-modify-write that loses races.
_CAS_ATTEMPTS_MAX = 20

Entity = tuple[tuple[str, "str | None"], ...]


def _znode_name(name: str | None, *, raw: bool = False) -> str:
    if name is None:
        return zk_data.DEFAULT_ENTITY_NAME
    return name if raw else sanitize(name)


def entity_znode(entity: Entity) -> str:
    """The entity's path below ``/config``: ``users/<u>``, ``users/<u>/clients/<c>``,
    ``clients/<c>`` or ``ips/<ip>`` (also the notification's ``entity_path``); ValueError for
    any other combination."""
    types = [t for t, _ in entity]
    names = dict(entity)
    if types == ["user"]:
        return f"{USERS}/{_znode_name(names['user'])}"
    if types == ["user", "client-id"]:
        return (f"{USERS}/{_znode_name(names['user'])}/{CLIENTS}/"
                f"{_znode_name(names['client-id'])}")
    if types == ["client-id"]:
        return f"{CLIENTS}/{_znode_name(names['client-id'])}"
    if types == ["ip"]:
        return f"{IPS}/{_znode_name(names['ip'], raw=True)}"
    raise ValueError(f"no znode for quota entity {entity!r}")


def _name_of(znode_name: str, *, raw: bool = False) -> str | None:
    if znode_name == zk_data.DEFAULT_ENTITY_NAME:
        return None
    return znode_name if raw else desanitize(znode_name)


def entity_of_change(entity_type: str, entity_name: str) -> Entity | None:
    """The entity a config change of ``<entity_type>/<entity_name>`` names (``users`` with
    ``alice`` or ``alice/clients/c1``, ``clients``, ``ips``), or None for another type or a
    malformed name."""
    if not entity_name or "\x00" in entity_name:
        return None
    if entity_type == USERS:
        user, sep, rest = entity_name.partition(f"/{CLIENTS}/")
        if "/" in user or not user:
            return None
        if not sep:
            return (("user", _name_of(user)),)
        if "/" in rest or not rest:
            return None
        return (("user", _name_of(user)), ("client-id", _name_of(rest)))
    if entity_type == CLIENTS and "/" not in entity_name:
        return (("client-id", _name_of(entity_name)),)
    if entity_type == IPS and "/" not in entity_name:
        return (("ip", _name_of(entity_name, raw=True)),)
    return None


def _quota_values(config: Mapping[str, str], path: str) -> dict[str, float]:
    values: dict[str, float] = {}
    for key, text in config.items():
        if key not in QUOTA_KEYS:
            continue  # SCRAM credentials and anything else: not ours
        try:
            values[key] = float(text)
        except ValueError:
            raise zk_data.ZkDataError(f"quota {key}={text!r:.50} is not a number",
                                      path=path) from None
    return values


def read_entity(zk: Any, entity: Entity) -> dict[str, float]:
    """The quota values in ``entity``'s znode (none when it does not exist)."""
    path = f"{zk_data.CONFIG_PATH}/{entity_znode(entity)}"
    data, _version = zk.get_data_and_version(path)
    return _quota_values(zk_data.decode_entity_config(data, path=path), path)


def read_all(zk: Any) -> dict[Entity, dict[str, float]]:
    """Every quota entity with a value (``fetchAllEntityConfigs`` of users, users' clients,
    clients and ips). A znode that does not decode is skipped (ZkDataError is raised by
    :func:`read_entity` only)."""
    entities: list[Entity] = []
    for user in zk.get_children(f"{zk_data.CONFIG_PATH}/{USERS}"):
        entities.append((("user", _name_of(user)),))
        for client in zk.get_children(f"{zk_data.CONFIG_PATH}/{USERS}/{user}/{CLIENTS}"):
            entities.append((("user", _name_of(user)), ("client-id", _name_of(client))))
    for client in zk.get_children(f"{zk_data.CONFIG_PATH}/{CLIENTS}"):
        entities.append((("client-id", _name_of(client)),))
    for ip in zk.get_children(f"{zk_data.CONFIG_PATH}/{IPS}"):
        entities.append((("ip", _name_of(ip, raw=True)),))
    table: dict[Entity, dict[str, float]] = {}
    for entity in entities:
        try:
            values = read_entity(zk, entity)
        except zk_data.ZkDataError:
            continue
        if values:
            table[entity] = values
    return table


def alter_entity(zk: Any, entity: Entity, changes: Mapping[str, str | None]) -> str:
    """Set (a string value) or remove (None) the quota keys ``changes`` names in ``entity``'s
    znode, keeping every other key, then announce the change; returns the notification's
    path. A concurrent writer (a SCRAM change, another broker) makes it read again.
    Raises the ZooKeeper client's errors, ValueError for a bad entity."""
    relative = entity_znode(entity)
    path = f"{zk_data.CONFIG_PATH}/{relative}"
    for _ in range(_CAS_ATTEMPTS_MAX):
        data, version = zk.get_data_and_version(path)
        config = zk_data.decode_entity_config(data, path=path)
        for key, value in changes.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        encoded = zk_data.encode_entity_config(config)
        if version == UNKNOWN_VERSION:
            try:
                zk.create_recursive(path, encoded)
            except NodeExistsError:
                continue  # created meanwhile: read it again
        else:
            written, _ = zk.conditional_update_path(path, encoded, version)
            if not written:
                continue
        notification: str = zk.create_config_change_notification(relative)
        return notification
    raise ZooKeeperClientError(f"gave up after {_CAS_ATTEMPTS_MAX} attempts", path=path)
