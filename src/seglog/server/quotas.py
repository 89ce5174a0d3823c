"""Client quotas: Kafka's ``ClientQuotaManager`` / ``ClientRequestQuotaManager`` (KIP-13,
KIP-55, KIP-124, KIP-219), and the table of quota entities DescribeClientQuotas and
AlterClientQuotas read and change (KIP-546).

**Entities.** A quota is set on an entity: a user, a client id, a (user, client id) pair, or
an IP address; a name of None is the ``<default>`` of its type. Each entity holds values for
the keys of its kind: ``producer_byte_rate``, ``consumer_byte_rate`` (bytes/s),
``request_percentage`` (percent of one request thread over the window),
``controller_mutation_rate`` (partitions created or deleted per second, KIP-599: see
:class:`ControllerMutationQuotaManager`) for users and client ids; ``connection_creation_rate`` (connections/s) for IPs
(:mod:`~seglog.server.connection_quotas` enforces it).

**Which quota applies** (``DefaultQuotaCallback.quotaLimit`` / ``quotaMetricTags``, the
KIP-55 order): ``/config/users/<user>/clients/<client-id>``, then
``users/<user>/clients/<default>``, ``users/<user>``, ``users/<default>/clients/<client-id>``,
``users/<default>/clients/<default>``, ``users/<default>``, ``clients/<client-id>``,
``clients/<default>``. The entity found also decides whom the usage is counted for: every
client id of one user shares a ``users/<user>`` quota, every user of one client id shares a
``clients/<client-id>`` quota.

**Measuring** (``Sensor`` + ``Rate`` over ``SampledStat``): each usage key (user tag,
client-id tag) has a rate over ``quota.window.num`` samples of ``quota.window.size.seconds``
each; the rate divides the sum of the samples by the time since the oldest sample started,
counted as at least ``quota.window.num - 1`` whole windows. A record that takes the rate over
the bound is still counted, and the throttle time is what brings the rate back to the bound:
``(rate - bound) / bound * window_ms`` (``QuotaUtils.throttleTime``; request quotas bound it
by one window, ``ClientRequestQuotaManager``).

**Throttling** (KIP-219): the handler answers at once with ``throttle_time_ms`` set; the
connection then reads no request from that client for that long
(:meth:`~seglog.server.connection.Connection.mute_for_ms`, applied by the connection to every
response that carries a throttle time). Produce appends first (Kafka records, then throttles);
a throttled Fetch is answered empty and its bytes are taken back off the rate.

No quota set at all: nothing is recorded (``quotasEnabled``). Everything runs on the event
loop thread. The per-broker table lives in ``BrokerState.extensions`` (:func:`quotas_of`).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import time
from typing import Any, Awaitable, Callable, Generator, Iterable, Mapping

from .context import RawResponse

__all__ = ["CLIENT_ID", "CONNECTION_CREATION_RATE", "CONSUMER_BYTE_RATE",
           "CONTROLLER_MUTATION_RATE", "CONTROLLER_QUOTA_SAMPLES", "CONTROLLER_QUOTA_WINDOW_S",
           "ClientQuotaManager", "ControllerMutationQuotaManager", "MutationQuota", "ClientQuotas", "EXTENSION_KEY",
           "IP", "IP_QUOTA_TYPES", "PRODUCER_BYTE_RATE", "QuotaEntity", "REQUEST_PERCENTAGE",
           "Rate", "SELF_THROTTLED_APIS", "SENSOR_INACTIVE_S", "USER",
           "USER_CLIENT_QUOTA_TYPES", "any_quota", "apply_request_quota", "client_of",
           "entity_of", "fetch_bytes_max", "fetch_throttle_ms", "mutation_quota",
           "produce_throttle_ms",
           "quotas_of", "request_throttle_ms", "with_request_quota"]

#: Entity types (``ClientQuotaEntity.USER`` / ``CLIENT_ID`` / ``IP``).
USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
#: Quota keys (``QuotaConfig``).
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"
#: ``QuotaConfig.userAndClientQuotaConfigs``: key -> Kafka type (long, double).
USER_CLIENT_QUOTA_TYPES = {PRODUCER_BYTE_RATE: "long", CONSUMER_BYTE_RATE: "long",
                           REQUEST_PERCENTAGE: "double", CONTROLLER_MUTATION_RATE: "double"}
#: ``QuotaConfig.ipConfigs``.
IP_QUOTA_TYPES = {CONNECTION_CREATION_RATE: "int"}
#: ``ClientQuotaManager.InactiveSensorExpirationTimeSeconds``: a usage key unused this long
#: is forgotten.
SENSOR_INACTIVE_S = 3600
#: How often the inactive usage keys are swept.
_SWEEP_INTERVAL_S = 60.0
#: ``ClientRequestQuotaManager.NanosToPercentagePerSecond``.
_NANOS_TO_PERCENT = 100.0 / 1e9
#: APIs the request quota never throttles: ApiVersions and SASL (before a principal is
#: known), the ZooKeeper-era inter-broker APIs (cluster actions, exempt in Kafka).
_REQUEST_QUOTA_EXEMPT = frozenset({17, 18, 36, 4, 5, 6, 7, 27})
#: Kafka's ``controller.quota.window.num`` and ``controller.quota.window.size.seconds``
#: defaults: the controller mutation quota's burst is ``samples * window_s * rate``
#: (seglog refuses both configs by name, so these are the values in force).
CONTROLLER_QUOTA_SAMPLES = 11
CONTROLLER_QUOTA_WINDOW_S = 1
#: Where the per-broker table lives in ``BrokerState.extensions``.
EXTENSION_KEY = "seglog.server.quotas"

#: A quota entity: its (type, name) pairs in the order user, client-id (or the one ip pair);
#: a name of None is ``<default>``.
QuotaEntity = tuple[tuple[str, "str | None"], ...]

_TYPE_ORDER = {USER: 0, CLIENT_ID: 1, IP: 2}


def entity_of(pairs: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """The :data:`QuotaEntity` of ``pairs`` in canonical order (user before client-id);
    types outside user / client-id / ip sort last, as given."""
    return tuple(sorted(pairs, key=lambda pair: _TYPE_ORDER.get(pair[0], 3)))


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class Rate:
    """Kafka's ``Rate`` over a ``SampledStat`` of sums: ``samples`` samples of ``window_ms``
    each (plus the one overlapping placeholder Kafka keeps). :meth:`record` adds a value at a
    time; :meth:`measure` is the sum over the live samples per second of the window."""

    __slots__ = ("samples_max", "window_ms", "_samples", "_current")

    def __init__(self, *, samples: int, window_ms: int):
        self.samples_max = max(samples, 1)
        self.window_ms = max(window_ms, 1)
        # [start_ms, last_event_ms, value, event_count]
        self._samples: list[list[float]] = []
        self._current = 0

    def _current_sample(self, now_ms: int) -> list[float]:
        if not self._samples:
            self._samples.append([now_ms, now_ms, 0.0, 0])
        return self._samples[self._current]

    def record(self, value: float, now_ms: int) -> None:
        """Add ``value`` at ``now_ms`` (``SampledStat.record``)."""
        sample = self._current_sample(now_ms)
        if now_ms - sample[0] >= self.window_ms:
            # advance: samples + 1 slots, the extra one for the overlapping sample
            self._current = (self._current + 1) % (self.samples_max + 1)
            if self._current >= len(self._samples):
                sample = [now_ms, now_ms, 0.0, 0]
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample[:] = [now_ms, now_ms, 0.0, 0]
        sample[2] += value
        sample[3] += 1
        sample[1] = now_ms

    def _purge(self, now_ms: int) -> None:
        expire_ms = self.samples_max * self.window_ms
        for sample in self._samples:
            if now_ms - sample[1] >= expire_ms:
                sample[:] = [now_ms, now_ms, 0.0, 0]

    def window_size_ms(self, now_ms: int) -> int:
        """``Rate.windowSize``: the time since the oldest live sample started, counted as at
        least ``samples - 1`` whole windows, at least 1 ms."""
        self._purge(now_ms)
        oldest = min((s[0] for s in self._samples), default=now_ms)
        elapsed_ms = now_ms - oldest
        full_windows = int(elapsed_ms // self.window_ms)
        if full_windows < self.samples_max - 1:
            elapsed_ms += (self.samples_max - 1 - full_windows) * self.window_ms
        return int(max(elapsed_ms, 1))

    def measure(self, now_ms: int) -> float:
        """The rate per second at ``now_ms``."""
        window_ms = self.window_size_ms(now_ms)
        return sum(s[2] for s in self._samples) / (window_ms / 1000.0)


class _Usage:
    """The rate of one usage key and when it was last used (monotonic seconds)."""

    __slots__ = ("rate", "used_s", "throttle_ms_total")

    def __init__(self, rate: Rate):
        self.rate = rate
        self.used_s = time.monotonic()
        self.throttle_ms_total = 0


class ClientQuotaManager:
    """One quota key's manager (``producer_byte_rate``, ``consumer_byte_rate`` or
    ``request_percentage``): the bounds set per entity (:meth:`update_quota`) and the usage
    rates per (user, client-id) tag pair. ``throttle_ms_max`` bounds a throttle time (the
    request quota's one window); None leaves it unbounded."""

    def __init__(self, key: str, *, samples: int, window_s: int,
                 throttle_ms_max: int | None = None):
        self.key = key
        self.samples = samples
        self.window_ms = window_s * 1000
        self.throttle_ms_max = throttle_ms_max
        self._bounds: dict[QuotaEntity, float] = {}
        self._usage: dict[tuple[str, str], _Usage] = {}
        self._swept_s = time.monotonic()
        self._user_quotas = self._client_quotas = self._user_client_quotas = False

    @property
    def enabled(self) -> bool:
        """Whether any quota of this key is set (``quotasEnabled``): nothing is recorded
        otherwise."""
        return bool(self._bounds)

    def update_quota(self, entity: QuotaEntity, bound: float | None) -> None:
        """Set (or with None remove) the bound of ``entity`` (``updateQuota``)."""
        if bound is None:
            self._bounds.pop(entity, None)
        else:
            self._bounds[entity] = float(bound)
        types = [{t for t, _ in e} for e in self._bounds]
        self._user_client_quotas = any(t == {USER, CLIENT_ID} for t in types)
        self._user_quotas = any(t == {USER} for t in types)
        self._client_quotas = any(t == {CLIENT_ID} for t in types)

    def _bound(self, entity: QuotaEntity) -> float | None:
        return self._bounds.get(entity)

    def usage_tags(self, user: str, client_id: str) -> tuple[str, str]:
        """``quotaMetricTags``: the (user, client-id) tags whose rate is charged: the
        entity that applies decides whether the user, the client id or both count."""
        only_client = self._client_quotas and not (self._user_quotas
                                                   or self._user_client_quotas)
        if not self._bounds or only_client:
            return "", client_id
        if self._user_quotas and not (self._client_quotas or self._user_client_quotas):
            return user, ""
        if self._user_client_quotas and not (self._client_quotas or self._user_quotas):
            return user, client_id
        u, c = (USER, user), (CLIENT_ID, client_id)
        du, dc = (USER, None), (CLIENT_ID, None)
        bounds = self._bounds
        if (u, c) in bounds or (u, dc) in bounds:
            return user, client_id
        if (u,) in bounds:
            return user, ""
        if (du, c) in bounds or (du, dc) in bounds:
            return user, client_id
        if (du,) in bounds:
            return user, ""
        return "", client_id

    def quota_limit(self, user_tag: str, client_tag: str) -> float | None:
        """``quotaLimit``: the bound for usage tags ``(user_tag, client_tag)`` in the KIP-55
        order (see the module docstring), or None (no quota)."""
        get = self._bounds.get
        u, c = (USER, user_tag), (CLIENT_ID, client_tag)
        du, dc = (USER, None), (CLIENT_ID, None)
        found: float | None = None
        if user_tag and client_tag:
            for entity in ((u, c), (u, dc), (du, c), (du, dc)):
                found = get(entity)
                if found is not None:
                    return found
        elif user_tag:
            found = get((u,))
            if found is None:
                found = get((du,))
        elif client_tag:
            found = get((c,))
            if found is None:
                found = get((dc,))
        return found

    def _usage_of(self, tags: tuple[str, str]) -> _Usage:
        usage = self._usage.get(tags)
        if usage is None:
            self._sweep()
            usage = self._usage[tags] = _Usage(Rate(samples=self.samples,
                                                    window_ms=self.window_ms))
        usage.used_s = time.monotonic()
        return usage

    def _sweep(self) -> None:
        now_s = time.monotonic()
        if now_s - self._swept_s < _SWEEP_INTERVAL_S:
            return
        self._swept_s = now_s
        for tags in [t for t, u in self._usage.items() if now_s - u.used_s > SENSOR_INACTIVE_S]:
            del self._usage[tags]

    def record_and_get_throttle_ms(self, user: str, client_id: str, value: float,
                                   now_ms: int | None = None) -> int:
        """``maybeRecordAndGetThrottleTimeMs``: count ``value`` for the client and return how
        long it is throttled (0 when within its quota or when no quota is set)."""
        if not self._bounds:
            return 0
        now_ms = _now_ms() if now_ms is None else now_ms
        tags = self.usage_tags(user, client_id)
        usage = self._usage_of(tags)
        rate = usage.rate
        rate.record(value, now_ms)
        bound = self.quota_limit(*tags)
        if bound is None:
            return 0
        observed = rate.measure(now_ms)
        if observed <= bound:
            return 0
        throttle_ms = round((observed - bound) / bound * rate.window_size_ms(now_ms))
        if self.throttle_ms_max is not None:
            throttle_ms = min(throttle_ms, self.throttle_ms_max)
        throttle_ms = max(int(throttle_ms), 0)
        usage.throttle_ms_total += throttle_ms
        return throttle_ms

    def unrecord(self, user: str, client_id: str, value: float,
                 now_ms: int | None = None) -> None:
        """``unrecordQuotaSensor``: take ``value`` back off the client's rate (a throttled
        Fetch that is answered empty)."""
        if not self._bounds:
            return
        now_ms = _now_ms() if now_ms is None else now_ms
        self._usage_of(self.usage_tags(user, client_id)).rate.record(-value, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float:
        """``getMaxValueInQuotaWindow``: the most a client may use in the quota window
        without being throttled (``bound * (samples - 1) * window_s``); infinity without a
        quota."""
        if not self._bounds:
            return math.inf
        bound = self.quota_limit(*self.usage_tags(user, client_id))
        if bound is None:
            return math.inf
        return bound * (self.samples - 1) * (self.window_ms / 1000.0)

    def throttle_ms_total(self, user: str, client_id: str) -> int:
        """The throttle time handed to this client's usage key so far (for tests and
        metrics)."""
        usage = self._usage.get(self.usage_tags(user, client_id))
        return 0 if usage is None else usage.throttle_ms_total


class _TokenBucket:
    """Kafka's ``TokenBucket`` of one usage key: tokens refill at the quota's rate per
    second up to the burst; a record takes its value away (the count may go negative)."""

    __slots__ = ("tokens", "updated_ms", "used_s")

    def __init__(self) -> None:
        # Kafka starts at 0 tokens updated at epoch 0: the first refill fills the bucket.
        self.tokens: float | None = None
        self.updated_ms = 0
        self.used_s = time.monotonic()

    def measure(self, rate: float, burst: float, now_ms: int) -> float:
        """The tokens left at ``now_ms`` (after the refill)."""
        if self.tokens is None:
            self.tokens = burst
        else:
            elapsed_s = max(now_ms - self.updated_ms, 0) / 1000.0
            self.tokens = min(burst, self.tokens + rate * elapsed_s)
        self.updated_ms = now_ms
        self.used_s = time.monotonic()
        return self.tokens

    def record(self, value: float, rate: float, burst: float, now_ms: int) -> float:
        """Take ``value`` tokens at ``now_ms``; the tokens left."""
        self.tokens = min(burst, self.measure(rate, burst, now_ms) - value)
        return self.tokens


class ControllerMutationQuotaManager(ClientQuotaManager):
    """Kafka's ``ControllerMutationQuotaManager`` (KIP-599): ``controller_mutation_rate``
    bounds the partitions a client creates or deletes per second, a token bucket per usage
    key (the same KIP-55 entity lookup as the other quotas) with a burst of ``samples *
    window_s * rate``. :meth:`quota_for` gives one request's :class:`MutationQuota`."""

    def __init__(self, *, samples: int = CONTROLLER_QUOTA_SAMPLES,
                 window_s: int = CONTROLLER_QUOTA_WINDOW_S):
        super().__init__(CONTROLLER_MUTATION_RATE, samples=samples, window_s=window_s)
        self._buckets: dict[tuple[str, str], _TokenBucket] = {}

    def quota_for(self, user: str, client_id: str, *, strict: bool) -> "MutationQuota":
        """``newStrictQuotaFor`` / ``newPermissiveQuotaFor``: the quota one request records
        its partitions against (unbounded when no quota applies to the client)."""
        if not self.enabled:
            return MutationQuota(None, 0.0, 0.0, strict=strict)
        tags = self.usage_tags(user, client_id)
        rate = self.quota_limit(*tags)
        if rate is None:
            return MutationQuota(None, 0.0, 0.0, strict=strict)
        bucket = self._buckets.get(tags)
        if bucket is None:
            now_s = time.monotonic()
            for stale in [t for t, b in self._buckets.items()
                          if now_s - b.used_s > SENSOR_INACTIVE_S]:
                del self._buckets[stale]
            bucket = self._buckets[tags] = _TokenBucket()
        burst = self.samples * (self.window_ms / 1000.0) * rate
        return MutationQuota(bucket, rate, burst, strict=strict)


class MutationQuota:
    """One request's controller mutation quota (``StrictControllerMutationQuota`` /
    ``PermissiveControllerMutationQuota``; ``bucket`` None: unbounded)."""

    __slots__ = ("bucket", "rate", "burst", "strict", "_throttle_ms", "_recorded_ms")

    def __init__(self, bucket: _TokenBucket | None, rate: float, burst: float, *,
                 strict: bool):
        self.bucket = bucket
        self.rate = rate
        self.burst = burst
        self.strict = strict
        self._throttle_ms = 0
        self._recorded_ms = 0

    def _violated(self, tokens: float, now_ms: int) -> None:
        # ControllerMutationQuotaManager.throttleTimeMs: the time to refill back to zero.
        self._throttle_ms = round(-tokens / self.rate * 1000)
        self._recorded_ms = now_ms

    def record(self, partitions: int) -> bool:
        """Count ``partitions`` created or deleted. Strict: refused (False, nothing counted)
        when the bucket is already below zero; permissive: always counted (True), the
        throttle time noted."""
        bucket = self.bucket
        if bucket is None:
            return True
        now_ms = _now_ms()
        if self.strict:
            tokens = bucket.measure(self.rate, self.burst, now_ms)
            if tokens < 0:
                self._violated(tokens, now_ms)
                return False
            bucket.record(partitions, self.rate, self.burst, now_ms)
            return True
        tokens = bucket.record(partitions, self.rate, self.burst, now_ms)
        if tokens < 0:
            self._violated(tokens, now_ms)
        return True

    def throttle_ms(self) -> int:
        """The throttle time to answer with: the last violation's, less the time since."""
        if self._throttle_ms <= 0:
            return 0
        return max(0, self._throttle_ms - (_now_ms() - self._recorded_ms))


class ClientQuotas:
    """One broker's client quotas: the entity table (what DescribeClientQuotas answers) and
    the managers it feeds (``produce``, ``fetch``, ``request``, ``mutation``). ``ip_rates`` holds the
    ``connection_creation_rate`` of IP entities (None key: the ``<default>`` IP)."""

    def __init__(self, *, samples: int = 11, window_s: int = 1):
        self.samples = samples
        self.window_s = window_s
        self.entities: dict[QuotaEntity, dict[str, float]] = {}
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, samples=samples,
                                          window_s=window_s)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, samples=samples,
                                        window_s=window_s)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, samples=samples,
                                          window_s=window_s, throttle_ms_max=window_s * 1000)
        self.mutation = ControllerMutationQuotaManager()
        self.ip_rates: dict[str | None, float] = {}
        self._managers = {m.key: m for m in (self.produce, self.fetch, self.request,
                                             self.mutation)}

    def set_entity(self, entity: QuotaEntity, values: Mapping[str, float]) -> None:
        """Make ``values`` the whole quota set of ``entity`` (an empty one removes it), and
        the managers' bounds follow."""
        old = self.entities.get(entity, {})
        if values:
            self.entities[entity] = dict(values)
        else:
            self.entities.pop(entity, None)
        for key in set(old) | set(values):
            manager = self._managers.get(key)
            if manager is not None:
                manager.update_quota(entity, values.get(key))
        if len(entity) == 1 and entity[0][0] == IP:
            ip = entity[0][1]
            rate = values.get(CONNECTION_CREATION_RATE)
            if rate is None:
                self.ip_rates.pop(ip, None)
            else:
                self.ip_rates[ip] = float(rate)

    def replace_all(self, table: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """Make ``table`` the whole entity table (a full reload)."""
        for entity in list(self.entities):
            if entity not in table:
                self.set_entity(entity, {})
        for entity, values in table.items():
            self.set_entity(entity, values)

    def ip_connection_rate(self, ip: str) -> float | None:
        """The ``connection_creation_rate`` that applies to ``ip``: its own, else the
        ``<default>`` IP's, else None."""
        rate = self.ip_rates.get(ip)
        return self.ip_rates.get(None) if rate is None else rate


def quotas_of(state: Any) -> ClientQuotas:
    """The broker's :class:`ClientQuotas` (made on first use with the broker's
    ``quota.window.num`` and ``quota.window.size.seconds``)."""
    found: ClientQuotas | None = state.extensions.get(EXTENSION_KEY)
    if found is None:
        config = state.config
        try:
            samples, window_s = config["quota.window.num"], config["quota.window.size.seconds"]
        except KeyError:
            samples, window_s = 11, 1
        found = state.extensions[EXTENSION_KEY] = ClientQuotas(samples=samples,
                                                               window_s=window_s)
    return found


def client_of(ctx: Any) -> tuple[str, str]:
    """``(user, client_id)`` of a request context as the quota managers key them: the
    principal's name and the client id ("" when none)."""
    return ctx.principal.name, ctx.client_id or ""


# --- the request quota around every handler ------------------------------------------------


class _Timed:
    """An awaitable that drives ``coro`` and adds the time each of its steps takes to
    ``spent_ns``: the time the request held the event loop (Kafka's request thread time),
    not the time it waited."""

    __slots__ = ("coro", "spent_ns")

    def __init__(self, coro: Any):
        self.coro = coro
        self.spent_ns = 0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self.coro
        value: Any = None
        error: BaseException | None = None
        while True:
            started = time.perf_counter_ns()
            try:
                if error is not None:
                    yielded = coro.throw(error)
                else:
                    yielded = coro.send(value)
            except StopIteration as stop:
                self.spent_ns += time.perf_counter_ns() - started
                return stop.value
            except BaseException:
                self.spent_ns += time.perf_counter_ns() - started
                raise
            self.spent_ns += time.perf_counter_ns() - started
            try:
                value, error = (yield yielded), None
            except BaseException as exc:  # noqa: BLE001 - handed to the coroutine
                value, error = None, exc


#: The handlers that apply the request quota themselves (Produce and Fetch fold it into
#: their bandwidth throttle, as KafkaApis does).
SELF_THROTTLED_APIS = frozenset({0, 1})


def with_request_quota(handle: Callable[[Any, Any], Awaitable[Any]], api_key: int
                       ) -> Callable[[Any, Any], Awaitable[Any]]:
    """``handle`` with the request quota applied (``sendResponseMaybeThrottle``): the time the
    handler held the loop is counted as a percentage for the client, and a response with a
    ``throttle_time`` field gets the larger of its own and the request quota's throttle time
    (the connection then mutes the client that long). Exempt APIs, Produce and Fetch (which
    do this themselves) are returned unchanged."""
    if api_key in _REQUEST_QUOTA_EXEMPT or api_key in SELF_THROTTLED_APIS:
        return handle

    async def handle_with_quota(ctx: Any, request: Any) -> Any:
        quotas: ClientQuotas | None = ctx.broker.extensions.get(EXTENSION_KEY)
        if quotas is None or not quotas.request.enabled:
            return await handle(ctx, request)  # no request quota: nothing to count
        timed = _Timed(handle(ctx, request))
        response = await timed
        if response is None:
            return response
        user, client_id = client_of(ctx)
        throttle_ms = quotas.request.record_and_get_throttle_ms(
            user, client_id, timed.spent_ns * _NANOS_TO_PERCENT)
        if throttle_ms <= 0:
            return response
        if isinstance(response, RawResponse):
            # A body the handler encoded (a big Metadata answer): its throttle field cannot
            # be changed here, but the connection is still muted for the throttle time.
            if throttle_ms > response.throttle_time_ms:
                response = response._replace(throttle_time_ms=throttle_ms)
            return response
        current = getattr(response, "throttle_time", None)
        if not isinstance(current, datetime.timedelta):
            return response  # no field to tell the client: Kafka's versions all have one
        current_ms = int(current.total_seconds() * 1000)
        if throttle_ms > current_ms:
            response = dataclasses.replace(
                response, throttle_time=datetime.timedelta(milliseconds=throttle_ms))
        return response

    return handle_with_quota


def request_throttle_ms(ctx: Any, spent_ns: int) -> int:
    """Count ``spent_ns`` of loop time for the request quota of ``ctx``'s client (a Produce or
    Fetch handler calls it itself); the throttle time, 0 within the quota."""
    quotas: ClientQuotas | None = ctx.broker.extensions.get(EXTENSION_KEY)
    if quotas is None or not quotas.request.enabled:
        return 0
    user, client_id = client_of(ctx)
    return quotas.request.record_and_get_throttle_ms(user, client_id,
                                                     spent_ns * _NANOS_TO_PERCENT)


def any_quota(ctx: Any) -> bool:
    """Whether any produce, fetch or request quota is set on ``ctx``'s broker (nothing is
    counted otherwise)."""
    quotas: ClientQuotas | None = ctx.broker.extensions.get(EXTENSION_KEY)
    return quotas is not None and (quotas.produce.enabled or quotas.fetch.enabled
                                   or quotas.request.enabled)


def produce_throttle_ms(ctx: Any, size_bytes: int, spent_ns: int) -> int:
    """A Produce's throttle time (``handleProduceRequest``): ``size_bytes`` counted against
    ``producer_byte_rate`` and ``spent_ns`` against ``request_percentage`` (not for
    acks=0: pass 0); the larger of the two throttle times (0 within both)."""
    quotas: ClientQuotas | None = ctx.broker.extensions.get(EXTENSION_KEY)
    if quotas is None:
        return 0
    user, client_id = client_of(ctx)
    bandwidth_ms = quotas.produce.record_and_get_throttle_ms(user, client_id, size_bytes)
    return max(bandwidth_ms, request_throttle_ms(ctx, spent_ns) if spent_ns else 0)


def fetch_throttle_ms(ctx: Any, size_bytes: int, spent_ns: int) -> int:
    """A consumer Fetch's throttle time (``handleFetchRequest``): ``size_bytes`` (the
    response's records) against ``consumer_byte_rate`` and ``spent_ns`` against
    ``request_percentage``; when either throttles, the bytes are taken back off the rate
    (the answer is then empty, as Kafka's ``getThrottledResponse``)."""
    quotas: ClientQuotas | None = ctx.broker.extensions.get(EXTENSION_KEY)
    if quotas is None:
        return 0
    user, client_id = client_of(ctx)
    request_ms = request_throttle_ms(ctx, spent_ns)
    bandwidth_ms = quotas.fetch.record_and_get_throttle_ms(user, client_id, size_bytes)
    throttle_ms = max(request_ms, bandwidth_ms)
    if throttle_ms > 0:
        quotas.fetch.unrecord(user, client_id, size_bytes)
    return throttle_ms


def fetch_bytes_max(ctx: Any) -> float:
    """What a consumer Fetch may return at most under its ``consumer_byte_rate``
    (``getMaxValueInQuotaWindow``: a larger answer would be throttled whatever came
    before); infinity without a quota."""
    quotas: ClientQuotas | None = ctx.broker.extensions.get(EXTENSION_KEY)
    if quotas is None:
        return math.inf
    return quotas.fetch.max_value_in_window(*client_of(ctx))


def mutation_quota(ctx: Any, strict_since_version: int) -> MutationQuota:
    """``newQuotaFor``: the controller mutation quota of ``ctx``'s request, strict from
    ``strict_since_version`` of its API on, permissive before."""
    strict = ctx.api_version >= strict_since_version
    quotas: ClientQuotas | None = ctx.broker.extensions.get(EXTENSION_KEY)
    if quotas is None:
        return MutationQuota(None, 0.0, 0.0, strict=strict)
    return quotas.mutation.quota_for(*client_of(ctx), strict=strict)


def apply_request_quota(handlers: Mapping[int, Any]) -> dict[int, Any]:
    """``{api_key: ApiHandler}`` with :func:`with_request_quota` around each handler."""
    return {key: handler._replace(handle=with_request_quota(handler.handle, key))
            for key, handler in handlers.items()}
