//! A Redis Cluster of three primaries on this machine, made by a test:
//! three `redis-server` processes in cluster mode joined with
//! `redis-cli --cluster create`; dropped, it stops them.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::support::{eventually, free_port};

pub struct RedisCluster {
    pub ports: Vec<u16>,
    servers: Vec<Child>,
    dir: std::path::PathBuf,
}

/// One node in cluster mode, on a free port and a free cluster-bus port.
/// A port picked free can be taken by another test before the server binds
/// it; the server then exits, and the node is started again on others.
async fn start_node(dir: &Path) -> Result<(u16, Child)> {
    let mut last = None;
    for _ in 0..5 {
        let (port, bus) = (free_port(), free_port());
        let log = std::fs::File::create(dir.join(format!("redis-{port}.log")))?;
        let mut child = Command::new("redis-server")
            .current_dir(dir)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--cluster-enabled", "yes"])
            .args(["--cluster-port", &bus.to_string()])
            .args(["--cluster-config-file", &format!("nodes-{port}.conf")])
            .args(["--cluster-node-timeout", "5000"])
            .args(["--save", "", "--appendonly", "no"])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting redis-server in cluster mode")?;
        let listening = eventually("a cluster node", Duration::from_secs(10), || {
            let exited = matches!(child.try_wait(), Ok(Some(_)));
            async move {
                if exited {
                    // Ends the wait at once; told apart below.
                    return Some(false);
                }
                std::net::TcpStream::connect(("127.0.0.1", port))
                    .ok()
                    .map(|_| true)
            }
        })
        .await;
        match listening {
            Ok(true) => return Ok((port, child)),
            other => {
                let _ = child.kill();
                let _ = child.wait();
                last = Some(format!("{other:?}"));
            }
        }
    }
    anyhow::bail!("no cluster node would start (last: {last:?})")
}

impl RedisCluster {
    /// Starts three primaries (no persistence) with their files in `dir`
    /// (removed when the cluster is dropped) and waits until the cluster
    /// serves every slot.
    pub async fn start(dir: &Path) -> Result<RedisCluster> {
        std::fs::create_dir_all(dir)?;
        let mut cluster = RedisCluster {
            ports: Vec::new(),
            servers: Vec::new(),
            dir: dir.to_owned(),
        };
        for _ in 0..3 {
            let (port, server) = start_node(dir).await?;
            cluster.ports.push(port);
            cluster.servers.push(server);
        }
        let ports = cluster.ports.clone();
        let nodes: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let created = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&nodes)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .context("redis-cli --cluster create")?;
        anyhow::ensure!(
            created.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&created.stdout)
        );
        for port in &ports {
            eventually("the cluster serving", Duration::from_secs(20), || async {
                cluster
                    .cli(*port, &["cluster", "info"])
                    .ok()?
                    .contains("cluster_state:ok")
                    .then_some(())
            })
            .await?;
        }
        Ok(cluster)
    }

    /// The `RATEWIRE_REDIS_URL` that names this cluster.
    pub fn url(&self) -> String {
        let nodes: Vec<String> = self
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        format!("redis-cluster://{}", nodes.join(","))
    }

    /// `redis-cli` against one node.
    pub fn cli(&self, port: u16, args: &[&str]) -> Result<String> {
        let output = Command::new("redis-cli")
            .args(["-p", &port.to_string()])
            .args(args)
            .output()
            .context("running redis-cli")?;
        anyhow::ensure!(output.status.success(), "redis-cli {args:?} failed");
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }

    /// Every key of the cluster (`KEYS *` on each node).
    pub fn keys(&self) -> Result<Vec<(u16, String)>> {
        let mut keys = Vec::new();
        for port in &self.ports {
            for key in self.cli(*port, &["--raw", "keys", "*"])?.lines() {
                if !key.is_empty() {
                    keys.push((*port, key.to_owned()));
                }
            }
        }
        Ok(keys)
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for server in &mut self.servers {
            let _ = server.kill();
            let _ = server.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
