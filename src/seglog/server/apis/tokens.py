"""CreateDelegationToken (38) v1-3, RenewDelegationToken (39) v1-2, ExpireDelegationToken
(40) v1-2 and DescribeDelegationToken (41) v1-3 (KIP-48), with the checks and answers of
Kafka 4.4 (``KafkaApis`` then ``DelegationTokenControlManager``):

- a request on a PLAINTEXT listener, from a token-authenticated principal or from an
  anonymous SSL client is DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (``allowTokenRequests``);
- creating a token for another owner needs CREATE_TOKENS on that USER (the ACL module's; no
  authorizer: allowed), a renewer that is not a ``User`` is INVALID_PRINCIPAL_TYPE;
- without ``delegation.token.secret.key``: DELEGATION_TOKEN_AUTH_DISABLED;
- renew/expire find the token by its HMAC (else DELEGATION_TOKEN_NOT_FOUND), need the owner or
  a renewer (else DELEGATION_TOKEN_OWNER_MISMATCH); renewing an expired token is
  DELEGATION_TOKEN_EXPIRED; a negative expiry period removes the token at once;
- describe lists the tokens of the owners asked for (all: null; none: an empty list) that the
  requester owns, requested or renews, or may DESCRIBE (the ACL module's; no authorizer: all).

The tokens themselves are :mod:`seglog.server.sasl.tokens`'s; the module's start hook opens
the store and hands the SASL module its SCRAM lookup (``tokenauth=true`` logins).
"""

from __future__ import annotations

import datetime
from typing import Any, Callable

from ... import error_codes as codes
from ..context import BrokerState, RequestContext
from ..principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from ..registry import ApiHandler
from ..sasl.tokens import ERROR_TIMESTAMP_MS, TokenInfo, TokenStore
from .admin_wire import NO_THROTTLE, make, response_classes
from .sasl import sasl_state

__all__ = ["AUTHORIZE_TOKEN_KEY", "HANDLERS", "start", "stop", "token_store"]

CREATE_KEY, RENEW_KEY, EXPIRE_KEY, DESCRIBE_KEY = 38, 39, 40, 41
#: The key under which the ACL module puts, in ``state.extensions``, its
#: ``authorize(ctx, operation, resource_type, name) -> bool`` (``CREATE_TOKENS`` on a
#: ``USER``, ``DESCRIBE`` on a ``DELEGATION_TOKEN``, ``DESCRIBE_TOKENS`` on a ``USER``).
#: Absent: no authorizer, everything is allowed.
AUTHORIZE_TOKEN_KEY = "authorize_tokens"


def token_store(state: BrokerState) -> TokenStore:
    """The broker's token store (made by :func:`start`)."""
    store: TokenStore = state.extensions[__name__]
    return store


async def start(state: BrokerState) -> None:
    """Open the token store (the data directory's file) and let SCRAM logins use it."""
    config = state.config
    store = TokenStore(
        state.store.path, secret=config["delegation.token.secret.key"],
        max_lifetime_ms=int(config["delegation.token.max.lifetime.ms"]),
        renew_ms=int(config["delegation.token.expiry.time.ms"]),
        sweep_interval_ms=int(config["delegation.token.expiry.check.interval.ms"]),
        now_ms=state.now_ms)
    # A cluster's seam keeps the tokens in ZooKeeper (Kafka 2.x's /delegation_token); a
    # lone broker's has none, and the data directory's file is used.
    provider = getattr(state.cluster, "delegation_token_znodes", None)
    if callable(provider):
        await store.open_znodes(provider(), state.run_blocking)
    else:
        await state.run_blocking(store.load)
    state.extensions[__name__] = store
    if store.enabled:
        sasl_state(state).token_lookup = store.lookup


async def stop(state: BrokerState) -> None:
    """Stop following the token notifications (a cluster)."""
    store = state.extensions.get(__name__)
    if store is not None:
        await store.close()


def _authorized(ctx: RequestContext, operation: str, resource_type: str, name: str) -> bool:
    check: Callable[[RequestContext, str, str, str], bool] | None = \
        ctx.broker.extensions.get(AUTHORIZE_TOKEN_KEY)
    return True if check is None else bool(check(ctx, operation, resource_type, name))


def _allow_token_requests(ctx: RequestContext) -> bool:
    """Kafka's ``allowTokenRequests``."""
    protocol = ctx.security.security_protocol
    return not (ctx.principal.token_authenticated or protocol == "PLAINTEXT"
                or (protocol == "SSL" and ctx.principal == ANONYMOUS))


def _at(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)


def _ms(value: Any) -> int:
    """A request's period (kio's timedelta) in ms."""
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    return int(value)


