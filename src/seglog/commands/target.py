"""Where a data tool works (a local data directory or a broker) and how it says what it did.

Every data tool (``seglog produce``, ``consume``, ``topics``, ``groups``) takes the same
options, added by :func:`add_target_options`:

* ``--data-dir DIR``: open the data directory directly (no broker may be serving it: a data
  directory has one writer, and the Store's lock says so);
* ``--bootstrap-server HOST:PORT[,HOST:PORT]``: any Kafka-protocol broker, seglog's or Apache
  Kafka's (Kafka's tools' name for it; ``-b`` as kcat's);
* ``--command-config FILE``: Kafka client properties (Kafka's tools' option), translated for
  librdkafka by :func:`librdkafka_config` so that a file written for Kafka's Java tools
  (``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``, PEM trust and key stores)
  works unchanged;
* ``--output text|json``: ``json`` prints one JSON document (or JSON lines for a stream) that
  a script can parse.

Exit codes, the same for every tool (:data:`EXIT_OK` ...): 0 success; 1 the store or the broker
refused or failed (the message names the error, Kafka's error name where there is one); 2 bad
usage (argparse's own code); 3 a check found problems (``dump --verify``) or what was asked
for does not exist (a topic, a group).
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import InvalidConfigError

#: Success.
EXIT_OK = 0
#: The store or the broker refused or failed; the message on stderr says what.
EXIT_ERROR = 1
#: Bad usage (argparse exits with 2 too).
EXIT_USAGE = 2
#: A check found problems, or what was named does not exist.
EXIT_PROBLEMS = 3


@dataclass(frozen=True)
class Target:
    """Where a tool works: exactly one of ``data_dir`` and ``bootstrap_servers`` is set;
    ``client_config`` is librdkafka's configuration for the broker mode (``bootstrap.servers``
    and the translated ``--command-config``), empty in the local mode."""

    data_dir: str | None
    bootstrap_servers: str | None
    client_config: Mapping[str, str]
    output: str

    @property
    def local(self) -> bool:
        """True for ``--data-dir`` (the Store directly), False for ``--bootstrap-server``."""
        return self.data_dir is not None

    @property
    def json(self) -> bool:
        """True when ``--output json`` asked for machine-readable output."""
        return self.output == "json"


def add_target_options(parser: argparse.ArgumentParser, *, output: bool = True) -> None:
    """Add ``--data-dir`` / ``--bootstrap-server`` (one of them required), ``--command-config``
    and, unless ``output`` is False, ``--output text|json`` to a tool's parser."""
    where = parser.add_argument_group("where (one of)")
    mode = where.add_mutually_exclusive_group(required=True)
    mode.add_argument("--data-dir", metavar="DIR",
                      help="a seglog (or Kafka) data directory, opened directly: no broker may "
                           "be serving it")
    mode.add_argument("--bootstrap-server", "-b", metavar="HOST:PORT[,HOST:PORT]",
                      help="any Kafka-protocol broker: seglog serve or Apache Kafka")
    where.add_argument("--command-config", metavar="FILE",
                       help="Kafka client properties for the broker (security.protocol, "
                            "sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...)")
    if output:
        parser.add_argument("--output", "-o", choices=("text", "json"), default="text",
                            help="text for people (default), json for scripts")


def target_from_args(args: argparse.Namespace) -> Target:
    """The :class:`Target` of parsed options; InvalidConfigError for an unreadable or
    untranslatable ``--command-config`` (or one given with ``--data-dir``)."""
    data_dir = getattr(args, "data_dir", None)
    bootstrap = getattr(args, "bootstrap_server", None)
    command_config = getattr(args, "command_config", None)
    output = getattr(args, "output", "text") or "text"
    if data_dir is not None:
        if command_config is not None:
            raise InvalidConfigError("--command-config is for --bootstrap-server: a data "
                                     "directory is opened directly")
        return Target(data_dir, None, {}, output)
    props: dict[str, str] = {}
    if command_config is not None:
        from ..server.config import parse_properties
        try:
            with open(command_config, encoding="utf-8") as f:
                props = parse_properties(f.read())
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidConfigError(f"--command-config {command_config}: {exc}") from exc
    return Target(None, bootstrap, librdkafka_config(bootstrap, props), output)


# Kafka Java client properties with the same name and meaning in librdkafka: passed through.
_SAME_NAME = frozenset({
    "security.protocol", "sasl.mechanism", "sasl.username", "sasl.password", "client.id",
    "ssl.endpoint.identification.algorithm", "request.timeout.ms", "socket.timeout.ms",
    "metadata.max.age.ms", "reconnect.backoff.ms", "reconnect.backoff.max.ms",
    "retry.backoff.ms", "client.rack", "ssl.ca.location", "ssl.certificate.location",
    "ssl.key.location", "ssl.key.password", "ssl.cipher.suites", "ssl.ca.pem",
    "ssl.certificate.pem", "ssl.key.pem", "enable.ssl.certificate.verification",
    # producer and consumer settings a --command-config may carry (Kafka's tools take them
    # there too); librdkafka knows them by these names
    "acks", "compression.type", "linger.ms", "batch.size", "enable.idempotence",
    "transactional.id", "transaction.timeout.ms", "max.in.flight.requests.per.connection",
    "retries", "delivery.timeout.ms", "message.max.bytes", "group.id", "group.instance.id",
    "group.protocol", "auto.offset.reset", "enable.auto.commit", "auto.commit.interval.ms",
    "isolation.level", "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms",
    "fetch.min.bytes", "fetch.max.bytes", "fetch.wait.max.ms", "max.partition.fetch.bytes",
    "partition.assignment.strategy", "check.crcs", "allow.auto.create.topics",
})

