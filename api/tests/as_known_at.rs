//! Reads as known at an instant (`asKnownAt`) called in process
//! (`tower::ServiceExt::oneshot`) against a read model of their own, its
//! bitemporal rows written here by hand as migration 0008 lays them out:
//! each read answers what was known then (a correction made later not
//! applied, a bank registered later absent, one deactivated later
//! present), with the instant as the render's now; final answers are
//! immutable and revalidate; bad instants are refused.

mod common;

use axum::http::{header, HeaderMap, StatusCode};
use serde_json::{json, Value};

use common::InProcess;

/// The public router on a read model of its own, with an enterprise key;
/// the story's rows written by hand.
type Api = InProcess;

/// The story's instants: minutes after 2026-11-20T08:00Z.
fn at(minutes: i64) -> String {
    let base: chrono::DateTime<chrono::Utc> = "2026-11-20T08:00:00Z".parse().unwrap();
    ratewire_readmodel::views::timestamp(base + chrono::Duration::minutes(minutes))
}

impl Api {
    async fn new() -> Self {
        let api = Self::start("as_known_at_api", Some("enterprise")).await;
        api.story().await;
        api
    }

    /// Bank 1 (known from minute -60) and its board of 08:01 (USD cash
    /// 150/155) known at minute 10, corrected at 30 (151/156); bank 2
    /// registered at 20, its board of 08:21 (160/165) known at 22,
    /// deactivated at 40; the National Bank's day of 2026-11-20 (USD
    /// weighted average 150.5) known at 5, published again at 35 (151).
    /// The one partition's fold has folded an event known at minute 50.
    async fn story(&self) {
        let statements = [
            format!(
                "INSERT INTO bank_versions (id, code, name, image_url, active, registered_at,
                                            updated_at, known_from, known_to) VALUES
                 (1, 'B1', 'Bank 1', '', true, '{r}', '{r}', '{r}', NULL),
                 (2, 'B2', 'Bank 2', '', true, '{m20}', '{m20}', '{m20}', '{m40}'),
                 (2, 'B2', 'Bank 2', '', false, '{m20}', '{m40}', '{m40}', NULL)",
                r = at(-60),
                m20 = at(20),
                m40 = at(40)
            ),
            format!(
                "INSERT INTO board_versions (bank_id, as_of, event_id, currencies, known_from,
                                             known_to, cash_buying, cash_selling,
                                             transactional_buying, transactional_selling) VALUES
                 (1, '{b1}', gen_random_uuid(), '{{USD}}', '{m10}', '{m30}', '{{150}}', '{{155}}',
                  '{{NULL}}', '{{NULL}}'),
                 (1, '{b1}', gen_random_uuid(), '{{USD}}', '{m30}', NULL, '{{151}}', '{{156}}',
                  '{{NULL}}', '{{NULL}}'),
                 (2, '{b2}', gen_random_uuid(), '{{USD}}', '{m22}', NULL, '{{160}}', '{{165}}',
                  '{{NULL}}', '{{NULL}}')",
                b1 = at(1),
                b2 = at(21),
                m10 = at(10),
                m22 = at(22),
                m30 = at(30)
            ),
            format!(
                "INSERT INTO bank_latest_versions (bank_id, as_of, known_from, known_to) VALUES
                 (1, '{b1}', '{m10}', NULL),
                 (2, '{b2}', '{m22}', NULL)",
                b1 = at(1),
                b2 = at(21),
                m10 = at(10),
                m22 = at(22)
            ),
            format!(
                "INSERT INTO currencies_known (code, name, first_quoted_at, known_from)
                 VALUES ('USD', 'US Dollar', '{b1}', '{m10}')",
                b1 = at(1),
                m10 = at(10)
            ),
            format!(
                "INSERT INTO reference_board_versions (source, date, event_id, published_at,
                                                       known_from, known_to) VALUES
                 ('NBE', '2026-11-20', gen_random_uuid(), '{m5}', '{m5}', '{m35}'),
                 ('NBE', '2026-11-20', gen_random_uuid(), '{m35}', '{m35}', NULL)",
                m5 = at(5),
                m35 = at(35)
            ),
            format!(
                "INSERT INTO reference_rate_versions (source, date, currency, buying, selling,
                                                      weighted_average, known_from, known_to)
                 VALUES
                 ('NBE', '2026-11-20', 'USD', 149, 152, 150.5, '{m5}', '{m35}'),
                 ('NBE', '2026-11-20', 'USD', 149, 153, 151, '{m35}', NULL)",
                m5 = at(5),
                m35 = at(35)
            ),
            format!(
                "INSERT INTO consumer_offsets (topic, partition, next_offset, known_at)
                 VALUES ('boards', 0, 7, '{m50}')",
                m50 = at(50)
            ),
        ];
        for sql in statements {
            sqlx::query(&sql).execute(&self.read).await.unwrap();
        }
    }

    async fn get(&self, uri: &str, headers: &[(&str, &str)]) -> (StatusCode, HeaderMap, String) {
        self.call(uri, headers).await
    }

    /// `path` as known at `minutes` into the story: its status and body.
    async fn known_at(&self, path: &str, minutes: i64) -> (StatusCode, Value) {
        let joiner = if path.contains('?') { '&' } else { '?' };
        let uri = format!("{path}{joiner}asKnownAt={}", at(minutes));
        let (status, _, body) = self.get(&uri, &[]).await;
        let body: Value = serde_json::from_str(&body).unwrap_or(Value::String(body));
        if status == StatusCode::OK {
            assert_eq!(body["asKnownAt"], json!(at(minutes)), "{uri}: {body}");
        }
        (status, body)
    }
}

