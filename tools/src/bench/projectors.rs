//! `deploy/bench projectors`: how fast one, two and three projectors
//! (`auto` mode) fold the same backlog on a six-partition topic, each
//! count into a database and Redis prefix of its own, from offset zero.

use std::time::{Duration, Instant};

use anyhow::bail;
use ratewire_service::progress::Progress;

use super::procs::{self, Procs};
use super::report::{fixed, replace_section, row};
use super::{say, Machine, Settings};

pub async fn run(settings: &Settings) -> anyhow::Result<()> {
    let mut procs = Procs::new(settings, &[("RATEWIRE_TOPIC_PARTITIONS", "6".into())]).await?;
    say("starting a broker and ingest of their own");
    procs.start_broker().await?;
    let ingest = settings.bin("ratewire-ingest");
    procs.start("ingest", &ingest, &[], &[])?;
    procs::wait_url(&format!("http://127.0.0.1:{}/readyz", procs::INGEST)).await?;
    let boards = settings.entries.div_ceil(30).to_string();
    say(format!(
        "ingest: {boards} boards of 30 currencies for 50 banks"
    ));
    let loaded = procs.backlog(settings.entries)?;
    let accepted = loaded.number("accepted") as i64;
    // Every board, plus one registration per bank.
    let expected = accepted + 50;
    let projector = settings.bin("ratewire-projector");
    let http = reqwest::Client::new();
    let mut rows = Vec::new();
    for n in 1..=3u16 {
        let database = format!("{}_p{n}", procs::DATABASE);
        procs::fresh_database(&database).await?;
        let prefix = format!("{}p{n}:", procs::PREFIX);
        say(format!(
            "{n} projector(s) folding the backlog from offset zero"
        ));
        let started = Instant::now();
        let port = |i: u16| procs::PROJECTOR + 100 + 10 * n + i;
        for i in 1..=n {
            procs.start(
                &format!("projector-{n}-{i}"),
                &projector,
                &[],
                &[
                    (
                        "RATEWIRE_DATABASE_URL",
                        format!("{}/{database}", procs::POSTGRES),
                    ),
                    ("RATEWIRE_REDIS_PREFIX", prefix.clone()),
                    (
                        "RATEWIRE_PROJECTOR_LISTEN",
                        format!("127.0.0.1:{}", port(i)),
                    ),
                ],
            )?;
        }
        let pool = procs::database(&database).await?;
        let progress = Progress::new("projectors' backlog", Some(expected as u64));
        loop {
            let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM readmodel.applied_events")
                .fetch_one(&pool)
                .await
                .unwrap_or(0);
            progress.set(applied as u64, "events applied");
            if applied >= expected {
                progress.finish();
                break;
            }
            if started.elapsed() > Duration::from_secs(180) {
                bail!(
                    "{n} projector(s) did not apply {expected} events within 3 minutes; logs in {}",
                    procs.dir.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let seconds = started.elapsed().as_secs_f64();
        let mut shares = Vec::new();
        for i in 1..=n {
            shares.push(
                procs::partitions_read(&http, port(i))
                    .await
                    .map_or_else(|| "?".into(), |n| n.to_string()),
            );
        }
        rows.push(row(&[
            n.to_string(),
            format!("{} s", fixed(seconds, 1)),
            fixed(accepted as f64 * 30.0 / seconds, 0),
            shares.join("/"),
        ]));
        for i in 1..=n {
            procs.stop(&format!("projector-{n}-{i}"));
        }
        pool.close().await;
        procs::clear_redis(&prefix).await?;
    }
    let rewinds: usize = std::fs::read_dir(&procs.dir)?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("projector-"))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .map(|log| log.matches("a read began past the stored position").count())
        .sum();
    let machine = Machine::here();
    let section = format!(
        r#"## Projector throughput by count

{run}, release build. A backlog of {accepted} boards of 30 currencies for 50 banks
({entries} rate entries) on a six-partition topic; then one, two and three projectors in
`auto` mode, each count into a fresh database and Redis prefix, from offset zero, timed from
their start to the last event applied (views included). Broker, Postgres, Redis and the
projectors share the machine.

| projectors | backlog folded in | rate entries/s | partitions each (at the end) |
|---|---|---|---|
{rows}

All on the same {cores} cores, so the machine, not the number of projectors, is the limit
here. Reads that began past a partition's stored position (a handover landing on an offset
the broker serves no message for; the partition is read again from further back, see
projector/src/holes.rs): {rewinds} in the three runs.
"#,
        run = machine.run_by("deploy/bench projectors"),
        entries = accepted * 30,
        rows = rows.join("\n"),
        cores = machine.cores,
    );
    replace_section(&settings.page(), &section)
}
