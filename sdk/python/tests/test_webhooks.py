"""verify_webhook, without a stack: Standard Webhooks signatures over the
message id, its time and the body."""

import base64
import hashlib
import hmac
import time

import pytest

from ratewire import InvalidSignature, verify_webhook


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    mac = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()


def test_a_signed_call_verifies_and_a_changed_body_does_not():
    now = int(time.time())
    body = b'{"type":"rate.threshold_crossed"}'
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(now),
               "webhook-signature": sign(SECRET, "msg_1", now, body)}
    verify_webhook(SECRET, headers, body)
    with pytest.raises(InvalidSignature):
        verify_webhook(SECRET, headers, body + b" ")


def test_an_old_call_is_refused_even_when_signed():
    now = int(time.time())
    body = b"{}"
    headers = {"webhook-id": "msg_2", "webhook-timestamp": str(now),
               "webhook-signature": sign(SECRET, "msg_2", now, body)}
    with pytest.raises(InvalidSignature):
        verify_webhook(SECRET, headers, body, now=now + 301)


def test_any_of_several_signatures_verifies_during_a_rotation():
    now = int(time.time())
    body = b"{}"
    other = "whsec_" + base64.b64encode(b"o" * 32).decode()
    headers = {"webhook-id": "msg_3", "webhook-timestamp": str(now),
               "webhook-signature": " ".join([sign(other, "msg_3", now, body),
                                              sign(SECRET, "msg_3", now, body)])}
    verify_webhook(SECRET, headers, body)
