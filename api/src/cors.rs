//! Cross-origin reads: web pages on other origins may call the read API
//! (and open its live stream) from a browser. Only GET and HEAD, with
//! `x-api-key` and the conditional and resume headers allowed; the
//! rate-limit headers, `Retry-After` and `ETag` readable by the page;
//! preflights cached for ten minutes. Publisher and operator endpoints
//! (ingest, and this process's operator listener) send no CORS headers.

use std::time::Duration;

use axum::http::{header, HeaderName, HeaderValue, Method};
use tower_http::cors::{AllowOrigin, CorsLayer};

/// Which origins may read.
#[derive(Debug, Clone)]
pub enum Origins {
    Any,
    Only(Vec<HeaderValue>),
}

pub fn parse_origins(text: &str) -> Result<Origins, String> {
    let text = text.trim();
    if text == "*" {
        return Ok(Origins::Any);
    }
    let origins: Vec<HeaderValue> = text
        .split(',')
        .map(str::trim)
        .filter(|o| !o.is_empty())
        .map(|origin| {
            let host = origin
                .strip_prefix("https://")
                .or_else(|| origin.strip_prefix("http://"));
            match host {
                Some(host) if !host.is_empty() && !host.contains(['/', ' ']) => {
                    HeaderValue::from_str(origin)
                        .map_err(|_| format!("{origin:?} is not a valid origin"))
                }
                _ => Err(format!(
                    "{origin:?} is not an origin such as https://rates.example (scheme and host, no path)"
                )),
            }
        })
        .collect::<Result<_, _>>()?;
    if origins.is_empty() {
        return Err("give `*` or at least one origin".into());
    }
    Ok(Origins::Only(origins))
}

pub fn layer(origins: &Origins) -> CorsLayer {
    let allow = match origins {
        Origins::Any => AllowOrigin::any(),
        Origins::Only(list) => AllowOrigin::list(list.clone()),
    };
    CorsLayer::new()
        .allow_origin(allow)
        .allow_methods([Method::GET, Method::HEAD, Method::POST, Method::DELETE])
        .allow_headers([
            HeaderName::from_static(crate::access::keys::API_KEY_HEADER),
            header::IF_NONE_MATCH,
            HeaderName::from_static("last-event-id"),
            header::ACCEPT,
            header::CONTENT_TYPE,
            header::CACHE_CONTROL,
        ])
        .expose_headers([
            HeaderName::from_static("x-ratelimit-limit"),
            HeaderName::from_static("x-ratelimit-remaining"),
            HeaderName::from_static("x-ratelimit-reset"),
            HeaderName::from_static("ratelimit-policy"),
            HeaderName::from_static("ratelimit"),
            header::RETRY_AFTER,
            header::ETAG,
            header::LINK,
        ])
        .max_age(Duration::from_secs(600))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_any_or_a_list_of_scheme_and_host() {
        assert!(matches!(parse_origins("*"), Ok(Origins::Any)));
        let Ok(Origins::Only(list)) = parse_origins("https://a.example, http://localhost:3000")
        else {
            panic!("a list");
        };
        assert_eq!(list.len(), 2);
        assert!(parse_origins("a.example").is_err());
        assert!(parse_origins("https://a.example/path").is_err());
        assert!(parse_origins(" , ").is_err());
    }
}
