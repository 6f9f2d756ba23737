//! `GET /api/v1/stream`: the rates as they change, as server-sent events.
//!
//! Events: `board` (a bank's /rates element changed: a board landed, or
//! it was registered or its details changed; data: the bank object of one
//! /rates element, in the asked variant), `best` (a currency's best rates
//! changed; data: the best-rates `data` object), `alert` (one of the key's
//! alerts fired; data: its webhook message with the message's `id`, live
//! only: no `id` line, not resumed), `reset` (resuming was not
//! possible; a snapshot follows), `dropped` (the last one: the client fell
//! too far behind, or the server is stopping). Every `board` and `best`
//! has an `id`, a position in the changes stream: reconnecting with
//! `Last-Event-ID` delivers what changed meanwhile, each bank and currency
//! once, at its latest (within `RATEWIRE_STREAM_RETENTION_SECS`), else a
//! `reset` and a snapshot. A comment line every 15 s keeps proxies from
//! closing a quiet stream.
//!
//! The frames come pre-encoded from [`crate::live`] (one encoding per
//! event and variant, shared by every subscriber), so the body is written
//! here as plain bytes rather than with axum's `Sse`, which would encode
//! each event again for each subscriber.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::pin::Pin;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::Response;
use axum::Extension;
use ratewire_proto::{BankId, CurrencyCode};
use ratewire_readmodel::redis::Keys;
use ratewire_readmodel::views::RatesVariant;
use tokio_util::sync::WaitForCancellationFutureOwned;
use utoipa::openapi::schema::Schema;

use crate::access::auth::Authorized;
use crate::access::gate::Identified;
use crate::access::stream_slots::Slot;
use crate::error::{Error, Result};
use crate::live::fanout::{Ended, Interest, Subscriber};
use crate::live::{frame, variant_index, Change, Delivery, Position, Relay};
use crate::query::params::string;
use crate::query::{query, Checker, Query, QueryParam};
use crate::state::AppState;
use crate::views::read_model::ReadModels;

/// How often a comment keeps a quiet stream open.
const HEARTBEAT: Duration = Duration::from_secs(15);

/// The longest a connect-time read of Redis may take.
const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// What a subscriber wants.
#[derive(Debug, Clone)]
struct Filter {
    banks: Vec<BankId>,
    currencies: Vec<CurrencyCode>,
    boards: bool,
    best: bool,
    /// The key whose alerts it receives (none for anonymous callers).
    alerts_of: Option<String>,
    variant: usize,
}

/// The events a subscriber may ask for.
const EVENTS: [&str; 3] = ["board", "best", "alert"];

/// Which of `EVENTS` a subscriber asked for: some, comma-separated, each
/// once; all when it does not say.
#[derive(Debug, Clone, Copy)]
pub struct Events {
    board: bool,
    best: bool,
    alert: bool,
}

impl QueryParam for Events {
    const REQUIRED: bool = false;

    fn read(check: &mut Checker<'_>, name: &str) -> Option<Self> {
        let chosen = check.subset(name, &EVENTS, &EVENTS);
        Some(Self {
            board: chosen.contains(&"board"),
            best: chosen.contains(&"best"),
            alert: chosen.contains(&"alert"),
        })
    }

    fn schema() -> Schema {
        let one = format!("({})", EVENTS.join("|"));
        string(Some(&format!("^{one}(,{one}){{0,{}}}$", EVENTS.len() - 1)))
    }
}

query! {
    /// `GET /api/v1/stream`: what a subscriber follows.
    #[derive(Clone)]
    pub struct StreamQuery {
        /// Only these banks' boards, and best rates where one of them holds
        /// a best quote (repeat, or comma-separate)
        pub banks as "bankId": Vec<BankId>,
        /// Only boards quoting, and best rates of, these currencies (repeat,
        /// or comma-separate)
        pub currencies as "currencyCode": Vec<CurrencyCode>,
        /// Which events, comma-separated: board, best, alert (the key's own
        /// alerts firing; live only); all three by default
        pub events as "events": Events,
        /// Boards with transactional rates: true, false, 1 or 0
        pub transactional as "transactional": bool,
        /// Boards with the bank's social links: true, false, 1 or 0
        pub social_links as "socialLinks": bool,
        /// Start with every matching bank's board and currency's best rates
        pub snapshot as "snapshot": bool,
        // Read by the gate, which identifies the caller.
        /// The API key, for clients that cannot send headers (browsers'
        /// EventSource); never logged
        pub api_key as "apiKey": Option<String>,
    }
}

impl Filter {
    /// What `query` asks for; alerts only when `owner` (a key) has them.
    fn new(query: StreamQuery, owner: Option<&str>) -> Self {
        let StreamQuery {
            banks,
            currencies,
            events,
            transactional,
            social_links,
            ..
        } = query;
        Self {
            banks,
            currencies,
            boards: events.board,
            best: events.best,
            alerts_of: owner.filter(|_| events.alert).map(str::to_owned),
            variant: variant_index(RatesVariant {
                transactional,
                social_links,
            }),
        }
    }

