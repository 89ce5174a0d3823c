"""DescribeClientQuotas (48) and AlterClientQuotas (49), KIP-546, as Kafka 4.4 answers them
(``ClientQuotasImage.describe``, ``ClientQuotaControlManager.alterClientQuotas``), over the
broker's quota table (:mod:`seglog.server.quotas`).

**Where the entities live.** A lone broker keeps them in its data directory
(:data:`QUOTAS_FILE_NAME`, written durably: temp file, fsync, rename; a file that does not
parse stops the start with :class:`~seglog.errors.CorruptCheckpointError`). A ZooKeeper
cluster keeps them in ``/config/users|clients|ips`` (:mod:`seglog.cluster.client_quotas_zk`):
an AlterClientQuotas writes there through the partition seam and every broker, this one
included, takes the change from its ``/config/changes`` notification.

**Validation** (Kafka 4.4's controller, with its messages): an empty entity, an unknown entity
type, an empty name, an IP combined with a user or client id, an IP that is neither an
address nor a resolvable host, a key that is not a quota of the entity's kind, a value that
is not above 0, a fractional or too large value for an integral key, a key given twice, an
entity given twice: INVALID_REQUEST for that entity; the other entities are applied.
``validate_only`` checks and changes nothing. Describe refuses a filter with an empty or
repeated entity type, a match string that does not fit its match type, or an IP component
mixed with user / client-id ones (INVALID_REQUEST), or an unknown entity type
(UNSUPPORTED_VERSION), for the whole request.

**Authorization** (the ACL module's seam, shared with the SCRAM APIs): :func:`authorized`
asks ``state.extensions[AUTHORIZE_CLUSTER_KEY]`` for Kafka's ``ALTER_CONFIGS`` /
``DESCRIBE_CONFIGS`` on ``CLUSTER``; a refusal is CLUSTER_AUTHORIZATION_FAILED for the whole
request (every entity of an AlterClientQuotas), as Kafka answers.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import math
import os
import re
import socket
from typing import Any, Mapping

from ... import error_codes as codes
from ...errors import CorruptCheckpointError
from ...storage import checkpoints
from .. import quotas as q
from ..context import RequestContext
from ..registry import ApiHandler
from .admin_wire import Refused, make, response_classes
from .data_topics import partition_seam
from .security import AUTHORIZE_CLUSTER_KEY, Authorize

__all__ = ["HANDLERS", "QUOTAS_FILE_NAME", "alter_client_quotas", "authorized",
           "describe_client_quotas", "load_quota_file", "save_quota_file", "start", "stop"]

log = logging.getLogger("seglog.server.apis.client_quotas")

#: The lone broker's quota entities, in its data directory.
QUOTAS_FILE_NAME = "seglog-client-quotas.json"
_FILE_VERSION = 1
#: DescribeClientQuotas match types.
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
#: Kafka's exception message for a refused cluster operation.
_CLUSTER_AUTH_MESSAGE = "Cluster authorization failed."
_INT_MAX = {"short": 2**15 - 1, "int": 2**31 - 1, "long": 2**63 - 1}
#: A DNS host name (RFC 1123 labels), the only kind of name worth a lookup.
_HOST_NAME = re.compile(r"(?=.{1,253}\.?$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                        r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?")


# --- authorization seam --------------------------------------------------------------------


def authorized(ctx: RequestContext, operation: str) -> bool:
    """Whether ``ctx``'s principal may do ``operation`` (``ALTER_CONFIGS`` or
    ``DESCRIBE_CONFIGS``) on the ``CLUSTER`` resource: the ACL module's check in
    ``state.extensions[AUTHORIZE_CLUSTER_KEY]`` (the seam the SCRAM APIs use too); without
    one every principal may, as Kafka without an authorizer."""
    check: Authorize | None = ctx.broker.extensions.get(AUTHORIZE_CLUSTER_KEY)
    return True if check is None else bool(check(ctx, operation))


# --- persistence (a lone broker) -------------------------------------------------------------


def _file_path(state: Any) -> str:
    return os.path.join(str(state.store.path), QUOTAS_FILE_NAME)


def _entity_to_json(entity: q.QuotaEntity) -> list[list[str | None]]:
    return [[t, n] for t, n in entity]


def load_quota_file(path: str) -> dict[q.QuotaEntity, dict[str, float]]:
    """The quota entities in ``path`` (none when it does not exist); CorruptCheckpointError
    when it does not parse."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return {}
    try:
        obj = json.loads(raw)
        if not isinstance(obj, dict) or obj.get("version") != _FILE_VERSION:
            raise ValueError("unknown format")
        entries = obj["entities"]
        if not isinstance(entries, list):
            raise ValueError("entities must be a list")
        table: dict[q.QuotaEntity, dict[str, float]] = {}
        for entry in entries:
            pairs = entry["entity"]
            values = entry["values"]
            if not isinstance(pairs, list) or not isinstance(values, dict) or not all(
                    isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
                    and (p[1] is None or isinstance(p[1], str)) for p in pairs):
                raise ValueError("bad entity")
            if not all(isinstance(k, str) and isinstance(v, (int, float))
                       and not isinstance(v, bool) for k, v in values.items()):
                raise ValueError("bad values")
            table[q.entity_of((p[0], p[1]) for p in pairs)] = {
                k: float(v) for k, v in values.items()}
        return table
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptCheckpointError(f"{path}: client quotas do not parse: {exc}",
                                     path=path) from None


