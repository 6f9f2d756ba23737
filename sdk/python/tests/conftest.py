"""What the live tests run against, from the environment: the API
(RATEWIRE_BASE_URL, RATEWIRE_API_KEY) and, for the tests that move a rate,
a bank's publisher (RATEWIRE_INGEST_URL, RATEWIRE_BANK_ID,
RATEWIRE_PUBLISHER_TOKEN). The end-to-end suite sets them all
(tests/tests/sdks.rs); without them the live tests are skipped."""

import datetime
import os
import time

import httpx
import pytest

BASE = os.environ.get("RATEWIRE_BASE_URL", "http://127.0.0.1:8080")
KEY = os.environ.get("RATEWIRE_API_KEY")
INGEST = os.environ.get("RATEWIRE_INGEST_URL")
BANK = int(os.environ.get("RATEWIRE_BANK_ID", "0")) or None
TOKEN = os.environ.get("RATEWIRE_PUBLISHER_TOKEN")

live = pytest.mark.skipif(not KEY, reason="needs RATEWIRE_API_KEY and a running stack")
publishing = pytest.mark.skipif(not (KEY and INGEST and BANK and TOKEN),
                                reason="needs a bank's publisher (RATEWIRE_INGEST_URL, ...)")


def publish(cash_buying: str, cash_selling: str) -> None:
    """A board for the test's bank with USD at these rates, accepted."""
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
    # Rates as the bank writes them: JSON numbers with their digits.
    board = (f'{{"asOf":"{now.replace("+00:00", "Z")}","rates":[{{"currency":"USD",'
             f'"cashBuying":{cash_buying},"cashSelling":{cash_selling}}}]}}')
    answer = httpx.post(f"{INGEST}/v1/banks/{BANK}/boards", content=board,
                        headers={"authorization": f"Bearer {TOKEN}",
                                 "content-type": "application/json"}, timeout=10)
    assert answer.status_code == 202, answer.text


def eventually(check, timeout=30.0):
    """`check()`'s first truthy answer within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)
