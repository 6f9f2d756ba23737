//! Reading the changes stream: what each entry names, and the views it
//! names read and encoded once per variant.

use ratewire_proto::{BankId, CurrencyCode};
use ratewire_readmodel::redis::Connection;
use ratewire_readmodel::redis::Keys;
use ratewire_readmodel::views::RatesVariant;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::live::delivery::{frame, Delivery, Position};
use crate::views::requests::List;

/// What an entry of the changes stream names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Board {
        bank: BankId,
        currencies: Vec<CurrencyCode>,
    },
    Best {
        currency: CurrencyCode,
    },
    /// The all-banks lists were composed again, by a projector from before
    /// they were joined by the API (nothing to deliver: a subscriber
    /// follows banks and currencies).
    Lists,
    /// The /currencies view changed (nothing to deliver).
    Currencies,
    /// A reference source's day (`Some`) or its list of days changed
    /// (nothing to deliver).
    Reference {
        source: String,
        date: Option<chrono::NaiveDate>,
    },
}

impl Change {
    /// `board:{id}:{codes}`, `best:{CODE}`, `lists`, `currencies`,
    /// `reference:{SOURCE}` or `reference:{SOURCE}:{date}`.
    pub fn parse(entry: &str) -> Option<Change> {
        match entry {
            "lists" => return Some(Change::Lists),
            "currencies" => return Some(Change::Currencies),
            _ => {}
        }
        let mut parts = entry.splitn(3, ':');
        match (parts.next()?, parts.next()?) {
            ("board", id) => Some(Change::Board {
                bank: id.parse().ok()?,
                currencies: parts
                    .next()
                    .unwrap_or_default()
                    .split(',')
                    .filter_map(|c| CurrencyCode::parse(c).ok())
                    .collect(),
            }),
            ("best", code) => Some(Change::Best {
                currency: CurrencyCode::parse(code).ok()?,
            }),
            ("reference", source) => Some(Change::Reference {
                source: source.to_owned(),
                date: match parts.next() {
                    None => None,
                    Some(date) => Some(date.parse().ok()?),
                },
            }),
            _ => None,
        }
    }

    /// The views this change replaced (what an instance keeping views
    /// must drop: see [`crate::views::cache`]).
    pub fn views(&self, views: &Keys) -> Vec<String> {
        match self {
            // The bank's elements, and the lists joined of them here.
            Change::Board { bank, .. } => List::all()
                .flat_map(|list| [list.element(views, *bank), list.key(views)])
                .collect(),
            Change::Best { currency } => vec![views.best(*currency)],
            Change::Lists => List::all().map(|list| list.key(views)).collect(),
            Change::Currencies => vec![views.currencies()],
            Change::Reference { source, date } => vec![match date {
                Some(date) => views.reference_day(source, *date),
                None => views.reference_dates(source),
            }],
        }
    }
}

/// Reads views and the changes stream for deliveries.
#[derive(Clone)]
pub struct Reader {
    conn: Connection,
}

impl Reader {
    pub fn new(conn: Connection) -> Self {
        Self { conn }
    }