    fn wants_board(&self, bank: BankId, currencies: &[CurrencyCode]) -> bool {
        self.boards
            && (self.banks.is_empty() || self.banks.contains(&bank))
            && (self.currencies.is_empty()
                || currencies.iter().any(|c| self.currencies.contains(c)))
    }

    /// A currency's best rates, when they are of a currency asked for and
    /// (with `bankId`) one of the banks asked for holds a best quote.
    fn wants_best(&self, currency: CurrencyCode, banks: &[BankId]) -> bool {
        self.best
            && self.wants_currency(currency)
            && (self.banks.is_empty() || banks.iter().any(|b| self.banks.contains(b)))
    }

    fn wants_currency(&self, currency: CurrencyCode) -> bool {
        self.currencies.is_empty() || self.currencies.contains(&currency)
    }

    /// What the fan-out lists this subscriber under.
    fn interest(&self) -> Interest {
        Interest {
            boards: self.boards,
            banks: self.banks.clone(),
            best: self.best,
            currencies: self.currencies.clone(),
            alerts_of: self.alerts_of.clone(),
        }
    }

    /// The frame of `delivery` this subscriber gets, if any.
    fn frame_of(&self, delivery: &Delivery) -> Option<(Position, Bytes)> {
        match delivery {
            Delivery::Board {
                at,
                bank,
                currencies,
                frames,
            } if self.wants_board(*bank, currencies) => Some((*at, frames[self.variant].clone())),
            Delivery::Best {
                at,
                currency,
                banks,
                frame,
            } if self.wants_best(*currency, banks) => Some((*at, frame.clone())),
            _ => None,
        }
    }
}

/// The rates as they change, as server-sent events: `board` when a bank's
/// /rates element changes, `best` when a currency's best rates do; resume
/// with `Last-Event-ID`.
#[utoipa::path(get, path = "/api/v1/stream", tag = "live",
    params(
        StreamQuery,
        ("Last-Event-ID" = Option<String>, Header, description = "Resume after this event: what changed since, or a reset and a snapshot"),
    ),
    responses(
        (status = 200, description = "text/event-stream: board, best, alert, reset and dropped events", content_type = "text/event-stream", body = String),
        crate::openapi::CommonErrors,
    ))]
