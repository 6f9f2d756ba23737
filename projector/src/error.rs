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
    /// Another fold applied some of a batch's events meanwhile: the batch
    /// is tried again.
    #[error(transparent)]
    AppliedMeanwhile(#[from] crate::fold::write::AppliedMeanwhile),
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

impl From<crate::fold::write::WriteError> for Error {
    fn from(e: crate::fold::write::WriteError) -> Self {
        match e {
            crate::fold::write::WriteError::Database(e) => Error::Postgres(e),
            crate::fold::write::WriteError::Raced(e) => Error::AppliedMeanwhile(e),
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
