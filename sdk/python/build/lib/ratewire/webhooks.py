"""Verifying a webhook call's signature (Standard Webhooks: HMAC-SHA256 over
`{webhook-id}.{webhook-timestamp}.{body}`, keyed with the `whsec_` secret)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from typing import Mapping, Optional, Union

TOLERANCE_SECONDS = 300


class InvalidSignature(ValueError):
    """The call is not signed with the secret, or is too old to trust."""


def verify_webhook(secret: str, headers: Mapping[str, str], body: Union[bytes, str],
                   now: Optional[float] = None) -> None:
    """Raises `InvalidSignature` unless `body` (the raw bytes received) was
    signed with `secret` within five minutes. Several signatures may be sent
    while a secret is rotated: one match is enough."""
    lower = {k.lower(): v for k, v in headers.items()}
    try:
        msg_id = lower["webhook-id"]
        timestamp = lower["webhook-timestamp"]
        signatures = lower["webhook-signature"].split()
    except KeyError as missing:
        raise InvalidSignature(f"the call has no {missing.args[0]} header") from None
    try:
        sent = int(timestamp)
    except ValueError:
        raise InvalidSignature("webhook-timestamp is not a number of seconds") from None
    if abs((time.time() if now is None else now) - sent) > TOLERANCE_SECONDS:
        raise InvalidSignature("the call is more than five minutes old")
    key = base64.b64decode(secret[len("whsec_"):] if secret.startswith("whsec_") else secret)
    raw = body.encode() if isinstance(body, str) else body
    mac = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + raw, hashlib.sha256).digest()
    expected = "v1," + base64.b64encode(mac).decode()
    if not any(hmac.compare_digest(expected, given) for given in signatures):
        raise InvalidSignature("no signature matches")
