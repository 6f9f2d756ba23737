//! The dashboard (`/`) and the API reference (`/docs`): plain HTML, CSS
//! and JavaScript modules from `api/web/`, embedded in the binary so the
//! pages work offline and behind networks that block CDNs, with no build
//! step. Each file is gzipped once at start; answers carry a strong `ETag`
//! per encoding (304 through [`crate::conditional`]) and a
//! Content-Security-Policy that lets the pages load nothing but their own
//! files and talk to nothing but this origin.
//!
//! The pages need no key to load; the data they show comes from the API
//! under the reader's key (or anonymously when that is on).

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{middleware, Router};
use flate2::write::GzEncoder;
use flate2::Compression;
use sha2::{Digest, Sha256};

use crate::error::Error;

/// Every file: its name under `/assets/` (the pages by their own paths),
/// its type and its bytes.
const FILES: [(&str, &str, &[u8]); 15] = [
    (
        "index.html",
        "text/html; charset=utf-8",
        include_bytes!("../web/index.html"),
    ),
    (
        "docs.html",
        "text/html; charset=utf-8",
        include_bytes!("../web/docs.html"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_bytes!("../web/style.css"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../web/app.js"),
    ),
    (
        "alerts.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../web/alerts.js"),
    ),
    (
        "api.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../web/api.js"),
    ),
    (
        "chart.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../web/chart.js"),
    ),
    (
        "format.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../web/format.js"),
    ),
    (
        "stream.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../web/stream.js"),
    ),
    (
        "dom.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../web/dom.js"),
    ),
    (
        "spreads.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../web/spreads.js"),
    ),
    (
        "docs.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../web/docs.js"),
    ),
    (
        "known.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../web/known.js"),
    ),
    (
        "revisions.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../web/revisions.js"),
    ),
    (
        "quality.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../web/quality.js"),
    ),
];

/// Nothing from elsewhere: scripts, styles and calls to this origin only;
/// `data:` images for the empty favicon.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// One file as served.
struct Asset {
    content_type: &'static str,
    plain: Bytes,
    gzip: Bytes,
    /// The SHA-256 of the plain bytes, hex (the gzip encoding's tag adds
    /// `-gz`: an `ETag` names one representation).
    digest: String,
}

impl Asset {
    fn new(content_type: &'static str, bytes: Vec<u8>) -> Self {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::best());
        let gzip = encoder
            .write_all(&bytes)
            .and_then(|()| encoder.finish())
            .expect("gzip into memory");
        Self {
            content_type,
            digest: hex::encode(Sha256::digest(&bytes)),
            plain: Bytes::from(bytes),
            gzip: Bytes::from(gzip),
        }
    }

    fn respond(&self, headers: &HeaderMap) -> Response {
        let gzip = accepts_gzip(headers);
        let (body, etag) = if gzip {
            (self.gzip.clone(), format!("\"{}-gz\"", self.digest))
        } else {
            (self.plain.clone(), format!("\"{}\"", self.digest))
        };
        let mut response = Response::new(Body::from(body));
        let h = response.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(self.content_type),
        );
        if let Ok(etag) = HeaderValue::from_str(&etag) {
            h.insert(header::ETAG, etag);
        }
        if gzip {
            h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
        response
    }
}

/// Whether the client takes gzip (`Accept-Encoding: gzip`, not `gzip;q=0`).
pub(crate) fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            let name = parts.next().unwrap_or_default();
            let refused = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q == 0.0)
            });
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
        })
}

/// The pages and their files, as this process serves them.
pub struct Web {
    assets: HashMap<&'static str, Asset>,
}

impl Web {
    /// The pages learn the service's time zone and whether keyless callers
    /// are served from two `<meta>` tags filled in here.
    pub fn new(timezone: &str, anonymous_access: bool) -> Self {
        let fill = |bytes: &[u8]| {
            String::from_utf8_lossy(bytes)
                .replace("{{timezone}}", timezone)
                .replace(
                    "{{anonymous}}",
                    if anonymous_access { "true" } else { "false" },
                )
                .into_bytes()
        };
        let mut assets = HashMap::new();
        for (name, content_type, bytes) in FILES {
            let bytes = if name.ends_with(".html") {
                fill(bytes)
            } else {
                bytes.to_vec()
            };
            assets.insert(name, Asset::new(content_type, bytes));
        }
        Self { assets }
    }

    /// Every file's name and its gzipped size in bytes.
    pub fn sizes(&self) -> impl Iterator<Item = (&str, usize)> {
        self.assets.iter().map(|(n, a)| (*n, a.gzip.len()))
    }

    fn serve(&self, name: &str, headers: &HeaderMap) -> Response {
        match self.assets.get(name) {
            Some(asset) => asset.respond(headers),
            None => Error::NotFound("Not Found").into_response(),
        }
    }
}

/// `/`, `/docs` and `/assets/{file}`, with the security headers on every
/// answer (a 404 included).
pub fn router<S: Clone + Send + Sync + 'static>(web: Arc<Web>) -> Router<S> {
    Router::new()
        .route("/", get(index))
        .route("/docs", get(docs))
        .route("/assets/{name}", get(asset))
        .layer(middleware::from_fn(crate::conditional::conditional))
        .layer(middleware::map_response(security_headers))
        .with_state(web)
}

async fn index(State(web): State<Arc<Web>>, headers: HeaderMap) -> Response {
    web.serve("index.html", &headers)
}

async fn docs(State(web): State<Arc<Web>>, headers: HeaderMap) -> Response {
    web.serve("docs.html", &headers)
}

async fn asset(
    State(web): State<Arc<Web>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    // The pages are served by their own paths only.
    if name.ends_with(".html") {
        return Error::NotFound("Not Found").into_response();
    }
    web.serve(&name, &headers)
}

async fn security_headers(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_str(value).unwrap(),
        );
        headers
    }

    #[test]
    fn gzip_is_sent_to_clients_that_take_it() {
        assert!(accepts_gzip(&accept("gzip, deflate, br")));
        assert!(accepts_gzip(&accept("br;q=1.0, gzip;q=0.8")));
        assert!(accepts_gzip(&accept("*")));
        assert!(!accepts_gzip(&accept("gzip;q=0")));
        assert!(!accepts_gzip(&accept("br")));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }

    #[test]
    fn the_pages_name_the_zone_and_whether_keys_are_needed() {
        let web = Web::new("Africa/Addis_Ababa", true);
        let index = String::from_utf8(web.assets["index.html"].plain.to_vec()).unwrap();
        assert!(index.contains(r#"content="Africa/Addis_Ababa""#));
        assert!(index.contains(r#"name="ratewire-anonymous" content="true""#));
        assert!(!index.contains("{{"));
    }

    #[test]
    fn everything_a_page_loads_is_embedded() {
        let web = Web::new("UTC", false);
        for page in ["index.html", "docs.html"] {
            let html = String::from_utf8(web.assets[page].plain.to_vec()).unwrap();
            for reference in html.split("/assets/").skip(1) {
                let name = reference.split('"').next().unwrap();
                assert!(web.assets.contains_key(name), "{page} loads {name}");
            }
        }
        for script in ["app.js", "docs.js", "stream.js", "known.js", "revisions.js"] {
            let js = String::from_utf8(web.assets[script].plain.to_vec()).unwrap();
            for line in js.lines().filter(|l| l.contains(" from './")) {
                let name = line
                    .split("from './")
                    .nth(1)
                    .unwrap()
                    .split('\'')
                    .next()
                    .unwrap();
                assert!(web.assets.contains_key(name), "{script} imports {name}");
            }
        }
    }
}
