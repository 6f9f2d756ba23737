//! Writes rendered views to Redis and names their keys.
//!
//! Key layout, under the prefix `P` of a read-model generation
//! (`{RATEWIRE_REDIS_PREFIX}{schema}:`, see `generation`):
//! - `P view:rates:bank:{id}:{variant}`: one bank's /rates element (variant
//!   `00`..`11`: transactional, social links);
//! - `P view:banks:bank:{id}:{0|1}`: one bank's /banks element (with recent
//!   rates or not);
//! - `P view:{rates|banks}:all:{variant}`: every active bank's elements,
//!   comma-joined in id order, composed inside Redis so concurrent projectors
//!   (each owning some banks) never interleave a stale list;
//! - `P view:banks:active`: sorted set of active bank ids (score = id);
//! - `P view:currencies`: the whole /currencies body;
//! - `P view:best:{CODE}`: the whole best-rates body of one currency.
//!
//! The API wraps these bodies in the outer envelope and sends them unparsed.

use std::time::Duration;

use ratewire_proto::{BankId, CurrencyCode};
use redis::aio::ConnectionManager;

use crate::error::Result;
use crate::views::{banks_element, rates_element, BankView, RatesVariant, ViewStyle};

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
}

/// Rebuilds every `view:{family}:all:*` from the per-bank elements, atomically.
const COMPOSE_ALL: &str = r#"
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
local families = {rates = {'00', '01', '10', '11'}, banks = {'0', '1'}}
for family, variants in pairs(families) do
  for _, variant in ipairs(variants) do
    local parts = {}
    if #ids > 0 then
      local keys = {}
      for i, id in ipairs(ids) do
        keys[i] = ARGV[1] .. 'view:' .. family .. ':bank:' .. id .. ':' .. variant
      end
      for _, value in ipairs(redis.call('MGET', unpack(keys))) do
        if value then parts[#parts + 1] = value end
      end
    end
    redis.call('SET', ARGV[1] .. 'view:' .. family .. ':all:' .. variant, table.concat(parts, ','))
  end
end
return #ids
"#;

/// What one refresh writes.
#[derive(Default)]
pub struct ViewUpdate {
    /// `Some(view)` of an active bank is shown; anything else is removed.
    pub banks: Vec<(BankId, Option<BankView>)>,
    /// The rendered /currencies body, when it was recomputed.
    pub currencies: Option<String>,
    /// Rendered best-rates bodies; `None` removes a currency no active bank quotes.
    pub best: Vec<(CurrencyCode, Option<String>)>,
    /// Recompose the all-banks lists from the per-bank elements (a few
    /// hundred kilobytes of string work inside Redis: done on the tick, not
    /// after every batch).
    pub compose: bool,
}

#[derive(Clone)]
pub struct RedisViews {
    conn: ConnectionManager,
    keys: Keys,
    style: ViewStyle,
    compose: redis::Script,
}

impl RedisViews {
    pub fn new(conn: ConnectionManager, prefix: &str, style: ViewStyle) -> Self {
        Self {
            conn,
            keys: Keys::new(prefix),
            style,
            compose: redis::Script::new(COMPOSE_ALL),
        }
    }

    /// Writes one refresh in a single atomic pipeline, then recomposes the
    /// all-banks lists.
    pub async fn apply(&mut self, update: &ViewUpdate) -> Result<()> {
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (id, view) in &update.banks {
            match view.as_ref().filter(|v| v.bank.active) {
                Some(view) => {
                    for variant in RatesVariant::ALL {
                        pipe.set(
                            self.keys.rates_bank(*id, variant),
                            rates_element(view, variant, &self.style),
                        )
                        .ignore();
                    }
                    for with_recent in [false, true] {
                        pipe.set(
                            self.keys.banks_bank(*id, with_recent),
                            banks_element(view, with_recent, &self.style),
                        )
                        .ignore();
                    }
                    pipe.zadd(self.keys.active_banks(), id.get(), id.get())
                        .ignore();
                }
                None => {
                    for variant in RatesVariant::ALL {
                        pipe.del(self.keys.rates_bank(*id, variant)).ignore();
                    }
                    for with_recent in [false, true] {
                        pipe.del(self.keys.banks_bank(*id, with_recent)).ignore();
                    }
                    pipe.zrem(self.keys.active_banks(), id.get()).ignore();
                }
            }
        }
        if let Some(body) = &update.currencies {
            pipe.set(self.keys.currencies(), body).ignore();
        }
        for (code, body) in &update.best {
            match body {
                Some(body) => pipe.set(self.keys.best(*code), body).ignore(),
                None => pipe.del(self.keys.best(*code)).ignore(),
            };
        }
        pipe.query_async::<()>(&mut self.conn).await?;
        if update.compose {
            self.compose_all().await?;
        }
        Ok(())
    }

    pub fn style(&self) -> &ViewStyle {
        &self.style
    }

    pub async fn compose_all(&mut self) -> Result<()> {
        self.compose
            .key(self.keys.active_banks())
            .arg(&self.keys.prefix)
            .invoke_async::<i64>(&mut self.conn)
            .await?;
        Ok(())
    }

    /// Whether the views exist at all (false after a flush or on a new Redis).
    /// Deletes every view under this prefix (a replay starts from nothing).
    pub async fn clear(&mut self) -> Result<usize> {
        let mut cursor: u64 = 0;
        let mut deleted = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(self.keys.all_views())
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut self.conn)
                .await?;
            if !keys.is_empty() {
                deleted += keys.len();
                redis::cmd("UNLINK")
                    .arg(&keys)
                    .query_async::<()>(&mut self.conn)
                    .await?;
            }
            if next == 0 {
                return Ok(deleted);
            }
            cursor = next;
        }
    }

    pub async fn present(&mut self) -> Result<bool> {
        let exists: bool = redis::cmd("EXISTS")
            .arg(self.keys.rates_all(RatesVariant::ALL[0]))
            .query_async(&mut self.conn)
            .await?;
        Ok(exists)
    }
}