def save_quota_file(path: str, table: Mapping[q.QuotaEntity, Mapping[str, float]]) -> None:
    """Write ``table`` to ``path`` durably (write-temp, fsync, rename)."""
    text = json.dumps({"version": _FILE_VERSION, "entities": [
        {"entity": _entity_to_json(e), "values": dict(sorted(v.items()))}
        for e, v in sorted(table.items(), key=lambda item: repr(item[0]))]}, indent=1)
    checkpoints.atomic_write_bytes(path, (text + "\n").encode("utf-8"))


async def start(state: Any) -> None:
    """Load the quota entities: a lone broker's from its data directory, a cluster member's
    from ZooKeeper (the seam's listener tells each entity now and on every change)."""
    table = q.quotas_of(state)
    cluster = partition_seam(state)
    if cluster.keeps_client_quotas:
        cluster.add_client_quota_listener(table.set_entity)
        return
    table.replace_all(await state.run_blocking(load_quota_file, _file_path(state)))


async def stop(state: Any) -> None:
    """Nothing to release: the quotas are written when they change."""


# --- DescribeClientQuotas --------------------------------------------------------------------


def _java_order(entity: q.QuotaEntity) -> q.QuotaEntity:
    """The order Kafka lists an entity's components in (its ``HashMap``: client-id before
    user)."""
    return tuple(sorted(entity, key=lambda pair: {q.CLIENT_ID: 0, q.USER: 1}.get(pair[0], 2)))


def _describe_filter(components: Any) -> tuple[dict[str, str | None], set[str]]:
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for component in components:
        entity_type = component.entity_type
        if not entity_type:
            raise Refused(codes.INVALID_REQUEST, "Invalid empty entity type.")
        if entity_type in exact or entity_type in typed:
            raise Refused(codes.INVALID_REQUEST, f"Entity type {entity_type} cannot appear "
                                                 f"more than once in the filter.")
        if entity_type not in (q.IP, q.USER, q.CLIENT_ID):
            raise Refused(codes.UNSUPPORTED_VERSION, f"Unsupported entity type {entity_type}")
        match_type = int(component.match_type)
        if match_type == MATCH_EXACT:
            if component.match is None:
                raise Refused(codes.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but "
                                                     "set match string to null.")
            exact[entity_type] = component.match
        elif match_type == MATCH_DEFAULT:
            if component.match is not None:
                raise Refused(codes.INVALID_REQUEST, "Request specified MATCH_TYPE_DEFAULT, "
                                                     "but also specified a match string.")
            exact[entity_type] = None
        elif match_type == MATCH_SPECIFIED:
            if component.match is not None:
                raise Refused(codes.INVALID_REQUEST, "Request specified MATCH_TYPE_SPECIFIED,"
                                                     " but also specified a match string.")
            typed.add(entity_type)
        else:
            raise Refused(codes.INVALID_REQUEST, f"Unknown match type {match_type}")
    if (q.IP in exact or q.IP in typed) and (
            q.USER in exact or q.USER in typed or q.CLIENT_ID in exact
            or q.CLIENT_ID in typed):
        raise Refused(codes.INVALID_REQUEST, "Invalid entity filter component combination. "
                                             "IP filter component should not be used with "
                                             "user or clientId filter component.")
    return exact, typed


