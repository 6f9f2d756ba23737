//! The log is the contract: whatever a buggy or rogue producer writes
//! straight onto the topic, nothing reaches the read models that ingest
//! would refuse. Each broken message is dead-lettered with the rule it
//! broke, the bank's later boards go on being served, and a replay
//! decides the same.

use std::time::Duration;

use chrono::Utc;
use ratewire_e2e::{ago, eventually, Board, Stack, VISIBLE_WITHIN};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;
use serde_json::Value;

/// Writes `payload` onto the stack's topic with `key`, as any Kafka client
/// could.
async fn produce(stack: &Stack, key: Option<&str>, payload: Option<&str>) -> anyhow::Result<()> {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", stack.kafka_brokers())
        .create()?;
    let mut record = FutureRecord::<str, str>::to(&stack.topic);
    if let Some(key) = key {
        record = record.key(key);
    }
    if let Some(payload) = payload {
        record = record.payload(payload);
    }
    producer
        .send(record, Duration::from_secs(5))
        .await
        .map_err(|(e, _)| e)?;
    Ok(())
}

/// The reserved subject of reference boards, and its message key.
const REFERENCE_SUBJECT: i64 = 9_007_199_254_740_991;
const REFERENCE_KEY: &str = "9007199254740991";

/// An envelope as the contract's JSON, with a fresh event id.
fn envelope(kind: &str, version: u32, bank: i64, occurred_at: &str, payload: &str) -> String {
    format!(
        r#"{{"eventId":"{}","type":"{kind}","version":{version},"bankId":{bank},"occurredAt":"{occurred_at}","payload":{payload}}}"#,
        uuid::Uuid::now_v7()
    )
}

/// A message a rogue producer writes: what it is, its key, its payload
/// (none: a tombstone) and the rule it breaks (none: skipped, as an event
/// type this build does not know).
type Rogue<'a> = (&'a str, Option<&'a str>, Option<String>, Option<&'a str>);

