//! `/api/v1/webhooks/{id}/deliveries` and `.../messages/{messageId}/retry`:
//! what a key needs to debug its webhook. The attempts made at its
//! messages (newest first, a page at a time, `next` and `Link` leading
//! to older ones, as the series do), and a message sent again now.

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::Response;
use chrono::{DateTime, Utc};
use ratewire_alerts::registry::deliveries::Attempt;
use ratewire_alerts::registry::webhooks::WEBHOOK_NOT_FOUND;
use ratewire_readmodel::views::timestamp;
use serde::Serialize;
use uuid::Uuid;

use super::owned::{answer, id_of, Owner};
use crate::error::Result;
use crate::query::{query, Query, When};
use crate::state::AppState;
use crate::views::body::next_page_link;

query! {
    /// `GET /api/v1/webhooks/{id}/deliveries`: a page of a webhook's attempts.
    #[derive(Debug, Clone, Copy)]
    pub struct DeliveriesQuery {
        /// Only attempts made before this: an RFC 3339 time, or a date YYYY-MM-DD (its start in the service time zone); default now. Each page's `next` gives the next page's
        pub before as "before": Option<When>,
    }
}

/// A page of attempts, as answered.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Page<'a> {
    webhook_id: Uuid,
    attempts: &'a [Attempt],
    /// The path of the page of older attempts, if any.
    next: Option<String>,
}

/// List the attempts made at a webhook's messages.
///
/// Newest first, a page of about 100 at a time: when older attempts exist,
/// `next` (and the `Link` header) is the path of the next page. Each
/// attempt says which message and which of its attempts it was, when it
/// was made, how long it took, and the answer's status or why it failed.
/// Attempts are kept as long as their messages: once delivered or given
/// up, a message goes when it is a week old.
#[utoipa::path(get, path = "/api/v1/webhooks/{id}/deliveries", tag = "alerts", operation_id = "list_webhook_deliveries",
    params(("id" = String, Path, format = Uuid, description = "The webhook's id"), DeliveriesQuery),
    responses(
        (status = 200, description = "A page of attempts, newest first", body = crate::openapi::DeliveriesResponse,
            headers(("Link" = String, description = "`<next>; rel=\"next\"` when older attempts exist"))),
        (status = 404, description = "Webhook not found", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn deliveries(
    Owner(owner): Owner,
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<DeliveriesQuery>,
) -> Result<Response> {
    let id = id_of(&id, WEBHOOK_NOT_FOUND)?;
    let before = query
        .before
        .map_or_else(Utc::now, |before| before.start(state.timezone));
    let page = state.alerting.attempts(&owner.prefix, id, before).await?;
    let next = page.older.map(|older| next_link(id, older));
    let mut response = answer(
        StatusCode::OK,
        "success",
        Page {
            webhook_id: id,
            attempts: &page.attempts,
            next: next.clone(),
        },
    );
    if let Some(link) = next.and_then(|next| next_page_link(&next)) {
        response.headers_mut().insert(header::LINK, link);
    }
    Ok(response)
}

/// The page of webhook `id`'s attempts before `older`.
fn next_link(id: Uuid, older: DateTime<Utc>) -> String {
    format!(
        "/api/v1/webhooks/{id}/deliveries?before={}",
        timestamp(older)
    )
}

/// Send a message again now.
///
/// For a message waiting for its next attempt, or one given up: it is
/// attempted within a second or so (as one of its attempts: failed, a
/// given-up message is given up again, a waiting one waits as its
/// schedule says), and a disabled webhook is enabled again for it, as for
/// a test. A delivered message is not sent again (409).
#[utoipa::path(post, path = "/api/v1/webhooks/{id}/messages/{messageId}/retry", tag = "alerts", operation_id = "retry_webhook_message",
    params(
        ("id" = String, Path, format = Uuid, description = "The webhook's id"),
        ("messageId" = String, Path, description = "The message's `webhook-id`, as a delivery or an attempt names it"),
    ),
    responses(
        (status = 202, description = "The message is queued for an attempt now", body = crate::openapi::QueuedResponse),
        (status = 404, description = "Webhook not found, or Message not found (none of this webhook's with this id, or one delivered or given up and gone, a week old)", body = crate::openapi::ErrorBody),
        (status = 409, description = "Message already delivered", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn retry(
    Owner(owner): Owner,
    State(state): State<AppState>,
    Path((id, message)): Path<(String, String)>,
) -> Result<Response> {
    let id = id_of(&id, WEBHOOK_NOT_FOUND)?;
    let queued = state.alerting.retry(&owner.prefix, id, &message).await?;
    Ok(answer(StatusCode::ACCEPTED, "accepted", queued))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_page_is_before_the_oldest_attempt_to_the_millisecond() {
        let id = Uuid::nil();
        let at: DateTime<Utc> = "2026-11-28T10:00:00.123Z".parse().unwrap();
        assert_eq!(
            next_link(id, at),
            "/api/v1/webhooks/00000000-0000-0000-0000-000000000000/deliveries?before=2026-11-28T10:00:00.123Z"
        );
    }
}