    /// The position of the newest entry (the start if there is none).
    pub async fn newest(&self, views: &Keys) -> redis::RedisResult<Position> {
        let mut conn = self.conn.clone();
        let newest: Vec<(String, Vec<(String, String)>)> = redis::cmd("XREVRANGE")
            .arg(views.changes())
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1)
            .query_async(&mut conn)
            .await?;
        Ok(newest
            .first()
            .and_then(|(id, _)| Position::parse(id))
            .unwrap_or(Position::START))
    }

    /// The changes after `after`, or `None` when the stream no longer holds
    /// all of them (some were trimmed away).
    pub async fn since(
        &self,
        views: &Keys,
        after: Position,
    ) -> redis::RedisResult<Option<Vec<(Position, Change)>>> {
        let mut conn = self.conn.clone();
        let key = views.changes();
        let oldest: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
            .arg(&key)
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(1)
            .query_async(&mut conn)
            .await?;
        let oldest = oldest.first().and_then(|(id, _)| Position::parse(id));
        let newest = self.newest(views).await?;
        // Nothing kept from right after `after` on, or a position this
        // stream never had.
        let trimmed = oldest.is_some_and(|o| o > after && after != Position::START);
        if trimmed || after > newest {
            return Ok(None);
        }
        let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
            .arg(&key)
            .arg(format!("({after}"))
            .arg("+")
            .query_async(&mut conn)
            .await?;
        Ok(Some(parse_entries(entries)))
    }

    /// The deliveries of `changes`, their views read in one round trip.
    pub async fn deliveries(
        &self,
        views: &Keys,
        changes: &[(Position, Change)],
    ) -> redis::RedisResult<Vec<Delivery>> {
        if changes.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for (_, change) in changes {
            match change {
                Change::Board { bank, .. } => {
                    for variant in RatesVariant::ALL {
                        pipe.get(views.rates_bank(*bank, variant));
                    }
                }
                Change::Best { currency } => {
                    pipe.get(views.best(*currency));
                }
                Change::Lists | Change::Currencies | Change::Reference { .. } => {}
            }
        }
        // Only entries that deliver nothing (lists, /currencies).
        if pipe.cmd_iter().next().is_none() {
            return Ok(Vec::new());
        }
        let mut conn = self.conn.clone();
        let values: Vec<Option<Vec<u8>>> = pipe.query_async(&mut conn).await?;
        let mut values = values.into_iter();
        let mut deliveries = Vec::with_capacity(changes.len());
        for (at, change) in changes {
            match change {
                Change::Board { bank, currencies } => {
                    let bodies: Vec<Option<Vec<u8>>> = values.by_ref().take(4).collect();
                    // Gone since (deactivated): nothing to show.
                    if bodies.iter().any(Option::is_none) {
                        continue;
                    }
                    let frames = std::array::from_fn(|i| {
                        let body = bodies[i].as_deref().unwrap_or_default();
                        frame("board", Some(*at), &bank_of_element(body))
                    });
                    // A snapshot names banks only: their currencies are on
                    // their boards.
                    let currencies = if currencies.is_empty() {
                        codes_of_element(bodies[0].as_deref().unwrap_or_default())
                    } else {
                        currencies.clone()
                    };
                    deliveries.push(Delivery::Board {
                        at: *at,
                        bank: *bank,
                        currencies,
                        frames,
                    });
                }
                Change::Best { currency } => {
                    let Some(body) = values.next().flatten() else {
                        continue;
                    };
                    let Some(data) = data_of(&body) else {
                        continue;
                    };
                    deliveries.push(Delivery::Best {
                        at: *at,
                        currency: *currency,
                        banks: best_banks(data),
                        frame: frame("best", Some(*at), &named(*currency, data)),
                    });
                }
                Change::Lists | Change::Currencies | Change::Reference { .. } => {}
            }
        }
        Ok(deliveries)
    }

    /// The ids of the active banks and the currencies with best rates now.
    pub async fn current(
        &self,
        views: &Keys,
    ) -> redis::RedisResult<(Vec<BankId>, Vec<CurrencyCode>)> {
        let mut conn = self.conn.clone();
        let (ids, currencies): (Vec<i64>, Option<Vec<u8>>) = redis::pipe()
            .zrange(views.active_banks(), 0, -1)
            .get(views.currencies())
            .query_async(&mut conn)
            .await?;
        let banks = ids
            .into_iter()
            .filter_map(|id| BankId::new(id).ok())
            .collect();
        Ok((banks, currencies.map(|c| codes_of(&c)).unwrap_or_default()))
    }
}

pub fn parse_entries(entries: Vec<(String, Vec<(String, String)>)>) -> Vec<(Position, Change)> {
    entries
        .into_iter()
        .filter_map(|(id, fields)| {
            let at = Position::parse(&id)?;
            let value = fields.into_iter().find(|(k, _)| k == "e")?.1;
            Some((at, Change::parse(&value)?))
        })
        .collect()
}

/// The bank object of a /rates element (`{"message":..,"data":[bank]}`).
fn bank_of_element(element: &[u8]) -> String {
    #[derive(Deserialize)]
    struct Element<'a> {
        #[serde(borrow)]
        data: Vec<&'a RawValue>,
    }
    serde_json::from_slice::<Element<'_>>(element)
        .ok()
        .and_then(|e| e.data.first().map(|b| b.get().to_owned()))
        .unwrap_or_else(|| String::from_utf8_lossy(element).into_owned())
}

