//! Writes rendered views to Redis, under the keys the read model names
//! (`ratewire_readmodel::redis::Keys`, where the key layout is described).

use ratewire_proto::{BankId, CurrencyCode};
use ratewire_readmodel::generation::Generation;
use ratewire_readmodel::redis::Connection;
use ratewire_readmodel::redis::Keys;
use ratewire_readmodel::store::Version;
use ratewire_readmodel::views::{
    self, banks_element, rates_element, BankView, RatesVariant, ViewStyle,
};
use ratewire_readmodel::ReadModelSettings;

use crate::error::Result;

/// A command over many keys, in chunks (unpack has a stack limit), after
/// an argument of its own if `first` is not nil.
const OVER: &str = r#"
local function over(command, first, keys)
  local out = {}
  for i = 1, #keys, 1000 do
    local chunk = {}
    for j = i, math.min(i + 999, #keys) do chunk[#chunk + 1] = keys[j] end
    local got
    if first then
      got = redis.call(command, first, unpack(chunk))
    else
      got = redis.call(command, unpack(chunk))
    end
    for k = 1, #chunk do out[#out + 1] = got[k] end
  end
  return out
end
"#;

/// The active banks and the version each one's views were written at, in
/// one read. `ARGV`: what comes before and after a bank id in the key whose
/// version is read, and the versions hash.
const BANK_VERSIONS: &str = r#"
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
local fields = {}
for i, id in ipairs(ids) do fields[i] = ARGV[1] .. id .. ARGV[2] end
return {ids, over('HMGET', ARGV[3], fields)}
"#;

/// Writes views only where no newer snapshot's rendering is stored: each
/// key's version (`xmax:settled`, see `store::Version`) is kept in one hash
/// beside the views, and each view's fingerprint in another. `ARGV`: the
/// versions hash, the update's version (two numbers), the active-banks set,
/// the fingerprints hash, the changes stream and the oldest id it keeps,
/// then `op, key, value, fingerprint` quadruples: `S` sets (unless the
/// stored fingerprint is the same: nothing changed), `D` deletes, `A`/`R`
/// add or remove a bank id in the active set (the key is then only the
/// name its version is kept under), `F` and `G` set and delete whatever
/// version is stored, `E` adds `value` to the changes stream
/// if a view since the previous `E` changed (written or removed). Every
/// view the API serves as stored is followed by an `E` naming it: API
/// instances that keep views drop them on it. The hash's `~high` field
/// keeps the greatest `xmax` any write carried (see
/// [`RedisViews::ahead_of`]). Returns how many were written.
const WRITE_IF_NEWER: &str = r#"
local versions, xmax, settled, active = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local etags, stream, oldest = ARGV[5], ARGV[6], ARGV[7]
local stamp = ARGV[2] .. ':' .. ARGV[3]
local written, changed = 0, false
local high = tonumber(redis.call('HGET', versions, '~high') or '0')
if high < xmax then redis.call('HSET', versions, '~high', ARGV[2]) end
for i = 8, #ARGV, 4 do
  local op, key, value, fingerprint = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  if op == 'E' then
    if changed then
      redis.call('XADD', stream, 'MINID', '~', oldest, '*', 'e', value)
    end
    changed = false
  else
    local stored = redis.call('HGET', versions, key)
    local newer = true
    if op == 'F' then op, stored = 'S', false end
    if op == 'G' then op, stored = 'D', false end
    if stored then
      local sx, ss = string.match(stored, '^(%-?%d+):(%-?%d+)$')
      sx, ss = tonumber(sx), tonumber(ss)
      if sx > xmax or (sx == xmax and ss > settled) then newer = false end
    end
    if newer then
      if op == 'S' then
        if redis.call('HGET', etags, key) ~= fingerprint or redis.call('EXISTS', key) == 0 then
          redis.call('SET', key, value)
          redis.call('HSET', etags, key, fingerprint)
          changed = true
        end
      elseif op == 'D' then
        if redis.call('DEL', key) == 1 then changed = true end
        redis.call('HDEL', etags, key)
      elseif op == 'A' then redis.call('ZADD', active, value, value)
      elseif op == 'R' then redis.call('ZREM', active, value) end
      redis.call('HSET', versions, key, stamp)
      written = written + 1
    end
  end
end
return written
"#;

/// A version as the views' versions hash keeps it (`xmax:settled`).
fn parse_stamp(stamp: &str) -> Option<Version> {
    let (xmax, settled) = stamp.split_once(':')?;
    Some(Version {
        xmax: xmax.parse().ok()?,
        settled: settled.parse().ok()?,
    })
}

/// How long the changes stream keeps an entry unless configured otherwise
/// (a client of the live stream can resume within it).
pub const CHANGES_KEPT: std::time::Duration = std::time::Duration::from_secs(3600);

/// A rendered view and its fingerprint.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub body: String,
    pub digest: String,
}

