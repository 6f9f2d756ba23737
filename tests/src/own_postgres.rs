//! A PostgreSQL cluster of a stack's own ([`crate::StackBuilder::own_postgres`]), run by
//! `deploy/stack postgres-cluster`: the recovery tests replace it with an
//! empty one, or restore it from a copy taken earlier (a cold backup:
//! transaction ids go back with it, as after a real restore).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::{Stack, PROCESSES};

pub(crate) struct Cluster {
    /// Where the data directory and its backups live.
    dir: PathBuf,
    port: u16,
}

impl Cluster {
    pub(crate) fn new(id: &str, port: u16) -> Self {
        Self {
            dir: std::env::temp_dir().join(format!("rw-e2e-pg-{id}")),
            port,
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    pub(crate) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}", self.port)
    }

    /// Starts it, creating it first when its data directory is empty.
    pub(crate) fn start(&self) -> Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        self.script(&[
            "start",
            &self.data().to_string_lossy(),
            &self.port.to_string(),
        ])
    }

    pub(crate) fn stop(&self) -> Result<()> {
        self.script(&["stop", &self.data().to_string_lossy()])
    }

    fn script(&self, args: &[&str]) -> Result<()> {
        let output = Command::new(crate::broker::stack_script())
            .arg("postgres-cluster")
            .args(args)
            .output()
            .context("running deploy/stack postgres-cluster")?;
        if !output.status.success() {
            bail!(
                "deploy/stack postgres-cluster {args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(())
    }

    /// Copies a data directory (of a stopped cluster) from `from` to `to`;
    /// `cp -a` keeps its owner.
    fn copy(&self, from: &PathBuf, to: &PathBuf) -> Result<()> {
        let _ = std::fs::remove_dir_all(to);
        let status = Command::new("cp").arg("-a").arg(from).arg(to).status()?;
        if !status.success() {
            bail!("cp -a {} {}", from.display(), to.display());
        }
        Ok(())
    }

    /// Stops it and removes everything it had.
    pub(crate) fn remove(self) {
        let _ = self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Stack {
    fn cluster(&self) -> Result<&Cluster> {
        self.own_postgres
            .as_ref()
            .context("start the stack with its own Postgres")
    }

    /// Kills the three processes (as a crash would).
    pub fn kill_processes(&mut self) -> Result<()> {
        for name in PROCESSES {
            self.kill(name)?;
        }
        Ok(())
    }

    /// Starts the three processes again and waits until they are ready;
    /// how long that took.
    pub async fn restart_processes(&mut self) -> Result<Duration> {
        let started = Instant::now();
        for name in PROCESSES {
            self.start_process(name)?;
        }
        self.wait_ready().await?;
        Ok(started.elapsed())
    }

    /// Takes a cold backup named `name`: the processes and the cluster
    /// stop, the data directory is copied, and everything starts again.
    pub async fn backup_postgres(&mut self, name: &str) -> Result<()> {
        self.kill_processes()?;
        let cluster = self.cluster()?;
        cluster.stop()?;
        cluster.copy(&cluster.data(), &cluster.dir.join(name))?;
        cluster.start()?;
        self.restart_processes().await?;
        Ok(())
    }

    /// Puts the backup `name` in the cluster's place (with the processes
    /// stopped meanwhile) and starts them again; how long until they were
    /// ready.
    pub async fn restore_postgres(&mut self, name: &str) -> Result<Duration> {
        self.kill_processes()?;
        let cluster = self.cluster()?;
        cluster.stop()?;
        std::fs::remove_dir_all(cluster.data())?;
        cluster.copy(&cluster.dir.join(name), &cluster.data())?;
        cluster.start()?;
        self.restart_processes().await
    }

    /// Replaces the cluster with a new, empty one holding only an empty
    /// database of the stack's name (as an operator would create it), and
    /// starts the processes again; how long until they were ready.
    pub async fn replace_postgres(&mut self) -> Result<Duration> {
        self.kill_processes()?;
        let cluster = self.cluster()?;
        cluster.stop()?;
        std::fs::remove_dir_all(cluster.data())?;
        cluster.start()?;
        let admin = sqlx::PgPool::connect(&format!("{}/postgres", cluster.url())).await?;
        sqlx::query(&format!("CREATE DATABASE {}", self.database))
            .execute(&admin)
            .await?;
        admin.close().await;
        self.restart_processes().await
    }
}
