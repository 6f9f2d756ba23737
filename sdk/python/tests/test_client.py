"""The client against a running stack (conftest.py says which): each call
answers typed objects, errors are their classes, series follow their pages,
the stream yields events, and an alert's webhook call verifies."""

import asyncio
import http.server
import itertools
import os
import threading
from decimal import Decimal

import pytest
from conftest import BANK, BASE, KEY, eventually, live, publish, publishing

from ratewire import (AsyncClient, Client, NotFound, RatewireError, Unauthorized,
                      ValidationError, verify_webhook)
from ratewire import models


@live
def test_rates_are_typed_banks_with_their_currencies():
    with Client(BASE, KEY) as client:
        banks = client.rates(transactional=True)
        assert banks and isinstance(banks[0], models.Bank)
        rate = banks[0].exchange_rates[0]
        assert rate.currency.symbol and isinstance(rate.cash_buying, Decimal)
        assert rate.updated_at.tzinfo is not None


@live
def test_banks_and_currencies():
    with Client(BASE, KEY) as client:
        assert any(bank.code for bank in client.banks())
        assert "USD" in {currency.symbol for currency in client.currencies()}


@live
def test_best_rates_name_the_bank_and_unknown_currencies_are_not_found():
    with Client(BASE, KEY) as client:
        best = client.best_rates("USD")
        assert best.cash_buying.price > 0 and best.cash_buying.bank.name
        with pytest.raises(NotFound) as raised:
            client.best_rates("XXX")
        assert raised.value.status == 404 and isinstance(raised.value, RatewireError)


@live
def test_a_bad_date_names_the_parameter():
    with Client(BASE, KEY) as client:
        with pytest.raises(ValidationError) as raised:
            client.history(1, "not-a-date")
        assert "date" in raised.value.errors


@live
def test_a_wrong_key_is_unauthorized():
    with Client(BASE, "rwk_not_a_key") as client:
        with pytest.raises(Unauthorized):
            client.rates()


@publishing
def test_a_series_follows_its_pages():
    # The suite serves pages of a few points (RATEWIRE_SERIES_PAGE_POINTS)
    # and has published more boards than one page holds.
    with Client(BASE, KEY) as client:
        points = list(client.series(bank_id=BANK, currency="USD", interval="raw"))
    expected = int(os.environ.get("RATEWIRE_RAW_POINTS", "1"))
    assert len(points) >= expected
    assert all(isinstance(p.cash_buying, Decimal) for p in points)
    stamps = [p.timestamp for p in points]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)


@publishing
def test_a_conversion_and_the_spreads_are_typed():
    with Client(BASE, KEY) as client:
        conversion = client.convert(100, "USD", "ETB", bank_id=BANK)
        assert conversion.from_ == "USD" and conversion.results
        assert conversion.results[0].bank.id == BANK and conversion.results[0].amount > 0
        spreads = client.spreads("USD")
        assert spreads.currency.symbol == "USD"
        assert any(row.bank.id == BANK for row in spreads.banks)


@publishing
def test_the_stream_yields_events_with_ids():
    stop = threading.Event()

    def keep_publishing():
        # The stream tells what changes once it is open.
        for step in itertools.count():
            if stop.wait(0.5):
                return
            publish(f"150.{step % 90 + 10}", "160")

    publisher = threading.Thread(target=keep_publishing, daemon=True)
    publisher.start()
    try:
        with Client(BASE, KEY) as client:
            event = next(iter(client.stream(events=["board"], bank_ids=[BANK])))
    finally:
        stop.set()
        publisher.join()
    assert event.event == "board" and event.id and event.data


class Receiver(http.server.ThreadingHTTPServer):
    """A webhook's endpoint on 127.0.0.1: every call, kept."""

    def __init__(self):
        self.calls = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(inner):
                body = inner.rfile.read(int(inner.headers["content-length"]))
                self.calls.append(({k.lower(): v for k, v in inner.headers.items()}, body))
                inner.send_response(204)
                inner.end_headers()

            def log_message(inner, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}/ratewire"


@publishing
def test_an_alert_calls_its_webhook_with_a_signature_that_verifies():
    receiver = Receiver()
    try:
        with Client(BASE, KEY) as client:
            publish("150", "160")
            hook = client.webhooks.create(receiver.url, description="sdk test")
            assert hook.secret and hook.id in {h.id for h in client.webhooks.list()}
            alert = client.alerts.create(hook.id, "USD", "cashBuying", "above", Decimal("170"),
                                         bank_id=BANK)
            assert alert.threshold == Decimal("170") and alert.bank_id == BANK
            assert alert.id in {a.id for a in client.alerts.list()}
            publish("171.25", "175")
            assert eventually(lambda: [c for c in receiver.calls if b"threshold" in c[1]]), \
                "no webhook call within 30 s"
            headers, body = [c for c in receiver.calls if b"threshold" in c[1]][0]
            verify_webhook(hook.secret, headers, body)
            client.alerts.delete(alert.id)
            client.webhooks.delete(hook.id)
            assert alert.id not in {a.id for a in client.alerts.list()}
            with pytest.raises(NotFound):
                client.alerts.delete(alert.id)
    finally:
        receiver.shutdown()


@live
def test_the_async_client_has_the_same_surface():
    async def run():
        async with AsyncClient(BASE, KEY) as client:
            banks = await client.rates()
            best = await client.best_rates("USD")
            points = [p async for p in client.series(bank_id=banks[0].id, currency="USD")]
            return banks, best, points

    banks, best, points = asyncio.run(run())
    assert banks[0].exchange_rates and best.cash_buying.bank.name
    assert isinstance(points, list)


@publishing
def test_what_was_known_when_and_where_a_number_came_from():
    import datetime
    with Client(BASE, KEY) as client:
        before = datetime.datetime.now(datetime.timezone.utc)
        publish("153.75", "160")

        def usd_now():
            [bank] = client.rates(bank_id=BANK)
            return [r for r in bank.exchange_rates if r.currency.symbol == "USD"][0]

        assert eventually(lambda: usd_now().cash_buying == Decimal("153.75"))
        [then] = client.rates(bank_id=BANK, as_known_at=before)
        assert then.exchange_rates[0].cash_buying != Decimal("153.75")

        # A rate names its board by its bank and `updated_at`.
        board = client.board_at(BANK, usd_now().updated_at)
        assert board.rates[0].cash_buying == Decimal("153.75")
        assert board.log.topic and board.known_at >= before
        assert client.board(board.event_id).event_id == board.event_id

        quality = client.quality(bank_id=BANK, days=1)
        assert isinstance(quality, models.Quality) and quality.boards >= 1
        assert all(isinstance(r, models.Revision) for r in client.revisions(bank_id=BANK))
