//! Traces: `tracing`'s spans exported as OpenTelemetry spans over OTLP/HTTP
//! (protobuf), and the W3C trace context carried between processes, so that
//! a board's path (a publisher's request, ingest, the log, the fold, the
//! webhook call) is one trace in an operator's tracing backend.
//!
//! Off unless `OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set: then there is no exporter,
//! no OpenTelemetry layer, and [`enabled`] is false, so the request path
//! does not even look for a `traceparent`. When on, the SDK reads the other
//! standard variables itself (`OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER`
//! and its argument, `OTEL_BSP_*`, `OTEL_EXPORTER_OTLP_HEADERS`, ...).
//!
//! Spans are exported in batches by the SDK's own thread: a request only
//! queues its ended spans (a full queue drops them, never waits). The
//! export's HTTP call runs on the process's Tokio runtime through reqwest
//! (the client the processes already link, TLS included), so no second
//! HTTP stack comes with it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{TraceContextExt, TracerProvider};
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::error::{Error, Result};

/// Set once the exporter is made; read on every request.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Whether spans are exported (some OTLP endpoint is set). When false,
/// callers skip reading and writing trace headers altogether.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Whether the environment asks for traces: an endpoint is set, and the
/// standard switches (`OTEL_SDK_DISABLED=true`, `OTEL_TRACES_EXPORTER=none`)
/// do not turn them off.
pub fn requested() -> bool {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let endpoint = [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|name| !var(name).is_empty());
    endpoint
        && !var("OTEL_SDK_DISABLED").eq_ignore_ascii_case("true")
        && !var("OTEL_TRACES_EXPORTER").eq_ignore_ascii_case("none")
}

/// The exporting pipeline, kept until shutdown so its last spans are sent.
#[derive(Debug)]
pub struct Exporter {
    pub(crate) provider: SdkTracerProvider,
}

impl Exporter {
    /// Makes the exporter when the environment asks for traces; `service`
    /// names the process unless `OTEL_SERVICE_NAME` does. Must run inside
    /// the Tokio runtime the exports will use.
    pub fn from_env(service: &str) -> Result<Option<Self>> {
        if !requested() {
            return Ok(None);
        }
        let client = Exporting {
            client: reqwest::Client::builder()
                // The SDK's default export timeout (OTEL_EXPORTER_OTLP_TIMEOUT's).
                .timeout(Duration::from_secs(10))
                .build()
                .map_err(|e| Error::Traces(e.to_string()))?,
            runtime: tokio::runtime::Handle::try_current()
                .map_err(|e| Error::Traces(e.to_string()))?,
        };
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_http_client(client)
            .build()
            .map_err(|e| Error::Traces(e.to_string()))?;
        let named = std::env::var_os("OTEL_SERVICE_NAME").is_some_and(|v| !v.is_empty());
        let resource = if named {
            Resource::builder().build()
        } else {
            Resource::builder()
                .with_service_name(service.to_owned())
                .build()
        };
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        ENABLED.store(true, Ordering::Relaxed);
        Ok(Some(Self { provider }))
    }

    /// The `tracing` layer that turns spans into this exporter's spans.
    pub fn layer<S>(&self) -> impl tracing_subscriber::Layer<S>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        // Every span costs this layer's work whether its trace is sampled
        // or not (the sampler is asked when the span starts), so it does
        // no more than parentage needs: no busy/idle timing of every
        // enter, no OpenTelemetry context attached on every enter (the
        // parent is the tracing span's), no thread, file or target
        // attributes (the span's fields say what it is).
        tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer("ratewire"))
            .with_tracked_inactivity(false)
            .with_context_activation(false)
            .with_threads(false)
            .with_location(false)
            .with_target(false)
    }

    /// Sends the spans still queued, then stops exporting (waits at most
    /// the export timeout). Called once the process has stopped serving.
    pub async fn shutdown(self) {
        let provider = self.provider;
        // The SDK blocks until its thread has exported; that export runs
        // on this runtime, so the wait must not hold one of its workers.
        let done = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        if let Ok(Err(e)) = done {
            tracing::warn!(error = %e, "the last spans were not all exported");
        }
    }
}

