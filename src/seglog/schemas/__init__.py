"""Kafka's message schemas by ``(api_key, version)``: kio's, plus the versions kio lacks.

kio (0.6.5) is generated from Kafka's JSON message definitions of an earlier release; Kafka
4.4 added versions it does not have (ApiVersions v5, TxnOffsetCommit v6, DeleteGroups v3,
...). Those are written here by hand in kio's own form (frozen dataclasses with
``kafka_type`` field metadata, read and written by kio's ``entity_reader`` and
``entity_writer``), one module per API, each field checked against the schema that Kafka
4.4's generated ``*Data.SCHEMAS`` prints (``tests/kafka/test_kafka_schemas.py``).

Every part of seglog loads a schema through :func:`load_request_schema` and
:func:`load_response_schema`, never through ``kio.index`` directly, so an added version is
seen everywhere at once.
"""

from __future__ import annotations

from pkgutil import resolve_name
from typing import Any, cast

from kio.index import KioIndexError
from kio.index import load_request_schema as _kio_request
from kio.index import load_response_schema as _kio_response
from kio.static.protocol import RequestPayload, ResponsePayload

__all__ = ["OVERLAY", "SchemaNotFound", "api_key_name", "load_request_schema",
           "load_response_schema"]


class SchemaNotFound(KioIndexError):
    """No schema, in kio or here, for an ``(api_key, version)``."""


#: ``{(api_key, version): (request class path, response class path)}``: the versions written
#: here. A path is ``module:Class`` relative to this package.
OVERLAY: dict[tuple[int, int], tuple[str, str]] = {
    (18, 5): ("api_versions_v5:ApiVersionsRequest", "api_versions_v5:ApiVersionsResponse"),
    (28, 6): ("txn_offset_commit_v6:TxnOffsetCommitRequest",
              "txn_offset_commit_v6:TxnOffsetCommitResponse"),
    (42, 3): ("delete_groups_v3:DeleteGroupsRequest", "delete_groups_v3:DeleteGroupsResponse"),
    (66, 2): ("list_transactions_v2:ListTransactionsRequest",
              "list_transactions_v2:ListTransactionsResponse"),
    (88, 1): ("streams_group_heartbeat_v1_request:StreamsGroupHeartbeatRequest", "streams_group_heartbeat_v1_response:StreamsGroupHeartbeatResponse"),
    (89, 1): ("streams_group_describe_v1_request:StreamsGroupDescribeRequest", "streams_group_describe_v1_response:StreamsGroupDescribeResponse"),
    (93, 0): ("streams_group_topology_description_update_v0:StreamsGroupTopologyDescriptionUpdateRequest", "streams_group_topology_description_update_v0:StreamsGroupTopologyDescriptionUpdateResponse"),
}

#: Names of the API keys kio does not know (Kafka 4.4's ``ApiKeys``).
_EXTRA_API_NAMES: dict[int, str] = {
    93: "StreamsGroupTopologyDescriptionUpdate",
    94: "UnregisterController",
}


def _resolve(path: str) -> Any:
    module, _, name = path.partition(":")
    return resolve_name(f"{__name__}.{module}:{name}")


def load_request_schema(api_key: int, version: int) -> type[RequestPayload]:
    """The request class of ``api_key`` at ``version``; :class:`SchemaNotFound` (a
    ``KioIndexError``) when neither kio nor this package has it."""
    paths = OVERLAY.get((api_key, version))
    if paths is not None:
        return cast("type[RequestPayload]", _resolve(paths[0]))
    try:
        return _kio_request(api_key, version)
    except KioIndexError as exc:
        raise SchemaNotFound(f"no schema for API key {api_key} v{version}") from exc


def load_response_schema(api_key: int, version: int) -> type[ResponsePayload]:
    """The response class of ``api_key`` at ``version``; :class:`SchemaNotFound` when
    neither kio nor this package has it."""
    paths = OVERLAY.get((api_key, version))
    if paths is not None:
        return cast("type[ResponsePayload]", _resolve(paths[1]))
    try:
        return _kio_response(api_key, version)
    except KioIndexError as exc:
        raise SchemaNotFound(f"no schema for API key {api_key} v{version}") from exc


def api_key_name(api_key: int) -> str | None:
    """Kafka's name of ``api_key`` (``"Metadata"``), None for a key neither kio nor this
    package knows."""
    from kio.schema.index import api_key_map

    snake = api_key_map.get(api_key)
    if snake is not None:
        return "".join(part.capitalize() for part in snake.split("_"))
    return _EXTRA_API_NAMES.get(api_key)
