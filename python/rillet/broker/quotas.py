"""Client byte-rate quotas as a broker enforces them (Kafka's ClientQuotaManager with its
default quota callback), and DescribeClientQuotas over the metadata image.

A request's bytes are recorded against the quota that applies to its (user, client id), found
in Kafka's order of precedence::

    /config/users/<user>/clients/<client-id>     /config/users/<default>/clients/<default>
    /config/users/<user>/clients/<default>       /config/users/<default>
    /config/users/<user>                         /config/clients/<client-id>
    /config/users/<default>/clients/<client-id>  /config/clients/<default>

Each quota is measured per the entity it names: a user quota is shared by all that user's
client ids, while a default quota gives each user (or client id) its own. The rate is
Kafka's: the bytes of the last ``quota.window.num`` samples of ``quota.window.size.seconds``
each, over the time they span (never less than all but one of the windows). A request that
takes the rate over the quota is answered with the time it must wait to bring the rate back
to the quota, ``(rate - quota) / quota * window``; the transport sends that as
``throttle_time_ms`` and holds the client back as long (Kafka mutes the connection).

Pure: the caller passes the time. Clients with no quota cost one dictionary lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rillet import errors
from rillet.controller.quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    IP,
    PRODUCER_BYTE_RATE,
    USER,
)
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import QuotaEntity

__all__ = [
    "MATCH_DEFAULT",
    "MATCH_EXACT",
    "MATCH_SPECIFIED",
    "BrokerQuotas",
    "ClientQuotaManager",
    "QuotaFilterComponent",
    "QuotaWindow",
    "describe_client_quotas",
]

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

# Sensors unused for this many full quota windows are dropped (their rate is zero by then).
_IDLE_WINDOWS = 2
_SWEEP_EVERY = 4096  # records between sweeps for idle sensors
_RESOLVED_MAX = 65536  # (user, client id) pairs whose quota is remembered


@dataclass(frozen=True)
class QuotaWindow:
    """``quota.window.num`` samples of ``quota.window.size.seconds`` (Kafka's defaults)."""

    samples: int = 11
    size_s: float = 1.0

    def __post_init__(self) -> None:
        if self.samples < 1 or self.size_s <= 0:
            raise ValueError(f"invalid quota window: {self.samples} x {self.size_s} s")


class _Rate:
    """Kafka's ``Rate`` over a ``SampledStat``: ``samples`` windows of ``size_ms`` each,
    each sample ``[start_ms, total]``."""

    __slots__ = ("current", "last_ms", "samples")

    def __init__(self, now_ms: float) -> None:
        self.samples: list[list[float]] = [[now_ms, 0.0]]
        self.current = 0
        self.last_ms = now_ms

    def record(self, window: QuotaWindow, value: float, now_ms: float) -> None:
        size_ms = window.size_s * 1000
        sample = self.samples[self.current]
        if now_ms - sample[0] >= size_ms:
            self.current = (self.current + 1) % window.samples
            if self.current >= len(self.samples):
                sample = [now_ms, 0.0]
                self.samples.append(sample)
            else:
                sample = self.samples[self.current]
                sample[0], sample[1] = now_ms, 0.0
        sample[1] += value
        self.last_ms = now_ms

    def _purge(self, window: QuotaWindow, now_ms: float) -> None:
        expire_ms = window.samples * window.size_s * 1000
        for sample in self.samples:
            if now_ms - sample[0] >= expire_ms:
                sample[0], sample[1] = now_ms, 0.0

    def window_ms(self, window: QuotaWindow, now_ms: float) -> float:
        """The time the samples span, at least ``samples - 1`` whole windows."""
        self._purge(window, now_ms)
        size_ms = window.size_s * 1000
        elapsed = now_ms - min(sample[0] for sample in self.samples)
        full = int(elapsed // size_ms)
        if full < window.samples - 1:
            elapsed += (window.samples - 1 - full) * size_ms
        return max(elapsed, 1.0)

    def per_second(self, window: QuotaWindow, now_ms: float) -> tuple[float, float]:
        """The rate and the window it is measured over (ms)."""
        span_ms = self.window_ms(window, now_ms)
        return sum(sample[1] for sample in self.samples) / (span_ms / 1000), span_ms


class ClientQuotaManager:
    """The quotas of one key (``producer_byte_rate`` or ``consumer_byte_rate``), read from
    the current metadata image, and the rates measured against them."""

    def __init__(
        self, key: str, image: Callable[[], MetadataImage], window: QuotaWindow = QuotaWindow()
    ) -> None:
        self.key = key
        self.image = image
        self.window = window
        # (user, client id) -> (the measured entity, its quota), for the image's quotas.
        self._quotas: Mapping[QuotaEntity, Mapping[str, float]] = {}
        self._resolved: dict[tuple[str, str], tuple[tuple[str, str], float] | None] = {}
        self._rates: dict[tuple[str, str], _Rate] = {}
        # Who is throttled, until when (ms): a transport holds their requests back as long.
        self._throttled: dict[tuple[str, str], float] = {}
        self._since_sweep = 0

    def quota(self, user: str, client_id: str) -> tuple[tuple[str, str], float] | None:
        """The (user, client id) the rate is measured for and the quota in bytes/s, or None
        when no quota applies."""
        quotas = self.image().client_quotas
        if not quotas:
            return None
        if quotas is not self._quotas:
            self._quotas, self._resolved = quotas, {}
        key = (user, client_id)
        if key not in self._resolved:
            if len(self._resolved) >= _RESOLVED_MAX:
                self._resolved.clear()
            self._resolved[key] = _resolve(quotas, self.key, user, client_id)
        return self._resolved[key]

    def max_bytes_in_window(self, user: str, client_id: str) -> int | None:
        """The most one request may take (Kafka caps a fetch at the quota of all but one of
        its windows), or None without a quota."""
        found = self.quota(user, client_id)
        if found is None:
            return None
        return max(1, int(found[1] * (self.window.samples - 1) * self.window.size_s))

    def record(self, user: str, client_id: str, value: int, now_s: float) -> int:
        """Record ``value`` bytes at ``now_s``; the throttle time in ms (0 within quota)."""
        found = self.quota(user, client_id)
        if found is None:
            return 0
        measured, bound = found
        now_ms = now_s * 1000
        rate = self._rates.get(measured)
        if rate is None:
            rate = self._rates[measured] = _Rate(now_ms)
        rate.record(self.window, value, now_ms)
        self._since_sweep += 1
        if self._since_sweep >= _SWEEP_EVERY:
            self._sweep(now_ms)
        observed, span_ms = rate.per_second(self.window, now_ms)
        if observed <= bound:
            return 0
        throttle_ms = round((observed - bound) / bound * span_ms)
        self._throttled[measured] = max(self._throttled.get(measured, 0.0), now_ms + throttle_ms)
        return throttle_ms

    def wait_s(self, user: str, client_id: str, now_s: float) -> float:
        """How long a request of (user, client id) must wait for the throttle time of an
        earlier one to pass (0 when it need not): what a transport that cannot mute one
        connection (gRPC multiplexes calls) holds requests back with."""
        if not self._throttled:
            return 0.0
        found = self.quota(user, client_id)
        if found is None:
            return 0.0
        return max(0.0, self._throttled.get(found[0], 0.0) / 1000 - now_s)

    def _sweep(self, now_ms: float) -> None:
        self._since_sweep = 0
        idle_ms = _IDLE_WINDOWS * self.window.samples * self.window.size_s * 1000
        for measured in [m for m, r in self._rates.items() if now_ms - r.last_ms > idle_ms]:
            del self._rates[measured]
        for measured in [m for m, until in self._throttled.items() if until < now_ms]:
            del self._throttled[measured]


def _resolve(
    quotas: Mapping[QuotaEntity, Mapping[str, float]], key: str, user: str, client_id: str
) -> tuple[tuple[str, str], float] | None:
    # Kafka's order, each with the (user, client id) its rate is measured for.
    candidates: list[tuple[QuotaEntity, tuple[str, str]]] = [
        (((CLIENT_ID, client_id), (USER, user)), (user, client_id)),
        (((CLIENT_ID, None), (USER, user)), (user, client_id)),
        (((USER, user),), (user, "")),
        (((CLIENT_ID, client_id), (USER, None)), (user, client_id)),
        (((CLIENT_ID, None), (USER, None)), (user, client_id)),
        (((USER, None),), (user, "")),
        (((CLIENT_ID, client_id),), ("", client_id)),
        (((CLIENT_ID, None),), ("", client_id)),
    ]
    for entity, measured in candidates:
        value = quotas.get(entity, {}).get(key)
        if value is not None:
            return measured, value
    return None


# -- DescribeClientQuotas -------------------------------------------------------------------


@dataclass(frozen=True)
class QuotaFilterComponent:
    """Kafka's ClientQuotaFilterComponent: entities whose ``entity_type`` is named ``match``
    (MATCH_EXACT; a None match is the default), is the default (MATCH_DEFAULT), or is any
    name (MATCH_SPECIFIED)."""

    entity_type: str
    match_type: int
    match: str | None = None


def describe_client_quotas(
    image: MetadataImage, components: Sequence[QuotaFilterComponent], strict: bool
) -> list[tuple[QuotaEntity, Mapping[str, float]]]:
    """The entities every component matches, with their quotas; ``strict`` leaves out
    entities of types the filter does not name. Raises INVALID_REQUEST for a bad filter."""
    kinds = [c.entity_type for c in components]
    for c in components:
        if not c.entity_type:
            raise errors.InvalidRequestError("Invalid empty entity type")
        if kinds.count(c.entity_type) > 1:
            raise errors.InvalidRequestError(
                f"Entity type {c.entity_type} cannot appear more than once in the filter"
            )
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise errors.InvalidRequestError(f"Unknown match type {c.match_type}")
    if IP in kinds and len(kinds) > 1:
        raise errors.InvalidRequestError(
            "Invalid entity filter component combination: an ip component cannot be used "
            "with user or client-id components"
        )
    found: list[tuple[QuotaEntity, Mapping[str, float]]] = []
    for entity, values in image.client_quotas.items():
        names = dict(entity)
        if strict and set(names) != set(kinds):
            continue
        if all(_matches(c, names) for c in components):
            found.append((entity, values))
    found.sort(key=lambda ev: [(k, n is not None, n or "") for k, n in ev[0]])
    return found


def _matches(c: QuotaFilterComponent, names: Mapping[str, str | None]) -> bool:
    if c.entity_type not in names:
        return False
    name = names[c.entity_type]
    if c.match_type == MATCH_SPECIFIED:
        return name is not None
    if c.match_type == MATCH_DEFAULT:
        return name is None
    return name == c.match


class BrokerQuotas:
    """A broker's produce and fetch byte-rate quotas, timed by ``clock`` (monotonic
    seconds); what its transports record requests and responses against."""

    def __init__(
        self,
        image: Callable[[], MetadataImage],
        window: QuotaWindow,
        clock: Callable[[], float],
    ) -> None:
        self.image = image
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, image, window)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, image, window)
        self.clock = clock

    def active(self) -> bool:
        """Whether any client has a quota (if not, nothing need be recorded)."""
        return bool(self.image().client_quotas)

    def record_produce(self, user: str, client_id: str, size: int) -> int:
        """A produce request of ``size`` bytes; the throttle time in ms."""
        return self.produce.record(user, client_id, size, self.clock())

    def record_fetch(self, user: str, client_id: str, size: int) -> int:
        """A fetch response of ``size`` bytes; the throttle time in ms."""
        return self.fetch.record(user, client_id, size, self.clock())

    def produce_wait_s(self, user: str, client_id: str) -> float:
        return self.produce.wait_s(user, client_id, self.clock())

    def fetch_wait_s(self, user: str, client_id: str) -> float:
        return self.fetch.wait_s(user, client_id, self.clock())
