"""Connection limits as Kafka's ``ConnectionQuotas`` (SocketServer.scala) applies them when a
connection is accepted: ``max.connections`` (broker-wide and ``listener.name.<l>.``),
``max.connections.per.ip`` with ``max.connections.per.ip.overrides``,
``max.connection.creation.rate`` (broker-wide and per listener) and the per-IP
``connection_creation_rate`` quota (AlterClientQuotas on an ``ip`` entity).

What Kafka does, and what this module does on asyncio:

- **Over ``max.connections``, or over a creation rate**: Kafka's acceptor thread *waits*
  (``waitForConnectionSlot``): the connection it accepted waits for a slot or for the
  throttle time, and the ones behind it wait in the kernel's backlog. asyncio accepts on its
  own, so here an accepted connection that may not be served yet is *held*: reading is paused
  (nothing it sends is read, so it is not served) and it joins a FIFO queue; connections that
  arrive while any is held queue behind it, as Kafka's backlog does. The head is admitted
  once a slot frees (a connection closes, or the limit is raised) and its throttle time has
  passed. The queue is bounded by ``socket.listen.backlog.size``, the kernel's bound: a
  connection beyond it is closed.
- The inter-broker listener, when the broker has more than one listener, is not held by the
  broker-wide ``max.connections`` nor the broker-wide creation rate (``protectedListener``);
  its own listener limits still apply. (Kafka then closes the least recently used
  connection of another listener; seglog does not.)
- **Over ``max.connections.per.ip``** (or the IP's override): the new connection is closed
  at once (``TooManyConnectionsException``).
- **Over the IP's ``connection_creation_rate``**: the connection is closed after the throttle
  time (``ConnectionThrottledException``: Kafka delays the close so the client does not
  reconnect at once), and it is taken back off the rates it was counted on.

Rates are Kafka's (:class:`~seglog.server.quotas.Rate` over ``quota.window.num`` samples of
``quota.window.size.seconds``), a throttle time bounded by one window. Every limit is read
from the live config at each accept (all of them are dynamic in Kafka); host names in the
overrides are resolved when the overrides change. Everything runs on the event loop thread.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import time
from collections import deque
from typing import Any, Callable, Protocol

from ..configdef import parse_connection_overrides
from .quotas import Rate

__all__ = ["ConnectionQuotas", "Held"]

log = logging.getLogger("seglog.server")

#: How often held connections look for a slot again (a raised limit is seen this late).
_SLOT_POLL_S = 0.25


class Held(Protocol):
    """What the quotas need of a connection: its address, listener and transport."""

    client_host: str
    transport: asyncio.Transport | None

    @property
    def security(self) -> Any:
        """The connection's ConnectionSecurity (``listener_name``)."""


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def _rate_throttle_ms(rate: Rate, bound: float, now_ms: int, throttle_ms_max: int) -> int:
    """Record one connection on ``rate``; the throttle time when it is over ``bound``
    (``recordAndGetThrottleTimeMs`` with ``boundedThrottleTime``)."""
    rate.record(1.0, now_ms)
    observed = rate.measure(now_ms)
    if observed <= bound:
        return 0
    throttle_ms = round((observed - bound) / bound * rate.window_size_ms(now_ms))
    return max(0, min(int(throttle_ms), throttle_ms_max))


class _Waiting:
    __slots__ = ("connection", "until_ms")

    def __init__(self, connection: Held):
        self.connection = connection
        self.until_ms: int | None = None  # set once its rates are recorded (at the head)