/// Each bank's USD cash buying rate on a /rates answer.
fn buying(rates: &Value) -> Vec<(i64, String)> {
    rates["data"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|element| element["data"].as_array().unwrap().clone())
        .map(|bank| {
            let rate = &bank["exchangeRates"][0]["cashBuying"];
            (bank["id"].as_i64().unwrap(), rate.to_string())
        })
        .collect()
}

#[tokio::test]
async fn every_read_answers_what_was_known_at_the_instant() {
    let api = Api::new().await;
    let api = &api;
    let rates = |minutes| async move { api.known_at("/api/v1/rates", minutes).await };

    let (status, before) = rates(-120).await;
    assert_eq!((status, &before["data"]), (StatusCode::OK, &json!([])));
    assert_eq!(buying(&rates(15).await.1), [(1, "150".to_owned())]);
    assert_eq!(
        buying(&rates(25).await.1),
        [(1, "150".to_owned()), (2, "160".to_owned())],
        "bank 2 registered, the correction not made yet"
    );
    assert_eq!(
        buying(&rates(35).await.1),
        [(1, "151".to_owned()), (2, "160".to_owned())],
        "corrected"
    );
    assert_eq!(
        buying(&rates(45).await.1),
        [(1, "151".to_owned())],
        "deactivated"
    );
    let (status, body) = api.known_at("/api/v1/rates?bankId=2", 15).await;
    assert_eq!(
        (status, &body["message"]),
        (StatusCode::NOT_FOUND, &json!("Bank not found")),
        "not registered yet"
    );

    let (_, banks) = api.known_at("/api/v1/banks", 25).await;
    let ids: Vec<&str> = banks["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["1", "2"]);

    let (_, currencies) = api.known_at("/api/v1/currencies", 5).await;
    assert_eq!(currencies["data"], json!([]), "no board known yet");
    let (_, currencies) = api.known_at("/api/v1/currencies", 25).await;
    assert_eq!(currencies["data"][0]["id"], "USD");

    let history = "/api/v1/history?bankId=1&date=2026-11-20";
    let (_, record) = api.known_at(history, 25).await;
    assert_eq!(record["data"]["cashBuying"], json!(150), "{record}");
    let (_, record) = api.known_at(history, 35).await;
    assert_eq!(record["data"]["cashBuying"], json!(151), "{record}");
    let (status, _) = api.known_at(history, 5).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "no board known yet");

    let (_, best) = api
        .known_at("/api/v1/rates/best-rates?currencyCode=USD", 25)
        .await;
    assert_eq!(best["data"]["cashBuying"]["price"], json!(160), "{best}");

    // Ages are as of the instant: bank 1's board of 08:01, at 08:25.
    let (_, converted) = api
        .known_at("/api/v1/convert?from=USD&to=ETB&amount=100", 25)
        .await;
    let results = converted["data"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{converted}");
    let bank_1 = results.iter().find(|r| r["bank"]["id"] == 1).unwrap();
    assert_eq!(bank_1["amount"], json!(15000), "{converted}");
    assert_eq!(bank_1["ageSeconds"], json!(24 * 60), "{converted}");

    let (_, spreads) = api
        .known_at("/api/v1/rates/spreads?currencyCode=USD", 25)
        .await;
    assert_eq!(
        spreads["data"]["reference"]["weightedAverage"],
        json!(150.5),
        "{spreads}"
    );
    let (_, spreads) = api
        .known_at("/api/v1/rates/spreads?currencyCode=USD", 36)
        .await;
    assert_eq!(
        spreads["data"]["reference"]["weightedAverage"],
        json!(151),
        "{spreads}"
    );
    let (status, _) = api.known_at("/api/v1/reference-rates", 1).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "no reference day known yet");
    let (_, reference) = api
        .known_at("/api/v1/reference-rates?currencyCode=USD", 25)
        .await;
    assert_eq!(reference["data"]["weightedAverage"], json!(150.5));
    let (_, series) = api
        .known_at("/api/v1/reference-rates/series?currencyCode=USD", 36)
        .await;
    let points = series["data"]["points"].as_array().unwrap();
    assert_eq!(points.len(), 1, "{series}");
    assert_eq!(points[0]["weightedAverage"], json!(151), "{series}");

    let (_, series) = api
        .known_at(
            "/api/v1/rates/series?bankId=1&currencyCode=USD&interval=raw&from=2026-11-20",
            25,
        )
        .await;
    let points = series["data"]["points"].as_array().unwrap();
    assert_eq!(points.len(), 1, "{series}");
    assert_eq!(points[0]["cashBuying"], json!(150), "{series}");

    // The best across banks, in the hour in progress then: bank 2's board
    // once it is known.
    let best = "/api/v1/rates/series?currencyCode=USD&interval=hour&from=2026-11-20T08:00:00Z";
    let best_at = |minutes| async move {
        let (_, series) = api.known_at(best, minutes).await;
        let points = series["data"]["points"].as_array().unwrap().clone();
        assert_eq!(points.len(), 1, "{series}");
        (points[0]["bankId"].clone(), points[0]["value"].clone())
    };
    assert_eq!(best_at(21).await, (json!(1), json!(150)));
    assert_eq!(best_at(25).await, (json!(2), json!(160)));
}

