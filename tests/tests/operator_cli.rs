//! `ratewire-ingest banks ...` and `ratewire-ingest tokens ...`: the operator
//! actions from a shell, with the same effect as the operator endpoints
//! (decisions.md "Operators").

use ratewire_e2e::{eventually, Board, Stack, VISIBLE_WITHIN};
use serde_json::Value;

/// Runs `ratewire-ingest args...`; the parsed standard output on success,
/// the standard error text on failure.
async fn ingest(stack: &Stack, args: &[&str]) -> anyhow::Result<Result<String, String>> {
    let output = stack.run("ratewire-ingest", args, &[]).await?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    Ok(if output.status.success() {
        Ok(stdout)
    } else {
        Err(stderr)
    })
}

/// `(id, name)` of every bank /banks lists.
async fn listed(stack: &Stack, key: &str) -> Option<Vec<(String, String)>> {
    let (_, body) = stack.get("/api/v1/banks", Some(key)).await.ok()?;
    Some(
        body["data"]
            .as_array()?
            .iter()
            .map(|b| {
                let text = |field: &str| b[field].as_str().unwrap_or_default().to_owned();
                (text("id"), text("name"))
            })
            .collect(),
    )
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[tokio::test]
async fn a_bank_managed_from_the_shell_appears_changes_and_leaves_the_api() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("cli").await?;

    let registered = json(
        &ingest(
            &stack,
            &[
                "banks",
                "register",
                "--code",
                "ENAT",
                "--name",
                "Enat Bank",
                "--image-url",
                "https://img.test/enat.png",
                "--social",
                "telegram=https://t.me/enatbank",
            ],
        )
        .await?
        .expect("register succeeds"),
    );
    let id = registered["id"].as_i64().expect("an id");
    assert_eq!(registered["active"], true);
    assert_eq!(registered["socialLinks"][0]["platform"], "telegram");

    eventually("the registered bank listed", VISIBLE_WITHIN, || async {
        listed(&stack, &key)
            .await
            .filter(|banks| banks.contains(&(id.to_string(), "Enat Bank".to_owned())))
    })
    .await?;

    let updated = json(
        &ingest(
            &stack,
            &[
                "banks",
                "update",
                &id.to_string(),
                "--name",
                "Enat Bank S.C.",
            ],
        )
        .await?
        .expect("update succeeds"),
    );
    assert_eq!(updated["name"], "Enat Bank S.C.");
    eventually("the new name served", VISIBLE_WITHIN, || async {
        listed(&stack, &key)
            .await
            .filter(|banks| banks.contains(&(id.to_string(), "Enat Bank S.C.".to_owned())))
    })
    .await?;

    ingest(&stack, &["banks", "deactivate", &id.to_string()])
        .await?
        .expect("deactivate succeeds");
    eventually(
        "the deactivated bank gone from /banks",
        VISIBLE_WITHIN,
        || async {
            listed(&stack, &key)
                .await
                .filter(|banks| !banks.iter().any(|(b, _)| *b == id.to_string()))
        },
    )
    .await?;

    ingest(&stack, &["banks", "reactivate", &id.to_string()])
        .await?
        .expect("reactivate succeeds");
    eventually("the reactivated bank back", VISIBLE_WITHIN, || async {
        listed(&stack, &key)
            .await
            .filter(|banks| banks.iter().any(|(b, _)| *b == id.to_string()))
    })
    .await?;

    let all = json(&ingest(&stack, &["banks", "list"]).await?.expect("list"));
    assert_eq!(all.as_array().map(Vec::len), Some(1));
    let shown = json(
        &ingest(&stack, &["banks", "show", &id.to_string()])
            .await?
            .expect("show"),
    );
    assert_eq!(shown["code"], "ENAT");

    // The same events as the endpoints: registered, updated, deactivated, reactivated.
    let events = stack
        .sql_number("SELECT count(*) FROM readmodel.applied_events")
        .await?;
    assert_eq!(events, Some(4));
    Ok(())
}

