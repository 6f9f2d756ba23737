//! `/api/v1/revisions` and `/api/v1/boards/{eventId}` called in process
//! (`tower::ServiceExt::oneshot`) against a read model of their own, its
//! bitemporal rows written here by hand as migration 0008 lays them out:
//! pages and their links, CSV, the 400s and 404s, and conditional GETs.

mod common;

use axum::http::{header, HeaderMap, StatusCode};
use serde_json::{json, Value};

use common::InProcess;

/// The public router on a read model of its own, with an enterprise key;
/// rows written by hand.
type Api = InProcess;

impl Api {
    async fn new() -> Self {
        Self::start("revisions_api", Some("enterprise")).await
    }

    async fn get(&self, uri: &str, headers: &[(&str, &str)]) -> (StatusCode, HeaderMap, String) {
        self.call(uri, headers).await
    }

    async fn json(&self, uri: &str) -> (StatusCode, HeaderMap, Value) {
        let (status, headers, body) = self.get(uri, &[]).await;
        let body = serde_json::from_str(&body).unwrap_or(Value::String(body));
        (status, headers, body)
    }

    /// Bank 1, and `n` of its boards each corrected once: board i
    /// (event `…0000-i`, USD cash 100+i / 103+i) known at 2026-11-20 plus
    /// i seconds, its correction (event `…0001-i`, 0.5 more each, reason
    /// "typo") at 2026-11-21 plus i seconds.
    async fn corrections(&self, n: i32) {
        self.corrections_of(n, &["USD"]).await;
    }

    /// [`Api::corrections`], each board quoting `currencies` alike.
    async fn corrections_of(&self, n: i32, currencies: &[&str]) {
        let statements = [
            "INSERT INTO bank_versions (id, code, name, image_url, active, registered_at, updated_at, known_from)
             VALUES (1, 'B1', 'Bank 1', '', true, now(), now(), '-infinity')",
            "CREATE TEMP TABLE story AS
             SELECT i, '2026-11-20T00:00:00Z'::timestamptz + i * interval '1 minute' AS as_of,
                    ('00000000-0000-0000-0000-' || lpad(to_hex(i), 12, '0'))::uuid AS board,
                    ('00000000-0000-0000-0001-' || lpad(to_hex(i), 12, '0'))::uuid AS correction,
                    '2026-11-20T00:00:00Z'::timestamptz + i * interval '1 second' AS published,
                    '2026-11-21T00:00:00Z'::timestamptz + i * interval '1 second' AS corrected
             FROM generate_series(1, $1) i",
            "INSERT INTO board_versions (bank_id, as_of, event_id, currencies, known_from, known_to, closed_by,
                                         cash_buying, cash_selling, transactional_buying, transactional_selling)
             SELECT 1, as_of, board, $1::bpchar[], published, corrected, correction,
                    array_fill(100 + i::numeric, ARRAY[cardinality($1)]),
                    array_fill(103 + i::numeric, ARRAY[cardinality($1)]),
                    array_fill(NULL::numeric, ARRAY[cardinality($1)]),
                    array_fill(NULL::numeric, ARRAY[cardinality($1)])
             FROM story",
            "INSERT INTO board_versions (bank_id, as_of, event_id, currencies, known_from, reason,
                                         cash_buying, cash_selling, transactional_buying, transactional_selling)
             SELECT 1, as_of, correction, $1::bpchar[], corrected, 'typo',
                    array_fill(100.5 + i, ARRAY[cardinality($1)]),
                    array_fill(103.5 + i, ARRAY[cardinality($1)]),
                    array_fill(NULL::numeric, ARRAY[cardinality($1)]),
                    array_fill(NULL::numeric, ARRAY[cardinality($1)])
             FROM story",
        ];
        let mut connection = self.read.acquire().await.unwrap();
        for sql in statements {
            let query = sqlx::query(sql);
            // The story's size, or the currencies its boards quote.
            let query = if sql.contains("generate_series") {
                query.bind(n)
            } else if sql.contains("$1") {
                query.bind(currencies)
            } else {
                query
            };
            query.execute(&mut *connection).await.unwrap();
        }
    }
}

