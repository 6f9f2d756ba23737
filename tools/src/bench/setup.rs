//! `deploy/bench setup`: the README's two commands timed as a new user
//! meets them, each on a fresh clone of this checkout's HEAD.
//! - `deploy/stack up` with every cache empty (a home of its own: cargo's
//!   registry, Maven's repository, the broker's jars) and nothing started
//!   (its own Postgres, Redis and broker, at a port offset), until it
//!   prints the demo key; then `down` and `up` again.
//! - `.ci/run` as CI runs it: `target/` empty, the machine's caches and
//!   its Postgres and Redis as they are (the suite's tests name 5432 and
//!   6379).
//!
//! Each command's own `==>` lines split its time into phases, so the
//! build, the floor of both, shows beside the whole.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context};

use super::report::{fixed, replace_section};
use super::{say, Machine, Settings};

/// Far from the default ports, the bench's and the suite's.
const PORT_OFFSET: &str = "3000";

/// One command's run: its whole time and the phases its `==>` lines began.
struct Timed {
    seconds: f64,
    phases: Vec<Phase>,
}

struct Phase {
    /// The line that began it, without `==> `.
    line: String,
    seconds: f64,
    /// How busy the machine's cores were meanwhile, 0 to 1.
    busy: f64,
}

impl Timed {
    /// The seconds of the phases whose line starts with `prefix`.
    fn phase(&self, prefix: &str) -> f64 {
        self.phases
            .iter()
            .filter(|p| p.line.starts_with(prefix))
            .map(|p| p.seconds)
            .sum()
    }

    /// "N s (cores M% busy)" for the first phase whose line starts with
    /// `prefix`.
    fn told(&self, prefix: &str) -> String {
        match self.phases.iter().find(|p| p.line.starts_with(prefix)) {
            Some(p) => format!(
                "{} s (cores {}% busy)",
                fixed(p.seconds, 0),
                fixed(p.busy * 100.0, 0)
            ),
            None => "?".to_owned(),
        }
    }
}

/// The cores' busy and total time so far, in clock ticks (/proc/stat).
fn cpu_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|t| t.parse().ok())
        .collect();
    let total: u64 = ticks.iter().take(8).sum();
    // idle and iowait are the 4th and 5th.
    let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// Runs `args` in `dir` with `env`, its output kept in `log`, and times the
