"""A SASL listener's settings, read from the broker config and checked at start.

For each listener whose protocol is SASL_PLAINTEXT or SASL_SSL, Kafka reads (each may be
prefixed ``listener.name.<listener>.``, and the JAAS config must be, with the mechanism):

- ``sasl.enabled.mechanisms`` (Kafka's default GSSAPI): seglog builds PLAIN,
  SCRAM-SHA-256 and SCRAM-SHA-512; GSSAPI and OAUTHBEARER (or any other) are refused by
  name, never left out silently;
- ``listener.name.<listener>.<mechanism>.sasl.jaas.config`` for each enabled mechanism (Kafka
  fails at start without one): ``PlainLoginModule``'s ``user_<name>`` options are PLAIN's
  users; ``username``/``password`` are the broker's own login;
- ``connections.max.reauth.ms`` (per mechanism, as Kafka), ``sasl.server.max.receive.size``,
  ``connection.failed.authentication.delay.ms``.

A leaf over :class:`~seglog.server.config.BrokerConfig`; immutable values; thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ...errors import InvalidConfigError
from ..config import BrokerConfig
from ...sasl.jaas import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE, LoginModule, single_login_module
from ...sasl.scram import MECHANISMS as SCRAM_MECHANISMS

__all__ = ["BUILT_MECHANISMS", "ListenerSasl", "SASL_PROTOCOLS", "java_hash_map_order",
           "listener_sasl"]

#: The security protocols that authenticate with SASL.
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
#: The SASL mechanisms seglog serves.
BUILT_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
#: Kafka's login module for each mechanism.
_LOGIN_MODULES = {"PLAIN": PLAIN_LOGIN_MODULE,
                  **{name: SCRAM_LOGIN_MODULE for name in SCRAM_MECHANISMS}}


@dataclass(frozen=True, slots=True)
class ListenerSasl:
    """The SASL settings of one listener: ``listener_name``, ``mechanisms`` enabled (in the
    order SaslHandshake answers them: Kafka's, see :func:`java_hash_map_order`), ``plain_users`` (``{name: password}``),
    ``logins`` (each mechanism's JAAS module: the broker's own ``username``/``password``),
    ``reauth_ms`` per mechanism (``connections.max.reauth.ms``; 0: off),
    ``receive_bytes_max`` (``sasl.server.max.receive.size``) and
    ``failed_authentication_delay_ms``."""

    listener_name: str
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict)
    logins: Mapping[str, LoginModule] = field(default_factory=dict)
    reauth_ms: Mapping[str, int] = field(default_factory=dict)
    receive_bytes_max: int = 524288
    failed_authentication_delay_ms: int = 100


def listener_sasl(config: BrokerConfig, listener_name: str) -> ListenerSasl:
    """The checked SASL settings of ``listener_name``; InvalidConfigError naming the setting
    for a mechanism seglog does not build, an empty mechanism list, a missing or malformed
    JAAS config, or a JAAS config with another mechanism's login module."""
    listener = listener_name.upper()
    mechanisms = tuple(m.strip() for m in
                       config.listener_value(listener, "sasl.enabled.mechanisms") or ()
                       if m.strip())
    if not mechanisms:
        raise InvalidConfigError(f"sasl.enabled.mechanisms: listener {listener} uses SASL but "
                                 "enables no mechanism")
    for mechanism in mechanisms:
        if mechanism not in BUILT_MECHANISMS:
            hint = " (Kafka's default)" if mechanism == "GSSAPI" else ""
            raise InvalidConfigError(
                f"sasl.enabled.mechanisms: SASL mechanism {mechanism}{hint} on listener "
                f"{listener} is not built by seglog (it serves "
                f"{', '.join(BUILT_MECHANISMS)}); set sasl.enabled.mechanisms to those")
    logins: dict[str, LoginModule] = {}
    plain_users: dict[str, str] = {}
    reauth_ms: dict[str, int] = {}
    for mechanism in mechanisms:
        name = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        if not config.has_listener_value(listener, "sasl.jaas.config", mechanism=mechanism):
            raise InvalidConfigError(
                f"{name} is not set: Kafka needs a JAAS config for each SASL mechanism of a "
                f"listener (Could not find a '{listener.lower()}.KafkaServer' entry in the "
                "JAAS configuration); seglog reads it from this setting only")
        module = single_login_module(
            str(config.listener_value(listener, "sasl.jaas.config", mechanism=mechanism)),
            config_name=name)
        if module.class_name != _LOGIN_MODULES[mechanism]:
            raise InvalidConfigError(f"{name}: login module {module.class_name} is not "
                                     f"{_LOGIN_MODULES[mechanism]} (the only one seglog "
                                     f"serves {mechanism} with)")
        logins[mechanism] = module
        if mechanism == "PLAIN":
            plain_users = module.plain_users()
        reauth_ms[mechanism] = int(config.listener_value(listener, "connections.max.reauth.ms",
                                                         mechanism=mechanism))
    return ListenerSasl(
        listener_name=listener, mechanisms=java_hash_map_order(mechanisms), plain_users=plain_users, logins=logins,
        reauth_ms=reauth_ms,
        receive_bytes_max=int(config.listener_value(listener, "sasl.server.max.receive.size")),
        failed_authentication_delay_ms=int(
            config.listener_value(listener, "connection.failed.authentication.delay.ms")))


def _java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (int32 arithmetic)."""
    value = 0
    for char in text:  # mechanism names are ASCII: one UTF-16 unit each
        value = (31 * value + ord(char)) & 0xFFFFFFFF
    return value


def java_hash_map_order(keys: tuple[str, ...]) -> tuple[str, ...]:
    """``keys`` in the order a Java ``HashMap`` built from them iterates: Kafka keeps a
    listener's mechanisms in one (``ChannelBuilders``' JAAS contexts by mechanism) and
    SaslHandshake lists them in that order (PLAIN, SCRAM-SHA-512, SCRAM-SHA-256). Bucket
    ``(h ^ h >>> 16) & (capacity - 1)`` over the default capacity 16 (doubled past 0.75
    load), insertion order within a bucket."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str) -> int:
        h = _java_string_hash(key)
        return (h ^ (h >> 16)) & (capacity - 1)

    unique = list(dict.fromkeys(keys))
    return tuple(sorted(unique, key=lambda k: (bucket(k), unique.index(k))))
