"""The tables of ``docs/security.md``, written from the config table and the handler
registry: every security config of Kafka 4.4 with what seglog does with it (built, or refused
by name), and every security API the broker serves, at its versions.

:func:`security_tables_markdown` is the generated part of the page (between the
``<!-- security-tables -->`` markers); ``tests/test_security_docs.py`` fails when the page
differs from it (``python -m seglog.security_docs`` prints it).
"""

from __future__ import annotations

from .config_docs import default_text
from .config_table import CONFIGS
from .configdef import ACCEPTED, BROKER, NO, ConfigKey

__all__ = ["SECURITY_API_KEYS", "is_security_config", "security_tables_markdown"]

#: The broker configs of a security section of ``server.properties``, named whole.
_NAMES = frozenset({
    "listeners", "advertised.listeners", "listener.security.protocol.map",
    "inter.broker.listener.name", "security.inter.broker.protocol", "security.providers",
    "principal.builder.class", "authorizer.class.name", "super.users",
    "allow.everyone.if.no.acl.found", "connections.max.reauth.ms",
    "connection.failed.authentication.delay.ms", "max.connections", "max.connections.per.ip",
    "max.connections.per.ip.overrides", "max.connection.creation.rate",
    "quota.window.num", "quota.window.size.seconds", "client.quota.callback.class",
    "socket.request.max.bytes", "queued.max.requests", "connections.max.idle.ms",
})
#: ... and by prefix.
_PREFIXES = ("ssl.", "sasl.", "delegation.token.")
#: The security APIs: SASL, ACLs, client quotas, SCRAM credentials, delegation tokens.
SECURITY_API_KEYS = (17, 36, 29, 30, 31, 38, 39, 40, 41, 48, 49, 50, 51)


def is_security_config(key: ConfigKey) -> bool:
    """Whether broker config ``key`` belongs in the security section."""
    return key.name in _NAMES or key.name.startswith(_PREFIXES)


def security_tables_markdown() -> str:
    """The generated tables of ``docs/security.md``."""
    from .server.registry import served_apis

    keys = sorted((k for k in CONFIGS if k.scope == BROKER and is_security_config(k)),
                  key=lambda k: k.name)
    lines = ["### Security configs", "",
             "Kafka 4.4's broker configs of a security section, as seglog takes them "
             "(the full entry of each built one is in [configs.md](configs.md)).", "",
             "| Config | Kafka's default | seglog |", "|---|---|---|"]
    for key in keys:
        if key.support == NO:
            what = "**refused by name** (not built)"
        elif key.support == ACCEPTED:
            what = "accepted, no effect" + (f": {key.note}" if key.note else "")
        else:
            what = key.note or "built, as Kafka"
        cell = what.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{key.name}` | {default_text(key).replace('|', '/')} | {cell} |")
    lines += ["", "### Security APIs", "",
              "| Key | API | Versions | Served by |", "|---:|---|---|---|"]
    for api_key, name, low, high, family in served_apis():
        if api_key in SECURITY_API_KEYS:
            versions = f"{low}" if low == high else f"{low}-{high}"
            lines.append(f"| {api_key} | {name} | {versions} | {family} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(security_tables_markdown(), end="")
