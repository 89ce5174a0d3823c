"""``seglog format``: give a data directory its first SCRAM users before the broker starts,
as Kafka 4.4's ``kafka-storage format --add-scram`` does for a KRaft cluster.

A broker whose only listener asks SCRAM needs a user to log in with before anyone can call
AlterUserScramCredentials: this is that user. ``--add-scram`` takes Kafka's syntax
(``ScramParser``): ``'SCRAM-SHA-256=[name=admin,password=admin-secret]'``, optionally with
``iterations=8192`` (default 4096, Kafka's minimum), or a precomputed
``salt=<base64>,saltedpassword=<base64>,iterations=N`` instead of a password. The credentials
go to the data directory's credential file (:mod:`seglog.server.sasl.credentials`), durably;
the directory is created when missing, and refused while a broker holds it (a running
broker would not see the change until it restarts, and its own changes would be lost).

Exit codes: 0 done, 2 bad arguments or a directory in use.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import os
import re
import sys
from typing import Any

from .errors import LogLockedError
from .sasl.scram import (ScramCredential, credential_from_password,
                         credential_from_salted_password, mechanism_by_name)

__all__ = ["DEFAULT_ITERATIONS", "add_parser", "main", "parse_add_scram"]

#: Kafka's ``ScramParser`` default and minimum iteration count.
DEFAULT_ITERATIONS = 4096
_ITERATIONS_MAX = 16384
_ENTRY = re.compile(r"^\s*([A-Za-z0-9-]+)\s*=\s*\[(.*)\]\s*$", re.S)


def parse_add_scram(text: str) -> tuple[str, str, ScramCredential]:
    """``'SCRAM-SHA-256=[name=alice,password=alice-secret]'`` -> ``(user, mechanism name,
    credential)``, as Kafka's ``ScramParser``; ValueError with a message naming what is
    wrong (unknown mechanism, no name, neither password nor salt+saltedpassword, iterations
    outside 4096..16384)."""
    match = _ENTRY.match(text)
    if match is None:
        raise ValueError(f"--add-scram {text!r}: expected MECHANISM=[name=...,password=...]")
    mechanism = mechanism_by_name(match.group(1).upper())
    if mechanism is None:
        raise ValueError(f"--add-scram {text!r}: unknown SCRAM mechanism {match.group(1)}; "
                         "use SCRAM-SHA-256 or SCRAM-SHA-512")
    fields: dict[str, str] = {}
    for item in match.group(2).split(","):
        key, sep, value = item.partition("=")
        key = key.strip().lower()
        if not sep or not key:
            raise ValueError(f"--add-scram {text!r}: {item!r} is not key=value")
        if key not in ("name", "password", "salt", "saltedpassword", "iterations"):
            raise ValueError(f"--add-scram {text!r}: unknown key {key}")
        fields[key] = value.strip().strip('"')
    user = fields.get("name")
    if not user:
        raise ValueError(f"--add-scram {text!r}: you must supply 'name'")
    try:
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise ValueError(f"--add-scram {text!r}: iterations is not a number") from None
    if not DEFAULT_ITERATIONS <= iterations <= _ITERATIONS_MAX:
        raise ValueError(f"--add-scram {text!r}: iterations {iterations} outside "
                         f"{DEFAULT_ITERATIONS}..{_ITERATIONS_MAX}")
    if "password" in fields:
        if "saltedpassword" in fields:
            raise ValueError(f"--add-scram {text!r}: give password or saltedpassword, not both")
        salt = _base64(fields["salt"], text) if "salt" in fields else None
        credential = credential_from_password(mechanism, fields["password"], iterations, salt)
    elif "saltedpassword" in fields and "salt" in fields:
        credential = credential_from_salted_password(
            mechanism, salt=_base64(fields["salt"], text),
            salted_password=_base64(fields["saltedpassword"], text), iterations=iterations)
    else:
        raise ValueError(f"--add-scram {text!r}: you must supply 'password', or 'salt' and "
                         "'saltedpassword'")
    return user, mechanism.name, credential


def _base64(value: str, text: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"--add-scram {text!r}: {value!r} is not base64") from None


def add_parser(sub: Any) -> None:
    """Add ``seglog format`` to the ``seglog`` command's subparsers."""
    parser = sub.add_parser(
        "format", help="add the first SCRAM users to a data directory (kafka-storage format)",
        description="Add SCRAM credentials to a data directory before `seglog serve` starts "
                    "on it, as `kafka-storage format --add-scram` does (the directory is "
                    "created when missing; refused while a broker holds it).")
    parser.add_argument("--data-dir", required=True, metavar="DIR",
                        help="the broker's data directory")
    parser.add_argument("--add-scram", "-S", dest="scram", action="append", default=[],
                        required=True, metavar="ENTRY",
                        help="'SCRAM-SHA-256=[name=alice,password=alice-secret]' "
                             "(repeatable; iterations=N optional, default 4096)")


def main(args: argparse.Namespace) -> int:
    """Run ``seglog format``; returns the exit code."""
    from .server.sasl.credentials import FileCredentialStore
    from .storage.locking import lock_directory

    try:
        changes = [parse_add_scram(text) for text in args.scram]
    except ValueError as exc:
        print(f"seglog format: {exc}", file=sys.stderr)
        return 2
    os.makedirs(args.data_dir, exist_ok=True)
    try:
        lock = lock_directory(args.data_dir)
    except LogLockedError as exc:
        print(f"seglog format: {exc}; stop the broker first", file=sys.stderr)
        return 2
    with lock:
        store = FileCredentialStore(args.data_dir)
        store.load()
        asyncio.run(store.alter(changes))
    for user, mechanism, _ in changes:
        print(f"seglog format: {mechanism} credential of user {user} added to "
              f"{args.data_dir}")
    return 0
