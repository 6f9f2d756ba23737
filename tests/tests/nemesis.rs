//! The production shape on this machine (`RATEWIRE_STACK_TOPOLOGY=cluster
//! deploy/stack up`) under three minutes of the nemesis's mixed faults on a
//! fixed seed: kills, pauses, a partition leader's death, Redis and
//! Postgres failovers, a Kafka node cut off from its peers. Publishers,
//! readers and webhook receivers work throughout; afterwards every board
//! answered 202 is on the log and in the read models once, in order, the
//! views equal the checker's own fold and a replay, every alert crossing
//! was called once, and reads stayed up (docs/reliability.md).
//!
//! The stack is the script's own, at a port offset of its own, in a
//! directory of its own, and is taken down whatever happens.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Far from the default ports and from the offset a developer's own
/// cluster is likely to use (docs/operations.md uses 20000).
const PORT_OFFSET: &str = "17000";
const SEED: &str = "20261129";

struct ClusterStack {
    dir: PathBuf,
}

impl ClusterStack {
    fn script(&self, args: &[&str]) -> std::io::Result<Output> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        Command::new(root.join("deploy/stack"))
            .args(args)
            .env("RATEWIRE_STACK_TOPOLOGY", "cluster")
            .env("RATEWIRE_STACK_PORT_OFFSET", PORT_OFFSET)
            .env("RATEWIRE_STACK_DIR", &self.dir)
            .env("RATEWIRE_STACK_FEED", "off")
            // The suite has built the debug binaries already.
            .env("RATEWIRE_PROFILE", "dev")
            .env_remove("RATEWIRE_KAFKA_BROKERS")
            .output()
    }
}

impl Drop for ClusterStack {
    fn drop(&mut self) {
        let failed = std::thread::panicking();
        match self.script(&["down"]) {
            // The logs stay for a failure to be read.
            Ok(out) if out.status.success() && failed => {
                eprintln!("the stack's logs stay in {}", self.dir.display())
            }
            Ok(out) if out.status.success() => {
                let _ = std::fs::remove_dir_all(&self.dir);
            }
            // Kept beside the files (a passing test's output is not shown):
            // a cluster left up takes the next run's ports.
            Ok(out) => {
                let _ = std::fs::write(self.dir.join("down.log"), said(&out));
                eprintln!(
                    "deploy/stack down failed; its files stay in {} (down.log): {}",
                    self.dir.display(),
                    said(&out)
                )
            }
            Err(e) => eprintln!("deploy/stack down: {e}"),
        }
    }
}

fn said(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn the_cluster_keeps_every_promise_under_three_minutes_of_mixed_faults() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(
        root,
        "the nemesis needs root: it signals Postgres's processes and sets iptables rules"
    );
    // Under /tmp, where the postgres user that runs pg_auto_failover's
    // nodes can reach it.
    let dir = std::env::temp_dir().join(format!("ratewire-nemesis-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("the stack's directory");
    let stack = ClusterStack { dir: dir.clone() };

    let up = stack.script(&["up"]).expect("deploy/stack up");
    assert!(
        up.status.success(),
        "deploy/stack up failed:\n{}",
        said(&up)
    );

    let report = dir.join("report.md");
    let run = stack
        .script(&[
            "nemesis",
            "--minutes",
            "3",
            "--seed",
            SEED,
            "--report",
            report.to_str().expect("a path"),
        ])
        .expect("deploy/stack nemesis");
    println!("{}", said(&run));
    assert!(
        run.status.success(),
        "the nemesis found violations (seed {SEED}):\n{}",
        said(&run)
    );
}
