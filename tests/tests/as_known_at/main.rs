//! What was known, and when (issue 59): a story of boards, a correction, a
//! retraction, a board with its source, a reference day published twice
//! and a bank registered mid-way and later deactivated. After each step
//! the test records the instant and what every endpoint answered live;
//! at the end every endpoint asked `asKnownAt` each instant answers what
//! was served then, byte for byte once ages and render times are taken out
//! (`ratewire_e2e::known_at`; the ages are counted to the instant, see
//! [`ages`]), on the live read model, after a replay into a new
//! generation, and after Postgres is replaced by an empty cluster.
//! The revision log lists the correction and the retraction with their
//! reasons and changes ([`revisions`]), each board shows where it came
//! from ([`provenance`]), final answers are immutable ([`finality`]), and
//! bad input is refused ([`bad_input`]). What each step does is in
//! [`steps`].

use std::time::Duration;

use anyhow::ensure;
use chrono::Utc;
use ratewire_e2e::known_at::{first_difference, Answer, Moment};
use ratewire_e2e::{ago, eventually, reference_day, Stack};
use serde_json::json;

use ages::ages_as_known_at_are_counted_to_the_instant;
use finality::final_answers_are_immutable_and_revalidate;
use provenance::{each_board_shows_its_source_log_position_and_status, Published};
use revisions::{the_revision_log_lists_the_correction_and_the_retraction, Revised};
use steps::{board, event_id, import_reference_day, publish, retract, wait_for};

mod ages;
mod bad_input;
mod finality;
mod provenance;
mod revisions;
mod steps;

/// Long enough for a replay of the story and a rebuild of the views on a
/// busy machine.
const RECOVERED_WITHIN: Duration = Duration::from_secs(90);

/// Every read of rate data the issue names, for the story's three banks:
/// the lists, each bank's rates, history and series, the best rates, the
/// converter, the spreads and the reference rates.
fn paths(banks: [i64; 3]) -> Vec<String> {
    let today = Utc::now().date_naive();
    // The series' window is given: by default it ends at the next hour,
    // and a run across an hour's end would compare two windows.
    let window = format!(
        "from={}&to={}",
        today - chrono::Days::new(30),
        today + chrono::Days::new(1)
    );
    let mut paths: Vec<String> = [
        "/api/v1/banks",
        "/api/v1/banks?withRecentEx=true",
        "/api/v1/currencies",
        "/api/v1/rates",
        "/api/v1/rates?transactional=true&socialLinks=true",
        "/api/v1/rates/best-rates?currencyCode=USD",
        "/api/v1/rates/best-rates?currencyCode=EUR",
        "/api/v1/rates/best-rates?currencyCode=GBP",
        "/api/v1/convert?from=USD&to=ETB&amount=100",
        "/api/v1/convert?from=ETB&to=EUR&amount=10000&transactional=true",
        "/api/v1/convert?from=USD&to=EUR&amount=100",
        "/api/v1/rates/spreads?currencyCode=USD&transactional=true",
        "/api/v1/reference-rates",
        "/api/v1/reference-rates?currencyCode=USD",
        "/api/v1/reference-rates/series?currencyCode=USD",
    ]
    .map(str::to_owned)
    .into();
    paths.push(format!(
        "/api/v1/rates/series?currencyCode=USD&interval=hour&{window}"
    ));
    // CSV, as a spreadsheet asks for it.
    paths.push(format!(
        "/api/v1/rates/series?bankId={}&currencyCode=USD&interval=raw&format=csv&{window}",
        banks[0]
    ));
    for bank in banks {
        paths.push(format!("/api/v1/rates?bankId={bank}&transactional=true"));
        paths.push(format!("/api/v1/history?bankId={bank}&date={today}"));
        paths.push(format!(
            "/api/v1/history?bankId={bank}&date={today}&currencyCode=EUR"
        ));
        paths.push(format!(
            "/api/v1/rates/series?bankId={bank}&currencyCode=USD&interval=raw&{window}"
        ));
    }
    paths
}

