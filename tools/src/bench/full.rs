//! `deploy/bench`: the whole stack on a machine of its own, against the
//! targets: API throughput and latency beside the bare baselines,
//! freshness under a steady load, ingest and the projector on a backlog,
//! the replay, CPU at rest and resident memory.

use std::time::Duration;

use anyhow::{bail, Context};

use super::backlog::{backlog, Backlog};
use super::freshness::{freshness, freshness_rows, rss, Freshness};
use super::load::{self, Latency};
use super::procs::{self, cpu_pct, rss_mb, Procs};
use super::report::{fixed, replace_section, row};
use super::{median, say, Machine, Settings};

/// One endpoint of the API's table.
struct Endpoint {
    name: &'static str,
    path: &'static str,
    encoding: Option<&'static str>,
    /// Asked to be signed (`Accept-Signature`).
    signed: bool,
}

const ENDPOINTS: [Endpoint; 6] = [
    Endpoint {
        name: "rates?bankId=1",
        path: "/api/v1/rates?bankId=1",
        encoding: None,
        signed: false,
    },
    Endpoint {
        name: "rates (all 50 banks)",
        path: "/api/v1/rates",
        encoding: None,
        signed: false,
    },
    Endpoint {
        name: "rates (all 50 banks), gzip",
        path: "/api/v1/rates",
        encoding: Some("gzip"),
        signed: false,
    },
    Endpoint {
        name: "best-rates USD",
        path: "/api/v1/rates/best-rates?currencyCode=USD",
        encoding: None,
        signed: false,
    },
    Endpoint {
        name: "convert 100 USD",
        path: "/api/v1/convert?from=USD&to=ETB&amount=100",
        encoding: None,
        signed: false,
    },
    Endpoint {
        name: "convert 100 USD, signed",
        path: "/api/v1/convert?from=USD&to=ETB&amount=100",
        encoding: None,
        signed: true,
    },
];

/// What a signed answer is asked with.
const SIGNED: &str =
    r#"accept-signature: sig1=("@status" "content-digest" "content-type" "@query";req)"#;

/// Requests/s and latency at 70% of it: medians over the rounds.
#[derive(Debug, Clone, Copy)]
pub(super) struct Measured {
    pub rps: f64,
    pub latency: Latency,
}

/// Saturates `url`, then paces it at 70% of that, `rounds` times.
pub(super) fn measure(
    procs: &Procs,
    name: &str,
    url: &str,
    headers: &[String],
) -> anyhow::Result<Measured> {
    let settings = &procs.settings;
    load::warm(settings, url, headers, settings.connections)?;
    let (mut rates, mut latencies) = (Vec::new(), Vec::new());
    for round in 1..=settings.rounds {
        let rps = load::saturate(settings, url, headers)?;
        let rate = (rps * 0.7) as u64;
        let latency = load::paced(
            procs,
            &format!("{name}-{round}"),
            url,
            rate,
            settings.connections * 2,
            headers,
        )?;
        rates.push(rps);
        latencies.push(latency);
    }
    Ok(Measured {
        rps: median(&rates),
        latency: Latency::median(&latencies),
    })
}

/// The bytes of `url`'s body as sent.
fn body_bytes(
    url: &str,
    headers: &[String],
    into: Option<&std::path::Path>,
) -> anyhow::Result<u64> {
    let mut command = std::process::Command::new("curl");
    command.args(["-fsS", "-w", "%{size_download}", "-o"]);
    command.arg(into.map_or("/dev/null".into(), |p| p.to_string_lossy().into_owned()));
    for header in headers {
        command.arg("-H").arg(header);
    }
    let output = command.arg(url).output().context("curl")?;
    if !output.status.success() {
        bail!("{url} did not answer");
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().parse()?)
}

/// The axum baseline answering the bytes the API at `api` answers to
/// `/api/v1/rates?bankId=1` (asked with the `auth` header).
pub(super) async fn single_bank_baseline(
    procs: &mut Procs,
    api: &str,
    auth: &str,
) -> anyhow::Result<Measured> {
    let single = procs.dir.join("body.json");
    body_bytes(
        &format!("{api}/api/v1/rates?bankId=1"),
        &[auth.to_owned()],
        Some(&single),
    )?;
    baseline(procs, "axum", &single, "/api/v1/rates?bankId=1", None).await
}

