"""Errors the API answers, one class per kind a caller handles differently."""

from __future__ import annotations

from typing import Any, Dict, List, Optional


class RatewireError(Exception):
    """Any answer that is not a success: its HTTP status, message and body."""

    def __init__(self, status: int, message: str, body: Optional[Dict[str, Any]] = None):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.body = body or {}


class ValidationError(RatewireError):
    """400: `errors` names each bad parameter with what is wrong with it."""

    @property
    def errors(self) -> Dict[str, List[str]]:
        return self.body.get("errors") or {}


class Unauthorized(RatewireError):
    """401: the key is missing, unknown or revoked."""


class NotFound(RatewireError):
    """404: no such bank, currency, board, webhook or alert."""


class RateLimited(RatewireError):
    """429: the minute's limit or the month's quota is spent; `retry_after`
    is the seconds the API asked to wait, `code` which of the two."""

    def __init__(self, status: int, message: str, body: Optional[Dict[str, Any]],
                 retry_after: Optional[float]):
        super().__init__(status, message, body)
        self.retry_after = retry_after

    @property
    def code(self) -> Optional[str]:
        return self.body.get("code")


class Unavailable(RatewireError):
    """503: a store the API needs is down or slow; try again shortly."""


def error_for(status: int, body: Dict[str, Any], retry_after: Optional[str]) -> RatewireError:
    """The error an answer with `status` and parsed `body` stands for."""
    message = str(body.get("message") or "")
    if status == 400:
        return ValidationError(status, message, body)
    if status == 401:
        return Unauthorized(status, message, body)
    if status == 404:
        return NotFound(status, message, body)
    if status == 429:
        seconds = float(retry_after) if retry_after and retry_after.strip().isdigit() else None
        return RateLimited(status, message, body, seconds)
    if status == 503:
        return Unavailable(status, message, body)
    return RatewireError(status, message, body)
