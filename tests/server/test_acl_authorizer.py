"""The authorizer's decisions, case by case, as Kafka's ``StandardAuthorizerData`` makes them
(its ``StandardAuthorizerTest`` cases: DENY wins, the implied DESCRIBE and DESCRIBE_CONFIGS,
prefixes, the ``*`` wildcard, ``User:*``, hosts, super users, the no-ACL default), the filter
matching of DescribeAcls/DeleteAcls, the ACL file and the config checks."""

from __future__ import annotations

import json

import pytest

from seglog.errors import CorruptCheckpointError, InvalidConfigError
from seglog.security.acl import (AclBinding, AclBindingFilter, AclOperation as Op,
                                 AclPermissionType as Perm, PatternType as Pat,
                                 ResourceType as Res, binding_error)
from seglog.security.acl_file import ACLS_FILE, load_acls, save_acls
from seglog.security.authorizer import Authorizer, parse_super_users
from seglog.server.config import BrokerConfig

ALICE, BOB = "User:alice", "User:bob"
HOST = "127.0.0.1"


def acl(name, op, perm=Perm.ALLOW, principal=ALICE, res=Res.TOPIC, pat=Pat.LITERAL,
        host="*"):
    return AclBinding(res, name, pat, principal, host, op, perm)


def allowed(authorizer, op, name, principal=ALICE, res=Res.TOPIC, host=HOST):
    return authorizer.authorize(principal, host, op, res, name)


def test_literal_allow_only_its_operation_and_its_name():
    a = Authorizer(frozenset(), False, [acl("t", Op.READ)])
    assert allowed(a, Op.READ, "t")
    assert not allowed(a, Op.WRITE, "t")
    assert not allowed(a, Op.READ, "t2")
    assert not allowed(a, Op.READ, "t", principal=BOB)


def test_read_write_delete_alter_imply_describe_and_alter_configs_describe_configs():
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert allowed(Authorizer(frozenset(), False, [acl("t", op)]), Op.DESCRIBE, "t"), op
    for op in (Op.CREATE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS):
        assert not allowed(Authorizer(frozenset(), False, [acl("t", op)]), Op.DESCRIBE, "t")
    a = Authorizer(frozenset(), False, [acl("t", Op.ALTER_CONFIGS)])
    assert allowed(a, Op.DESCRIBE_CONFIGS, "t")
    assert not allowed(Authorizer(frozenset(), False, [acl("t", Op.ALTER)]),
                       Op.DESCRIBE_CONFIGS, "t")


def test_a_deny_denies_only_its_own_operation_or_all():
    a = Authorizer(frozenset(), False, [acl("t", Op.ALL), acl("t", Op.READ, Perm.DENY)])
    assert not allowed(a, Op.READ, "t")
    assert allowed(a, Op.DESCRIBE, "t")  # DENY READ does not deny the DESCRIBE it implies
    a = Authorizer(frozenset(), False, [acl("t", Op.ALL), acl("t", Op.ALL, Perm.DENY)])
    assert not allowed(a, Op.DESCRIBE, "t")


def test_deny_beats_a_prefixed_allow_and_prefixes_match_by_start():
    a = Authorizer(frozenset(), False, [acl("pre-", Op.WRITE, pat=Pat.PREFIXED),
                                        acl("pre-secret", Op.WRITE, Perm.DENY)])
    assert allowed(a, Op.WRITE, "pre-x")
    assert allowed(a, Op.WRITE, "pre-")
    assert not allowed(a, Op.WRITE, "pre-secret")
    assert allowed(a, Op.WRITE, "pre-secret2")  # a LITERAL deny is that name only
    assert not allowed(a, Op.WRITE, "pr")
    a = Authorizer(frozenset(), False, [acl("t", Op.WRITE),
                                        acl("", Op.WRITE, Perm.DENY, pat=Pat.PREFIXED)])
    assert not allowed(a, Op.WRITE, "t")  # the empty prefix matches every name


def test_wildcard_resource_and_wildcard_principal_and_hosts():
    a = Authorizer(frozenset(), False, [acl("*", Op.READ, principal="User:*")])
    assert allowed(a, Op.READ, "anything", principal=BOB)
    a = Authorizer(frozenset(), False, [acl("*", Op.READ), acl("t", Op.READ, Perm.DENY)])
    assert allowed(a, Op.READ, "u") and not allowed(a, Op.READ, "t")
    a = Authorizer(frozenset(), False, [acl("t", Op.READ, host="10.0.0.1")])
    assert allowed(a, Op.READ, "t", host="10.0.0.1")
    assert not allowed(a, Op.READ, "t", host=HOST)
    # PREFIXED "*" is a prefix like any other, not a wildcard.
    a = Authorizer(frozenset(), False, [acl("*", Op.READ, pat=Pat.PREFIXED)])
    assert not allowed(a, Op.READ, "t") and allowed(a, Op.READ, "*t")


def test_super_users_pass_even_a_deny_and_the_no_acl_default():
    a = Authorizer(parse_super_users(" User:admin ; User:ops;"), False,
                   [acl("t", Op.ALL, Perm.DENY, principal="User:*")])
    assert a.super_users == {"User:admin", "User:ops"}
    assert allowed(a, Op.READ, "t", principal="User:admin")
    assert not allowed(a, Op.READ, "t")
    assert not allowed(a, Op.READ, "no-acls")  # allow.everyone.if.no.acl.found=false
    everyone = Authorizer(frozenset(), True, [acl("t", Op.READ, principal=BOB)])
    assert allowed(everyone, Op.READ, "no-acls")
    # Any ACL on the resource, for anyone, turns the default off for it.
    assert not allowed(everyone, Op.READ, "t")
    assert allowed(everyone, Op.READ, "t", res=Res.GROUP)  # a group "t" has none


