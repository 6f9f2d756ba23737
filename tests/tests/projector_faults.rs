//! The read models equal a fold of the log, whatever happens to the
//! projector around it: kill -9 mid-stream, two projectors with one killed,
//! Postgres cut mid-stream, a replay and switch while the API serves, and
//! readers during a killed projector's catch-up.
//!
//! Each test streams thousands of rate entries through ingest (and most,
//! National Bank reference days with corrections among them), breaks
//! something while they flow, waits until every accepted event is applied,
//! then replays the whole topic into a fresh schema and requires every table
//! and every Redis view of the live generation to be identical to it.

use std::time::Duration;

use chrono::NaiveDate;
use rand::Rng;
use ratewire_e2e::{eventually, free_port, sample, Board, Stack};

const CAUGHT_UP_WITHIN: Duration = Duration::from_secs(90);

async fn banks(stack: &Stack, count: usize) -> anyhow::Result<Vec<(i64, String)>> {
    let mut banks = Vec::new();
    for i in 0..count {
        banks.push(
            stack
                .bank_with_token(&format!("B{i}"), &format!("Bank {i}"))
                .await?,
        );
    }
    Ok(banks)
}

/// Waits until a point part-way through a stream, picked at random in
/// the `round`th stretch of 300 events ingest publishes: a fault there
/// finds the fold busy, whatever the machine's speed.
async fn part_way(stack: &Stack, round: u32) -> anyhow::Result<()> {
    let at = 300 * round + rand::thread_rng().gen_range(100..400);
    stack.wait_published(f64::from(at), CAUGHT_UP_WITHIN).await
}

/// Waits while a stopped projector's backlog grows by twenty events.
async fn backlog(stack: &Stack) -> anyhow::Result<()> {
    let now = stack.published().await;
    stack.wait_published(now + 20.0, CAUGHT_UP_WITHIN).await
}

/// Pushes ingest refused because Postgres did not answer.
const INGEST_POSTGRES_ERRORS: &str = "ratewire_ingest_postgres_errors_total";

/// Reference days imported while the boards stream (a third corrected).
const REFERENCE_DAYS: usize = 12;

/// Waits for the stream and the reference days, then for the fold, then
/// checks it against a replay.
async fn settle_and_compare(
    stack: &Stack,
    banks: usize,
    stream: tokio::task::JoinHandle<anyhow::Result<usize>>,
    currencies: i64,
    reference: tokio::task::JoinHandle<anyhow::Result<usize>>,
) -> anyhow::Result<()> {
    let accepted = stream.await?? as i64;
    let references = reference.await?? as i64;
    stack
        .wait_applied(banks as i64 + accepted + references, CAUGHT_UP_WITHIN)
        .await?;
    let rows = stack.assert_fold_matches_replay().await?;
    assert_eq!(rows["boards"], accepted);
    assert_eq!(rows["rates"], accepted * currencies);
    assert_eq!(rows["reference_boards"], REFERENCE_DAYS as i64);
    assert_eq!(rows["reference_rates"], 2 * REFERENCE_DAYS as i64);
    assert_eq!(rows["dead_letters"], 0);
    // The last correction is what is served, as each day's list is.
    let key = stack.api_key("settled").await?;
    let (status, body) = stack
        .get("/api/v1/reference-rates?currencyCode=USD", Some(&key))
        .await?;
    assert_eq!(status, 200, "{body}");
    let (_, days) = stack
        .get(
            "/api/v1/reference-rates?currencyCode=USD&date=2026-01-05",
            Some(&key),
        )
        .await?;
    assert_eq!(
        days["data"]["buying"], 151.0,
        "the first day's correction: {days}"
    );
    Ok(())
}

