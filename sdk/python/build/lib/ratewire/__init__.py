"""ratewire: bank exchange rates, their history and series, the live stream,
alerts and signed webhooks. `Client` and `AsyncClient` share one surface."""

from .aio import AsyncClient
from .client import Client
from .errors import (NotFound, RateLimited, RatewireError, Unauthorized, Unavailable,
                     ValidationError)
from .webhooks import InvalidSignature, verify_webhook

__all__ = ["Client", "AsyncClient", "RatewireError", "ValidationError", "Unauthorized",
           "NotFound", "RateLimited", "Unavailable", "verify_webhook", "InvalidSignature"]