# Java-only properties with a librdkafka equivalent under another name.
_RENAMED = {
    "fetch.max.wait.ms": "fetch.wait.max.ms",
}

# Java-only properties that have no effect on librdkafka and that Kafka's own tools' config
# files commonly carry: dropped (their effect is already librdkafka's default behaviour).
_NO_EFFECT = frozenset({
    "key.serializer", "value.serializer", "key.deserializer", "value.deserializer",
    "ssl.truststore.type", "ssl.keystore.type", "ssl.protocol", "ssl.enabled.protocols",
    "default.api.timeout.ms", "connections.max.idle.ms",
})

_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def _jaas_credentials(jaas: str) -> dict[str, str]:
    """``sasl.jaas.config``'s PLAIN or SCRAM login module -> librdkafka's sasl.username and
    sasl.password; InvalidConfigError for another module (GSSAPI, OAUTHBEARER's)."""
    words = shlex.split(jaas.strip().rstrip(";"), posix=False)
    module = words[0] if words else ""
    if not module.endswith(("PlainLoginModule", "ScramLoginModule")):
        raise InvalidConfigError(
            f"sasl.jaas.config: only PlainLoginModule and ScramLoginModule are understood "
            f"here, not {module or '(empty)'}")
    options = {k: v.replace('\\"', '"') for k, v in _JAAS_OPTION.findall(jaas)}
    if "username" not in options or "password" not in options:
        raise InvalidConfigError("sasl.jaas.config: needs username=\"...\" and password=\"...\"")
    return {"sasl.username": options["username"], "sasl.password": options["password"]}


def _pem_store(props: Mapping[str, str], prefix: str) -> None:
    kind = props.get(f"ssl.{prefix}.type", "JKS" if f"ssl.{prefix}.location" in props
                     else "PEM").upper()
    if kind != "PEM":
        raise InvalidConfigError(
            f"ssl.{prefix}.type={kind}: only PEM stores are understood here (librdkafka reads "
            f"no Java key stores); convert it with keytool and openssl")


def librdkafka_config(bootstrap_servers: str | None,
                      props: Mapping[str, str]) -> dict[str, str]:
    """Kafka Java client properties -> librdkafka's configuration, with ``bootstrap.servers``.

    Names both clients share pass through; ``sasl.jaas.config`` (PLAIN or SCRAM) becomes
    ``sasl.username``/``sasl.password``; a PEM ``ssl.truststore.location`` becomes
    ``ssl.ca.location`` and a PEM ``ssl.keystore.location`` (key and certificate in one file,
    as Kafka's PEM key stores) both ``ssl.certificate.location`` and ``ssl.key.location``.
    A property neither client shares nor listed as without effect is refused by name
    (InvalidConfigError), never ignored.
    """
    out: dict[str, str] = {}
    if bootstrap_servers:
        out["bootstrap.servers"] = bootstrap_servers
    for name, value in props.items():
        if name == "bootstrap.servers":
            out.setdefault(name, value)
        elif name in _SAME_NAME:
            out[name] = value
        elif name in _RENAMED:
            out[_RENAMED[name]] = value
        elif name == "sasl.jaas.config":
            out.update(_jaas_credentials(value))
        elif name == "ssl.truststore.location":
            _pem_store(props, "truststore")
            out["ssl.ca.location"] = value
        elif name == "ssl.keystore.location":
            _pem_store(props, "keystore")
            out["ssl.certificate.location"] = value
            out["ssl.key.location"] = value
        elif name in ("ssl.truststore.type", "ssl.keystore.type"):
            _pem_store(props, name.split(".")[1])
        elif name in _NO_EFFECT:
            continue
        else:
            raise InvalidConfigError(
                f"--command-config: {name} is not understood by seglog's tools (they use "
                f"librdkafka); remove it or use librdkafka's name for it")
    if "bootstrap.servers" not in out:
        raise InvalidConfigError("--bootstrap-server (or bootstrap.servers) is required")
    return out


class ToolMessages:
    """What a tool says on stderr, each line ``seglog TOOL: message``: :meth:`say` for news
    (silenced by ``quiet``), :meth:`fail` for the error that ends the command."""

    def __init__(self, tool: str, *, quiet: bool = False) -> None:
        self.tool = tool
        self.quiet = quiet

    def say(self, message: str) -> None:
        """A line of news, unless quiet."""
        if not self.quiet:
            print(f"seglog {self.tool}: {message}", file=sys.stderr, flush=True)

    def fail(self, message: str, code: int) -> int:
        """The error line (printed even when quiet); returns ``code`` for the caller to
        return as the exit code."""
        print(f"seglog {self.tool}: {message}", file=sys.stderr, flush=True)
        return code


def kafka_error_text(error: Any) -> str:
    """A librdkafka ``KafkaError`` (or exception carrying one) as ``NAME: message``."""
    inner = error.args[0] if isinstance(error, Exception) and error.args else error
    name = getattr(inner, "name", None)
    text = getattr(inner, "str", None)
    if callable(name) and callable(text):
        return f"{name()}: {text()}"
    return str(error)
