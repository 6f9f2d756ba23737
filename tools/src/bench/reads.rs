//! `deploy/bench reads`: the API's two hot reads (`/rates?bankId=1` and
//! best-rates USD) beside the axum baseline returning the same bytes, in
//! rounds, printed and not written to the page. Pointed at another
//! checkout's release build (`RATEWIRE_BENCH_ROOT`), it pairs two builds
//! on the same machine within minutes, which the full run's spread
//! between days cannot.

use super::freshness::FRESHNESS_LOAD;
use super::full::{measure, single_bank_baseline, Measured};
use super::procs::{self, Procs};
use super::{say, Settings};

pub async fn run(settings: &Settings) -> anyhow::Result<()> {
    let mut procs = Procs::new(settings, &[]).await?;
    procs.start_stack().await?;
    let key = procs.api_key("bench", "bench")?;
    let auth = format!("x-api-key: {key}");
    let api = format!("http://127.0.0.1:{}", procs::API);
    say("boards: the freshness load for 10 s, so every view is there");
    let fill = [FRESHNESS_LOAD.as_slice(), &["--duration", "10s"]].concat();
    procs.run(&settings.bin("ratewire-feed"), &fill, "feed.log")?;
    let mut rows: Vec<(&str, Measured)> = Vec::new();
    for (name, path) in [
        ("rates?bankId=1", "/api/v1/rates?bankId=1"),
        (
            "best-rates USD",
            "/api/v1/rates/best-rates?currencyCode=USD",
        ),
    ] {
        let url = format!("{api}{path}");
        let headers = [auth.clone(), "accept-encoding: identity".into()];
        let file: String = name.chars().filter(char::is_ascii_alphanumeric).collect();
        rows.push((
            name,
            tokio::task::block_in_place(|| measure(&procs, &file, &url, &headers))?,
        ));
    }
    let axum = single_bank_baseline(&mut procs, &api, &auth).await?;
    println!("| read | requests/s | share of the baseline | p99 at 70% (ms) |");
    println!("|---|---|---|---|");
    for (name, measured) in rows.iter().chain([&("axum baseline", axum)]) {
        println!(
            "| {name} | {:.0} | {:.2} | {:.2} |",
            measured.rps,
            measured.rps / axum.rps,
            measured.latency.p99
        );
    }
    Ok(())
}