async def handle_create(ctx: RequestContext, request: Any) -> Any:
    """CreateDelegationToken (see the module docstring)."""
    response_cls, _ = response_classes(ctx.api_key, ctx.api_version)
    requester = ctx.principal
    owner_name = getattr(request, "owner_principal_name", None)
    owner = KafkaPrincipal(str(request.owner_principal_type), str(owner_name)) \
        if owner_name else requester.without_token()
    renewers = tuple(KafkaPrincipal(str(r.principal_type), str(r.principal_name))
                     for r in request.renewers)

    def answer(code: int, token: TokenInfo | None = None) -> Any:
        return make(response_cls, error_code=code, principal_type=owner.principal_type,
                    principal_name=owner.name,
                    token_requester_principal_type=requester.principal_type,
                    token_requester_principal_name=requester.name,
                    issue_timestamp=_at(token.issue_ms if token else ERROR_TIMESTAMP_MS),
                    expiry_timestamp=_at(token.expiry_ms if token else ERROR_TIMESTAMP_MS),
                    max_timestamp=_at(token.max_ms if token else ERROR_TIMESTAMP_MS),
                    token_id=token.token_id if token else "",
                    hmac=token.hmac if token else b"", throttle_time=NO_THROTTLE)

    if not _allow_token_requests(ctx):
        return answer(codes.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    if owner != requester.without_token() and not _authorized(ctx, "CREATE_TOKENS", "USER",
                                                              str(owner)):
        return answer(codes.DELEGATION_TOKEN_AUTHORIZATION_FAILED)
    if any(r.principal_type != USER_TYPE for r in renewers):
        return answer(codes.INVALID_PRINCIPAL_TYPE)
    store = token_store(ctx.broker)
    if not store.enabled:
        return answer(codes.DELEGATION_TOKEN_AUTH_DISABLED)
    token = await store.create(owner, requester, renewers, _ms(request.max_lifetime))
    return answer(codes.NONE, token)


async def _renew_or_expire(ctx: RequestContext, request: Any, *, renew: bool) -> Any:
    response_cls, _ = response_classes(ctx.api_key, ctx.api_version)

    def answer(code: int, expiry_ms: int = ERROR_TIMESTAMP_MS) -> Any:
        return make(response_cls, error_code=code, expiry_timestamp=_at(expiry_ms),
                    throttle_time=NO_THROTTLE)

    if not _allow_token_requests(ctx):
        return answer(codes.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    store = token_store(ctx.broker)
    if not store.enabled:
        return answer(codes.DELEGATION_TOKEN_AUTH_DISABLED)
    await store.swept()
    token = store.by_hmac(bytes(request.hmac))
    if token is None:
        return answer(codes.DELEGATION_TOKEN_NOT_FOUND)
    now = store.now_ms()
    if renew:
        if token.expired(now):
            return answer(codes.DELEGATION_TOKEN_EXPIRED)
        if not (token.owner == ctx.principal.without_token()
                or ctx.principal.without_token() in token.renewers):
            return answer(codes.DELEGATION_TOKEN_OWNER_MISMATCH)
        period_ms = _ms(request.renew_period)
        renew_ms = store.renew_ms if period_ms <= 0 else min(store.renew_ms, period_ms)
        expiry_ms = min(token.max_ms, now + renew_ms)
        await store.set_expiry(token, expiry_ms)
        return answer(codes.NONE, expiry_ms)
    if not (token.owner == ctx.principal.without_token()
            or ctx.principal.without_token() in token.renewers):
        return answer(codes.DELEGATION_TOKEN_OWNER_MISMATCH)
    period_ms = _ms(request.expiry_time_period)
    if period_ms < 0:
        await store.set_expiry(token, None)
        return answer(codes.NONE, now)
    if token.expired(now):
        return answer(codes.DELEGATION_TOKEN_EXPIRED)
    expiry_ms = min(token.max_ms, now + period_ms)
    await store.set_expiry(token, expiry_ms)
    return answer(codes.NONE, expiry_ms)


async def handle_renew(ctx: RequestContext, request: Any) -> Any:
    """RenewDelegationToken (see the module docstring)."""
    return await _renew_or_expire(ctx, request, renew=True)


async def handle_expire(ctx: RequestContext, request: Any) -> Any:
    """ExpireDelegationToken (see the module docstring)."""
    return await _renew_or_expire(ctx, request, renew=False)


async def handle_describe(ctx: RequestContext, request: Any) -> Any:
    """DescribeDelegationToken (see the module docstring)."""
    response_cls, module = response_classes(ctx.api_key, ctx.api_version)
    if not _allow_token_requests(ctx):
        return make(response_cls, error_code=codes.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
                    tokens=(), throttle_time=NO_THROTTLE)
    store = token_store(ctx.broker)
    if not store.enabled:
        return make(response_cls, error_code=codes.DELEGATION_TOKEN_AUTH_DISABLED, tokens=(),
                    throttle_time=NO_THROTTLE)
    await store.swept()
    owners = None if request.owners is None else [
        KafkaPrincipal(str(o.principal_type), str(o.principal_name)) for o in request.owners]
    requester = ctx.principal.without_token()
    tokens = []
    for token in store.tokens() if owners != [] else ():
        if owners is not None and not any(token.owner_or_renewer(o) for o in owners):
            continue
        if not (token.owner_or_renewer(requester)
                or _authorized(ctx, "DESCRIBE", "DELEGATION_TOKEN", token.token_id)
                or _authorized(ctx, "DESCRIBE_TOKENS", "USER", str(token.owner))):
            continue
        tokens.append(make(
            module.DescribedDelegationToken, principal_type=token.owner.principal_type,
            principal_name=token.owner.name,
            token_requester_principal_type=token.requester.principal_type,
            token_requester_principal_name=token.requester.name,
            issue_timestamp=token.issue_ms, expiry_timestamp=token.expiry_ms,
            max_timestamp=token.max_ms, token_id=token.token_id, hmac=token.hmac,
            renewers=tuple(make(module.DescribedDelegationTokenRenewer,
                                principal_type=r.principal_type, principal_name=r.name)
                           for r in token.renewers)))
    return make(response_cls, error_code=codes.NONE, tokens=tuple(tokens),
                throttle_time=NO_THROTTLE)


HANDLERS: tuple[ApiHandler, ...] = (
    ApiHandler(CREATE_KEY, 1, 3, handle_create),
    ApiHandler(RENEW_KEY, 1, 2, handle_renew),
    ApiHandler(EXPIRE_KEY, 1, 2, handle_expire),
    ApiHandler(DESCRIBE_KEY, 1, 3, handle_describe),
)
