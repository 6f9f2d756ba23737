//! What every ratewire process does the same way, written once.
//!
//! Operators rely on the three processes behaving alike: settings from
//! `RATEWIRE_*` variables with the same exit status on a bad one, logs in the
//! same format on stderr, the same metrics names, the same back-off while a
//! dependency is down, 503 while still preparing, SIGTERM handled the same
//! way. Each process only adds its routes and its work.
//!
//! - [`settings`]: parsing the command line and environment (exit 2 naming
//!   the variable), and the settings every process has.
//! - [`telemetry`]: log set-up, and [`traces`]: OpenTelemetry spans over
//!   OTLP when an endpoint is set, and the W3C trace context carried
//!   between processes.
//! - [`metrics`], [`http_metrics`] and [`documented_metrics`]: the Prometheus recorder, `/metrics`,
//!   and the request counter and histogram of every HTTP listener.
//! - [`serve`](mod@serve): binding a listener and serving a router on it until
//!   shutdown; the one place where listener-wide behaviour belongs.
//! - [`readiness`]: answering 503 while a process is still preparing its
//!   dependencies, and [`retry`](mod@retry): trying until a dependency answers.
//! - [`shutdown`]: Ctrl-C and SIGTERM as a cancellation token; [`periodic`]:
//!   housekeeping jobs that run every so often until then; [`progress`]:
//!   how far a long command-line job has come.
//! - [`kafka`]: how ingest and the projector connect to Kafka (TLS, SASL,
//!   other librdkafka properties), as properties for their clients;
//! - [`postgres`]: a lazily connecting pool in a process's own schema;
//!   [`compatibility`]: the dependency versions checked at start.
//! - [`clients`]: telling clients apart (IPv6 by network) and bounded
//!   memories of failed authentications and of credentials known invalid.
//! - [`secret`]: the credential format of publisher tokens and API keys,
//!   and the operator token check; [`operator`]: the extractor that guards
//!   operator endpoints with it; [`openapi`]: the error answers every
//!   OpenAPI document describes alike.
//! - [`body`]: JSON request bodies read as the documents promise (a 400
//!   naming every problem under its field); [`error`]: this crate's one
//!   error type; [`allocator`]: how soon the processes that allocate most
//!   hand freed memory back to the OS.
//! - `testing` (with the `testing` feature, from other crates'
//!   dev-dependencies only): a Postgres database of a test's own.
//!
//! Must not depend on: the event contract (`ratewire-proto`), the read model,
//! Kafka or Redis clients (the Kafka settings are plain properties). It knows nothing of banks or rates.

pub mod allocator;
pub mod body;
pub mod clients;
pub mod compatibility;
pub mod documented_metrics;
pub mod error;
pub mod http_metrics;
pub mod kafka;
pub mod metrics;
pub mod openapi;
pub mod operator;
pub mod periodic;
pub mod postgres;
pub mod progress;
pub mod readiness;
pub mod retry;
pub mod secret;
pub mod serve;
pub mod settings;
pub mod shutdown;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;
pub mod traces;

pub use error::Error;
pub use readiness::Readiness;
pub use retry::retry;
pub use serve::{serve, Listener, ListenerLimits, Listeners, Server, Servers};
pub use settings::{parse_settings, CommandLine};
pub use shutdown::shutdown_on_signal;
pub use telemetry::{init_telemetry, Telemetry};
