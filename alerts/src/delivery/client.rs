//! The HTTP client webhooks are delivered with: addresses checked after
//! every resolution (no internal address, whatever the name said when it
//! was registered), no redirects, no proxies from the environment,
//! bounded connect and total times, and at most 64 KB of any answer read.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::address::AddressPolicy;
use futures_util::StreamExt;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Connecting (TCP and TLS) may take this long.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A 2xx within this long counts as delivered.
pub const TOTAL_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of an answer's body read (it is only kept for the last error).
pub const BODY_CAP: usize = 64 * 1024;
/// The most of an answer's body kept as the endpoint's last error.
const ERROR_EXCERPT: usize = 200;

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Delivered { status: u16 },
    Failed { status: Option<u16>, error: String },
}

/// One request to send: the URL and the signed headers.
pub struct Request<'a> {
    pub url: &'a str,
    pub id: &'a str,
    pub timestamp: i64,
    pub signature: &'a str,
    pub body: &'a str,
    /// The W3C trace context the call continues, if any.
    pub traceparent: Option<&'a str>,
}

#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    policy: AddressPolicy,
}

impl Client {
    pub fn new(policy: AddressPolicy) -> Self {
        let http = reqwest::Client::builder()
            .dns_resolver(Arc::new(Guarded { policy }))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(TOTAL_TIMEOUT)
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(32)
            .user_agent(concat!("ratewire-webhooks/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("the webhook client's settings are valid");
        Self { http, policy }
    }

    pub async fn send(&self, request: Request<'_>) -> Outcome {
        let url = match crate::address::parse(request.url) {
            Ok(url) => url,
            Err(e) => return failed(None, format!("the URL {e}")),
        };
        // The resolver is not asked for an address written in the URL.
        let literal = match url.host() {
            Some(url::Host::Ipv4(ip)) => Some(std::net::IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Some(std::net::IpAddr::V6(ip)),
            _ => None,
        };
        if let Some(ip) = literal {
            if let Err(refusal) = self.policy.check(ip) {
                return failed(None, format!("refused: {ip} is {refusal}"));
            }
        }
        let mut call = self.http.post(url);
        if let Some(traceparent) = request.traceparent {
            call = call.header("traceparent", traceparent);
        }
        let sent = call
            .header("content-type", "application/json")
            .header("webhook-id", request.id)
            .header("webhook-timestamp", request.timestamp.to_string())
            .header("webhook-signature", request.signature)
            .body(request.body.to_owned())
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(e) => return failed(None, describe(&e)),
        };
        let status = response.status();
        let body = read_capped(response).await;
        if status.is_success() {
            Outcome::Delivered {
                status: status.as_u16(),
            }
        } else if status.is_redirection() {
            failed(
                Some(status.as_u16()),
                format!("answered {status}; redirects are not followed"),
            )
        } else {
            let excerpt: String = String::from_utf8_lossy(&body)
                .chars()
                .take(ERROR_EXCERPT)
                .collect();
            failed(
                Some(status.as_u16()),
                format!("answered {status}: {}", excerpt.trim()),
            )
        }
    }
}

fn failed(status: Option<u16>, error: String) -> Outcome {
    Outcome::Failed { status, error }
}

/// Reads at most [`BODY_CAP`] bytes of the answer (within the total
/// timeout); the rest is never read.
async fn read_capped(response: reqwest::Response) -> Vec<u8> {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(Ok(chunk)) = chunks.next().await {
        let room = BODY_CAP - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= BODY_CAP {
            break;
        }
    }
    body
}

/// The error in a line, with its cause (reqwest's own message hides it).
fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "failed"
    };
    let mut message = kind.to_owned();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        message = format!("{message}: {cause}");
        source = cause.source();
    }
    message
}

/// Resolves names and keeps only the addresses the policy admits.
struct Guarded {
    policy: AddressPolicy,
}

#[derive(Debug)]
struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

impl Resolve for Guarded {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| policy.check(a.ip()).is_ok())
                .collect();
            if allowed.is_empty() {
                let refused = found
                    .first()
                    .map(|a| match policy.check(a.ip()) {
                        Err(refusal) => {
                            format!("refused: {host} resolves to {} ({refusal})", a.ip())
                        }
                        Ok(()) => unreachable!(),
                    })
                    .unwrap_or_else(|| format!("{host} has no address"));
                return Err(Box::new(Refused(refused)) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server on loopback answering every request with `status` and a
    /// body of `size` bytes.
    async fn answering(status: u16, size: usize) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let app = axum::Router::new().fallback(move || async move {
            (
                axum::http::StatusCode::from_u16(status).unwrap(),
                vec![b'x'; size],
            )
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://127.0.0.1:{port}/hooks")
    }

    fn request(url: &str) -> Request<'_> {
        Request {
            url,
            id: "msg_1",
            timestamp: 1,
            signature: "v1,x",
            body: "{}",
            traceparent: None,
        }
    }

    const LOCAL: AddressPolicy = AddressPolicy {
        allow_private: true,
    };

    #[tokio::test]
    async fn a_2xx_is_delivered_and_a_large_error_is_kept_short() {
        let url = answering(204, 0).await;
        assert_eq!(
            Client::new(LOCAL).send(request(&url)).await,
            Outcome::Delivered { status: 204 }
        );
        // 8 MB of error: at most 64 KB read, 200 characters kept.
        let url = answering(500, 8 << 20).await;
        let Outcome::Failed { status, error } = Client::new(LOCAL).send(request(&url)).await else {
            panic!("a 500 fails");
        };
        assert_eq!(status, Some(500));
        assert!(error.len() < 300, "{} characters", error.len());
    }

    #[tokio::test]
    async fn redirects_are_not_followed_and_internal_addresses_not_called() {
        let url = answering(307, 0).await;
        let Outcome::Failed { error, .. } = Client::new(LOCAL).send(request(&url)).await else {
            panic!("a redirect fails");
        };
        assert!(error.contains("redirects are not followed"), "{error}");
        let strict = AddressPolicy::default();
        let Outcome::Failed { error, status } = Client::new(strict).send(request(&url)).await
        else {
            panic!("loopback is refused");
        };
        assert_eq!(status, None);
        assert!(
            error.contains("refused") && error.contains("loopback"),
            "{error}"
        );
        let named = url.replace("127.0.0.1", "localhost");
        let Outcome::Failed { error, .. } = Client::new(strict).send(request(&named)).await else {
            panic!("a name resolving to loopback is refused");
        };
        assert!(error.contains("refused"), "{error}");
    }
}
