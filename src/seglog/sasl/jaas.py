"""Kafka's ``sasl.jaas.config`` values: JAAS login-module entries, parsed as Kafka's
``JaasConfig`` parses them.

A value is ``loginModuleClass controlFlag (optionName=optionValue)*;``, repeated; Kafka
tokenizes it with Java's ``StreamTokenizer``: words (letters, digits and ``_-.$``), quoted
strings (``"..."`` or ``'...'``, with backslash escapes), ``=`` and ``;``; ``//`` and ``/* */``
comments are skipped. The flag is one of ``required``, ``requisite``, ``sufficient``,
``optional`` (any case). A broker's listener config must hold exactly one module (Kafka's
``JaasContext.load``).

The broker reads, from ``PlainLoginModule``, its users (``user_<name>="<password>"``) and,
from any module, its own login for inter-broker connections (``username``/``password``).

A leaf; pure functions over strings; thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InvalidConfigError

__all__ = ["CONTROL_FLAGS", "LoginModule", "PLAIN_LOGIN_MODULE", "SCRAM_LOGIN_MODULE",
           "parse_jaas_config", "single_login_module"]

#: Kafka's login module classes for the mechanisms seglog builds.
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
#: JAAS's control flags (``AppConfigurationEntry.LoginModuleControlFlag``).
CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
#: A bound on a value's length in characters (far above any real config; a guard only).
JAAS_CONFIG_CHARS_MAX = 1024 * 1024

_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.$")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


@dataclass(frozen=True, slots=True)
class LoginModule:
    """One JAAS entry: ``class_name``, ``flag`` (lower case) and ``options`` in order."""

    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def username(self) -> str | None:
        """The ``username`` option: the login this module gives a client (the broker's own,
        for inter-broker connections)."""
        return self.options.get("username")

    @property
    def password(self) -> str | None:
        """The ``password`` option (see :attr:`username`)."""
        return self.options.get("password")

    def plain_users(self) -> dict[str, str]:
        """``PlainLoginModule``'s users: ``{name: password}`` from the ``user_<name>`` options
        (Kafka's ``PlainServerCallbackHandler``)."""
        return {name[len("user_"):]: value for name, value in self.options.items()
                if name.startswith("user_")}


def _tokens(text: str) -> list[tuple[str, str]]:
    """``[(kind, text)]``: kind ``word``, ``quoted`` or the character ``=`` / ``;``."""
    out: list[tuple[str, str]] = []
    i, end = 0, len(text)
    while i < end:
        char = text[i]
        if char.isspace():
            i += 1
        elif text.startswith("//", i):
            newline = text.find("\n", i)
            i = end if newline < 0 else newline + 1
        elif text.startswith("/*", i):
            close = text.find("*/", i + 2)
            i = end if close < 0 else close + 2
        elif char in "=;":
            out.append((char, char))
            i += 1
        elif char in "\"'":
            quote, i, chars = char, i + 1, []
            while i < end and text[i] != quote:
                if text[i] == "\\" and i + 1 < end:
                    chars.append(_ESCAPES.get(text[i + 1], text[i + 1]))
                    i += 2
                else:
                    chars.append(text[i])
                    i += 1
            if i >= end:
                raise InvalidConfigError("Invalid JAAS config: unterminated quoted string")
            out.append(("quoted", "".join(chars)))
            i += 1
        elif char in _WORD_CHARS:
            start = i
            while i < end and text[i] in _WORD_CHARS:
                i += 1
            out.append(("word", text[start:i]))
        else:
            raise InvalidConfigError(f"Invalid JAAS config: unexpected character {char!r}")
    return out


def parse_jaas_config(text: str) -> list[LoginModule]:
    """The login modules of a ``sasl.jaas.config`` value; InvalidConfigError with Kafka's
    messages for a value that does not parse (an entry without ``;``, a bad control flag, an
    option without ``=value``)."""
    if len(text) > JAAS_CONFIG_CHARS_MAX:
        raise InvalidConfigError("Invalid JAAS config: value too long")
    tokens = _tokens(text)
    modules: list[LoginModule] = []
    i = 0
    while i < len(tokens):
        kind, class_name = tokens[i]
        if kind != "word":
            raise InvalidConfigError(f"Invalid JAAS config: unexpected {class_name!r} where a "
                                     "login module class was expected")
        if i + 1 >= len(tokens) or tokens[i + 1][0] != "word":
            raise InvalidConfigError("Invalid JAAS config: login module control flag not "
                                     "specified")
        flag = tokens[i + 1][1].lower()
        if flag not in CONTROL_FLAGS:
            raise InvalidConfigError(f"Invalid login module control flag '{tokens[i + 1][1]}' "
                                     "in JAAS config")
        i += 2
        options: dict[str, str] = {}
        while True:
            if i >= len(tokens):
                raise InvalidConfigError("JAAS config entry not terminated by semi-colon")
            kind, value = tokens[i]
            if kind == ";":
                i += 1
                break
            if kind != "word" or i + 2 >= len(tokens) or tokens[i + 1][0] != "=" \
                    or tokens[i + 2][0] not in ("word", "quoted"):
                raise InvalidConfigError(f"Invalid JAAS config: option {value!r} is not "
                                         "name=value")
            options[value] = tokens[i + 2][1]
            i += 3
        modules.append(LoginModule(class_name, flag, options))
    return modules


def single_login_module(text: str, *, config_name: str) -> LoginModule:
    """The one login module of a broker's ``sasl.jaas.config`` (``config_name`` names the
    setting in errors); InvalidConfigError, as Kafka's ``JaasContext.load``, unless exactly
    one."""
    try:
        modules = parse_jaas_config(text)
    except InvalidConfigError as exc:
        raise InvalidConfigError(f"{config_name}: {exc}") from None
    if len(modules) != 1:
        raise InvalidConfigError(f"{config_name}: JAAS config property contains "
                                 f"{len(modules)} login modules, should be 1 module")
    return modules[0]
