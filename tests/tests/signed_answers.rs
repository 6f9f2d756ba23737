//! Signed answers (RFC 9421, 9530): a read with `Accept-Signature` is
//! answered signed under the label asked for, and an implementation other
//! than the API's (PyPI's `http-message-signatures`) verifies it with the
//! keys of `/api/v1/signing-keys`; a changed body does not verify, an
//! answer not asked to be signed carries nothing, a gzip list verifies over
//! the bytes sent, and a retired key stays listed while its signatures
//! hold.

use std::time::Duration;

use anyhow::Result;
use ratewire_e2e::signatures::Capture;
use ratewire_e2e::{eventually, Board, Stack};
use serde_json::Value;

const SIGNED: &str = r#"sig1=("@status" "content-digest" "content-type")"#;

/// A stack with one bank whose board has enough currencies for its list
/// to be sent gzip-encoded (over 1 KB), and a key.
async fn stack_with_a_board() -> Result<(Stack, i64, String)> {
    let stack = Stack::start().await?;
    let key = stack.api_key_on("verifier", "pro").await?;
    let (bank, token) = stack.bank_with_token("SGN", "Signing Bank").await?;
    let codes = [
        "EUR", "GBP", "CHF", "JPY", "CAD", "AUD", "SEK", "NOK", "DKK", "PLN", "CZK", "HUF", "TRY",
        "CNY",
    ];
    let board = codes.iter().zip(10..).fold(
        Board::now().rate("USD", "101.25", "104"),
        |board, (code, n)| board.rate(code, format!("{n}.5"), format!("{}.75", n + 1)),
    );
    assert_eq!(stack.publish_board(bank, &token, &board).await?.0, 202);
    stack.wait_served("the board", bank, &key, "101.25").await?;
    Ok((stack, bank, key))
}

async fn signing_keys(stack: &Stack, api_url: &str, key: &str) -> Result<Value> {
    let capture = Capture::get(
        stack.http(),
        &format!("{api_url}/api/v1/signing-keys"),
        &[("x-api-key", key)],
    )
    .await?;
    assert_eq!(capture.status, 200, "{capture:?}");
    let keys: Value = serde_json::from_slice(&capture.body)?;
    stack.conforms("/api/v1/signing-keys", 200, &keys);
    Ok(keys)
}

