//! What was known, and when (issue 59): a story of boards, a correction, a
//! retraction, a board with its source, a reference day published twice
//! and a bank registered mid-way and later deactivated. After each step
//! the test records the instant and what every endpoint answered live;
//! at the end every endpoint asked `asKnownAt` each instant answers what
//! was served then, byte for byte once ages and render times are taken out
//! (`ratewire_e2e::known_at`), on the live read model, after a replay into
//! a new generation, and after Postgres is replaced by an empty cluster.
//! The revision log lists the correction and the retraction with their
//! reasons and changes, each board shows where it came from, final answers
//! are immutable, and bad input is refused.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{ensure, Context};
use chrono::{DateTime, Utc};
use ratewire_e2e::known_at::{as_known_at, instant, LogPosition, Moment};
use ratewire_e2e::{ago, eventually, reference_day, Board, Stack, ADMIN_TOKEN, VISIBLE_WITHIN};
use serde_json::{json, Value};

/// Long enough for a replay of the story and a rebuild of the views on a
/// busy machine.
const RECOVERED_WITHIN: Duration = Duration::from_secs(90);

/// Every read of rate data the issue names, for the story's three banks:
/// the lists, each bank's rates, history and series, the best rates, the
/// converter, the spreads and the reference rates.
fn paths(banks: [i64; 3]) -> Vec<String> {
    let today = Utc::now().date_naive();
    let mut paths: Vec<String> = [
        "/api/v1/banks",
        "/api/v1/banks?withRecentEx=true",
        "/api/v1/currencies",
        "/api/v1/rates",
        "/api/v1/rates?transactional=true&socialLinks=true",
        "/api/v1/rates/best-rates?currencyCode=USD",
        "/api/v1/rates/best-rates?currencyCode=EUR",
        "/api/v1/rates/best-rates?currencyCode=GBP",
        "/api/v1/rates/series?currencyCode=USD&interval=hour",
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
    // CSV, as a spreadsheet asks for it.
    paths.push(format!(
        "/api/v1/rates/series?bankId={}&currencyCode=USD&interval=raw&format=csv",
        banks[0]
    ));
    for bank in banks {
        paths.push(format!("/api/v1/rates?bankId={bank}&transactional=true"));
        paths.push(format!("/api/v1/history?bankId={bank}&date={today}"));
        paths.push(format!(
            "/api/v1/history?bankId={bank}&date={today}&currencyCode=EUR"
        ));
        paths.push(format!(
            "/api/v1/rates/series?bankId={bank}&currencyCode=USD&interval=raw"
        ));
    }
    paths
}

/// A board quoting USD and EUR, each with a transactional pair unless
/// `None`.
fn board(
    as_of: &str,
    usd: [&str; 4],
    eur: [&str; 2],
    eur_transactional: Option<[&str; 2]>,
) -> Board {
    let board = Board::at(as_of)
        .rate("USD", usd[0], usd[1])
        .transactional("USD", usd[2], usd[3])
        .rate("EUR", eur[0], eur[1]);
    match eur_transactional {
        Some([buying, selling]) => board.transactional("EUR", buying, selling),
        None => board,
    }
}

/// Pushes `board` for `bank`, requires 202 and waits until it is served;
/// ingest's answer (`eventId`, `knownAt`).
async fn publish(stack: &Stack, bank: i64, token: &str, board: &Board) -> anyhow::Result<Value> {
    stack.push_and_wait(bank, token, board).await
}

/// Retracts `board` of `bank` with a reason; the retraction's 202 answer.
async fn retract(
    stack: &Stack,
    bank: i64,
    token: &str,
    board: &str,
    reason: &str,
) -> anyhow::Result<Value> {
    let response = stack
        .http()
        .delete(format!(
            "{}/v1/banks/{bank}/boards/{board}",
            stack.ingest_url
        ))
        .bearer_auth(token)
        .json(&json!({ "reason": reason }))
        .send()
        .await?;
    let status = response.status().as_u16();
    let body: Value = response.json().await?;
    ensure!(status == 202, "retracting {board}: {status} {body}");
    Ok(body)
}

/// Imports a National Bank day through ingest's operator listener.
async fn import_reference_day(stack: &Stack, body: &str) -> anyhow::Result<()> {
    let response = stack
        .http()
        .post(format!(
            "{}/v1/admin/reference-rates",
            stack.ingest_operator_url
        ))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await?;
    let status = response.status().as_u16();
    ensure!(
        status == 202,
        "importing a reference day: {status} {}",
        response.text().await?
    );
    Ok(())
}

/// Waits until GET `path` answers `status` with a body containing
/// `needle`.
async fn wait_for(
    stack: &Stack,
    key: &str,
    path: &str,
    status: u16,
    needle: &str,
) -> anyhow::Result<()> {
    eventually(
        &format!("{path} answering {status} with {needle}"),
        VISIBLE_WITHIN,
        || async {
            let (seen, body) = stack.get_raw(path, Some(key)).await.ok()?;
            (seen == status && body.contains(needle)).then_some(())
        },
    )
    .await
}

fn event_id(answer: &Value) -> String {
    answer["eventId"].as_str().expect("an eventId").to_owned()
}

fn time(text: &Value) -> Option<DateTime<Utc>> {
    text.as_str()?.parse().ok()
}

/// The revisions of a page of the revision log.
fn revisions(page: &Value) -> Vec<Value> {
    page["data"]["revisions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// One value a revision changed: currency, field, before and after, the
/// numbers compared as numbers (`null` for none).
type Change = [String; 4];

/// A revision's changes.
fn changes(revision: &Value) -> BTreeSet<Change> {
    let number = |v: &Value| match v.as_f64() {
        Some(n) => format!("{n}"),
        None => v.to_string(),
    };
    revision["changes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            [
                c["currencyCode"].as_str().unwrap_or("?").to_owned(),
                c["field"].as_str().unwrap_or("?").to_owned(),
                number(&c["before"]),
                number(&c["after"]),
            ]
        })
        .collect()
}

/// A currency's values on a revised board and on the board that replaced
/// it (`None`: it left), in the order cash buying, cash selling,
/// transactional buying, transactional selling.
struct Values {
    currency: &'static str,
    before: [f64; 4],
    after: Option<[f64; 4]>,
}

impl Values {
    fn corrected(currency: &'static str, before: [f64; 4], after: [f64; 4]) -> Self {
        Values {
            currency,
            before,
            after: Some(after),
        }
    }

    fn gone(currency: &'static str, before: [f64; 4]) -> Self {
        Values {
            currency,
            before,
            after: None,
        }
    }
}

/// The changes a revision of these values makes: every value that differs.
fn expected_changes(currencies: &[Values]) -> BTreeSet<Change> {
    const FIELDS: [&str; 4] = [
        "cashBuying",
        "cashSelling",
        "transactionalBuying",
        "transactionalSelling",
    ];
    let mut expected = BTreeSet::new();
    for values in currencies {
        for (i, field) in FIELDS.iter().enumerate() {
            let before = format!("{}", values.before[i]);
            let after = values
                .after
                .map_or("null".to_owned(), |a| format!("{}", a[i]));
            if after != before {
                expected.insert([values.currency.to_owned(), field.to_string(), before, after]);
            }
        }
    }
    expected
}

/// The provenance of one board as `/api/v1/boards/{id}` gives it.
async fn provenance(stack: &Stack, key: &str, board: &str) -> anyhow::Result<Value> {
    let (status, body) = stack
        .get(&format!("/api/v1/boards/{board}"), Some(key))
        .await?;
    ensure!(status == 200, "/api/v1/boards/{board}: {status} {body}");
    Ok(if body["data"].is_object() {
        body["data"].clone()
    } else {
        body
    })
}

/// What the story's boards were, by name, and what ingest answered each.
struct Published {
    name: &'static str,
    answer: Value,
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
    expected: &[ratewire_e2e::known_at::Answer],
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

fn assert_same(
    expected: &[ratewire_e2e::known_at::Answer],
    got: &[ratewire_e2e::known_at::Answer],
    when: &str,
) -> anyhow::Result<()> {
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
                ratewire_e2e::known_at::first_difference(&e.body, &g.body)
            )
        })
        .collect();
    ensure!(differences.is_empty(), "{}", differences.join("\n"));
    Ok(())
}

