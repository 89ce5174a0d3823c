"""Delegation tokens (KIP-48), as Kafka 4.4's ``DelegationTokenControlManager`` keeps them.

A token is made for an owner (``User:<name>``) by an authenticated requester: a token id (a
random UUID in Kafka's base64 form), an HMAC-SHA512 of the id under
``delegation.token.secret.key`` (the token's password, never stored: recomputed from the
secret), the issue time, an expiry (issue + ``delegation.token.expiry.time.ms``, renewable)
and a max time (issue + ``delegation.token.max.lifetime.ms``, or less when asked). A client
then logs in with SCRAM, the token id as user name, the base64 HMAC as password and the
``tokenauth=true`` extension; its principal is the token's owner, marked token-authenticated
(such a principal may not create, renew, expire or describe tokens). Without a secret key
tokens are disabled: every token API answers DELEGATION_TOKEN_AUTH_DISABLED.

A lone broker keeps the tokens (not their HMACs) in ``delegation-tokens.json`` in its data
directory, replaced durably as the credential file is; a corrupt file stops the start
(:class:`~seglog.errors.CorruptCredentialsError`). A cluster keeps them in ZooKeeper, one
znode per token as Kafka 2.x (:mod:`seglog.cluster.delegation_tokens`), and every broker
follows the change notifications, so a token made through one broker logs in at any. Expired tokens are removed when the store
is next used after ``delegation.token.expiry.check.interval.ms`` (Kafka sweeps them on that
interval); a login with an expired token is refused (Kafka lets it in with a session that
expires at once).

Mutated on the event loop thread only.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import os
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Awaitable, Callable

from ...errors import CorruptCredentialsError
from ...sasl.scram import MECHANISMS, ScramMechanism, TokenCredential, credential_from_password
from ..principal import KafkaPrincipal
from .credentials import write_durably

__all__ = ["TOKENS_FILE", "TokenInfo", "TokenStore", "token_hmac"]

log = logging.getLogger("seglog.server.tokens")

#: The token file's name in the data directory.
TOKENS_FILE = "delegation-tokens.json"
_VERSION = 1
#: Kafka's ``DelegationTokenManager.ErrorTimestamp``.
ERROR_TIMESTAMP_MS = -1


def token_hmac(secret: str, token_id: str) -> bytes:
    """Kafka's ``createHmac``: HMAC-SHA512 of the token id under the secret key."""
    return hmac.new(secret.encode("utf-8"), token_id.encode("utf-8"), hashlib.sha512).digest()


@dataclass(frozen=True)
class TokenInfo:
    """One token (Kafka's ``TokenInformation``): ``token_id``, ``owner``, ``requester``,
    ``renewers``, ``issue_ms``, ``expiry_ms``, ``max_ms``; ``hmac`` is derived."""

    token_id: str
    owner: KafkaPrincipal
    requester: KafkaPrincipal
    renewers: tuple[KafkaPrincipal, ...]
    issue_ms: int
    expiry_ms: int
    max_ms: int
    hmac: bytes = field(default=b"", compare=False)

    def owner_or_renewer(self, principal: KafkaPrincipal) -> bool:
        """Kafka's ``ownerOrRenewer``: the owner, the requester or a renewer."""
        principal = principal.without_token()
        return principal in (self.owner, self.requester) or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        """Past its expiry or its max time."""
        return self.max_ms < now_ms or self.expiry_ms < now_ms

    def to_document(self) -> dict[str, object]:
        """Kafka 2.x's token znode document (``DelegationTokenInfoZNode``), also the file's
        entry; no HMAC."""
        return {"version": 1, "owner": str(self.owner), "tokenRequester": str(self.requester),
                "renewers": [str(r) for r in self.renewers],
                "issueTimestamp": self.issue_ms, "expiryTimestamp": self.expiry_ms,
                "maxTimestamp": self.max_ms, "tokenId": self.token_id}

    @classmethod
    def from_document(cls, document: dict[str, object]) -> "TokenInfo":
        """Parse :meth:`to_document`'s form; ValueError / KeyError / TypeError when it does
        not parse."""
        renewers = document["renewers"]
        if not isinstance(renewers, list):
            raise ValueError("renewers is not a list")
        owner = str(document["owner"])
        return cls(token_id=str(document["tokenId"]), owner=KafkaPrincipal.parse(owner),
                   requester=KafkaPrincipal.parse(str(document.get("tokenRequester", owner))),
                   renewers=tuple(KafkaPrincipal.parse(str(r)) for r in renewers),
                   issue_ms=int(str(document["issueTimestamp"])),
                   expiry_ms=int(str(document["expiryTimestamp"])),
                   max_ms=int(str(document["maxTimestamp"])))