/// The currencies on a /rates element's board.
fn codes_of_element(element: &[u8]) -> Vec<CurrencyCode> {
    #[derive(Deserialize)]
    struct Currency {
        symbol: String,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Rate {
        currency: Currency,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Bank {
        exchange_rates: Vec<Rate>,
    }
    #[derive(Deserialize)]
    struct Element {
        data: Vec<Bank>,
    }
    serde_json::from_slice::<Element>(element)
        .map(|e| {
            e.data
                .iter()
                .flat_map(|b| &b.exchange_rates)
                .filter_map(|r| CurrencyCode::parse(&r.currency.symbol).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The `data` of a stored response (the best rates' object).
/// The best-rates `data` object with the currency it is about first.
fn named(currency: CurrencyCode, data: &str) -> String {
    let rest = data
        .trim_start()
        .strip_prefix('{')
        .unwrap_or("}")
        .trim_start();
    let comma = if rest.starts_with('}') { "" } else { "," };
    format!(r#"{{"currencyCode":"{currency}"{comma}{rest}"#)
}

/// The banks of a best-rates `data` object's quotes.
fn best_banks(data: &str) -> Vec<BankId> {
    #[derive(Deserialize)]
    struct Bank {
        id: i64,
    }
    #[derive(Deserialize)]
    struct Quote {
        bank: Bank,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Best {
        cash_buying: Option<Quote>,
        cash_selling: Option<Quote>,
        transactional_buying: Option<Quote>,
        transactional_selling: Option<Quote>,
    }
    let Ok(best) = serde_json::from_str::<Best>(data) else {
        return Vec::new();
    };
    let mut banks: Vec<BankId> = [
        best.cash_buying,
        best.cash_selling,
        best.transactional_buying,
        best.transactional_selling,
    ]
    .into_iter()
    .flatten()
    .filter_map(|quote| BankId::new(quote.bank.id).ok())
    .collect();
    banks.sort_unstable();
    banks.dedup();
    banks
}

fn data_of(body: &[u8]) -> Option<&str> {
    #[derive(Deserialize)]
    struct Response<'a> {
        #[serde(borrow)]
        data: &'a RawValue,
    }
    serde_json::from_slice::<Response<'_>>(body)
        .ok()
        .map(|r| r.data.get())
}

/// The currency codes of a stored /currencies body.
fn codes_of(body: &[u8]) -> Vec<CurrencyCode> {
    #[derive(Deserialize)]
    struct Currency {
        symbol: String,
    }
    #[derive(Deserialize)]
    struct Currencies {
        data: Vec<Currency>,
    }
    serde_json::from_slice::<Currencies>(body)
        .map(|c| {
            c.data
                .iter()
                .filter_map(|c| CurrencyCode::parse(&c.symbol).ok())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Bytes;

    #[test]
    fn positions_order_as_the_stream_does() {
        let a = Position::parse("1732512345678-0").unwrap();
        let b = Position::parse("1732512345678-1").unwrap();
        let c = Position::parse("1732512345679-0").unwrap();
        assert!(a < b && b < c);
        assert_eq!(b.to_string(), "1732512345678-1");
        assert_eq!(Position::parse("garbage"), None);
    }

    #[test]
    fn entries_name_a_board_or_a_currency() {
        assert_eq!(
            Change::parse("board:7:USD,EUR"),
            Some(Change::Board {
                bank: BankId::new(7).unwrap(),
                currencies: vec![
                    CurrencyCode::parse("USD").unwrap(),
                    CurrencyCode::parse("EUR").unwrap()
                ],
            })
        );
        assert_eq!(
            Change::parse("best:usd"),
            Some(Change::Best {
                currency: CurrencyCode::parse("USD").unwrap()
            })
        );
        assert_eq!(
            Change::parse("reference:NBE:2026-05-18"),
            Some(Change::Reference {
                source: "NBE".into(),
                date: Some("2026-05-18".parse().unwrap()),
            })
        );
        assert_eq!(Change::parse("reference:NBE:someday"), None);
        assert_eq!(Change::parse("other:1"), None);
    }

    #[test]
    fn an_event_is_id_event_and_one_data_line() {
        let at = Position::parse("5-1");
        assert_eq!(
            frame("best", at, r#"{"a":1}"#),
            Bytes::from_static(b"id: 5-1\nevent: best\ndata: {\"a\":1}\n\n")
        );
        assert_eq!(
            bank_of_element(br#"{"message":"x","status":200,"data":[{"id":3}]}"#),
            r#"{"id":3}"#
        );
        assert_eq!(
            data_of(br#"{"message":"s","status":200,"data":{"b":2}}"#),
            Some(r#"{"b":2}"#)
        );
    }

    #[test]
    fn a_best_event_names_its_currency_and_knows_its_banks() {
        let usd = CurrencyCode::parse("USD").unwrap();
        let data = r#"{"cashBuying":{"bank":{"id":2}},"cashSelling":{"bank":{"id":1}},"transactionalBuying":null,"transactionalSelling":{"bank":{"id":2}}}"#;
        let with_code = named(usd, data);
        assert!(
            with_code.starts_with(r#"{"currencyCode":"USD","cashBuying""#),
            "{with_code}"
        );
        assert!(serde_json::from_str::<serde_json::Value>(&with_code).is_ok());
        assert_eq!(named(usd, "{}"), r#"{"currencyCode":"USD"}"#);
        let ids: Vec<i64> = best_banks(data).iter().map(|b| b.get()).collect();
        assert_eq!(ids, [1, 2]);
    }
}
