//! `ratewire-projector verify` and `compare` as an operator runs them: a
//! live generation equal to a replay is reported so (status 0, one JSON
//! object with its rows), a row or a view that differs is named (status
//! 1), a check generation leaves nothing behind unless kept, and the live
//! generation is never touched. The other tests use them through
//! `Stack::assert_fold_matches_replay` and `Stack::compare_schemas`.

use ratewire_e2e::{ago, Board, Stack, VISIBLE_WITHIN};
use serde_json::{json, Value};

/// Runs `ratewire-projector args...`: its exit status and the report it
/// printed (without one, its standard error as a JSON string).
async fn projector(stack: &Stack, args: &[&str]) -> anyhow::Result<(i32, Value)> {
    let output = stack.run("ratewire-projector", args, &[]).await?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|_| Value::from(String::from_utf8_lossy(&output.stderr).into_owned()));
    Ok((output.status.code().unwrap_or(-1), report))
}

/// The Redis keys under `prefix`.
async fn keys_under(stack: &Stack, prefix: &str) -> anyhow::Result<Vec<String>> {
    let client = redis::Client::open(stack.redis_url.as_str())?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    Ok(redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query_async(&mut conn)
        .await?)
}

async fn schema_exists(stack: &Stack, schema: &str) -> anyhow::Result<bool> {
    let count = stack
        .sql_number(&format!(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = '{schema}'"
        ))
        .await?;
    Ok(count == Some(1))
}

#[tokio::test]
async fn verify_reports_an_equal_fold_names_what_differs_and_leaves_no_check_behind(
) -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (bank, token) = stack
        .bank_with_token("CBE", "Commercial Bank of Ethiopia")
        .await?;
    for hours in [3, 2] {
        let board = Board::at(ago(0, hours)).rate("USD", "155.10", "158.20");
        stack.push_and_wait(bank, &token, &board).await?;
    }
    stack.wait_applied(3, VISIBLE_WITHIN).await?;
    stack.wait_aggregates_written().await?;

    // Equal: one JSON object, status 0; the check generation is dropped,
    // its schema and every Redis key under its prefix.
    let (status, report) = projector(&stack, &["verify"]).await?;
    assert_eq!(status, 0, "{report}");
    assert_eq!(report["compared"], "readmodel");
    assert_eq!(report["differences"], json!([]));
    assert_eq!(report["rows"]["boards"], 2);
    assert_eq!(report["rows"]["banks"], 1);
    let check = report["against"].as_str().unwrap_or_default().to_owned();
    assert!(check.starts_with("verify_"), "{report}");
    assert!(!schema_exists(&stack, &check).await?);
    let prefix = stack.views_prefix_of(&check).await?;
    assert_eq!(keys_under(&stack, &prefix).await?, Vec::<String>::new());
    assert_eq!(stack.active_generation().await?, "readmodel");

    // Kept on request, and then comparable again.
    let (status, report) = projector(&stack, &["verify", "--schema", "kept", "--keep"]).await?;
    assert_eq!(
        (status, &report["against"]),
        (0, &json!("kept")),
        "{report}"
    );
    assert!(schema_exists(&stack, "kept").await?);
    let kept = stack.views_prefix_of("kept").await?;
    assert!(!keys_under(&stack, &kept).await?.is_empty());
    let (status, report) = projector(&stack, &["compare", "readmodel", "kept"]).await?;
    assert_eq!(status, 0, "{report}");
    assert_eq!(report["rows"]["boards"], 2);

    // A row and a view that differ are named, and the status says so.
    stack
        .sql(
            "UPDATE kept.board_versions
             SET cash_selling = ARRAY(SELECT s + 1 FROM unnest(cash_selling) s)",
        )
        .await?;
    // The second board repeats the first: its values are read from the
    // first's copy as a base.
    stack
        .sql(
            "UPDATE kept.board_bases
             SET cash_selling = ARRAY(SELECT s + 1 FROM unnest(cash_selling) s)",
        )
        .await?;
    {
        let client = redis::Client::open(stack.redis_url.as_str())?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        redis::cmd("SET")
            .arg(format!("{kept}view:best:USD"))
            .arg("{}")
            .query_async::<()>(&mut conn)
            .await?;
    }
    let (status, report) = projector(&stack, &["compare", "readmodel", "kept"]).await?;
    assert_eq!(status, 1, "{report}");
    let differences: Vec<&str> = report["differences"]
        .as_array()
        .map(|d| d.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(
        differences.contains(&"rate_versions: 4 rows differ (2 in readmodel)"),
        "{report}"
    );
    assert!(
        differences.contains(&r#"views differ at ["view:best:USD"]"#),
        "{report}"
    );

    // Refusals change nothing: the live generation is no check schema,
    // and a generation that does not exist cannot be compared.
    let (status, said) = projector(&stack, &["verify", "--schema", "readmodel"]).await?;
    assert_ne!(status, 0);
    assert!(
        said.to_string().contains("already holds a read model"),
        "{said}"
    );
    let (status, said) = projector(&stack, &["verify", "--schema", "kept"]).await?;
    assert_ne!(status, 0);
    assert!(
        said.to_string().contains("already holds a read model"),
        "{said}"
    );
    assert!(schema_exists(&stack, "kept").await?);
    let (status, said) = projector(&stack, &["compare", "readmodel", "nowhere"]).await?;
    assert_ne!(status, 0);
    assert!(
        said.to_string().contains("nowhere holds no read model"),
        "{said}"
    );
    let (status, report) = projector(&stack, &["verify"]).await?;
    assert_eq!(status, 0, "the live generation is as it was: {report}");
    Ok(())
}
