"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51): SCRAM users managed
over the wire (KIP-554), with the answers of Kafka 4.4's ``ScramControlManager`` and
``ScramImage``.

AlterUserScramCredentials carries, per upsertion, the user, the mechanism (1 SCRAM-SHA-256,
2 SCRAM-SHA-512), the iteration count, the salt and the *salted* password (the client salts
it: ``kafka-configs --add-config 'SCRAM-SHA-256=[password=...]'`` and confluent-kafka's
``alter_user_scram_credentials`` do); the broker keeps StoredKey and ServerKey only. Per
user: an empty name is UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM,
fewer than 4096 or more than 16384 iterations UNACCEPTABLE_CREDENTIAL, a user named twice in
one request DUPLICATE_RESOURCE, deleting a credential that does not exist RESOURCE_NOT_FOUND.
The changes that pass are stored together (the data directory's file, or ZooKeeper's
``/config/users/<user>`` in a cluster) before the answer.

DescribeUserScramCredentials: every user with a credential when no user is named, else each
named user once: its mechanisms and iterations, RESOURCE_NOT_FOUND when it has none,
DUPLICATE_RESOURCE when named twice.

Authorization (Kafka: ALTER, resp. DESCRIBE, on the CLUSTER resource, else
CLUSTER_AUTHORIZATION_FAILED for the whole request) is the ACL module's: :func:`authorize`
is the seam it fills in (:data:`AUTHORIZE_CLUSTER_KEY`); until then every principal passes, as with Kafka's default of no
authorizer.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from ... import error_codes as codes
from ..context import RequestContext
from ..registry import ApiHandler
from ..sasl.credentials import Upsertion
from ...sasl.scram import MAX_ITERATIONS, credential_from_salted_password, mechanism_by_type
from .admin_wire import NO_THROTTLE, make, response_classes
from .sasl import sasl_state

__all__ = ["ALTER_USER_SCRAM_CREDENTIALS_KEY", "DESCRIBE_USER_SCRAM_CREDENTIALS_KEY",
           "AUTHORIZE_CLUSTER_KEY", "Authorize", "HANDLERS"]

log = logging.getLogger("seglog.server.security")

DESCRIBE_USER_SCRAM_CREDENTIALS_KEY = 50
ALTER_USER_SCRAM_CREDENTIALS_KEY = 51
#: ScramControlManager's and ScramImage's messages.
DUPLICATE_ALTER_MESSAGE = "A user credential cannot be altered twice in the same request"
DELETE_MISSING_MESSAGE = "Attempt to delete a user credential that does not exist"
DESCRIBE_MISSING_MESSAGE = "Attempt to describe a user credential that does not exist: "
DESCRIBE_DUPLICATE_MESSAGE = ("Cannot describe SCRAM credentials for the same user twice in a "
                              "single request: ")

#: The key under which the ACL module puts, in ``state.extensions``, its
#: ``authorize(ctx, operation) -> bool``: whether the request's principal may do
#: ``operation`` (``"ALTER"``, ``"DESCRIBE"``) on the CLUSTER resource (see the module
#: docstring). Absent: no authorizer, everyone may.
AUTHORIZE_CLUSTER_KEY = "authorize_cluster"
#: See :data:`AUTHORIZE_CLUSTER_KEY`.
Authorize = Callable[[RequestContext, str], bool]


def _authorized(ctx: RequestContext, operation: str) -> bool:
    check: Authorize | None = ctx.broker.extensions.get(AUTHORIZE_CLUSTER_KEY)
    return True if check is None else bool(check(ctx, operation))


def _check_name_and_mechanism(name: str, mechanism_type: int) -> tuple[int, str] | None:
    """ScramControlManager.validateScramUsernameAndMechanism."""
    if not name:
        return codes.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism_by_type(mechanism_type) is None:
        return codes.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


