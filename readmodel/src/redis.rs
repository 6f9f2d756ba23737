//! Redis: the connection every reader and writer of the views uses, and the
//! keys the views live under.
//!
//! Key layout, under the prefix `P` of a read-model generation
//! (`{RATEWIRE_REDIS_PREFIX}{schema}:`, see [`crate::generation`]):
//! - `P view:rates:bank:{id}:{variant}`: one bank's /rates element (variant
//!   `00`..`11`: transactional, social links);
//! - `P view:banks:bank:{id}:{0|1}`: one bank's /banks element (with recent
//!   rates or not);
//! - `P view:{rates|banks}:all:{variant}`: every active bank's elements,
//!   comma-joined in id order, composed inside Redis so concurrent projectors
//!   (each owning some banks) never interleave a stale list;
//! - `P view:banks:active`: sorted set of active bank ids (score = id);
//! - `P view:currencies`: the whole /currencies body;
//! - `P view:best:{CODE}`: the whole best-rates body of one currency;
//! - `P view:versions`: the snapshot version each view was rendered at;
//! - `P view:etags`: each view's fingerprint ([`crate::views::digest`]),
//!   written with it: the API's `ETag`, and how a writer knows a rendering
//!   changes nothing (then nothing is written);
//! - `P changes`: a stream of what changed, one entry per bank whose
//!   /rates element changed (`board:{id}:{codes}`) and per currency whose
//!   best rates changed (`best:{CODE}`), added in the same script as the
//!   views, so an entry is there only once its views are; trimmed by age.
//!   API instances read it for the live stream and their caches.
//!
//! The API wraps these bodies in the outer envelope and sends them unparsed.

use std::time::Duration;

use ratewire_proto::{BankId, CurrencyCode};
use redis::aio::ConnectionManager;

use crate::error::Result;
use crate::views::RatesVariant;

/// A Redis connection that reconnects by itself and never waits long: a
/// Redis outage turns into fast errors, never a hang.
pub fn connect(url: &str) -> Result<ConnectionManager> {
    let client = redis::Client::open(url)?;
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(1)))
        .set_response_timeout(Some(Duration::from_secs(2)))
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(500));
    Ok(ConnectionManager::new_lazy_with_config(client, config)?)
}

/// Whether Redis answers within a second (for /readyz).
pub async fn ping(mut conn: ConnectionManager) -> bool {
    let cmd = redis::cmd("PING");
    let ping = cmd.query_async::<String>(&mut conn);
    matches!(
        tokio::time::timeout(Duration::from_secs(1), ping).await,
        Ok(Ok(_))
    )
}

/// Stops the process when Redis answers and is older than this build
/// supports; `Err` when it does not answer (nothing to check yet).
pub async fn require_version(mut conn: ConnectionManager) -> Result<()> {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn)
        .await?;
    if let Err(message) = ratewire_service::compatibility::redis_version_ok(&info) {
        ratewire_service::compatibility::stop(&message);
    }
    Ok(())
}

/// The keys of one generation's views.
#[derive(Debug, Clone)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    pub fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.to_owned(),
        }
    }

    /// The generation's prefix, which every key below starts with.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A pattern matching every view key under this prefix.
    pub fn all_views(&self) -> String {
        format!("{}view:*", self.prefix)
    }

    pub fn rates_bank(&self, id: BankId, variant: RatesVariant) -> String {
        format!("{}view:rates:bank:{}:{}", self.prefix, id, variant.tag())
    }

    pub fn rates_all(&self, variant: RatesVariant) -> String {
        format!("{}view:rates:all:{}", self.prefix, variant.tag())
    }

    pub fn banks_bank(&self, id: BankId, with_recent: bool) -> String {
        format!(
            "{}view:banks:bank:{}:{}",
            self.prefix,
            id,
            u8::from(with_recent)
        )
    }

    pub fn banks_all(&self, with_recent: bool) -> String {
        format!("{}view:banks:all:{}", self.prefix, u8::from(with_recent))
    }

    pub fn currencies(&self) -> String {
        format!("{}view:currencies", self.prefix)
    }

    pub fn best(&self, code: CurrencyCode) -> String {
        format!("{}view:best:{}", self.prefix, code)
    }

    pub fn active_banks(&self) -> String {
        format!("{}view:banks:active", self.prefix)
    }

    /// The hash of each view's version (the snapshot it was read in), so
    /// no older rendering overwrites a newer one.
    pub fn view_versions(&self) -> String {
        format!("{}view:versions", self.prefix)
    }

    /// The hash of each view's fingerprint (its `ETag`).
    pub fn view_etags(&self) -> String {
        format!("{}view:etags", self.prefix)
    }

    /// The stream of changes (see the module docs).
    pub fn changes(&self) -> String {
        format!("{}changes", self.prefix)
    }
}
