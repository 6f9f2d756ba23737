//! Webhooks and rate alerts as their owners manage them: stored and
//! checked by the alerts crate's registry (`ratewire_alerts::registry`),
//! which the routes call; here its errors become the API's, in one place.

pub use ratewire_alerts::registry::Registry as Alerting;

use crate::error::Error;

impl From<ratewire_alerts::Error> for Error {
    fn from(e: ratewire_alerts::Error) -> Self {
        use ratewire_alerts::Error as Alerts;
        match e {
            Alerts::Validation(errors) => Error::Validation(errors),
            Alerts::NotFound(what) => Error::NotFound(what),
            Alerts::Conflict(what) => Error::Conflict(what),
            Alerts::LimitReached(message) => Error::LimitReached(message),
            Alerts::NotConfigured(what) => Error::NotConfigured(what),
            Alerts::Postgres(e) => Error::Postgres(e),
            Alerts::Redis(e) => Error::Redis(e),
            Alerts::Migrate(e) => Error::Startup(format!("alerts migrations: {e}")),
        }
    }
}