pub async fn stream(
    _: Authorized,
    State(state): State<AppState>,
    Extension(identified): Extension<Identified>,
    Query(query): Query<StreamQuery>,
    headers: HeaderMap,
) -> Result<Response> {
    // Alerts are a key's own: anonymous callers have none.
    let caller = identified.caller.as_ref().map(|known| &known.caller);
    let owner = caller
        .filter(|c| c.created_at.is_some())
        .map(|c| c.prefix.as_str());
    let snapshot = query.snapshot;
    let filter = Filter::new(query, owner);
    let plan = caller.map_or(crate::access::plans::ANONYMOUS, |c| c.plan.as_str());
    let slot = state
        .access
        .stream_slots
        .take(
            &identified.subject,
            state.access.plans.streams(plan),
            state.access.limiter.instances(),
        )
        .await
        .ok_or(Error::TooManyStreams)?;
    let relay = state.relay.clone();
    // Subscribed before anything is read, so nothing falls between the
    // catching up and the live deliveries (duplicates are skipped by id).
    let live = relay.subscribe(filter.interest());
    let views = state.views.read.current().views.clone();
    let last_event_id = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty());
    let (first, cursor) = tokio::time::timeout(
        READ_TIMEOUT,
        catch_up(&relay, &views, &filter, last_event_id, snapshot),
    )
    .await
    .map_err(|_| Error::StreamUnavailable)?
    .map_err(|e| {
        tracing::warn!(error = %e, "a live stream could not start: redis");
        Error::StreamUnavailable
    })?;
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    heartbeat.reset();
    let subscription = Subscription {
        pending: first,
        live,
        filter,
        cursor,
        heartbeat,
        relay,
        views,
        read: state.views.read.clone(),
        ended: false,
        shutdown: Box::pin(state.shutdown.clone().cancelled_owned()),
        _slot: slot,
    };
    let body = futures_util::stream::unfold(subscription, |mut s| async move {
        s.next().await.map(|b| (Ok::<_, Infallible>(b), s))
    });
    let mut response = Response::new(Body::from_stream(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Proxies that buffer responses (nginx) would hold events back.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

/// The frames a subscriber starts with, and the position they bring it to.
async fn catch_up(
    relay: &Relay,
    views: &Keys,
    filter: &Filter,
    last_event_id: Option<&str>,
    snapshot: bool,
) -> redis::RedisResult<(VecDeque<Bytes>, Position)> {
    let newest = relay.reader.newest(views).await?;
    let Some(last) = last_event_id else {
        return if snapshot {
            snapshot_frames(relay, views, filter, newest, false).await
        } else {
            Ok((VecDeque::new(), newest))
        };
    };
    let missed = match Position::parse(last) {
        Some(after) => relay.reader.since(views, after).await?.map(|c| (after, c)),
        None => None,
    };
    let Some((after, changes)) = missed else {
        return snapshot_frames(relay, views, filter, newest, true).await;
    };
    // Each bank and currency once, at its latest change, in log order.
    let mut latest: BTreeMap<String, (Position, Change)> = BTreeMap::new();
    for (at, change) in changes {
        let target = match &change {
            Change::Board { bank, .. } => format!("board:{bank}"),
            Change::Best { currency } => format!("best:{currency}"),
            // What subscribers follow is on boards and best rates.
            Change::Lists | Change::Currencies | Change::Reference { .. } => continue,
        };
        latest.insert(target, (at, change));
    }
    let mut collapsed: Vec<(Position, Change)> = latest.into_values().collect();
    collapsed.sort_by_key(|(at, _)| *at);
    let deliveries = relay.reader.deliveries(views, &collapsed).await?;
    let frames = deliveries
        .iter()
        .filter_map(|d| filter.frame_of(d))
        .map(|(_, frame)| frame)
        .collect();
    let cursor = collapsed.last().map_or(after, |(at, _)| *at).max(after);
    Ok((frames, cursor))
}

/// Every matching bank's board and currency's best rates as they are now
/// (at position `newest`), after a `reset` event when `reset`.
async fn snapshot_frames(
    relay: &Relay,
    views: &Keys,
    filter: &Filter,
    newest: Position,
    reset: bool,
) -> redis::RedisResult<(VecDeque<Bytes>, Position)> {
    let (banks, currencies) = relay.reader.current(views).await?;
    let mut changes: Vec<(Position, Change)> = Vec::new();
    if filter.boards {
        for bank in banks
            .into_iter()
            .filter(|b| filter.banks.is_empty() || filter.banks.contains(b))
        {
            changes.push((
                newest,
                Change::Board {
                    bank,
                    currencies: Vec::new(),
                },
            ));
        }
    }
    // Which banks hold them is known once read: `frame_of` below decides.
    for currency in currencies
        .into_iter()
        .filter(|c| filter.best && filter.wants_currency(*c))
    {
        changes.push((newest, Change::Best { currency }));
    }
    let mut frames = VecDeque::new();
    if reset {
        frames.push_back(frame(
            "reset",
            None,
            r#"{"reason":"what changed since the last event is no longer kept; a snapshot follows"}"#,
        ));
    }
    for delivery in relay.reader.deliveries(views, &changes).await? {
        if let Some((_, frame)) = filter.frame_of(&delivery) {
            frames.push_back(frame);
        }
    }
    Ok((frames, newest))
}

/// One subscriber's stream.
struct Subscription {
    pending: VecDeque<Bytes>,
    live: Subscriber,
    filter: Filter,
    /// The position of the last event sent: deliveries at or before it
    /// were sent already (or are older than what was).
    cursor: Position,
    heartbeat: tokio::time::Interval,
    relay: Relay,
    views: Keys,
    read: ReadModels,
    ended: bool,
    /// Kept across polls: a fresh wait each poll would register with the
    /// token anew, under a lock every subscriber shares.
    shutdown: Pin<Box<WaitForCancellationFutureOwned>>,
    _slot: Slot,
}

impl Subscription {
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Some(frame) = self.pending.pop_front() {
                return Some(frame);
            }
            if self.ended {
                return None;
            }
            tokio::select! {
                biased;
                _ = &mut self.shutdown => {
                    self.end(r#"{"reason":"the server is stopping; reconnect with Last-Event-ID to resume"}"#);
                }
                received = self.live.recv() => match received {
                    Ok(delivery) => self.take(&delivery).await,
                    Err(Ended::Behind) => {
                        metrics::counter!("ratewire_api_stream_dropped_total").increment(1);
                        tracing::debug!("a live subscriber fell behind; dropping it");
                        self.end(r#"{"reason":"the client did not keep up with the events; reconnect with Last-Event-ID to resume"}"#);
                    }
                    Err(Ended::Closed) => {
                        self.end(r#"{"reason":"the server is stopping; reconnect with Last-Event-ID to resume"}"#);
                    }
                },
                _ = self.heartbeat.tick() => return Some(Bytes::from_static(b": heartbeat\n\n")),
            }
        }
    }

    fn end(&mut self, reason: &str) {
        self.pending.push_back(frame("dropped", None, reason));
        self.ended = true;
    }

    async fn take(&mut self, delivery: &Delivery) {
        if let Delivery::Reset = delivery {
            // Another generation: its positions start anew.
            self.views = self.read.current().views.clone();
            let restarted = async {
                let newest = self.relay.reader.newest(&self.views).await?;
                snapshot_frames(&self.relay, &self.views, &self.filter, newest, true).await
            };
            match restarted.await {
                Ok((frames, newest)) => {
                    self.pending.extend(frames);
                    self.cursor = newest;
                }
                Err(_) => self
                    .end(r#"{"reason":"the stream moved and could not be read again; reconnect"}"#),
            }
            return;
        }
        if let Delivery::Alert { frame, .. } = delivery {
            // Routed to this key's subscribers only; no position to keep.
            self.pending.push_back(frame.clone());
            return;
        }
        if let Some((at, frame)) = self.filter.frame_of(delivery) {
            if at > self.cursor {
                self.cursor = at;
                self.pending.push_back(frame);
            }
        }
    }
}
