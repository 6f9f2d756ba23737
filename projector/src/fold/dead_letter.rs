//! Messages the fold cannot apply: why (a rule's name and the whole
//! story), recorded with the message so an operator can re-drive it.

use sqlx::PgConnection;
use tracing::warn;

use super::message::Incoming;
use super::outcome::BatchOutcome;
use ratewire_proto::DecodeError;

/// The dead-letter rule of a known event type in a newer version than this
/// build reads: not broken, waiting for an upgrade (then re-driven).
pub const UNSUPPORTED_VERSION: &str = "unsupported-version";
/// The dead-letter rule of an event the database refused for its content.
pub const DATA: &str = "data";

/// Why a message was not applied: the rule (a contract rule's code, or
/// one of the read model's: `unknown-bank`, `bank-registered`, [`DATA`],
/// [`UNSUPPORTED_VERSION`]) and the whole story.
#[derive(Debug, Clone)]
pub struct Refused {
    pub rule: String,
    pub error: String,
    pub event_id: Option<uuid::Uuid>,
}

impl Refused {
    pub fn new(rule: &str, error: String, event_id: Option<uuid::Uuid>) -> Self {
        Self {
            rule: rule.to_owned(),
            error,
            event_id,
        }
    }
}

impl From<&DecodeError> for Refused {
    fn from(e: &DecodeError) -> Self {
        Refused::new(e.rule().code(), e.to_string(), e.event_id())
    }
}

/// Records `refused` messages (and counts them in `outcome`, for the
/// metrics once the batch commits).
pub async fn record(
    db: &mut PgConnection,
    topic: &str,
    refused: &[(&Incoming, Refused)],
    outcome: &mut BatchOutcome,
) -> sqlx::Result<()> {
    if refused.is_empty() {
        return Ok(());
    }
    // In log order, as they were met.
    let mut refused: Vec<&(&Incoming, Refused)> = refused.iter().collect();
    refused.sort_by_key(|(m, _)| (m.partition, m.offset));
    for (message, refusal) in &refused {
        outcome.dead_lettered += 1;
        outcome.refused.push(refusal.rule.clone());
        warn!(
            partition = message.partition,
            offset = message.offset,
            event_id = ?refusal.event_id,
            rule = refusal.rule,
            error = refusal.error,
            "dead-lettering a message"
        );
    }
    sqlx::query(
        r#"INSERT INTO dead_letters (topic, partition, "offset", event_id, error, payload,
                                     rule, message_key, message_time)
           SELECT $1, * FROM UNNEST($2::int[], $3::bigint[], $4::uuid[], $5::text[], $6::bytea[],
                                    $7::text[], $8::bytea[], $9::timestamptz[])"#,
    )
    .bind(topic)
    .bind(refused.iter().map(|(m, _)| m.partition).collect::<Vec<_>>())
    .bind(refused.iter().map(|(m, _)| m.offset).collect::<Vec<_>>())
    .bind(refused.iter().map(|(_, r)| r.event_id).collect::<Vec<_>>())
    .bind(
        refused
            .iter()
            .map(|(_, r)| r.error.as_str())
            .collect::<Vec<_>>(),
    )
    .bind(
        refused
            .iter()
            .map(|(m, _)| m.payload.to_vec())
            .collect::<Vec<_>>(),
    )
    .bind(
        refused
            .iter()
            .map(|(_, r)| r.rule.as_str())
            .collect::<Vec<_>>(),
    )
    .bind(
        refused
            .iter()
            .map(|(m, _)| m.key.clone())
            .collect::<Vec<_>>(),
    )
    .bind(refused.iter().map(|(m, _)| m.timestamp).collect::<Vec<_>>())
    .execute(db)
    .await?;
    Ok(())
}
