"""The broker's listeners as Kafka reads them, and the refusal of any listener seglog cannot
serve as configured.

Kafka names each listener and maps the name to a security protocol
(``listener.security.protocol.map``, by default PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL
each to itself); ``listeners`` says where to listen (``NAME://host:port``),
``advertised.listeners`` what to tell clients (``listeners`` when unset), and
``inter.broker.listener.name`` which listener brokers use between themselves (by default the
one named after ``security.inter.broker.protocol``: PLAINTEXT). :func:`broker_listeners`
parses the four as Kafka 4.4's ``KafkaConfig`` does (``SocketServerConfigs
.listenerListToEndPoints``, ``CoreUtils.listenerListToEndPoints``'s distinct names and ports,
``effectiveListenerSecurityProtocolMap``, ``validateValues``), with Kafka's messages.

seglog serves PLAINTEXT and SASL_PLAINTEXT (:mod:`seglog.server.sasl`; a SASL listener's
settings are checked here too): TLS is not built yet. A listener of any other
protocol is refused at start with a message naming it and its protocol; it is never served
as PLAINTEXT, which would hand an operator who asked for authentication an open broker. The
listeners named in ``controller.listener.names`` are a KRaft quorum's (seglog runs none):
taken from Kafka's sample ``server.properties`` and not served. seglog serves one broker
listener; several are refused too (one socket per listener is not built yet).

A leaf of the server: it reads a :class:`~seglog.server.config.BrokerConfig` only.
Immutable values; thread-safe.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Iterable, Mapping

from ..errors import InvalidConfigError
from .config import BrokerConfig
from .sasl.settings import SASL_PROTOCOLS, listener_sasl

__all__ = ["DEFAULT_PROTOCOL_MAP", "Endpoint", "Listeners", "SECURITY_PROTOCOLS",
           "SERVED_PROTOCOLS", "broker_listeners", "is_loopback", "parse_endpoints",
           "parse_protocol_map"]

#: Kafka's ``SecurityProtocol`` names.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: The security protocols seglog serves.
SERVED_PROTOCOLS = frozenset({"PLAINTEXT", "SASL_PLAINTEXT"})
#: Kafka's ``DEFAULT_NAME_TO_SECURITY_PROTO``: each protocol's name is a listener name of it.
DEFAULT_PROTOCOL_MAP: Mapping[str, str] = {name: name for name in SECURITY_PROTOCOLS}
#: What each protocol seglog does not serve would need, for the refusal's message.
_MISSING = {
    "SSL": "TLS is not built yet",
    "SASL_SSL": "TLS is not built yet",
}
#: Kafka's ``SocketServerConfigs.URI_PARSE_REGEXP`` (matched from the start, as
#: ``Matcher.matches`` does over the whole entry: hence the ``$``).
_URI = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener: its normalised ``listener_name`` (upper case, as Kafka's
    ``ListenerName.normalised``), ``security_protocol``, ``host`` (None: every interface,
    Kafka's empty host) and ``port``; ``text`` is the entry as given."""

    listener_name: str
    security_protocol: str
    host: str | None
    port: int
    text: str


@dataclass(frozen=True, slots=True)
class Listeners:
    """The listeners of a broker config, checked: ``served`` is the one broker listener
    seglog binds (its address may be overridden by ``--listen``); ``advertised`` the
    endpoint clients are told for it, None when ``advertised.listeners`` does not name it
    (then the bound address is advertised); ``inter_broker_listener_name`` the listener
    brokers use between themselves (the served one); ``controller`` the KRaft controller
    listeners given in ``listeners`` and not served."""

    served: Endpoint
    advertised: Endpoint | None
    inter_broker_listener_name: str
    controller: tuple[Endpoint, ...]


def parse_protocol_map(text: str | None) -> dict[str, str]:
    """``listener.security.protocol.map`` (``"NAME:PROTOCOL,..."``) as Kafka's
    ``Csv.parseCsvMap`` and ``getSecurityProtocol`` read it: names normalised to upper case,
    protocols by their name in any case. InvalidConfigError with Kafka's message for an entry
    without ``:`` or an unknown protocol."""
    out: dict[str, str] = {}
    if not text:
        return out
    for entry in re.split(r"\s*,\s*", text):
        name, sep, protocol = entry.rpartition(":")
        if not sep:
            raise InvalidConfigError(
                "Error parsing configuration property 'listener.security.protocol.map': "
                f"entry {entry!r} is not listenerName:securityProtocol")
        protocol = protocol.strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise InvalidConfigError(f"Invalid security protocol `{protocol}` defined in "
                                     "listener.security.protocol.map")
        out[name.strip().upper()] = protocol
    return out


