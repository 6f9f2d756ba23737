//! What the service keeps, and for how long (docs/operations.md,
//! "Retention"): each policy purges on its own schedule, keeps what it
//! promises to keep, and anonymous clients' usage (their addresses) goes
//! when its month ends.

use std::time::Duration;

use ratewire_e2e::Stack;

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