/// The OTLP exporter's HTTP client: reqwest, driven by the process's
/// runtime (the SDK's export thread only waits for the answer).
#[derive(Debug)]
struct Exporting {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for Exporting {
    async fn send_bytes(
        &self,
        request: http::Request<Bytes>,
    ) -> std::result::Result<http::Response<Bytes>, HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let client = self.client.clone();
        let answer = self.runtime.spawn(async move {
            let response = client.execute(request).await?;
            let mut answer = http::Response::builder().status(response.status());
            if let Some(headers) = answer.headers_mut() {
                *headers = response.headers().clone();
            }
            let body = response.bytes().await?;
            Ok::<_, HttpError>(answer.body(body)?)
        });
        answer.await?
    }
}

/// A W3C trace context as carried between processes: in HTTP headers, in
/// a Kafka record's headers, in a stored webhook message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceContext {
    pub traceparent: String,
    pub tracestate: Option<String>,
}

pub const TRACEPARENT: &str = "traceparent";
pub const TRACESTATE: &str = "tracestate";

impl TraceContext {
    /// The context a carrier holds (`header` looks a name up), when it
    /// has a `traceparent`.
    pub fn from_headers<'a>(header: impl Fn(&str) -> Option<&'a str>) -> Option<Self> {
        let traceparent = header(TRACEPARENT)?.to_owned();
        Some(Self {
            traceparent,
            tracestate: header(TRACESTATE)
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        })
    }

    /// `span`'s own context, to hand to the next process; `None` when
    /// traces are off or the span is not recorded.
    pub fn of(span: &tracing::Span) -> Option<Self> {
        if !enabled() {
            return None;
        }
        let context = span.context();
        if !context.span().span_context().is_valid() {
            return None;
        }
        let mut carried = Carrier::default();
        TraceContextPropagator::new().inject_context(&context, &mut carried);
        Self::from_headers(|name| carried.0.get(name).map(String::as_str))
    }

    /// Makes `span` (just created, not entered yet) continue this context:
    /// a child of the span that sent it. A malformed `traceparent` leaves
    /// `span` a root, as the W3C recommendation says.
    pub fn continue_in(&self, span: &tracing::Span) {
        let parent = TraceContextPropagator::new().extract(self);
        if parent.span().span_context().is_valid() {
            // Refused only when traces are off or the span already started.
            let _ = span.set_parent(parent);
        }
    }

    /// A context not to be sampled: continued, it keeps a span out of the
    /// export under a parent-based sampler (the default), as for probes
    /// and scrapes, which would otherwise each be a trace every few
    /// seconds. Its ids are fixed: nothing of it is ever exported.
    pub fn untraced() -> Self {
        Self {
            traceparent: "00-0000000000000000000000000000007f-000000000000007f-00".to_owned(),
            tracestate: None,
        }
    }

    /// The trace id, in the traceparent's hex.
    pub fn trace_id(&self) -> Option<&str> {
        self.traceparent.split('-').nth(1)
    }
}

impl Extractor for TraceContext {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            TRACEPARENT => Some(&self.traceparent),
            TRACESTATE => self.tracestate.as_deref(),
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        vec![TRACEPARENT, TRACESTATE]
    }
}

#[derive(Default)]
struct Carrier(HashMap<String, String>);

