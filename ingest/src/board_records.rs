//! Boards recorded before they are published, for retractions (see
//! [`crate::retraction`]), written in rounds: the boards of every push
//! waiting when a round starts go in one statement and one commit, so
//! concurrent pushes share the commit's flush to disk instead of paying
//! one each. A push still answers only once its own record is committed.

use ratewire_proto::BankId;
use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::error::{Error, Result};

/// Most boards recorded in one round.
const ROUND_MAX: usize = 512;
/// Most pushes waiting for a round; past it a push waits for room.
const WAITING_MAX: usize = 4096;

type Outcome = std::result::Result<(), String>;

struct Waiting {
    bank: BankId,
    event_id: Uuid,
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
                let outcome = write(&pool, &round).await.map_err(|e| {
                    metrics::counter!("ratewire_ingest_postgres_errors_total").increment(1);
                    e.to_string()
                });
                for waiting in round.drain(..) {
                    let _ = waiting.done.send(outcome.clone());
                }
            }
        });
        Self { waiting }
    }

    /// Notes a board about to be published (again, for a retried push);
    /// returns once the note is committed.
    pub async fn record(&self, bank: BankId, event_id: Uuid) -> Result<()> {
        let (done, recorded) = oneshot::channel();
        let stopped = || Error::Unavailable {
            what: "postgres",
            cause: "the board records' writer has stopped".into(),
        };
        self.waiting
            .send(Waiting {
                bank,
                event_id,
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

async fn write(pool: &PgPool, round: &[Waiting]) -> sqlx::Result<()> {
    let (events, banks): (Vec<Uuid>, Vec<i64>) =
        round.iter().map(|w| (w.event_id, w.bank.get())).unzip();
    sqlx::query(
        "INSERT INTO published_boards (event_id, bank_id)
         SELECT * FROM unnest($1::uuid[], $2::bigint[])
         ON CONFLICT (event_id) DO NOTHING",
    )
    .bind(&events)
    .bind(&banks)
    .execute(pool)
    .await?;
    Ok(())
}
