//! The service shell's one error type; each process turns it into its own.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("binding {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("server: {0}")]
    Server(std::io::Error),
    /// The server task ended without an answer (it panicked).
    #[error("server task: {0}")]
    ServerTask(#[from] tokio::task::JoinError),
    /// The OTLP exporter could not be made from its settings.
    #[error("traces: {0}")]
    Traces(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
