"""The API's answers as typed objects, fields in snake_case. Numbers stay
`Decimal` as written (a rate's digits are the bank's); times are aware
`datetime`s. Fields the API adds later are kept in `extra`, not lost."""

from __future__ import annotations

import dataclasses
import re
import sys
import typing
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Dict, List, Optional, Type, TypeVar, Union

T = TypeVar("T")

# JSON names that are Python keywords become fields with a trailing `_`.
KEYWORDS = {"from"}


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def decode(cls: Any, value: Any) -> Any:
    """`value` (parsed JSON) as an instance of the type `cls`."""
    if value is None:
        return None
    origin = typing.get_origin(cls)
    if origin is Union:
        inner = [a for a in typing.get_args(cls) if a is not type(None)]
        return decode(inner[0], value)
    if origin in (list, List):
        (item,) = typing.get_args(cls)
        return [decode(item, v) for v in value]
    if origin in (dict, Dict):
        _, item = typing.get_args(cls)
        return {k: decode(item, v) for k, v in value.items()}
    if cls is Decimal:
        return Decimal(str(value))
    if cls is datetime:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    if dataclasses.is_dataclass(cls):
        hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        values: Dict[str, Any] = {}
        extra: Dict[str, Any] = {}
        for key, item in value.items():
            name = snake(key) + ("_" if key in KEYWORDS else "")
            if name in known:
                values[name] = decode(hints[name], item)
            else:
                extra[key] = item
        for name in known - values.keys():
            values[name] = None
        return cls(**values, extra=extra)
    return value


def parse(cls: Type[T], value: Any) -> T:
    return decode(cls, value)


@dataclass
class Currency:
    id: str
    name: str
    symbol: str
    image_url: Optional[str]
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class SocialLink:
    platform: str
    url: str
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Difference:
    cash_buying: Optional[Decimal]
    cash_selling: Optional[Decimal]
    transactional_buying: Optional[Decimal]
    transactional_selling: Optional[Decimal]
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ExchangeRate:
    cash_buying: Optional[Decimal]
    cash_selling: Optional[Decimal]
    transactional_buying: Optional[Decimal]
    transactional_selling: Optional[Decimal]
    updated_at: datetime
    currency: Currency
    difference: Optional[Difference]
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Bank:
    """A bank: its rates when the answer carries them (`rates()`, or
    `banks(with_recent=True)`), its social links when asked for."""
    id: Union[int, str]
    name: str
    code: str
    image_url: Optional[str]
    last_rates_updated_at: Optional[datetime]
    exchange_rates: Optional[List[ExchangeRate]]
    social_links: Optional[List[SocialLink]]
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class BankRef:
    id: int
    name: str
    code: str
    image_url: Optional[str]
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class RatePoint:
    value: Decimal
    timestamp: datetime
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class BestRate:
    price: Decimal
    updated_at: datetime
    timestamp: datetime
    difference: Optional[str]
    bank: BankRef
    rates: List[RatePoint]
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class BestRates:
    cash_buying: Optional[BestRate]
    cash_selling: Optional[BestRate]
    transactional_buying: Optional[BestRate]
    transactional_selling: Optional[BestRate]
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class HistoryRecord:
    cash_buying: Optional[Decimal]
    cash_selling: Optional[Decimal]
    transactional_buying: Optional[Decimal]
    transactional_selling: Optional[Decimal]
    timestamp: datetime
    currency: Currency
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class SeriesPoint:
    """A bank's point carries its four rates; a best-value point `value`
    and `bank_id`."""
    timestamp: datetime
    updated_at: Optional[datetime]
    carried_from: Optional[datetime]
    cash_buying: Optional[Decimal]
    cash_selling: Optional[Decimal]
    transactional_buying: Optional[Decimal]
    transactional_selling: Optional[Decimal]
    value: Optional[Decimal]
    bank_id: Optional[int]
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Webhook:
    """A webhook; `secret` only on the answer that creates it, the state of
    its deliveries on the others."""
    id: str
    url: str
    description: Optional[str]
    events: List[str]
    created_at: datetime
    secret: Optional[str]
    status: Optional[str]
    pending: Optional[int]
    last_error: Optional[str]
    last_error_at: Optional[datetime]
    last_success_at: Optional[datetime]
    failing_since: Optional[datetime]
    disabled_at: Optional[datetime]
    previous_secret_until: Optional[datetime]
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ConvertLeg:
    currency: str
    side: str
    rate: Decimal
    updated_at: datetime
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ConvertResult:
    """One bank's conversion: the amount, the rate and the legs through birr."""
    bank: BankRef
    amount: Decimal
    rate: Decimal
    legs: List[ConvertLeg]
    updated_at: datetime
    age_seconds: int
    stale: bool
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Conversion:
    from_: str
    to: str
    amount: Decimal
    transactional: bool
    results: List[ConvertResult]
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class SpreadsReference:
    date: str
    buying: Decimal
    selling: Decimal
    weighted_average: Decimal
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class SpreadRow:
    bank: BankRef
    updated_at: datetime
    age_seconds: int
    stale: bool
    cash_buying: Decimal
    cash_selling: Decimal
    cash_spread: Decimal
    cash_spread_percent: Decimal
    cash_over_spread_cap: Optional[bool]
    cash_buying_premium_percent: Optional[Decimal]
    cash_selling_premium_percent: Optional[Decimal]
    transactional_buying: Optional[Decimal]
    transactional_selling: Optional[Decimal]
    transactional_spread: Optional[Decimal]
    transactional_spread_percent: Optional[Decimal]
    transactional_over_spread_cap: Optional[bool]
    transactional_buying_premium_percent: Optional[Decimal]
    transactional_selling_premium_percent: Optional[Decimal]
    reference_date: Optional[str]
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Spreads:
    currency: Currency
    spread_cap_percent: Decimal
    reference: Optional[SpreadsReference]
    banks: List[SpreadRow]
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ReferenceRate:
    """The National Bank's reference rate of a currency on a day."""
    date: str
    source: str
    currency: Currency
    buying: Decimal
    selling: Decimal
    weighted_average: Decimal
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Alert:
    id: str
    webhook_id: str
    currency_code: str
    field: str
    condition: str
    threshold: Decimal
    bank_id: Optional[int]
    created_at: datetime
    triggered: Optional[bool]
    last_value: Optional[Decimal]
    fired: int
    last_fired_at: Optional[datetime]
    extra: Dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclass
