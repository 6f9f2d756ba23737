//! `ratewire-feed backfill`: past boards from a file, published through
//! ingest with its rules, landing in history without disturbing the latest
//! board, and safe to run twice.

use ratewire_e2e::{at, day, eventually, Board, Stack, VISIBLE_WITHIN};

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    /// The figures of a summary line such as `  accepted  3 boards  5 rate entries`.
    fn figures(&self, name: &str) -> Vec<usize> {
        let line = self
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no `{name}` line in:\n{}\n{}", self.stdout, self.stderr));
        line.split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect()
    }

    /// Boards and rate entries of a summary line.
    fn tally(&self, name: &str) -> (usize, usize) {
        let figures = self.figures(name);
        (figures[0], figures[1])
    }
}

async fn backfill(stack: &Stack, args: &[&str]) -> anyhow::Result<Run> {
    let mut all = vec!["backfill"];
    all.extend_from_slice(args);
    let output = stack.run("ratewire-feed", &all, &[]).await?;
    Ok(Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

#[tokio::test]
async fn a_csv_backfill_fills_history_reports_every_rejection_and_can_be_run_again(
) -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("backfill").await?;
    let (cbe, cbe_token) = stack.bank_with_token("CBE", "CBE").await?;
    let awash = stack.register_bank("AWASH", "Awash").await?;
    // Live today, before the backfill: it must stay the latest board.
    let live = Board::now().rate("USD", "160.10", "163.50");
    assert_eq!(stack.publish_board(cbe, &cbe_token, live).await?.0, 202);

    let csv = format!(
        "bankId,asOf,currency,cashBuying,cashSelling,transactionalBuying,transactionalSelling
{cbe},{d3},USD,150.10,153.20,150.00,153.00
{cbe},{d3},EUR,170.40,174.00,,
{cbe},{d2},USD,151.30,154.40,,
{awash},{d2},USD,151.00,154.00,,
{awash},{d1},USD,152.00,149.00,,
999,{d2},USD,1,2,,
one,{d2},USD,1,2,,
",
        d3 = at(3, 8),
        d2 = at(2, 8),
        d1 = at(1, 8),
    );
    let file = stack.logs.join("boards.csv");
    std::fs::write(&file, csv)?;
    let file = file.to_str().unwrap_or_default();

    let first = backfill(&stack, &[file]).await?;
    assert_eq!(
        first.code,
        Some(2),
        "not everything was published:\n{}\n{}",
        first.stdout,
        first.stderr
    );
    assert_eq!(first.tally("accepted"), (3, 4), "{}", first.stdout);
    assert_eq!(first.tally("rejected"), (2, 2), "{}", first.stdout);
    assert_eq!(first.tally("failed"), (0, 0), "{}", first.stdout);
    assert_eq!(first.figures("unreadable rows")[0], 1, "{}", first.stdout);
    for expected in [
        "line 6: cashSelling must not be below cashBuying",
        "bank 999 is not registered",
        "line 8: bankId: must be a positive integer",
    ] {
        assert!(
            first.stdout.contains(expected),
            "`{expected}` missing from:\n{}",
            first.stdout
        );
    }

    // History has the backfilled days; the latest board is still today's.
    let history = format!("/api/v1/history?bankId={cbe}&date={}", day(2));
    eventually("the backfill in history", VISIBLE_WITHIN, || async {
        let (_, raw) = stack.get_raw(&history, Some(&key)).await.ok()?;
        raw.contains(r#""cashBuying":151.30"#).then_some(())
    })
    .await?;
    let (_, eur) = stack
        .get_raw(
            &format!(
                "/api/v1/history?bankId={cbe}&date={}&currencyCode=EUR",
                day(3)
            ),
            Some(&key),
        )
        .await?;
    assert!(eur.contains(r#""cashBuying":170.40"#), "{eur}");
    let (_, latest) = stack
        .get_raw(&format!("/api/v1/rates?bankId={cbe}"), Some(&key))
        .await?;
    assert!(latest.contains(r#""cashBuying":160.10"#), "{latest}");
    assert!(!latest.contains("151.30"), "{latest}");

    // The tokens the backfill made for itself are revoked; the test's own is not.
    assert_eq!(
        stack
            .sql_number("SELECT count(*) FROM ingest.publisher_tokens WHERE revoked_at IS NULL")
            .await?,
        Some(1)
    );

    // Again: the same answers, and nothing published twice.
    let events = stack.applied_events().await?;
    let second = backfill(&stack, &[file]).await?;
    assert_eq!(second.tally("accepted"), (3, 4), "{}", second.stdout);
    let sentinel = Board::now().rate("GBP", 200, 204);
    assert_eq!(stack.publish_board(cbe, &cbe_token, sentinel).await?.0, 202);
    stack
        .wait_served("the sentinel folded", cbe, &key, "GBP")
        .await?;
    assert_eq!(
        stack.applied_events().await?,
        events + 1,
        "only the sentinel is new"
    );
    Ok(())
}

#[tokio::test]
async fn json_lines_with_given_tokens_publish_and_a_dry_run_sends_nothing() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("backfill").await?;
    let (dashen, token) = stack.bank_with_token("DASHEN", "Dashen").await?;
    stack.wait_applied(1, VISIBLE_WITHIN).await?;
    let lines = format!(
        r#"{{"bankId": {dashen}, "asOf": "{}", "rates": [{{"currency": "USD", "cashBuying": 150.50, "cashSelling": 153.25}}]}}
{{"bankId": {dashen}, "asOf": "{}", "rates": [{{"currency": "USD", "cashBuying": 151.50, "cashSelling": 154.25}}]}}
"#,
        at(4, 9),
        at(3, 9),
    );
    let file = stack.logs.join("boards.jsonl");
    std::fs::write(&file, lines)?;
    let file = file.to_str().unwrap_or_default();

    let published = stack.published().await;
    let dry = backfill(&stack, &["--dry-run", file]).await?;
    assert_eq!(dry.code, Some(0), "{}", dry.stdout);
    assert!(dry.stdout.contains("dry run"), "{}", dry.stdout);
    assert_eq!(dry.tally("valid"), (2, 2));
    // Whatever the tool sent would have been acknowledged before it exited.
    assert_eq!(stack.published().await, published, "nothing published");
    assert_eq!(stack.applied_events().await?, 1, "only the registration");

    let token_arg = format!("{dashen}={token}");
    let run = backfill(&stack, &["--token", &token_arg, file]).await?;
    assert_eq!(run.code, Some(0), "{}", run.stdout);
    assert_eq!(run.tally("accepted"), (2, 2));
    eventually("both boards in history", VISIBLE_WITHIN, || async {
        let (_, raw) = stack
            .get_raw(
                &format!("/api/v1/history?bankId={dashen}&date={}", day(3)),
                Some(&key),
            )
            .await
            .ok()?;
        raw.contains(r#""cashBuying":151.50"#).then_some(())
    })
    .await?;
    // The newest backfilled board is the bank's latest: it has nothing newer.
    // (Redis views follow the Postgres commit history is read from.)
    stack
        .wait_served(
            "the newest backfilled board as latest",
            dashen,
            &key,
            r#""cashBuying":151.50"#,
        )
        .await?;
    Ok(())
}