#[tokio::test]
async fn every_answer_as_known_at_each_step_is_the_one_served_live_then_also_after_a_replay_and_an_empty_postgres(
) -> anyhow::Result<()> {
    let mut stack = Stack::builder().own_postgres().start().await?;
    let key = stack.api_key("as-known-at").await?;
    let mut moments: Vec<Moment> = Vec::new();

    // 1. Two banks registered, nothing published yet. The third bank,
    // registered mid-way, takes the next id: its paths are asked from the
    // start (404 until it exists).
    let (cbe, cbe_token) = stack.bank_with_token("CBE", "Commercial Bank").await?;
    let (awash, awash_token) = stack.bank_with_token("AWASH", "Awash Bank").await?;
    let dashen = awash + 1;
    let paths = paths([cbe, awash, dashen]);
    wait_for(&stack, &key, "/api/v1/banks", 200, "\"AWASH\"").await?;
    moments.push(
        stack
            .record_moment("two banks registered", &key, &paths)
            .await?,
    );

    // 2. CBE's first board.
    let a1 = board(
        &ago(0, 5),
        ["155.10", "158.20", "155.60", "157.70"],
        ["180.00", "184.50"],
        Some(["180.50", "184.00"]),
    );
    let a1_answer = publish(&stack, cbe, &cbe_token, &a1).await?;
    moments.push(stack.record_moment("CBE publishes", &key, &paths).await?);

    // 3. Awash's first board, with where its numbers came from.
    let source = json!({"url": "https://awash.example/rates", "method": "page",
        "capturedAt": ago(0, 4), "sha256": "AB".repeat(32)});
    let b1 = board(
        &ago(0, 4),
        ["154.90", "158.00", "155.40", "157.50"],
        ["179.80", "184.60"],
        Some(["180.20", "184.10"]),
    )
    .source(source.clone());
    let b1_answer = publish(&stack, awash, &awash_token, &b1).await?;
    moments.push(
        stack
            .record_moment("Awash publishes with a source", &key, &paths)
            .await?,
    );

    // 4. The National Bank's reference day (yesterday's, in force today).
    let reference_date = (Utc::now() - chrono::Duration::days(1)).date_naive();
    import_reference_day(&stack, &reference_day(reference_date, 155.0)).await?;
    wait_for(
        &stack,
        &key,
        "/api/v1/reference-rates?currencyCode=USD",
        200,
        "155.0000",
    )
    .await?;
    moments.push(
        stack
            .record_moment("the reference day published", &key, &paths)
            .await?,
    );

    // 5. CBE's board with a typo (and GBP), then 6. its correction: the
    // same asOf, with a reason, GBP gone.
    let typo_as_of = ago(0, 3);
    let a2 = board(
        &typo_as_of,
        ["1553.5", "1582.0", "1555.0", "1578.0"],
        ["180.10", "184.40"],
        Some(["180.60", "183.90"]),
    )
    .rate("GBP", "200.00", "205.00")
    .transactional("GBP", "201.00", "204.00");
    let a2_answer = publish(&stack, cbe, &cbe_token, &a2).await?;
    moments.push(
        stack
            .record_moment("CBE publishes a typo", &key, &paths)
            .await?,
    );

    let correction_reason = "the 3-hour board read 1553.5 for 155.35";
    let a3 = board(
        &typo_as_of,
        ["155.35", "158.20", "155.85", "157.70"],
        ["180.10", "184.40"],
        Some(["180.60", "183.90"]),
    )
    .reason(correction_reason);
    let a3_answer = publish(&stack, cbe, &cbe_token, &a3).await?;
    wait_for(
        &stack,
        &key,
        "/api/v1/rates/best-rates?currencyCode=GBP",
        404,
        "",
    )
    .await?;
    moments.push(stack.record_moment("CBE corrects it", &key, &paths).await?);

    // 7. Dashen registered mid-way, then 8. its first board (the best
    // USD buying).
    let (registered, dashen_token) = stack.bank_with_token("DASHEN", "Dashen Bank").await?;
    assert_eq!(registered, dashen, "the next id");
    wait_for(&stack, &key, "/api/v1/banks", 200, "\"DASHEN\"").await?;
    moments.push(
        stack
            .record_moment("Dashen registered", &key, &paths)
            .await?,
    );
    let c1 = board(
        &ago(0, 2),
        ["156.00", "157.90", "156.20", "157.60"],
        ["181.00", "185.00"],
        None,
    );
    let c1_answer = publish(&stack, dashen, &dashen_token, &c1).await?;
    moments.push(
        stack
            .record_moment("Dashen publishes", &key, &paths)
            .await?,
    );

    // 9. Awash's second board, then 10. its retraction, with a reason:
    // the first is in force again.
    let b2 = board(
        &ago(0, 1),
        ["155.00", "157.80", "155.50", "157.40"],
        ["179.90", "184.50"],
        Some(["180.30", "184.00"]),
    );
    let b2_answer = publish(&stack, awash, &awash_token, &b2).await?;
    moments.push(
        stack
            .record_moment("Awash publishes again", &key, &paths)
            .await?,
    );
    let retraction_reason = "published in error: yesterday's sheet";
    let retraction = retract(
        &stack,
        awash,
        &awash_token,
        &event_id(&b2_answer),
        retraction_reason,
    )
    .await?;
    stack.wait_board_served(awash, &b1).await?;
    moments.push(
        stack
            .record_moment("Awash retracts it", &key, &paths)
            .await?,
    );

    // 11. The reference day published again with other numbers.
    import_reference_day(&stack, &reference_day(reference_date, 156.5)).await?;
    wait_for(
        &stack,
        &key,
        "/api/v1/reference-rates?currencyCode=USD",
        200,
        "156.5000",
    )
    .await?;
    moments.push(
        stack
            .record_moment("the reference day corrected", &key, &paths)
            .await?,
    );

    // 12. CBE takes its full name, and 13. Dashen is deactivated.
    stack
        .update_bank(cbe, json!({"name": "Commercial Bank of Ethiopia"}))
        .await?;
    wait_for(
        &stack,
        &key,
        "/api/v1/banks",
        200,
        "Commercial Bank of Ethiopia",
    )
    .await?;
    moments.push(stack.record_moment("CBE renamed", &key, &paths).await?);
    stack.update_bank(dashen, json!({"active": false})).await?;
    wait_for(
        &stack,
        &key,
        &format!("/api/v1/rates?bankId={dashen}"),
        404,
        "",
    )
    .await?;
    moments.push(
        stack
            .record_moment("Dashen deactivated", &key, &paths)
            .await?,
    );

    // Every endpoint, as known at every instant, answers what it answered
    // live then.
    let differences = stack
        .differences_as_known_at(&stack.api_url.clone(), &key, &moments)
        .await?;
    assert!(
        differences.is_empty(),
        "as known at, live read model:\n{}",
        differences.join("\n")
    );
    ages_as_known_at_are_counted_to_the_instant(&stack, &key, &moments).await?;

    let published = [
        Published {
            name: "CBE's first",
            answer: a1_answer,
        },
        Published {
            name: "Awash's sourced",
            answer: b1_answer,
        },
        Published {
            name: "CBE's typo",
            answer: a2_answer,
        },
        Published {
            name: "CBE's correction",
            answer: a3_answer,
        },
        Published {
            name: "Dashen's",
            answer: c1_answer,
        },
        Published {
            name: "Awash's retracted",
            answer: b2_answer,
        },
    ];
    let ids = |name: &str| {
        event_id(
            &published
                .iter()
                .find(|p| p.name == name)
                .expect(name)
                .answer,
        )
    };

    the_revision_log_lists_the_correction_and_the_retraction(
        &stack,
        &key,
        [cbe, awash],
        &moments,
        Revised {
            typo: ids("CBE's typo"),
            correction: &published[3].answer,
            correction_reason,
            retracted: ids("Awash's retracted"),
            retraction: &retraction,
            retraction_reason,
        },
    )
    .await?;
    each_board_shows_its_source_log_position_and_status(
        &stack,
        &key,
        &published,
        &source,
        &event_id(&retraction),
        [cbe, awash, dashen],
    )
    .await?;

    // What /revisions and /boards answer is a fold of the log too: kept to
    // compare after the replay and the new cluster.
    let mut provenance_paths = vec![
        "/api/v1/revisions".to_owned(),
        format!("/api/v1/revisions?bankId={cbe}"),
        format!("/api/v1/revisions?bankId={awash}&format=csv"),
    ];
    provenance_paths.extend(
        published
            .iter()
            .map(|p| format!("/api/v1/boards/{}", event_id(&p.answer))),
    );
    let provenance_before = stack
        .answers_from(&stack.api_url.clone(), &key, &provenance_paths, None)
        .await?;
    let last = moments.last().expect("moments").answers.clone();

    // A replay into a new generation rebuilds the same history: the
    // fold-equals-replay check, then the switch to a replayed generation,
    // asked through an API started afterwards (nothing of the first
    // instance's cache).
    stack.assert_fold_matches_replay().await?;
    stack.replay(&["--schema", "known_at_replayed"]).await?;
    assert_eq!(stack.active_generation().await?, "known_at_replayed");
    let (replayed_api, _) = stack.start_api_as("api-after-replay").await?;
    // The API that ran all along follows the switch too: what it keeps of
    // final answers is of the generation it read them from.
    for api in [replayed_api.clone(), stack.api_url.clone()] {
        until_live_answers_are(&stack, &api, &key, &paths, &last).await?;
        let differences = stack.differences_as_known_at(&api, &key, &moments).await?;
        assert!(
            differences.is_empty(),
            "as known at, after a replay ({api}):\n{}",
            differences.join("\n")
        );
        let provenance_replayed = stack
            .answers_from(&api, &key, &provenance_paths, None)
            .await?;
        assert_same(&provenance_before, &provenance_replayed, "after a replay")?;
    }
    stack.kill("api-after-replay")?;

    // Postgres replaced by an empty cluster: the log gives it all back.
    stack.replace_postgres().await?;
    // Keys lived only in the lost cluster.
    let key = stack.api_key("as-known-at").await?;
    let api = stack.api_url.clone();
    until_live_answers_are(&stack, &api, &key, &paths, &last).await?;
    let differences = stack.differences_as_known_at(&api, &key, &moments).await?;
    assert!(
        differences.is_empty(),
        "as known at, after Postgres was replaced by an empty cluster:\n{}",
        differences.join("\n")
    );
    let provenance_recovered = stack
        .answers_from(&api, &key, &provenance_paths, None)
        .await?;
    assert_same(
        &provenance_before,
        &provenance_recovered,
        "after Postgres was replaced",
    )?;

    // Every partition's fold has long passed the story's instants.
    final_answers_are_immutable_and_revalidate(&stack, &key, &moments[1]).await
}

/// Waits until the API at `base` answers every path live as `expected`;
/// fails naming the first path that does not.
async fn until_live_answers_are(
    stack: &Stack,
    base: &str,
    key: &str,
    paths: &[String],
    expected: &[Answer],
) -> anyhow::Result<()> {
    let found = eventually("the answers of before", RECOVERED_WITHIN, || async {
        let now = stack.answers_from(base, key, paths, None).await.ok()?;
        (now == expected).then_some(())
    })
    .await;
    if found.is_err() {
        let now = stack.answers_from(base, key, paths, None).await?;
        assert_same(expected, &now, "live, once recovered")?;
    }
    Ok(())
}

fn assert_same(expected: &[Answer], got: &[Answer], when: &str) -> anyhow::Result<()> {
    let differences: Vec<String> = expected
        .iter()
        .zip(got)
        .filter(|(e, g)| e != g)
        .map(|(e, g)| {
            format!(
                "{} {when}: {} vs {}\n    {}",
                e.path,
                e.status,
                g.status,
                first_difference(&e.body, &g.body)
            )
        })
        .collect();
    ensure!(differences.is_empty(), "{}", differences.join("\n"));
    Ok(())
}
