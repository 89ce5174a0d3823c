"""Kafka's ACL vocabulary: resource types, pattern types, operations, permissions, and the
bindings and filters made of them (``org.apache.kafka.common.acl`` and
``org.apache.kafka.common.resource``), with Kafka's wire codes and its filter matching.

An :class:`AclBinding` is one rule: a resource pattern (type, name, LITERAL or PREFIXED; the
LITERAL name ``*`` matches every name) and an access control entry (principal, host,
operation, ALLOW or DENY). An :class:`AclBindingFilter` selects bindings for DescribeAcls and
DeleteAcls: ANY matches every value, a ``None`` name/principal/host matches every one, and the
pattern type MATCH selects every pattern that would match the named resource (Kafka's
``ResourcePatternFilter.matches``).

A leaf of :mod:`seglog.security`: values only.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["AclBinding", "AclBindingFilter", "AclOperation", "AclPermissionType",
           "CLUSTER_NAME", "PatternType", "ResourceType", "SUPPORTED_OPERATIONS",
           "WILDCARD_HOST", "WILDCARD_PRINCIPAL", "WILDCARD_RESOURCE", "binding_error",
           "filter_error"]

#: The one name of the CLUSTER resource (Kafka's ``CLUSTER_NAME``).
CLUSTER_NAME = "kafka-cluster"
#: The LITERAL resource name that matches every resource of its type.
WILDCARD_RESOURCE = "*"
#: The host that matches every client address.
WILDCARD_HOST = "*"
#: The principal that matches every principal (Kafka's ``WILDCARD_KAFKA_PRINCIPAL``).
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(enum.IntEnum):
    """Kafka's ``ResourceType`` codes."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    """Kafka's ``PatternType`` codes (ANY and MATCH are for filters only)."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    """Kafka's ``AclOperation`` codes (ANY is for filters only; ALL grants every operation)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(enum.IntEnum):
    """Kafka's ``AclPermissionType`` codes (ANY is for filters only)."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_Op = AclOperation
#: The operations each resource type supports (Kafka's ``AclEntry.supportedOperations``):
#: the bits of an ``authorized_operations`` field are taken from these.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (_Op.READ, _Op.WRITE, _Op.CREATE, _Op.DESCRIBE, _Op.DELETE, _Op.ALTER,
                         _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS),
    ResourceType.GROUP: (_Op.READ, _Op.DESCRIBE, _Op.DELETE, _Op.DESCRIBE_CONFIGS,
                         _Op.ALTER_CONFIGS),
    ResourceType.CLUSTER: (_Op.CREATE, _Op.CLUSTER_ACTION, _Op.DESCRIBE_CONFIGS,
                           _Op.ALTER_CONFIGS, _Op.IDEMPOTENT_WRITE, _Op.ALTER, _Op.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (_Op.DESCRIBE, _Op.WRITE),
    ResourceType.DELEGATION_TOKEN: (_Op.DESCRIBE,),
    ResourceType.USER: (_Op.CREATE_TOKENS, _Op.DESCRIBE_TOKENS),
}


def _enum_or_unknown(kind: type[enum.IntEnum], code: int) -> enum.IntEnum:
    """``kind(code)``, or its UNKNOWN member for a code Kafka does not define (as Kafka's
    ``fromCode``)."""
    try:
        return kind(code)
    except ValueError:
        return kind(0)


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: the resource pattern (``resource_type``, ``name``, ``pattern_type``: LITERAL
    or PREFIXED) and the entry (``principal`` as ``User:alice``, ``host``, ``operation``,
    ``permission``)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    @classmethod
    def from_codes(cls, resource_type: int, name: str, pattern_type: int, principal: str,
                   host: str, operation: int, permission: int) -> "AclBinding":
        """A binding from wire codes (unknown codes become the UNKNOWN members)."""
        return cls(_enum_or_unknown(ResourceType, resource_type),  # type: ignore[arg-type]
                   name, _enum_or_unknown(PatternType, pattern_type),  # type: ignore[arg-type]
                   principal, host,
                   _enum_or_unknown(AclOperation, operation),  # type: ignore[arg-type]
                   _enum_or_unknown(AclPermissionType, permission))  # type: ignore[arg-type]

    def to_json(self) -> dict[str, object]:
        """The binding as a JSON object (the data dir's ACL file)."""
        return {"resourceType": self.resource_type.name, "name": self.name,
                "patternType": self.pattern_type.name, "principal": self.principal,
                "host": self.host, "operation": self.operation.name,
                "permissionType": self.permission.name}

    @classmethod
    def from_json(cls, obj: object) -> "AclBinding":
        """The binding :meth:`to_json` wrote; ValueError (or KeyError/TypeError) on anything
        else."""
        if not isinstance(obj, dict):
            raise ValueError(f"an ACL must be a JSON object, not {obj!r}")
        fields = ("name", "principal", "host")
        if not all(isinstance(obj.get(key), str) for key in fields):
            raise ValueError(f"bad ACL {obj!r}")
        return cls(ResourceType[obj["resourceType"]], obj["name"],
                   PatternType[obj["patternType"]], obj["principal"], obj["host"],
                   AclOperation[obj["operation"]], AclPermissionType[obj["permissionType"]])


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """A filter over bindings (DescribeAcls, DeleteAcls): ANY types, ``None`` strings and the
    MATCH pattern type as Kafka's ``AclBindingFilter``."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    @classmethod
    def from_codes(cls, resource_type: int, name: str | None, pattern_type: int,
                   principal: str | None, host: str | None, operation: int,
                   permission: int) -> "AclBindingFilter":
        """A filter from wire codes (unknown codes become the UNKNOWN members)."""
        return cls(_enum_or_unknown(ResourceType, resource_type),  # type: ignore[arg-type]
                   name, _enum_or_unknown(PatternType, pattern_type),  # type: ignore[arg-type]
                   principal, host,
                   _enum_or_unknown(AclOperation, operation),  # type: ignore[arg-type]
                   _enum_or_unknown(AclPermissionType, permission))  # type: ignore[arg-type]

    def has_unknown(self) -> bool:
        """Whether any element is UNKNOWN (Kafka refuses such a request when parsing it)."""
        return ResourceType.UNKNOWN in (self.resource_type,) or \
            self.pattern_type is PatternType.UNKNOWN or \
            self.operation is AclOperation.UNKNOWN or \
            self.permission is AclPermissionType.UNKNOWN

    def matches(self, binding: AclBinding) -> bool:
        """Whether ``binding`` passes the filter (Kafka's ``AclBindingFilter.matches``)."""
        return self._matches_pattern(binding) and self._matches_entry(binding)

    def _matches_pattern(self, binding: AclBinding) -> bool:
        if self.resource_type is not ResourceType.ANY and \
                self.resource_type is not binding.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and \
                self.pattern_type is not binding.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, binding.pattern_type):
            return self.name == binding.name
        if binding.pattern_type is PatternType.LITERAL:
            return self.name == binding.name or binding.name == WILDCARD_RESOURCE
        if binding.pattern_type is PatternType.PREFIXED:
            return self.name.startswith(binding.name)
        return False

    def _matches_entry(self, binding: AclBinding) -> bool:
        if self.principal is not None and self.principal != binding.principal:
            return False
        if self.host is not None and self.host != binding.host:
            return False
        if self.operation is not AclOperation.ANY and self.operation is not binding.operation:
            return False
        return self.permission is AclPermissionType.ANY or self.permission is binding.permission


def binding_error(binding: AclBinding) -> str | None:
    """Why Kafka refuses to create ``binding`` (the INVALID_REQUEST message of its
    ``AclApis`` and ``AclControlManager.validateNewAcl``), or None when it is valid."""
    if binding.resource_type is ResourceType.CLUSTER and binding.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not binding.name:
        return "Invalid empty resource name"
    if binding.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {binding.resource_type.name}"
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {binding.pattern_type.name}"
    if binding.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {binding.operation.name}"
    if binding.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {binding.permission.name}"
    principal_type, sep, _ = binding.principal.partition(":")
    if not sep or not principal_type:
        return (f"Expected a string in format principalType:principalName but got "
                f"{binding.principal}")
    return None


def filter_error(acl_filter: AclBindingFilter) -> str | None:
    """Why Kafka refuses ``acl_filter`` in DeleteAcls (``AclControlManager.validateFilter``),
    or None."""
    if acl_filter.resource_type is ResourceType.UNKNOWN or \
            acl_filter.pattern_type is PatternType.UNKNOWN:
        return "Unknown patternFilter."
    if acl_filter.operation is AclOperation.UNKNOWN or \
            acl_filter.permission is AclPermissionType.UNKNOWN:
        return "Unknown entryFilter."
    return None
