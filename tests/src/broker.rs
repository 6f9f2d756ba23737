//! The Apache Kafka brokers the tests run against, each a one-node KRaft
//! cluster started by `deploy/stack kafka-exec` (the same broker, settings
//! and jars as the local stack's).
//!
//! Most tests share one broker, a topic each: the one `deploy/stack test`
//! starts for the whole run (`RATEWIRE_TEST_KAFKA_BROKERS`), or, when the
//! tests run without it, one per test binary, started on first use. A test
//! that pauses, kills or restarts its broker gets one of its own
//! ([`crate::StackBuilder::own_broker`]), run by its [`crate::Stack`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::support::free_port;

/// The bootstrap address of the broker that tests share.
pub fn shared() -> Result<String> {
    if let Ok(brokers) = std::env::var("RATEWIRE_TEST_KAFKA_BROKERS") {
        if !brokers.is_empty() {
            return Ok(brokers);
        }
    }
    static SHARED: OnceLock<std::result::Result<String, String>> = OnceLock::new();
    SHARED
        .get_or_init(|| start_for_this_binary().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

/// The command that runs a broker with its data in `dir`, in the
/// foreground: the process becomes the broker's JVM once its storage is
/// formatted, so signals sent to it reach the broker.
pub fn command(dir: &Path, port: u16, controller_port: u16) -> Command {
    let mut command = Command::new(stack_script());
    command
        .arg("kafka-exec")
        .arg(dir)
        .arg(port.to_string())
        .arg(controller_port.to_string())
        .stdin(Stdio::null());
    command
}

/// Waits until a broker takes connections on `port`, or `child` exits.
pub fn wait_listening(child: &mut Child, port: u16, log: &Path) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(90);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            bail!(
                "the broker exited ({status}); the end of {}:\n{}",
                log.display(),
                tail(log, 25)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!(
        "the broker did not listen on {port} within 90 s; see {}",
        log.display()
    )
}

/// The last `lines` lines of a log, for an error that must be read where
/// the log is not (a CI machine's report).
fn tail(log: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

pub(crate) fn stack_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .join("deploy/stack")
}

/// Starts this test binary's broker. It is started from a thread that lives
/// as long as the process, and asks the kernel to kill it when its parent
/// goes (`PR_SET_PDEATHSIG` fires when the thread that spawned it ends), so
/// it outlives every test of the binary and none of the binary's runs.
fn start_for_this_binary() -> Result<String> {
    let dir = crate::stack::binary("ratewire-api")?
        .parent()
        .expect("target dir")
        .join("e2e-logs")
        .join(format!("broker-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (port, controller) = (free_port(), free_port());
    let log_path = dir.join("broker.log");
    let (sender, receiver) = std::sync::mpsc::channel();
    let spawn_dir = dir.clone();
    let spawn_log = log_path.clone();
    std::thread::spawn(move || {
        let spawned = (|| -> Result<Child> {
            let log = std::fs::File::create(&spawn_log)?;
            let mut command = command(&spawn_dir, port, controller);
            command.stdout(log.try_clone()?).stderr(log);
            // SAFETY: prctl is async-signal-safe and touches no memory of
            // the parent's.
            unsafe {
                use std::os::unix::process::CommandExt;
                command.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            command.spawn().context("starting deploy/stack kafka-exec")
        })();
        match spawned {
            Ok(mut child) => {
                let ready = wait_listening(&mut child, port, &spawn_log);
                let _ = sender.send(ready);
                loop {
                    std::thread::park();
                }
            }
            Err(e) => {
                let _ = sender.send(Err(e));
            }
        }
    });
    receiver
        .recv()
        .context("the broker's thread ended")?
        .with_context(|| format!("this test binary's broker (log {})", log_path.display()))?;
    Ok(format!("127.0.0.1:{port}"))
}