impl Rendered {
    pub fn new(body: String) -> Self {
        let digest = views::digest(&body);
        Self { body, digest }
    }
}

/// One reference source's views: the days it published, and the days
/// rendered again (`None`: no longer stored).
#[derive(Debug, Clone)]
pub struct ReferenceViews {
    pub source: String,
    pub dates: Rendered,
    pub days: Vec<(chrono::NaiveDate, Option<Rendered>)>,
}

/// Where the views of one read-model generation go.
#[derive(Clone)]
pub struct Target {
    /// The generation's read schema and identity, `pool`'s search path.
    pub generation: String,
    pub pool: sqlx::PgPool,
    pub views: RedisViews,
}

/// What one refresh writes, read in one snapshot.
pub struct ViewUpdate {
    /// The snapshot the views were read in: what an older one can never
    /// overwrite.
    pub version: Version,
    /// `Some(view)` of an active bank is shown; anything else is removed.
    pub banks: Vec<(BankId, Option<BankView>)>,
    /// The rendered /currencies body, when it was recomputed.
    pub currencies: Option<Rendered>,
    /// Rendered best-rates bodies, each fingerprinted without its render
    /// time (a recomputation that changes nothing else writes nothing);
    /// `None` removes a currency no active bank quotes.
    pub best: Vec<(CurrencyCode, Option<Rendered>)>,
    /// Reference sources' views: each source's days and the days rendered.
    pub reference: Vec<ReferenceViews>,
    /// Write the views whatever version Redis holds (the views over all
    /// banks: see `aggregates`); the bank views never are.
    pub forced: bool,
}

impl ViewUpdate {
    /// Reads and renders the views of `banks`: one update per slice of 500,
    /// so a rebuild of many banks holds no huge result at once, each with
    /// the version of the snapshot it was read in.
    pub async fn load_banks(pool: &sqlx::PgPool, banks: &[BankId]) -> Result<Vec<ViewUpdate>> {
        let mut updates = Vec::new();
        for slice in banks.chunks(500) {
            if let (Some(version), views) =
                ratewire_readmodel::store::bank_views_at(pool, slice).await?
            {
                let mut update = ViewUpdate::at(version);
                update.banks = views;
                updates.push(update);
            }
        }
        Ok(updates)
    }

    /// Nothing yet, read at `version`.
    pub fn at(version: Version) -> Self {
        Self {
            version,
            banks: Vec::new(),
            currencies: None,
            best: Vec::new(),
            reference: Vec::new(),
            forced: false,
        }
    }

    fn is_empty(&self) -> bool {
        self.banks.is_empty()
            && self.currencies.is_none()
            && self.best.is_empty()
            && self.reference.is_empty()
    }
}

#[derive(Clone)]
pub struct RedisViews {
    conn: Connection,
    keys: Keys,
    style: ViewStyle,
    bank_versions: redis::Script,
    write_if_newer: redis::Script,
    /// How long the changes stream keeps an entry.
    changes_kept: std::time::Duration,
}

impl RedisViews {
    /// The views of `generation`, as `settings` place and style them.
    pub fn for_generation(
        conn: Connection,
        settings: &ReadModelSettings,
        generation: &Generation,
    ) -> Self {
        let prefix = generation.views_prefix(&settings.redis_prefix);
        Self::new(conn, &prefix, settings.view_style()).keeping_changes(settings.stream_retention())
    }