#[tokio::test]
async fn kill_9_mid_stream_neither_loses_nor_repeats_anything() -> anyhow::Result<()> {
    let mut stack = Stack::start().await?;
    let banks = banks(&stack, 6).await?;
    // 1,500 boards of 6 currencies: 9,000 rate entries.
    let stream = stack.spawn_stream(banks, 250, 6);
    let reference = stack.spawn_reference_days(REFERENCE_DAYS);
    for round in 0..3 {
        part_way(&stack, round).await?;
        stack.kill("ratewire-projector")?;
        backlog(&stack).await?;
        stack.start_process("ratewire-projector")?;
    }
    settle_and_compare(&stack, 6, stream, 6, reference).await
}

#[tokio::test]
async fn two_projectors_split_the_partitions_and_survive_one_being_killed() -> anyhow::Result<()> {
    let mut stack = Stack::builder()
        .env("RATEWIRE_PROJECTOR_PARTITIONS", "0")
        .start()
        .await?;
    let second = [
        ("RATEWIRE_PROJECTOR_PARTITIONS", "1,2".to_owned()),
        (
            "RATEWIRE_PROJECTOR_LISTEN",
            format!("127.0.0.1:{}", free_port()),
        ),
    ];
    stack.start_projector_as("projector-b", &second)?;
    // Enough banks that each projector's partitions carry some.
    let banks = banks(&stack, 12).await?;
    let stream = stack.spawn_stream(banks, 100, 5);
    let reference = stack.spawn_reference_days(REFERENCE_DAYS);
    for round in 0..2 {
        part_way(&stack, round).await?;
        stack.kill("projector-b")?;
        backlog(&stack).await?;
        stack.start_projector_as("projector-b", &second)?;
    }
    settle_and_compare(&stack, 12, stream, 5, reference).await?;

    // Both did their share.
    for log in ["ratewire-projector.log", "projector-b.log"] {
        let text = std::fs::read_to_string(stack.logs.join(log))?;
        assert!(text.contains("batch applied"), "{log} applied nothing");
    }
    Ok(())
}

#[tokio::test]
async fn postgres_cut_mid_stream_pauses_the_fold_and_loses_nothing() -> anyhow::Result<()> {
    let mut stack = Stack::builder().postgres_through_proxy().start().await?;
    let banks = banks(&stack, 4).await?;
    let stream = stack.spawn_stream(banks, 250, 6);
    let reference = stack.spawn_reference_days(REFERENCE_DAYS);
    part_way(&stack, 0).await?;
    let refused = stack
        .metric("ratewire-ingest", INGEST_POSTGRES_ERRORS)
        .await;
    stack.postgres_down()?;
    // Away until the publishers have been refused for it a few rounds
    // (six banks, each retrying its push).
    stack
        .wait_metric(
            "ratewire-ingest",
            INGEST_POSTGRES_ERRORS,
            refused + 30.0,
            CAUGHT_UP_WITHIN,
        )
        .await?;
    stack.postgres_up().await?;
    settle_and_compare(&stack, 4, stream, 6, reference).await
}

