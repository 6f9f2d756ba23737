//! Writes rendered views to Redis and names their keys.
//!
//! Key layout, under the configured prefix `P`:
//! - `P view:rates:bank:{id}:{variant}`: one bank's /rates element;
//! - `P view:rates:all:{variant}`: every active bank's elements, comma-joined
//!   in id order, composed inside Redis so concurrent projectors (each owning
//!   some banks) never interleave a stale list;
//! - `P view:banks:active`: sorted set of active bank ids (score = id).
//!
//! The API wraps these bodies in the outer envelope and sends them unparsed.

use std::time::Duration;

use ratewire_proto::BankId;
use redis::aio::ConnectionManager;

use crate::error::Result;
use crate::views::{rates_element, BankView, RatesVariant, ViewStyle};

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

    pub fn rates_bank(&self, id: BankId, variant: RatesVariant) -> String {
        format!("{}view:rates:bank:{}:{}", self.prefix, id, variant.tag())
    }

    pub fn rates_all(&self, variant: RatesVariant) -> String {
        format!("{}view:rates:all:{}", self.prefix, variant.tag())
    }

    pub fn active_banks(&self) -> String {
        format!("{}view:banks:active", self.prefix)
    }
}

/// Rebuilds every `view:rates:all:*` from the per-bank elements, atomically.
const COMPOSE_ALL: &str = r#"
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
for _, variant in ipairs({'00', '01', '10', '11'}) do
  local parts = {}
  if #ids > 0 then
    local keys = {}
    for i, id in ipairs(ids) do
      keys[i] = ARGV[1] .. 'view:rates:bank:' .. id .. ':' .. variant
    end
    for _, value in ipairs(redis.call('MGET', unpack(keys))) do
      if value then parts[#parts + 1] = value end
    end
  end
  redis.call('SET', ARGV[1] .. 'view:rates:all:' .. variant, table.concat(parts, ','))
end
return #ids
"#;

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

    /// Writes the views of `banks`: `Some(view)` of an active bank is shown,
    /// anything else (inactive, unknown) is removed. Then recomposes the
    /// all-banks views.
    pub async fn publish(&mut self, banks: &[(BankId, Option<BankView>)]) -> Result<()> {
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (id, view) in banks {
            match view.as_ref().filter(|v| v.bank.active) {
                Some(view) => {
                    for variant in RatesVariant::ALL {
                        pipe.set(
                            self.keys.rates_bank(*id, variant),
                            rates_element(view, variant, &self.style),
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
                    pipe.zrem(self.keys.active_banks(), id.get()).ignore();
                }
            }
        }
        pipe.query_async::<()>(&mut self.conn).await?;
        self.compose_all().await
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
    pub async fn present(&mut self) -> Result<bool> {
        let exists: bool = redis::cmd("EXISTS")
            .arg(self.keys.rates_all(RatesVariant::ALL[0]))
            .query_async(&mut self.conn)
            .await?;
        Ok(exists)
    }
}