    pub fn new(conn: Connection, prefix: &str, style: ViewStyle) -> Self {
        Self {
            conn,
            keys: Keys::new(prefix),
            style,
            bank_versions: redis::Script::new(&format!("{OVER}{BANK_VERSIONS}")),
            write_if_newer: redis::Script::new(WRITE_IF_NEWER),
            changes_kept: CHANGES_KEPT,
        }
    }

    /// The oldest id the changes stream keeps now.
    fn oldest_change(&self) -> String {
        let oldest = chrono::Utc::now().timestamp_millis()
            - i64::try_from(self.changes_kept.as_millis()).unwrap_or(i64::MAX);
        format!("{}-0", oldest.max(0))
    }

    /// Keeps change entries this long.
    pub fn keeping_changes(mut self, kept: std::time::Duration) -> Self {
        self.changes_kept = kept;
        self
    }

    /// Writes one refresh, each view only if no newer snapshot's rendering
    /// is already there (one script: atomic).
    pub async fn apply(&mut self, update: &ViewUpdate) -> Result<()> {
        let mut script = self.write_if_newer.prepare_invoke();
        // Every key it writes shares the generation's hash slot; naming one
        // routes the script to that slot's node in a cluster.
        script
            .key(self.keys.view_versions())
            .arg(self.keys.view_versions())
            .arg(update.version.xmax)
            .arg(update.version.settled)
            .arg(self.keys.active_banks())
            .arg(self.keys.view_etags())
            .arg(self.keys.changes())
            .arg(self.oldest_change());
        let mut write = |op: &str, key: String, value: &str, digest: &str| {
            script.arg(op).arg(key).arg(value).arg(digest);
        };
        for (id, view) in &update.banks {
            let active = format!("{}:{id}", self.keys.active_banks());
            match view.as_ref().filter(|v| v.bank.active) {
                // The bank's elements of the all-banks lists, which the
                // API joins (`ratewire_api::views::lists`): in /rates in each of
                // its shapes, in /banks without and with recent boards.
                Some(view) => {
                    for variant in RatesVariant::ALL {
                        let rendered = Rendered::new(rates_element(view, variant, &self.style));
                        write(
                            "S",
                            self.keys.rates_bank(*id, variant),
                            &rendered.body,
                            &rendered.digest,
                        );
                    }
                    for with_recent in [false, true] {
                        let rendered = Rendered::new(banks_element(view, with_recent, &self.style));
                        write(
                            "S",
                            self.keys.banks_bank(*id, with_recent),
                            &rendered.body,
                            &rendered.digest,
                        );
                    }
                    write("A", active, &id.to_string(), "");
                    let codes: Vec<&str> = view.rates.iter().map(|r| r.currency.as_str()).collect();
                    write(
                        "E",
                        String::new(),
                        &format!("board:{id}:{}", codes.join(",")),
                        "",
                    );
                }
                None => {
                    for variant in RatesVariant::ALL {
                        write("D", self.keys.rates_bank(*id, variant), "", "");
                    }
                    for with_recent in [false, true] {
                        write("D", self.keys.banks_bank(*id, with_recent), "", "");
                    }
                    write("R", active, &id.to_string(), "");
                    // No currencies: the live stream has nothing to show.
                    write("E", String::new(), &format!("board:{id}:"), "");
                }
            }
        }
        let (set, delete) = if update.forced {
            ("F", "G")
        } else {
            ("S", "D")
        };
        if let Some(rendered) = &update.currencies {
            write(
                set,
                self.keys.currencies(),
                &rendered.body,
                &rendered.digest,
            );
            write("E", String::new(), "currencies", "");
        }
        for (code, rendered) in &update.best {
            match rendered {
                Some(rendered) => {
                    write(set, self.keys.best(*code), &rendered.body, &rendered.digest);
                    write("E", String::new(), &format!("best:{code}"), "");
                }
                None => {
                    write(delete, self.keys.best(*code), "", "");
                    write("E", String::new(), &format!("best:{code}"), "");
                }
            };
        }
        for views in &update.reference {
            let source = &views.source;
            for (date, rendered) in &views.days {
                let key = self.keys.reference_day(source, *date);
                match rendered {
                    Some(rendered) => write(set, key, &rendered.body, &rendered.digest),
                    None => write(delete, key, "", ""),
                }
                write(
                    "E",
                    String::new(),
                    &format!("reference:{source}:{date}"),
                    "",
                );
            }
            write(
                set,
                self.keys.reference_dates(source),
                &views.dates.body,
                &views.dates.digest,
            );
            write("E", String::new(), &format!("reference:{source}"), "");
        }
        let written: i64 = script.invoke_async(&mut self.conn).await?;
        if written == 0 && !update.is_empty() {
            tracing::debug!(?update.version, "every view of this update was already newer");
        }
        Ok(())
    }