#[tokio::test]
async fn a_replay_switches_generations_while_the_api_keeps_serving() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("replay").await?;
    let banks = banks(&stack, 3).await?;
    let (first_bank, first_token) = banks[0].clone();
    let accepted = stack.spawn_stream(banks, 100, 5).await?? as i64;
    stack.wait_applied(3 + accepted, CAUGHT_UP_WITHIN).await?;

    // Readers keep getting answers during the whole replay.
    let replaying = tokio_util::sync::CancellationToken::new();
    let poller = {
        let (http, url, key) = (stack.http().clone(), stack.api_url.clone(), key.clone());
        let replaying = replaying.clone();
        tokio::spawn(async move {
            let mut statuses = Vec::new();
            // A reader's pace, not a wait: it reads until the replay ends.
            let mut pace = tokio::time::interval(Duration::from_millis(15));
            while !replaying.is_cancelled() {
                pace.tick().await;
                let response = http
                    .get(format!("{url}/api/v1/rates"))
                    .header("x-api-key", &key)
                    .send()
                    .await;
                statuses.push(response.map(|r| r.status().as_u16()).unwrap_or(0));
            }
            statuses
        })
    };
    stack.replay(&["--schema", "readmodel_v2"]).await?;
    replaying.cancel();
    let statuses = poller.await?;
    assert!(!statuses.is_empty());
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");

    assert_eq!(stack.active_generation().await?, "readmodel_v2");
    // Tables and views alike.
    let rows = stack.compare_schemas("readmodel", "readmodel_v2").await?;
    assert_eq!(rows["boards"], accepted);

    // The running projector follows the switch (and says so): a new board
    // lands in the new generation only, and the API serves it from there.
    let log = stack.logs.join("ratewire-projector.log");
    eventually(
        "the projector following the switch",
        CAUGHT_UP_WITHIN,
        || async {
            let text = std::fs::read_to_string(&log).ok()?;
            text.contains("following the switch to another read-model generation")
                .then_some(())
        },
    )
    .await?;
    let board = Board::now().rate("ZAR", "8.5", "8.9");
    assert_eq!(
        stack
            .publish_board(first_bank, &first_token, board)
            .await?
            .0,
        202
    );
    stack
        .wait_served("the new board served", first_bank, &key, "ZAR")
        .await?;
    let in_old = stack
        .sql_number("SELECT count(*) FROM readmodel.rates WHERE currency = 'ZAR'")
        .await?;
    let in_new = stack
        .sql_number("SELECT count(*) FROM readmodel_v2.rates WHERE currency = 'ZAR'")
        .await?;
    assert_eq!((in_old, in_new), (Some(0), Some(1)));
    Ok(())
}

/// The day of board `i` (0 = oldest) of the catch-up test: `days - i`
/// days before `today` (fixed once, so midnight cannot move it).
fn day_of(today: NaiveDate, days: i64, i: i64) -> NaiveDate {
    today - chrono::Days::new((days - i) as u64)
}

/// Board `i`: at noon of its day, buying at 1000 + i, so its value names
/// its day.
fn daily_board(today: NaiveDate, days: i64, i: i64) -> Board {
    Board::at(format!("{}T12:00:00Z", day_of(today, days, i))).rate("USD", 1000 + i, 5000)
}

async fn push_days(
    stack: &Stack,
    banks: &[(i64, String)],
    today: NaiveDate,
    days: i64,
    boards: std::ops::Range<i64>,
) -> anyhow::Result<()> {
    for i in boards {
        for (bank, token) in banks {
            let board = daily_board(today, days, i);
            assert_eq!(stack.publish_board(*bank, token, &board).await?.0, 202);
        }
    }
    Ok(())
}

/// A bank's latest board is served only after every earlier board of it is
/// committed: while a killed projector works through a backlog, whatever
/// board /rates shows, /history has every day up to it right.
#[tokio::test]
async fn while_a_killed_projector_catches_up_history_is_never_behind_rates() -> anyhow::Result<()> {
    const DAYS: i64 = 120;
    const BEFORE_KILL: i64 = 30;
    // Small batches: the backlog is folded, and its views written, in
    // dozens of steps for the readers to look between.
    let mut stack = Stack::builder()
        .env("RATEWIRE_PROJECTOR_BATCH_MAX", "4")
        .start()
        .await?;
    let key = stack.api_key("catch-up").await?;
    let banks = banks(&stack, 2).await?;
    let today = chrono::Utc::now().date_naive();
    push_days(&stack, &banks, today, DAYS, 0..BEFORE_KILL).await?;
    stack
        .wait_applied(2 + 2 * BEFORE_KILL, CAUGHT_UP_WITHIN)
        .await?;
    stack.kill("ratewire-projector")?;
    push_days(&stack, &banks, today, DAYS, BEFORE_KILL..DAYS).await?;
    stack.start_process("ratewire-projector")?;

    let checked = std::cell::Cell::new(0);
    eventually("both banks' last boards served", CAUGHT_UP_WITHIN, || {
        let (stack, key, banks, checked) = (&stack, &key, &banks, &checked);
        let picks: Vec<f64> = (0..banks.len()).map(|_| rand::thread_rng().gen()).collect();
        async move {
            let mut done = 0;
            for ((bank, _), pick) in banks.iter().zip(picks) {
                let (status, rates) = stack
                    .get(&format!("/api/v1/rates?bankId={bank}"), Some(key))
                    .await
                    .ok()?;
                let latest = rates["data"][0]["data"][0]["exchangeRates"][0]["cashBuying"]
                    .as_i64()
                    .filter(|_| status == 200)?
                    - 1000;
                let earlier = (pick * (latest + 1) as f64) as i64;
                let (status, history) = stack
                    .get(
                        &format!(
                            "/api/v1/history?bankId={bank}&date={}",
                            day_of(today, DAYS, earlier)
                        ),
                        Some(key),
                    )
                    .await
                    .ok()?;
                assert_eq!(
                    (status, history["data"]["cashBuying"].as_i64()),
                    (200, Some(1000 + earlier)),
                    "bank {bank}: /rates shows board {latest}, /history of board {earlier}'s day"
                );
                checked.set(checked.get() + 1);
                done += usize::from(latest == DAYS - 1);
            }
            (done == banks.len()).then_some(())
        }
    })
    .await?;
    assert!(checked.get() > 0);
    stack.wait_applied(2 + 2 * DAYS, CAUGHT_UP_WITHIN).await?;
    Ok(())
}