/// The axum baseline answering `body` as it is (with `encoding` as its
/// Content-Encoding), measured as the API is.
async fn baseline(
    procs: &mut Procs,
    name: &str,
    body: &std::path::Path,
    path: &str,
    encoding: Option<&str>,
) -> anyhow::Result<Measured> {
    let addr = format!("127.0.0.1:{}", procs::BASELINE);
    let mut args = vec![addr.as_str(), body.to_str().unwrap_or_default()];
    args.extend(encoding);
    let constant = procs.settings.example("constant");
    procs.start("baseline", &constant, &args, &[])?;
    let header = match encoding {
        Some(encoding) => format!("accept-encoding: {encoding}"),
        None => "x-bench: 1".into(),
    };
    let url = format!("http://{addr}{path}");
    let measured = match procs::wait_url(&format!("http://{addr}/")).await {
        Ok(()) => tokio::task::block_in_place(|| measure(procs, name, &url, &[header])),
        Err(e) => Err(e),
    };
    procs.stop("baseline");
    measured
}

fn kafka_version(settings: &Settings) -> String {
    std::fs::read_to_string(settings.root.join("deploy/kafka/pom.xml"))
        .ok()
        .and_then(|pom| {
            let start = pom.find("<kafka.version>")? + "<kafka.version>".len();
            Some(pom[start..].split('<').next()?.to_owned())
        })
        .unwrap_or_else(|| "?".into())
}

