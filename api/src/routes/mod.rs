//! The API's HTTP surface: one module per resource, merged here into the
//! two listeners' routers ([`public`] and [`operator`]) with the gate
//! (`access::gate`), the readiness guard and JSON fallbacks for unknown
//! paths and methods (`ratewire_service::serve` adds request ids, tracing,
//! request metrics, the request timeout and the listener limits).

pub mod admin;
pub mod alerts;
pub mod banks;
pub mod best_rates;
pub mod boards;
pub mod convert;
pub mod currencies;
pub mod deliveries;
pub mod health;
pub mod history;
pub mod me;
pub mod owned;
pub mod quality;
pub mod rates;
pub mod reference_rates;
pub mod revisions;
pub mod series;
pub mod signing_keys;
pub mod spreads;
pub mod stream;
pub mod webhooks;

use axum::extract::DefaultBodyLimit;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::sync::{Arc, LazyLock};
use tower::ServiceBuilder;

use ratewire_service::metrics::render as render_metrics;
use ratewire_service::serve::Measure;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::access::gate::Gate;
use crate::config::BODY_LIMIT;
use crate::cors::Cors;
use crate::error::{Error, STILL_STARTING};
use crate::state::AppState;
use crate::views::body::json_body;

/// Every public api-v1 route, declared once: the router and the OpenAPI
/// document both come from this list (each handler's parameters from its
/// query struct: see [`crate::query`]), and the routes answered from
/// stored views are those of [`crate::views::requests::VIEW_ROUTES`].
pub fn api_v1() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(crate::openapi::ApiDoc::openapi())
        .routes(routes!(banks::banks))
        .routes(routes!(currencies::currencies))
        .routes(routes!(rates::rates))
        .routes(routes!(best_rates::best_rates))
        .routes(routes!(history::history))
        .routes(routes!(series::series))
        .routes(routes!(convert::convert))
        .routes(routes!(spreads::spreads))
        .routes(routes!(reference_rates::reference_rates))
        .routes(routes!(reference_rates::reference_series))
        .routes(routes!(revisions::revisions))
        .routes(routes!(boards::board))
        .routes(routes!(boards::board_at))
        .routes(routes!(quality::bank_quality))
        .routes(routes!(quality::quality))
        .routes(routes!(stream::stream))
        .routes(routes!(me::me))
        .routes(routes!(me::usage))
        .routes(routes!(signing_keys::signing_keys))
        .merge(
            OpenApiRouter::new()
                .routes(routes!(webhooks::create, webhooks::list))
                .routes(routes!(webhooks::one, webhooks::delete))
                .routes(routes!(webhooks::test))
                .routes(routes!(webhooks::rotate_secret))
                .routes(routes!(deliveries::deliveries))
                .routes(routes!(deliveries::retry))
                .routes(routes!(alerts::create, alerts::list))
                .routes(routes!(alerts::delete))
                // The only bodies the public listener reads: small ones.
                .layer(DefaultBodyLimit::max(BODY_LIMIT)),
        )
}

/// Every route of the API's operator document, declared once.
pub fn operator_v1() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(crate::openapi::OperatorDoc::openapi())
        .routes(routes!(admin::create, admin::list))
        .routes(routes!(admin::revoke))
}

/// The public OpenAPI document as served, rendered once.
pub static DOCUMENT: LazyLock<String> =
    LazyLock::new(|| crate::openapi::public_document(api_v1().split_for_parts().1));

/// The public listener: the read API behind the gate, its OpenAPI
/// document, the dashboard and reference pages, and the probes. Nothing
/// operators use is reachable here.
///
/// Each route of the API has one layer of its own: the listener's
/// [`Measure`] (metrics, timeout), CORS and the gate, composed, since every
/// layer a route is given boxes it once more, and each box is cloned on
/// every request; the listener adds the rest once for all routes
/// (`ratewire_service::serve`).
pub fn public(state: AppState) -> Router {
    let measure = Measure::new(&state.limits);
    let cors = Cors::new(&state.cors_origins);
    // Everything a consumer calls passes the gate (readiness, keys,
    // limits, views, conditional GETs, headers), unknown paths included;
    // the probes and the document do not.
    let gate = Gate {
        access: Arc::clone(&state.access),
        views: Arc::clone(&state.views),
        readiness: state.readiness.clone(),
    };
    let (api, _) = api_v1().split_for_parts();
    let api = api
        // Served as /api/v1/me and /api/v1/usage are (and described so).
        .route("/me", get(me::me))
        .route("/usage", get(me::usage))
        .fallback(|| async { Error::NotFound("Not Found") })
        .method_not_allowed_fallback(|| async { Error::MethodNotAllowed })
        // A browser's preflight is answered before the gate.
        .layer(
            ServiceBuilder::new()
                .layer(measure)
                .layer(cors)
                .layer(crate::signing::Signing {
                    keys: Arc::clone(&state.signing),
                })
                .layer(gate),
        );
    let web = Arc::new(crate::web::Web::new(
        state.timezone.name(),
        state.access.anonymous_access,
    ));
    let pages = Router::new().merge(crate::web::router(web)).route(
        "/api/v1/openapi.json",
        get(|| async { json_body(DOCUMENT.clone()) }),
    );
    let open = Router::new()
        .merge(state.readiness.guard(pages, still_starting))
        .merge(health::router())
        .layer(
            ServiceBuilder::new()
                .layer(measure)
                .layer(crate::cors::layer(&state.cors_origins)),
        );
    open.merge(api).with_state(state)
}

/// The operator listener: key management, metrics and the probes.
pub fn operator(state: AppState) -> Router {
    let (admin, document) = operator_v1().split_for_parts();
    let document = Arc::new(crate::openapi::operator_document(
        document,
        &state.access.plans,
    ));
    let routes = Router::new()
        .merge(admin)
        .merge(health::router())
        .route(
            "/v1/openapi.json",
            get(move || async move { json_body(String::clone(&document)) }),
        )
        .route("/metrics", get(render_metrics))
        .fallback(|| async { Error::NotFound("Not Found") })
        .method_not_allowed_fallback(|| async { Error::MethodNotAllowed })
        .layer(DefaultBodyLimit::max(BODY_LIMIT));
    state
        .readiness
        .guard(routes, still_starting)
        .with_state(state)
}

/// The answer while the process is still preparing Postgres (e.g. it
/// started while Postgres was down): 503, not a hanging connection.
fn still_starting() -> Response {
    Error::Starting(STILL_STARTING).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::requests::VIEW_ROUTES;

    #[test]
    fn every_view_route_is_a_declared_get_route() {
        let (_, document) = api_v1().split_for_parts();
        for route in &VIEW_ROUTES {
            let item = document.paths.paths.get(route.path);
            assert!(
                item.is_some_and(|item| item.get.is_some()),
                "{} is served from a view but is no declared GET route",
                route.path
            );
        }
    }
}