def parse_endpoints(entries: Iterable[str], protocol_map: Mapping[str, str], *,
                    config_name: str, distinct_ports: bool) -> list[Endpoint]:
    """The endpoints of ``listeners`` or ``advertised.listeners`` (``entries``, already split
    on commas), as Kafka's ``listenerListToEndPoints``: each ``NAME://host:port`` with its
    protocol from ``protocol_map``; distinct names, and with ``distinct_ports`` distinct
    ports (0 excepted; two listeners may share a port when one is on an IPv4 address and the
    other on an IPv6 one). InvalidConfigError with Kafka's messages."""
    entries = [entry.strip() for entry in entries if entry.strip()]
    joined = ",".join(entries)
    endpoints: list[Endpoint] = []
    for entry in entries:
        match = _URI.match(entry)
        if match is None:
            raise InvalidConfigError(f"Error creating broker listeners from '{joined}' "
                                     f"({config_name}): Unable to parse {entry} to a broker "
                                     "endpoint")
        name = match.group(1).upper()
        protocol = protocol_map.get(name)
        if protocol is None:
            raise InvalidConfigError(f"Error creating broker listeners from '{joined}' "
                                     f"({config_name}): No security protocol defined for "
                                     f"listener {name} (listener.security.protocol.map)")
        port = int(match.group(3))
        if not 0 <= port <= 65535:
            raise InvalidConfigError(f"{config_name}: listener {entry} has port {port} "
                                     "outside 0..65535")
        endpoints.append(Endpoint(name, protocol, match.group(2) or None, port, entry))
    names = [e.listener_name for e in endpoints]
    if len(set(names)) != len(names):
        raise InvalidConfigError(f"Each listener must have a different name, listeners: "
                                 f"{joined} ({config_name})")
    if distinct_ports:
        by_port: dict[int, list[Endpoint]] = {}
        for endpoint in endpoints:
            if endpoint.port != 0:
                by_port.setdefault(endpoint.port, []).append(endpoint)
        for port, same in by_port.items():
            if len(same) > 1 and not _one_v4_one_v6(same):
                raise InvalidConfigError(
                    "Each listener must have a different port unless exactly one listener "
                    f"has an IPv4 address and the other IPv6 address, listeners: {joined}, "
                    f"port: {port} ({config_name})")
    return endpoints


def _ip_version(host: str | None) -> int | None:
    if host is None:
        return None
    try:
        return ipaddress.ip_address(host).version
    except ValueError:
        return None


def _one_v4_one_v6(endpoints: list[Endpoint]) -> bool:
    return len(endpoints) == 2 and {_ip_version(e.host) for e in endpoints} == {4, 6}


def _refuse_unserved(endpoint: Endpoint, config_name: str) -> None:
    if endpoint.security_protocol in SERVED_PROTOCOLS:
        return
    raise InvalidConfigError(
        f"{config_name}: listener {endpoint.text} (listener name {endpoint.listener_name}, "
        f"security protocol {endpoint.security_protocol}) is refused: seglog serves "
        f"{' and '.join(sorted(SERVED_PROTOCOLS))} listeners only; "
        f"{_MISSING[endpoint.security_protocol]}, and serving it as PLAINTEXT "
        "would let every client in unauthenticated")


