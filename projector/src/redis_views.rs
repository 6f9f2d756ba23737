//! Writes rendered views to Redis, under the keys the read model names
//! (`ratewire_readmodel::redis::Keys`, where the key layout is described).

use std::collections::HashMap;

use ratewire_proto::{BankId, CurrencyCode};
use ratewire_readmodel::generation;
use ratewire_readmodel::redis::Connection;
use ratewire_readmodel::redis::Keys;
use ratewire_readmodel::store::Version;
use ratewire_readmodel::views::{
    self, banks_element, rates_element, BankView, RatesVariant, ViewStyle,
};
use ratewire_readmodel::ReadModelSettings;

use crate::error::Result;

/// A command over many keys, in chunks (unpack has a stack limit), after
/// an argument of its own if `first` is not nil; the marks (fingerprints,
/// `-` for none) of a list's elements; and Redis's clock, in microseconds.
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
local function marks(etags, keys)
  local out = {}
  for i, tag in ipairs(over('HMGET', etags, keys)) do out[i] = tag or '-' end
  return table.concat(out, ',')
end
local function clock()
  local now = redis.call('TIME')
  return now[1] .. string.format('%06d', tonumber(now[2]))
end
"#;

/// The all-banks lists (`view:{family}:all:*`) whose elements changed
/// since they were composed, with the elements as they are now: for each,
/// its key, its elements' marks and the elements (nil where missing),
/// after the time it was all read at (Redis's clock, in microseconds).
/// Read in one script, so the elements are the ones the marks name and
/// later than anything read before. A list's fingerprint is made of its
/// elements' fingerprints (`ARGV[2]`: the etags hash), so an unchanged list
/// costs a hash lookup per bank, not the hundreds of kilobytes of string
/// work of composing and hashing it again.
const CHANGED_LISTS: &str = r#"
local read = clock()
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
local changed = {}
local families = {rates = {'00', '01', '10', '11'}, banks = {'0', '1'}}
for family, variants in pairs(families) do
  for _, variant in ipairs(variants) do
    local keys = {}
    for i, id in ipairs(ids) do
      keys[i] = ARGV[1] .. 'view:' .. family .. ':bank:' .. id .. ':' .. variant
    end
    local joined = marks(ARGV[2], keys)
    local fingerprint = string.sub(redis.sha1hex(joined), 1, 16)
    local key = ARGV[1] .. 'view:' .. family .. ':all:' .. variant
    if redis.call('HGET', ARGV[2], key) ~= fingerprint or redis.call('EXISTS', key) == 0 then
      changed[#changed + 1] = {key, joined, over('MGET', nil, keys)}
    end
  end
end
return {read, changed}
"#;

/// Puts in place lists composed outside Redis and stored under keys of
/// their own, each unless the list in place was read later (its read time
/// is kept in the versions hash, under the list's key); a list not put in
/// place is deleted. Elements only ever move forward (see
/// [`WRITE_IF_NEWER`]), so a list read later is as new as any read before
/// it, element by element; a list put in place may already be behind an
/// element written since it was read, and the writer of that element
/// composes again after writing it. `ARGV`: the versions and etags hashes,
/// the changes stream and the oldest id it keeps, the time the lists were
/// read at, then per list its key, the marks it was composed of and the
/// key it was stored under. A read time ahead of Redis's clock orders
/// nothing (see the script). When any list was put in place, adds `lists`
/// to the changes stream, so API instances keeping the lists drop them.
///
/// Put in place only if its elements were unchanged since, lists were
/// rarely composed in time under a steady load: at 100 boards/s about 70%
/// of the compositions were refused, and the lists followed a board by a
/// p50 of 90 ms and a p99 of 480 ms (`/api/v1/banks`, at the API).
///
/// The bodies never pass through the script: a `RENAME` moves one in place
/// whatever its size. The lists used to be concatenated by a script: at
/// 100 boards/s that took 23-34 ms of Redis's time per round (six lists of
/// up to 400 KB, through Lua strings), during which Redis served nothing
/// else.
const PLACE_LISTS: &str = r#"
local versions, etags, stream, oldest = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local read = tonumber(ARGV[5])
local now = tonumber(clock())
local placed = 0
for i = 6, #ARGV, 3 do
  local key, composed, stored = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local before = tonumber(string.match(redis.call('HGET', versions, key) or '', '^read:(%d+)$') or '0')
  -- Read by a clock ahead of this one (a failover, a restore elsewhere):
  -- no order to keep, or no list would be put in place until it caught up.
  if before > now then before = 0 end
  if read >= before and redis.call('EXISTS', stored) == 1 then
    redis.call('RENAME', stored, key)
    redis.call('PERSIST', key)
    redis.call('HSET', versions, key, 'read:' .. ARGV[5])
    redis.call('HSET', etags, key, string.sub(redis.sha1hex(composed), 1, 16))
    placed = placed + 1
  else
    redis.call('DEL', stored)
  end
end
if placed > 0 then
  redis.call('XADD', stream, 'MINID', '~', oldest, '*', 'e', 'lists')
end
return placed
"#;

/// The active banks and the version each one's views were written at,
/// after Redis's clock: what a list composed of views at least as new as
/// these may be put in place as read at (see [`PLACE_LISTS`]). `ARGV`: what
/// comes before and after a bank id in the key whose version is read, and
/// the versions hash.
const BANK_VERSIONS: &str = r#"
local read = clock()
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
local fields = {}
for i, id in ipairs(ids) do fields[i] = ARGV[1] .. id .. ARGV[2] end
return {read, ids, over('HMGET', ARGV[3], fields)}
"#;

/// How long a composed list waits under its own key to be put in place (a
/// projector that dies between the two leaves nothing behind for longer).
const COMPOSED_KEPT_MS: u64 = 60_000;

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
/// instances that keep views drop them on it. Returns how many were
/// written.
const WRITE_IF_NEWER: &str = r#"
local versions, xmax, settled, active = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local etags, stream, oldest = ARGV[5], ARGV[6], ARGV[7]
local stamp = ARGV[2] .. ':' .. ARGV[3]
local written, changed = 0, false
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

/// One active bank's elements of the all-banks lists, each rendered once
/// with its fingerprint: in /rates in each of [`RatesVariant::ALL`], in
/// /banks without and with its recent boards.
pub struct Elements {
    rates: [Rendered; 4],
    banks: [Rendered; 2],
}

/// Which list an element is of: /rates in `RatesVariant::ALL[i]`, /banks
/// without (0) or with (1) recent boards.
#[derive(Clone, Copy)]
enum List {
    Rates(usize),
    Banks(usize),
}

impl Elements {
    fn of(&self, list: List) -> &Rendered {
        match list {
            List::Rates(i) => &self.rates[i],
            List::Banks(i) => &self.banks[i],
        }
    }

    pub fn render(view: &BankView, style: &ViewStyle) -> Self {
        Self {
            rates: RatesVariant::ALL.map(|v| Rendered::new(rates_element(view, v, style))),
            banks: [false, true].map(|r| Rendered::new(banks_element(view, r, style))),
        }
    }
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
    /// Write the views whatever version Redis holds (the views over all
    /// banks: see `aggregates`); the bank views never are.
    pub forced: bool,
}

impl ViewUpdate {
    /// Nothing yet, read at `version`.
    pub fn at(version: Version) -> Self {
        Self {
            version,
            banks: Vec::new(),
            currencies: None,
            best: Vec::new(),
            forced: false,
        }
    }

    fn is_empty(&self) -> bool {
        self.banks.is_empty() && self.currencies.is_none() && self.best.is_empty()
    }
}

/// The elements of a list, comma-separated (as the API sends them between
/// the list's head and tail), written straight into the command that
/// stores it: a list is up to 400 KB, and joining it in a buffer of its
/// own first was one more copy of every list each round.
struct Joined<'a>(Vec<&'a [u8]>);