/// phases it announces.
fn timed(dir: &Path, args: &[&str], env: &[(&str, String)], log: &Path) -> anyhow::Result<Timed> {
    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg(r#""$@" 2>&1"#)
        .arg("bash")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stdin(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    let started = Instant::now();
    let mut child = command.spawn().with_context(|| format!("{args:?}"))?;
    let output = child.stdout.take().context("the command's output")?;
    let mut kept = String::new();
    let mut marks: Vec<(String, f64, (u64, u64))> = Vec::new();
    for line in BufReader::new(output).lines() {
        let line = line?;
        if let Some(phase) = line.strip_prefix("==> ") {
            marks.push((
                phase.to_owned(),
                started.elapsed().as_secs_f64(),
                cpu_ticks(),
            ));
        }
        kept.push_str(&line);
        kept.push('\n');
    }
    let status = child.wait()?;
    let seconds = started.elapsed().as_secs_f64();
    std::fs::write(log, &kept)?;
    if !status.success() {
        bail!(
            "{args:?} failed ({status}); its output is in {}",
            log.display()
        );
    }
    let ends = marks
        .iter()
        .skip(1)
        .map(|(_, at, ticks)| (*at, *ticks))
        .chain([(seconds, cpu_ticks())]);
    let phases = marks
        .iter()
        .zip(ends)
        .map(
            |((line, at, (busy, total)), (end, (busy_end, total_end)))| Phase {
                line: line.clone(),
                seconds: end - at,
                busy: (busy_end - busy) as f64 / (total_end - total).max(1) as f64,
            },
        )
        .collect();
    Ok(Timed { seconds, phases })
}

/// A fresh clone of the checkout's HEAD in `dir`.
fn clone(root: &Path, dir: &Path) -> anyhow::Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    let status = Command::new("git")
        .args(["clone", "--quiet"])
        .arg(root)
        .arg(dir)
        .status()?;
    if !status.success() {
        bail!("git clone {} failed", root.display());
    }
    Ok(())
}

/// The environment of a machine whose caches are all empty, under `home`.
/// The toolchain stays where it is: installing Rust is not the stack's.
fn empty_caches(home: &Path) -> Vec<(&'static str, String)> {
    let real_home = PathBuf::from(std::env::var_os("HOME").unwrap_or_default());
    let rustup = std::env::var("RUSTUP_HOME")
        .unwrap_or_else(|_| real_home.join(".rustup").display().to_string());
    let cargo_bin = std::env::var("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|_| real_home.join(".cargo"))
        .join("bin");
    let path = format!(
        "{}:{}",
        cargo_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let under = |name: &str| home.join(name).display().to_string();
    vec![
        ("HOME", home.display().to_string()),
        ("RUSTUP_HOME", rustup),
        ("CARGO_HOME", under(".cargo")),
        ("RATEWIRE_CACHE_DIR", under(".cache/ratewire")),
        ("PATH", path),
        ("RATEWIRE_STACK_PORT_OFFSET", PORT_OFFSET.to_owned()),
    ]
}

pub async fn run(settings: &Settings) -> anyhow::Result<()> {
    let root = std::fs::canonicalize(&settings.root)?;
    let work = settings.dir().join("setup");
    std::fs::create_dir_all(&work)?;
    let commit = String::from_utf8(
        Command::new("git")
            .args(["rev-parse", "--short", "HEAD"])
            .current_dir(&root)
            .output()?
            .stdout,
    )?
    .trim()
    .to_owned();

    let (clone_dir, home) = (work.join("up"), work.join("home"));
    clone(&root, &clone_dir)?;
    if home.exists() {
        std::fs::remove_dir_all(&home)?;
    }
    std::fs::create_dir_all(&home)?;
    let env = empty_caches(&home);
    let stack = |command: &str, log: &str| {
        timed(
            &clone_dir,
            &["deploy/stack", command],
            &env,
            &work.join(log),
        )
    };
    say("deploy/stack up on a fresh clone, every cache empty, nothing started");
    let cold = stack("up", "up-cold.log");
    // Down whatever up did, so that a failed start leaves nothing running.
    let down = stack("down", "down.log");
    let cold = cold?;
    down?;
    say("deploy/stack up again after down");
    let warm = stack("up", "up-warm.log");
    stack("down", "down.log")?;
    let warm = warm?;

    let ci_dir = work.join("ci");
    clone(&root, &ci_dir)?;
    say(".ci/run on a fresh clone (about 25 minutes)");
    let ci = timed(&ci_dir, &[".ci/run"], &[], &work.join("ci.log"))?;

    let minutes = |s: f64| match s.round() as u64 {
        s if s < 60 => format!("{s} s"),
        s => format!("{} min {} s", s / 60, s % 60),
    };
    let (building, fetching) = (cold.phase("building"), cold.phase("fetching"));
    let postgres = cold.phase("creating a PostgreSQL") + cold.phase("starting PostgreSQL");
    let machine = Machine::here();
    let section = format!(
        "## Set-up from a fresh clone (issue 62)

`deploy/bench setup`, {date}, on {cores} cores ({cpu}), {memory} GiB, commit {commit}. Each
command on a fresh clone of the commit, once (a cold start cannot be repeated in rounds),
its phases split at the lines it prints (`==>`):

| command | took | of which | target |
|---|---|---|---|
| `deploy/stack up`, every cache empty (cargo's registry, Maven's, the broker's jars), nothing started (its own Postgres, Redis and broker) | {cold} | building (dev) {cold_build} (the floor); fetching the broker {cold_fetch} s; Postgres' first start {cold_pg} s; the rest, to the demo key, {cold_rest} s | <= 5 min |
| `deploy/stack up` again after `down` | {warm} | building {warm_build} | |
| `.ci/run` (`deploy/stack test`), `target/` empty, the machine's caches | {ci} | building {ci_build}; the docs' check {ci_docs}; the tests {ci_tests} | <= 10 min |

Logs: `.stack/bench/setup/`.
",
        date = machine.date,
        cores = machine.cores,
        cpu = machine.cpu,
        memory = machine.memory_gib,
        cold = minutes(cold.seconds),
        cold_build = cold.told("building"),
        cold_fetch = fixed(fetching, 0),
        cold_pg = fixed(postgres, 0),
        cold_rest = fixed(cold.seconds - building - fetching - postgres, 0),
        warm = minutes(warm.seconds),
        warm_build = warm.told("building"),
        ci = minutes(ci.seconds),
        ci_build = ci.told("building"),
        ci_docs = ci.told("checking the docs"),
        ci_tests = ci.told("running the test suite"),
    );
    replace_section(&settings.page(), &section)
}
