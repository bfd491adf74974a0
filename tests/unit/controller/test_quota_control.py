"""The controller's client quotas: AlterClientQuotas as ClientQuotaRecords, replayed into the
image every broker enforces quotas from; invalid entries refused alone, as Kafka refuses them."""

from __future__ import annotations

import pytest

from rillet.controller.quotas import QuotaAlteration, QuotaOp, alter_client_quotas
from rillet.errors import InvalidRequestError
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import ClientQuotaRecord, MetadataRecord, QuotaEntity


def applied(image: MetadataImage, records: list[MetadataRecord]) -> MetadataImage:
    return image.replay(enumerate(records, start=image.offset + 1))


def alter(entity: QuotaEntity, *ops: tuple[str, float | None]) -> QuotaAlteration:
    return QuotaAlteration(entity, tuple(QuotaOp(k, v) for k, v in ops))


def test_quotas_are_records_keyed_by_the_sorted_entity() -> None:
    image = MetadataImage()
    given = (("user", "alice"), ("client-id", None))  # in any order, as a request sends it
    result = alter_client_quotas(
        image, [alter(given, ("producer_byte_rate", 1024.0), ("consumer_byte_rate", 2048.0))]
    )
    assert result.response == [None]
    entity = (("client-id", None), ("user", "alice"))
    assert result.records == [
        ClientQuotaRecord(entity, "producer_byte_rate", 1024.0),
        ClientQuotaRecord(entity, "consumer_byte_rate", 2048.0),
    ]
    image = applied(image, result.records)
    assert image.client_quotas == {
        entity: {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}
    }
    # Setting a value it has writes nothing; removing one drops it, removing the last drops
    # the entity; removing one it does not have writes nothing.
    again = alter_client_quotas(image, [alter(given, ("producer_byte_rate", 1024.0))])
    assert again.records == [] and again.response == [None]
    removed = alter_client_quotas(
        image, [alter(given, ("producer_byte_rate", None), ("consumer_byte_rate", None))]
    )
    image = applied(image, removed.records)
    assert image.client_quotas == {}
    nothing = alter_client_quotas(image, [alter(given, ("producer_byte_rate", None))])
    assert nothing.records == [] and nothing.response == [None]


@pytest.mark.parametrize(
    ("alteration", "message"),
    [
        (alter((), ("producer_byte_rate", 1.0)), "Invalid empty client quota entity"),
        (
            alter((("user", "a"), ("user", "b")), ("producer_byte_rate", 1.0)),
            "entity type user appears twice",
        ),
        (alter((("group", "g"),), ("producer_byte_rate", 1.0)), "Unhandled client quota entity"),
        (alter((("ip", "1.2.3.4"),), ("connection_creation_rate", 1.0)), "ip entities"),
        (alter((("user", ""),), ("producer_byte_rate", 1.0)), "an empty user name"),
        (alter((("user", "a"),), ("fetch_rate", 1.0)), "Invalid configuration key fetch_rate"),
        (alter((("user", "a"),), ("request_percentage", 50.0)), "not enforced by Rillet"),
        (alter((("user", "a"),), ("producer_byte_rate", 1.5)), "must be a Long value"),
        (alter((("user", "a"),), ("producer_byte_rate", float("nan"))), "must be a Long value"),
        (alter((("user", "a"),), ("producer_byte_rate", 0.0)), "must be positive"),
        (alter((("user", "a"),), ("producer_byte_rate", -5.0)), "must be positive"),
        (
            alter((("user", "a"),), ("producer_byte_rate", 1.0), ("producer_byte_rate", None)),
            "Duplicate quota key producer_byte_rate for entity user=a",
        ),
    ],
)
def test_an_invalid_entry_is_refused_alone(alteration: QuotaAlteration, message: str) -> None:
    good = alter((("client-id", "app"),), ("consumer_byte_rate", 100.0))
    result = alter_client_quotas(MetadataImage(), [alteration, good])
    err, ok = result.response
    assert isinstance(err, InvalidRequestError) and message in str(err)
    assert ok is None
    assert result.records == [
        ClientQuotaRecord((("client-id", "app"),), "consumer_byte_rate", 100.0)
    ]


def test_an_entry_is_all_or_nothing() -> None:
    # The second op is invalid: the first is not written either.
    result = alter_client_quotas(
        MetadataImage(),
        [alter((("user", "a"),), ("producer_byte_rate", 10.0), ("consumer_byte_rate", -1.0))],
    )
    assert result.records == []
    assert isinstance(result.response[0], InvalidRequestError)
