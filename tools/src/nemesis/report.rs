//! The report: faults by kind, how long each kept users waiting, how long
//! the system took to recover, and every violation.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::{Duration, Instant};

use super::check::Violations;
use super::faults::Done;
use super::publish::Push;
use super::read::Read;

/// How long after a fault's healing its effects are still counted as its.
const AFTERMATH: Duration = Duration::from_secs(30);

/// What one fault cost users.
#[derive(Debug, Clone)]
pub struct Cost {
    /// The longest run of failed reads that began during the fault or its
    /// aftermath: from its first failure to the next success.
    pub reads_down: Duration,
    /// The longest a board first pushed in that window waited for its 202.
    pub push_wait: Duration,
    /// From the healing until every bank had a board accepted again.
    pub recovery: Option<Duration>,
}

pub fn cost(fault: &Done, reads: &[Read], pushes: &[Push]) -> Cost {
    let end = fault.healed.unwrap_or_else(Instant::now) + AFTERMATH;
    let within = |t: Instant| t >= fault.started && t <= end;
    let mut reads_down = Duration::ZERO;
    let mut failing: Option<Instant> = None;
    for read in reads {
        match (read.ok(), failing) {
            (false, None) => failing = Some(read.at),
            (true, Some(since)) => {
                if within(since) {
                    reads_down = reads_down.max(read.at + read.took - since);
                }
                failing = None;
            }
            _ => {}
        }
    }
    let push_wait = pushes
        .iter()
        .filter(|p| within(p.first()))
        .filter_map(|p| p.accepted().map(|(at, _)| at - p.first()))
        .max()
        .unwrap_or_default();
    let recovery = fault.healed.and_then(|healed| {
        let mut banks: BTreeMap<i64, Option<Instant>> = BTreeMap::new();
        for p in pushes {
            let slot = banks.entry(p.board.bank).or_default();
            if let Some((at, _)) = p.accepted() {
                if at >= healed && slot.is_none_or(|s| at < s) {
                    *slot = Some(at);
                }
            }
        }
        banks
            .values()
            .map(|at| at.map(|at| at - healed))
            .collect::<Option<Vec<_>>>()
            .and_then(|all| all.into_iter().max())
    });
    Cost {
        reads_down,
        push_wait,
        recovery,
    }
}

/// A failed read, as the report groups them.
pub fn failed_read(read: &Read) -> String {
    let path = read.path.split('?').next().unwrap_or_default();
    let problem: String = read
        .problem
        .clone()
        .unwrap_or_default()
        .chars()
        .take(100)
        .collect();
    match read.status {
        Some(status) => format!("{path}: {status} {problem}"),
        None => format!("{path}: {problem}"),
    }
}

/// The run's figures, for the report's head.
pub struct Figures {
    pub seed: u64,
    pub planned: usize,
    pub minutes: f64,
    pub banks: usize,
    pub pushes: usize,
    pub accepted: usize,
    pub attempts: usize,
    pub unavailable: usize,
    pub reads: usize,
    pub reads_ok: usize,
    pub crossings: usize,
    pub deliveries: usize,
    /// Board events on the log a second time, under the same id.
    pub copies: usize,
    pub settled: Option<Duration>,
    pub push_p99: Duration,
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

pub fn render(
    figures: &Figures,
    start: Instant,
    done: &[Done],
    reads: &[Read],
    pushes: &[Push],
    violations: &Violations,
) -> String {
    let mut out = String::new();
    let f = figures;
    let _ = writeln!(
        out,
        "# Nemesis report: seed {}, {:.0} minutes of faults\n",
        f.seed, f.minutes
    );
    let _ = writeln!(
        out,
        "- Publishers: {} banks, {} boards pushed, {} accepted ({} attempts; {} answered 503 with Retry-After); ack p99 {:.0} ms.",
        f.banks, f.pushes, f.accepted, f.attempts, f.unavailable, f.push_p99.as_secs_f64() * 1000.0
    );
    let _ = writeln!(
        out,
        "- The log: {} board events written a second time under their id, by a push sent again after its first send went unanswered (the fold applies each once).",
        f.copies
    );
    let _ = writeln!(
        out,
        "- Readers: {} reads through the balancer, {} answered 2xx ({:.3}%).",
        f.reads,
        f.reads_ok,
        100.0 * f.reads_ok as f64 / f.reads.max(1) as f64
    );
    let _ = writeln!(
        out,
        "- Alerts: {} crossings implied by the accepted boards; {} calls received.",
        f.crossings, f.deliveries
    );
    let _ = writeln!(
        out,
        "- Settled: every bank's last board on /rates {} after the publishers stopped.\n",
        f.settled.map(secs).unwrap_or_else(|| "never".into())
    );
    let mut kinds: BTreeMap<String, Vec<Cost>> = BTreeMap::new();
    let _ = writeln!(out, "## Faults\n");
    let _ = writeln!(
        out,
        "{} planned, {} done ({} left out, held up past the window by the part they hurt).\n",
        f.planned,
        done.len(),
        f.planned.saturating_sub(done.len())
    );
    let _ = writeln!(out, "| at | fault | target | healed after | reads failing at most | a push waited at most | every bank accepted again after |");
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for d in done {
        let c = cost(d, reads, pushes);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            secs(d.started - start),
            d.fault.kind(),
            d.target,
            d.healed
                .map(|h| secs(h - d.started))
                .unwrap_or_else(|| format!(
                    "not healed: {}",
                    d.problem.clone().unwrap_or_default()
                )),
            secs(c.reads_down),
            secs(c.push_wait),
            c.recovery.map(secs).unwrap_or_else(|| "-".into()),
        );
        kinds.entry(d.fault.kind()).or_default().push(c);
    }
    let _ = writeln!(out, "\n## By kind\n");
    let _ = writeln!(
        out,
        "| fault | count | reads failing at most | a push waited at most | accepted again within |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    for (kind, costs) in &kinds {
        let max = |f: fn(&Cost) -> Duration| costs.iter().map(f).max().unwrap_or_default();
        let _ = writeln!(
            out,
            "| {kind} | {} | {} | {} | {} |",
            costs.len(),
            secs(max(|c| c.reads_down)),
            secs(max(|c| c.push_wait)),
            secs(max(|c| c.recovery.unwrap_or_default())),
        );
    }
    let _ = writeln!(out, "\n## Failed reads\n");
    let failed: Vec<&Read> = reads.iter().filter(|r| !r.ok()).collect();
    if failed.is_empty() {
        let _ = writeln!(out, "None.");
    }
    for read in failed.iter().take(30) {
        let _ = writeln!(out, "- at {}: {}", secs(read.at - start), failed_read(read));
    }
    if failed.len() > 30 {
        let _ = writeln!(out, "- ... and {} more", failed.len() - 30);
    }
    let _ = writeln!(out, "\n## Violations\n");
    if violations.is_empty() {
        let _ = writeln!(out, "None.");
    }
    for (invariant, found) in violations.by_invariant() {
        let _ = writeln!(out, "- **{invariant}**: {} found", found.len());
        for what in found.iter().take(20) {
            let _ = writeln!(out, "  - {what}");
        }
        if found.len() > 20 {
            let _ = writeln!(out, "  - ... and {} more", found.len() - 20);
        }
    }
    out
}
