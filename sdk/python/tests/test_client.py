"""Against a running stack: RATEWIRE_BASE_URL and RATEWIRE_API_KEY (as
`deploy/stack up` prints them)."""

import base64
import hashlib
import hmac
import itertools
import os
import time

import pytest

from ratewire import Client, InvalidSignature, NotFound, ValidationError, verify_webhook

BASE = os.environ.get("RATEWIRE_BASE_URL", "http://127.0.0.1:8080")
KEY = os.environ.get("RATEWIRE_API_KEY")
live = pytest.mark.skipif(not KEY, reason="needs RATEWIRE_API_KEY and a running stack")


@live
def test_rates_are_typed_banks_with_their_currencies():
    with Client(BASE, KEY) as client:
        banks = client.rates(transactional=True)
        assert banks and banks[0].exchange_rates
        assert banks[0].exchange_rates[0].currency.symbol


@live
def test_best_rates_name_the_bank_and_unknown_currencies_are_not_found():
    with Client(BASE, KEY) as client:
        best = client.best_rates("USD")
        assert best.cash_buying.price > 0 and best.cash_buying.bank.name
        with pytest.raises(NotFound):
            client.best_rates("XXX")


@live
def test_a_bad_date_names_the_parameter():
    with Client(BASE, KEY) as client:
        with pytest.raises(ValidationError) as raised:
            client.history(1, "not-a-date")
        assert "date" in raised.value.errors


@live
def test_the_stream_yields_events_with_ids():
    with Client(BASE, KEY) as client:
        events = list(itertools.islice(client.stream(events=["board"]), 1))
        assert events[0].event == "board" and events[0].id


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    mac = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def test_a_signed_call_verifies_and_a_changed_body_does_not():
    secret = "whsec_" + base64.b64encode(b"k" * 32).decode()
    now = int(time.time())
    body = b'{"type":"alert.triggered"}'
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(now),
               "webhook-signature": sign(secret, "msg_1", now, body)}
    verify_webhook(secret, headers, body)
    with pytest.raises(InvalidSignature):
        verify_webhook(secret, headers, body + b" ")
    with pytest.raises(InvalidSignature):
        verify_webhook(secret, headers, body, now=now + 301)
