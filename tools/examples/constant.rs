//! The framework baseline for `deploy/bench`: an axum server answering
//! every request with the same bytes (a saved API response), with nothing
//! of ratewire in between. Usage: `constant ADDR BODY_FILE [ENCODING]`;
//! with an encoding (`gzip`), the file holds the encoded body as the API
//! sent it, and every answer says so in `Content-Encoding`.

use axum::http::{header, HeaderValue};
use axum::response::IntoResponse;
use axum::Router;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:18099".into());
    let body: &'static [u8] = match args.next() {
        Some(path) => std::fs::read(path)?.leak(),
        None => br#"{"status":200,"message":"ok"}"#,
    };
    let encoding = args.next().map(HeaderValue::try_from).transpose()?;
    let app = Router::new().fallback(move || {
        let encoding = encoding.clone();
        async move {
            let mut response = ([(header::CONTENT_TYPE, "application/json")], body).into_response();
            if let Some(encoding) = encoding {
                response
                    .headers_mut()
                    .insert(header::CONTENT_ENCODING, encoding);
            }
            response
        }
    });
    let listener = tokio::net::TcpListener::bind(addr).await?;
    axum::serve(listener, app).await?;
    Ok(())
}
