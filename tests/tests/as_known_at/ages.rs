//! Ages as known at an instant are counted to that instant: the one thing
//! the byte-for-byte comparison leaves out, checked on its own.

use anyhow::Context;
use chrono::{DateTime, Utc};
use ratewire_e2e::known_at::{as_known_at, Moment};
use ratewire_e2e::Stack;
use serde_json::Value;

/// Each quote's `ageSeconds` and `updatedAt` in a /convert or /rates/spreads
/// answer.
fn ages(body: &Value) -> Vec<(i64, DateTime<Utc>)> {
    let data = &body["data"];
    let quotes = data["results"].as_array().or(data["banks"].as_array());
    quotes
        .into_iter()
        .flatten()
        .filter_map(|quote| {
            let age = quote["ageSeconds"].as_i64()?;
            let updated = quote["updatedAt"].as_str()?.parse().ok()?;
            Some((age, updated))
        })
        .collect()
}

/// The converter's and the spreads' ages as known at every moment are the
/// whole seconds from each quote's `updatedAt` to the moment.
pub(crate) async fn ages_as_known_at_are_counted_to_the_instant(
    stack: &Stack,
    key: &str,
    moments: &[Moment],
) -> anyhow::Result<()> {
    let mut counted = 0;
    for moment in moments {
        for path in [
            "/api/v1/convert?from=USD&to=ETB&amount=100",
            "/api/v1/rates/spreads?currencyCode=USD&transactional=true",
        ] {
            let asked = as_known_at(path, &moment.instant());
            let (status, body) = stack.get(&asked, Some(key)).await?;
            if status != 200 {
                continue;
            }
            for (age, updated) in ages(&body) {
                let expected = (moment.at - updated).num_seconds();
                anyhow::ensure!(
                    age == expected,
                    "{asked} ({}): ageSeconds {age}, {expected} from {updated} to the instant",
                    moment.step
                );
                counted += 1;
            }
        }
    }
    (counted > 0)
        .then_some(())
        .context("no ages were answered at all")
}
