"""The asynchronous client: `Client`'s surface, awaited."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Callable, Iterable, List, Optional, Union

import httpx

from . import _core, models
from ._core import Instant
from .errors import RateLimited


class _Webhooks:
    def __init__(self, client: "AsyncClient"):
        self._client = client

    async def create(self, url: str, description: Optional[str] = None,
                     events: Optional[Iterable[str]] = None) -> models.Webhook:
        return await self._client._run(_core.create_webhook(url, description, events))

    async def list(self) -> List[models.Webhook]:
        return await self._client._run(_core.list_webhooks())

    async def delete(self, webhook_id: str) -> None:
        await self._client._run(_core.delete_webhook(webhook_id))


class _Alerts:
    def __init__(self, client: "AsyncClient"):
        self._client = client

    async def create(self, webhook_id: str, currency: str, field: str, condition: str,
                     threshold: Any, bank_id: Optional[int] = None) -> models.Alert:
        return await self._client._run(
            _core.create_alert(webhook_id, currency, field, condition, threshold, bank_id))

    async def list(self) -> List[models.Alert]:
        return await self._client._run(_core.list_alerts())

    async def delete(self, alert_id: str) -> None:
        await self._client._run(_core.delete_alert(alert_id))


class AsyncClient:
    """`AsyncClient(base_url, api_key)`; see `Client`."""

    def __init__(self, base_url: str, api_key: Optional[str] = None, *, timeout: float = 10.0,
                 retry_rate_limited: int = 0, http: Optional[httpx.AsyncClient] = None):
        headers = {"user-agent": _core.USER_AGENT}
        if api_key:
            headers["x-api-key"] = api_key
        self._http = http or httpx.AsyncClient(base_url=base_url.rstrip("/"), headers=headers,
                                               timeout=timeout)
        self._retries = retry_rate_limited
        self.webhooks = _Webhooks(self)
        self.alerts = _Alerts(self)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: _core.Call) -> Any:
        attempt = 0
        while True:
            response = await self._http.request(call.method, call.path, params=call.params,
                                                content=call.content(), headers=call.headers())
            try:
                return _core.answer(response.status_code, response.text,
                                    response.headers.get("retry-after"))
            except RateLimited as limited:
                if attempt >= self._retries:
                    raise
                attempt += 1
                await asyncio.sleep(limited.retry_after if limited.retry_after is not None
                                    else 1.0)

    async def _run(self, call: _core.Call) -> Any:
        return call.read(await self._send(call))

    async def _pages(self, call: Optional[_core.Call],
                     items: Callable[[Any], List[Any]]) -> AsyncIterator[Any]:
        """Each page's items, following `next` to the last page."""
        while call is not None:
            envelope = await self._send(call)
            for item in items(envelope):
                yield item
            call = _core.following(envelope)

    async def banks(self, with_recent: bool = False) -> List[models.Bank]:
        return await self._run(_core.banks(with_recent))

    async def currencies(self) -> List[models.Currency]:
        return await self._run(_core.currencies())

    async def rates(self, bank_id: Optional[int] = None, transactional: bool = False,
                    social_links: bool = False, as_known_at: Instant = None) -> List[models.Bank]:
        """The banks' latest boards; with `as_known_at`, as they were known then."""
        return await self._run(_core.rates(bank_id, transactional, social_links, as_known_at))

    async def best_rates(self, currency: str, as_known_at: Instant = None) -> models.BestRates:
        return await self._run(_core.best_rates(currency, as_known_at))

    async def history(self, bank_id: int, date: str, currency: Optional[str] = None,
                      as_known_at: Instant = None) -> models.HistoryRecord:
        return await self._run(_core.history(bank_id, date, currency, as_known_at))

    async def series(self, bank_id: Optional[int] = None, currency: str = "USD",
                     interval: str = "day", from_: Optional[str] = None, to: Optional[str] = None,
                     field: Optional[str] = None,
                     as_known_at: Instant = None) -> AsyncIterator[models.SeriesPoint]:
        """Every point of the range, page after page (`next`), lazily."""
        first = _core.series_page(bank_id, currency, interval, from_, to, field, as_known_at)
        async for point in self._pages(first, _core.points):
            yield point

    async def convert(self, amount: Any, from_: str, to: str, transactional: bool = False,
                      bank_id: Optional[int] = None,
                      as_known_at: Instant = None) -> models.Conversion:
        """`amount` of `from_` in `to` at each bank's rate, through birr."""
        call = _core.convert(amount, from_, to, transactional, bank_id, as_known_at)
        return await self._run(call)

    async def spreads(self, currency: str, transactional: bool = False,
                      as_known_at: Instant = None) -> models.Spreads:
        """Each bank's spread for `currency`, beside the National Bank's reference."""
        return await self._run(_core.spreads(currency, transactional, as_known_at))

    async def reference_rates(self, currency: Optional[str] = None, date: Optional[str] = None,
                              as_known_at: Instant = None
                              ) -> Union[models.ReferenceRate, List[models.ReferenceRate]]:
        """The National Bank's reference: one currency's, or every currency's (a list)."""
        return await self._run(_core.reference_rates(currency, date, as_known_at))

    async def board(self, event_id: str) -> models.Board:
        """A published board and where it came from: when it was received and
        acknowledged, its place in the log, its source and what revised it."""
        return await self._run(_core.board(event_id))

    async def board_at(self, bank_id: int, as_of: Instant) -> models.Board:
        """The bank's board for `as_of`, with its provenance: a rate's
        `updated_at` names the board it came from."""
        return await self._run(_core.board_at(bank_id, as_of))

    async def revisions(self, bank_id: Optional[int] = None, from_: Instant = None,
                        to: Instant = None) -> AsyncIterator[models.Revision]:
        """Corrections and retractions, oldest known first, page after page."""
        async for revision in self._pages(_core.revisions_page(bank_id, from_, to),
                                          _core.revisions):
            yield revision

    async def quality(self, bank_id: Optional[int] = None, days: Optional[int] = None,
                      as_known_at: Instant = None) -> Union[models.Quality, List[models.Quality]]:
        """A bank's publishing record (or every bank's, a list) over `days`."""
        return await self._run(_core.quality(bank_id, days, as_known_at))

    async def stream(self, events: Optional[Iterable[str]] = None,
                     bank_ids: Optional[Iterable[int]] = None,
                     currencies: Optional[Iterable[str]] = None,
                     snapshot: bool = False,
                     reconnect_after: float = 1.0) -> AsyncIterator[models.StreamEvent]:
        params = _core.stream_params(events, bank_ids, currencies, snapshot)
        parser = _core.ServerSentEvents()
        while True:
            headers = {"accept": "text/event-stream"}
            if parser.last_id:
                headers["last-event-id"] = parser.last_id
            try:
                async with self._http.stream("GET", "/api/v1/stream", params=params,
                                             headers=headers,
                                             timeout=httpx.Timeout(None, connect=10.0)
                                             ) as response:
                    if response.status_code != 200:
                        _core.answer(response.status_code, (await response.aread()).decode(),
                                     response.headers.get("retry-after"))
                    async for line in response.aiter_lines():
                        for event in parser.feed(line):
                            yield event
            except (httpx.TransportError, httpx.RemoteProtocolError):
                pass
            await asyncio.sleep(reconnect_after)
