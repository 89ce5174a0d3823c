"""UpdateFeatures (API key 57, v0-v2): finalize feature levels for the whole cluster (KIP-584),
as Kafka 4.4's controller answers it (``ControllerApis.handleUpdateFeatures``,
``QuorumController.updateFeatures``, ``FeatureControlManager``); DescribeFeatures is
ApiVersions, which advertises the levels finalized here.

ALTER on CLUSTER is needed (CLUSTER_AUTHORIZATION_FAILED, top level, no per-feature results).
The rules are :func:`seglog.feature_updates.plan_updates` over ``seglog.features.FEATURES``
(this broker is the deciding "controller" its refusals name): a refusal fails the whole request
with INVALID_UPDATE_VERSION and "The update failed for all features since the following
feature had an error: ..."; a success answers NONE and, for v0-v1, one NONE result per
feature. ``validate_only`` (v1+) decides without writing. Kafka reads the request's updates
into a map, so a feature named twice counts once, with its last level.

The levels are kept where the partition seam says (``finalized_features_store``: a lone
broker's data directory, a ZooKeeper cluster's ``/feature`` znode, whose version is the
epoch) and advertised from then on (``FinalizedFeatures.publish``); a write that loses a race
with another broker reads the store again and decides again.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from ... import error_codes as codes
from ... import features
from ...cluster.features_store import FeatureEpochMismatch
from ...errors import SeglogError
from ...feature_updates import FeatureUpdate, plan_updates, upgrade_type_of_v0
from ...security.acl import CLUSTER_NAME
from ..authorization import AclOperation, ResourceType, authorize
from ..context import BrokerState, RequestContext
from ..finalized_features import FINALIZED_FEATURES_KEY, FinalizedFeatures
from ..registry import ApiHandler
from .admin_wire import NO_THROTTLE
from .data_topics import partition_seam, response_entities

__all__ = ["API_KEY", "HANDLERS", "start", "stop", "update_features"]

log = logging.getLogger("seglog.server")

API_KEY = 57
#: The key of the finalized features store in ``BrokerState.extensions``.
_STORE_KEY = "seglog.server.apis.admin_features.store"
#: Attempts at a write that loses races with other brokers.
_WRITE_ATTEMPTS_MAX = 5
_FAILED_PREFIX = ("The update failed for all features since the following feature had an "
                  "error: ")


async def start(state: BrokerState) -> None:
    """Load the finalized features the cluster holds (a new cluster's defaults when it
    holds none) and follow the changes other brokers make."""
    finalized: FinalizedFeatures = state.extensions[FINALIZED_FEATURES_KEY]
    store = state.cluster.finalized_features_store(finalized.publish)
    held = await store.load()
    if held is not None:
        finalized.publish(*held)
    state.extensions[_STORE_KEY] = store


async def stop(state: BrokerState) -> None:
    """Stop following the cluster's changes."""
    store = state.extensions.pop(_STORE_KEY, None)
    if store is not None:
        await store.stop()


def _requested(ctx: RequestContext, request: Any) -> list[FeatureUpdate]:
    by_name: dict[str, FeatureUpdate] = {}
    for entry in request.feature_updates:
        upgrade_type = upgrade_type_of_v0(bool(entry.allow_downgrade)) \
            if ctx.api_version == 0 else int(entry.upgrade_type)
        by_name.pop(entry.feature, None)  # a map: the last entry for a name wins
        by_name[entry.feature] = FeatureUpdate(entry.feature, int(entry.max_version_level),
                                               upgrade_type)
    return list(by_name.values())


async def update_features(ctx: RequestContext, request: Any) -> Any:
    """Answer an UpdateFeatures request (see the module docstring)."""
    response_cls, module = response_entities(API_KEY, ctx.api_version)

    def answer(error_code: int, message: str | None, with_results: bool = False) -> Any:
        values: dict[str, Any] = dict(throttle_time=NO_THROTTLE,
                                      error_code=ErrorCode(error_code), error_message=message)
        if ctx.api_version <= 1:
            values["results"] = tuple(module.UpdatableFeatureResult(
                feature=entry.feature, error_code=ErrorCode(codes.NONE), error_message=None)
                for entry in request.feature_updates) if with_results else ()
        return response_cls(**values)

    if not authorize(ctx, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return answer(codes.CLUSTER_AUTHORIZATION_FAILED,
                      "Request is not authorized to alter the cluster's features.")
    finalized: FinalizedFeatures = ctx.broker.extensions[FINALIZED_FEATURES_KEY]
    store = ctx.broker.extensions.get(_STORE_KEY)
    cluster = partition_seam(ctx.broker)
    controller_id = cluster.controller_id
    deciding = ctx.broker.node_id if controller_id is None else controller_id
    updates = _requested(ctx, request)
    validate_only = bool(getattr(request, "validate_only", False))
    for _attempt in range(_WRITE_ATTEMPTS_MAX):
        _epoch, levels = finalized.current()
        outcome = plan_updates(updates, levels, features.FEATURES, deciding)
        if outcome.error_code != codes.NONE:
            return answer(outcome.error_code, _FAILED_PREFIX + (outcome.message or ""))
        if validate_only or outcome.levels == levels:
            return answer(codes.NONE, None, with_results=True)
        if store is None:  # the broker is stopping
            return answer(codes.COORDINATOR_NOT_AVAILABLE, None)
        try:
            epoch = await store.write(outcome.levels, store.epoch)
        except FeatureEpochMismatch:
            held = await store.load()  # another broker wrote: decide again on its set
            if held is not None:
                finalized.publish(*held)
            continue
        except (SeglogError, OSError) as exc:
            log.warning("writing the finalized features failed: %s", exc)
            return answer(codes.UNKNOWN_SERVER_ERROR, _FAILED_PREFIX + str(exc))
        finalized.publish(epoch, outcome.levels)
        log.info("finalized features now %s (epoch %d)", outcome.levels, epoch)
        return answer(codes.NONE, None, with_results=True)
    return answer(codes.FEATURE_UPDATE_FAILED,
                  "The finalized features kept changing under this request; try again.")


HANDLERS: tuple[ApiHandler, ...] = (
    ApiHandler(API_KEY, 0, 2, update_features),
)