fn board(i: u128) -> String {
    uuid::Uuid::from_u128(i).to_string()
}

fn correction(i: u128) -> String {
    uuid::Uuid::from_u128((1 << 48) | i).to_string()
}

#[tokio::test]
async fn the_log_is_paged_by_a_thousand_with_a_next_link_in_the_body_and_the_header() {
    let api = Api::new().await;
    api.corrections(1_001).await;
    let (status, headers, body) = api.json("/api/v1/revisions").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let data = &body["data"];
    let revisions = data["revisions"].as_array().unwrap();
    assert_eq!(revisions.len(), 1_000);
    assert_eq!(
        revisions[0],
        json!({
            "eventId": correction(1),
            "kind": "correction",
            "revisedEventId": board(1),
            "bankId": 1,
            "asOf": "2026-11-20T00:01:00.000Z",
            "knownAt": "2026-11-21T00:00:01.000Z",
            "reason": "typo",
            "changes": [
                {"currencyCode": "USD", "field": "cashBuying", "before": 101, "after": 101.5},
                {"currencyCode": "USD", "field": "cashSelling", "before": 104, "after": 104.5},
            ],
        })
    );
    let next = format!("/api/v1/revisions?after={}", correction(1_000));
    assert_eq!(data["next"], next.as_str());
    assert_eq!(
        headers[header::LINK],
        format!("<{next}>; rel=\"next\"").as_str()
    );

    let (status, headers, body) = api.json(&next).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["data"]["revisions"][0]["eventId"], correction(1_001));
    assert_eq!(body["data"]["revisions"].as_array().unwrap().len(), 1);
    assert_eq!(body["data"]["next"], Value::Null);
    assert!(!headers.contains_key(header::LINK));
}

#[tokio::test]
async fn known_at_bounds_a_bank_and_csv_choose_what_is_listed() {
    let api = Api::new().await;
    api.corrections(3).await;
    let (_, _, body) = api
        .json("/api/v1/revisions?bankId=1&from=2026-11-21T00:00:02Z&to=2026-11-21T03:00:03%2B03:00")
        .await;
    let data = &body["data"];
    assert_eq!(data["bankId"], 1);
    assert_eq!(data["from"], "2026-11-21T00:00:02.000Z");
    assert_eq!(data["to"], "2026-11-21T00:00:03.000Z");
    let listed: Vec<&Value> = data["revisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["eventId"])
        .collect();
    assert_eq!(listed, [&json!(correction(2))], "from included, to not");

    let (status, headers, csv) = api
        .get("/api/v1/revisions", &[("accept", "text/csv")])
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "text/csv; charset=utf-8");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "eventId,kind,revisedEventId,bankId,asOf,knownAt,reason,currencyCode,field,before,after"
    );
    assert_eq!(
        lines[1],
        format!(
            "{},correction,{},1,2026-11-20T00:01:00.000Z,2026-11-21T00:00:01.000Z,typo,USD,cashBuying,101,101.5",
            correction(1),
            board(1)
        )
    );
    assert_eq!(lines.len(), 1 + 3 * 2, "a row per change");
}

#[tokio::test]
async fn bad_parameters_are_400_naming_them_and_what_names_nothing_is_404() {
    let api = Api::new().await;
    api.corrections(1).await;
    let (status, _, body) = api
        .json("/api/v1/revisions?bankId=x&from=yesterday&format=xml&after=7")
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["message"], "Validation errors occurred.");
    let mut fields: Vec<&String> = body["errors"].as_object().unwrap().keys().collect();
    fields.sort();
    assert_eq!(fields, ["after", "bankId", "format", "from"]);
    let (status, _, body) = api
        .json("/api/v1/revisions?from=2026-11-22T00:00:00Z&to=2026-11-21T00:00:00Z")
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["errors"]["from"][0], "from must not be after to");

    let (status, _, body) = api.json("/api/v1/revisions?bankId=2").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, json!({"status": 404, "message": "Bank not found"}));
    let (status, _, body) = api
        .json(&format!("/api/v1/revisions?after={}", board(1)))
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "a board, not a revising event"
    );
    assert_eq!(body["message"], "Revision not found");

    let (status, _, body) = api.json("/api/v1/boards/not-a-uuid").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body["errors"]["eventId"][0]
        .as_str()
        .unwrap()
        .contains("UUID"));
    let (status, _, body) = api.json(&format!("/api/v1/boards/{}", board(9))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, json!({"status": 404, "message": "Board not found"}));
}