/// A batch stops at `RATEWIRE_PROJECTOR_BATCH_BYTES` of payload, whatever
/// its count: a backlog is folded in many small batches, every board in
/// its bank's order, and nothing is left behind.
#[tokio::test]
async fn a_backlog_is_folded_in_batches_bounded_by_their_bytes() -> anyhow::Result<()> {
    const DAYS: i64 = 60;
    // At most about seven of these boards' messages (150-200 bytes each)
    // to a batch.
    let mut stack = Stack::builder()
        .env("RATEWIRE_PROJECTOR_BATCH_BYTES", "1024")
        .start()
        .await?;
    let key = stack.api_key("bytes").await?;
    let banks = banks(&stack, 2).await?;
    let today = chrono::Utc::now().date_naive();
    push_days(&stack, &banks, today, DAYS, 0..1).await?;
    stack.wait_applied(2 + 2, CAUGHT_UP_WITHIN).await?;
    let batches_before = batches(&stack).await?;
    stack.kill("ratewire-projector")?;
    push_days(&stack, &banks, today, DAYS, 1..DAYS).await?;
    stack.start_process("ratewire-projector")?;
    stack.wait_applied(2 + 2 * DAYS, CAUGHT_UP_WITHIN).await?;

    for (bank, _) in &banks {
        stack
            .wait_served(
                "the last board",
                *bank,
                &key,
                &format!(r#""cashBuying":{}"#, 1000 + DAYS - 1),
            )
            .await?;
        for day in [0, DAYS / 2, DAYS - 2] {
            let (status, history) = stack
                .get(
                    &format!(
                        "/api/v1/history?bankId={bank}&date={}",
                        day_of(today, DAYS, day)
                    ),
                    Some(&key),
                )
                .await?;
            assert_eq!(
                (status, history["data"]["cashBuying"].as_i64()),
                (200, Some(1000 + day)),
                "bank {bank}, board {day}'s day"
            );
        }
    }
    // The restarted projector counts from zero: its batches alone.
    let batches = batches(&stack).await?;
    assert!(
        batches >= (2 * (DAYS - 1) / 8) as u64,
        "{} boards folded in {batches} batches (before the restart: {batches_before})",
        2 * (DAYS - 1)
    );
    Ok(())
}

/// Batches the running projector has applied.
async fn batches(stack: &Stack) -> anyhow::Result<u64> {
    let text = stack
        .text_at(&format!("{}/metrics", stack.projector_url))
        .await
        .ok_or_else(|| anyhow::anyhow!("the projector's metrics did not answer"))?;
    Ok(sample(&text, "ratewire_projector_batch_seconds_count") as u64)
}
