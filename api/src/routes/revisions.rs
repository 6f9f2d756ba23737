//! `GET /api/v1/revisions`: the public revision log. Every correction and
//! retraction of a board, in the order they became known, with what each
//! changed; filtered by bank and by known-at time, paged like the series
//! (`data.next` and `Link`), as JSON or CSV.

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::Response;
use chrono::{DateTime, Utc};
use ratewire_proto::BankId;
use ratewire_readmodel::revisions::store::{self, Filter};
use ratewire_readmodel::revisions::view::{revisions_csv, revisions_json, RevisionsOf};
use ratewire_readmodel::revisions::RevisionRow;
use ratewire_readmodel::views::timestamp;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, Schema, SchemaFormat, Type};
use uuid::Uuid;

use crate::access::auth::Authorized;
use crate::error::{Error, Result};
use crate::query::{query, Checker, Choice, Query, QueryParam};
use crate::routes::series::Format;
use crate::state::AppState;
use crate::views::answer::with_etag;
use crate::views::body::{csv_body, json_body, next_page_link, wants_csv};

/// The most revisions one answer holds; `next` links to the rest.
pub const PAGE_REVISIONS: usize = 1_000;

/// An RFC 3339 time, to the millisecond (known-at times are kept and shown
/// to the millisecond, and a page's bounds are repeated in its links).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Instant(pub DateTime<Utc>);

impl QueryParam for Instant {
    const REQUIRED: bool = true;

    fn read(check: &mut Checker<'_>, name: &str) -> Option<Self> {
        let Some(text) = check.text(name) else {
            return check.require(name);
        };
        match DateTime::parse_from_rfc3339(text) {
            Ok(at) => {
                let at = at.with_timezone(&Utc);
                Some(Instant(
                    DateTime::from_timestamp_millis(at.timestamp_millis()).unwrap_or(at),
                ))
            }
            Err(_) => {
                check.refuse(
                    name,
                    format!("{name} must be an RFC 3339 time, such as 2026-11-23T08:00:00.000Z"),
                );
                None
            }
        }
    }

    fn schema() -> Schema {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .into()
    }
}

/// A UUID as the API writes them (the parsing takes the other forms too):
/// what a client generated from the document sends is always accepted.
pub const UUID_PATTERN: &str =
    "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";

/// An event's id: a UUID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventId(pub Uuid);

impl EventId {
    /// The id written in `text`, or the 400 naming `name`.
    pub fn parse(name: &str, text: &str) -> Result<Self, String> {
        Uuid::try_parse(text).map(EventId).map_err(|_| {
            format!(
                "{name} must be an event id, a UUID such as 0192f0c4-7d1e-7c3a-9a51-3f1b2c4d5e6f"
            )
        })
    }
}

impl QueryParam for EventId {
    const REQUIRED: bool = true;

    fn read(check: &mut Checker<'_>, name: &str) -> Option<Self> {
        let Some(text) = check.text(name) else {
            return check.require(name);
        };
        match EventId::parse(name, text) {
            Ok(id) => Some(id),
            Err(message) => {
                check.refuse(name, message);
                None
            }
        }
    }

    fn schema() -> Schema {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid)))
            .pattern(Some(UUID_PATTERN))
            .into()
    }
}

query! {
    /// `GET /api/v1/revisions`: the revision log.
    #[derive(Debug, Clone, Copy)]
    pub struct RevisionsQuery {
        /// Only this bank's revisions (a bank never registered: 404)
        pub bank_id as "bankId": Option<BankId>,
        /// Known at or after this RFC 3339 time; default from the start of the log
        pub from as "from": Option<Instant>,
        /// Known before this RFC 3339 time, not before `from`; default to the end of the log
        pub to as "to": Option<Instant>,
        /// json or csv; default by Accept (text/csv), else json
        pub format as "format": Option<Format>,
        /// Start after this revision: the eventId of the last revision of the page before, as `next` links it (one that names no revision: 404)
        pub after as "after": Option<EventId>,
    }
    rules = revisions_rules;
}

/// A range of known-at times does not run backward (an empty one, `from`
/// equal to `to`, lists nothing).
fn revisions_rules(query: &RevisionsQuery, check: &mut Checker<'_>) {
    if let (Some(from), Some(to)) = (query.from, query.to) {
        if from > to {
            check.refuse("from", "from must not be after to");
        }
    }
}

impl RevisionsQuery {
    /// The link to the page after the revision by `last`: every choice as
    /// asked, so that a page is of the same log as the one before.
    fn next_link(&self, last: Uuid) -> String {
        let mut query = Vec::with_capacity(5);
        if let Some(bank) = self.bank_id {
            query.push(format!("bankId={bank}"));
        }
        for (name, at) in [("from", self.from), ("to", self.to)] {
            if let Some(Instant(at)) = at {
                query.push(format!("{name}={}", timestamp(at)));
            }
        }
        if let Some(format) = self.format {
            query.push(format!("format={}", format.name()));
        }
        query.push(format!("after={last}"));
        format!("/api/v1/revisions?{}", query.join("&"))
    }
}

