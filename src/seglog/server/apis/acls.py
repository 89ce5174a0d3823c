"""CreateAcls, DescribeAcls, DeleteAcls (Kafka's ``AclApis``) and the broker's authorizer.

The ``start`` hook makes the :class:`~seglog.security.authorizer.Authorizer` when
``authorizer.class.name`` names it (``super.users``, ``allow.everyone.if.no.acl.found``) and
loads the ACLs from the store the partition seam gives (``PartitionSeam.acl_store``: a lone
broker's data directory, :mod:`seglog.security.acl_file`; a cluster's ZooKeeper,
:mod:`seglog.cluster.acl_changes`, whose changes made through other brokers it then follows);
the handlers of every API ask it through :mod:`seglog.server.authorization`. Without an
authorizer the three APIs answer SECURITY_DISABLED, as Kafka's.

As Kafka: DescribeAcls needs DESCRIBE on the cluster, CreateAcls and DeleteAcls ALTER
(CLUSTER_AUTHORIZATION_FAILED for the whole request otherwise); a creation with a bad element
is INVALID_REQUEST with Kafka's message while the others are created; a filter-only value
(ANY, MATCH) in a creation fails the whole request with UNKNOWN_SERVER_ERROR (Kafka's
constructors throw); an UNKNOWN element or a null array is refused when the request is read
(the connection is closed, as Kafka's request parser does). Changes are saved durably before they are answered and applied; they
are serialized per broker.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Iterable

from ... import error_codes as codes
from ...security.acl import (AclBinding, AclBindingFilter, AclPermissionType, PatternType,
                             ResourceType, binding_error, filter_error)
from ...security.authorizer import Authorizer, parse_super_users
from ..authorization import AUTHORIZER_KEY, AclOperation, authorize_cluster, authorizer_of
from ..context import BrokerState, CloseConnection, RequestContext
from ..registry import ApiHandler
from .admin_wire import make, response_classes

__all__ = ["CREATE_ACLS_KEY", "DELETE_ACLS_KEY", "DESCRIBE_ACLS_KEY", "HANDLERS", "start",
           "stop"]

log = logging.getLogger("seglog.server.acls")

DESCRIBE_ACLS_KEY = 29
CREATE_ACLS_KEY = 30
DELETE_ACLS_KEY = 31
#: Kafka 4.4's version range of each of the three APIs.
VERSION_MIN, VERSION_MAX = 1, 3

_LOCK_KEY = "seglog.server.apis.acls.lock"
_STORE_KEY = "seglog.server.apis.acls.store"
_CREATE_DISABLED = "No Authorizer is configured."
_DESCRIBE_DISABLED = "No Authorizer is configured on the broker"


def _not_authorized(ctx: RequestContext) -> str:
    # Kafka's ClusterAuthorizationException text names the request; ours names its API.
    return f"Request {ctx.api_key}/v{ctx.api_version} is not authorized."


async def start(state: BrokerState) -> None:
    """Make the authorizer named by ``authorizer.class.name`` (none when empty) and load the
    ACLs: a lone broker's from its data directory, a cluster member's from ZooKeeper (then
    kept up to date with every change made through any broker)."""
    class_name = state.config.get("authorizer.class.name") or ""
    if not class_name:
        state.extensions[AUTHORIZER_KEY] = None
        return
    authorizer = Authorizer(parse_super_users(state.config.get("super.users")),
                            bool(state.config.get("allow.everyone.if.no.acl.found")))
    store = state.cluster.acl_store(authorizer.replace)
    authorizer.replace(await store.load())
    state.extensions[_STORE_KEY] = store
    state.extensions[AUTHORIZER_KEY] = authorizer
    state.extensions[_LOCK_KEY] = asyncio.Lock()
    log.info("authorizer %s: %d ACLs, super users %s", class_name, len(authorizer.bindings),
             sorted(authorizer.super_users))


async def stop(state: BrokerState) -> None:
    """Drop the authorizer (and stop following ZooKeeper's changes)."""
    state.extensions.pop(AUTHORIZER_KEY, None)
    state.extensions.pop(_LOCK_KEY, None)
    store = state.extensions.pop(_STORE_KEY, None)
    if store is not None:
        await store.stop()


async def _apply(state: BrokerState, authorizer: Authorizer, added: Iterable[AclBinding],
                 removed: Iterable[AclBinding]) -> None:
    """Save the change durably (file or ZooKeeper), then hold the result."""
    authorizer.replace(await state.extensions[_STORE_KEY].apply(added, removed))


def _filter(entity: Any, version: int) -> AclBindingFilter:
    acl_filter = AclBindingFilter.from_codes(
        entity.resource_type_filter, entity.resource_name_filter, entity.pattern_type_filter,
        entity.principal_filter, entity.host_filter, entity.operation, entity.permission_type)
    if acl_filter.has_unknown():
        # Kafka's DescribeAclsRequest / DeleteAclsRequest refuse this while parsing.
        raise CloseConnection(f"ACL filter with UNKNOWN elements: {acl_filter}")
    return acl_filter


def _unknown_element(binding: AclBinding) -> bool:
    return 0 in (binding.resource_type, binding.pattern_type, binding.operation,
                 binding.permission)


def _filter_only_value(binding: AclBinding) -> bool:
    return binding.resource_type is ResourceType.ANY or \
        binding.pattern_type in (PatternType.ANY, PatternType.MATCH) or \
        binding.operation is AclOperation.ANY or binding.permission is AclPermissionType.ANY


async def handle_describe_acls(ctx: RequestContext, request: Any) -> Any:
    """DescribeAcls: the ACLs matching the filter, grouped by resource pattern."""
    response, module = response_classes(DESCRIBE_ACLS_KEY, ctx.api_version)
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return make(response, throttle_time=0, error_code=codes.CLUSTER_AUTHORIZATION_FAILED,
                    error_message=_not_authorized(ctx), resources=())
    authorizer = authorizer_of(ctx.broker)
    if authorizer is None:
        return make(response, throttle_time=0, error_code=codes.SECURITY_DISABLED,
                    error_message=_DESCRIBE_DISABLED, resources=())
    acl_filter = _filter(request, ctx.api_version)
    grouped: dict[tuple[int, str, int], list[Any]] = {}
    for binding in authorizer.acls(acl_filter):
        key = (int(binding.resource_type), binding.name, int(binding.pattern_type))
        grouped.setdefault(key, []).append(make(
            module.AclDescription, principal=binding.principal, host=binding.host,
            operation=int(binding.operation), permission_type=int(binding.permission)))
    resources = tuple(make(module.DescribeAclsResource, resource_type=rtype,
                           resource_name=name, pattern_type=ptype, acls=tuple(acls))
                      for (rtype, name, ptype), acls in grouped.items())
    return make(response, throttle_time=0, error_code=codes.NONE, error_message=None,
                resources=resources)


async def handle_create_acls(ctx: RequestContext, request: Any) -> Any:
    """CreateAcls: each valid creation is added (and saved) and answered NONE; each invalid
    one INVALID_REQUEST with Kafka's message."""
    response, module = response_classes(CREATE_ACLS_KEY, ctx.api_version)
    if request.creations is None:
        raise CloseConnection("CreateAcls with a null creations array")  # Kafka's parser

    def results(code: int, message: str | None) -> Any:
        return make(response, throttle_time=0, results=tuple(
            make(module.AclCreationResult, error_code=code, error_message=message)
            for _ in request.creations))

    if not authorize_cluster(ctx, AclOperation.ALTER):
        return results(codes.CLUSTER_AUTHORIZATION_FAILED, _not_authorized(ctx))
    authorizer = authorizer_of(ctx.broker)
    if authorizer is None:
        return results(codes.SECURITY_DISABLED, _CREATE_DISABLED)
    bindings = [AclBinding.from_codes(
        c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
        c.operation, c.permission_type) for c in request.creations]
    if any(_unknown_element(b) for b in bindings):
        # Kafka's CreateAclsRequest refuses this while parsing.
        raise CloseConnection("CreateAcls with UNKNOWN elements")
    if any(_filter_only_value(b) for b in bindings):
        # Kafka's ResourcePattern / AccessControlEntry constructors throw on a filter-only
        # value (ANY, MATCH): the whole request fails as an unexpected error.
        return results(codes.UNKNOWN_SERVER_ERROR, None)
    answers: list[Any] = []
    valid: list[AclBinding] = []
    for binding in bindings:
        why = binding_error(binding)
        if why is None:
            valid.append(binding)
            # Kafka's answer of a created ACL carries an empty message, not null.
            answers.append(make(module.AclCreationResult, error_code=codes.NONE,
                                error_message=""))
        else:
            answers.append(make(module.AclCreationResult, error_code=codes.INVALID_REQUEST,
                                error_message=why))
    if valid:
        async with ctx.broker.extensions[_LOCK_KEY]:
            await _apply(ctx.broker, authorizer, valid, ())
    return make(response, throttle_time=0, results=tuple(answers))


async def handle_delete_acls(ctx: RequestContext, request: Any) -> Any:
    """DeleteAcls: per filter, the ACLs it matched (and removed)."""
    response, module = response_classes(DELETE_ACLS_KEY, ctx.api_version)
    if request.filters is None:
        raise CloseConnection("DeleteAcls with a null filters array")  # Kafka's parser

    def results(code: int, message: str | None) -> Any:
        return make(response, throttle_time=0, filter_results=tuple(
            make(module.DeleteAclsFilterResult, error_code=code, error_message=message,
                 matching_acls=()) for _ in request.filters))

    if not authorize_cluster(ctx, AclOperation.ALTER):
        return results(codes.CLUSTER_AUTHORIZATION_FAILED, _not_authorized(ctx))
    authorizer = authorizer_of(ctx.broker)
    if authorizer is None:
        return results(codes.SECURITY_DISABLED, _CREATE_DISABLED)
    filters = [_filter(entity, ctx.api_version) for entity in request.filters]
    async with ctx.broker.extensions[_LOCK_KEY]:
        valid = [f for f in filters if filter_error(f) is None]
        remaining, matched = authorizer.with_removed(valid)
        if remaining != authorizer.bindings:
            await _apply(ctx.broker, authorizer, (), authorizer.bindings - remaining)
    matched_iter = iter(matched)
    answers = []
    for acl_filter in filters:
        why = filter_error(acl_filter)
        if why is not None:
            answers.append(make(module.DeleteAclsFilterResult,
                                error_code=codes.INVALID_REQUEST, error_message=why,
                                matching_acls=()))
            continue
        answers.append(make(module.DeleteAclsFilterResult, error_code=codes.NONE,
                            error_message=None, matching_acls=tuple(
            make(module.DeleteAclsMatchingAcl, error_code=codes.NONE, error_message=None,
                 resource_type=int(b.resource_type), resource_name=b.name,
                 pattern_type=int(b.pattern_type), principal=b.principal, host=b.host,
                 operation=int(b.operation), permission_type=int(b.permission))
            for b in next(matched_iter))))
    return make(response, throttle_time=0, filter_results=tuple(answers))


HANDLERS: tuple[ApiHandler, ...] = (
    ApiHandler(DESCRIBE_ACLS_KEY, VERSION_MIN, VERSION_MAX, handle_describe_acls),
    ApiHandler(CREATE_ACLS_KEY, VERSION_MIN, VERSION_MAX, handle_create_acls),
    ApiHandler(DELETE_ACLS_KEY, VERSION_MIN, VERSION_MAX, handle_delete_acls),
)