class ConnectionQuotas:
    """One broker's connection limits. ``config()`` returns the live broker config (with
    ``listener_value``); ``ip_rate(ip)`` the ``connection_creation_rate`` quota of an IP
    (None: none); ``register(connection)`` admits a connection (the server's table);
    ``inter_broker_listener`` and ``listener_names`` decide the protected listener."""

    def __init__(self, *, loop: asyncio.AbstractEventLoop, config: Callable[[], Any],
                 ip_rate: Callable[[str], float | None], register: Callable[[Any], None],
                 inter_broker_listener: str, listener_names: frozenset[str]):
        self.loop = loop
        self._config = config
        self._ip_rate = ip_rate
        self._register = register
        self.inter_broker_listener = inter_broker_listener.upper()
        self.listener_names = frozenset(name.upper() for name in listener_names)
        self.total = 0
        self.per_ip: dict[str, int] = {}
        self.per_listener: dict[str, int] = {}
        self._waiting: deque[_Waiting] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._broker_rate: Rate | None = None
        self._listener_rates: dict[str, Rate] = {}
        self._ip_rates: dict[str, Rate] = {}
        self._overrides_text: str | None = None
        self._overrides: dict[str, int] = {}

    # --- limits now ------------------------------------------------------------------------

    def _setting(self, name: str, listener: str | None = None) -> int:
        config = self._config()
        if listener is not None and hasattr(config, "listener_value"):
            value: int = config.listener_value(listener, name)
        else:
            value = config[name]
        return value

    def _window(self) -> tuple[int, int]:
        config = self._config()
        try:
            return int(config["quota.window.num"]), int(config["quota.window.size.seconds"])
        except KeyError:
            return 11, 1

    def _new_rate(self) -> Rate:
        samples, window_s = self._window()
        return Rate(samples=samples, window_ms=window_s * 1000)

    def _protected(self, listener: str) -> bool:
        return listener == self.inter_broker_listener and len(self.listener_names) > 1

    def per_ip_max(self, host: str) -> int:
        """``max.connections.per.ip``, or the override for ``host``."""
        text = str(self._setting("max.connections.per.ip.overrides") or "")
        if text != self._overrides_text:
            self._overrides_text = text
            self._overrides = {}
            for name, count in parse_connection_overrides(text).items():
                try:
                    address = str(ipaddress.ip_address(name))
                except ValueError:
                    try:  # Kafka's InetAddress.getByName; a name is resolved on change only
                        address = socket.gethostbyname(name)
                    except OSError:
                        log.warning("max.connections.per.ip.overrides: %s does not resolve",
                                    name)
                        continue
                self._overrides[address] = count
        found = self._overrides.get(host)
        return self._setting("max.connections.per.ip") if found is None else found

    def _slot_available(self, listener: str) -> bool:
        if self.per_listener.get(listener, 0) >= self._setting("max.connections", listener):
            return False
        if self._protected(listener):
            return True
        return self.total < self._setting("max.connections")

    # --- accept ----------------------------------------------------------------------------

    def admit(self, connection: Held) -> bool:
        """A connection was accepted: admitted now (registered), held (reading paused, see
        the module docstring) or refused (False: the caller closes it at once)."""
        if self._waiting:
            return self._hold(connection)
        waiting = _Waiting(connection)
        self._record_rates(waiting)
        if waiting.until_ms or not self._slot_available(self._listener(connection)):
            return self._hold(connection, waiting)
        return self._finish(connection)

    def _listener(self, connection: Held) -> str:
        return str(connection.security.listener_name).upper()

    def _record_rates(self, waiting: _Waiting) -> None:
        """``recordConnectionAndGetThrottleTimeMs``: broker-wide (unless the listener is
        protected) and the listener's creation rate."""
        listener = self._listener(waiting.connection)
        samples, window_s = self._window()
        now_ms = _now_ms()
        throttle_ms = 0
        if not self._protected(listener):
            if self._broker_rate is None:
                self._broker_rate = self._new_rate()
            throttle_ms = _rate_throttle_ms(
                self._broker_rate, self._setting("max.connection.creation.rate"), now_ms,
                window_s * 1000)
        rate = self._listener_rates.get(listener)
        if rate is None:
            rate = self._listener_rates[listener] = self._new_rate()
        throttle_ms = max(throttle_ms, _rate_throttle_ms(
            rate, self._setting("max.connection.creation.rate", listener), now_ms,
            window_s * 1000))
        waiting.until_ms = now_ms + throttle_ms if throttle_ms else 0

    def _hold(self, connection: Held, waiting: _Waiting | None = None) -> bool:
        backlog = int(self._setting("socket.listen.backlog.size"))
        if len(self._waiting) >= max(backlog, 1):
            log.warning("connection from %s refused: %d connections wait already "
                        "(socket.listen.backlog.size)", connection.client_host,
                        len(self._waiting))
            return False
        transport = connection.transport
        if transport is not None:
            transport.pause_reading()
        self._waiting.append(waiting if waiting is not None else _Waiting(connection))
        self._schedule()
        return True

    def _schedule(self) -> None:
        """Wake :meth:`_pump` when the head's throttle time ends (a freed slot calls it
        itself)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._waiting:
            return
        head = self._waiting[0]
        if head.until_ms is None:
            self.loop.call_soon(self._pump)
            return
        delay_ms = head.until_ms - _now_ms()
        # Waiting for a slot: a closing connection wakes it, a raised limit (a dynamic
        # config) is seen at the next poll.
        self._timer = self.loop.call_later(
            delay_ms / 1000.0 if delay_ms > 0 else _SLOT_POLL_S, self._pump)

    def _pump(self) -> None:
        """Admit held connections from the head while their time has come and a slot is
        free."""
        self._timer = None
        for _ in range(len(self._waiting)):
            head = self._waiting[0]
            transport = head.connection.transport
            if transport is None or transport.is_closing():
                self._waiting.popleft()
                continue
            if head.until_ms is None:
                self._record_rates(head)
            assert head.until_ms is not None
            if head.until_ms > _now_ms() or not self._slot_available(
                    self._listener(head.connection)):
                break
            self._waiting.popleft()
            if self._finish(head.connection):
                transport.resume_reading()
            else:
                transport.abort()
        self._schedule()

    def _finish(self, connection: Held) -> bool:
        """The rest of ``inc``: the IP's creation rate, then the per-IP count."""
        host = connection.client_host
        listener = self._listener(connection)
        ip_bound = self._ip_rate(host)
        if ip_bound is not None:
            rate = self._ip_rates.get(host)
            if rate is None:
                rate = self._ip_rates[host] = self._new_rate()
            _samples, window_s = self._window()
            now_ms = _now_ms()
            throttle_ms = _rate_throttle_ms(rate, ip_bound, now_ms, window_s * 1000)
            if throttle_ms > 0:
                # Not counted after all (``updateListenerMetrics``); closed once the throttle
                # time is over, so the client does not come straight back.
                rate.record(-1.0, now_ms)
                if not self._protected(listener) and self._broker_rate is not None:
                    self._broker_rate.record(-1.0, now_ms)
                listener_rate = self._listener_rates.get(listener)
                if listener_rate is not None:
                    listener_rate.record(-1.0, now_ms)
                log.info("connection from %s throttled %d ms (connection_creation_rate=%s);"
                         " closing it then", host, throttle_ms, ip_bound)
                transport = connection.transport
                if transport is not None:
                    transport.pause_reading()
                    self.loop.call_later(throttle_ms / 1000.0, transport.abort)
                return True
        count = self.per_ip.get(host, 0)
        limit = self.per_ip_max(host)
        if count >= limit:
            log.warning("connection from %s refused: max.connections.per.ip=%d reached",
                        host, limit)
            return False
        self.per_ip[host] = count + 1
        self.per_listener[listener] = self.per_listener.get(listener, 0) + 1
        self.total += 1
        self._register(connection)
        return True

    # --- close -----------------------------------------------------------------------------

    def released(self, connection: Held) -> None:
        """An admitted connection closed (``dec``): its slot goes to the next held one."""
        host = connection.client_host
        listener = self._listener(connection)
        left = self.per_ip.get(host, 1) - 1
        if left > 0:
            self.per_ip[host] = left
        else:
            self.per_ip.pop(host, None)
        left = self.per_listener.get(listener, 1) - 1
        if left > 0:
            self.per_listener[listener] = left
        else:
            self.per_listener.pop(listener, None)
        self.total = max(self.total - 1, 0)
        if self._waiting:
            self.loop.call_soon(self._pump)

    def config_changed(self) -> None:
        """A limit may have been raised: try the held connections again."""
        if self._waiting:
            self.loop.call_soon(self._pump)

    def close_waiting(self) -> None:
        """Shutdown: close every held connection (never served) and stop the timer."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._waiting:
            transport = self._waiting.popleft().connection.transport
            if transport is not None and not transport.is_closing():
                transport.abort()

    @property
    def waiting(self) -> int:
        """How many accepted connections are held (not served yet)."""
        return len(self._waiting)
