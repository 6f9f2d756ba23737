//! The known-at bench's section of docs/benchmarks.md, and the figures of
//! the last full run it compares the live path with.

use super::super::report::{fixed, row};
use super::super::{Machine, Settings};
use super::targets::instant;
use super::{Figures, Measured, PUBLISHED_LIVE, RATE, READS, THROUGHPUTS};

/// The section's heading.
pub const HEADING: &str = "## Answers as known at an instant (issue 59)";

/// `/rates?bankId=1` and the axum baseline in the page's Full run section.
#[derive(Debug, Clone, PartialEq)]
pub struct FullRun {
    /// The line saying which command ran it, when and where.
    pub run_by: String,
    pub rates_rps: f64,
    pub baseline_rps: f64,
}

/// The Full run's figures, read from the page as `deploy/bench` wrote it.
pub fn last_full_run(page: &str) -> Option<FullRun> {
    let section: Vec<&str> = page
        .lines()
        .skip_while(|l| *l != "## Full run")
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .collect();
    let run_by = section.iter().find(|l| l.starts_with('`'))?;
    let run_by = run_by.split(", release build").next()?.trim().to_owned();
    let rps = |name: &str| -> Option<f64> {
        let prefix = format!("| {name} | ");
        section
            .iter()
            .find_map(|l| l.strip_prefix(&prefix))?
            .split('|')
            .next()?
            .trim()
            .parse()
            .ok()
    };
    Some(FullRun {
        run_by,
        rates_rps: rps("rates?bankId=1")?,
        baseline_rps: rps("baseline: axum returning the same bytes")?,
    })
}

fn mb(bytes: i64) -> String {
    fixed(bytes as f64 / 1_048_576.0, 1)
}

/// `+12.3` or `-4.5`.
fn signed_pct(pct: f64) -> String {
    format!("{pct:+.1}")
}

fn failures(f: &Figures) -> String {
    match f.failed {
        0 => "0".into(),
        n => format!("{n} of {}", f.requests),
    }
}