/// An answer as known at an instant every partition's fold has passed is
/// final: immutable for a year, with a strong tag that revalidates; one as
/// known at this very moment is not final yet.
async fn final_answers_are_immutable_and_revalidate(
    stack: &Stack,
    key: &str,
    moment: &Moment,
) -> anyhow::Result<()> {
    let path = as_known_at(&moment.answers[0].path, &moment.instant());
    let url = format!("{}{path}", stack.api_url);
    let get = |tag: Option<String>| {
        let mut request = stack.http().get(&url).header("x-api-key", key);
        if let Some(tag) = tag {
            request = request.header("if-none-match", tag);
        }
        request.send()
    };
    let header = |response: &reqwest::Response, name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let answer = eventually("the answer final", VISIBLE_WITHIN, || async {
        let response = get(None).await.ok()?;
        (header(&response, "cache-control").as_deref()
            == Some("public, max-age=31536000, immutable"))
        .then_some(response)
    })
    .await;
    let Ok(answer) = answer else {
        let last = get(None).await?;
        anyhow::bail!(
            "{path} never served as final: Cache-Control {:?}; the folds: {}",
            header(&last, "cache-control"),
            stack.fold_positions().await?
        );
    };
    assert_eq!(answer.status(), 200);
    let tag = header(&answer, "etag").context("a final answer's ETag")?;
    assert!(!tag.starts_with("W/"), "a strong tag: {tag}");
    let again = get(Some(tag.clone())).await?;
    assert_eq!(
        again.status().as_u16(),
        304,
        "{path} with If-None-Match {tag}"
    );
    assert!(again.bytes().await?.is_empty());

    // As known at now: the fold has not passed it (the skew allowance
    // alone keeps it open for a second).
    let now = instant(Utc::now());
    let response = stack
        .http()
        .get(format!(
            "{}{}",
            stack.api_url,
            as_known_at("/api/v1/currencies", &now)
        ))
        .header("x-api-key", key)
        .send()
        .await?;
    assert_eq!(response.status(), 200);
    let cache = header(&response, "cache-control").unwrap_or_default();
    assert!(
        !cache.contains("immutable"),
        "as known at {now}, just now: {cache}"
    );
    Ok(())
}

