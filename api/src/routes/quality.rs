//! `GET /api/v1/banks/{id}/quality` and `GET /api/v1/quality`: how well a
//! bank kept to its schedule, to plausible values and to the spread cap
//! over the last days, with a score (`ratewire_readmodel::quality`).
//! Rendered from Postgres in one snapshot of the model as known at the
//! window's end: now (kept and refreshed behind the requests), or
//! `asKnownAt`.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::response::Response;
use chrono::{DateTime, SubsecRound, Utc};
use ratewire_proto::BankId;
use ratewire_readmodel::quality::report::Report;
use ratewire_readmodel::store::{
    active_banks, begin_snapshot, quality_reports, ReportsAsked, ReportsOf,
};
use ratewire_readmodel::views::quality::{report_json, reports_json};
use tokio::sync::Semaphore;
use utoipa::openapi::path::{Parameter, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};

use crate::access::auth::Authorized;
use crate::error::{Error, Result};
use crate::query::{query, Checker, KnownAt, QueryParam};
use crate::state::AppState;
use crate::views::answer::with_etag;
use crate::views::body::json_body;
use crate::views::fallback::rendered;
use crate::views::known_at::{Begun, KnownAtRequest, Rendered};
use crate::views::read_model::ReadModel;
use crate::views::Stored;
use serde_json::value::RawValue;
use std::sync::Arc;

/// The days a report covers when a request does not say.
pub const DEFAULT_DAYS: u32 = 30;
/// The most days a report covers.
pub const MOST_DAYS: u32 = 90;

/// How many days back a report looks: 1 to [`MOST_DAYS`].
#[derive(Debug, Clone, Copy)]
pub struct Days(pub u32);

impl QueryParam for Days {
    const REQUIRED: bool = false;

    fn read(check: &mut Checker<'_>, name: &str) -> Option<Self> {
        let text = check.text(name)?;
        match text.parse::<u32>() {
            Ok(days)
                if (1..=MOST_DAYS).contains(&days) && text.bytes().all(|b| b.is_ascii_digit()) =>
            {
                Some(Days(days))
            }
            _ => {
                check.refuse(
                    name,
                    format!("must be a whole number of days from 1 to {MOST_DAYS}"),
                );
                None
            }
        }
    }

    fn schema() -> Schema {
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .minimum(Some(1))
            .maximum(Some(MOST_DAYS))
            .default(Some(DEFAULT_DAYS.into()))
            .into()
    }
}

query! {
    /// `GET /api/v1/banks/{id}/quality` and `GET /api/v1/quality`.
    #[derive(Debug, Clone, Copy)]
    pub struct QualityQuery {
        /// How many days back the report looks, from 1 to 90 (30 when not given)
        pub days as "days": Option<Days>,
        /// An RFC 3339 instant, not in the future: the report as it was known
        /// then (to the millisecond, named in the envelope); a final one is
        /// immutable
        pub as_known_at as "asKnownAt": Option<KnownAt>,
    }
}

/// The path's one parameter.
pub struct BankPath;

impl utoipa::IntoParams for BankPath {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let mut id = crate::query::parameter::<BankId>(
            "id",
            &["The bank (a positive integer; one never registered: 404)"],
        );
        id.parameter_in = ParameterIn::Path;
        vec![id]
    }
}

