"""The models against the API's document (sdk/openapi.json, which the API's
own tests keep equal to the served one): a field the API adds or drops
fails here, before a user meets it in `extra` or as a missing attribute."""

import dataclasses
import json
from pathlib import Path

import pytest

from ratewire import models

DOCUMENT = json.loads((Path(__file__).resolve().parents[2] / "openapi.json").read_text())
SCHEMAS = DOCUMENT["components"]["schemas"]


def properties(schema_name):
    names = set()
    for key in SCHEMAS[schema_name].get("properties", {}):
        names.add(models.snake(key) + ("_" if key in models.KEYWORDS else ""))
    return names


@pytest.mark.parametrize("model", list(models.SCHEMAS), ids=lambda m: m.__name__)
def test_each_model_has_exactly_its_schemas_properties(model):
    fields = {f.name for f in dataclasses.fields(model)} - {"extra"}
    expected = set().union(*(properties(name) for name in models.SCHEMAS[model]))
    assert fields == expected, (
        f"{model.__name__}: missing {sorted(expected - fields)}, "
        f"not in the document {sorted(fields - expected)}")


def test_every_answer_schema_of_a_typed_read_has_a_model():
    # Each read the clients type names the schema of its `data`.
    covered = {name for names in models.SCHEMAS.values() for name in names}
    for path, schema in [("/api/v1/rates", "RatesBank"), ("/api/v1/rates/best-rates", "BestRates"),
                         ("/api/v1/history", "HistoryRecord"), ("/api/v1/convert", "Conversion"),
                         ("/api/v1/rates/spreads", "Spreads"),
                         ("/api/v1/reference-rates", "ReferenceRate"),
                         ("/api/v1/alerts", "Alert"), ("/api/v1/webhooks", "Webhook")]:
        assert path in DOCUMENT["paths"], path
        assert schema in covered, schema


def test_a_keyword_field_reads_back():
    conversion = models.decode(models.Conversion, {
        "from": "USD", "to": "ETB", "amount": 10, "transactional": False, "results": []})
    assert conversion.from_ == "USD" and conversion.amount == 10


def test_decimals_are_sent_as_numbers_with_their_digits():
    from decimal import Decimal

    from ratewire import _core
    call = _core.create_alert("w", "USD", "cashBuying", "above", Decimal("170.10"), None)
    assert b'"threshold": 170.10}' in call.content()
    assert json.loads(call.content())["threshold"] == 170.1