pub fn render(settings: &Settings, m: &Measured, full: Option<&FullRun>) -> String {
    let machine = Machine::here();
    let (known_rates, known_best, live_rates, live_best, axum) = (
        &m.reads[0],
        &m.reads[1],
        &m.reads[2],
        &m.reads[3],
        &m.reads[4],
    );
    let (final_answer, live_one, convert, signed) = (
        &m.throughputs[0],
        &m.throughputs[1],
        &m.throughputs[2],
        &m.throughputs[3],
    );
    let p99 = |f: &Figures| fixed(f.latency.p99, 2);
    let (year_rates, year_best) = (&m.published_live[0], &m.published_live[1]);
    let reads: Vec<String> = READS
        .iter()
        .zip(&m.reads)
        .chain(PUBLISHED_LIVE.iter().zip(&m.published_live))
        .map(|(name, f)| {
            row(&[
                (*name).to_owned(),
                fixed(f.rps, 0),
                fixed(f.latency.p50, 2),
                fixed(f.latency.p99, 2),
                fixed(f.latency.p999, 2),
                failures(f),
            ])
        })
        .collect();
    let throughputs: Vec<String> = THROUGHPUTS
        .iter()
        .zip(&m.throughputs)
        .map(|(name, f)| row(&[(*name).to_owned(), fixed(f.rps, 0), failures(f)]))
        .collect();
    let f = &m.footprint;
    let share_now = live_one.rps / axum.rps;
    let against_full = match full {
        Some(full) => format!(
            "{} (the axum baseline's {}: {} of it), from the [Full run](#full-run) section of this \
             page as it stood when this ran ({})",
            fixed(full.rates_rps, 0),
            fixed(full.baseline_rps, 0),
            fixed(full.rates_rps / full.baseline_rps, 2),
            full.run_by
        ),
        None => "no Full run section on this page".into(),
    };
    let (from, to) = m.window;
    let l = &m.loaded;
    format!(
        r#"{HEADING}

{run}, {memory} GiB, release build, on a stack of its own (its own Kafka broker, database and
Redis prefix; Postgres and Redis of the machine), load generators and baselines on the same
cores. Each figure is the median of {rounds} rounds; every round asks each request in turn.

The history: {boards} boards of 30 currencies ({entries} rate entries), 50 banks publishing one
an hour each from {first} to {last} (as-of), with {corrections} corrections and {retractions}
retractions of boards spread over it (each with a reason), published through the backfill
(`ratewire-feed backfill`'s code: ingest, the log, the fold; 50 banks in parallel, each bank's
boards in order) in stretches of days, the revisions of each stretch's boards after it:
{load_s} s, {load_rate} boards/s; the fold had everything {lag} s after the last 202.
Known-at times are the broker's append times, so the history became known over the load: the
instants asked (`asKnownAt`, to the millisecond) are drawn uniformly from {from} to {to}, from
when every bank had a board to the last board known; every answer was final (`immutable`).
Then the same reads on the same rows as if the year had been published live (known-at times
rewritten beside the as-of times: tools/src/bench/known_at/live_times.rs says how and why), at
instants drawn uniformly from {year_from} to {year_to}; the API restarted first.

### Targets

| what | target | measured |
|---|---|---|
| `/rates?bankId` asKnownAt a random instant, p99 at {RATE} requests/s | <= 20 ms | published live: {yr_p99} ms, saturation {yr_rps} requests/s; as loaded: {kr_p99} ms, saturation {kr_rps} requests/s (live path: {lr_p99} ms; axum baseline: {ax_p99} ms) |
| best-rates asKnownAt a random instant, p99 at {RATE} requests/s | <= 20 ms | published live: {yb_p99} ms, saturation {yb_rps} requests/s; as loaded: {kb_p99} ms, saturation {kb_rps} requests/s (live path: {lb_p99} ms) |
| a final answer asked again, share of the live `/rates?bankId=1` | >= 0.8 | {final_share} ({final_rps} against {live_rps} requests/s) |
| Postgres bytes per rate entry, after the bitemporal change against before | <= +30% | {growth}% ({after_per} against {before_per} bytes) |
| signed `/convert`, share of the unsigned | | {signed_share} ({signed_rps} against {convert_rps} requests/s) |
| live `/rates?bankId=1`, share of the axum baseline, against the last full run's | no regression beyond noise | {share_now} ({live_rps} against {ax_rps} requests/s); last full run: {against_full} |

### Reads (keys and rate limits on, a plan that never refuses)

Saturation: `oha -z {seconds}s -c {connections}` (closed loop). Latency: `oha -z {seconds}s -c
{connections} -q {RATE} --latency-correction` (open loop, each request timed from when it was
due). A random bank, currency or instant per request: `--rand-regex-url` (targets.rs in
tools/src/bench/known_at says why not `paced` here). Requests oha cut off when a run's time
was up are not counted as failed; each run's summary is kept in `.stack/bench/oha-*.jsonl`. Bodies: `/rates?bankId=1` live
{live_bytes} bytes, as known at an instant {final_bytes} bytes.

| request | requests/s | p50 ms | p99 ms | p99.9 ms | not 2xx |
|---|---|---|---|---|---|
{reads}

| request (saturation only) | requests/s | not 2xx |
|---|---|---|
{throughputs}

The final answer is `/rates?bankId=1` as known at {final_at}, asked again and again: served
from the API's own cache of final answers (64 MB) without Postgres. The signed `/convert`
asks `sig1=("@status" "content-digest" "content-type");keyid="<the current key>"`.

### Postgres bytes

`pg_total_relation_size` (heap, TOAST, indexes). After: the read model as the fold wrote it
(`board_versions`, each version holding its own rates since migration 0012; {versions} rate
entries, of which {closed} are in closed versions). Before: the {in_force} rate entries in force copied, in the order the fold wrote
them, into tables of the shape before migration 0008 (`rates` keyed by bank, currency and
as-of; `boards` keyed by bank and as-of, with its event-id index; no known-at columns), in a
scratch schema, keys created first.

| | after (bitemporal) | before (pre-0008) |
|---|---|---|
| rates, MB | in the boards' rows | {before_rates} |
| boards, MB | {after_boards} | {before_boards} |
| bytes per rate entry in force | {after_per} | {before_per} |
"#,
        run = machine.run_by(&m.command),
        memory = machine.memory_gib,
        rounds = settings.rounds,
        boards = l.boards,
        entries = l.entries,
        first = l.first_as_of.format("%Y-%m-%d %H:%M"),
        last = l.last_as_of.format("%Y-%m-%d %H:%M"),
        corrections = l.corrections,
        retractions = l.retractions,
        load_s = fixed(l.seconds, 0),
        load_rate = fixed(l.boards as f64 / l.seconds.max(1e-9), 0),
        lag = fixed(m.fold_lag, 1),
        from = instant(from),
        to = instant(to),
        year_from = instant(m.year.0),
        year_to = instant(m.year.1),
        yr_p99 = p99(year_rates),
        yr_rps = fixed(year_rates.rps, 0),
        yb_p99 = p99(year_best),
        yb_rps = fixed(year_best.rps, 0),
        kr_p99 = p99(known_rates),
        lr_p99 = p99(live_rates),
        ax_p99 = p99(axum),
        kr_rps = fixed(known_rates.rps, 0),
        kb_p99 = p99(known_best),
        lb_p99 = p99(live_best),
        kb_rps = fixed(known_best.rps, 0),
        final_share = fixed(final_answer.rps / live_one.rps, 2),
        final_rps = fixed(final_answer.rps, 0),
        live_rps = fixed(live_one.rps, 0),
        growth = signed_pct(f.growth_pct()),
        after_per = fixed(f.per_entry(f.after()), 1),
        before_per = fixed(f.per_entry(f.before()), 1),
        signed_share = fixed(signed.rps / convert.rps, 2),
        signed_rps = fixed(signed.rps, 0),
        convert_rps = fixed(convert.rps, 0),
        share_now = fixed(share_now, 2),
        ax_rps = fixed(axum.rps, 0),
        seconds = settings.seconds,
        connections = settings.connections,
        live_bytes = m.bodies[0],
        final_bytes = m.bodies[1],
        reads = reads.join("\n"),
        throughputs = throughputs.join("\n"),
        final_at = instant(m.final_at),
        versions = f.rate_versions,
        closed = f.rate_versions - f.entries,
        in_force = f.entries,
        before_rates = mb(f.before_rates),
        after_boards = mb(f.after_boards),
        before_boards = mb(f.before_boards),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_full_run_is_read_from_its_section() {
        let page = "# Benchmarks\n\n## Full run\n\n`deploy/bench`, 2026-11-27, on 2 cores (AMD EPYC), 24 GiB, release build. A stack\n\n\
            | endpoint | requests/s | p50 ms |\n|---|---|---|\n| rates?bankId=1 | 73713 | 1.03 |\n\
            | baseline: axum returning the same bytes | 82743 | 0.99 |\n\n## Other\n\n| rates?bankId=1 | 5 | 1 |\n";
        assert_eq!(
            last_full_run(page),
            Some(FullRun {
                run_by: "`deploy/bench`, 2026-11-27, on 2 cores (AMD EPYC), 24 GiB".into(),
                rates_rps: 73713.0,
                baseline_rps: 82743.0,
            })
        );
        assert_eq!(last_full_run("# Benchmarks\n"), None);
    }
}
