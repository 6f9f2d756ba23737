//! Both operator listeners answer a bad body as docs/publishers.md says:
//! 415 for another content type, and a 400 whose `errors` name every
//! problem under its field (not serde's first complaint under `body`).

use ratewire_e2e::{Stack, ADMIN_TOKEN};
use serde_json::{json, Value};

async fn post(stack: &Stack, url: &str, body: Value) -> anyhow::Result<(u16, Value)> {
    let response = stack
        .http()
        .post(url)
        .bearer_auth(ADMIN_TOKEN)
        .json(&body)
        .send()
        .await?;
    Ok((response.status().as_u16(), response.json().await?))
}

fn fields(body: &Value) -> Vec<String> {
    body["errors"]
        .as_object()
        .map(|errors| errors.keys().cloned().collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn bad_operator_bodies_name_every_problem_on_both_listeners() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let keys = format!("{}/v1/admin/keys", stack.api_operator_url);
    let banks = format!("{}/v1/admin/banks", stack.ingest_operator_url);

    let (status, body) = post(&stack, &keys, json!({"nmae": "x", "plan": 1})).await?;
    assert_eq!(
        (status, fields(&body)),
        (400, vec!["name".into(), "nmae".into(), "plan".into()]),
        "{body}"
    );
    assert_eq!(body["message"], "Validation errors occurred.");
    assert_eq!(body["errors"]["name"], json!(["is required"]));

    let (status, body) = post(&stack, &banks, json!({"name": "x", "colour": 1})).await?;
    assert_eq!(
        (status, fields(&body)),
        (400, vec!["code".into(), "colour".into(), "imageUrl".into()]),
        "{body}"
    );

    for url in [&keys, &banks] {
        let response = stack
            .http()
            .post(url)
            .bearer_auth(ADMIN_TOKEN)
            .header("content-type", "text/plain")
            .body(r#"{"name":"x"}"#)
            .send()
            .await?;
        assert_eq!(response.status(), 415, "{url}");
        assert_eq!(response.json::<Value>().await?["status"], 415, "{url}");
    }
    Ok(())
}