#[tokio::test]
async fn a_final_answer_revalidates_and_one_not_final_is_not_immutable() {
    let api = Api::new().await;
    // Final: the fold has folded an event known at minute 50.
    let uri = format!("/api/v1/rates?asKnownAt={}", at(25));
    let (status, headers, body) = api.get(&uri, &[]).await;
    assert_eq!(status, StatusCode::OK);
    let tag = headers[header::ETAG].to_str().unwrap().to_owned();
    assert!(!tag.starts_with("W/"), "a strong tag: {tag}");
    let (status, again, body_again) = api.get(&uri, &[]).await;
    assert_eq!(
        (status, &again[header::ETAG], &body_again),
        (StatusCode::OK, &headers[header::ETAG], &body)
    );
    let (status, revalidated, empty) = api.get(&uri, &[("if-none-match", tag.as_str())]).await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);
    assert!(empty.is_empty());
    assert_eq!(
        revalidated[header::CACHE_CONTROL],
        "public, max-age=31536000, immutable"
    );

    // Not final: the fold has not passed minute 55.
    let uri = format!("/api/v1/rates?asKnownAt={}", at(55));
    let (status, headers, _) = api.get(&uri, &[]).await;
    assert_eq!(status, StatusCode::OK);
    let cache = headers[header::CACHE_CONTROL].to_str().unwrap();
    assert!(!cache.contains("immutable"), "{cache}");
}

