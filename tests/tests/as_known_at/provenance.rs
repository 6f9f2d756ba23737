//! Each board of the story as `/api/v1/boards/{eventId}` shows it: as
//! published, where it is on the log, when it became known, its source
//! and its status.

use anyhow::{ensure, Context};
use ratewire_e2e::known_at::LogPosition;
use ratewire_e2e::Stack;
use serde_json::Value;

use super::steps::{event_id, time};

/// The provenance of one board as `/api/v1/boards/{id}` gives it.
async fn provenance(stack: &Stack, key: &str, board: &str) -> anyhow::Result<Value> {
    let (status, body) = stack
        .get(&format!("/api/v1/boards/{board}"), Some(key))
        .await?;
    ensure!(status == 200, "/api/v1/boards/{board}: {status} {body}");
    Ok(body["data"].clone())
}

/// What the story's boards were, by name, and what ingest answered each.
pub(crate) struct Published {
    pub(crate) name: &'static str,
    pub(crate) answer: Value,
}

/// `/api/v1/boards/{id}` shows each board as published, where it is on the
/// log, when it became known, its source and its status; a rate finds its
/// board by its bank and `updatedAt` (`/api/v1/boards?bankId=&asOf=`).
pub(crate) async fn each_board_shows_its_source_log_position_and_status(
    stack: &Stack,
    key: &str,
    published: &[Published],
    source: &Value,
    retraction: &str,
    [cbe, awash, dashen]: [i64; 3],
) -> anyhow::Result<()> {
    let log = stack.log_positions()?;
    let expected = [
        ("CBE's first", cbe, "superseded"),
        ("Awash's sourced", awash, "inForce"),
        ("CBE's typo", cbe, "corrected"),
        ("CBE's correction", cbe, "inForce"),
        ("Dashen's", dashen, "inForce"),
        ("Awash's retracted", awash, "retracted"),
    ];
    for (name, bank, status) in expected {
        let answer = &published
            .iter()
            .find(|p| p.name == name)
            .expect(name)
            .answer;
        let id = event_id(answer);
        let board = provenance(stack, key, &id).await?;
        let at = |field: &str| format!("{name} board's {field}: {board}");
        assert_eq!(board["eventId"], id.as_str(), "{}", at("eventId"));
        assert_eq!(board["bankId"], bank, "{}", at("bankId"));
        // Dashen's board is its last: the bank's deactivation does not
        // revise it.
        assert_eq!(board["status"], status, "{}", at("status"));
        assert!(
            board["rates"].as_array().is_some_and(|r| !r.is_empty()),
            "{}",
            at("rates")
        );
        assert!(time(&board["asOf"]).is_some(), "{}", at("asOf"));
        // By its bank and asOf: the board in force for that asOf (the
        // typo's correction), else the last published (the retracted one).
        let lookup = format!(
            "/api/v1/boards?bankId={bank}&asOf={}",
            board["asOf"].as_str().unwrap_or_default()
        );
        let in_force = match name {
            "CBE's typo" => event_id(&published[3].answer),
            _ => id.clone(),
        };
        let (found, by_as_of) = stack.get(&lookup, Some(key)).await?;
        assert_eq!(
            (found, by_as_of["data"]["eventId"].as_str()),
            (200, Some(in_force.as_str())),
            "{lookup}: {by_as_of}"
        );
        assert!(time(&board["receivedAt"]).is_some(), "{}", at("receivedAt"));
        assert_eq!(
            time(&board["knownAt"]),
            time(&answer["knownAt"]),
            "{} (ingest's 202 said {})",
            at("knownAt"),
            answer["knownAt"]
        );
        let position: &LogPosition = log.get(&id).with_context(|| format!("{name} on the log"))?;
        assert_eq!(
            board["log"]["topic"],
            stack.topic.as_str(),
            "{}",
            at("log.topic")
        );
        assert_eq!(
            board["log"]["partition"],
            position.partition,
            "{}",
            at("log.partition")
        );
        assert_eq!(
            board["log"]["offset"],
            position.offset,
            "{}",
            at("log.offset")
        );
        assert_eq!(
            time(&board["knownAt"]).map(|t| t.timestamp_millis()),
            position.timestamp_ms,
            "{} (the broker's log-append time)",
            at("knownAt")
        );
        let revisions = board["revisions"].as_array().map_or(0, Vec::len);
        match status {
            "corrected" => {
                assert_eq!(revisions, 1, "{}", at("revisions"));
                let correction = event_id(&published[3].answer);
                assert_eq!(
                    board["revisions"][0]["eventId"],
                    correction.as_str(),
                    "{}",
                    at("revisions")
                );
                assert_eq!(
                    board["revisions"][0]["kind"],
                    "correction",
                    "{}",
                    at("revisions")
                );
            }
            "retracted" => {
                assert_eq!(revisions, 1, "{}", at("revisions"));
                assert_eq!(
                    board["revisions"][0]["eventId"],
                    retraction,
                    "{}",
                    at("revisions")
                );
                assert_eq!(
                    board["revisions"][0]["kind"],
                    "retraction",
                    "{}",
                    at("revisions")
                );
            }
            _ => assert_eq!(revisions, 0, "{}", at("revisions")),
        }
        if name == "Awash's sourced" {
            assert_eq!(board["source"]["url"], source["url"], "{}", at("source"));
            assert_eq!(
                board["source"]["method"],
                source["method"],
                "{}",
                at("source")
            );
            assert_eq!(
                time(&board["source"]["capturedAt"]),
                time(&source["capturedAt"]),
                "{}",
                at("source")
            );
            assert_eq!(
                board["source"]["sha256"],
                source["sha256"].as_str().unwrap().to_ascii_lowercase(),
                "{}",
                at("source")
            );
            assert_eq!(board["reason"], Value::Null, "{}", at("reason"));
        } else {
            assert_eq!(board["source"], Value::Null, "{}", at("source"));
        }
        if name == "CBE's correction" {
            assert_eq!(
                board["reason"],
                "the 3-hour board read 1553.5 for 155.35",
                "{}",
                at("reason")
            );
        }
    }
    let usd_of_awash = provenance(stack, key, &event_id(&published[1].answer)).await?;
    let usd = usd_of_awash["rates"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r.to_string().contains("\"USD\""))
        .with_context(|| format!("USD on Awash's board: {usd_of_awash}"))?;
    assert_eq!(usd["cashBuying"], 154.90, "as published: {usd}");
    assert_eq!(usd["transactionalSelling"], 157.50, "as published: {usd}");
    Ok(())
}
