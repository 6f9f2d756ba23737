//! Final answers: immutable, with a strong tag that revalidates.

use anyhow::Context;
use chrono::Utc;
use ratewire_e2e::known_at::{as_known_at, instant, without_volatile, Moment};
use ratewire_e2e::{eventually, Stack, VISIBLE_WITHIN};

/// An answer as known at an instant every partition's fold has passed is
/// final: immutable for a year, with a strong tag that revalidates; one as
/// known at this very moment is not final yet.
pub(crate) async fn final_answers_are_immutable_and_revalidate(
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
    // Asked again whole: the same bytes under the same tag, still final
    // (kept, not rendered again), and what was answered live then.
    let first = answer.text().await?;
    let whole = get(None).await?;
    assert_eq!(header(&whole, "etag").as_ref(), Some(&tag));
    assert_eq!(
        header(&whole, "cache-control").as_deref(),
        Some("public, max-age=31536000, immutable")
    );
    assert_eq!(whole.text().await?, first);
    assert_eq!(without_volatile(&first), moment.answers[0].body);

    // As known at now: the fold has not passed it. Its settled time is a
    // time it saw itself caught up less the skew allowance (a second), so
    // an answer that took less than that cannot be final yet.
    let started = std::time::Instant::now();
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
    if started.elapsed() < std::time::Duration::from_millis(900) {
        assert!(
            !cache.contains("immutable"),
            "as known at {now}, just now: {cache}"
        );
    }
    Ok(())
}