pub async fn run(settings: &Settings) -> anyhow::Result<()> {
    let mut procs = Procs::new(settings, &[]).await?;
    procs.start_stack().await?;
    let key = procs.api_key("bench", "bench")?;
    let auth = format!("x-api-key: {key}");
    let api = format!("http://127.0.0.1:{}", procs::API);
    let feed = settings.bin("ratewire-feed");

    say("resident memory at idle");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = rss(&procs);

    let Freshness {
        fresh,
        at_projector,
        over_all,
        cpu_load,
        under_load,
    } = freshness(&procs, &feed, &api, &key).await?;

    say(format!(
        "API throughput and latency: {} rounds of oha ({}s closed loop at {} connections), then paced at 70% of it",
        settings.rounds, settings.seconds, settings.connections
    ));
    let mut rows = Vec::new();
    for endpoint in &ENDPOINTS {
        let url = format!("{api}{}", endpoint.path);
        let mut headers = vec![
            auth.clone(),
            format!(
                "accept-encoding: {}",
                endpoint.encoding.unwrap_or("identity")
            ),
        ];
        if endpoint.signed {
            headers.push(SIGNED.to_owned());
        }
        let name: String = endpoint
            .name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let measured = tokio::task::block_in_place(|| measure(&procs, &name, &url, &headers))?;
        let bytes = body_bytes(&url, &headers, None)?;
        rows.push((endpoint, measured, bytes));
    }
    let api_peak = rss_mb(procs.pid("api"));

    say("baselines: a raw Redis GET of the same view, and axum returning the same bytes (single-bank, all-banks gzip)");
    let pool = procs::database(procs::DATABASE).await?;
    let generation: String = sqlx::query_scalar(
        "SELECT schema_name || '.' || (SELECT system_identifier FROM pg_control_system()) || '.' || epoch FROM ratewire.read_model",
    )
    .fetch_one(&pool)
    .await?;
    let view = format!("{}{{{generation}}}:view:rates:bank:1:00", procs::PREFIX);
    let redis_rps = median(
        &(0..settings.rounds)
            .map(|_| load::redis_get(settings.connections, &view))
            .collect::<anyhow::Result<Vec<_>>>()?,
    );
    let axum = single_bank_baseline(&mut procs, &api, &auth).await?;
    let gzipped = procs.dir.join("body.json.gz");
    body_bytes(
        &format!("{api}/api/v1/rates"),
        &[auth.clone(), "accept-encoding: gzip".into()],
        Some(&gzipped),
    )?;
    let axum_gzip = baseline(
        &mut procs,
        "axum-gzip",
        &gzipped,
        "/api/v1/rates",
        Some("gzip"),
    )
    .await?;

    say("at rest: broker and projector CPU with nothing published (10 s), then with the demo feed (20 s)");
    let cpu_quiet = cpu_pct(10, &[procs.pid("broker"), procs.pid("projector")]).await;
    procs.start("demo", &feed, &["demo"], &[])?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let cpu_demo = cpu_pct(20, &[procs.pid("broker"), procs.pid("projector")]).await;
    procs.stop("demo");
    tokio::time::sleep(Duration::from_secs(1)).await;

    let measured = backlog(&mut procs, &pool).await?;
    let folding_rate = measured.folding_rate();
    let Backlog {
        ingest,
        accepted,
        bare,
        fold_seconds,
        start_seconds,
        total_entries,
        replay_seconds,
    } = measured;
    let entries = accepted * 30.0;

    let machine = Machine::here();
    let lat = |m: &Measured| {
        format!(
            "{} | {} | {}",
            fixed(m.latency.p50, 2),
            fixed(m.latency.p99, 2),
            fixed(m.latency.p999, 2)
        )
    };
    let (single_row, best_row) = (&rows[0].1, &rows[3].1);
    let ratio = |m: &Measured| fixed(m.rps / axum.rps, 2);
    let fold_rate = entries / fold_seconds;
    let table: Vec<String> = rows
        .iter()
        .map(|(e, m, bytes)| row(&[e.name.into(), fixed(m.rps, 0), lat(m), bytes.to_string()]))
        .collect();
    let section = format!(
        r#"## Full run

{run}, {memory} GiB, release build. A stack of its own (Apache Kafka {kafka}, one KRaft node on
its own empty log; Postgres and Redis of the machine), with the load generators and the
baselines on the same cores as every process: figures are for the whole machine, not for one
process with cores to spare. Each API figure is the median of {rounds} rounds.

### Targets

| what | target | measured |
|---|---|---|
| API, `/api/v1/rates?bankId=1`, keys and limits on, share of the axum baseline | >= 0.95 | {ratio_single} ({single_rps} requests/s) |
| API, best-rates USD, share of the axum baseline | | {ratio_best} ({best_rps} requests/s) |
| `/rates?bankId=1` p99 at 70% of its rate, against the axum baseline's | <= 1.2x | {single_p99_ratio}x: {single_p99} ms against {axum_p99} ms |
| best-rates p99 at 70% of its rate, against the axum baseline's | <= 1.2x | {best_p99_ratio}x: {best_p99} ms against {axum_p99} ms |
| signed `/convert` (`Accept-Signature`, Ed25519), share of the unsigned | | {signed_share} ({signed_rps} against {unsigned_rps} requests/s) |
| all-banks `/rates` (gzip) p99 at 70% of its rate | <= 10 ms | {gzip_p99} ms (plain: {plain_p99} ms; the axum baseline with the same gzip bytes: {axum_gzip_p99} ms) |
| from a push's 202 to visible, p99 (`/rates?bankId`), 100 boards/s, 50 banks x 30 currencies | <= 50 ms | {visible} ms |
| from a push's 202 to visible, p99, in the all-banks lists (`/banks`), the same load | <= 50 ms | {listed} ms |
| ingest, 32 publishers, boards of 30 currencies acknowledged (acks=all) | >= 5,000 boards/s, ack p99 <= 20 ms | {ingest_rate} boards/s, p99 {ingest_p99} ms (the broker's client alone: {bare_rate} records/s, p99 {bare_p99} ms) |
| projector, backlog of {entries} rate entries | >= 400,000 entries/s | {fold_rate} entries/s ({folding_rate} after its first {start} s, its start) |
| replay of {total_entries} rate entries | <= 3 s for 1.15 million | {replay} s |
| resident memory at idle (ingest, projector, api) | < 64 MB each | {idle0}, {idle1}, {idle2} MB |
| the broker's resident memory under the freshness load | < 700 MB | {load3} MB |
| broker + projector CPU at rest, demo feed running (12 banks every 3 s) | < 5% of one core | {cpu_demo}% |

The other targets have scenarios of their own, each with its baseline, in the sections below:
alerts (`deploy/bench alerts`), three projectors and takeover (`deploy/bench group`) and
set-up from a fresh clone (`deploy/bench setup`).

### API (keys and rate limits on, a plan that never refuses)

Saturation: `oha -z {seconds}s -c {connections}` (closed loop). Latency: `paced --rate <70% of
saturation> --seconds {seconds} --connections {connections2}` (tools/examples/paced.rs; open loop, each
request timed from when it was due, into a fixed-size histogram; see "Measuring latency" below).
Every process keeps running through these, the projector included.

| endpoint | requests/s | p50 ms | p99 ms | p99.9 ms | body bytes |
|---|---|---|---|---|---|
{table}
| baseline: axum returning the same bytes | {axum_rps} | {axum_lat} | |
| baseline: axum returning the all-banks gzip bytes | {axum_gzip_rps} | {axum_gzip_lat} | |
| baseline: `redis-benchmark GET` of the same view (-c {connections}) | {redis_rps} | | | | |

Ratios for `/api/v1/rates?bankId=1`: {ratio_single} of the axum baseline, {ratio_redis} of a raw Redis GET.

### Freshness (`ratewire-feed load --rate 100 --banks 50 --currencies 30 --duration 30s --watch-api`)

It follows 20 s of the same load, not measured, so that the broker's JVM has compiled its
hot paths. After its acknowledgement each board waits in a list; one watcher polls
`/api/v1/rates?bankId=N` for every bank with boards waiting and, beside them, `/api/v1/banks`
while any board is not yet in the all-banks lists, in rounds at least 5 ms apart (the
measurement's resolution), at most 4 bank requests at a time, so the watch stays a small load
whatever the latency ({polls} requests in all). A board counts as served when the bank's
`lastRatesUpdatedAt` reaches its as-of. Times count from the moment the push was due, and (the
targets' measure) from its acknowledgement.

| | p50 ms | p99 ms | p99.9 ms | max ms |
|---|---|---|---|---|
{fresh_rows}

{accepted_fresh} boards accepted, {failed} failed, {not_seen} not served within 10 s
({not_listed} not in the lists within 10 s).

At the projector (`ratewire_projector_visible_delay_seconds`, from each event's acceptance by
ingest to its bank's views written to Redis): {p0}% within 25 ms, {p1}% within 50 ms, {p2}%
within 100 ms. To the views over all banks written after them (best rates of the board's
currencies and `/currencies`; `ratewire_projector_aggregates_delay_seconds`): {a0}% within
25 ms, {a1}% within 50 ms, {a2}% within 100 ms.

### Ingest and projector

- Ingest, as fast as 32 concurrent publishers can, each push acknowledged by the broker
  (acks=all, idempotent): {ingest_rate} boards/s ({accepted} boards of 30 currencies; ack p50
  {ingest_p50} ms, p99 {ingest_p99} ms).
- Its bare baseline, the broker's client alone: the same events produced again with ingest's
  producer settings by 32 senders, each waiting for its acknowledgement before the next, as
  publishers wait for their 202: {bare_rate} records/s (ack p50 {bare_p50} ms, p99 {bare_p99}
  ms).
- Projector, started on that backlog: {entries} rate entries in {fold} s = {fold_rate} entries/s
  (from process start to the last event committed, views included). Its first events were
  committed {start} s after its start (the process starting, joining the consumer group,
  the first fetch); after that, {folding_rate} entries/s.
- Replay of the whole log into a fresh schema (`ratewire-projector replay --no-switch`,
  {total_entries} rate entries, views rebuilt at the end): {replay} s.

### Broker and projector CPU (% of one core, both together)

| nothing published | demo feed (12 banks every 3 s) | freshness load (100 boards/s) |
|---|---|---|
| {cpu_quiet} | {cpu_demo} | {cpu_load} |

### Resident memory (MB)

| process | idle | under the freshness load | api after the throughput runs |
|---|---|---|---|
| ingest | {idle0} | {load0} | |
| projector | {idle1} | {load1} | |
| api | {idle2} | {load2} | {api_peak} |
| broker (Apache Kafka, one JVM, heap at most 448 MB) | {idle3} | {load3} | |
"#,
        run = machine.run_by("deploy/bench"),
        memory = machine.memory_gib,
        kafka = kafka_version(settings),
        rounds = settings.rounds,
        ratio_single = ratio(single_row),
        single_rps = fixed(single_row.rps, 0),
        ratio_best = ratio(best_row),
        best_rps = fixed(best_row.rps, 0),
        single_p99 = fixed(single_row.latency.p99, 2),
        best_p99 = fixed(best_row.latency.p99, 2),
        single_p99_ratio = fixed(single_row.latency.p99 / axum.latency.p99, 2),
        best_p99_ratio = fixed(best_row.latency.p99 / axum.latency.p99, 2),
        gzip_p99 = fixed(rows[2].1.latency.p99, 2),
        signed_share = fixed(rows[5].1.rps / rows[4].1.rps, 2),
        signed_rps = fixed(rows[5].1.rps, 0),
        unsigned_rps = fixed(rows[4].1.rps, 0),
        plain_p99 = fixed(rows[1].1.latency.p99, 2),
        axum_p99 = fixed(axum.latency.p99, 2),
        axum_gzip_p99 = fixed(axum_gzip.latency.p99, 2),
        visible = fresh.get("visible_after_ack_p99_ms"),
        listed = fresh.get("listed_after_ack_p99_ms"),
        entries = entries,
        fold_rate = fixed(fold_rate, 0),
        total_entries = total_entries,
        replay = fixed(replay_seconds, 2),
        idle0 = fixed(idle[0], 1),
        idle1 = fixed(idle[1], 1),
        idle2 = fixed(idle[2], 1),
        idle3 = fixed(idle[3], 1),
        load0 = fixed(under_load[0], 1),
        load1 = fixed(under_load[1], 1),
        load2 = fixed(under_load[2], 1),
        load3 = fixed(under_load[3], 1),
        api_peak = fixed(api_peak, 1),
        cpu_quiet = fixed(cpu_quiet, 1),
        cpu_demo = fixed(cpu_demo, 1),
        cpu_load = fixed(cpu_load, 1),
        seconds = settings.seconds,
        connections = settings.connections,
        connections2 = settings.connections * 2,
        table = table.join("\n"),
        axum_rps = fixed(axum.rps, 0),
        axum_lat = lat(&axum),
        axum_gzip_rps = fixed(axum_gzip.rps, 0),
        axum_gzip_lat = lat(&axum_gzip),
        redis_rps = fixed(redis_rps, 0),
        ratio_redis = fixed(single_row.rps / redis_rps, 2),
        polls = fresh.get("watch_polls"),
        fresh_rows = freshness_rows(&fresh),
        accepted_fresh = fresh.get("accepted"),
        failed = fresh.get("failed"),
        not_seen = fresh.get("visible_not_seen"),
        not_listed = fresh.get("listed_not_seen"),
        p0 = at_projector[0],
        p1 = at_projector[1],
        p2 = at_projector[2],
        a0 = over_all[0],
        a1 = over_all[1],
        a2 = over_all[2],
        ingest_rate = ingest.get("boards_per_second"),
        accepted = accepted,
        ingest_p50 = ingest.get("ack_p50_ms"),
        ingest_p99 = ingest.get("ack_p99_ms"),
        bare_rate = fixed(bare.per_second, 0),
        bare_p50 = fixed(bare.ack.p50, 2),
        bare_p99 = fixed(bare.ack.p99, 2),
        fold = fixed(fold_seconds, 2),
        start = fixed(start_seconds, 2),
        folding_rate = fixed(folding_rate, 0),
    );
    replace_section(&settings.page(), &section)
}
