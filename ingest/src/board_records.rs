//! Boards recorded before they are published, for retractions (see
//! [`crate::retraction`]), written in rounds: the boards of every push
//! waiting when a round starts go in one statement and one commit, so
//! concurrent pushes share the commit's flush to disk instead of paying
//! one each. A push still answers only once its own record is committed.
//!
//! The same statement reads each push's token, its bank and whether the
//! bank's changes wait in the outbox, from a snapshot taken after the push
//! was authenticated: the push is judged on that, so a token revoked or a
//! bank changed by then is seen (see `known_tokens`).

use ratewire_proto::BankId;
use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::banks::TokenRow;
use crate::error::{Error, Result};

/// Most boards recorded in one round.
const ROUND_MAX: usize = 512;
/// Most pushes waiting for a round; past it a push waits for room.
const WAITING_MAX: usize = 4096;

/// The push's token as the round read it (`None`: no live token has its
/// prefix), or why the round failed.
type Outcome = std::result::Result<Option<TokenRow>, String>;

struct Waiting {
    bank: BankId,
    event_id: Uuid,
    prefix: String,
    done: oneshot::Sender<Outcome>,
}

/// The writer's handle; its task ends when the last handle is dropped.
#[derive(Clone)]
pub struct BoardRecords {
    waiting: mpsc::Sender<Waiting>,
}

impl BoardRecords {
    /// Starts the writer on `pool`.
    pub fn spawn(pool: PgPool) -> Self {
        let (waiting, mut rounds) = mpsc::channel::<Waiting>(WAITING_MAX);
        tokio::spawn(async move {
            let mut round = Vec::with_capacity(ROUND_MAX);
            while rounds.recv_many(&mut round, ROUND_MAX).await > 0 {
                match write(&pool, &round).await {
                    Ok(tokens) => {
                        for (waiting, token) in round.drain(..).zip(tokens) {
                            let _ = waiting.done.send(Ok(token));
                        }
                    }
                    Err(e) => {
                        metrics::counter!("ratewire_ingest_postgres_errors_total").increment(1);
                        for waiting in round.drain(..) {
                            let _ = waiting.done.send(Err(e.to_string()));
                        }
                    }
                }
            }
        });
        Self { waiting }
    }

    /// Notes a board about to be published (again, for a retried push) by
    /// the token of `prefix`; returns once the note is committed, with the
    /// token as the round read it.
    pub async fn record(
        &self,
        bank: BankId,
        event_id: Uuid,
        prefix: &str,
    ) -> Result<Option<TokenRow>> {
        let (done, recorded) = oneshot::channel();
        let stopped = || Error::Unavailable {
            what: "postgres",
            cause: "the board records' writer has stopped".into(),
        };
        self.waiting
            .send(Waiting {
                bank,
                event_id,
                prefix: prefix.to_owned(),
                done,
            })
            .await
            .map_err(|_| stopped())?;
        recorded
            .await
            .map_err(|_| stopped())?
            .map_err(|cause| Error::Unavailable {
                what: "postgres",
                cause,
            })
    }
}

/// Records the round's boards; returns each push's token, in order.
async fn write(pool: &PgPool, round: &[Waiting]) -> sqlx::Result<Vec<Option<TokenRow>>> {
    let events: Vec<Uuid> = round.iter().map(|w| w.event_id).collect();
    let banks: Vec<i64> = round.iter().map(|w| w.bank.get()).collect();
    let prefixes: Vec<&str> = round.iter().map(|w| w.prefix.as_str()).collect();
    let rows: Vec<Read> = sqlx::query_as(
        "WITH p AS (
             SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[])
                 WITH ORDINALITY AS p(event_id, bank_id, prefix, n)
         ), recorded AS (
             INSERT INTO published_boards (event_id, bank_id)
             SELECT event_id, bank_id FROM p
             ON CONFLICT (event_id) DO NOTHING
         )
         SELECT t.bank_id, t.token_hash, b.active, b.log_conflict,
                EXISTS (SELECT 1 FROM outbox o WHERE o.bank_id = t.bank_id) AS changes_waiting
         FROM p LEFT JOIN publisher_tokens t ON t.prefix = p.prefix AND t.revoked_at IS NULL
                LEFT JOIN banks b ON b.id = t.bank_id
         ORDER BY p.n",
    )
    .bind(&events)
    .bind(&banks)
    .bind(&prefixes)
    .fetch_all(pool)
    .await?;
    // One row per push while a prefix names at most one token; anything
    // else must fail the round, not leave pushes without their answer.
    if rows.len() != round.len() {
        return Err(sqlx::Error::Protocol(format!(
            "the board-record round read {} rows for {} pushes",
            rows.len(),
            round.len()
        )));
    }
    Ok(rows.into_iter().map(Read::token).collect())
}

/// A row of the round: a push's token and bank, if it has a live token.
#[derive(sqlx::FromRow)]
struct Read {
    bank_id: Option<i64>,
    token_hash: Option<String>,
    active: Option<bool>,
    log_conflict: Option<String>,
    changes_waiting: bool,
}

impl Read {
    fn token(self) -> Option<TokenRow> {
        Some(TokenRow {
            bank_id: self.bank_id?,
            token_hash: self.token_hash?,
            active: self.active?,
            log_conflict: self.log_conflict,
            changes_waiting: self.changes_waiting,
        })
    }
}