def broker_listeners(config: BrokerConfig) -> Listeners:
    """The checked listeners of ``config`` (see the module docstring). Raises
    InvalidConfigError, naming the setting, for what Kafka refuses (a malformed entry, a
    listener name missing from the protocol map, duplicate names or ports, advertised names
    not among the listeners, an inter-broker listener that is not advertised, an advertised
    0.0.0.0) and for what seglog cannot serve: a listener whose security protocol is not
    PLAINTEXT, or more than one broker listener."""
    protocol_map = parse_protocol_map(config["listener.security.protocol.map"])
    controller_names = [n.strip().upper() for n in config["controller.listener.names"] or ()
                        if n.strip()]
    if config.is_default("listener.security.protocol.map"):
        # Kafka (KRaft): with the default map, controller listeners not named after a
        # protocol are PLAINTEXT, unless SSL or SASL is in use.
        given = [entry.split("://", 1)[0].strip().upper() for entry in config["listeners"]]
        if not any(n in ("SSL", "SASL_PLAINTEXT", "SASL_SSL")
                   for n in [*controller_names, *given]):
            for name in controller_names:
                protocol_map.setdefault(name, "PLAINTEXT")
    listeners = parse_endpoints(config["listeners"], protocol_map, config_name="listeners",
                                distinct_ports=True)
    for endpoint in listeners:
        _refuse_unserved(endpoint, "listeners")
    broker = [e for e in listeners if e.listener_name not in controller_names]
    controller = tuple(e for e in listeners if e.listener_name in controller_names)
    if config["advertised.listeners"] is not None:
        advertised_all = parse_endpoints(config["advertised.listeners"], protocol_map,
                                         config_name="advertised.listeners",
                                         distinct_ports=False)
    else:
        advertised_all = listeners
    for endpoint in advertised_all:
        _refuse_unserved(endpoint, "advertised.listeners")
    advertised = [e for e in advertised_all if e.listener_name not in controller_names]
    advertised_names = [e.listener_name for e in advertised]
    listener_names = {e.listener_name for e in listeners}
    inter_broker = (config["inter.broker.listener.name"] or "PLAINTEXT").strip().upper()
    if config["inter.broker.listener.name"] is not None:
        protocol = protocol_map.get(inter_broker)
        if protocol is None:
            raise InvalidConfigError(f"Listener with name {inter_broker} defined in "
                                     "inter.broker.listener.name not found in "
                                     "listener.security.protocol.map.")
        if protocol not in SERVED_PROTOCOLS:
            raise InvalidConfigError(
                f"inter.broker.listener.name: listener {inter_broker} (security protocol "
                f"{protocol}) is refused: seglog serves "
                f"{' and '.join(sorted(SERVED_PROTOCOLS))} listeners only; "
                f"{_MISSING[protocol]}")
    if not advertised:
        raise InvalidConfigError("There must be at least one broker advertised listener. "
                                 "Perhaps all listeners appear in controller.listener.names?")
    if inter_broker not in advertised_names:
        raise InvalidConfigError(
            "inter.broker.listener.name must be a listener name defined in "
            "advertised.listeners. The valid options based on currently configured listeners "
            f"are {','.join(advertised_names)}")
    if not set(advertised_names) <= listener_names:
        raise InvalidConfigError(
            "advertised.listeners listener names must be equal to or a subset of the ones "
            f"defined in listeners. Found {','.join(advertised_names)}. The valid options "
            f"based on the current configuration are {','.join(sorted(listener_names))}")
    for endpoint in advertised if config["advertised.listeners"] is not None else ():
        # Kafka also refuses a 0.0.0.0 listener when advertised.listeners is unset; seglog
        # advertises this host's name for it instead (docs/server.md), as for --listen.
        if endpoint.host == "0.0.0.0":
            raise InvalidConfigError("advertised.listeners cannot use the nonroutable "
                                     "meta-address 0.0.0.0. Use a routable IP address.")
    if len(broker) != 1:
        raise InvalidConfigError(
            f"listeners: seglog serves one broker listener, not {len(broker)} "
            f"({', '.join(e.text for e in broker)}): several listeners are not built yet")
    served = broker[0]
    if served.security_protocol in SASL_PROTOCOLS:
        listener_sasl(config, served.listener_name)  # refused at start when not servable
    served_advertised = next(
        (e for e in advertised if e.listener_name == served.listener_name), None)
    if config["advertised.listeners"] is None:
        served_advertised = None  # advertise the address bound (--listen may move it)
    return Listeners(served=served, advertised=served_advertised,
                     inter_broker_listener_name=inter_broker, controller=controller)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address a socket is bound to, or ``localhost``) is a loopback
    address; a wildcard (``0.0.0.0``, ``::``, empty) or any other name is not."""
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback  # ::ffff:127.0.0.1, a dual-stack socket's
    return address.is_loopback