fn kids(keys: &Value) -> Vec<String> {
    keys["keys"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|k| k["kid"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn a_signed_answer_verifies_independently_and_a_changed_body_does_not() -> Result<()> {
    let (stack, _, key) = stack_with_a_board().await?;
    let keys = signing_keys(&stack, &stack.api_url, &key).await?;
    let jwk = &keys["keys"][0];
    assert_eq!(kids(&keys).len(), 1, "{keys}");
    assert_eq!(
        (&jwk["kty"], &jwk["crv"], &jwk["use"], &jwk["alg"]),
        (
            &"OKP".into(),
            &"Ed25519".into(),
            &"sig".into(),
            &"EdDSA".into()
        )
    );

    let url = format!(
        "{}/api/v1/convert?from=USD&to=ETB&amount=100",
        stack.api_url
    );
    let answer = Capture::get(
        stack.http(),
        &url,
        &[("x-api-key", &key), ("accept-signature", SIGNED)],
    )
    .await?;
    assert_eq!(answer.status, 200, "{answer:?}");
    let verified = answer.verify(&keys, None)?.expect("the answer verifies");
    let signature = &verified[0];
    assert_eq!(signature["label"], "sig1");
    assert_eq!(signature["keyid"], jwk["kid"]);
    assert_eq!(signature["parameters"]["alg"], "ed25519");
    let created = signature["parameters"]["created"]
        .as_i64()
        .unwrap_or_default();
    let now = chrono::Utc::now().timestamp();
    assert!((now - 60..=now + 5).contains(&created), "{signature}");
    assert!(signature["parameters"]["expires"].as_i64() > Some(now));
    assert!(answer
        .header("content-digest")
        .is_some_and(|d| d.starts_with("sha-256=:")));

    // One digit of the answer changed.
    let mut changed = answer.clone();
    let digit = changed
        .body
        .iter()
        .position(u8::is_ascii_digit)
        .expect("the answer has numbers");
    changed.body[digit] = if changed.body[digit] == b'9' {
        b'8'
    } else {
        changed.body[digit] + 1
    };
    let refused = changed.verify(&keys, None)?.expect_err("a changed body");
    assert!(refused.contains("Content-Digest"), "{refused}");
    let mut restatused = answer.clone();
    restatused.status = 404;
    restatused
        .verify(&keys, None)?
        .expect_err("a changed status");

    // The same answer, not asked to be signed: nothing more.
    let plain = Capture::get(stack.http(), &url, &[("x-api-key", &key)]).await?;
    assert_eq!(plain.status, 200);
    for name in ["content-digest", "signature-input", "signature"] {
        assert_eq!(plain.header(name), None, "{name}: {plain:?}");
    }

    // A 304 has no content to sign, nor has an answer to HEAD.
    let etag = plain.header("etag").expect("an ETag").to_owned();
    let not_modified = Capture::get(
        stack.http(),
        &url,
        &[
            ("x-api-key", &key),
            ("accept-signature", SIGNED),
            ("if-none-match", &etag),
        ],
    )
    .await?;
    assert_eq!(not_modified.status, 304, "{not_modified:?}");
    assert_eq!(not_modified.header("signature"), None);
    let head = stack
        .http()
        .head(&url)
        .header("x-api-key", &key)
        .header("accept-signature", SIGNED)
        .send()
        .await?;
    assert_eq!(head.status(), 200);
    assert!(!head.headers().contains_key("signature"));
    Ok(())
}

#[tokio::test]
async fn the_label_components_and_parameters_asked_for_are_signed() -> Result<()> {
    let (stack, bank, key) = stack_with_a_board().await?;
    let keys = signing_keys(&stack, &stack.api_url, &key).await?;
    let url = format!("{}/api/v1/rates?bankId={bank}", stack.api_url);
    let asked = r#"audit=("@method";req "@path";req "@query";req "x-client-ref";req "etag" "x-ratelimit-remaining");nonce="n-1";tag="ledger", sig2=("content-digest")"#;
    let answer = Capture::get(
        stack.http(),
        &url,
        &[
            ("x-api-key", &key),
            ("x-client-ref", "order-42"),
            ("accept-signature", asked),
        ],
    )
    .await?;
    assert_eq!(answer.status, 200, "{answer:?}");
    let inputs = answer.header("signature-input").unwrap_or_default();
    assert!(inputs.starts_with("audit=("), "{inputs}");
    assert!(inputs.contains(", sig2=("), "{inputs}");
    let verified = answer
        .verify(&keys, Some("audit"))?
        .expect("audit verifies");
    let covered: Vec<&str> = verified[0]["covered"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        covered,
        [
            r#""@method";req"#,
            r#""@path";req"#,
            r#""@query";req"#,
            r#""x-client-ref";req"#,
            r#""etag""#,
            r#""x-ratelimit-remaining""#,
            r#""@status""#,
            r#""content-digest""#,
            r#""content-type""#,
            r#""@signature-params""#
        ]
    );
    assert_eq!(verified[0]["parameters"]["nonce"], "n-1");
    assert_eq!(verified[0]["parameters"]["tag"], "ledger");
    answer
        .verify(&keys, Some("sig2"))?
        .expect("sig2 verifies, with what every signature covers");

    // Another query: the signature of the first does not hold for it.
    let mut elsewhere = answer.clone();
    elsewhere.url = format!("{url}&transactional=true");
    elsewhere
        .verify(&keys, Some("audit"))?
        .expect_err("signed for another query");
    Ok(())
}

#[tokio::test]
async fn a_gzip_list_is_signed_over_the_bytes_sent() -> Result<()> {
    let (stack, bank, key) = stack_with_a_board().await?;
    let keys = signing_keys(&stack, &stack.api_url, &key).await?;
    let url = format!("{}/api/v1/rates?bankId={bank}", stack.api_url);
    let headers = [
        ("x-api-key", key.as_str()),
        ("accept-encoding", "gzip"),
        ("accept-signature", SIGNED),
    ];
    // Made gzip-encoded once the view is kept in the API.
    let answer = eventually("a gzip answer", Duration::from_secs(10), || async {
        let answer = Capture::get(stack.http(), &url, &headers).await.ok()?;
        (answer.header("content-encoding") == Some("gzip")).then_some(answer)
    })
    .await?;
    assert!(answer.body.starts_with(&[0x1f, 0x8b]), "gzip bytes");
    answer
        .verify(&keys, None)?
        .expect("the gzip answer verifies");
    Ok(())
}

#[tokio::test]
async fn an_accept_signature_that_cannot_be_fulfilled_is_400_naming_it() -> Result<()> {
    let (stack, bank, key) = stack_with_a_board().await?;
    let url = format!("{}/api/v1/rates?bankId={bank}", stack.api_url);
    for (asked, why) in [
        ("sig1=(", "structured dictionary"),
        ("sig1=\"@status\"", "inner list"),
        (r#"sig1=("@method")"#, ";req"),
        (r#"sig1=();alg="hmac-sha256""#, "ed25519"),
        (r#"sig1=();keyid="someone-else""#, "signing-keys"),
    ] {
        let answer = Capture::get(
            stack.http(),
            &url,
            &[("x-api-key", &key), ("accept-signature", asked)],
        )
        .await?;
        assert_eq!(answer.status, 400, "{asked}: {answer:?}");
        let body: Value = serde_json::from_slice(&answer.body)?;
        assert_eq!(body["message"], "Validation errors occurred.");
        let message = body["errors"]["Accept-Signature"][0]
            .as_str()
            .unwrap_or_default();
        assert!(message.contains(why), "{asked}: {message}");
        assert!(answer.header("x-ratelimit-remaining").is_some(), "{asked}");
        assert_eq!(answer.header("signature"), None);
        stack.conforms(&format!("/api/v1/rates?bankId={bank}"), 400, &body);
    }
    // No key: the gate's 401 stands.
    let answer = Capture::get(stack.http(), &url, &[("accept-signature", "sig1=(")]).await?;
    assert_eq!(answer.status, 401);
    Ok(())
}

#[tokio::test]
async fn a_retired_key_stays_listed_while_its_signatures_hold() -> Result<()> {
    let (mut stack, bank, key) = stack_with_a_board().await?;
    let old_keys = signing_keys(&stack, &stack.api_url, &key).await?;
    let url = format!("/api/v1/rates?bankId={bank}");
    let signed_by_old = Capture::get(
        stack.http(),
        &format!("{}{url}", stack.api_url),
        &[("x-api-key", &key), ("accept-signature", SIGNED)],
    )
    .await?;
    assert_eq!(signed_by_old.status, 200);

    // The rotation docs/security.md describes: a new current key, and the
    // old one's public key retired until its last signature expires.
    let dir = stack.logs.join("rotation");
    std::fs::create_dir_all(&dir)?;
    let openssl = |args: &[&str]| -> Result<()> {
        let status = std::process::Command::new("openssl")
            .args(args)
            .current_dir(&dir)
            .status()?;
        anyhow::ensure!(status.success(), "openssl {args:?}");
        Ok(())
    };
    openssl(&["genpkey", "-algorithm", "ed25519", "-out", "new.pem"])?;
    std::fs::write(dir.join("old.pem"), ratewire_e2e::SIGNING_KEY_PEM)?;
    openssl(&["pkey", "-in", "old.pem", "-pubout", "-out", "old.pub.pem"])?;
    openssl(&["genpkey", "-algorithm", "ed25519", "-out", "older.pem"])?;
    let later = (chrono::Utc::now() + chrono::Duration::days(365)).to_rfc3339();
    let earlier = (chrono::Utc::now() - chrono::Duration::days(1)).to_rfc3339();
    std::fs::write(
        dir.join("retired"),
        format!("# expires, public key\n{later} old.pub.pem\n{earlier} older.pem\n"),
    )?;
    let (rotated, _) = stack
        .start_api_with(
            "api-rotated",
            &[
                (
                    "RATEWIRE_SIGNING_KEY_FILE",
                    dir.join("new.pem").display().to_string(),
                ),
                (
                    "RATEWIRE_SIGNING_RETIRED_KEYS_FILE",
                    dir.join("retired").display().to_string(),
                ),
            ],
        )
        .await?;
    let keys = signing_keys(&stack, &rotated, &key).await?;
    let listed = kids(&keys);
    let old = kids(&old_keys)[0].clone();
    assert_eq!(
        listed.len(),
        2,
        "the new key and the old, not the expired: {keys}"
    );
    assert_ne!(listed[0], old, "the current key comes first");
    assert_eq!(listed[1], old);
    signed_by_old
        .verify(&keys, None)?
        .expect("an answer signed before the rotation still verifies");
    let signed_by_new = Capture::get(
        stack.http(),
        &format!("{rotated}{url}"),
        &[("x-api-key", &key), ("accept-signature", SIGNED)],
    )
    .await?;
    let verified = signed_by_new
        .verify(&keys, None)?
        .expect("the new key signs");
    assert_eq!(verified[0]["keyid"], listed[0].as_str());
    Ok(())
}
