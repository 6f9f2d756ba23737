//! Writes rendered views to Redis, under the keys the read model names
//! (`ratewire_readmodel::redis::Keys`, where the key layout is described).

use ratewire_proto::{BankId, CurrencyCode};
use ratewire_readmodel::generation;
use ratewire_readmodel::redis::Keys;
use ratewire_readmodel::store::Version;
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

/// Writes views only where no newer snapshot's rendering is stored: each
/// key's version (`xmax:settled`, see `store::Version`) is kept in one hash
/// beside the views. `ARGV`: the hash, the update's version (two numbers),
/// the active-banks set, then `op, key, value` triples: `S` sets, `D`
/// deletes, `A`/`R` add or remove a bank id in the active set (the key is
/// then only the name its version is kept under). Returns how many were
/// written.
const WRITE_IF_NEWER: &str = r#"
local versions, xmax, settled, active = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local stamp = ARGV[2] .. ':' .. ARGV[3]
local written = 0
for i = 5, #ARGV, 3 do
  local op, key, value = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local stored = redis.call('HGET', versions, key)
  local newer = true
  if stored then
    local sx, ss = string.match(stored, '^(%-?%d+):(%-?%d+)$')
    sx, ss = tonumber(sx), tonumber(ss)
    if sx > xmax or (sx == xmax and ss > settled) then newer = false end
  end
  if newer then
    if op == 'S' then redis.call('SET', key, value)
    elseif op == 'D' then redis.call('DEL', key)
    elseif op == 'A' then redis.call('ZADD', active, value, value)
    elseif op == 'R' then redis.call('ZREM', active, value) end
    redis.call('HSET', versions, key, stamp)
    written = written + 1
  end
end
return written
"#;

/// What one refresh writes, read in one snapshot.
pub struct ViewUpdate {
    /// The snapshot the views were read in: what an older one can never
    /// overwrite.
    pub version: Version,
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

impl ViewUpdate {
    /// Nothing yet, read at `version`.
    pub fn at(version: Version) -> Self {
        Self {
            version,
            banks: Vec::new(),
            currencies: None,
            best: Vec::new(),
            compose: false,
        }
    }

    fn is_empty(&self) -> bool {
        self.banks.is_empty() && self.currencies.is_none() && self.best.is_empty()
    }
}

#[derive(Clone)]
pub struct RedisViews {
    conn: ConnectionManager,
    keys: Keys,
    style: ViewStyle,
    compose: redis::Script,
    write_if_newer: redis::Script,
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
            write_if_newer: redis::Script::new(WRITE_IF_NEWER),
        }
    }

    /// Writes one refresh, each view only if no newer snapshot's rendering
    /// is already there (one script: atomic), then recomposes the all-banks
    /// lists when asked.
    pub async fn apply(&mut self, update: &ViewUpdate) -> Result<()> {
        let mut script = self.write_if_newer.prepare_invoke();
        script
            .arg(self.keys.view_versions())
            .arg(update.version.xmax)
            .arg(update.version.settled)
            .arg(self.keys.active_banks());
        let mut write = |op: &str, key: String, value: &str| {
            script.arg(op).arg(key).arg(value);
        };
        for (id, view) in &update.banks {
            let active = format!("{}:{id}", self.keys.active_banks());
            match view.as_ref().filter(|v| v.bank.active) {
                Some(view) => {
                    for variant in RatesVariant::ALL {
                        let body = rates_element(view, variant, &self.style);
                        write("S", self.keys.rates_bank(*id, variant), &body);
                    }
                    for with_recent in [false, true] {
                        let body = banks_element(view, with_recent, &self.style);
                        write("S", self.keys.banks_bank(*id, with_recent), &body);
                    }
                    write("A", active, &id.to_string());
                }
                None => {
                    for variant in RatesVariant::ALL {
                        write("D", self.keys.rates_bank(*id, variant), "");
                    }
                    for with_recent in [false, true] {
                        write("D", self.keys.banks_bank(*id, with_recent), "");
                    }
                    write("R", active, &id.to_string());
                }
            }
        }
        if let Some(body) = &update.currencies {
            write("S", self.keys.currencies(), body);
        }
        for (code, body) in &update.best {
            match body {
                Some(body) => write("S", self.keys.best(*code), body),
                None => write("D", self.keys.best(*code), ""),
            };
        }
        let written: i64 = script.invoke_async(&mut self.conn).await?;
        if written == 0 && !update.is_empty() {
            tracing::debug!(?update.version, "every view of this update was already newer");
        }
        if update.compose {
            self.compose_all().await?;
        }
        Ok(())
    }

    /// Forgets which snapshot each view was written at, so the next writes
    /// land whatever they are.
    pub async fn forget_versions(&mut self) -> Result<()> {
        redis::cmd("DEL")
            .arg(self.keys.view_versions())
            .query_async::<()>(&mut self.conn)
            .await?;
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
