//! `deploy/bench group`: a board's freshness on /rates with one projector
//! (the baseline), then with three sharing a six-partition topic through
//! Kafka's consumer group (KIP-848), and how soon boards are fresh again
//! after a member joins, leaves or is killed (kill -9: the takeover).
//! Beside them, what the group's heartbeats cost at rest, at the stack's
//! settings and at Kafka's defaults.

mod watch;

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::procs::{self, cpu_pct, Procs};
use super::report::{fixed, replace_section, row};
use super::{median, say, Machine, Settings};
use crate::feed::load::Percentiles;
use watch::{Boards, Seen};

/// Banks publishing (spread over the six partitions by their ids).
const BANKS: usize = 24;
/// Single boards timed per count of projectors, one every [`PACE`].
const SINGLES: usize = 200;
const PACE: Duration = Duration::from_millis(50);
/// Boards of one burst, published by all banks at once.
const BURST: usize = 400;
/// What a fresh board is: shown within this of its 202.
const FRESH_MS: f64 = 50.0;
/// How long boards are watched after a member joins, leaves or dies.
const WINDOW: Duration = Duration::from_secs(10);
const PARTITIONS: usize = 6;

/// The broker's group settings at Kafka's defaults, for the cost beside.
const KAFKA_DEFAULTS: &str = "group.consumer.min.session.timeout.ms=45000
group.consumer.session.timeout.ms=45000
group.consumer.min.heartbeat.interval.ms=5000
group.consumer.heartbeat.interval.ms=5000
";

/// One count of projectors: single boards' and bursts' freshness.
struct Phase {
    singles: Percentiles,
    bursts: Vec<f64>,
}

/// One membership change and how soon boards were fresh again.
struct Change {
    what: &'static str,
    at: Instant,
}

pub async fn run(settings: &Settings) -> anyhow::Result<()> {
    // Each on a broker of its own, in turns, so that the machine's noise
    // falls on both alike.
    let (mut at_defaults, mut at_stack) = (Vec::new(), Vec::new());
    for round in 1..=settings.rounds {
        say(format!("what the group costs at rest, round {round}: three idle projectors, the broker at Kafka's defaults, then at the stack's settings"));
        at_defaults.push(rest_cost(settings, KAFKA_DEFAULTS).await?);
        at_stack.push(rest_cost(settings, "").await?);
    }

    let mut procs = Procs::new(settings, &topic()).await?;
    procs.start_stack().await?;
    let ingest = procs::ingest_client()?;
    let boards = Boards::register(ingest, BANKS).await?;
    let key = procs.api_key("group", "bench")?;
    let api = format!("http://127.0.0.1:{}", procs::API);
    let stop = CancellationToken::new();
    let _stop_watching = stop.clone().drop_guard();
    boards.watch(api, key, stop.clone());
    say("warm-up: two boards per bank, not measured");
    paced(&boards, 2 * BANKS, None).await?;
    boards.settled(Duration::from_secs(30)).await?;
    boards.take();

    say("one projector");
    let one = phase(&boards, settings.rounds, &procs.dir, "1").await?;
    say("three projectors sharing the partitions");
    for i in 2..=3 {
        start_member(&mut procs, i)?;
    }
    wait_shares(&[1, 2, 3]).await?;
    // Each new member's first batch still waits for its hand-over; that
    // is the churn's figure below, not the steady state's.
    paced(&boards, 2 * BANKS, None).await?;
    boards.settled(Duration::from_secs(30)).await?;
    boards.take();
    let three = phase(&boards, settings.rounds, &procs.dir, "3").await?;

    say("members joining, leaving and killed while boards are published");
    let changes = churn(&mut procs, &boards, settings.rounds).await?;
    stop.cancel();

    let machine = Machine::here();
    let ms = |v: f64| format!("{} ms", fixed(v, 0));
    let phase_row = |n: &str, p: &Phase| {
        row(&[
            n.to_owned(),
            ms(p.singles.p50),
            ms(p.singles.p99),
            ms(median(&p.bursts)),
            p.bursts
                .iter()
                .map(|b| fixed(*b, 0))
                .collect::<Vec<_>>()
                .join(", "),
        ])
    };
    let change_rows: Vec<String> = ["joins", "leaves (SIGTERM)", "killed (kill -9)"]
        .iter()
        .map(|what| {
            let times: Vec<f64> = changes
                .iter()
                .filter(|(c, _)| c.what == *what)
                .map(|(_, t)| *t)
                .collect();
            row(&[
                (*what).to_owned(),
                ms(median(&times)),
                times
                    .iter()
                    .map(|t| fixed(*t, 0))
                    .collect::<Vec<_>>()
                    .join(", "),
            ])
        })
        .collect();
    let cost_row = |what: &str, costs: &[(f64, f64)]| {
        let broker: Vec<f64> = costs.iter().map(|c| c.0).collect();
        let projectors: Vec<f64> = costs.iter().map(|c| c.1).collect();
        row(&[
            what.to_owned(),
            format!("{}%", fixed(median(&broker), 1)),
            format!("{}%", fixed(median(&projectors), 1)),
            broker
                .iter()
                .map(|b| fixed(*b, 1))
                .collect::<Vec<_>>()
                .join(", "),
        ])
    };
    let section = format!(
        r#"## Freshness with three projectors, and takeover

{run}, release build. A stack of the bench's own (one Kafka broker, ingest, the API) on a
six-partition topic; {BANKS} banks publish boards of 5 currencies; a watcher reads the
all-banks /rates every 2 ms and notes when each bank's `lastRatesUpdatedAt` first shows each
board. Single boards: {SINGLES}, one every {pace} ms, each timed from its 202 to /rates.
Bursts: {BURST} boards published by all banks at once, timed from the last 202 to the last
board shown ({rounds} bursts). First one projector (the baseline), then three in `auto` mode
sharing the partitions.

| projectors | single p50 | single p99 | burst settled after its last board (median) | each burst (ms) |
|---|---|---|---|---|
{one}
{three}

Then, with three projectors and a board every {pace} ms: a fourth joins, then leaves with
SIGTERM; one of the three is killed with kill -9, then started again (a join). Each change is
timed from the moment it was made to the moment the last board slower than {fresh} ms was
shown (0: none was slower), over the {window} s after it. For kill -9 this is the takeover: the
dead member's partitions wait for the broker to end its session, then another member folds
what waited.

| membership change | fresh again after (median) | each (ms) |
|---|---|---|
{changes}

The group's cost at rest: CPU over 20 s (% of one core) of the broker and of three idle
projectors, at the stack's group settings (2 s session, 250 ms heartbeat) and at Kafka's
defaults (45 s session, 5 s heartbeat), each on a broker of its own, in turns ({rounds}
rounds; medians).

| broker group settings | broker | three projectors | broker, each round (%) |
|---|---|---|---|
{cost_stack}
{cost_defaults}
"#,
        run = machine.run_by("deploy/bench group"),
        pace = PACE.as_millis(),
        rounds = settings.rounds,
        one = phase_row("1", &one),
        three = phase_row("3", &three),
        fresh = FRESH_MS,
        window = WINDOW.as_secs(),
        changes = change_rows.join("\n"),
        cost_stack = cost_row("the stack's (deploy/stack)", &at_stack),
        cost_defaults = cost_row("Kafka's defaults", &at_defaults),
    );
    println!("{section}");
    replace_section(&settings.page(), &section)
}

