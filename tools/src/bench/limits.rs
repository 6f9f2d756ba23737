//! `deploy/bench limits`: what counting every request in Redis costs, on
//! the running local stack: two API processes, rate limits on and off,
//! measured in alternating rounds.

use super::load;
use super::procs::{self, Procs};
use super::report::{fixed, replace_section, row};
use super::{median, say, Machine, Settings};

const ON: u16 = 18090;
const OFF: u16 = 18091;

pub async fn run(settings: &Settings) -> anyhow::Result<()> {
    procs::wait_url("http://127.0.0.1:8080/readyz")
        .await
        .map_err(|_| anyhow::anyhow!("start the stack first: deploy/stack up"))?;
    let database = std::env::var("RATEWIRE_DATABASE_URL")
        .unwrap_or_else(|_| format!("{}/ratewire", procs::POSTGRES));
    let env = [
        ("RATEWIRE_DATABASE_URL", database),
        ("RATEWIRE_PLANS", procs::PLANS.to_owned()),
        ("RATEWIRE_USAGE_SYNC_SECS", "60".to_owned()),
        ("RUST_LOG", "warn".to_owned()),
    ];
    let mut procs = Procs::beside_local_stack(settings, &env)?;
    let api = settings.bin("ratewire-api");
    for (name, port, limits) in [("api-on", ON, "true"), ("api-off", OFF, "false")] {
        procs.start(
            name,
            &api,
            &[],
            &[
                ("RATEWIRE_API_LISTEN", format!("127.0.0.1:{port}")),
                (
                    "RATEWIRE_API_OPERATOR_LISTEN",
                    format!("127.0.0.1:{}", port + 1000),
                ),
                ("RATEWIRE_RATE_LIMITS", limits.to_owned()),
            ],
        )?;
    }
    for port in [ON, OFF] {
        procs::wait_url(&format!("http://127.0.0.1:{port}/readyz")).await?;
    }
    let key = procs.api_key("bench", "bench")?;
    let header = format!("x-api-key: {key}");
    let url = |port: u16| format!("http://127.0.0.1:{port}/api/v1/rates?bankId=1");
    say("warming up");
    for port in [ON, OFF] {
        load::wrk(settings, &url(port), &header, 2)?;
    }
    let mut rows = Vec::new();
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for round in 1..=settings.rounds {
        for (mode, port) in [("on", ON), ("off", OFF)] {
            say(format!("round {round}, limits {mode}"));
            let (rps, p50, p99) = tokio::task::block_in_place(|| {
                load::wrk(settings, &url(port), &header, settings.seconds)
            })?;
            match mode {
                "on" => on.push(rps),
                _ => off.push(rps),
            }
            rows.push(row(&[
                round.to_string(),
                mode.into(),
                fixed(rps, 0),
                fixed(p50, 3),
                fixed(p99, 3),
            ]));
        }
    }
    let prefix = key.split('_').nth(1).unwrap_or_default();
    let _ = procs.run(&api, &["keys", "revoke", prefix], "keys.log");
    let (on, off) = (median(&on), median(&off));
    let machine = Machine::here();
    let section = format!(
        r#"## Rate limiting cost

{run}, release build, against the local stack's data (12 banks x 12 currencies;
`/api/v1/rates?bankId=1`). Two API processes share the machine with Postgres, Redis, the
projector, ingest and the demo feed; wrk runs on the same cores, closed loop: `wrk -t2
-c{connections} -d{seconds}s --latency`. "on" counts every request in Redis (requests arriving
together share one round trip: one increment per counter, one read per view); "off" is
`RATEWIRE_RATE_LIMITS=false` (the key is still checked, and the view is read on its own).

| round | limits | requests/s | p50 ms | p99 ms |
|---|---|---|---|---|
{rows}

Median throughput over {rounds} rounds: limits on {on} requests/s, off {off} requests/s (on/off = {ratio}).
"#,
        run = machine.run_by("deploy/bench limits"),
        connections = settings.connections,
        seconds = settings.seconds,
        rows = rows.join("\n"),
        rounds = settings.rounds,
        on = fixed(on, 0),
        off = fixed(off, 0),
        ratio = fixed(on / off, 2),
    );
    replace_section(&settings.page(), &section)
}
