//! The projector's one error type.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("postgres: {0}")]
    Postgres(#[from] sqlx::Error),
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("kafka: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
    /// The read model refused (its migrations); its Postgres and Redis
    /// errors are told apart above, as every caller here must.
    #[error("read model: {0}")]
    ReadModel(ratewire_readmodel::Error),
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Service(#[from] ratewire_service::Error),
    /// The alerts crate refused (its migrations, its schema).
    #[error("alerts: {0}")]
    Alerts(ratewire_alerts::Error),
    /// Another fold applied this many of a batch's events meanwhile (two
    /// partitions holding the same event id, folded side by side): the
    /// batch is tried again, and then finds them applied.
    #[error("{0} of the batch's events were applied meanwhile by another fold")]
    AppliedMeanwhile(usize),
    /// A task of this process ended before it answered.
    #[error("the {0} task has stopped")]
    Stopped(&'static str),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<ratewire_alerts::Error> for Error {
    fn from(e: ratewire_alerts::Error) -> Self {
        match e {
            ratewire_alerts::Error::Postgres(e) => Error::Postgres(e),
            ratewire_alerts::Error::Redis(e) => Error::Redis(e),
            other => Error::Alerts(other),
        }
    }
}

impl From<ratewire_readmodel::Error> for Error {
    fn from(e: ratewire_readmodel::Error) -> Self {
        match e {
            ratewire_readmodel::Error::Postgres(e) => Error::Postgres(e),
            ratewire_readmodel::Error::Redis(e) => Error::Redis(e),
            other => Error::ReadModel(other),
        }
    }
}
