"""TLS for SSL listeners: Kafka's ``ssl.*`` broker configs made into Python ``ssl`` contexts,
and a client certificate's distinguished name made into a principal.

Kafka reads each setting through the listener (``listener.name.<listener>.ssl.keystore.location``
before ``ssl.keystore.location``: :meth:`~seglog.server.config.BrokerConfig.listener_value`).
What seglog takes:

- the key and certificate chain as PEM (``ssl.keystore.type=PEM``): a file holding both
  (``ssl.keystore.location``) or the PEM text in the config (``ssl.keystore.certificate.chain``
  and ``ssl.keystore.key``); an encrypted key's ``ssl.key.password``. JKS (Kafka's default
  type) and PKCS12 keystores are refused by name: convert them to PEM with ``openssl``;
- trusted certificates as PEM (``ssl.truststore.type=PEM``): ``ssl.truststore.location`` or
  ``ssl.truststore.certificates``;
- ``ssl.client.auth`` (``required``, ``requested``, ``none``), ``ssl.enabled.protocols`` and
  ``ssl.protocol`` (TLSv1.2 and TLSv1.3 only: anything older is refused by name),
  ``ssl.endpoint.identification.algorithm`` (``https``: a broker connecting to another over
  TLS checks the host name in its certificate; empty: it does not),
  ``ssl.principal.mapping.rules`` (Kafka's ``SslPrincipalMapper``: ``RULE:pattern/replacement/
  [LU]`` and ``DEFAULT``).

``ssl.cipher.suites`` is not taken (Java's cipher suite names are not OpenSSL's; Python's
defaults apply): the config table refuses it by name, as every other ``ssl.*`` setting not
listed here.

The principal of a TLS connection (Kafka's ``DefaultKafkaPrincipalBuilder``): ``User:`` and
the client certificate's subject as Java's ``X500Principal.getName()`` writes it (RFC 2253:
most specific attribute first, ``CN=client,OU=eng,O=seglog,C=NO``; the keywords CN, C, L, ST,
O, OU, DC, STREET and UID, any other attribute as ``<oid>=#<hex of its DER value>``), mapped by
the rules; ``User:ANONYMOUS`` without a client certificate. The subject is read from the
certificate's DER by :func:`subject_dn` (a bounded parser of the few ASN.1 structures on the
way to it; no dependency).

A leaf of the server: it reads a :class:`~seglog.server.config.BrokerConfig`. The contexts are
made at start (a bad setting is an InvalidConfigError then, never at the first client) and
are read-only afterwards; thread-safe.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import InvalidConfigError
from .config import BrokerConfig
from .principal import ANONYMOUS, USER_TYPE, KafkaPrincipal

__all__ = ["CLIENT_AUTH_MODES", "PrincipalMapper", "SSL_HANDSHAKE_TIMEOUT_S",
           "client_context", "peer_principal", "server_context", "subject_dn"]

#: How long a connection on an SSL listener may take to finish its TLS handshake before it
#: is closed (a client that connects and sends nothing, or sends plaintext Kafka, holds a
#: socket no longer). Kafka has no such timer of its own (its idle-connection expiry,
#: ``connections.max.idle.ms``, closes such a connection after 10 minutes); 10 s is far
#: above any real handshake on the networks a broker serves.
SSL_HANDSHAKE_TIMEOUT_S = 10.0
#: ``ssl.client.auth`` values and what the server context asks of a client.
CLIENT_AUTH_MODES = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL,
                     "none": ssl.CERT_NONE}
_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
#: Protocols Java knows and seglog refuses (broken or deprecated; Python's ssl refuses most).
_OLD_PROTOCOLS = ("TLSv1.1", "TLSv1", "SSLv3", "SSLv2", "SSL", "SSLv2Hello")
#: Bounds on the PEM text and DER seglog reads (a certificate chain; a DN).
_PEM_BYTES_MAX = 1024 * 1024
_DER_DEPTH_MAX = 8


# --- contexts --------------------------------------------------------------------------------


def _value(config: BrokerConfig, listener_name: str, name: str) -> Any:
    return config.listener_value(listener_name, name)


def _setting(config: BrokerConfig, listener_name: str, name: str) -> str:
    """How to name ``name`` in a message: with the listener prefix when it was given so."""
    if config.has_listener_value(listener_name, name):
        return f"listener.name.{listener_name.lower()}.{name}"
    return name


def _password(value: Any) -> str | None:
    # A password-typed config may come as a str or wrapped by the config parser.
    if value is None:
        return None
    return str(getattr(value, "value", value))


def _store_type(config: BrokerConfig, listener_name: str, name: str) -> str:
    store_type = str(_value(config, listener_name, name) or "JKS").upper()
    if store_type != "PEM":
        raise InvalidConfigError(
            f"{_setting(config, listener_name, name)}={store_type} (listener {listener_name}) "
            f"is not supported by seglog: only PEM stores are read (set {name}=PEM; convert a "
            "JKS or PKCS12 store with keytool -importkeystore and openssl pkcs12 -nodes)")
    return store_type


def _protocol_bounds(config: BrokerConfig, listener_name: str
                     ) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    """``(minimum, maximum)`` TLS versions from ``ssl.enabled.protocols`` and
    ``ssl.protocol``; InvalidConfigError for anything but TLSv1.2 and TLSv1.3."""
    enabled = [str(p).strip() for p in _value(config, listener_name, "ssl.enabled.protocols")
               or () if str(p).strip()]
    where = _setting(config, listener_name, "ssl.enabled.protocols")
    if not enabled:
        raise InvalidConfigError(f"{where} is empty (listener {listener_name}): no TLS "
                                 "version would be allowed")
    for name in enabled:
        if name not in _PROTOCOLS:
            why = ("is refused: it is broken or deprecated"
                   if name in _OLD_PROTOCOLS else "is not a TLS version seglog knows")
            raise InvalidConfigError(f"{where}: {name} (listener {listener_name}) {why}; "
                                     "seglog serves TLSv1.2 and TLSv1.3")
    versions = sorted(_PROTOCOLS[name] for name in enabled)
    protocol = str(_value(config, listener_name, "ssl.protocol") or "TLSv1.3")
    if protocol not in ("TLS", "TLSv1.2", "TLSv1.3"):
        raise InvalidConfigError(
            f"{_setting(config, listener_name, 'ssl.protocol')}={protocol} (listener "
            f"{listener_name}) is refused: seglog speaks TLSv1.2 and TLSv1.3 (or TLS)")
    maximum = versions[-1]
    if protocol == "TLSv1.2":
        # Kafka's doc: with ssl.protocol=TLSv1.2 TLSv1.3 is not used even if enabled.
        maximum = ssl.TLSVersion.TLSv1_2
        if versions[0] > maximum:
            raise InvalidConfigError(f"ssl.protocol=TLSv1.2 with {where}={','.join(enabled)} "
                                     f"(listener {listener_name}) leaves no TLS version")
    return versions[0], maximum


def _load_key_chain(context: ssl.SSLContext, config: BrokerConfig, listener_name: str,
                    *, required: bool) -> None:
    location = _value(config, listener_name, "ssl.keystore.location")
    chain = _password(_value(config, listener_name, "ssl.keystore.certificate.chain"))
    key = _password(_value(config, listener_name, "ssl.keystore.key"))
    password = _password(_value(config, listener_name, "ssl.key.password"))
    if location is None and chain is None and key is None:
        if required:
            raise InvalidConfigError(
                f"listener {listener_name} (TLS) has no key and certificate: set "
                "ssl.keystore.type=PEM and ssl.keystore.location (a PEM file with the key and "
                "its certificate chain), or ssl.keystore.certificate.chain and ssl.keystore.key "
                f"(PEM text), prefixed listener.name.{listener_name.lower()}. or not")
        return
    _store_type(config, listener_name, "ssl.keystore.type")
    if location is not None and (chain is not None or key is not None):
        raise InvalidConfigError(f"listener {listener_name}: set ssl.keystore.location or "
                                 "ssl.keystore.certificate.chain with ssl.keystore.key, not both")
    if location is None and (chain is None or key is None):
        raise InvalidConfigError(f"listener {listener_name}: ssl.keystore.certificate.chain "
                                 "and ssl.keystore.key go together")
    if _password(_value(config, listener_name, "ssl.keystore.password")) is not None:
        # Kafka: "Key store password is not supported for PEM format" (its exact refusal).
        raise InvalidConfigError(f"listener {listener_name}: SSL key store password cannot "
                                 "be specified with PEM format, only key password may be "
                                 "specified (ssl.key.password)")
    try:
        if location is not None:
            context.load_cert_chain(str(location), password=password)
        else:
            assert chain is not None and key is not None
            _load_cert_chain_text(context, chain, key, password)
    except (OSError, ssl.SSLError, ValueError) as exc:
        where = (f"ssl.keystore.location={location}" if location is not None
                 else "ssl.keystore.certificate.chain / ssl.keystore.key")
        raise InvalidConfigError(f"listener {listener_name}: cannot load the key and "
                                 f"certificate chain from {where}: {exc}") from None


def _load_cert_chain_text(context: ssl.SSLContext, chain: str, key: str,
                          password: str | None) -> None:
    """``load_cert_chain`` reads files only: the PEM text goes to a private temporary file
    (mode 0600, removed at once after the load)."""
    if len(chain) + len(key) > _PEM_BYTES_MAX:
        raise ValueError(f"more than {_PEM_BYTES_MAX} bytes of PEM")
    fd, path = tempfile.mkstemp(prefix="seglog-key-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(key.strip() + "\n" + chain.strip() + "\n")
        context.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def _load_trust(context: ssl.SSLContext, config: BrokerConfig, listener_name: str) -> bool:
    """Load the truststore; False when none is configured."""
    location = _value(config, listener_name, "ssl.truststore.location")
    certificates = _password(_value(config, listener_name, "ssl.truststore.certificates"))
    if location is None and certificates is None:
        return False
    _store_type(config, listener_name, "ssl.truststore.type")
    if location is not None and certificates is not None:
        raise InvalidConfigError(f"listener {listener_name}: set ssl.truststore.location or "
                                 "ssl.truststore.certificates, not both")
    if _password(_value(config, listener_name, "ssl.truststore.password")) is not None:
        raise InvalidConfigError(f"listener {listener_name}: SSL trust store password cannot "
                                 "be specified for PEM format")
    try:
        if location is not None:
            context.load_verify_locations(cafile=str(location))
        else:
            context.load_verify_locations(cadata=certificates)
    except (OSError, ssl.SSLError, ValueError) as exc:
        where = (f"ssl.truststore.location={location}" if location is not None
                 else "ssl.truststore.certificates")
        raise InvalidConfigError(f"listener {listener_name}: cannot load trusted "
                                 f"certificates from {where}: {exc}") from None
    return True


def server_context(config: BrokerConfig, listener_name: str) -> ssl.SSLContext:
    """The server-side context of SSL listener ``listener_name``: its key and chain, its
    trusted certificates, ``ssl.client.auth``, the TLS versions. InvalidConfigError, naming
    the setting, for anything missing or not supported."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version, context.maximum_version = _protocol_bounds(config, listener_name)
    _load_key_chain(context, config, listener_name, required=True)
    client_auth = str(_value(config, listener_name, "ssl.client.auth") or "none").lower()
    if client_auth not in CLIENT_AUTH_MODES:
        raise InvalidConfigError(
            f"{_setting(config, listener_name, 'ssl.client.auth')}={client_auth}: Invalid "
            "value; String must be one of: required, requested, none")
    trusted = _load_trust(context, config, listener_name)
    if client_auth != "none" and not trusted:
        # Kafka would use the JVM's default CAs: the system's are the nearest equivalent.
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    context.verify_mode = CLIENT_AUTH_MODES[client_auth]
    return context


