//! Errors every endpoint shares (api-v1 §7): JSON bodies in the spec's
//! format, for unknown paths and methods too, and no internals on a 500
//! (the API in process: see `super::world::World`).

use axum::http::Method;
use ratewire_e2e::{ago, Board};

use super::world::World;
use serde_json::json;

#[tokio::test]
async fn unknown_paths_are_404_and_wrong_methods_405_as_json() -> anyhow::Result<()> {
    let world = World::new().await?;
    let key = world.api_key("errors").await?;
    let (status, body) = world.get("/api/v1/nothing-here", Some(&key)).await?;
    assert_eq!(
        (status, body),
        (404, json!({"status": 404, "message": "Not Found"}))
    );

    for method in [Method::POST, Method::PUT, Method::DELETE] {
        let answer = world
            .request(method.clone(), "/api/v1/rates", Some(&key))
            .await?;
        assert_eq!(answer.status, 405, "{method}");
        assert_eq!(
            answer.json(),
            json!({"status": 405, "message": "Method Not Allowed"})
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_server_failure_is_500_with_the_cause_only_in_the_logs() -> anyhow::Result<()> {
    let mut world = World::new().await?;
    let key = world.api_key("errors").await?;
    let bank = world.register_bank("CBE", "CBE").await?;
    world
        .publish(bank, &Board::at(ago(1, 0)).rate("USD", 1, 2))
        .await?;
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let path = format!("/api/v1/history?bankId={bank}&date={today}");
    assert_eq!(
        world.get(&path, Some(&key)).await?.0,
        200,
        "the board in history"
    );

    world
        .sql("ALTER FUNCTION readmodel.rates_of RENAME TO rates_of_gone")
        .await?;
    let logged = world.log().len();
    let (status, body) = world.get(&path, Some(&key)).await?;
    assert_eq!(
        (status, body),
        (
            500,
            json!({"status": 500, "message": "Internal Server Error"})
        )
    );
    assert!(
        world.log()[logged..].contains("rates"),
        "the cause is logged"
    );
    Ok(())
}

#[tokio::test]
async fn a_body_over_16_kb_is_413_naming_the_limit() -> anyhow::Result<()> {
    let world = World::new().await?;
    let key = world.api_key("errors").await?;
    let description = "x".repeat(20 * 1024);
    for path in ["/api/v1/webhooks", "/api/v1/alerts"] {
        let body = json!({"url": "https://example.com/hook", "description": description});
        let answer = world.post_json(path, body.to_string(), Some(&key)).await?;
        assert_eq!(answer.status, 413, "{path}: {}", answer.text());
        assert_eq!(
            answer.json(),
            json!({"status": 413, "message": "Request body is too large: at most 16384 bytes"}),
            "{path}"
        );
    }
    // The document says so, where a body is taken.
    let document = world
        .send(axum::http::Request::get("/api/v1/openapi.json"), None)
        .await?
        .json();
    let too_large = &document["paths"]["/api/v1/webhooks"]["post"]["responses"]["413"];
    assert!(too_large.is_object(), "{too_large}");
    Ok(())
}