def test_authorize_by_resource_type_as_kafkas_default():
    a = Authorizer(frozenset(), False, [acl("pre-", Op.WRITE, pat=Pat.PREFIXED)])
    assert a.authorize_by_resource_type(ALICE, HOST, Op.WRITE, Res.TOPIC)
    assert not a.authorize_by_resource_type(BOB, HOST, Op.WRITE, Res.TOPIC)
    # A prefixed deny that dominates every allow.
    a = Authorizer(frozenset(), False, [acl("pre-x", Op.WRITE),
                                        acl("pre", Op.WRITE, Perm.DENY, pat=Pat.PREFIXED)])
    assert not a.authorize_by_resource_type(ALICE, HOST, Op.WRITE, Res.TOPIC)
    a = Authorizer(frozenset(), False, [acl("*", Op.WRITE, Perm.DENY), acl("t", Op.WRITE)])
    assert not a.authorize_by_resource_type(ALICE, HOST, Op.WRITE, Res.TOPIC)


def test_authorized_operations_bits():
    a = Authorizer(frozenset(), False, [acl("t", Op.READ)])
    bits = a.authorized_operations(ALICE, HOST, Res.TOPIC, "t")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)


def test_filters_match_as_kafkas_acl_binding_filter():
    lit = acl("foo", Op.READ)
    pre = acl("fo", Op.READ, pat=Pat.PREFIXED)
    star = acl("*", Op.READ)
    other = acl("bar", Op.WRITE, Perm.DENY, principal=BOB)

    def f(name=None, pat=Pat.ANY, res=Res.ANY, principal=None, host=None, op=Op.ANY,
          perm=Perm.ANY):
        return AclBindingFilter(res, name, pat, principal, host, op, perm)

    everything = [lit, pre, star, other]
    assert [b for b in everything if f().matches(b)] == everything
    assert [b for b in everything if f("foo", Pat.MATCH).matches(b)] == [lit, pre, star]
    assert [b for b in everything if f("foo", Pat.ANY).matches(b)] == [lit]
    assert [b for b in everything if f("fo", Pat.PREFIXED).matches(b)] == [pre]
    assert [b for b in everything if f(principal=BOB).matches(b)] == [other]
    assert [b for b in everything if f(op=Op.WRITE, perm=Perm.DENY).matches(b)] == [other]
    assert not f(res=Res.GROUP).matches(lit)


def test_binding_errors_are_kafkas_messages():
    assert binding_error(acl("t", Op.READ)) is None
    assert binding_error(acl("x", Op.ALTER, res=Res.CLUSTER)) == \
        "The only valid name for the CLUSTER resource is kafka-cluster"
    assert binding_error(acl("", Op.READ)) == "Invalid empty resource name"
    assert binding_error(acl("t", Op.ANY)) == "Invalid operation ANY"
    assert binding_error(acl("t", Op.READ, Perm.ANY)) == "Invalid permissionType ANY"
    assert binding_error(acl("t", Op.READ, pat=Pat.MATCH)) == "Invalid patternType MATCH"


def test_acl_file_round_trip_and_corruption(tmp_path):
    assert load_acls(str(tmp_path)) == frozenset()
    bindings = {acl("t", Op.READ), acl("g", Op.READ, res=Res.GROUP, host="10.0.0.1")}
    save_acls(str(tmp_path), bindings)
    assert load_acls(str(tmp_path)) == bindings
    assert json.loads((tmp_path / ACLS_FILE).read_text())["version"] == 1
    for bad in ("{", "[]", '{"version": 2, "acls": []}',
                '{"version": 1, "acls": [{"name": "t"}]}'):
        (tmp_path / ACLS_FILE).write_text(bad)
        with pytest.raises(CorruptCheckpointError):
            load_acls(str(tmp_path))


def test_authorizer_class_names_accepted_and_others_refused_by_name():
    for name in ("", "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "kafka.security.authorizer.AclAuthorizer"):
        assert BrokerConfig({"authorizer.class.name": name})["authorizer.class.name"] == name
    with pytest.raises(InvalidConfigError, match="com.example.MyAuthorizer"):
        BrokerConfig({"authorizer.class.name": "com.example.MyAuthorizer"})
    config = BrokerConfig({"super.users": "User:a;User:b",
                           "allow.everyone.if.no.acl.found": "true"})
    assert config["super.users"] == "User:a;User:b"
    assert config["allow.everyone.if.no.acl.found"] is True
    assert BrokerConfig({})["allow.everyone.if.no.acl.found"] is False


def test_docs_rules_table_is_the_modules():
    import pathlib
    import re

    from seglog.server.authorization import rules_markdown

    doc = pathlib.Path(__file__).resolve().parents[2] / "docs" / "acls.md"
    found = re.search(r"<!-- acl-rules:start[^>]*-->\n(.*?)<!-- acl-rules:end -->",
                      doc.read_text(encoding="utf-8"), re.S)
    assert found and found.group(1) == rules_markdown(), (
        "docs/acls.md's rules table is stale: paste "
        "seglog.server.authorization.rules_markdown() between its acl-rules markers")