class StreamEvent:
    """One event of the live stream: its name, its id (to resume after) and
    its data, parsed."""
    event: str
    id: Optional[str]
    data: Any


@dataclass
class BoardLog:
    """Where the board sits in the log: topic, partition and offset."""
    topic: str
    partition: int
    offset: int
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class BoardSource:
    """Where the publisher took the numbers from, as it says."""
    method: str
    url: Optional[str]
    captured_at: Optional[datetime]
    sha256: Optional[str]
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class BoardOutlier:
    currency_code: str
    field: str
    value: Decimal
    previous: Optional[Decimal]
    median: Optional[Decimal]
    extra: Dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclass
class RevisionChange:
    currency_code: str
    field: str
    before: Optional[Decimal]
    after: Optional[Decimal]
    extra: Dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)


@dataclass
class Revision:
    """A correction (a board of the same bank and asOf replaced it) or a
    retraction, with each value it changed."""
    event_id: str
    kind: str
    revised_event_id: str
    bank_id: int
    as_of: datetime
    known_at: datetime
    reason: Optional[str]
    changes: List[RevisionChange]
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Board:
    """One published board with its provenance: when it was received and
    acknowledged by the log, where it sits there, its source, and what
    revised it since."""
    event_id: str
    bank_id: int
    as_of: datetime
    rates: List[HistoryRecord]
    received_at: Optional[datetime]
    known_at: Optional[datetime]
    log: Optional[BoardLog]
    source: Optional[BoardSource]
    reason: Optional[str]
    status: str
    revisions: List[Revision]
    outliers: List[BoardOutlier]
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class MissedSpan:
    from_: datetime
    to: datetime
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ScoreComponent:
    points: Decimal
    share: Decimal
    weight: int
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ScoreComponents:
    publishing: ScoreComponent
    stability: ScoreComponent
    plausibility: ScoreComponent
    spread_cap: ScoreComponent
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class SpreadCapBreach:
    currency_code: str
    pair: str
    from_: datetime
    to: Optional[datetime]
    max_spread_percent: Decimal
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Quality:
    """A bank's publishing record over a window: missed slots, corrections,
    outliers, spread-cap breaches and the score they make."""
    bank_id: int
    days: int
    from_: datetime
    to: datetime
    schedule: Any
    publishes_expected: int
    publishes_missed: int
    missed: List[MissedSpan]
    boards: int
    corrections: int
    retractions: int
    outliers: int
    spread_cap_percent: Decimal
    spread_cap_breaches: List[SpreadCapBreach]
    last_board_at: Optional[datetime]
    median_delay_seconds: Optional[int]
    score: int
    score_components: ScoreComponents
    extra: Dict[str, Any] = field(default_factory=dict, repr=False)


# Each model and the document's schemas it reads (`sdk/openapi.json`): the
# SDK's tests check that a model's fields are exactly their properties, so
# a field the API adds or drops is seen here first.
SCHEMAS: Dict[type, tuple] = {
    Currency: ("Currency",),
    SocialLink: ("SocialLink",),
    Difference: ("Difference",),
    ExchangeRate: ("ExchangeRate", "RecentRate"),
    Bank: ("Bank", "RatesBank"),
    BankRef: ("BestRateBank", "ConvertBank"),
    RatePoint: ("RatePoint",),
    BestRate: ("BestRate",),
    BestRates: ("BestRates",),
    HistoryRecord: ("HistoryRecord",),
    SeriesPoint: ("BankSeriesPoint", "BestSeriesPoint"),
    Webhook: ("Webhook", "CreatedWebhook"),
    Alert: ("Alert",),
    ConvertLeg: ("ConvertLeg",),
    ConvertResult: ("ConvertResult",),
    Conversion: ("Conversion",),
    SpreadsReference: ("SpreadsReference",),
    SpreadRow: ("SpreadRow",),
    Spreads: ("Spreads",),
    ReferenceRate: ("ReferenceRate",),
    BoardLog: ("BoardLog",),
    BoardSource: ("BoardSource",),
    BoardOutlier: ("BoardOutlier",),
    RevisionChange: ("RevisionChange",),
    Revision: ("Revision",),
    Board: ("Board",),
    MissedSpan: ("MissedSpan",),
    ScoreComponent: ("ScoreComponent",),
    ScoreComponents: ("ScoreComponents",),
    SpreadCapBreach: ("SpreadCapBreach",),
    Quality: ("Quality",),
}
