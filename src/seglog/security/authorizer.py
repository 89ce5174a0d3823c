"""The ACL authorizer: Kafka's ``StandardAuthorizer`` rules over a set of :class:`AclBinding`.

:meth:`Authorizer.authorize` answers whether a principal, connected from a host, may perform
an operation on one named resource, exactly as Kafka 4.4's ``StandardAuthorizerData``:

- a principal named in ``super.users`` may do everything;
- the ACLs that apply to a resource are those of its type whose pattern matches its name: the
  LITERAL name itself, the LITERAL wildcard ``*``, and every PREFIXED name the resource name
  starts with;
- of those, an entry applies to the request when its principal is the caller's or ``User:*``,
  its host the caller's address or ``*``, and its operation the one asked or ALL; an ALLOW of
  READ, WRITE, DELETE or ALTER also allows DESCRIBE, and an ALLOW of ALTER_CONFIGS also
  DESCRIBE_CONFIGS (a DENY denies its own operation only, or ALL);
- any applying DENY wins; else any applying ALLOW allows; else, when the resource has no ACL
  at all, ``allow.everyone.if.no.acl.found`` decides; else it is denied.

:meth:`Authorizer.authorize_by_resource_type` is Kafka's ``Authorizer.authorizeByResourceType``
(does the caller hold ``operation`` on *some* resource of a type; InitProducerId without a
transactional id asks it for WRITE on topics).

The set of bindings is replaced or changed by its owner (the broker's ACL store, which persists
it); reads see a consistent snapshot. Loads nothing of the server.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from .acl import (SUPPORTED_OPERATIONS, WILDCARD_HOST, WILDCARD_PRINCIPAL, WILDCARD_RESOURCE,
                  AclBinding, AclBindingFilter, AclOperation, AclPermissionType, PatternType,
                  ResourceType)

__all__ = ["Authorizer", "parse_super_users"]

_IMPLIES_DESCRIBE = frozenset((AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                               AclOperation.DELETE, AclOperation.ALTER))
_IMPLIES_DESCRIBE_CONFIGS = frozenset((AclOperation.DESCRIBE_CONFIGS,
                                       AclOperation.ALTER_CONFIGS))

#: ``{(resource type, pattern type, name): bindings}``: the ACLs grouped by resource pattern.
_Index = dict[tuple[ResourceType, PatternType, str], tuple[AclBinding, ...]]


def parse_super_users(value: str | None) -> frozenset[str]:
    """``super.users`` (``User:admin;User:ops``) as a set of principals, as Kafka splits it
    (on ``;``, trimmed, empty parts dropped)."""
    if not value:
        return frozenset()
    return frozenset(part.strip() for part in value.split(";") if part.strip())


class Authorizer:
    """ACLs and the decision over them (module docstring): ``super_users`` (principals as
    ``User:alice``), ``allow_if_no_acl`` (``allow.everyone.if.no.acl.found``) and the
    initial ``bindings``."""

    def __init__(self, super_users: frozenset[str], allow_if_no_acl: bool,
                 bindings: Iterable[AclBinding] = ()):
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._bindings: frozenset[AclBinding] = frozenset()
        self._index: _Index = {}
        self.replace(bindings)

    # -- the set of ACLs -------------------------------------------------------------------

    @property
    def bindings(self) -> frozenset[AclBinding]:
        """Every ACL held."""
        return self._bindings

    def replace(self, bindings: Iterable[AclBinding]) -> None:
        """Hold exactly ``bindings`` from now on (a reload, a change seen in ZooKeeper)."""
        bindings = frozenset(bindings)
        grouped: dict[tuple[ResourceType, PatternType, str], list[AclBinding]] = {}
        for binding in bindings:
            key = (binding.resource_type, binding.pattern_type, binding.name)
            grouped.setdefault(key, []).append(binding)
        self._index = {key: tuple(group) for key, group in grouped.items()}
        self._bindings = bindings

    def acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """The ACLs ``acl_filter`` matches, in a stable order."""
        return sorted((b for b in self._bindings if acl_filter.matches(b)), key=_sort_key)

    def with_removed(self, filters: Sequence[AclBindingFilter]
                     ) -> tuple[frozenset[AclBinding], list[list[AclBinding]]]:
        """The set of ACLs without those any of ``filters`` match, and per filter the ACLs it
        matched (not applied: the broker's ACL store saves the change first, then
        :meth:`replace` holds it)."""
        matched = [self.acls(acl_filter) for acl_filter in filters]
        removed = frozenset(b for group in matched for b in group)
        return self._bindings - removed, matched

    # -- decisions -------------------------------------------------------------------------

    def is_super_user(self, principal: str) -> bool:
        """Whether ``principal`` is named in ``super.users``."""
        return principal in self.super_users

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        """Whether ``principal`` connected from ``host`` may perform ``operation`` on the
        resource ``resource_type``/``name`` (module docstring)."""
        if principal in self.super_users:
            return True
        allowed = False
        has_resource_acls = False
        for binding in self._applicable(resource_type, name):
            has_resource_acls = True
            result = _entry_result(binding, principal, host, operation)
            if result is AclPermissionType.DENY:
                return False
            if result is AclPermissionType.ALLOW:
                allowed = True
        if allowed:
            return True
        return self.allow_if_no_acl and not has_resource_acls

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType,
                              name: str) -> int:
        """The bit field of the operations of ``resource_type`` the caller may perform on
        ``name`` (Kafka's ``AuthHelper.authorizedOperations``: bit ``code`` set)."""
        bits = 0
        for operation in SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << int(operation)
        return bits

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Whether the caller may perform ``operation`` on some resource of
        ``resource_type`` (Kafka's default ``Authorizer.authorizeByResourceType``)."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny: dict[PatternType, set[str]] = {PatternType.LITERAL: set(),
                                             PatternType.PREFIXED: set()}
        allow: dict[PatternType, set[str]] = {PatternType.LITERAL: set(),
                                              PatternType.PREFIXED: set()}
        for binding in self._bindings:
            if binding.resource_type is not resource_type:
                continue
            if binding.host not in (host, WILDCARD_HOST):
                continue
            if binding.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if binding.operation not in (operation, AclOperation.ALL):
                continue
            if binding.permission is AclPermissionType.DENY:
                if binding.pattern_type is PatternType.LITERAL and \
                        binding.name == WILDCARD_RESOURCE:
                    return False
                deny[binding.pattern_type].add(binding.name)
            elif binding.permission is AclPermissionType.ALLOW:
                if binding.pattern_type is PatternType.LITERAL and \
                        binding.name == WILDCARD_RESOURCE:
                    return True
                allow[binding.pattern_type].add(binding.name)
        for pattern_type, names in allow.items():
            for name in names:
                if pattern_type is PatternType.LITERAL and name in deny[PatternType.LITERAL]:
                    continue
                if not any(name[:end] in deny[PatternType.PREFIXED]
                           for end in range(1, len(name) + 1)):
                    return True
        return False

    def _applicable(self, resource_type: ResourceType, name: str) -> Iterable[AclBinding]:
        """The ACLs whose pattern matches ``resource_type``/``name``."""
        index = self._index
        yield from index.get((resource_type, PatternType.LITERAL, name), ())
        if name != WILDCARD_RESOURCE:
            yield from index.get((resource_type, PatternType.LITERAL, WILDCARD_RESOURCE), ())
        for end in range(len(name) + 1):
            yield from index.get((resource_type, PatternType.PREFIXED, name[:end]), ())


def _entry_result(binding: AclBinding, principal: str, host: str,
                  operation: AclOperation) -> AclPermissionType | None:
    """ALLOW or DENY when ``binding``'s entry applies to the request, else None (Kafka's
    ``StandardAuthorizerData.findResult``)."""
    if binding.principal != principal and binding.principal != WILDCARD_PRINCIPAL:
        return None
    if binding.host != WILDCARD_HOST and binding.host != host:
        return None
    if binding.operation is not AclOperation.ALL:
        if binding.permission is AclPermissionType.ALLOW:
            if operation is AclOperation.DESCRIBE:
                if binding.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif operation is AclOperation.DESCRIBE_CONFIGS:
                if binding.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif operation is not binding.operation:
                return None
        elif operation is not binding.operation:
            return None
    return binding.permission


def _sort_key(binding: AclBinding) -> tuple[int, str, int, str, str, int, int]:
    return (binding.resource_type, binding.name, binding.pattern_type, binding.principal,
            binding.host, binding.operation, binding.permission)
