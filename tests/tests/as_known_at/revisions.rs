//! The revision log: the story's correction and retraction, with their
//! reasons and changes, filtered by bank and by when they became known.

use std::collections::BTreeSet;

use anyhow::ensure;
use ratewire_e2e::known_at::Moment;
use ratewire_e2e::Stack;
use serde_json::Value;

use super::steps::time;

/// The revisions of a page of the revision log.
pub(crate) fn revisions(page: &Value) -> Vec<Value> {
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

/// The revisions of the story, and what each revised.
pub(crate) struct Revised<'a> {
    pub(crate) typo: String,
    pub(crate) correction: &'a Value,
    pub(crate) correction_reason: &'a str,
    pub(crate) retracted: String,
    pub(crate) retraction: &'a Value,
    pub(crate) retraction_reason: &'a str,
}

/// `/api/v1/revisions` lists the correction and the retraction, each with
/// its reason, when it became known and what it changed; `bankId` and
/// `from` filter them.
pub(crate) async fn the_revision_log_lists_the_correction_and_the_retraction(
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
