//! Spread-cap breaches found as boards are applied
//! (`quality.spread_cap_breached`): a pair of a bank's newest board whose
//! spread is over the cap, where the bank's board before it had the pair
//! within the cap or did not quote it. Judged on the alerts' copy of the
//! quotes, like crossings, so each log position is judged once; the event's
//! id comes from the board and the pair, so no judgement can record it
//! twice.

use chrono::{DateTime, Utc};
use ratewire_readmodel::quality::spread::{spread_percent, Pair};
use rust_decimal::Decimal;
use uuid::Uuid;

use super::watching::BankNow;
use crate::judge::Quote;
use crate::message::{BankRef, Body, SpreadCapBreached, SPREAD_CAP_BREACHED};

/// A watchdog event to record: its id, type, body and time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QualityEvent {
    pub id: String,
    pub kind: &'static str,
    pub body: String,
    pub occurred_at: DateTime<Utc>,
}

/// A batch's breach judge, and the breaches found.
#[derive(Debug)]
pub struct Breaches {
    cap: Decimal,
    pub found: Vec<QualityEvent>,
}

impl Breaches {
    pub fn new(cap: Decimal) -> Self {
        Self {
            cap,
            found: Vec::new(),
        }
    }

    /// Judges the pairs of `now` against the bank's quotes `before` it.
    pub fn observe(
        &mut self,
        event_id: Uuid,
        occurred_at: DateTime<Utc>,
        now: &BankNow,
        before: &[Quote],
    ) {
        let was_over = |quote: &Quote, pair: Pair| {
            before
                .iter()
                .find(|q| q.currency == quote.currency)
                .and_then(|q| over(q, pair, self.cap))
                .is_some()
        };
        for quote in &now.quotes {
            for pair in [Pair::Cash, Pair::Transactional] {
                let Some((buying, selling, spread)) = over(quote, pair, self.cap) else {
                    continue;
                };
                if was_over(quote, pair) {
                    continue;
                }
                let body = Body {
                    kind: SPREAD_CAP_BREACHED,
                    timestamp: occurred_at,
                    data: SpreadCapBreached {
                        bank: BankRef {
                            id: now.bank,
                            name: now.name.clone(),
                            code: now.code.clone(),
                        },
                        currency_code: quote.currency.as_str().to_owned(),
                        pair: pair.name(),
                        buying,
                        selling,
                        spread_percent: spread,
                        spread_cap_percent: self.cap,
                        updated_at: quote.updated_at,
                        event_id,
                    },
                };
                self.found.push(QualityEvent {
                    id: format!("breach:{event_id}:{}:{}", quote.currency, pair.name()),
                    kind: SPREAD_CAP_BREACHED,
                    body: body.to_json(),
                    occurred_at,
                });
            }
        }
    }
}

/// The pair's buying, selling and spread percent when it is over `cap`.
fn over(quote: &Quote, pair: Pair, cap: Decimal) -> Option<(Decimal, Decimal, Decimal)> {
    let (buying, selling) = match pair {
        Pair::Cash => (quote.cash_buying?, quote.cash_selling?),
        Pair::Transactional => (quote.transactional_buying?, quote.transactional_selling?),
    };
    let spread = spread_percent(buying, selling)?;
    (spread > cap).then_some((buying, selling, spread))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratewire_proto::CurrencyCode;
    use std::str::FromStr;

    fn usd(buying: &str, selling: &str) -> Quote {
        Quote {
            bank: 7,
            currency: CurrencyCode::parse("USD").unwrap(),
            cash_buying: Some(Decimal::from_str(buying).unwrap()),
            cash_selling: Some(Decimal::from_str(selling).unwrap()),
            transactional_buying: None,
            transactional_selling: None,
            updated_at: "2026-11-02T09:00:00Z".parse().unwrap(),
            previous: [None; 4],
        }
    }

    fn now(quotes: Vec<Quote>) -> BankNow {
        BankNow {
            bank: 7,
            code: "B7".into(),
            name: "Bank Seven".into(),
            active: true,
            quotes,
            without_previous: Default::default(),
        }
    }

    #[test]
    fn a_breach_is_told_when_it_opens_and_not_while_it_lasts() {
        let mut breaches = Breaches::new(Decimal::TWO);
        let at = "2026-11-02T09:00:01Z".parse().unwrap();
        let (first, second, third) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let boards = [
            (first, usd("150", "155")),
            (second, usd("150", "156")),
            (third, usd("150", "151")),
            (Uuid::nil(), usd("150", "155")),
        ];
        let mut before = vec![usd("150", "152")];
        for (event, quote) in boards {
            breaches.observe(event, at, &now(vec![quote]), &before);
            before = vec![quote];
        }
        let ids: Vec<&str> = breaches.found.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                format!("breach:{first}:USD:cash").as_str(),
                format!("breach:{}:USD:cash", Uuid::nil()).as_str()
            ]
        );
        let body: serde_json::Value = serde_json::from_str(&breaches.found[0].body).unwrap();
        assert_eq!(body["type"], "quality.spread_cap_breached");
        assert_eq!(body["data"]["spreadPercent"], 3.2787);
        assert_eq!(body["data"]["spreadCapPercent"], 2);
        assert_eq!(body["data"]["pair"], "cash");
    }
}