async def handle_alter(ctx: RequestContext, request: Any) -> Any:
    """AlterUserScramCredentials v0 (see the module docstring)."""
    response_cls, module = response_classes(ctx.api_key, ctx.api_version)
    result_cls = module.AlterUserScramCredentialsResult

    def result(user: str, code: int, message: str | None) -> Any:
        return make(result_cls, user=user, error_code=code, error_message=message)

    if not _authorized(ctx, "ALTER"):
        users = dict.fromkeys([d.name for d in request.deletions]
                              + [u.name for u in request.upsertions])
        return make(response_cls, throttle_time=NO_THROTTLE, results=tuple(
            result(user, codes.CLUSTER_AUTHORIZATION_FAILED, None) for user in users))
    store = sasl_state(ctx.broker).credentials
    assert store is not None
    errors: dict[str, tuple[int, str]] = {}
    deletions: dict[str, Any] = {}
    upsertions: dict[str, Any] = {}
    for deletion in request.deletions:
        name = str(deletion.name)
        if name in errors:
            continue
        if deletions.pop(name, None) is not None:
            errors[name] = (codes.DUPLICATE_RESOURCE, DUPLICATE_ALTER_MESSAGE)
            continue
        problem = _check_name_and_mechanism(name, int(deletion.mechanism))
        mechanism = mechanism_by_type(int(deletion.mechanism))
        if problem is None and (mechanism is None or store.get(name, mechanism) is None):
            problem = (codes.RESOURCE_NOT_FOUND, DELETE_MISSING_MESSAGE)
        if problem is not None:
            errors[name] = problem
        else:
            deletions[name] = deletion
    for upsertion in request.upsertions:
        name = str(upsertion.name)
        if name in errors:
            continue
        if deletions.pop(name, None) is not None or upsertions.pop(name, None) is not None:
            errors[name] = (codes.DUPLICATE_RESOURCE, DUPLICATE_ALTER_MESSAGE)
            continue
        problem = _check_name_and_mechanism(name, int(upsertion.mechanism))
        mechanism = mechanism_by_type(int(upsertion.mechanism))
        if problem is None and mechanism is not None:
            if int(upsertion.iterations) < mechanism.min_iterations:
                problem = (codes.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            elif int(upsertion.iterations) > MAX_ITERATIONS:
                problem = (codes.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        if problem is not None:
            errors[name] = problem
        else:
            upsertions[name] = upsertion
    changes: list[Upsertion] = []
    for name, deletion in deletions.items():
        mechanism = mechanism_by_type(int(deletion.mechanism))
        assert mechanism is not None
        changes.append((name, mechanism.name, None))
    for name, upsertion in upsertions.items():
        mechanism = mechanism_by_type(int(upsertion.mechanism))
        assert mechanism is not None
        changes.append((name, mechanism.name, credential_from_salted_password(
            mechanism, salt=bytes(upsertion.salt),
            salted_password=bytes(upsertion.salted_password),
            iterations=int(upsertion.iterations))))
    results = []
    if changes:
        try:
            await store.alter(changes)
        except Exception as exc:  # noqa: BLE001 - storage failed: nothing was changed
            log.error("storing SCRAM credentials failed: %s", exc)
            for name in [*deletions, *upsertions]:
                errors[name] = (codes.UNKNOWN_SERVER_ERROR, f"storing the credential failed: "
                                f"{type(exc).__name__}")
            deletions, upsertions = {}, {}
    results += [result(name, codes.NONE, None) for name in [*deletions, *upsertions]]
    results += [result(name, code, message) for name, (code, message) in errors.items()]
    return make(response_cls, throttle_time=NO_THROTTLE, results=tuple(results))


async def handle_describe(ctx: RequestContext, request: Any) -> Any:
    """DescribeUserScramCredentials v0 (see the module docstring)."""
    response_cls, module = response_classes(ctx.api_key, ctx.api_version)
    result_cls, info_cls = module.DescribeUserScramCredentialsResult, module.CredentialInfo
    if not _authorized(ctx, "DESCRIBE"):
        return make(response_cls, throttle_time=NO_THROTTLE,
                    error_code=codes.CLUSTER_AUTHORIZATION_FAILED,
                    error_message=codes.message(codes.CLUSTER_AUTHORIZATION_FAILED), results=())
    store = sasl_state(ctx.broker).credentials
    assert store is not None
    users = store.users()
    named = [str(u.name) for u in request.users] if request.users else None
    counts: dict[str, int] = {}
    for name in named if named is not None else sorted(users):
        counts[name] = counts.get(name, 0) + 1
    results = []
    for name, count in counts.items():
        if count > 1:
            results.append(make(result_cls, user=name, error_code=codes.DUPLICATE_RESOURCE,
                                error_message=DESCRIBE_DUPLICATE_MESSAGE + name,
                                credential_infos=()))
            continue
        credentials = users.get(name)
        if not credentials:
            results.append(make(result_cls, user=name, error_code=codes.RESOURCE_NOT_FOUND,
                                error_message=DESCRIBE_MISSING_MESSAGE + name,
                                credential_infos=()))
            continue
        infos = []
        for mechanism_name, credential in sorted(credentials.items()):
            mechanism = next(m for t in (1, 2) if (m := mechanism_by_type(t)) is not None
                             and m.name == mechanism_name)
            infos.append(make(info_cls, mechanism=mechanism.type,
                              iterations=credential.iterations))
        # Kafka leaves a success's message at its default, "" (not null).
        results.append(make(result_cls, user=name, error_code=codes.NONE, error_message="",
                            credential_infos=tuple(infos)))
    return make(response_cls, throttle_time=NO_THROTTLE, error_code=codes.NONE,
                error_message=None, results=tuple(results))


HANDLERS: tuple[ApiHandler, ...] = (
    ApiHandler(DESCRIBE_USER_SCRAM_CREDENTIALS_KEY, 0, 0, handle_describe),
    ApiHandler(ALTER_USER_SCRAM_CREDENTIALS_KEY, 0, 0, handle_alter),
)