    /// Forgets which snapshot each view was written at and what it held,
    /// so the next writes land whatever they are.
    pub async fn forget_versions(&mut self) -> Result<()> {
        redis::cmd("DEL")
            .arg(self.keys.view_versions())
            .arg(self.keys.view_etags())
            .query_async::<()>(&mut self.conn)
            .await?;
        Ok(())
    }

    /// Whether these views carry a snapshot position beyond `now` (the
    /// `xmax` of a snapshot taken now): positions never go back within one
    /// Postgres, so Postgres is then a restore from before those views
    /// were written, and their versions mean nothing to it.
    pub async fn ahead_of(&mut self, now: Version) -> Result<Option<i64>> {
        let high: Option<i64> = redis::cmd("HGET")
            .arg(self.keys.view_versions())
            .arg("~high")
            .query_async(&mut self.conn)
            .await?;
        Ok(high.filter(|high| *high > now.xmax))
    }

    /// The mark these views carry (see the projector's `restore_marks`).
    pub async fn restore_mark(&mut self) -> Result<Option<String>> {
        Ok(redis::cmd("HGET")
            .arg(self.keys.view_versions())
            .arg("~mark")
            .query_async(&mut self.conn)
            .await?)
    }

    pub async fn set_restore_mark(&mut self, mark: &str) -> Result<()> {
        redis::cmd("HSET")
            .arg(self.keys.view_versions())
            .arg("~mark")
            .arg(mark)
            .query_async::<()>(&mut self.conn)
            .await?;
        Ok(())
    }

    /// Every bank in the active set and the version its views were last
    /// written at, by any projector (`None`: none recorded).
    pub async fn bank_versions(&mut self) -> Result<Vec<(BankId, Option<Version>)>> {
        // One bank view's version stands for all of the bank's.
        let (before, after) = self.keys.rates_bank_around(RatesVariant::ALL[0]);
        let (ids, stamps): (Vec<i64>, Vec<Option<String>>) = self
            .bank_versions
            .key(self.keys.active_banks())
            .arg(before)
            .arg(after)
            .arg(self.keys.view_versions())
            .invoke_async(&mut self.conn)
            .await?;
        let versions = ids
            .into_iter()
            .zip(stamps)
            .filter_map(|(id, stamp)| {
                let id = BankId::new(id).ok()?;
                Some((id, stamp.as_deref().and_then(parse_stamp)))
            })
            .collect();
        Ok(versions)
    }

    pub fn style(&self) -> &ViewStyle {
        &self.style
    }

    /// Deletes every view under this prefix (a replay starts from nothing).
    pub async fn clear(&mut self) -> Result<usize> {
        let keys = self.conn.scan_match(&self.keys.all_views()).await?;
        for chunk in keys.chunks(1000) {
            redis::cmd("UNLINK")
                .arg(chunk)
                .query_async::<()>(&mut self.conn)
                .await?;
        }
        Ok(keys.len())
    }

    /// Records that every view was written (see [`Keys::views_built`]).
    /// The same value whoever wrote it: a generation's views are the same
    /// bytes however they were made (the e2e fold checks compare them).
    pub async fn mark_built(&mut self) -> Result<()> {
        redis::cmd("SET")
            .arg(self.keys.views_built())
            .arg("1")
            .query_async::<()>(&mut self.conn)
            .await?;
        Ok(())
    }

    /// Whether the views exist at all (false after a flush, on a new
    /// Redis, or before the first rebuild). The API asks the same before
    /// joining a list of the banks' elements.
    pub async fn present(&mut self) -> Result<bool> {
        let exists: bool = redis::cmd("EXISTS")
            .arg(self.keys.views_built())
            .query_async(&mut self.conn)
            .await?;
        Ok(exists)
    }
}