fn board(as_of: &str, rates: &str) -> String {
    format!(r#"{{"asOf":"{as_of}","rates":[{rates}]}}"#)
}

#[tokio::test]
async fn what_ingest_would_refuse_never_reaches_the_read_models() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("contract").await?;
    let (a, token_a) = stack.bank_with_token("CBE", "CBE").await?;
    let (b, token_b) = stack.bank_with_token("AWASH", "Awash").await?;
    // One as-of for both: the banks are on different partitions, whose
    // order a replay need not repeat, and a currency's first quote is the
    // first board of the log that names it.
    let two_minutes_ago = ago(0, 2);
    let pushed = Board::at(&two_minutes_ago).rate("USD", "155.1", "158");
    assert_eq!(stack.publish_board(a, &token_a, pushed).await?.0, 202);
    let pushed = Board::at(&two_minutes_ago).rate("USD", "150", "152");
    assert_eq!(stack.publish_board(b, &token_b, pushed).await?.0, 202);
    stack.wait_served("bank b's board", b, &key, "150").await?;

    let now = Utc::now().to_rfc3339();
    let hour_ago = ago(0, 1);
    let (ka, kb) = (a.to_string(), b.to_string());
    let rate = |currency: &str, buying: &str, selling: &str| {
        format!(r#"{{"currency":"{currency}","cashBuying":"{buying}","cashSelling":"{selling}"}}"#)
    };
    let many_codes: String = (0..3000)
        .map(|i| {
            let code: String = [b'A' + (i / 676 % 26) as u8, b'Q', b'A' + (i % 26) as u8]
                .iter()
                .map(|c| *c as char)
                .collect();
            rate(&code, "1", "2")
        })
        .collect::<Vec<_>>()
        .join(",");
    let rogue: Vec<Rogue> = vec![
        (
            "a board dated 9999",
            Some(&ka),
            Some(envelope(
                "BoardPublished",
                1,
                a,
                &now,
                &board("9999-01-01T00:00:00Z", &rate("USD", "1", "2")),
            )),
            Some("as-of"),
        ),
        (
            "received in 9999 too",
            Some(&ka),
            Some(envelope(
                "BoardPublished",
                1,
                a,
                "9999-01-01T00:00:00Z",
                &board("9999-01-01T00:00:00Z", &rate("USD", "1", "2")),
            )),
            Some("occurred-at"),
        ),
        (
            "a negative rate",
            Some(&ka),
            Some(envelope(
                "BoardPublished",
                1,
                a,
                &now,
                &board(&hour_ago, &rate("EUR", "-5", "0")),
            )),
            Some("rate"),
        ),
        (
            "selling far below buying",
            Some(&ka),
            Some(envelope(
                "BoardPublished",
                1,
                a,
                &now,
                &board(&hour_ago, &rate("EUR", "99999999", "1")),
            )),
            Some("selling-below-buying"),
        ),
        (
            "bank b's envelope under bank a's key",
            Some(&ka),
            Some(envelope(
                "BoardPublished",
                1,
                b,
                &now,
                &board(&hour_ago, &rate("USD", "777", "778")),
            )),
            Some("key"),
        ),
        (
            "no key at all",
            None,
            Some(envelope(
                "BoardPublished",
                1,
                b,
                &now,
                &board(&hour_ago, &rate("USD", "777", "778")),
            )),
            Some("key"),
        ),
        (
            "version 0",
            Some(&ka),
            Some(envelope(
                "BoardPublished",
                0,
                a,
                &now,
                &board(&hour_ago, &rate("USD", "1", "2")),
            )),
            Some("version"),
        ),
        (
            "a reference day selling below buying",
            Some(REFERENCE_KEY),
            Some(envelope(
                "ReferenceBoardPublished",
                1,
                REFERENCE_SUBJECT,
                &now,
                r#"{"source":"NBE","date":"2026-05-18","rates":[{"currency":"USD","buying":"159","selling":"158","weightedAverage":"158"}]}"#,
            )),
            Some("selling-below-buying"),
        ),
        (
            "a reference day under a bank's id",
            Some(&ka),
            Some(envelope(
                "ReferenceBoardPublished",
                1,
                a,
                &now,
                r#"{"source":"NBE","date":"2026-05-18","rates":[{"currency":"USD","buying":"157","selling":"158","weightedAverage":"157"}]}"#,
            )),
            Some("key"),
        ),
        (
            "a bank's board under the reference subject",
            Some(REFERENCE_KEY),
            Some(envelope(
                "BoardPublished",
                1,
                REFERENCE_SUBJECT,
                &now,
                &board(&hour_ago, &rate("USD", "1", "2")),
            )),
            Some("key"),
        ),
        (
            "not json",
            Some(&ka),
            Some("not an event".into()),
            Some("envelope"),
        ),
        (
            "json, not an envelope",
            Some(&ka),
            Some(r#"{"hello":1}"#.into()),
            Some("envelope"),
        ),
        (
            "an unknown type",
            Some(&ka),
            Some(envelope("BankMerged", 1, a, &now, "{}")),
            None,
        ),
        (
            "version 2",
            Some(&ka),
            Some(envelope("BoardPublished", 2, a, &now, "{}")),
            Some("unsupported-version"),
        ),
        (
            "a payload without rates",
            Some(&ka),
            Some(envelope(
                "BoardPublished",
                1,
                a,
                &now,
                r#"{"asOf":"2026-01-01T00:00:00Z"}"#,
            )),
            Some("payload"),
        ),
        (
            "3,000 made-up currencies",
            Some(&ka),
            Some(envelope(
                "BoardPublished",
                1,
                a,
                &now,
                &board(&hour_ago, &many_codes),
            )),
            Some("currency"),
        ),
        (
            "an unregistered bank",
            Some("99999"),
            Some(envelope(
                "BoardPublished",
                1,
                99999,
                &now,
                &board(&hour_ago, &rate("USD", "1", "2")),
            )),
            Some("unknown-bank"),
        ),
        ("a tombstone", Some(&kb), None, Some("envelope")),
    ];
    for (what, key, payload, _) in &rogue {
        produce(&stack, *key, payload.as_deref())
            .await
            .map_err(|e| e.context(what.to_string()))?;
    }

    // The bank is not pinned: a valid board after all of that is served.
    let next = Board::at(ago(0, 0)).rate("USD", "160", "161");
    assert_eq!(stack.publish_board(a, &token_a, next).await?.0, 202);
    stack
        .wait_served("bank a's next board", a, &key, "160")
        .await?;

    let (_, rates) = stack
        .get(&format!("/api/v1/rates?bankId={a}"), Some(&key))
        .await?;
    let bank = &rates["data"][0]["data"][0];
    assert!(
        !bank["lastRatesUpdatedAt"]
            .as_str()
            .unwrap()
            .starts_with("9999"),
        "{bank}"
    );
    let board = &bank["exchangeRates"];
    assert_eq!(board.as_array().unwrap().len(), 1, "only USD: {board}");
    assert_eq!(board[0]["cashBuying"], 160);
    let (_, rates) = stack
        .get(&format!("/api/v1/rates?bankId={b}"), Some(&key))
        .await?;
    assert_eq!(
        rates["data"][0]["data"][0]["exchangeRates"][0]["cashBuying"], 150,
        "bank b untouched by a message on bank a's key"
    );
    // Best rates follow within their own (longer) freshness bound.
    let best = eventually("best rates of the new board", VISIBLE_WITHIN, || async {
        let (_, best) = stack
            .get("/api/v1/rates/best-rates?currencyCode=USD", Some(&key))
            .await
            .ok()?;
        (best["data"]["cashBuying"]["price"] == 160).then_some(best)
    })
    .await?;
    assert_eq!(best["data"]["cashSelling"]["price"], 152);
    let today = Utc::now().date_naive();
    let (status, history) = stack
        .get(
            &format!("/api/v1/history?bankId={a}&date={today}&currencyCode=EUR"),
            Some(&key),
        )
        .await?;
    assert_eq!(status, 404, "no EUR was ever valid: {history}");
    let (_, currencies) = stack.get("/api/v1/currencies", Some(&key)).await?;
    let codes: Vec<&Value> = currencies["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["symbol"])
        .collect();
    assert_eq!(codes, ["USD"]);

    // Each broken message dead-lettered with its rule, the unknown type
    // skipped.
    for (what, _, _, rule) in &rogue {
        if let Some(rule) = rule {
            let count = stack
                .sql_number(&format!(
                    "SELECT count(*) FROM readmodel.dead_letters WHERE rule = '{rule}'"
                ))
                .await?
                .unwrap_or(0);
            assert!(count >= 1, "{what}: nothing dead-lettered for {rule}");
        }
    }
    let dead = stack
        .sql_number("SELECT count(*) FROM readmodel.dead_letters")
        .await?;
    assert_eq!(
        dead,
        Some(rogue.iter().filter(|r| r.3.is_some()).count() as i64)
    );

    // A replay decides every message the same.
    stack.assert_fold_matches_replay().await?;
    Ok(())
}