/// One bank's quality report.
///
/// Over the last `days` (to now, or to `asKnownAt`): the publications its
/// schedule expected and those it missed (consecutive missed slots as one
/// span, the latest 1,000 listed), its boards, corrections, retractions and
/// outlying values, the spans a spread was over the cap, and a score from
/// 0 to 100 with its components (docs/api.md, "Quality").
#[utoipa::path(get, path = "/api/v1/banks/{id}/quality", tag = "quality",
    params(BankPath, QualityQuery),
    responses(
        (status = 200, description = "success", body = crate::openapi::QualityResponse),
        (status = 404, description = "Bank not found", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn bank_quality(
    _: Authorized,
    State(state): State<AppState>,
    path: std::result::Result<Path<String>, PathRejection>,
    crate::query::Query(query): crate::query::Query<QualityQuery>,
    known: KnownAtRequest,
) -> Result<Response> {
    let text = path.map(|Path(text)| text).unwrap_or_default();
    let bank = text
        .parse::<i64>()
        .ok()
        .filter(|_| text.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|id| BankId::new(id).ok())
        .ok_or_else(|| Error::validation("id", "must be a positive integer"))?;
    answer(&state, query, known, Some(bank), one_report).await
}

/// A bank's report as answered: 404 when the bank was not known then.
fn one_report(reports: Vec<Report>, state: &AppState) -> Result<String> {
    match reports.first() {
        Some(report) => Ok(report_json(report, state.spread_cap_percent)),
        None => Err(Error::NotFound("Bank not found")),
    }
}

/// Every active bank's quality report, worst score first.
///
/// The same reports as /api/v1/banks/{id}/quality gives one by one, for
/// every bank active at the window's end, lowest score first (ties by bank
/// id).
#[utoipa::path(get, path = "/api/v1/quality", tag = "quality",
    params(QualityQuery),
    responses(
        (status = 200, description = "success", body = crate::openapi::QualityListResponse),
        crate::openapi::CommonErrors,
    ))]
pub async fn quality(
    _: Authorized,
    State(state): State<AppState>,
    crate::query::Query(query): crate::query::Query<QualityQuery>,
    known: KnownAtRequest,
) -> Result<Response> {
    let render = |reports: Vec<Report>, state: &AppState| {
        Ok(reports_json(&reports, state.spread_cap_percent))
    };
    answer(&state, query, known, None, render).await
}

/// The reports of `bank` (every active bank when `None`) as `query` asks,
/// rendered by `render`: live in a snapshot of the present, or as known at
/// an instant.
///
/// A live report is kept and refreshed behind the requests
/// (`Views::refreshed`): a request is answered with the last render, whose
/// window ends at the whole second it was made, and waits only when there
/// is none; so a report costs Postgres at most one render a second however
/// often it is asked. At most [`RENDERS_AT_ONCE`] reports render at once
/// in one process, so that clients asking for many different ones slow
/// the quality reports only, not the other reads.
async fn answer(
    state: &AppState,
    query: QualityQuery,
    known: KnownAtRequest,
    bank: Option<BankId>,
    render: fn(Vec<Report>, &AppState) -> Result<String>,
) -> Result<Response> {
    let days = query.days.map_or(DEFAULT_DAYS, |Days(d)| d);
    let read = state.views.read.current();
    let pool = read.history();
    if let Some(at) = query.as_known_at {
        let mut begun = match state.views.known_at(&read, pool, known, "", at).await? {
            Begun::Kept(answer) => return Ok(answer),
            Begun::Reading(begun) => begun,
        };
        let _permit = RENDERS
            .acquire()
            .await
            .map_err(|_| Error::Startup("closed".into()))?;
        let now = begun.now();
        let reports = reports(state, begun.db(), pool, bank, days, now).await?;
        return begun
            .answer(Rendered::Json(render(reports, state)?), None)
            .await;
    }
    let stored = match bank {
        Some(bank) => live_report(state, &read, bank, days).await?,
        None => live_list(state, &read, days).await?,
    };
    Ok(with_etag(json_body(stored.body), stored.etag.as_deref()))
}

