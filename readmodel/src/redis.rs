//! Redis: the connection every reader and writer of the views uses, and the
//! keys the views live under.
//!
//! Key layout, under the prefix `P` of a read-model generation
//! (`{RATEWIRE_REDIS_PREFIX}{{schema}}:`, see [`crate::generation`]; the
//! braces make the schema a hash tag, so in a Redis Cluster all of a
//! generation's views share one slot and one script may touch any of them):
//! - `P view:rates:bank:{id}:{variant}`: one bank's /rates element (variant
//!   `00`..`11`: transactional, social links);
//! - `P view:banks:bank:{id}:{0|1}`: one bank's /banks element (with recent
//!   rates or not);
//! - the all-banks lists are not stored whole: each API instance joins
//!   them from these elements of the active banks, in id order
//!   (`ratewire_api::views::lists`); `view:{rates|banks}:all:{variant}` names a
//!   joined list in its memory only;
//! - `P view:built`: set by a rebuild once every view is written; absent
//!   after a flush or on a new Redis, when the views are incomplete;
//! - `P view:banks:active`: sorted set of active bank ids (score = id);
//! - `P view:currencies`: the whole /currencies body;
//! - `P view:best:{CODE}`: the whole best-rates body of one currency;
//! - `P view:reference:{SOURCE}:dates`: the days a reference source
//!   published, a JSON array of dates, oldest first;
//! - `P view:reference:{SOURCE}:{YYYY-MM-DD}`: that day's whole
//!   reference-rates answer (every currency);
//! - `P view:versions`: the snapshot version each view was rendered at;
//! - `P view:etags`: each view's fingerprint ([`crate::views::digest`]),
//!   written with it: the API's `ETag`, and how a writer knows a rendering
//!   changes nothing (then nothing is written);
//! - `P changes`: a stream of what changed, one entry per bank whose
//!   /rates element changed (`board:{id}:{codes}`) and per currency whose
//!   best rates changed (`best:{CODE}`), and per reference source whose
//!   views changed (`reference:{SOURCE}`), added in the same script as the
//!   views, so an entry is there only once its views are; trimmed by age.
//!   API instances read it for the live stream and their caches.
//!
//! The API wraps these bodies in the outer envelope and sends them unparsed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ratewire_proto::{BankId, CurrencyCode};
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

use crate::error::Result;
use crate::views::RatesVariant;

/// How a `RATEWIRE_REDIS_URL` names a Redis Cluster: this scheme, then its
/// seed nodes' `host:port` separated by commas.
const CLUSTER_SCHEME: &str = "redis-cluster://";

/// A Redis connection that reconnects by itself and never waits long: a
/// Redis outage turns into fast errors, never a hang. `url` is one Redis
/// (`redis://host:port/db`) or a cluster (`redis-cluster://host:port,...`).
pub fn connect(url: &str) -> Result<Connection> {
    if let Some(nodes) = url.strip_prefix(CLUSTER_SCHEME) {
        let nodes: Vec<String> = nodes
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(|n| format!("redis://{n}"))
            .collect();
        let client = ClusterClient::builder(nodes)
            .connection_timeout(Duration::from_secs(1))
            .response_timeout(Duration::from_secs(2))
            .retries(1)
            .max_retry_wait(500)
            .build()?;
        return Ok(Connection::Cluster(Cluster(Arc::new(ClusterState {
            client,
            connection: Mutex::default(),
        }))));
    }
    let client = redis::Client::open(url)?;
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(1)))
        .set_response_timeout(Some(Duration::from_secs(2)))
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(500));
    Ok(Connection::Single(ConnectionManager::new_lazy_with_config(
        client, config,
    )?))
}

/// One Redis, or a Redis Cluster. Every key one command or script touches
/// shares a hash slot (the key layout above tags them); a pipeline whose
/// commands fall in several slots is sent as one pipeline per slot, in
/// parallel, its replies put back in order. Pipelines are never atomic
/// (`MULTI`) here, so splitting them changes nothing a caller relies on.
#[derive(Clone)]
pub enum Connection {
    Single(ConnectionManager),
    Cluster(Cluster),
}

