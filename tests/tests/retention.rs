//! What the service keeps, and for how long (docs/operations.md,
//! "Retention"): each policy purges on its own schedule, keeps what it
//! promises to keep, and anonymous clients' usage (their addresses) goes
//! when its month ends.

use std::time::Duration;

use chrono::{Datelike, TimeZone, Utc};
use ratewire_e2e::{Board, Stack};
use ratewire_readmodel::board_months::Month;

fn month(months_ago: u32) -> String {
    let now = chrono::Utc::now();
    let then = now
        .checked_sub_months(chrono::Months::new(months_ago))
        .expect("a month in range");
    then.format("%Y%m").to_string()
}

#[tokio::test]
async fn each_policy_purges_what_it_no_longer_keeps_and_nothing_else() -> anyhow::Result<()> {
    let stack = Stack::builder()
        .env("RATEWIRE_RETENTION_INTERVAL_SECS", "1")
        .start()
        .await?;
    let (now, last, ancient) = (month(0), month(1), month(14));
    stack
        .sql(&format!(
            "INSERT INTO api.usage_months (subject, month, used) VALUES
               ('key:oldkey01', '{ancient}', 5), ('key:oldkey01', '{last}', 5), ('key:oldkey01', '{now}', 5),
               ('ip:198.51.100.1', '{last}', 3), ('ip:198.51.100.1', '{now}', 3),
               ('ip:2001:db8:7:1::', '{last}', 2)"
        ))
        .await?;
    stack
        .sql(
            "INSERT INTO readmodel.applied_events (event_id, partition, \"offset\", applied_at) VALUES
               (gen_random_uuid(), 0, 1000000, now() - interval '30 days'),
               (gen_random_uuid(), 0, 1000001, now() - interval '1 day')",
        )
        .await?;
    stack
        .sql(
            "INSERT INTO readmodel.dead_letters (topic, partition, \"offset\", error, recorded_at, resolved_at) VALUES
               ('t', 0, 1, 'resolved long ago', now() - interval '90 days', now() - interval '60 days'),
               ('t', 0, 2, 'never resolved', now() - interval '90 days', NULL),
               ('t', 0, 3, 'resolved yesterday', now() - interval '2 days', now() - interval '1 day')",
        )
        .await?;
    stack
        .sql(
            "INSERT INTO ingest.idempotency_keys (bank_id, key, body_hash, event_id, created_at) VALUES
               (1, 'old', 'h', gen_random_uuid(), now() - interval '3 days'),
               (1, 'new', 'h', gen_random_uuid(), now())",
        )
        .await?;

    let expect = [
        // A key's usage: 13 months kept (this one included).
        ("SELECT count(*) FROM api.usage_months WHERE subject LIKE 'key:%'".to_owned(), 2),
        // An anonymous client's usage: this month only.
        (format!("SELECT count(*) FROM api.usage_months WHERE subject LIKE 'ip:%' AND month = '{now}'"), 1),
        ("SELECT count(*) FROM api.usage_months WHERE subject LIKE 'ip:%'".to_owned(), 1),
        ("SELECT count(*) FROM readmodel.applied_events WHERE \"offset\" >= 1000000".to_owned(), 1),
        ("SELECT count(*) FROM readmodel.dead_letters".to_owned(), 2),
        ("SELECT count(*) FROM ingest.idempotency_keys".to_owned(), 1),
    ];
    for (query, count) in &expect {
        stack
            .wait_count(query, query, *count, Duration::from_secs(15))
            .await?;
    }
    let kept = stack
        .sql_number("SELECT count(*) FROM readmodel.dead_letters WHERE error IN ('never resolved', 'resolved yesterday')")
        .await?;
    assert_eq!(kept, Some(2));
    Ok(())
}

/// 09:00 UTC on the second day of the month `months_ago` months back.
fn early_in(months_ago: u32) -> chrono::DateTime<Utc> {
    let then = Utc::now()
        .checked_sub_months(chrono::Months::new(months_ago))
        .expect("a month in range");
    Utc.with_ymd_and_hms(then.year(), then.month(), 2, 9, 0, 0)
        .single()
        .expect("a valid time")
}