impl redis::ToRedisArgs for Joined<'_> {
    fn write_redis_args<W>(&self, out: &mut W)
    where
        W: ?Sized + redis::RedisWrite,
    {
        use std::io::Write as _;
        let mut arg = out.writer_for_next_arg();
        for (i, element) in self.0.iter().enumerate() {
            // Into the command's own buffer: writing cannot fail.
            if i > 0 {
                let _ = arg.write_all(b",");
            }
            let _ = arg.write_all(element);
        }
    }
}

#[derive(Clone)]
pub struct RedisViews {
    conn: Connection,
    keys: Keys,
    style: ViewStyle,
    changed_lists: redis::Script,
    place_lists: redis::Script,
    bank_versions: redis::Script,
    write_if_newer: redis::Script,
    /// How long the changes stream keeps an entry.
    changes_kept: std::time::Duration,
}

impl RedisViews {
    /// The views of generation `schema`, as `settings` place and style them.
    pub fn for_generation(conn: Connection, settings: &ReadModelSettings, schema: &str) -> Self {
        let prefix = generation::views_prefix(&settings.redis_prefix, schema);
        Self::new(conn, &prefix, settings.view_style()).keeping_changes(settings.stream_retention())
    }

    pub fn new(conn: Connection, prefix: &str, style: ViewStyle) -> Self {
        Self {
            conn,
            keys: Keys::new(prefix),
            style,
            changed_lists: redis::Script::new(&format!("{OVER}{CHANGED_LISTS}")),
            place_lists: redis::Script::new(&format!("{OVER}{PLACE_LISTS}")),
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
    /// is already there (one script: atomic). The all-banks lists follow
    /// only when [`RedisViews::compose_all`] is called after it.
    ///
    /// Returns the list elements it rendered for each active bank, so the
    /// views over all banks need not render them again.
    pub async fn apply(&mut self, update: &ViewUpdate) -> Result<Vec<(BankId, Elements)>> {
        let mut rendered = Vec::new();
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
                Some(view) => {
                    let elements = Elements::render(view, &self.style);
                    for (variant, rendered) in RatesVariant::ALL.iter().zip(&elements.rates) {
                        write(
                            "S",
                            self.keys.rates_bank(*id, *variant),
                            &rendered.body,
                            &rendered.digest,
                        );
                    }
                    for (with_recent, rendered) in [false, true].into_iter().zip(&elements.banks) {
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
                    rendered.push((*id, elements));
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
        let written: i64 = script.invoke_async(&mut self.conn).await?;
        if written == 0 && !update.is_empty() {
            tracing::debug!(?update.version, "every view of this update was already newer");
        }
        Ok(rendered)
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

    /// Every bank in the active set and the version its views were last
    /// written at, by any projector (`None`: none recorded), as Redis held
    /// them at the time returned first (its clock, in microseconds).
    pub async fn bank_versions(&mut self) -> Result<(String, Vec<(BankId, Option<Version>)>)> {
        // One bank view's version stands for all of the bank's.
        let (before, after) = self.keys.rates_bank_around(RatesVariant::ALL[0]);
        let (read, ids, stamps): (String, Vec<i64>, Vec<Option<String>>) = self
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
        Ok((read, versions))
    }

    pub fn style(&self) -> &ViewStyle {
        &self.style
    }

    /// Composes again the all-banks lists whose elements changed: the
    /// elements are read (with the time they were read at) and joined
    /// here, stored under keys of their own, and each list is put in place
    /// unless one read later is there (see [`PLACE_LISTS`]).
    pub async fn compose_all(&mut self) -> Result<()> {
        type Changed = (String, String, Vec<Option<Vec<u8>>>);
        let (read, changed): (String, Vec<Changed>) = self
            .changed_lists
            .key(self.keys.active_banks())
            .arg(self.keys.prefix())
            .arg(self.keys.view_etags())
            .invoke_async(&mut self.conn)
            .await?;
        if changed.is_empty() {
            return Ok(());
        }
        let composed = changed
            .iter()
            .map(|(key, marks, elements)| {
                let present = elements.iter().flatten().map(Vec::as_slice).collect();
                (key.clone(), marks.clone(), Joined(present))
            })
            .collect();
        self.place(&read, composed).await?;
        Ok(())
    }

    /// Composes the all-banks lists from `banks`, every active bank's
    /// elements in id order, each at least as new as Redis held it at
    /// `read` (Redis's clock, in microseconds), and puts each list in place
    /// unless one read later is there (see [`PLACE_LISTS`]). A list whose
    /// marks are those `composed` remembers for it is left alone; what is
    /// sent is remembered there.
    ///
    /// The lists used to be composed of the elements read back from Redis
    /// ([`RedisViews::compose_all`], still used by rebuilds): about 1.6 MB
    /// a round through a script, 17-20 ms of every round at 100 boards/s.
    pub async fn compose_from(
        &mut self,
        read: &str,
        banks: &[&Elements],
        composed: &mut HashMap<String, String>,
    ) -> Result<()> {
        let rates = (0..RatesVariant::ALL.len())
            .map(|i| (self.keys.rates_all(RatesVariant::ALL[i]), List::Rates(i)));
        let banks_lists = [false, true]
            .into_iter()
            .enumerate()
            .map(|(i, with_recent)| (self.keys.banks_all(with_recent), List::Banks(i)));
        let mut changed = Vec::new();
        for (key, list) in rates.chain(banks_lists) {
            let marks = banks
                .iter()
                .map(|e| e.of(list).digest.as_str())
                .collect::<Vec<_>>()
                .join(",");
            if composed.get(&key) == Some(&marks) {
                continue;
            }
            let body = Joined(banks.iter().map(|e| e.of(list).body.as_bytes()).collect());
            changed.push((key, marks, body));
        }
        if changed.is_empty() {
            return Ok(());
        }
        let remembered: Vec<(String, String)> = changed
            .iter()
            .map(|(key, marks, _)| (key.clone(), marks.clone()))
            .collect();
        self.place(read, changed).await?;
        composed.extend(remembered);
        Ok(())
    }

    /// Stores `lists` (key, marks, body), read at `read`, and puts in
    /// place those no list read later stands in front of; returns how many.
    async fn place(&mut self, read: &str, lists: Vec<(String, String, Joined<'_>)>) -> Result<i64> {
        // Unique to this composition: projectors composing at once each
        // put their own in place, or not.
        let token = uuid::Uuid::new_v4().simple().to_string();
        let mut store = redis::pipe();
        let mut place = self.place_lists.prepare_invoke();
        place
            .key(self.keys.view_versions())
            .arg(self.keys.view_versions())
            .arg(self.keys.view_etags())
            .arg(self.keys.changes())
            .arg(self.oldest_change())
            .arg(read);
        for (n, (key, marks, body)) in lists.into_iter().enumerate() {
            // Beside the views, not among them (nothing reads it as one).
            let stored = format!("{}composing:{token}:{n}", self.keys.prefix());
            store
                .cmd("SET")
                .arg(&stored)
                .arg(body)
                .arg("PX")
                .arg(COMPOSED_KEPT_MS)
                .ignore();
            place.arg(key).arg(marks).arg(stored);
        }
        store.query_async::<()>(&mut self.conn).await?;
        Ok(place.invoke_async::<i64>(&mut self.conn).await?)
    }

    /// Whether the views exist at all (false after a flush or on a new Redis).
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

    pub async fn present(&mut self) -> Result<bool> {
        let exists: bool = redis::cmd("EXISTS")
            .arg(self.keys.rates_all(RatesVariant::ALL[0]))
            .query_async(&mut self.conn)
            .await?;
        Ok(exists)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Views on the machine's Redis under a prefix of their own, with a
    /// connection and the prefix.
    fn own_prefix() -> (Connection, String, RedisViews) {
        let conn = ratewire_readmodel::redis::connect("redis://127.0.0.1:6379").expect("a url");
        let prefix = format!("rwtest:{{{}}}:", uuid::Uuid::new_v4().simple());
        let style = ViewStyle {
            currency_image_base: "https://images.test".into(),
        };
        let views = RedisViews::new(conn.clone(), &prefix, style);
        (conn, prefix, views)
    }

    /// Deletes every key under `prefix`; returns them.
    async fn remove(conn: &mut Connection, prefix: &str) -> Vec<String> {
        let left = conn.scan_match(&format!("{prefix}*")).await.unwrap();
        if !left.is_empty() {
            redis::cmd("DEL")
                .arg(&left)
                .query_async::<()>(conn)
                .await
                .unwrap();
        }
        left
    }

    /// Against the machine's Redis, under a prefix of its own.
    #[tokio::test]
    async fn a_list_read_earlier_never_replaces_one_read_later() {
        let (mut conn, prefix, mut views) = own_prefix();
        let list = views.keys.banks_all(false);
        // (read at, body, put in place, then shown)
        let steps = [
            ("1764130000000200", "at 200", 1, "at 200"),
            ("1764130000000100", "at 100", 0, "at 200"),
            ("1764130000000300", "at 300", 1, "at 300"),
            // Read by a clock far ahead (a Redis failed over to one
            // behind): lists read since are still put in place.
            ("4102444800000000", "in 2100", 1, "in 2100"),
            ("1764130000000400", "at 400", 1, "at 400"),
        ];
        for (read, body, placed, shown) in steps {
            let composed = vec![(
                list.clone(),
                format!("marks of {body}"),
                Joined(vec![body.as_bytes()]),
            )];
            assert_eq!(views.place(read, composed).await.unwrap(), placed, "{body}");
            let got: String = redis::cmd("GET")
                .arg(&list)
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(got, shown, "after {body}");
        }

        let left = remove(&mut conn, &prefix).await;
        assert!(left.iter().all(|k| !k.contains("composing")), "{left:?}");
    }

    /// A bank's elements, each its list's name and the bank's `id`.
    fn elements(id: u32) -> Elements {
        let rendered = |list: &str| Rendered::new(format!("{{\"{list}\":{id}}}"));
        Elements {
            rates: ["r0", "r1", "r2", "r3"].map(rendered),
            banks: ["b0", "b1"].map(rendered),
        }
    }

    #[tokio::test]
    async fn lists_are_composed_of_the_elements_held_and_only_when_they_changed() {
        let (mut conn, prefix, mut views) = own_prefix();
        let mut composed = HashMap::new();
        let reader = conn.clone();
        let get = |key: String| {
            let mut conn = reader.clone();
            async move {
                redis::cmd("GET")
                    .arg(key)
                    .query_async::<Option<String>>(&mut conn)
                    .await
                    .unwrap()
            }
        };
        let (one, two) = (elements(1), elements(2));
        let (read, _) = views.bank_versions().await.unwrap();
        views
            .compose_from(&read, &[&one, &two], &mut composed)
            .await
            .unwrap();
        let rates = views.keys.rates_all(RatesVariant::ALL[2]);
        let banks = views.keys.banks_all(true);
        assert_eq!(get(rates.clone()).await.unwrap(), r#"{"r2":1},{"r2":2}"#);
        assert_eq!(get(banks.clone()).await.unwrap(), r#"{"b1":1},{"b1":2}"#);
        assert_eq!(composed.len(), 6);

        // Unchanged: nothing is sent (a list changed by hand stays).
        redis::cmd("SET")
            .arg(&banks)
            .arg("by hand")
            .query_async::<()>(&mut conn)
            .await
            .unwrap();
        let (read, _) = views.bank_versions().await.unwrap();
        views
            .compose_from(&read, &[&one, &two], &mut composed)
            .await
            .unwrap();
        assert_eq!(get(banks.clone()).await.unwrap(), "by hand");

        // A bank gone: every list follows.
        let (read, _) = views.bank_versions().await.unwrap();
        views
            .compose_from(&read, &[&two], &mut composed)
            .await
            .unwrap();
        assert_eq!(get(rates).await.unwrap(), r#"{"r2":2}"#);
        assert_eq!(get(banks).await.unwrap(), r#"{"b1":2}"#);

        remove(&mut conn, &prefix).await;
    }

    #[test]
    fn a_list_is_its_present_elements_comma_separated() {
        use redis::ToRedisArgs as _;
        let elements: [&[u8]; 2] = [b"{\"id\":1}", b"{\"id\":2}"];
        assert_eq!(
            Joined(elements.to_vec()).to_redis_args(),
            vec![b"{\"id\":1},{\"id\":2}".to_vec()]
        );
        assert_eq!(Joined(Vec::new()).to_redis_args(), vec![Vec::<u8>::new()]);
    }
}