#[tokio::test]
async fn a_board_shows_what_it_published_and_what_became_of_it_with_an_etag() {
    let api = Api::new().await;
    api.corrections(1).await;
    let uri = format!("/api/v1/boards/{}", board(1));
    let (status, headers, body) = api.json(&uri).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let data = &body["data"];
    assert_eq!(data["eventId"], board(1));
    assert_eq!(data["status"], "corrected");
    assert_eq!(data["rates"][0]["cashBuying"], 101);
    assert_eq!(data["rates"][0]["timestamp"], "2026-11-20T00:01:00.000Z");
    assert_eq!(data["rates"][0]["currency"]["symbol"], "USD");
    assert_eq!(data["knownAt"], "2026-11-20T00:00:01.000Z");
    assert_eq!(data["log"], Value::Null, "no log position was written");
    assert_eq!(data["source"], Value::Null);
    assert_eq!(data["revisions"][0]["eventId"], correction(1));

    let (_, _, body) = api.json(&format!("/api/v1/boards/{}", correction(1))).await;
    assert_eq!(body["data"]["status"], "inForce");
    assert_eq!(body["data"]["reason"], "typo");

    let (status, _, by_rate) = api
        .json("/api/v1/boards?bankId=1&asOf=2026-11-20T00:01:00.000Z")
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        by_rate["data"]["eventId"],
        correction(1),
        "a rate's bank and updatedAt name the board in force"
    );
    let (status, _, body) = api
        .json("/api/v1/boards?bankId=1&asOf=2026-11-20T00:01:00.001Z")
        .await;
    assert_eq!(
        (status, &body["message"]),
        (StatusCode::NOT_FOUND, &json!("Board not found"))
    );
    let (status, _, body) = api
        .json("/api/v1/boards?bankId=2&asOf=2026-11-20T00:01:00Z")
        .await;
    assert_eq!(
        (status, &body["message"]),
        (StatusCode::NOT_FOUND, &json!("Bank not found"))
    );
    let (status, _, body) = api.json("/api/v1/boards?asOf=noon").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let mut fields: Vec<&String> = body["errors"].as_object().unwrap().keys().collect();
    fields.sort();
    assert_eq!(fields, ["asOf", "bankId"]);

    let etag = headers[header::ETAG].to_str().unwrap().to_owned();
    let (status, headers, body) = api.get(&uri, &[("if-none-match", &etag)]).await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);
    assert!(body.is_empty());
    assert!(headers.contains_key("x-ratelimit-remaining"));
}

#[tokio::test]
async fn a_page_larger_than_the_gate_fingerprints_is_sent_whole_and_tagged() {
    let api = Api::new().await;
    let currencies = [
        "AED", "AUD", "BHD", "CAD", "CHF", "CNY", "DKK", "EUR", "GBP", "HKD", "INR", "JPY", "KES",
        "KRW", "KWD", "NOK", "NZD", "QAR", "SAR", "SEK", "SGD", "USD", "ZAR", "TRY", "EGP", "BRL",
        "MXN", "RUB", "THB", "PLN",
    ];
    api.corrections_of(1_000, &currencies).await;
    let (status, headers, body) = api.get("/api/v1/revisions", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.len() > 4 * 1024 * 1024, "{} bytes", body.len());
    let json: Value = serde_json::from_str(&body).unwrap();
    let revisions = json["data"]["revisions"].as_array().unwrap();
    assert_eq!(revisions.len(), 1_000);
    assert_eq!(revisions[999]["changes"].as_array().unwrap().len(), 60);
    let etag = headers[header::ETAG].to_str().unwrap().to_owned();
    let (status, _, _) = api
        .get("/api/v1/revisions", &[("if-none-match", &etag)])
        .await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);
}
