//! Signed answers checked by an implementation of RFC 9421 and 9530 other
//! than the API's: PyPI's `http-message-signatures`, run by the Python of
//! `RATEWIRE_SIGNATURE_VERIFIER`, which the test command installs
//! (`deploy/stack test`), on a [`Capture`] of an answer.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context, Result};
use base64::Engine;
use serde_json::{json, Value};

/// The verifying script (`verify_signature.py` beside this file).
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/verify_signature.py");

/// An answer as received, with the request it answers.
#[derive(Debug, Clone)]
pub struct Capture {
    pub method: String,
    pub url: String,
    pub request_headers: Vec<(String, String)>,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The content as sent (still gzip-encoded when it was).
    pub body: Vec<u8>,
}

impl Capture {
    /// GETs `url` with `headers` (a `host` is added, as sent) through
    /// `http`, which must not decode content codings.
    pub async fn get(http: &reqwest::Client, url: &str, headers: &[(&str, &str)]) -> Result<Self> {
        let mut request = http.get(url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await?;
        let parsed = reqwest::Url::parse(url)?;
        let host = match parsed.port() {
            Some(port) => format!("{}:{port}", parsed.host_str().unwrap_or_default()),
            None => parsed.host_str().unwrap_or_default().to_owned(),
        };
        let mut request_headers = vec![("host".to_owned(), host)];
        request_headers.extend(headers.iter().map(|(n, v)| (n.to_string(), v.to_string())));
        Ok(Self {
            method: "GET".to_owned(),
            url: url.to_owned(),
            request_headers,
            status: response.status().as_u16(),
            headers: response
                .headers()
                .iter()
                .map(|(n, v)| {
                    (
                        n.as_str().to_owned(),
                        v.to_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect(),
            body: response.bytes().await?.to_vec(),
        })
    }

    /// The answer's field `name` (the first line of it).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Verifies the signature labelled `label` (the only one when None)
    /// with the JWK Set `keys`: what the verifier found (label, keyid,
    /// covered components, parameters), or why it refused.
    pub fn verify(&self, keys: &Value, label: Option<&str>) -> Result<Result<Value, String>> {
        let capture = json!({
            "keys": keys,
            "status": self.status,
            "headers": self.headers,
            "body": base64::engine::general_purpose::STANDARD.encode(&self.body),
            "request": {"method": self.method, "url": self.url, "headers": self.request_headers},
            "label": label,
        });
        let mut child = Command::new(verifier()?)
            .arg(SCRIPT)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("running the signatures' verifier")?;
        child
            .stdin
            .take()
            .context("the verifier's stdin")?
            .write_all(capture.to_string().as_bytes())?;
        let output = child.wait_with_output()?;
        let answer: Value = serde_json::from_slice(&output.stdout).with_context(|| {
            format!(
                "the verifier's output: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        })?;
        Ok(match answer["error"].as_str() {
            Some(error) => Err(error.to_owned()),
            None => Ok(answer["verified"].clone()),
        })
    }
}

fn verifier() -> Result<PathBuf> {
    std::env::var("RATEWIRE_SIGNATURE_VERIFIER")
        .map(PathBuf::from)
        .context("RATEWIRE_SIGNATURE_VERIFIER is not set: run `deploy/stack test`, which installs the verifier")
}
