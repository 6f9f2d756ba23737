//! The reference poller against a local server that serves the National
//! Bank's format badly before it serves it well: a 5xx, a timeout, a body
//! cut short, an error page and another day's answer are fetched again,
//! never posted; the good day is posted once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use chrono::{NaiveDate, Utc};
use ratewire_tools::feed::client::IngestClient;
use ratewire_tools::feed::reference::{poll, weekdays_until, PollSettings};
use tokio_util::sync::CancellationToken;

fn day_body(date: NaiveDate) -> String {
    format!(
        r#"{{"success":true,"message":"OK","status":200,"data":[{{"id":"01kr","currency_id":"01hc","buying":"157.227","selling":"158.7993","date":"{date}","weighted_average":"157.227","currency":{{"id":"01hc","name":"US DOLLAR","code":"USD"}}}}]}}"#
    )
}

#[derive(Default)]
struct Seen {
    fetches: usize,
    posts: Vec<String>,
}

type Shared = Arc<Mutex<Seen>>;

async fn source(
    State(seen): State<Shared>,
    Query(query): Query<Vec<(String, String)>>,
) -> Response {
    let date: NaiveDate = query
        .iter()
        .find(|(k, _)| k == "date")
        .and_then(|(_, v)| v.parse().ok())
        .expect("the poller asks for a date");
    let n = {
        let mut seen = seen.lock().unwrap();
        seen.fetches += 1;
        seen.fetches
    };
    match n {
        1 => (StatusCode::BAD_GATEWAY, "upstream down").into_response(),
        2 => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            day_body(date).into_response()
        }
        3 => {
            let body = day_body(date);
            body[..body.len() / 2].to_owned().into_response()
        }
        4 => "<html>maintenance</html>".into_response(),
        5 => day_body(date.pred_opt().unwrap()).into_response(),
        _ => day_body(date).into_response(),
    }
}

async fn ingest(State(seen): State<Shared>, body: String) -> Response {
    seen.lock().unwrap().posts.push(body);
    (
        StatusCode::ACCEPTED,
        axum::Json(serde_json::json!({"status": 202, "message": "Accepted", "date": "d", "outcome": "published", "currencies": 1})),
    )
        .into_response()
}

async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{address}")
}

#[tokio::test]
async fn bad_answers_are_fetched_again_and_never_posted() {
    let seen = Shared::default();
    let source_url = serve(
        Router::new()
            .route("/api/filter-exchange-rates", get(source))
            .with_state(seen.clone()),
    )
    .await;
    let ingest_url = serve(
        Router::new()
            .route("/v1/admin/reference-rates", post(ingest))
            .with_state(seen.clone()),
    )
    .await;
    let client = IngestClient::new(&ingest_url, &ingest_url, Some("token")).unwrap();
    let settings = PollSettings {
        url: format!("{source_url}/api/filter-exchange-rates"),
        every: Duration::from_millis(100),
        days_back: 0,
        timeout: Duration::from_millis(500),
        attempts: 2,
        once: false,
    };
    let shutdown = CancellationToken::new();
    let poller = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move { poll(&client, settings, shutdown).await })
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while seen.lock().unwrap().posts.is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // More rounds: the day imported is not fetched again.
    tokio::time::sleep(Duration::from_millis(500)).await;
    shutdown.cancel();
    poller.await.unwrap().unwrap();

    let seen = seen.lock().unwrap();
    let today = ratewire_proto::reference::reference_day(Utc::now());
    let day = *weekdays_until(today, 0).last().unwrap();
    assert_eq!(
        seen.posts,
        [day_body(day)],
        "only the good answer is posted"
    );
    assert_eq!(seen.fetches, 6, "five bad answers, then the good one, once");
}