fn board(at: chrono::DateTime<Utc>) -> Board {
    Board::at(at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .rate("USD", "155.10", "158.20")
}

/// docs/api.md, "History past the retention".
#[tokio::test]
async fn raw_history_past_its_retention_leaves_every_answer_but_a_bank_s_latest_board(
) -> anyhow::Result<()> {
    let stack = Stack::builder()
        .env("RATEWIRE_RETENTION_INTERVAL_SECS", "1")
        .env("RATEWIRE_RAW_HISTORY_RETENTION", "2 months")
        .start()
        .await?;
    let key = stack.api_key("retention").await?;
    let (busy, busy_token) = stack.bank_with_token("BUSY", "Busy bank").await?;
    let (quiet, quiet_token) = stack.bank_with_token("QUIET", "Quiet bank").await?;
    // The quiet bank's only board, five months back; the busy bank's
    // first four months back, its latest now.
    let (five, four) = (early_in(5), early_in(4));
    let (status, _) = stack
        .publish_board(quiet, &quiet_token, board(five))
        .await?;
    assert_eq!(status, 202);
    let (status, old) = stack.publish_board(busy, &busy_token, board(four)).await?;
    assert_eq!(status, 202);
    let old = old["eventId"].as_str().unwrap_or_default().to_owned();
    stack
        .push_and_wait(
            busy,
            &busy_token,
            &board(Utc::now() - chrono::Duration::minutes(1)),
        )
        .await?;

    // Gone: the busy bank's month four back, whole.
    let month = Month::of(four).partition();
    stack
        .wait_count(
            "the month four back dropped",
            &format!("SELECT count(*) FROM readmodel.board_months WHERE partition = '{month}'"),
            0,
            Duration::from_secs(30),
        )
        .await?;
    let (status, _) = stack
        .get(&format!("/api/v1/boards/{old}"), Some(&key))
        .await?;
    assert_eq!(status, 404);
    let day = |at: chrono::DateTime<Utc>| at.format("%Y-%m-%d").to_string();
    let (status, body) = stack
        .get(
            &format!("/api/v1/history?bankId={busy}&date={}", day(four)),
            Some(&key),
        )
        .await?;
    assert_eq!(
        (status, &body["message"]),
        (404, &"No history found".into()),
        "{body}"
    );

    // Kept: the quiet bank's latest board, with its month, older still.
    let (status, body) = stack
        .get(
            &format!("/api/v1/history?bankId={quiet}&date={}", day(five)),
            Some(&key),
        )
        .await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["cashBuying"], 155.1, "{body}");
    let (status, body) = stack
        .get(&format!("/api/v1/rates?bankId={quiet}"), Some(&key))
        .await?;
    assert_eq!(status, 200, "{body}");
    Ok(())
}

#[tokio::test]
async fn operators_list_dead_letters_and_resolve_them() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    stack
        .sql(
            "INSERT INTO readmodel.dead_letters (topic, partition, \"offset\", error) VALUES
               ('t', 0, 7, 'bank 9 is not registered'), ('t', 1, 8, 'empty board')",
        )
        .await?;
    let list = |all: bool| {
        let args: &[&str] = if all {
            &["dead-letters", "list", "--all"]
        } else {
            &["dead-letters", "list"]
        };
        stack.run("ratewire-projector", args, &[])
    };
    let listed = list(false).await?;
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(listed.stdout)?
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["error"], "bank 9 is not registered");
    let first = lines[0]["id"].as_i64().unwrap().to_string();

    let resolved = stack
        .run(
            "ratewire-projector",
            &["dead-letters", "resolve", &first],
            &[],
        )
        .await?;
    assert_eq!(String::from_utf8(resolved.stdout)?.trim(), "resolved 1");
    let open = String::from_utf8(list(false).await?.stdout)?;
    assert_eq!(open.lines().count(), 1, "{open}");
    let all = String::from_utf8(list(true).await?.stdout)?;
    assert_eq!(all.lines().count(), 2, "{all}");
    Ok(())
}
