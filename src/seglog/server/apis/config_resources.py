"""ListConfigResources (API 74, v0-1; KIP-714's ListClientMetricsResources renamed by
KIP-1142), as Kafka 4.4's ``KafkaApis.handleListConfigResources`` answers it.

v0 lists the client-metrics subscriptions only. v1 takes the resource types to list (none:
all it supports) and lists, in Kafka's order, the groups that set a config (GROUP, 32:
``group_configs``), the client-metrics subscriptions, then the broker loggers and the
brokers (one per live broker), then the topics. A type it does not support
(UNKNOWN, the cluster, ...) is UNSUPPORTED_VERSION for the whole request.

Authorization: DESCRIBE_CONFIGS on CLUSTER, else CLUSTER_AUTHORIZATION_FAILED (top level).
"""

from __future__ import annotations

import sys
from typing import Any

from ... import error_codes as codes
from ..authorization import AclOperation, authorize_cluster
from ..context import RequestContext
from ..registry import ApiHandler
from ...schemas import load_response_schema
from .admin_config_apis import take_client_metrics
from .admin_state import dynamic_configs
from .admin_wire import (
    NO_THROTTLE, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_TOPIC, make,
)
from .client_metrics_configs import RESOURCE_CLIENT_METRICS
from .data_topics import partition_seam
from .group_configs import RESOURCE_GROUP, group_configs

__all__ = ["HANDLERS", "RESOURCE_GROUP", "SUPPORTED_TYPES", "list_config_resources", "start",
           "stop"]

#: The resource types v1 lists, in the order the answer lists them.
SUPPORTED_TYPES = (RESOURCE_GROUP, RESOURCE_CLIENT_METRICS, RESOURCE_BROKER_LOGGER,
                   RESOURCE_BROKER, RESOURCE_TOPIC)


def _names(ctx: RequestContext, resource_type: int) -> list[str]:
    state = ctx.broker
    seam = partition_seam(state)
    if resource_type == RESOURCE_CLIENT_METRICS:
        return sorted(dynamic_configs(state).client_metrics)
    if resource_type in (RESOURCE_BROKER, RESOURCE_BROKER_LOGGER):
        return [str(b) for b in sorted(set(seam.live_brokers) | {state.node_id})]
    if resource_type == RESOURCE_TOPIC:
        return sorted(seam.assignments)
    if resource_type == RESOURCE_GROUP:
        return group_configs(state).group_ids()
    return []


async def list_config_resources(ctx: RequestContext, request: Any) -> Any:
    """ListConfigResources v0-1 (see the module docstring)."""
    response_cls = load_response_schema(74, ctx.api_version)
    m = sys.modules[response_cls.__module__]
    if not authorize_cluster(ctx, AclOperation.DESCRIBE_CONFIGS):
        return make(response_cls, throttle_time=NO_THROTTLE,
                    error_code=codes.CLUSTER_AUTHORIZATION_FAILED, config_resources=())
    if ctx.api_version == 0:
        names = _names(ctx, RESOURCE_CLIENT_METRICS)
        return make(response_cls, throttle_time=NO_THROTTLE, error_code=codes.NONE,
                    config_resources=tuple(make(m.ConfigResource, resource_name=n)
                                           for n in names))
    asked = set(request.resource_types or ())
    if asked - set(SUPPORTED_TYPES):
        return make(response_cls, throttle_time=NO_THROTTLE,
                    error_code=codes.UNSUPPORTED_VERSION, config_resources=())
    found = [make(m.ConfigResource, resource_name=name, resource_type=t)
             for t in SUPPORTED_TYPES if not asked or t in asked for name in _names(ctx, t)]
    return make(response_cls, throttle_time=NO_THROTTLE, error_code=codes.NONE,
                config_resources=tuple(found))


async def start(state: Any) -> None:
    """In a ZooKeeper cluster, follow the client-metrics subscriptions it holds (made through
    any broker) into this broker's view."""
    seam = partition_seam(state)
    if seam.keeps_client_metrics:
        # ZooKeeper is the truth: what the data dir's file may hold from other writes of
        # it is not this cluster's.
        dynamic_configs(state).client_metrics.clear()
        seam.add_client_metrics_listener(
            lambda name, values: take_client_metrics(state, name, values))


async def stop(state: Any) -> None:
    """Nothing to release."""


HANDLERS: tuple[ApiHandler, ...] = (
    ApiHandler(74, 0, 1, list_config_resources),
)