fn topic() -> Vec<(&'static str, String)> {
    vec![("RATEWIRE_TOPIC_PARTITIONS", PARTITIONS.to_string())]
}

/// The operator port of member `i` (1 is the stack's own projector).
fn member_port(i: u16) -> u16 {
    if i == 1 {
        procs::PROJECTOR
    } else {
        procs::PROJECTOR + 200 + i
    }
}

fn member_name(i: u16) -> String {
    if i == 1 {
        "projector".into()
    } else {
        format!("projector-{i}")
    }
}

fn start_member(procs: &mut Procs, i: u16) -> anyhow::Result<u32> {
    let projector = procs.settings.bin("ratewire-projector");
    procs.start(
        &member_name(i),
        &projector,
        &[],
        &[(
            "RATEWIRE_PROJECTOR_LISTEN",
            format!("127.0.0.1:{}", member_port(i)),
        )],
    )
}

/// Waits until members `members` share every partition, each some.
async fn wait_shares(members: &[u16]) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut shares = Vec::new();
        for i in members {
            shares.push(procs::partitions_read(&http, member_port(*i)).await);
        }
        let held: usize = shares.iter().flatten().sum();
        if held == PARTITIONS && shares.iter().all(|s| s.is_some_and(|n| n > 0)) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the members did not share the partitions within 60 s: {shares:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Publishes `count` boards (fewer if `stop` comes first), one every
/// [`PACE`], the banks in turn; an error if any was not accepted.
async fn paced(
    boards: &Boards,
    count: usize,
    stop: Option<&CancellationToken>,
) -> anyhow::Result<()> {
    let mut tick = tokio::time::interval(PACE);
    let mut tasks = JoinSet::new();
    for i in 0..count {
        if stop.is_some_and(CancellationToken::is_cancelled) {
            break;
        }
        tick.tick().await;
        let boards = boards.clone();
        tasks.spawn(async move { boards.publish(i % boards.len()).await });
        while let Some(done) = tasks.try_join_next() {
            done??;
        }
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(())
}

/// Appends each board seen to `boards.tsv` in the bench directory, for
/// reading after a run: what it was part of, its bank, as-of time and
/// milliseconds from its 202 to /rates.
fn keep(dir: &Path, part: &str, seen: &[Seen]) -> anyhow::Result<()> {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("boards.tsv"))?;
    for s in seen {
        writeln!(file, "{part}\t{}\t{}\t{:.1}", s.bank, s.as_of, s.ms())?;
    }
    Ok(())
}

/// Single boards, then `rounds` bursts.
async fn phase(boards: &Boards, rounds: u64, dir: &Path, name: &str) -> anyhow::Result<Phase> {
    paced(boards, SINGLES, None).await?;
    boards.settled(Duration::from_secs(30)).await?;
    let seen = boards.take();
    keep(dir, &format!("{name} singles"), &seen)?;
    let singles = Percentiles::of(seen.iter().map(Seen::ms).collect());
    let mut bursts = Vec::new();
    for _ in 0..rounds {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut tasks = JoinSet::new();
        for bank in 0..boards.len() {
            let boards = boards.clone();
            tasks.spawn(async move {
                let mut last = None;
                for _ in 0..BURST / BANKS {
                    last = Some(boards.publish(bank).await?);
                }
                anyhow::Ok(last)
            });
        }
        let mut last_accepted: Option<Instant> = None;
        while let Some(done) = tasks.join_next().await {
            last_accepted = last_accepted.max(done??);
        }
        boards.settled(Duration::from_secs(30)).await?;
        let seen = boards.take();
        keep(dir, &format!("{name} burst"), &seen)?;
        let (Some(last), Some(shown)) = (last_accepted, seen.iter().map(|s| s.visible).max())
        else {
            bail!("a burst with no board");
        };
        bursts.push(shown.saturating_duration_since(last).as_secs_f64() * 1000.0);
    }
    Ok(Phase { singles, bursts })
}

/// Members join, leave and die while boards are published; each change
/// with how soon every board was fresh again (ms).
async fn churn(
    procs: &mut Procs,
    boards: &Boards,
    rounds: u64,
) -> anyhow::Result<Vec<(Change, f64)>> {
    let stop = CancellationToken::new();
    let feed = {
        let (boards, stop) = (boards.clone(), stop.clone());
        tokio::spawn(async move { paced(&boards, usize::MAX, Some(&stop)).await })
    };
    let mut changes = Vec::new();
    let mut change = |what, at| changes.push(Change { what, at });
    for _ in 0..rounds {
        change("joins", Instant::now());
        start_member(procs, 4)?;
        tokio::time::sleep(WINDOW).await;
        change("leaves (SIGTERM)", Instant::now());
        procs.stop(&member_name(4));
        tokio::time::sleep(WINDOW).await;
        change("killed (kill -9)", Instant::now());
        procs.kill(&member_name(3));
        tokio::time::sleep(WINDOW).await;
        change("joins", Instant::now());
        start_member(procs, 3)?;
        tokio::time::sleep(WINDOW).await;
    }
    stop.cancel();
    feed.await??;
    boards.settled(Duration::from_secs(30)).await?;
    let seen = boards.take();
    keep(&procs.dir, "churn", &seen)?;
    let ends: Vec<Instant> = changes
        .iter()
        .skip(1)
        .map(|c| c.at)
        .chain([Instant::now()])
        .collect();
    Ok(changes
        .into_iter()
        .zip(ends)
        .map(|(change, end)| {
            let fresh_again = seen
                .iter()
                .filter(|s| s.visible > change.at && s.visible <= end && s.ms() > FRESH_MS)
                .map(|s| s.visible.duration_since(change.at).as_secs_f64() * 1000.0)
                .fold(0.0, f64::max);
            (change, fresh_again)
        })
        .collect())
}

/// CPU over 20 s (% of one core) of a broker with `group_settings` over
/// the stack's, and of three idle projectors sharing its partitions.
async fn rest_cost(settings: &Settings, group_settings: &str) -> anyhow::Result<(f64, f64)> {
    let mut env = topic();
    let extra = settings.dir().join("group-settings.properties");
    env.push(("RATEWIRE_KAFKA_EXTRA_CONFIG", extra.display().to_string()));
    let mut procs = Procs::new(settings, &env).await?;
    std::fs::write(&extra, group_settings)?;
    procs.start_broker().await?;
    let ingest = settings.bin("ratewire-ingest");
    procs.start("ingest", &ingest, &[], &[])?;
    procs::wait_url(&format!("http://127.0.0.1:{}/readyz", procs::INGEST)).await?;
    let mut members = Vec::new();
    for i in 1..=3 {
        members.push(start_member(&mut procs, i)?);
    }
    wait_shares(&[1, 2, 3]).await?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let broker = [procs.pid("broker")];
    Ok(tokio::join!(cpu_pct(20, &broker), cpu_pct(20, &members)))
}