impl Injector for Carrier {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_owned(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_context_is_read_from_headers_with_its_state() {
        let headers: HashMap<&str, &str> = [
            (
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            ),
            ("tracestate", "rw=1"),
        ]
        .into();
        let found = TraceContext::from_headers(|n| headers.get(n).copied()).unwrap();
        assert_eq!(found.trace_id(), Some("4bf92f3577b34da6a3ce929d0e0e4736"));
        assert_eq!(found.tracestate.as_deref(), Some("rw=1"));
        assert_eq!(TraceContext::from_headers(|_| None), None);
    }

    /// Keeps what it is given.
    #[derive(Debug, Clone, Default)]
    struct Kept(std::sync::Arc<std::sync::Mutex<Vec<opentelemetry_sdk::trace::SpanData>>>);

    impl Kept {
        /// An exporter that hands each span to the returned `Kept` as it ends.
        fn exporter() -> (Self, Exporter) {
            let kept = Self::default();
            let provider = SdkTracerProvider::builder()
                .with_simple_exporter(kept.clone())
                .build();
            (kept, Exporter { provider })
        }
    }

    impl opentelemetry_sdk::trace::SpanExporter for Kept {
        async fn export(
            &self,
            batch: Vec<opentelemetry_sdk::trace::SpanData>,
        ) -> opentelemetry_sdk::error::OTelSdkResult {
            self.0.lock().unwrap().extend(batch);
            Ok(())
        }
    }

    #[test]
    fn a_caller_s_context_is_continued_and_a_handed_on_span_is_exported() {
        let (kept, exporter) = Kept::exporter();
        let subscriber = crate::telemetry::subscriber(
            tracing_subscriber::EnvFilter::new("info"),
            false,
            Some(&exporter),
        );
        let caller = TraceContext {
            traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
            tracestate: None,
        };
        ENABLED.store(true, Ordering::Relaxed);
        let handed = tracing::subscriber::with_default(subscriber, || {
            let request = tracing::info_span!("request");
            caller.continue_in(&request);
            let _in_request = request.enter();
            let publish = tracing::info_span!("publish");
            let _in_publish = publish.enter();
            TraceContext::of(&tracing::Span::current())
        });
        let spans = kept.0.lock().unwrap().clone();
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
        assert_eq!(names, ["publish", "request"]);
        let (publish, request) = (&spans[0], &spans[1]);
        assert_eq!(request.parent_span_id.to_string(), "00f067aa0ba902b7");
        assert_eq!(publish.parent_span_id, request.span_context.span_id());
        let handed = handed.expect("the publish span's context");
        assert_eq!(handed.trace_id(), Some("4bf92f3577b34da6a3ce929d0e0e4736"));
        assert!(handed
            .traceparent
            .contains(&publish.span_context.span_id().to_string()));
    }

    #[tracing::instrument(skip_all)]
    async fn publish() -> Option<TraceContext> {
        let handed = TraceContext::of(&tracing::Span::current());
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        handed
    }

    #[tracing::instrument(skip_all)]
    async fn publish_board() -> Option<TraceContext> {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        publish().await
    }

    // Traces are on for this process's tests from here on (harmless: the
    // other tests' spans have no OpenTelemetry layer).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_span_handed_on_from_instrumented_async_code_is_exported() {
        use tracing::instrument::WithSubscriber;
        use tracing::Instrument;
        let (kept, exporter) = Kept::exporter();
        let subscriber = crate::telemetry::subscriber(
            tracing_subscriber::EnvFilter::new("info"),
            false,
            Some(&exporter),
        );
        let dispatch = tracing::Dispatch::new(subscriber);
        ENABLED.store(true, Ordering::Relaxed);
        let handed = tokio::spawn(
            async move {
                let request = tracing::info_span!("request");
                let answer = publish_board().instrument(request.clone());
                answer.await
            }
            .with_subscriber(dispatch),
        )
        .await
        .unwrap();
        let spans = kept.0.lock().unwrap().clone();
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
        assert_eq!(names, ["publish", "publish_board", "request"]);
        let handed = handed.expect("the publish span's context");
        assert!(handed
            .traceparent
            .contains(&spans[0].span_context.span_id().to_string()));
        assert_eq!(handed.tracestate, None);
    }

    #[test]
    fn with_traces_off_no_span_has_a_context_to_carry() {
        assert_eq!(TraceContext::of(&tracing::info_span!("request")), None);
    }
}