def _matches(entity: q.QuotaEntity, exact: Mapping[str, str | None], typed: set[str],
             strict: bool) -> bool:
    names = dict(entity)
    if strict and len(names) != len(exact) + len(typed):
        return False
    for entity_type, name in exact.items():
        if entity_type not in names or names[entity_type] != name:
            return False
    return all(entity_type in names for entity_type in typed)


async def describe_client_quotas(ctx: RequestContext, request: Any) -> Any:
    """DescribeClientQuotas: the entities the filter matches with their values."""
    response_cls, module = response_classes(48, ctx.api_version)
    if not authorized(ctx, "DESCRIBE_CONFIGS"):
        return make(response_cls, throttle_time=0, error_code=codes.CLUSTER_AUTHORIZATION_FAILED,
                    error_message=_CLUSTER_AUTH_MESSAGE, entries=None)
    try:
        exact, typed = _describe_filter(request.components)
    except Refused as refused:
        return make(response_cls, throttle_time=0, error_code=refused.code,
                    error_message=refused.message, entries=None)
    table = q.quotas_of(ctx.broker)
    entries = []
    for entity, values in table.entities.items():
        if not _matches(entity, exact, typed, bool(request.strict)):
            continue
        entries.append(make(
            module.EntryData,
            entity=tuple(make(module.EntityData, entity_type=t, entity_name=n)
                         for t, n in _java_order(entity)),
            values=tuple(make(module.ValueData, key=k, value=v)
                         for k, v in sorted(values.items()))))
    # Kafka's success answer carries an empty message, not a null one.
    return make(response_cls, throttle_time=0, error_code=codes.NONE, error_message="",
                entries=tuple(entries))


# --- AlterClientQuotas -----------------------------------------------------------------------


def _entity_text(entity: q.QuotaEntity) -> str:
    inner = ", ".join(f"{t}={n}" for t, n in _java_order(entity))
    return f"ClientQuotaEntity(entries={{{inner}}})"


async def _ip_resolves(ctx: RequestContext, ip: str) -> bool:
    """``InetAddress.getByName``: an address literal, or a host name that resolves (looked
    up off the loop)."""
    try:
        ipaddress.ip_address(ip)
        return True
    except ValueError:
        pass
    if not _HOST_NAME.fullmatch(ip):
        # Not a host name at all: it cannot resolve, and no lookup leaves the machine for it.
        return False
    try:
        await ctx.broker.run_blocking(socket.getaddrinfo, ip, None)
    except (OSError, UnicodeError):
        return False
    return True


async def _check_entity(ctx: RequestContext, entity: q.QuotaEntity) -> dict[str, str]:
    """The quota keys (name -> Kafka type) valid for ``entity``; Refused otherwise."""
    if not entity:
        raise Refused(codes.INVALID_REQUEST, "Invalid empty client quota entity")
    for entity_type, name in entity:
        if entity_type not in (q.USER, q.CLIENT_ID, q.IP):
            raise Refused(codes.INVALID_REQUEST,
                          f"Unhandled client quota entity type: {entity_type}")
        if name is not None and not name:
            raise Refused(codes.INVALID_REQUEST, f"Empty {entity_type} not supported")
    names = dict(entity)
    if q.IP in names:
        if len(names) > 1:
            raise Refused(codes.INVALID_REQUEST, "Invalid quota entity combination, IP entity "
                                                 "shouldnot be combined with User or ClientId")
        ip = names[q.IP]
        if ip is not None and not await _ip_resolves(ctx, ip):
            raise Refused(codes.INVALID_REQUEST, f"{ip} is not a valid IP or resolvable host.")
        return dict(q.IP_QUOTA_TYPES)
    return dict(q.USER_CLIENT_QUOTA_TYPES)