def client_context(config: BrokerConfig, listener_name: str) -> ssl.SSLContext:
    """The client-side context a broker uses to connect to another broker's SSL listener
    ``listener_name`` (the inter-broker listener): the listener's truststore (the system's
    CAs when none), its key and chain when it has one (mutual TLS), the TLS versions, and
    ``ssl.endpoint.identification.algorithm`` (``https``: the host name is checked)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version, context.maximum_version = _protocol_bounds(config, listener_name)
    _load_key_chain(context, config, listener_name, required=False)
    if not _load_trust(context, config, listener_name):
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    algorithm = str(_value(config, listener_name,
                           "ssl.endpoint.identification.algorithm") or "").lower()
    if algorithm not in ("", "https"):
        raise InvalidConfigError(
            f"{_setting(config, listener_name, 'ssl.endpoint.identification.algorithm')}="
            f"{algorithm}: seglog knows https (check the host name) and the empty value")
    context.check_hostname = algorithm == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    return context


# --- principals ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Rule:
    default: bool
    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    case: str = ""  # "L", "U" or ""


# Kafka's SslPrincipalMapper.RULE_PATTERN and RULE_SPLITTER, as Python regular expressions.
_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE_PATTERN)


class PrincipalMapper:
    """Kafka's ``SslPrincipalMapper``: ``ssl.principal.mapping.rules`` (a comma-separated
    list of ``DEFAULT`` and ``RULE:<regex>/<replacement>/[L|U]``) maps a distinguished name
    to a principal name; the first rule whose regex matches the whole DN gives it. Raises
    InvalidConfigError for a rule Kafka refuses (at construction), and :meth:`name`
    LookupError when no rule applies (Kafka's ``NoMatchingRule``: the connection is closed).
    Immutable; thread-safe."""

    def __init__(self, rules: str | None):
        self.rules_text = "DEFAULT" if rules is None else rules
        self._rules = [self._parse(rule) for rule in self._split(self.rules_text)]

    @staticmethod
    def _split(text: str) -> list[str]:
        out = []
        text = text.strip()
        position = 0
        # Bounded: each match consumes at least one character, or ends the text.
        while position <= len(text):
            match = _RULE_SPLITTER.search(text, position)
            if match is None:
                break
            out.append(match.group(1))
            position = match.end() if match.end() > position else position + 1
        return out

    @staticmethod
    def _parse(rule: str) -> _Rule | None:
        match = _RULE_PARSER.match(rule)
        if match is None:
            raise InvalidConfigError(f"ssl.principal.mapping.rules: Invalid rule: {rule}")
        if match.end() != len(rule):
            raise InvalidConfigError(
                f"ssl.principal.mapping.rules: Invalid rule: `{rule}`, unmatched substring: "
                f"`{rule[match.end():]}`")
        if match.group(1) is not None:
            return _Rule(default=True)
        if match.group(2) is not None:
            try:
                pattern = re.compile(match.group(2))
            except re.error as exc:
                raise InvalidConfigError(f"ssl.principal.mapping.rules: Invalid rule: {rule}: "
                                         f"{exc}") from None
            return _Rule(default=False, pattern=pattern, replacement=match.group(4),
                         case=match.group(6) or "")
        return None  # an empty rule is ignored

    def name(self, distinguished_name: str) -> str:
        """The principal name of ``distinguished_name`` (LookupError: no rule applies)."""
        for rule in self._rules:
            if rule is None:
                continue
            if rule.default:
                return distinguished_name
            assert rule.pattern is not None
            match = rule.pattern.fullmatch(distinguished_name)
            if match is None:
                continue
            # Java's String.replaceAll with the pattern; a full match is the first match.
            result = rule.pattern.sub(_java_replacement(rule.replacement, rule.pattern.groups),
                                      distinguished_name)
            if rule.case == "L":
                result = result.lower()
            elif rule.case == "U":
                result = result.upper()
            return result
        raise LookupError(f"No rules apply to {distinguished_name}, rules {self.rules_text}")


def _java_replacement(replacement: str, groups: int) -> Callable[[re.Match[str]], str]:
    """Java's ``Matcher.appendReplacement`` syntax (``$n`` a group, ``\\x`` the character x)
    with Kafka's ``escapeLiteralBackReferences`` (a ``$n`` past the last group is literal)."""

    def expand(match: re.Match[str]) -> str:
        out: list[str] = []
        i = 0
        while i < len(replacement):
            char = replacement[i]
            if char == "\\" and i + 1 < len(replacement):
                out.append(replacement[i + 1])
                i += 2
                continue
            if char == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
                j = i + 2
                number = int(replacement[i + 1])
                # Java takes more digits while the group number stays valid.
                while j < len(replacement) and replacement[j].isdigit() \
                        and number * 10 + int(replacement[j]) <= groups:
                    number = number * 10 + int(replacement[j])
                    j += 1
                if number > groups:
                    out.append(replacement[i:j])  # Kafka escapes it: a literal
                else:
                    out.append(match.group(number) or "")
                i = j
                continue
            out.append(char)
            i += 1
        return "".join(out)

    return expand


def peer_principal(ssl_object: ssl.SSLObject | ssl.SSLSocket | None,
                   mapper: PrincipalMapper) -> KafkaPrincipal:
    """The principal of a finished TLS handshake: ``User:<mapped subject DN>`` of the
    client's certificate, ``User:ANONYMOUS`` without one. Raises LookupError when no mapping
    rule applies and ValueError for a certificate whose subject does not parse."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der:
        return ANONYMOUS
    return KafkaPrincipal(USER_TYPE, mapper.name(subject_dn(der)))


# --- the subject of a DER certificate ---------------------------------------------------------

#: The attribute keywords Java's ``X500Principal.getName()`` (RFC 2253) writes by name.
_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
    "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
#: DER string types written as text (UTF8String, PrintableString, T61String, IA5String,
#: UniversalString, BMPString).
_STRING_TAGS = {0x0C: "utf-8", 0x13: "latin-1", 0x14: "latin-1", 0x16: "latin-1",
                0x1C: "utf-32-be", 0x1E: "utf-16-be"}
#: Characters Java's RFC 2253 writer escapes with a backslash.
_ESCAPED = set(',=+<>#;"\\')


def _der_item(data: bytes, position: int) -> tuple[int, int, int]:
    """``(tag, start of contents, end of contents)`` of the DER item at ``position``;
    ValueError when it runs past ``data``."""
    if position + 2 > len(data):
        raise ValueError("truncated DER")
    tag = data[position]
    length = data[position + 1]
    position += 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or position + count > len(data):
            raise ValueError("bad DER length")
        length = int.from_bytes(data[position:position + count], "big")
        position += count
    end = position + length
    if end > len(data):
        raise ValueError("DER item runs past its container")
    return tag, position, end


def _oid(data: bytes) -> str:
    if not data:
        raise ValueError("empty OID")
    first = data[0]
    parts = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    value = 0
    for byte in data[1:]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            parts.append(value)
            value = 0
    return ".".join(str(p) for p in parts)


def _escape(text: str) -> str:
    out = []
    for i, char in enumerate(text):
        if char in _ESCAPED or (char == " " and (i == 0 or i == len(text) - 1)):
            out.append("\\" + char)
        elif char == "\0":
            out.append("\\00")
        else:
            out.append(char)
    return "".join(out)


def subject_dn(der: bytes) -> str:
    """The subject of a DER X.509 certificate as Java's ``X500Principal.getName()`` writes it
    (RFC 2253; see the module docstring). ValueError for bytes that are not a certificate."""
    _tag, start, end = _der_item(der, 0)  # Certificate
    tag, start, end = _der_item(der, start)  # tbsCertificate
    if tag != 0x30:
        raise ValueError("not a certificate")
    position = start
    fields: list[tuple[int, int, int]] = []
    while position < end and len(fields) < 6:
        item = _der_item(der, position)
        fields.append(item)
        position = item[2]
    if fields and fields[0][0] == 0xA0:  # the optional [0] version
        fields = fields[1:]
    if len(fields) < 5:
        raise ValueError("truncated tbsCertificate")
    # serialNumber, signature, issuer, validity, subject
    _tag, name_start, name_end = fields[4]
    rdns: list[str] = []
    position = name_start
    while position < name_end:
        set_tag, set_start, set_end = _der_item(der, position)
        position = set_end
        values: list[str] = []
        inner = set_start
        while inner < set_end:
            _seq_tag, seq_start, seq_end = _der_item(der, inner)
            inner = seq_end
            oid_tag, oid_start, oid_end = _der_item(der, seq_start)
            if oid_tag != 0x06:
                raise ValueError("attribute type is not an OID")
            value_tag, value_start, value_end = _der_item(der, oid_end)
            oid = _oid(der[oid_start:oid_end])
            keyword = _KEYWORDS.get(oid)
            encoding = _STRING_TAGS.get(value_tag)
            if keyword is not None and encoding is not None:
                text = der[value_start:value_end].decode(encoding, errors="replace")
                values.append(f"{keyword}={_escape(text)}")
            else:
                raw = der[oid_end:value_end]
                values.append(f"{keyword or oid}=#{raw.hex()}")
        rdns.append("+".join(values))
    return ",".join(reversed(rdns))
