"""Client quotas as a broker enforces them: Kafka's precedence of quota entities, its sampled
rate and throttle time, and DescribeClientQuotas' filters. Time is passed in."""

from __future__ import annotations

import pytest

from rillet.broker.quotas import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    ClientQuotaManager,
    QuotaFilterComponent,
    QuotaWindow,
    describe_client_quotas,
)
from rillet.errors import InvalidRequestError
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import ClientQuotaRecord, QuotaEntity

RATE = "producer_byte_rate"


def image_with(*quotas: tuple[QuotaEntity, float]) -> MetadataImage:
    return MetadataImage().replay(
        enumerate(ClientQuotaRecord(entity, RATE, value) for entity, value in quotas)
    )


ALICE_APP = (("client-id", "app"), ("user", "alice"))
ALICE_ANY_CLIENT = (("client-id", None), ("user", "alice"))
ALICE = (("user", "alice"),)
ANY_USER_APP = (("client-id", "app"), ("user", None))
ANY_USER_ANY_CLIENT = (("client-id", None), ("user", None))
ANY_USER = (("user", None),)
APP = (("client-id", "app"),)
ANY_CLIENT = (("client-id", None),)

# Kafka's order of precedence, most specific first.
PRECEDENCE = [
    ALICE_APP,
    ALICE_ANY_CLIENT,
    ALICE,
    ANY_USER_APP,
    ANY_USER_ANY_CLIENT,
    ANY_USER,
    APP,
    ANY_CLIENT,
]


@pytest.mark.parametrize("level", range(len(PRECEDENCE)))
def test_the_most_specific_quota_applies(level: int) -> None:
    # Every entity from `level` down has a quota; the one at `level` wins.
    image = image_with(*[(e, 1000.0 * (i + 1)) for i, e in enumerate(PRECEDENCE) if i >= level])
    manager = ClientQuotaManager(RATE, lambda: image)
    found = manager.quota("alice", "app")
    assert found is not None and found[1] == 1000.0 * (level + 1)


def test_a_default_quota_is_measured_per_user_a_named_one_for_all_its_clients() -> None:
    image = image_with((ANY_USER, 100.0), (APP, 50.0))
    manager = ClientQuotaManager(RATE, lambda: image)
    # The default user quota: each user has its own rate, whatever its client id.
    assert manager.quota("bob", "x") == (("bob", ""), 100.0)
    assert manager.quota("carol", "x") == (("carol", ""), 100.0)
    alice_only = image_with((ALICE, 10.0), (APP, 50.0))
    manager = ClientQuotaManager(RATE, lambda: alice_only)
    assert manager.quota("alice", "app") == (("alice", ""), 10.0)
    # A client id quota is shared by every user sending with that client id.
    assert manager.quota("bob", "app") == (("", "app"), 50.0)
    assert manager.quota("bob", "other") is None


def test_no_quota_no_throttle() -> None:
    manager = ClientQuotaManager(RATE, MetadataImage)
    assert manager.record("alice", "app", 10**9, now_s=0.0) == 0
    assert manager.max_bytes_in_window("alice", "app") is None


def test_throttle_time_is_kafkas() -> None:
    window = QuotaWindow(samples=11, size_s=1.0)
    image = image_with((ALICE, 1000.0))
    manager = ClientQuotaManager(RATE, lambda: image, window)
    # The rate is taken over at least 10 windows (10 s): 10,000 bytes at once is the quota.
    assert manager.record("alice", "app", 10_000, now_s=0.0) == 0
    # 20,000 bytes in "10 s" is twice the quota: wait as long again (10 s).
    assert manager.record("alice", "app", 10_000, now_s=0.0) == 10_000
    # Eleven seconds on, the first window has expired and the rest spans 10 s.
    assert manager.record("alice", "app", 0, now_s=11.0) == 0


def test_a_steady_producer_at_the_throttled_pace_stays_at_its_quota() -> None:
    """Simulate a client that sends as fast as it is allowed: each request goes when the
    previous one's throttle has passed. Past the first windows (which, as Kafka's, let a
    burst through), its rate is the quota, a little under (Kafka's throttle overshoots)."""
    image = image_with((ANY_CLIENT, 100_000.0))
    manager = ClientQuotaManager(RATE, lambda: image, QuotaWindow(11, 1.0))
    now, sent_late, request = 0.0, 0, 16_384
    while now < 120:
        throttle_ms = manager.record("u", "c", request, now)
        if now >= 60:
            sent_late += request
        now += max(throttle_ms / 1000, 0.001)  # at least 1 ms per request
    assert sent_late / 60 == pytest.approx(100_000, rel=0.1)