def _check_value(keys: Mapping[str, str], key: str, value: float) -> None:
    kind = keys.get(key)
    if kind is None:
        raise Refused(codes.INVALID_REQUEST, f"Invalid configuration key {key}")
    if value <= 0.0:
        raise Refused(codes.INVALID_REQUEST, f"Quota {key} must be greater than 0")
    if kind == "double":
        return
    if value > _INT_MAX[kind]:
        article = "an" if kind == "int" else "a"
        raise Refused(codes.INVALID_REQUEST,
                      f"Proposed value for {key} is too large for {article} {kind.upper()}.")
    if math.isfinite(value) and abs(math.fmod(value, 1.0)) > 1e-6:
        raise Refused(codes.INVALID_REQUEST, f"{key} cannot be a fractional value.")


def _value_text(kind: str, value: float) -> str:
    """How a value is written to a config znode: integral keys as integers (as
    ``kafka-configs`` writes them), doubles as Java's ``Double.toString`` of simple values."""
    if kind != "double":
        return str(int(value))
    return repr(float(value))


async def alter_client_quotas(ctx: RequestContext, request: Any) -> Any:
    """AlterClientQuotas: validate each entity's changes and apply the valid ones (unless
    ``validate_only``); one result per entity."""
    response_cls, module = response_classes(49, ctx.api_version)
    results: dict[q.QuotaEntity, tuple[int, str | None]] = {}
    if not authorized(ctx, "ALTER_CONFIGS"):
        for entry in request.entries:
            entity = q.entity_of({e.entity_type: e.entity_name for e in entry.entity}.items())
            results[entity] = (codes.CLUSTER_AUTHORIZATION_FAILED, _CLUSTER_AUTH_MESSAGE)
    else:
        table = q.quotas_of(ctx.broker)
        cluster = partition_seam(ctx.broker)
        changed = False
        for entry in request.entries:
            # Kafka reads the entity into a map: a type given twice keeps its last name.
            entity = q.entity_of({e.entity_type: e.entity_name for e in entry.entity}.items())
            try:
                if entity in results:
                    raise Refused(codes.INVALID_REQUEST,
                                  f"Ignoring duplicate entity {_entity_text(entity)}")
                ops: dict[str, float | None] = {}
                for op in entry.ops:
                    if op.key in ops:
                        # Kafka notes "Duplicate quota key", then finds the entity has a
                        # result already and says this instead.
                        raise Refused(codes.INVALID_REQUEST,
                                      f"Ignoring duplicate entity {_entity_text(entity)}")
                    ops[op.key] = None if op.remove else float(op.value)
                keys = await _check_entity(ctx, entity)
                for key, value in ops.items():
                    if value is not None:
                        _check_value(keys, key, value)
            except Refused as refused:
                results[entity] = (refused.code, refused.message)
                continue
            results[entity] = (codes.NONE, None)
            if request.validate_only:
                continue
            current = dict(table.entities.get(entity, {}))
            changes = {k: (None if v is None else _value_text(keys[k], v))
                       for k, v in ops.items() if v is not None or k in current}
            if not changes:
                continue
            if cluster.keeps_client_quotas:
                try:
                    await cluster.alter_client_quota(entity, changes)
                except Exception as exc:  # noqa: BLE001 - ZooKeeper away: this entity fails
                    log.warning("client quotas of %s not changed: %s", entity, exc)
                    results[entity] = (codes.UNKNOWN_SERVER_ERROR, str(exc))
                    continue
            for k, v in ops.items():
                if v is None:
                    current.pop(k, None)
                else:
                    current[k] = v
            table.set_entity(entity, current)  # the cluster's notification says the same
            changed = True
        if changed and not cluster.keeps_client_quotas:
            await ctx.broker.run_blocking(save_quota_file, _file_path(ctx.broker),
                                          dict(table.entities))
    entries = tuple(
        make(module.EntryData, error_code=code, error_message=message,
             entity=tuple(make(module.EntityData, entity_type=t, entity_name=n)
                          for t, n in _java_order(entity)))
        for entity, (code, message) in results.items())
    return make(response_cls, throttle_time=0, entries=entries)


HANDLERS: tuple[ApiHandler, ...] = (
    ApiHandler(48, 0, 1, describe_client_quotas),
    ApiHandler(49, 0, 1, alter_client_quotas),
)