/// A cluster connection made on first use, so the process starts while
/// the cluster is down (as a single Redis's connection manager does).
#[derive(Clone)]
pub struct Cluster(Arc<ClusterState>);

struct ClusterState {
    client: ClusterClient,
    connection: Mutex<Option<ClusterConnection>>,
}

impl Cluster {
    async fn get(&self) -> RedisResult<ClusterConnection> {
        if let Some(connection) = self.0.connection.lock().expect("cluster lock").clone() {
            return Ok(connection);
        }
        let connection = self.0.client.get_async_connection().await?;
        *self.0.connection.lock().expect("cluster lock") = Some(connection.clone());
        Ok(connection)
    }
}

impl Connection {
    /// Every key matching `pattern` (a `SCAN` of each primary of a cluster).
    pub async fn scan_match(&mut self, pattern: &str) -> RedisResult<Vec<String>> {
        let nodes = match self {
            Connection::Single(_) => vec![None],
            Connection::Cluster(cluster) => primaries(&mut cluster.get().await?)
                .await?
                .into_iter()
                .map(Some)
                .collect(),
        };
        let mut keys = Vec::new();
        for node in &nodes {
            let mut cursor: u64 = 0;
            loop {
                let mut cmd = redis::cmd("SCAN");
                cmd.arg(cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(1000);
                let (next, batch): (u64, Vec<String>) = self.query_at(cmd, node).await?;
                keys.extend(batch);
                cursor = next;
                if cursor == 0 {
                    break;
                }
            }
        }
        Ok(keys)
    }

    /// `INFO server` of one node (every node of a cluster runs the same
    /// version in a supported deployment).
    pub async fn info_server(&mut self) -> RedisResult<String> {
        let mut cmd = redis::cmd("INFO");
        cmd.arg("server");
        self.query_at(cmd, &None).await
    }

    /// Sends `cmd` to the cluster node at `node` (`host`, `port`), or to
    /// any node when `None`; to the one Redis when there is no cluster.
    async fn query_at<T: redis::FromRedisValue>(
        &mut self,
        cmd: Cmd,
        node: &Option<(String, u16)>,
    ) -> RedisResult<T> {
        match self {
            Connection::Single(connection) => cmd.query_async(connection).await,
            Connection::Cluster(cluster) => {
                let routing = match node.clone() {
                    Some((host, port)) => {
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port })
                    }
                    None => RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
                };
                let value = cluster.get().await?.route_command(cmd, routing).await?;
                Ok(redis::from_redis_value(value)?)
            }
        }
    }
}