/// The revisions of the story, and what each revised.
struct Revised<'a> {
    typo: String,
    correction: &'a Value,
    correction_reason: &'a str,
    retracted: String,
    retraction: &'a Value,
    retraction_reason: &'a str,
}

/// `/api/v1/revisions` lists the correction and the retraction, each with
/// its reason, when it became known and what it changed; `bankId` and
/// `from` filter them.
async fn the_revision_log_lists_the_correction_and_the_retraction(
    stack: &Stack,
    key: &str,
    [cbe, awash]: [i64; 2],
    moments: &[Moment],
    revised: Revised<'_>,
) -> anyhow::Result<()> {
    let page = |query: String| async move {
        let path = format!("/api/v1/revisions{query}");
        let (status, body) = stack.get(&path, Some(key)).await?;
        ensure!(status == 200, "{path}: {status} {body}");
        anyhow::Ok((revisions(&body), body))
    };

    let (cbe_revisions, body) = page(format!("?bankId={cbe}")).await?;
    assert_eq!(cbe_revisions.len(), 1, "CBE's revisions: {body}");
    let correction = &cbe_revisions[0];
    assert_eq!(correction["kind"], "correction", "{correction}");
    assert_eq!(
        correction["eventId"], revised.correction["eventId"],
        "{correction}"
    );
    assert_eq!(
        correction["revisedEventId"],
        revised.typo.as_str(),
        "{correction}"
    );
    assert_eq!(correction["bankId"], cbe, "{correction}");
    assert_eq!(
        correction["reason"], revised.correction_reason,
        "{correction}"
    );
    assert_eq!(
        time(&correction["knownAt"]),
        time(&revised.correction["knownAt"]),
        "the correction is known when its board was: {correction}"
    );
    assert!(time(&correction["asOf"]).is_some(), "{correction}");
    assert_eq!(
        changes(correction),
        expected_changes(&[
            Values::corrected(
                "USD",
                [1553.5, 1582.0, 1555.0, 1578.0],
                [155.35, 158.20, 155.85, 157.70],
            ),
            Values::corrected(
                "EUR",
                [180.10, 184.40, 180.60, 183.90],
                [180.10, 184.40, 180.60, 183.90],
            ),
            Values::gone("GBP", [200.00, 205.00, 201.00, 204.00]),
        ]),
        "the correction's changes: {correction}"
    );

    let (awash_revisions, body) = page(format!("?bankId={awash}")).await?;
    assert_eq!(awash_revisions.len(), 1, "Awash's revisions: {body}");
    let retraction = &awash_revisions[0];
    assert_eq!(retraction["kind"], "retraction", "{retraction}");
    assert_eq!(
        retraction["eventId"], revised.retraction["eventId"],
        "{retraction}"
    );
    assert_eq!(
        retraction["revisedEventId"],
        revised.retracted.as_str(),
        "{retraction}"
    );
    assert_eq!(retraction["bankId"], awash, "{retraction}");
    assert_eq!(
        retraction["reason"], revised.retraction_reason,
        "{retraction}"
    );
    assert!(time(&retraction["knownAt"]).is_some(), "{retraction}");
    assert_eq!(
        changes(retraction),
        expected_changes(&[
            Values::gone("USD", [155.00, 157.80, 155.50, 157.40]),
            Values::gone("EUR", [179.90, 184.50, 180.30, 184.00]),
        ]),
        "a retraction takes every field of every currency: {retraction}"
    );
    // As CSV: a row per change, the reason in each, `after` empty.
    let path = format!("/api/v1/revisions?bankId={awash}&format=csv");
    let (status, csv) = stack.get_raw(&path, Some(key)).await?;
    assert_eq!(status, 200, "{path}: {csv}");
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(
        rows[0],
        "eventId,kind,revisedEventId,bankId,asOf,knownAt,reason,currencyCode,field,before,after"
    );
    assert_eq!(rows.len(), 1 + 8, "{csv}");
    assert!(
        rows[1..].iter().all(|row| row.contains(",retraction,")
            && row.contains(revised.retraction_reason)
            && row.ends_with(',')),
        "{csv}"
    );

    // Both, in the order they became known; from an instant after the
    // correction, only the retraction.
    let (all, body) = page(String::new()).await?;
    let kinds: Vec<&Value> = all.iter().map(|r| &r["kind"]).collect();
    assert_eq!(kinds, ["correction", "retraction"], "{body}");
    let after_correction = moments
        .iter()
        .find(|m| m.step == "CBE corrects it")
        .expect("the correction's moment");
    let (later, body) = page(format!("?from={}", after_correction.instant())).await?;
    assert_eq!(later.len(), 1, "{body}");
    assert_eq!(later[0]["kind"], "retraction", "{body}");
    let (earlier, body) = page(format!("?to={}", after_correction.instant())).await?;
    assert_eq!(earlier.len(), 1, "{body}");
    assert_eq!(earlier[0]["kind"], "correction", "{body}");
    Ok(())
}

