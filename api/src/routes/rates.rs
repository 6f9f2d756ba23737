//! `GET /api/v1/rates`: the latest board of every active bank, or of one.

use axum::extract::State;
use axum::response::Response;
use ratewire_readmodel::store;
use ratewire_readmodel::views::{list_response, rates_element, BankView, RatesVariant, ViewStyle};

use crate::access::auth::Authorized;
use crate::error::{Error, Result};
use crate::state::AppState;
use crate::views::answer::AcceptsGzip;
use crate::views::fallback::rendered;
use crate::views::known_at::{Begun, KnownAtRequest, Rendered};
use crate::views::requests::{self, RatesQuery};
use crate::views::{Shape, ViewRead};

const MISSING: &str = "Bank not found";

/// The latest board of every active bank, or of one.
#[utoipa::path(get, path = requests::RATES, tag = "rates",
    params(RatesQuery),
    responses(
        (status = 200, description = "Success", body = crate::openapi::RatesResponse),
        (status = 404, description = "Bank not found", body = crate::openapi::ErrorBody),
        crate::openapi::CommonErrors,
    ))]
pub async fn rates(
    _: Authorized,
    State(state): State<AppState>,
    ViewRead { query, named }: ViewRead<RatesQuery>,
    gzip: AcceptsGzip,
    known: KnownAtRequest,
) -> Result<Response> {
    let (bank_id, variant) = (query.bank_id, query.variant());
    let style = &state.views.style;
    if let Some(at) = query.as_known_at {
        let (model, pool) = (&named.read, &named.read.pool);
        let mut read = match state.views.known_at(model, pool, known, "", at).await? {
            Begun::Kept(answer) => return Ok(answer),
            Begun::Reading(read) => read,
        };
        let views = match bank_id {
            Some(id) => active(store::bank_view(read.db(), id).await?)?,
            None => store::active_bank_views_in(read.db()).await?,
        };
        let body = list_response(&elements(&views, variant, style));
        return read.answer(Rendered::Json(body), None).await;
    }
    state
        .views
        .serve(named, MISSING, Shape::List(gzip), |read| async move {
            let views = match bank_id {
                Some(id) => match active(store::bank_view(&read.pool, id).await?) {
                    Ok(view) => view,
                    Err(_) => return Ok(Err(MISSING)),
                },
                None => store::active_bank_views(&read.pool).await?,
            };
            Ok(Ok(rendered(elements(&views, variant, style))))
        })
        .await
}

/// The one bank asked for, when it is active (else 404).
fn active(view: Option<BankView>) -> Result<Vec<BankView>> {
    match view.filter(|v| v.bank.active) {
        Some(view) => Ok(vec![view]),
        None => Err(Error::NotFound(MISSING)),
    }
}

/// The list's elements, comma-joined.
fn elements(views: &[BankView], variant: RatesVariant, style: &ViewStyle) -> String {
    views
        .iter()
        .map(|view| rates_element(view, variant, style))
        .collect::<Vec<_>>()
        .join(",")
}