def test_a_fetch_is_capped_at_the_quota_of_all_but_one_window() -> None:
    image = MetadataImage().replay([(0, ClientQuotaRecord(APP, "consumer_byte_rate", 1000.0))])
    fetch = ClientQuotaManager("consumer_byte_rate", lambda: image, QuotaWindow(11, 2.0))
    assert fetch.max_bytes_in_window("alice", "app") == 20_000


def test_a_changed_quota_is_read_from_the_next_image() -> None:
    images = [image_with((APP, 1000.0))]
    manager = ClientQuotaManager(RATE, lambda: images[-1])
    assert manager.quota("u", "app") == (("", "app"), 1000.0)
    images.append(images[-1].replay([(1, ClientQuotaRecord(APP, RATE, None))]))
    assert manager.quota("u", "app") is None
    images.append(images[-1].replay([(2, ClientQuotaRecord(APP, RATE, 5.0))]))
    assert manager.quota("u", "app") == (("", "app"), 5.0)


def test_invalid_windows_are_refused() -> None:
    with pytest.raises(ValueError, match="invalid quota window"):
        QuotaWindow(samples=0)


# -- DescribeClientQuotas -------------------------------------------------------------------


EVERY = image_with(*[(e, float(i + 1)) for i, e in enumerate(PRECEDENCE)])


def described(components: list[QuotaFilterComponent], strict: bool) -> list[QuotaEntity]:
    return [entity for entity, _ in describe_client_quotas(EVERY, components, strict)]


def test_describe_filters_as_kafka() -> None:
    user = QuotaFilterComponent("user", MATCH_EXACT, "alice")
    assert described([user], strict=True) == [ALICE]
    assert described([user], strict=False) == [ALICE_ANY_CLIENT, ALICE_APP, ALICE]
    default_user = QuotaFilterComponent("user", MATCH_DEFAULT)
    assert described([default_user], strict=True) == [ANY_USER]
    any_client = QuotaFilterComponent("client-id", MATCH_SPECIFIED)
    assert described([any_client], strict=True) == [APP]
    assert described([default_user, any_client], strict=True) == [ANY_USER_APP]
    assert len(described([], strict=False)) == len(PRECEDENCE)
    assert described([], strict=True) == []
    values = dict(describe_client_quotas(EVERY, [user], strict=True))
    assert values[ALICE] == {RATE: 3.0}


@pytest.mark.parametrize(
    ("components", "message"),
    [
        ([QuotaFilterComponent("", MATCH_EXACT, "a")], "empty entity type"),
        (
            [QuotaFilterComponent("user", MATCH_DEFAULT), QuotaFilterComponent("user", 2)],
            "more than once",
        ),
        ([QuotaFilterComponent("user", 7)], "Unknown match type 7"),
        (
            [QuotaFilterComponent("ip", MATCH_DEFAULT), QuotaFilterComponent("user", 2)],
            "ip component",
        ),
    ],
)
def test_bad_filters_are_invalid_requests(
    components: list[QuotaFilterComponent], message: str
) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        describe_client_quotas(EVERY, components, strict=False)


def test_a_throttled_client_waits_before_its_next_request() -> None:
    image = image_with((APP, 1000.0))
    manager = ClientQuotaManager(RATE, lambda: image, QuotaWindow(3, 1.0))
    assert manager.wait_s("u", "app", now_s=0.0) == 0.0
    throttle_ms = manager.record("u", "app", 4000, now_s=0.0)  # twice 2 s of quota
    assert throttle_ms == 2000
    assert manager.wait_s("u", "app", now_s=0.5) == pytest.approx(1.5)
    # The same measured entity (the client id): any user of it waits.
    assert manager.wait_s("v", "app", now_s=0.5) == pytest.approx(1.5)
    assert manager.wait_s("u", "other", now_s=0.5) == 0.0
    assert manager.wait_s("u", "app", now_s=2.5) == 0.0
