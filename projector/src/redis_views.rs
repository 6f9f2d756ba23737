//! Writes rendered views to Redis, under the keys the read model names
//! (`ratewire_readmodel::redis::Keys`, where the key layout is described).

use ratewire_proto::{BankId, CurrencyCode};
use ratewire_readmodel::generation;
use ratewire_readmodel::redis::Keys;
use ratewire_readmodel::views::{banks_element, rates_element, BankView, RatesVariant, ViewStyle};
use ratewire_readmodel::ReadModelSettings;
use redis::aio::ConnectionManager;

use crate::error::Result;

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
    /// The views of generation `schema`, as `settings` place and style them.
    pub fn for_generation(
        conn: ConnectionManager,
        settings: &ReadModelSettings,
        schema: &str,
    ) -> Self {
        let prefix = generation::views_prefix(&settings.redis_prefix, schema);
        Self::new(conn, &prefix, settings.view_style())
    }

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
            .arg(self.keys.prefix())
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
