//! The projector's one error type.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("postgres: {0}")]
    Postgres(#[from] sqlx::Error),
    #[error("migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("kafka: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
    #[error("{0}")]
    Config(String),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// A task of this process ended before it answered.
    #[error("the {0} task has stopped")]
    Stopped(&'static str),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