/// `/api/v1/boards/{id}` shows each board as published, where it is on the
/// log, when it became known, its source and its status; an unknown id is
/// 404 and a malformed one 400.
async fn each_board_shows_its_source_log_position_and_status(
    stack: &Stack,
    key: &str,
    published: &[Published],
    source: &Value,
    retraction: &str,
    [cbe, awash, dashen]: [i64; 3],
) -> anyhow::Result<()> {
    let log = stack.log_positions()?;
    let expected = [
        ("CBE's first", cbe, "superseded"),
        ("Awash's sourced", awash, "inForce"),
        ("CBE's typo", cbe, "corrected"),
        ("CBE's correction", cbe, "inForce"),
        ("Dashen's", dashen, "inForce"),
        ("Awash's retracted", awash, "retracted"),
    ];
    for (name, bank, status) in expected {
        let answer = &published
            .iter()
            .find(|p| p.name == name)
            .expect(name)
            .answer;
        let id = event_id(answer);
        let board = provenance(stack, key, &id).await?;
        let at = |field: &str| format!("{name} board's {field}: {board}");
        assert_eq!(board["eventId"], id.as_str(), "{}", at("eventId"));
        assert_eq!(board["bankId"], bank, "{}", at("bankId"));
        // Dashen's board is its last: the bank's deactivation does not
        // revise it.
        assert_eq!(board["status"], status, "{}", at("status"));
        assert!(
            board["rates"].as_array().is_some_and(|r| !r.is_empty()),
            "{}",
            at("rates")
        );
        assert!(time(&board["asOf"]).is_some(), "{}", at("asOf"));
        assert!(time(&board["receivedAt"]).is_some(), "{}", at("receivedAt"));
        assert_eq!(
            time(&board["knownAt"]),
            time(&answer["knownAt"]),
            "{} (ingest's 202 said {})",
            at("knownAt"),
            answer["knownAt"]
        );
        let position: &LogPosition = log.get(&id).with_context(|| format!("{name} on the log"))?;
        assert_eq!(
            board["log"]["topic"],
            stack.topic.as_str(),
            "{}",
            at("log.topic")
        );
        assert_eq!(
            board["log"]["partition"],
            position.partition,
            "{}",
            at("log.partition")
        );
        assert_eq!(
            board["log"]["offset"],
            position.offset,
            "{}",
            at("log.offset")
        );
        assert_eq!(
            time(&board["knownAt"]).map(|t| t.timestamp_millis()),
            position.timestamp_ms,
            "{} (the broker's log-append time)",
            at("knownAt")
        );
        let revisions = board["revisions"].as_array().map_or(0, Vec::len);
        match status {
            "corrected" => {
                assert_eq!(revisions, 1, "{}", at("revisions"));
                let correction = event_id(&published[3].answer);
                assert_eq!(
                    board["revisions"][0]["eventId"],
                    correction.as_str(),
                    "{}",
                    at("revisions")
                );
                assert_eq!(
                    board["revisions"][0]["kind"],
                    "correction",
                    "{}",
                    at("revisions")
                );
            }
            "retracted" => {
                assert_eq!(revisions, 1, "{}", at("revisions"));
                assert_eq!(
                    board["revisions"][0]["eventId"],
                    retraction,
                    "{}",
                    at("revisions")
                );
                assert_eq!(
                    board["revisions"][0]["kind"],
                    "retraction",
                    "{}",
                    at("revisions")
                );
            }
            _ => assert_eq!(revisions, 0, "{}", at("revisions")),
        }
        if name == "Awash's sourced" {
            assert_eq!(board["source"]["url"], source["url"], "{}", at("source"));
            assert_eq!(
                board["source"]["method"],
                source["method"],
                "{}",
                at("source")
            );
            assert_eq!(
                time(&board["source"]["capturedAt"]),
                time(&source["capturedAt"]),
                "{}",
                at("source")
            );
            assert_eq!(
                board["source"]["sha256"],
                source["sha256"].as_str().unwrap().to_ascii_lowercase(),
                "{}",
                at("source")
            );
            assert_eq!(board["reason"], Value::Null, "{}", at("reason"));
        } else {
            assert_eq!(board["source"], Value::Null, "{}", at("source"));
        }
        if name == "CBE's correction" {
            assert_eq!(
                board["reason"],
                "the 3-hour board read 1553.5 for 155.35",
                "{}",
                at("reason")
            );
        }
    }
    let usd_of_awash = provenance(stack, key, &event_id(&published[1].answer)).await?;
    let usd = usd_of_awash["rates"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r.to_string().contains("\"USD\""))
        .with_context(|| format!("USD on Awash's board: {usd_of_awash}"))?;
    assert_eq!(usd["cashBuying"], 154.90, "as published: {usd}");
    assert_eq!(usd["transactionalSelling"], 157.50, "as published: {usd}");
    Ok(())
}

