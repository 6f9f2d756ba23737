//! A trace collector on loopback: an OTLP/HTTP receiver (`POST /v1/traces`,
//! `application/x-protobuf`) that decodes each export with the official
//! protobuf definitions (`opentelemetry-proto`) and keeps every span, named
//! by the service that sent it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use prost::Message;
use tokio_util::sync::CancellationToken;

/// One span as exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collected {
    /// The `service.name` of its resource.
    pub service: String,
    pub name: String,
    /// Ids in lower-case hex, as in a `traceparent`; an empty parent for a
    /// root.
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: String,
    pub start_unix_nano: u64,
    pub end_unix_nano: u64,
    /// A request span's `path` attribute; empty for other spans.
    pub path: String,
}

impl Collected {
    pub fn duration(&self) -> Duration {
        Duration::from_nanos(self.end_unix_nano.saturating_sub(self.start_unix_nano))
    }
}

pub struct Collector {
    addr: SocketAddr,
    spans: Arc<Mutex<Vec<Collected>>>,
    stop: CancellationToken,
}

impl Collector {
    pub async fn start() -> Result<Collector> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let addr = listener.local_addr()?;
        let spans: Arc<Mutex<Vec<Collected>>> = Arc::default();
        let app = Router::new()
            .route("/v1/traces", post(export))
            .with_state(Arc::clone(&spans));
        let stop = CancellationToken::new();
        let until = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { until.cancelled().await })
                .await;
        });
        Ok(Collector { addr, spans, stop })
    }

    /// What `OTEL_EXPORTER_OTLP_ENDPOINT` is set to for it.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn spans(&self) -> Vec<Collected> {
        self.spans.lock().unwrap().clone()
    }

    /// The spans of one trace, by trace id in hex.
    pub fn trace(&self, trace_id: &str) -> Vec<Collected> {
        let mut spans: Vec<Collected> = self
            .spans()
            .into_iter()
            .filter(|s| s.trace_id == trace_id)
            .collect();
        spans.sort_by_key(|s| s.start_unix_nano);
        spans
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Takes one export; answers as the OTLP/HTTP specification says (200
/// with an empty protobuf response, 400 for a body that does not decode,
/// 415 for another content type).
async fn export(
    State(spans): State<Arc<Mutex<Vec<Collected>>>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, Vec<u8>) {
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if content_type != "application/x-protobuf" {
        return (StatusCode::UNSUPPORTED_MEDIA_TYPE, Vec::new());
    }
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return (StatusCode::BAD_REQUEST, Vec::new());
    };
    let mut collected = Vec::new();
    for resource_spans in request.resource_spans {
        let resource = resource_spans.resource.as_ref();
        let service = text_attribute(resource.map_or(&[][..], |r| &r.attributes), "service.name");
        for span in resource_spans.scope_spans.into_iter().flat_map(|s| s.spans) {
            collected.push(Collected {
                path: text_attribute(&span.attributes, "path"),
                service: service.clone(),
                name: span.name,
                trace_id: hex::encode(&span.trace_id),
                span_id: hex::encode(&span.span_id),
                parent_span_id: hex::encode(&span.parent_span_id),
                start_unix_nano: span.start_time_unix_nano,
                end_unix_nano: span.end_time_unix_nano,
            });
        }
    }
    spans.lock().unwrap().extend(collected);
    (
        StatusCode::OK,
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
}

/// The text value of the attribute named `key`; empty when there is none.
fn text_attribute(attributes: &[KeyValue], key: &str) -> String {
    attributes
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| match a.value.as_ref()?.value.as_ref()? {
            Value::StringValue(text) => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}
