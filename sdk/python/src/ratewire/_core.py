"""What the sync and async clients share: each call as a request to make and
a way to read its answer, so that the two differ only in how they wait."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal
from datetime import datetime
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Union

from . import models
from .errors import error_for

USER_AGENT = "ratewire-python/0.1.0"

# An instant for `as_known_at` and its kin: an aware datetime or RFC 3339 text.
Instant = Union[datetime, str, None]


@dataclass
class Call:
    method: str
    path: str
    params: Optional[Dict[str, Any]] = None
    body: Optional[Dict[str, Any]] = None
    read: Callable[[Any], Any] = lambda envelope: envelope

    def headers(self) -> Optional[Dict[str, str]]:
        return {"content-type": "application/json"} if self.body is not None else None

    def content(self) -> Optional[bytes]:
        """The body as JSON, its `Decimal`s as numbers with their digits (the
        API reads thresholds as numbers, and a float would change them)."""
        if self.body is None:
            return None
        numbers: List[str] = []

        def number(value: Any) -> str:
            if isinstance(value, Decimal) and value.is_finite():
                numbers.append(str(value))
                return f"\x00{len(numbers) - 1}\x00"
            raise TypeError(f"{type(value).__name__} is not JSON")

        text = json.dumps(self.body, default=number)
        return re.sub(r'"\\u0000(\d+)\\u0000"', lambda m: numbers[int(m.group(1))],
                      text).encode()


def query(**params: Any) -> Dict[str, Any]:
    """Query parameters without the unset ones; booleans as the API spells them."""
    out: Dict[str, Any] = {}
    for key, value in params.items():
        if value is None:
            continue
        out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out


def data(cls: Any) -> Callable[[Any], Any]:
    return lambda envelope: models.decode(cls, envelope["data"])


def answer(status: int, text: str, retry_after: Optional[str]) -> Any:
    """The parsed envelope of a 2xx answer, or the error it stands for."""
    try:
        body = json.loads(text) if text else {}
    except ValueError:
        body = {"message": text[:200]}
    if 200 <= status < 300:
        return body
    raise error_for(status, body if isinstance(body, dict) else {}, retry_after)


def banks(with_recent: bool) -> Call:
    return Call("GET", "/api/v1/banks", query(withRecentEx=with_recent or None),
                read=data(List[models.Bank]))


def currencies() -> Call:
    return Call("GET", "/api/v1/currencies", read=data(List[models.Currency]))


def instant(value: Instant) -> Optional[str]:
    """An instant as the API reads it (RFC 3339); an aware `datetime` or text."""
    if value is None or isinstance(value, str):
        return value
    if value.tzinfo is None:
        raise ValueError("as_known_at needs an aware datetime (with its time zone)")
    return value.isoformat()


def rates(bank_id: Optional[int], transactional: bool, social_links: bool,
          as_known_at: Instant) -> Call:
    def read(envelope: Any) -> List[models.Bank]:
        # api-v1 nests an envelope per answer; the banks are inside.
        return [bank for inner in envelope["data"]
                for bank in models.decode(List[models.Bank], inner["data"])]
    return Call("GET", "/api/v1/rates",
                query(bankId=bank_id, transactional=transactional or None,
                      socialLinks=social_links or None, asKnownAt=instant(as_known_at)),
                read=read)


def best_rates(currency: str, as_known_at: Instant) -> Call:
    return Call("GET", "/api/v1/rates/best-rates",
                query(currencyCode=currency, asKnownAt=instant(as_known_at)),
                read=data(models.BestRates))


def history(bank_id: int, date: str, currency: Optional[str], as_known_at: Instant) -> Call:
    return Call("GET", "/api/v1/history",
                query(bankId=bank_id, date=date, currencyCode=currency,
                      asKnownAt=instant(as_known_at)),
                read=data(models.HistoryRecord))


def series_page(bank_id: Optional[int], currency: str, interval: str, from_: Optional[str],
                to: Optional[str], field: Optional[str], as_known_at: Instant) -> Call:
    return Call("GET", "/api/v1/rates/series",
                query(bankId=bank_id, currencyCode=currency, interval=interval,
                      **{"from": from_}, to=to, field=field, asKnownAt=instant(as_known_at)))


def following(envelope: Any) -> Optional[Call]:
    """The page after this answer, when it names one in `data.next` (a path
    with its parameters spelled out); `None` on the last page."""
    path = envelope["data"].get("next")
    return Call("GET", path) if path else None


def points(envelope: Any) -> List[models.SeriesPoint]:
    return models.decode(List[models.SeriesPoint], envelope["data"].get("points") or [])


def convert(amount: Any, from_: str, to: str, transactional: bool,
            bank_id: Optional[int], as_known_at: Instant) -> Call:
    return Call("GET", "/api/v1/convert",
                query(amount=amount, **{"from": from_}, to=to, bankId=bank_id,
                      transactional=transactional or None, asKnownAt=instant(as_known_at)),
                read=data(models.Conversion))


def spreads(currency: str, transactional: bool, as_known_at: Instant) -> Call:
    return Call("GET", "/api/v1/rates/spreads",
                query(currencyCode=currency, transactional=transactional or None,
                      asKnownAt=instant(as_known_at)),
                read=data(models.Spreads))


def reference_rates(currency: Optional[str], date: Optional[str], as_known_at: Instant) -> Call:
    return Call("GET", "/api/v1/reference-rates",
                query(currencyCode=currency, date=date, asKnownAt=instant(as_known_at)),
                read=reference)


def board(event_id: str) -> Call:
    return Call("GET", f"/api/v1/boards/{event_id}", read=data(models.Board))


def board_at(bank_id: int, as_of: Instant) -> Call:
    return Call("GET", "/api/v1/boards", query(bankId=bank_id, asOf=instant(as_of)),
                read=data(models.Board))


def revisions_page(bank_id: Optional[int], from_: Instant, to: Instant) -> Call:
    return Call("GET", "/api/v1/revisions",
                query(bankId=bank_id, **{"from": instant(from_)}, to=instant(to)))


def revisions(envelope: Any) -> List[models.Revision]:
    return models.decode(List[models.Revision], envelope["data"].get("revisions") or [])


def quality(bank_id: Optional[int], days: Optional[int], as_known_at: Instant) -> Call:
    params = query(days=days, asKnownAt=instant(as_known_at))
    if bank_id is None:
        return Call("GET", "/api/v1/quality", params, read=data(List[models.Quality]))
    return Call("GET", f"/api/v1/banks/{bank_id}/quality", params, read=data(models.Quality))


def reference(envelope: Any) -> Any:
    """One currency's reference rate, or every currency's (a list)."""
    value = envelope["data"]
    if isinstance(value, list):
        return models.decode(List[models.ReferenceRate], value)
    return models.decode(models.ReferenceRate, value)


def create_webhook(url: str, description: Optional[str], events: Optional[Iterable[str]]) -> Call:
    body: Dict[str, Any] = {"url": url}
    if description is not None:
        body["description"] = description
    if events is not None:
        body["events"] = list(events)
    return Call("POST", "/api/v1/webhooks", body=body, read=data(models.Webhook))


def list_webhooks() -> Call:
    return Call("GET", "/api/v1/webhooks", read=data(List[models.Webhook]))


def delete_webhook(webhook_id: str) -> Call:
    return Call("DELETE", f"/api/v1/webhooks/{webhook_id}", read=lambda _: None)


def create_alert(webhook_id: str, currency: str, field: str, condition: str, threshold: Any,
                 bank_id: Optional[int]) -> Call:
    body: Dict[str, Any] = {"webhookId": webhook_id, "currencyCode": currency, "field": field,
                            "condition": condition, "threshold": Decimal(str(threshold))}
    if bank_id is not None:
        body["bankId"] = bank_id
    return Call("POST", "/api/v1/alerts", body=body, read=data(models.Alert))


def list_alerts() -> Call:
    return Call("GET", "/api/v1/alerts", read=data(List[models.Alert]))


def delete_alert(alert_id: str) -> Call:
    return Call("DELETE", f"/api/v1/alerts/{alert_id}", read=lambda _: None)


def stream_params(events: Optional[Iterable[str]], bank_ids: Optional[Iterable[int]],
                  currencies: Optional[Iterable[str]], snapshot: bool) -> Dict[str, Any]:
    join = lambda values: ",".join(str(v) for v in values) if values else None  # noqa: E731
    return query(events=join(events), bankId=join(bank_ids), currencyCode=join(currencies),
                 snapshot=snapshot or None)


class ServerSentEvents:
    """Reads a text/event-stream line by line into events (the WHATWG rules:
    `event`, `data` joined by newlines, `id`, comments skipped)."""

    def __init__(self) -> None:
        self.event = ""
        self.data: List[str] = []
        self.id: Optional[str] = None
        self.last_id: Optional[str] = None

    def feed(self, line: str) -> Iterator[models.StreamEvent]:
        if line == "":
            if self.data:
                text = "\n".join(self.data)
                try:
                    parsed: Any = json.loads(text)
                except ValueError:
                    parsed = text
                if self.id is not None:
                    self.last_id = self.id
                yield models.StreamEvent(self.event or "message", self.id, parsed)
            self.event, self.data, self.id = "", [], None
            return
        if line.startswith(":"):
            return
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self.event = value
        elif name == "data":
            self.data.append(value)
        elif name == "id":
            self.id = value