def _kafka_uuid() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: 22 characters of URL-safe base64."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class TokenStore:
    """The broker's delegation tokens (see the module docstring). ``secret`` is
    ``delegation.token.secret.key`` (None or empty: disabled); ``max_lifetime_ms``,
    ``renew_ms`` (``delegation.token.expiry.time.ms``) and ``sweep_interval_ms`` are Kafka's
    settings; ``data_dir`` holds the file; ``now_ms`` is the wall clock."""

    def __init__(self, data_dir: str, *, secret: str | None, max_lifetime_ms: int,
                 renew_ms: int, sweep_interval_ms: int, now_ms: Callable[[], int]):
        self.path = os.path.join(data_dir, TOKENS_FILE)
        self.secret = secret or None
        self.max_lifetime_ms = max_lifetime_ms
        self.renew_ms = renew_ms
        self.sweep_interval_ms = sweep_interval_ms
        self.now_ms = now_ms
        self._tokens: dict[str, TokenInfo] = {}
        self._by_hmac: dict[bytes, str] = {}
        self._credentials: dict[tuple[str, str], TokenCredential] = {}
        self._next_sweep_ms = 0
        self._lock = asyncio.Lock()
        self._znodes: Any = None
        self._run_blocking: Callable[..., Awaitable[Any]] | None = None

    @property
    def enabled(self) -> bool:
        """Whether a secret key is set."""
        return self.secret is not None

    def load(self) -> None:
        """Read the file (absent: no tokens); CorruptCredentialsError when it does not
        parse. (A cluster's store reads ZooKeeper instead: :meth:`open_znodes`.)"""
        try:
            with open(self.path, "rb") as file:
                raw = file.read()
        except FileNotFoundError:
            return
        try:
            document = json.loads(raw)
            if not isinstance(document, dict) or document.get("version") != _VERSION:
                raise ValueError("not a version 1 token file")
            tokens = [TokenInfo.from_document(t) for t in document["tokens"]]
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise CorruptCredentialsError(f"delegation token file {self.path} is corrupt: "
                                          f"{exc}", path=self.path) from None
        for token in tokens:
            self._index(token)

    async def open_znodes(self, znodes: Any, run_blocking: Callable[..., Awaitable[Any]]
                          ) -> None:
        """Keep the tokens in ZooKeeper instead of the file (a cluster:
        :class:`~seglog.cluster.delegation_tokens.TokenZnodes`): read them all, then follow
        the change notifications."""
        self._znodes = znodes
        self._run_blocking = run_blocking
        for token_id, document in (await run_blocking(znodes.read_all)).items():
            self._take_document(token_id, document)
        await znodes.start(self._token_changed)

    async def close(self) -> None:
        """Stop following ZooKeeper's notifications (nothing for the file)."""
        if self._znodes is not None:
            await self._znodes.stop()

    def _take_document(self, token_id: str, document: dict[str, Any] | None) -> None:
        if document is None:
            self._drop(token_id)
            return
        try:
            self._index(TokenInfo.from_document(document))
        except (ValueError, KeyError, TypeError) as exc:
            log.error("delegation token %s is unreadable: %s", token_id, exc)

    async def _token_changed(self, token_id: str) -> None:
        assert self._run_blocking is not None
        self._drop(token_id)  # its credentials are remade from the new expiry
        self._take_document(token_id, await self._run_blocking(self._znodes.read, token_id))

    def _index(self, token: TokenInfo) -> TokenInfo:
        if self.secret is not None:
            token = replace(token, hmac=token_hmac(self.secret, token.token_id))
            self._by_hmac[token.hmac] = token.token_id
        self._tokens[token.token_id] = token
        return token

    def _drop(self, token_id: str) -> None:
        token = self._tokens.pop(token_id, None)
        if token is not None:
            self._by_hmac.pop(token.hmac, None)
        for name in MECHANISMS:
            self._credentials.pop((token_id, name), None)

    async def _persist(self, token_id: str) -> None:
        """Store the change of one token: its znode (a cluster), or the whole file."""
        if self._znodes is not None:
            assert self._run_blocking is not None
            token = self._tokens.get(token_id)
            if token is None:
                await self._run_blocking(self._znodes.delete, token_id)
            else:
                await self._run_blocking(self._znodes.write, token_id, token.to_document())
            return
        await self._save()

    async def _save(self) -> None:
        document = {"version": _VERSION,
                    "tokens": [t.to_document() for t in self._tokens.values()]}
        data = json.dumps(document, indent=1).encode("utf-8")
        await asyncio.get_running_loop().run_in_executor(None, write_durably, self.path, data)

    async def _sweep(self) -> None:
        now = self.now_ms()
        if now < self._next_sweep_ms:
            return
        self._next_sweep_ms = now + self.sweep_interval_ms
        expired = [t.token_id for t in self._tokens.values() if t.expired(now)]
        for token_id in expired:
            self._drop(token_id)
            await self._persist(token_id)

    def by_hmac(self, token_hmac_bytes: bytes) -> TokenInfo | None:
        """The token whose HMAC is ``token_hmac_bytes``."""
        token_id = self._by_hmac.get(bytes(token_hmac_bytes))
        return self._tokens.get(token_id) if token_id is not None else None

    def tokens(self) -> list[TokenInfo]:
        """Every token."""
        return list(self._tokens.values())

    async def create(self, owner: KafkaPrincipal, requester: KafkaPrincipal,
                     renewers: tuple[KafkaPrincipal, ...], max_lifetime_ms: int) -> TokenInfo:
        """A new token (``createDelegationToken``), stored durably before it is returned."""
        assert self.secret is not None
        async with self._lock:
            await self._sweep()
            now = self.now_ms()
            lifetime_ms = self.max_lifetime_ms
            if max_lifetime_ms > 0:
                lifetime_ms = min(lifetime_ms, max_lifetime_ms)
            max_ms = now + lifetime_ms
            token = self._index(TokenInfo(
                token_id=_kafka_uuid(), owner=owner.without_token(),
                requester=requester.without_token(), renewers=renewers, issue_ms=now,
                expiry_ms=min(max_ms, now + self.renew_ms), max_ms=max_ms))
            await self._persist(token.token_id)
            return token

    async def set_expiry(self, token: TokenInfo, expiry_ms: int | None) -> None:
        """Give ``token`` a new expiry, or remove it (None), durably."""
        async with self._lock:
            if expiry_ms is None:
                self._drop(token.token_id)
            else:
                self._index(replace(token, expiry_ms=expiry_ms))
            await self._persist(token.token_id)

    async def swept(self) -> None:
        """Remove expired tokens if the sweep interval passed."""
        async with self._lock:
            await self._sweep()

    def lookup(self, token_id: str, mechanism: ScramMechanism) -> TokenCredential | None:
        """The SCRAM credential of a live token (a ``tokenauth=true`` login), None for an
        unknown or expired one. The credential (PBKDF2 of the base64 HMAC, 4096 iterations,
        as Kafka's ``DelegationTokenCache``) is made once per token and mechanism."""
        token = self._tokens.get(token_id)
        if token is None or token.expired(self.now_ms()) or not token.hmac:
            return None
        key = (token_id, mechanism.name)
        cached = self._credentials.get(key)
        if cached is None or cached.expiry_ms != token.expiry_ms:
            credential = self._credentials.get(key)
            scram = credential.credential if credential is not None else \
                credential_from_password(mechanism, base64.b64encode(token.hmac).decode(),
                                         mechanism.min_iterations)
            cached = self._credentials[key] = TokenCredential(
                scram, token.owner.name, token.expiry_ms)
        return cached