/// A bank's live report, kept and refreshed (`Views::refreshed`).
async fn live_report(
    state: &AppState,
    read: &Arc<ReadModel>,
    bank: BankId,
    days: u32,
) -> Result<Stored> {
    let key = format!(
        "quality|{}|{}|{}|{days}",
        read.generation.schema,
        read.generation.identity,
        bank.get(),
    );
    let (state_for_render, pool) = (state.clone(), read.history().clone());
    state
        .views
        .refreshed
        .get(&key, move || {
            let (state, pool) = (state_for_render.clone(), pool.clone());
            async move {
                let _permit = RENDERS
                    .acquire()
                    .await
                    .map_err(|_| Error::Startup("closed".into()))?;
                let now = Utc::now().trunc_subsecs(0);
                let mut tx = begin_snapshot(&pool).await?;
                let reports = reports(&state, &mut tx, &pool, Some(bank), days, now).await?;
                tx.commit().await?;
                Ok(match one_report(reports, &state) {
                    Ok(body) => Ok(rendered(body)),
                    Err(Error::NotFound(message)) => Err(message),
                    Err(e) => return Err(e),
                })
            }
        })
        .await
}

/// Every active bank's live report, worst score first (ties by bank id),
/// put together from the banks' own kept reports, each refreshed on its
/// own: no render reads every bank's days at once, which on two cores
/// held up the other requests while it ran.
async fn live_list(state: &AppState, read: &Arc<ReadModel>, days: u32) -> Result<Stored> {
    let key = format!(
        "quality|{}|{}|all|{days}",
        read.generation.schema, read.generation.identity,
    );
    let (state_for_render, read) = (state.clone(), Arc::clone(read));
    state
        .views
        .refreshed
        .get(&key, move || {
            let (state, read) = (state_for_render.clone(), Arc::clone(&read));
            async move {
                let banks = active_banks(read.history()).await?;
                let reports = futures_util::future::join_all(
                    banks
                        .iter()
                        .map(|bank| live_report(&state, &read, *bank, days)),
                )
                .await;
                let mut ranked = Vec::with_capacity(reports.len());
                for report in reports {
                    match report {
                        Ok(stored) => ranked.extend(Ranked::of(&stored.body)),
                        // Gone since the list of banks was read.
                        Err(Error::NotFound(_)) => {}
                        Err(e) => return Err(e),
                    }
                }
                ranked.sort_by_key(|r| (r.score, r.bank));
                let data: Vec<&str> = ranked.iter().map(|r| r.data.get()).collect();
                Ok(Ok(rendered(format!(
                    r#"{{"message":"success","status":200,"data":[{}]}}"#,
                    data.join(",")
                ))))
            }
        })
        .await
}

/// A kept report's `data`, with what ranks it.
struct Ranked {
    score: u8,
    bank: i64,
    data: Box<RawValue>,
}

impl Ranked {
    /// `None` (logged) for a body this process did not render as a
    /// report, which cannot be.
    fn of(body: &[u8]) -> Option<Self> {
        #[derive(serde::Deserialize)]
        struct Envelope {
            data: Box<RawValue>,
        }
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Rank {
            bank_id: i64,
            score: u8,
        }
        let read = |e: serde_json::Error| tracing::error!(error = %e, "a kept quality report");
        let Envelope { data } = serde_json::from_slice(body).map_err(read).ok()?;
        let rank: Rank = serde_json::from_str(data.get()).map_err(read).ok()?;
        Some(Self {
            score: rank.score,
            bank: rank.bank_id,
            data,
        })
    }
}

/// The most reports rendered at once in one process.
pub const RENDERS_AT_ONCE: usize = 2;

static RENDERS: Semaphore = Semaphore::const_new(RENDERS_AT_ONCE);

async fn reports(
    state: &AppState,
    db: &mut sqlx::PgConnection,
    pool: &sqlx::PgPool,
    bank: Option<BankId>,
    days: u32,
    at: DateTime<Utc>,
) -> Result<Vec<Report>> {
    let asked = ReportsAsked {
        days,
        at,
        zone: state.timezone,
        spread_cap: state.spread_cap_percent,
        outlier_percent: state.views.style.outliers.percent,
    };
    let of = bank.map_or(ReportsOf::Active, ReportsOf::Bank);
    Ok(quality_reports(db, pool, of, asked, &state.views.judged_boards).await?)
}
