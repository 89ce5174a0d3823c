"""A cluster's delegation tokens in ZooKeeper, where Kafka 2.x keeps them: one znode per
token, ``/delegation_token/tokens/<token id>`` holding ``{"version":1,"owner":"User:alice",
"tokenRequester":"User:alice","renewers":["User:admin"],"issueTimestamp":...,
"expiryTimestamp":...,"maxTimestamp":...,"tokenId":"..."}`` (the HMAC is never stored: every
broker derives it from ``delegation.token.secret.key``), and each change announced by a
persistent sequential ``/delegation_token/token_changes/token_change_<seq>`` holding the
token id (Kafka's ``DelegationTokenManager`` over ``ZkNodeChangeNotificationListener``).

:class:`TokenZnodes` reads and writes those znodes for the server's token store (which owns
what a token means) and calls ``on_change(token_id)`` on the loop for each new notification
(the caller reads every token at start, before :meth:`TokenZnodes.start`). Notifications older than 15 minutes are deleted by whichever broker sees them first, as
Kafka does.

Runs on the broker's event loop; ZooKeeper calls go through ``run_blocking``; kazoo's watch
callbacks only wake the loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, Awaitable, Callable

from .zk_client import NodeExistsError
from ..log_limits import REPEATS

__all__ = ["TOKENS_PATH", "TOKEN_CHANGES_PATH", "TokenZnodes"]

log = logging.getLogger("seglog.cluster.delegation_tokens")

TOKENS_PATH = "/delegation_token/tokens"
TOKEN_CHANGES_PATH = "/delegation_token/token_changes"
_CHANGE_PREFIX = "token_change_"
#: Processed notifications older than this are deleted (Kafka's 15 minutes).
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
#: A bound on one token znode (bytes): far above any real one.
TOKEN_ZNODE_BYTES_MAX = 64 * 1024


class TokenZnodes:
    """The token znodes of a cluster (see the module docstring). ``zk``: the broker's
    :class:`~seglog.cluster.zk_client.KafkaZkClient`; ``run_blocking(fn, *args)``."""

    def __init__(self, zk: Any, run_blocking: Callable[..., Awaitable[Any]],
                 loop: asyncio.AbstractEventLoop):
        self._zk = zk
        self._run_blocking = run_blocking
        self._loop = loop
        self._on_change: Callable[[str], Awaitable[None]] | None = None
        self._last_seq = -1
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._watch: Any = None

    # --- reads and writes (blocking: through run_blocking) ---------------------------------

    def read_all(self) -> dict[str, dict[str, Any]]:
        """Every token's document by id (a znode that does not parse is logged and left
        out)."""
        out = {}
        for token_id in self._zk.get_children(TOKENS_PATH):
            document = self.read(token_id)
            if document is not None:
                out[token_id] = document
        return out

    def read(self, token_id: str) -> dict[str, Any] | None:
        """One token's document, None when absent or unreadable."""
        data, _ = self._zk.get_data_and_version(f"{TOKENS_PATH}/{token_id}")
        if data is None:
            return None
        try:
            if len(data) > TOKEN_ZNODE_BYTES_MAX:
                raise ValueError("too large")
            document = json.loads(data)
            if not isinstance(document, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            log.error("delegation token znode %s/%s is unreadable: %s", TOKENS_PATH, token_id,
                      exc)
            return None
        return document

    def write(self, token_id: str, document: dict[str, Any]) -> None:
        """Create or replace the token's znode, then announce it."""
        path = f"{TOKENS_PATH}/{token_id}"
        data = json.dumps(document, separators=(",", ":")).encode("utf-8")
        try:
            self._zk.create_recursive(path, data)
        except NodeExistsError:
            done, _ = self._zk.conditional_update_path(path, data, -1)
            if not done:
                raise
        self._announce(token_id)

    def delete(self, token_id: str) -> None:
        """Delete the token's znode (absent: nothing), then announce it."""
        self._zk.delete_path(f"{TOKENS_PATH}/{token_id}")
        self._announce(token_id)

    def _ensure_changes_path(self) -> None:
        self._zk.create_recursive(TOKEN_CHANGES_PATH, throw_if_exists=False)

    def _announce(self, token_id: str) -> None:
        self._zk.create_recursive(TOKEN_CHANGES_PATH, throw_if_exists=False)
        self._zk.create_sequential(f"{TOKEN_CHANGES_PATH}/{_CHANGE_PREFIX}",
                                   token_id.encode("utf-8"))

    # --- notifications ---------------------------------------------------------------------

    async def start(self, on_change: Callable[[str], Awaitable[None]]) -> None:
        """Watch the notifications; ``on_change`` is awaited for each one (see the module
        docstring). The notifications present now are taken as seen (the caller read every
        token already)."""
        self._on_change = on_change
        await self._run_blocking(self._ensure_changes_path)
        children = await self._run_blocking(self._zk.get_children, TOKEN_CHANGES_PATH)
        self._last_seq = max((_seq(c) for c in children), default=-1)
        self._watch = await self._run_blocking(self._zk.watch_children, TOKEN_CHANGES_PATH,
                                               self._on_children)
        self._task = self._loop.create_task(self._run(), name="seglog-token-changes")

    async def stop(self) -> None:
        """Stop watching. Idempotent."""
        if self._watch is not None:
            self._watch.stop()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass

    def _on_children(self, _children: list[str]) -> bool:
        try:
            self._loop.call_soon_threadsafe(self._wake.set)
        except RuntimeError:
            return False  # the loop is closed
        return self._task is not None or self._on_change is not None

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._pass()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - ZooKeeper away: the same pass again later
                REPEATS.log(log, logging.WARNING, "processing delegation token changes failed; "
                            "retrying", exc_info=True)
                await asyncio.sleep(0.5)
                self._wake.set()

    async def _pass(self) -> None:
        assert self._on_change is not None
        children = await self._run_blocking(self._zk.get_children, TOKEN_CHANGES_PATH)
        now_ms = time.time_ns() // 1_000_000
        for name in sorted(children, key=_seq):
            seq = _seq(name)
            path = f"{TOKEN_CHANGES_PATH}/{name}"
            if seq > self._last_seq:
                found = await self._run_blocking(self._zk.get_data_and_ctime, path)
                if found is not None and found[0]:
                    await self._on_change(found[0].decode("utf-8", "replace"))
                self._last_seq = seq
            else:
                found = await self._run_blocking(self._zk.get_data_and_ctime, path)
                if found is not None and now_ms - found[1] > CHANGE_EXPIRATION_MS:
                    await self._run_blocking(self._zk.delete_path, path)


def _seq(name: str) -> int:
    suffix = name[len(_CHANGE_PREFIX):] if name.startswith(_CHANGE_PREFIX) else ""
    return int(suffix) if suffix.isdigit() else -1