/// `(host, port)` of each primary, from `CLUSTER SLOTS`.
async fn primaries(connection: &mut ClusterConnection) -> RedisResult<Vec<(String, u16)>> {
    let slots: Vec<Vec<Value>> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(connection)
        .await?;
    let mut nodes: Vec<(String, u16)> = slots
        .into_iter()
        .filter_map(|range| {
            let primary: Vec<Value> = redis::from_redis_value(range.get(2)?.clone()).ok()?;
            let host: String = redis::from_redis_value(primary.first()?.clone()).ok()?;
            let port: u16 = redis::from_redis_value(primary.get(1)?.clone()).ok()?;
            Some((host, port))
        })
        .collect();
    nodes.sort();
    nodes.dedup();
    Ok(nodes)
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(connection) => connection.req_packed_command(cmd),
            Connection::Cluster(cluster) => Box::pin(async move {
                let mut connection = cluster.get().await?;
                connection.req_packed_command(cmd).await
            }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(connection) => {
                connection.req_packed_commands(pipeline, offset, count)
            }
            Connection::Cluster(cluster) => Box::pin(async move {
                let connection = cluster.get().await?;
                per_slot(connection, pipeline, offset, count).await
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(connection) => connection.get_db(),
            Connection::Cluster(_) => 0,
        }
    }
}

/// The slot of the key a command addresses; `None` for commands without a
/// key (they go with the first slot of their pipeline).
fn slot_route(cmd: &Cmd) -> Option<Route> {
    let mut args = cmd.args_iter().filter_map(|arg| match arg {
        redis::Arg::Simple(bytes) => Some(bytes),
        _ => None,
    });
    let name = args.next()?.to_ascii_uppercase();
    let key = match name.as_slice() {
        b"EVAL" | b"EVALSHA" => {
            let _script = args.next()?;
            let keys: usize = std::str::from_utf8(args.next()?).ok()?.parse().ok()?;
            if keys == 0 {
                return None;
            }
            args.next()?
        }
        b"PING" | b"INFO" | b"SCAN" | b"CLUSTER" | b"SCRIPT" | b"XREAD" => return None,
        _ => args.next()?,
    };
    Some(Route::with_key(key, SlotAddr::Master))
}

/// Sends `pipeline` as one pipeline per slot, in parallel, and puts the
/// replies back in the order of its commands.
async fn per_slot(
    mut connection: ClusterConnection,
    pipeline: &Pipeline,
    offset: usize,
    count: usize,
) -> RedisResult<Vec<Value>> {
    let routes: Vec<Option<Route>> = pipeline.cmd_iter().map(slot_route).collect();
    let first = routes.iter().flatten().next().copied();
    let mut groups: HashMap<Option<Route>, Vec<usize>> = HashMap::new();
    for (at, route) in routes.iter().enumerate() {
        groups.entry(route.or(first)).or_default().push(at);
    }
    if groups.len() <= 1 {
        return connection
            .req_packed_commands(pipeline, offset, count)
            .await;
    }
    let commands: Vec<&Cmd> = pipeline.cmd_iter().collect();
    let sends = groups.into_values().map(|indices| {
        let mut part = redis::pipe();
        for at in &indices {
            part.add_command(commands[*at].clone());
        }
        let mut connection = connection.clone();
        async move {
            let replies = connection
                .req_packed_commands(&part, 0, indices.len())
                .await?;
            Ok::<_, redis::RedisError>((indices, replies))
        }
    });
    let mut replies = vec![Value::Nil; commands.len()];
    for (indices, values) in futures_util::future::try_join_all(sends).await? {
        for (at, value) in indices.into_iter().zip(values) {
            replies[at] = value;
        }
    }
    Ok(replies.into_iter().skip(offset).take(count).collect())
}

/// Whether Redis answers within a second (for /readyz).
pub async fn ping(mut conn: Connection) -> bool {
    let cmd = redis::cmd("PING");
    let ping = cmd.query_async::<Value>(&mut conn);
    matches!(
        tokio::time::timeout(Duration::from_secs(1), ping).await,
        Ok(Ok(_))
    )
}

/// Stops the process when Redis answers and is older than this build
/// supports; `Err` when it does not answer (nothing to check yet).
pub async fn require_version(mut conn: Connection) -> Result<()> {
    let info = conn.info_server().await?;
    if let Err(message) = ratewire_service::compatibility::redis_version_ok(&info) {
        ratewire_service::compatibility::stop(&message);
    }
    Ok(())
}

/// The keys of one generation's views.
#[derive(Debug, Clone, PartialEq, Eq)]
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
        let (before, after) = self.rates_bank_around(variant);
        format!("{before}{id}{after}")
    }

    /// What comes before and after the bank id in [`Keys::rates_bank`]
    /// (for scripts that name every bank's key).
    pub fn rates_bank_around(&self, variant: RatesVariant) -> (String, String) {
        (
            format!("{}view:rates:bank:", self.prefix),
            format!(":{}", variant.tag()),
        )
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

    /// The days a reference source published, as a JSON array.
    pub fn reference_dates(&self, source: &str) -> String {
        format!("{}view:reference:{source}:dates", self.prefix)
    }

    /// One reference day's whole answer (every currency).
    pub fn reference_day(&self, source: &str, date: chrono::NaiveDate) -> String {
        format!("{}view:reference:{source}:{date}", self.prefix)
    }

    /// Set once a rebuild has written every view: until then (a flush, a
    /// new Redis) the views are incomplete, and readers render from Postgres
    /// what Redis cannot be trusted to hold whole.
    pub fn views_built(&self) -> String {
        format!("{}view:built", self.prefix)
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
