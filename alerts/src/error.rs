//! The alerts crate's one error type. The API maps it to its answers in
//! one place (`api/src/alerting`); the projector logs it.

pub use ratewire_service::body::Problems as FieldErrors;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request its owner must correct: every bad field named.
    #[error("validation failed: {0:?}")]
    Validation(FieldErrors),
    /// No such webhook or alert of this owner (another's reads the same).
    #[error("{0}")]
    NotFound(&'static str),
    /// The request does not fit what it names as it is now (a message
    /// delivered already).
    #[error("{0}")]
    Conflict(&'static str),
    /// The owner holds as many of something as it may.
    #[error("{0}")]
    LimitReached(String),
    /// Webhooks need `RATEWIRE_WEBHOOK_SECRETS_KEY`, which is not set.
    #[error("{0}")]
    NotConfigured(&'static str),
    #[error("postgres: {0}")]
    Postgres(#[from] sqlx::Error),
    #[error("migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A validation error naming one field.
    pub fn validation(field: &str, message: impl Into<String>) -> Self {
        Error::Validation(FieldErrors::from([(
            field.to_owned(),
            vec![message.into()],
        )]))
    }
}

impl From<ratewire_readmodel::Error> for Error {
    fn from(e: ratewire_readmodel::Error) -> Self {
        match e {
            ratewire_readmodel::Error::Postgres(e) => Error::Postgres(e),
            ratewire_readmodel::Error::Migrate(e) => Error::Migrate(e),
            ratewire_readmodel::Error::Redis(e) => Error::Redis(e),
        }
    }
}