/// Each read of rate data, once, for the bad-input checks.
const READS: [&str; 10] = [
    "/api/v1/banks",
    "/api/v1/currencies",
    "/api/v1/rates",
    "/api/v1/rates/best-rates?currencyCode=USD",
    "/api/v1/history?bankId=1&date=2026-01-01",
    "/api/v1/rates/series?bankId=1&currencyCode=USD",
    "/api/v1/convert?from=USD&to=ETB&amount=100",
    "/api/v1/rates/spreads?currencyCode=USD",
    "/api/v1/reference-rates",
    "/api/v1/reference-rates/series?currencyCode=USD",
];

#[tokio::test]
async fn bad_instants_and_board_ids_are_refused_and_an_instant_before_anything_finds_nothing(
) -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("bad-input").await?;
    let (cbe, token) = stack.bank_with_token("CBE", "Commercial Bank").await?;
    let first = Board::at(ago(0, 2)).rate("USD", "155.10", "158.20");
    let accepted = stack.push_and_wait(cbe, &token, &first).await?;
    let before = stack
        .get_raw(&format!("/api/v1/rates?bankId={cbe}"), Some(&key))
        .await?;

    let future = instant(Utc::now() + chrono::Duration::hours(1));
    for read in READS {
        for bad in [
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-11-29",
            future.as_str(),
        ] {
            let path = as_known_at(read, bad);
            let (status, body) = stack.get(&path, Some(&key)).await?;
            assert_eq!(status, 400, "{path}: {body}");
            assert_eq!(
                body["message"], "Validation errors occurred.",
                "{path}: {body}"
            );
            assert!(
                body["errors"]["asKnownAt"]
                    .as_array()
                    .is_some_and(|e| !e.is_empty()),
                "{path}: {body}"
            );
        }
    }

    // Before the bank existed: what the API would have answered then.
    let long_ago = "2020-01-01T00:00:00Z";
    let (status, banks) = stack
        .get(&as_known_at("/api/v1/banks", long_ago), Some(&key))
        .await?;
    assert_eq!((status, &banks["data"]), (200, &json!([])), "{banks}");
    assert_eq!(banks["asKnownAt"], "2020-01-01T00:00:00.000Z", "{banks}");
    let (status, rates) = stack
        .get(
            &as_known_at(&format!("/api/v1/rates?bankId={cbe}"), long_ago),
            Some(&key),
        )
        .await?;
    assert_eq!(
        (status, &rates["message"]),
        (404, &json!("Bank not found")),
        "{rates}"
    );
    // An instant with an offset is the same instant in UTC, to the
    // millisecond.
    let (status, rates) = stack
        .get(
            &as_known_at(
                &format!("/api/v1/rates?bankId={cbe}"),
                &instant(Utc::now()).replace('Z', "%2B00:00"),
            ),
            Some(&key),
        )
        .await?;
    assert_eq!(status, 200, "{rates}");
    assert!(
        rates["asKnownAt"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z') && t.len() == 24),
        "{rates}"
    );

    // Board ids: unknown, malformed.
    let unknown = uuid::Uuid::now_v7();
    let (status, body) = stack
        .get(&format!("/api/v1/boards/{unknown}"), Some(&key))
        .await?;
    assert_eq!(status, 404, "{body}");
    let (status, body) = stack.get("/api/v1/boards/not-a-uuid", Some(&key)).await?;
    assert_eq!(status, 400, "{body}");
    assert!(body["errors"]["eventId"].is_array(), "{body}");
    let (status, body) = stack
        .get(
            &format!("/api/v1/boards/{}", event_id(&accepted)),
            Some(&key),
        )
        .await?;
    assert_eq!(status, 200, "{body}");
    // Revisions: a malformed bank or instant.
    for bad in [
        "?bankId=abc",
        "?from=yesterday",
        "?to=2026-13-01T00:00:00Z",
        "?format=xml",
    ] {
        let path = format!("/api/v1/revisions{bad}");
        let (status, body) = stack.get(&path, Some(&key)).await?;
        assert_eq!(status, 400, "{path}: {body}");
    }

    // An overlong reason, on a board and on a retraction: 400, nothing
    // published.
    let long = "x".repeat(501);
    let (status, body) = stack
        .publish_board(
            cbe,
            &token,
            Board::at(ago(0, 1))
                .rate("USD", "155.20", "158.30")
                .reason(&long),
        )
        .await?;
    assert_eq!(status, 400, "{body}");
    assert!(body["errors"]["reason"].is_array(), "{body}");
    let response = stack
        .http()
        .delete(format!(
            "{}/v1/banks/{cbe}/boards/{}",
            stack.ingest_url,
            event_id(&accepted)
        ))
        .bearer_auth(&token)
        .json(&json!({ "reason": long }))
        .send()
        .await?;
    assert_eq!(response.status().as_u16(), 400);
    let body: Value = response.json().await?;
    assert!(body["errors"]["reason"].is_array(), "{body}");

    // Nothing changed.
    let after = stack
        .get_raw(&format!("/api/v1/rates?bankId={cbe}"), Some(&key))
        .await?;
    assert_eq!(before, after);
    let (_, revisions) = stack.get("/api/v1/revisions", Some(&key)).await?;
    assert!(self::revisions(&revisions).is_empty(), "{revisions}");
    Ok(())
}
