"""The synchronous client."""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Iterator, List, Optional, Union

import httpx

from . import _core, models
from ._core import Instant
from .errors import RateLimited


class _Webhooks:
    def __init__(self, client: "Client"):
        self._client = client

    def create(self, url: str, description: Optional[str] = None,
               events: Optional[Iterable[str]] = None) -> models.Webhook:
        """A webhook; its `secret` is shown this once."""
        return self._client._run(_core.create_webhook(url, description, events))

    def list(self) -> List[models.Webhook]:
        return self._client._run(_core.list_webhooks())

    def delete(self, webhook_id: str) -> None:
        self._client._run(_core.delete_webhook(webhook_id))


class _Alerts:
    def __init__(self, client: "Client"):
        self._client = client

    def create(self, webhook_id: str, currency: str, field: str, condition: str,
               threshold: Any, bank_id: Optional[int] = None) -> models.Alert:
        """An alert on a bank's rate, or on the best rate across banks
        without `bank_id`; `condition` is `above` or `below`."""
        return self._client._run(
            _core.create_alert(webhook_id, currency, field, condition, threshold, bank_id))

    def list(self) -> List[models.Alert]:
        return self._client._run(_core.list_alerts())

    def delete(self, alert_id: str) -> None:
        self._client._run(_core.delete_alert(alert_id))


class Client:
    """`Client(base_url, api_key)`. With `retry_rate_limited=N`, a 429 is
    waited out (its `Retry-After`) and tried again up to N times; by
    default it raises `RateLimited`."""

    def __init__(self, base_url: str, api_key: Optional[str] = None, *, timeout: float = 10.0,
                 retry_rate_limited: int = 0, http: Optional[httpx.Client] = None):
        headers = {"user-agent": _core.USER_AGENT}
        if api_key:
            headers["x-api-key"] = api_key
        self._http = http or httpx.Client(base_url=base_url.rstrip("/"), headers=headers,
                                          timeout=timeout)
        self._retries = retry_rate_limited
        self.webhooks = _Webhooks(self)
        self.alerts = _Alerts(self)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: _core.Call) -> Any:
        attempt = 0
        while True:
            response = self._http.request(call.method, call.path, params=call.params,
                                          content=call.content(), headers=call.headers())
            try:
                return _core.answer(response.status_code, response.text,
                                    response.headers.get("retry-after"))
            except RateLimited as limited:
                if attempt >= self._retries:
                    raise
                attempt += 1
                time.sleep(limited.retry_after if limited.retry_after is not None else 1.0)

    def _run(self, call: _core.Call) -> Any:
        return call.read(self._send(call))

    def _pages(self, call: Optional[_core.Call],
               items: Callable[[Any], List[Any]]) -> Iterator[Any]:
        """Each page's items, following `next` to the last page."""
        while call is not None:
            envelope = self._send(call)
            yield from items(envelope)
            call = _core.following(envelope)

    def banks(self, with_recent: bool = False) -> List[models.Bank]:
        return self._run(_core.banks(with_recent))

    def currencies(self) -> List[models.Currency]:
        return self._run(_core.currencies())

    def rates(self, bank_id: Optional[int] = None, transactional: bool = False,
              social_links: bool = False, as_known_at: Instant = None) -> List[models.Bank]:
        """The banks' latest boards; with `as_known_at`, as they were known then."""
        return self._run(_core.rates(bank_id, transactional, social_links, as_known_at))

    def best_rates(self, currency: str, as_known_at: Instant = None) -> models.BestRates:
        return self._run(_core.best_rates(currency, as_known_at))

    def history(self, bank_id: int, date: str, currency: Optional[str] = None,
                as_known_at: Instant = None) -> models.HistoryRecord:
        return self._run(_core.history(bank_id, date, currency, as_known_at))

    def series(self, bank_id: Optional[int] = None, currency: str = "USD",
               interval: str = "day", from_: Optional[str] = None, to: Optional[str] = None,
               field: Optional[str] = None,
               as_known_at: Instant = None) -> Iterator[models.SeriesPoint]:
        """Every point of the range, page after page (`next`), lazily."""
        first = _core.series_page(bank_id, currency, interval, from_, to, field, as_known_at)
        yield from self._pages(first, _core.points)

    def convert(self, amount: Any, from_: str, to: str, transactional: bool = False,
                bank_id: Optional[int] = None,
                as_known_at: Instant = None) -> models.Conversion:
        """`amount` of `from_` in `to` at each bank's rate, through birr."""
        call = _core.convert(amount, from_, to, transactional, bank_id, as_known_at)
        return self._run(call)

    def spreads(self, currency: str, transactional: bool = False,
                as_known_at: Instant = None) -> models.Spreads:
        """Each bank's spread for `currency`, beside the National Bank's reference."""
        return self._run(_core.spreads(currency, transactional, as_known_at))

    def reference_rates(self, currency: Optional[str] = None, date: Optional[str] = None,
                        as_known_at: Instant = None
                        ) -> Union[models.ReferenceRate, List[models.ReferenceRate]]:
        """The National Bank's reference: one currency's, or every currency's (a list)."""
        return self._run(_core.reference_rates(currency, date, as_known_at))

    def board(self, event_id: str) -> models.Board:
        """A published board and where it came from: when it was received and
        acknowledged, its place in the log, its source and what revised it."""
        return self._run(_core.board(event_id))

    def board_at(self, bank_id: int, as_of: Instant) -> models.Board:
        """The bank's board for `as_of`, with its provenance: a rate's
        `updated_at` names the board it came from."""
        return self._run(_core.board_at(bank_id, as_of))

    def revisions(self, bank_id: Optional[int] = None, from_: Instant = None,
                  to: Instant = None) -> Iterator[models.Revision]:
        """Corrections and retractions, oldest known first, page after page."""
        yield from self._pages(_core.revisions_page(bank_id, from_, to), _core.revisions)

    def quality(self, bank_id: Optional[int] = None, days: Optional[int] = None,
                as_known_at: Instant = None) -> Union[models.Quality, List[models.Quality]]:
        """A bank's publishing record (or every bank's, a list) over `days`."""
        return self._run(_core.quality(bank_id, days, as_known_at))

    def stream(self, events: Optional[Iterable[str]] = None,
               bank_ids: Optional[Iterable[int]] = None,
               currencies: Optional[Iterable[str]] = None,
               snapshot: bool = False,
               reconnect_after: float = 1.0) -> Iterator[models.StreamEvent]:
        """The live stream's events, for as long as it is read. A dropped
        connection is made again with `Last-Event-ID`, so what changed
        meanwhile comes first. With `snapshot`, it starts with every matching
        bank's board and currency's best rates."""
        params = _core.stream_params(events, bank_ids, currencies, snapshot)
        parser = _core.ServerSentEvents()
        while True:
            headers = {"accept": "text/event-stream"}
            if parser.last_id:
                headers["last-event-id"] = parser.last_id
            try:
                with self._http.stream("GET", "/api/v1/stream", params=params, headers=headers,
                                       timeout=httpx.Timeout(None, connect=10.0)) as response:
                    if response.status_code != 200:
                        _core.answer(response.status_code, response.read().decode(),
                                     response.headers.get("retry-after"))
                    for line in response.iter_lines():
                        yield from parser.feed(line)
            except (httpx.TransportError, httpx.RemoteProtocolError):
                pass
            time.sleep(reconnect_after)