#[tokio::test]
async fn tokens_made_in_the_shell_publish_until_revoked_there() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let bank = stack.register_bank("ZEMEN", "Zemen Bank").await?;
    let made = json(
        &ingest(&stack, &["tokens", "create", &bank.to_string()])
            .await?
            .expect("token created"),
    );
    let token = made["token"].as_str().expect("the token").to_owned();
    let prefix = made["prefix"].as_str().expect("its prefix").to_owned();
    assert_eq!(made["bankId"], bank);

    let board = Board::now().rate("USD", "155.1", "158");
    assert_eq!(stack.publish_board(bank, &token, &board).await?.0, 202);

    assert_eq!(
        ingest(&stack, &["tokens", "revoke", &prefix]).await?,
        Ok(format!("revoked {prefix}\n"))
    );
    let (status, body) = stack.publish_board(bank, &token, &board).await?;
    assert_eq!(
        (status, &body["message"]),
        (401, &Value::from("Invalid publisher token"))
    );

    let again = ingest(&stack, &["tokens", "revoke", &prefix]).await?;
    assert!(again.is_err_and(|e| e.contains("no live token")));
    Ok(())
}

/// Ingest takes a publisher that pushed lately without asking Postgres
/// first; the board's record reads the token and its bank again, so a
/// change made elsewhere (the shell, or by hand in Postgres) refuses the
/// very next push.
#[tokio::test]
async fn a_change_made_elsewhere_refuses_a_known_publisher_s_next_push() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (bank, token) = stack.bank_with_token("NIB", "Nib Bank").await?;
    let board = Board::now().rate("USD", "155.1", "158");
    assert_eq!(stack.publish_board(bank, &token, &board).await?.0, 202);

    ingest(&stack, &["banks", "deactivate", &bank.to_string()])
        .await?
        .expect("deactivate succeeds");
    let (status, body) = stack.publish_board(bank, &token, &board).await?;
    assert_eq!(
        (status, &body["message"]),
        (403, &Value::from(format!("Bank {bank} is deactivated")))
    );
    ingest(&stack, &["banks", "reactivate", &bank.to_string()])
        .await?
        .expect("reactivate succeeds");
    assert_eq!(stack.publish_board(bank, &token, &board).await?.0, 202);

    stack
        .sql("UPDATE ingest.publisher_tokens SET revoked_at = now()")
        .await?;
    for _ in 0..2 {
        let (status, body) = stack.publish_board(bank, &token, &board).await?;
        assert_eq!(
            (status, &body["message"]),
            (401, &Value::from("Invalid publisher token"))
        );
    }
    Ok(())
}

#[tokio::test]
async fn bad_input_in_the_shell_names_the_problem_and_changes_nothing() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let refused = ingest(
        &stack,
        &[
            "banks",
            "register",
            "--code",
            "",
            "--name",
            "X",
            "--image-url",
            "ftp://x",
        ],
    )
    .await?
    .expect_err("an invalid bank is refused");
    assert!(refused.contains("code: must not be empty"), "{refused}");
    assert!(
        refused.contains("imageUrl: must be an http(s) URL"),
        "{refused}"
    );

    let missing = ingest(&stack, &["banks", "deactivate", "999"]).await?;
    assert!(missing.is_err_and(|e| e.contains("Bank not found")));
    let nothing = ingest(&stack, &["banks", "update", "1"]).await?;
    assert!(nothing.is_err_and(|e| e.contains("nothing to change")));
    let not_an_id = ingest(&stack, &["tokens", "create", "zero"]).await?;
    assert!(not_an_id.is_err());

    assert_eq!(
        stack
            .sql_number("SELECT count(*) FROM ingest.banks")
            .await?,
        Some(0)
    );
    assert_eq!(
        stack
            .sql_number("SELECT count(*) FROM readmodel.applied_events")
            .await?,
        Some(0)
    );
    Ok(())
}