#[tokio::test]
async fn bad_instants_are_refused_naming_as_known_at() {
    let api = Api::new().await;
    let future =
        ratewire_readmodel::views::timestamp(chrono::Utc::now() + chrono::Duration::hours(1));
    for path in [
        "/api/v1/rates",
        "/api/v1/banks",
        "/api/v1/currencies",
        "/api/v1/rates/best-rates?currencyCode=USD",
        "/api/v1/history?bankId=1&date=2026-11-20",
        "/api/v1/rates/series?currencyCode=USD",
        "/api/v1/convert?from=USD&to=ETB&amount=1",
        "/api/v1/rates/spreads?currencyCode=USD",
        "/api/v1/reference-rates",
        "/api/v1/reference-rates/series?currencyCode=USD",
    ] {
        for bad in ["yesterday", "2026-11-20", future.as_str()] {
            let joiner = if path.contains('?') { '&' } else { '?' };
            let uri = format!("{path}{joiner}asKnownAt={bad}");
            let (status, _, body) = api.get(&uri, &[]).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}: {body}");
            let body: Value = serde_json::from_str(&body).unwrap();
            assert!(body["errors"]["asKnownAt"].is_array(), "{uri}: {body}");
        }
    }
    // The first instant RFC 3339 can name: nothing was known.
    let (status, _, body) = api
        .get("/api/v1/rates?asKnownAt=0000-01-01T00:00:00Z", &[])
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["data"], json!([]));
    assert_eq!(body["asKnownAt"], "0000-01-01T00:00:00.000Z");
    // Without the parameter: the present, with no instant in the envelope.
    let (status, _, body) = api.get("/api/v1/rates", &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert!(body.get("asKnownAt").is_none(), "{body}");
    assert_eq!(buying(&body), [(1, "151".to_owned())]);
}

#[tokio::test]
async fn the_document_describes_as_known_at_on_every_read_of_rate_data() {
    let api = Api::new().await;
    let (status, _, body) = api.get("/api/v1/openapi.json", &[]).await;
    assert_eq!(status, StatusCode::OK);
    let document: Value = serde_json::from_str(&body).unwrap();
    for path in [
        "/api/v1/banks",
        "/api/v1/currencies",
        "/api/v1/rates",
        "/api/v1/rates/best-rates",
        "/api/v1/history",
        "/api/v1/rates/series",
        "/api/v1/convert",
        "/api/v1/rates/spreads",
        "/api/v1/reference-rates",
        "/api/v1/reference-rates/series",
    ] {
        let get = &document["paths"][path]["get"];
        let parameter = get["parameters"]
            .as_array()
            .and_then(|all| all.iter().find(|p| p["name"] == "asKnownAt"))
            .unwrap_or_else(|| panic!("{path} describes asKnownAt"));
        assert_eq!(parameter["in"], "query", "{path}");
        assert_eq!(parameter["required"], false, "{path}");
        assert_eq!(parameter["schema"]["format"], "date-time", "{path}");
        assert!(get["responses"]["400"].is_object(), "{path}: its 400");
    }
}

#[tokio::test]
async fn a_final_answer_is_served_immutable() {
    let api = Api::new().await;
    let uri = format!("/api/v1/rates?asKnownAt={}", at(25));
    let (status, headers, _) = api.get(&uri, &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        headers[header::CACHE_CONTROL],
        "public, max-age=31536000, immutable"
    );
}