/// Every correction and retraction of a board, in the order they became known.
///
/// Ties go by the revising event's id. `knownAt` is when the revising
/// event's append was acknowledged by the log (the time `asKnownAt` reads
/// by). A correction's `changes` compare the board it replaced with it; a
/// retraction's list every value of the withdrawn board, each with
/// `after` null. JSON, or CSV (`format=csv` or `Accept: text/csv`: a
/// header row, then a row per change). At most 1,000 revisions per
/// answer: `next` (and a `Link` header) gives the rest.
#[utoipa::path(get, path = "/api/v1/revisions", tag = "revisions",
    params(RevisionsQuery),
    responses(
        (status = 200, description = "The revisions, oldest known first (JSON, or CSV with a header row and one row per change)",
            content((crate::openapi::RevisionsResponse = "application/json"), (String = "text/csv"))),
        (status = 404, description = "Bank not found, or Revision not found (`after`)", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn revisions(
    _: Authorized,
    State(state): State<AppState>,
    Query(query): Query<RevisionsQuery>,
    headers: HeaderMap,
) -> Result<Response> {
    let csv = match query.format {
        Some(format) => format == Format::Csv,
        None => wants_csv(&headers),
    };
    let read = state.views.read.current();
    let db = read.history();
    if let Some(bank) = query.bank_id {
        // A deactivated bank's revisions stay readable, as its history does.
        if !store::bank_known(db, bank).await? {
            return Err(Error::NotFound("Bank not found"));
        }
    }
    let after = match query.after {
        Some(EventId(id)) => Some(
            store::cursor(db, id)
                .await?
                .ok_or(Error::NotFound("Revision not found"))?,
        ),
        None => None,
    };
    let filter = Filter {
        bank: query.bank_id,
        from: query.from.map(|Instant(at)| at),
        to: query.to.map(|Instant(at)| at),
        after,
        revised: None,
    };
    let page = store::page(db, filter, PAGE_REVISIONS).await?;
    let next = page.next.map(|cursor| query.next_link(cursor.event_id));
    let revisions: Vec<_> = page
        .revisions
        .into_iter()
        .map(RevisionRow::into_revision)
        .collect();
    let mut response = if csv {
        fingerprinted(revisions_csv(&revisions), csv_body)
    } else {
        let of = RevisionsOf {
            bank: query.bank_id,
            from: filter.from,
            to: filter.to,
            next: next.as_deref(),
        };
        fingerprinted(revisions_json(of, &revisions), json_body)
    };
    if let Some(next) = next {
        if let Some(link) = next_page_link(&next) {
            response.headers_mut().insert(header::LINK, link);
        }
    }
    Ok(response)
}

/// `body` answered by `answer`, with its strong `ETag` made here: a page
/// of the log can be larger than the gate fingerprints answers up to.
pub fn fingerprinted(body: String, answer: fn(String) -> Response) -> Response {
    let etag = ratewire_readmodel::views::digest(&body);
    with_etag(answer(body), Some(&etag))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::FromQuery;

    fn parse(raw: &str) -> std::result::Result<RevisionsQuery, crate::error::FieldErrors> {
        RevisionsQuery::parse(Some(raw))
    }

    #[test]
    fn bad_parameters_are_named_and_times_are_rfc_3339_to_the_millisecond() {
        let query = parse("bankId=7&from=2026-11-23T08:00:00.123456%2B03:00&format=csv").unwrap();
        assert_eq!(
            query.from.map(|Instant(at)| timestamp(at)).as_deref(),
            Some("2026-11-23T05:00:00.123Z")
        );
        let errors = parse("bankId=0&from=2026-11-23&to=later&format=xml&after=42").unwrap_err();
        assert_eq!(
            errors.keys().collect::<Vec<_>>(),
            ["after", "bankId", "format", "from", "to"]
        );
        assert!(errors["from"][0].contains("RFC 3339"), "{errors:?}");
        let errors = parse("from=2026-11-23T08:00:00.001Z&to=2026-11-23T08:00:00Z").unwrap_err();
        assert_eq!(errors["from"], ["from must not be after to"]);
        assert!(
            parse("from=2026-11-23T08:00:00.0009Z&to=2026-11-23T08:00:00.0001Z").is_ok(),
            "the same millisecond: an empty range"
        );
    }

    #[test]
    fn the_next_link_keeps_every_choice_and_starts_after_the_last_revision() {
        let query = parse("to=2026-11-24T00:00:00Z&bankId=3&format=json").unwrap();
        let last = Uuid::from_u128(7);
        assert_eq!(
            query.next_link(last),
            format!(
                "/api/v1/revisions?bankId=3&to=2026-11-24T00:00:00.000Z&format=json&after={last}"
            )
        );
    }
}
