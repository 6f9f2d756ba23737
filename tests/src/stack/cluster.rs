//! A Kafka cluster of the stack's own in the production shape: three KRaft
//! nodes (broker and controller each) started by `deploy/stack kafka-exec`,
//! the topic replicated three times with `min.insync.replicas` 2
//! ([`super::StackBuilder::broker_cluster`]). A test kills and starts its
//! nodes one by one.

use std::time::Duration;

use anyhow::{Context, Result};
use base64::Engine;
use rand::RngCore;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;

use super::Stack;
use crate::support::free_port;

/// The cluster's nodes.
pub const NODES: usize = 3;

/// A cluster's nodes: their (client, controller) ports, and what each
/// node is told of the others.
#[derive(Debug, Clone)]
pub(super) struct Cluster {
    nodes: Vec<(u16, u16)>,
    id: String,
}

impl Cluster {
    pub(super) fn new() -> Self {
        let mut bytes = [0u8; 16];
        rand::thread_rng().fill_bytes(&mut bytes);
        // An id beginning with '-' (62 in its first six bits), on purpose:
        // one in 64 random ids does, and `deploy/stack` once passed it to
        // Kafka's format tool as `-t ID`, which read it as an option.
        bytes[0] = (62 << 2) | (bytes[0] & 0b11);
        Self {
            nodes: (0..NODES).map(|_| (free_port(), free_port())).collect(),
            id: base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes),
        }
    }

    /// The bootstrap addresses of every node.
    pub(super) fn brokers(&self) -> String {
        let addresses: Vec<String> = self
            .nodes
            .iter()
            .map(|(port, _)| format!("127.0.0.1:{port}"))
            .collect();
        addresses.join(",")
    }

    /// What `deploy/stack kafka-exec` is given to run node `i` (0-based).
    fn node_env(&self, i: usize) -> Vec<(String, String)> {
        let voters: Vec<String> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(n, (_, controller))| format!("{}@127.0.0.1:{controller}", n + 1))
            .collect();
        [
            ("RATEWIRE_KAFKA_NODE_ID", (i + 1).to_string()),
            ("RATEWIRE_KAFKA_VOTERS", voters.join(",")),
            ("RATEWIRE_KAFKA_CLUSTER_ID", self.id.clone()),
            ("RATEWIRE_KAFKA_REPLICATION", NODES.to_string()),
            // Three JVMs beside the stack's processes.
            ("RATEWIRE_KAFKA_HEAP", "320m".to_owned()),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_owned(), v))
        .collect()
    }
}

fn node_name(i: usize) -> String {
    format!("broker-{}", i + 1)
}

impl Stack {
    fn kafka_cluster(&self) -> Result<&Cluster> {
        self.cluster
            .as_ref()
            .context("start the stack with a broker cluster")
    }

    /// Starts every node, then waits until each takes connections (a node
    /// does only once the controllers have a quorum).
    pub(super) fn start_cluster(&mut self) -> Result<()> {
        for i in 0..NODES {
            self.spawn_cluster_node(i)?;
        }
        for i in 0..NODES {
            self.wait_cluster_node(i)?;
        }
        Ok(())
    }

    fn spawn_cluster_node(&mut self, i: usize) -> Result<()> {
        let cluster = self.kafka_cluster()?.clone();
        let ports = cluster.nodes[i];
        self.spawn_broker(&node_name(i), ports, &cluster.node_env(i))
    }

    fn wait_cluster_node(&mut self, i: usize) -> Result<()> {
        let port = self.kafka_cluster()?.nodes[i].0;
        self.wait_broker(&node_name(i), port)
    }

    /// Starts node `i` (0-based) again, with the log it kept, and waits
    /// until it takes connections.
    pub fn start_cluster_node(&mut self, i: usize) -> Result<()> {
        self.spawn_cluster_node(i)?;
        self.wait_cluster_node(i)
    }

    /// Kills node `i` (0-based) at once, as a crash would.
    pub fn kill_cluster_node(&mut self, i: usize) -> Result<()> {
        self.kafka_cluster()?;
        self.kill(&node_name(i))
    }

    /// Freezes (`true`) or thaws node `i` (0-based): it keeps its
    /// connections but answers nothing and fetches nothing, so it stays an
    /// in-sync replica until its leaders give up on it.
    pub fn pause_cluster_node(&self, i: usize, paused: bool) -> Result<()> {
        self.kafka_cluster()?;
        self.signal(&node_name(i), if paused { "STOP" } else { "CONT" })
    }

    /// The nodes (0-based) that follow the leader of the offsets log's
    /// partition holding the projectors' group (Kafka places a group by
    /// the Java hash of its id): a write of the group's state waits for
    /// them while they are in sync.
    pub async fn group_log_followers(&self) -> Result<Vec<usize>> {
        let topic = "__consumer_offsets";
        let partitions = self.partitions_of(topic).await?;
        anyhow::ensure!(!partitions.is_empty(), "{topic} is not in the metadata yet");
        let hash = self
            .group
            .encode_utf16()
            .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
        let index = (if hash == i32::MIN { 0 } else { hash.abs() }) as usize % partitions.len();
        let partition = partitions
            .iter()
            .find(|p| p.id == index as i32)
            .with_context(|| format!("{topic}-{index} is not in the metadata"))?;
        Ok(partition
            .replicas
            .iter()
            .filter(|r| **r != partition.leader)
            .map(|r| *r as usize - 1)
            .collect())
    }

    /// The node (0-based) leading `partition` of the stack's topic, as the
    /// cluster's metadata says now.
    pub async fn partition_leader(&self, partition: i32) -> Result<usize> {
        let topic = &self.topic;
        let leader = self
            .partitions_of(topic)
            .await?
            .into_iter()
            .find(|p| p.id == partition)
            .map(|p| p.leader)
            .with_context(|| format!("partition {partition} of {topic} is not in the metadata"))?;
        anyhow::ensure!(leader >= 1, "partition {partition} has no leader");
        Ok(leader as usize - 1)
    }

    /// `topic`'s partitions as the cluster's metadata says now (broker ids
    /// are 1-based).
    async fn partitions_of(&self, topic: &str) -> Result<Vec<PartitionPlace>> {
        let brokers = self.kafka_cluster()?.brokers();
        let topic = topic.to_owned();
        tokio::task::spawn_blocking(move || {
            let client: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", &brokers)
                .create()?;
            let metadata = client.fetch_metadata(Some(&topic), Duration::from_secs(10))?;
            Ok(metadata
                .topics()
                .iter()
                .flat_map(|t| t.partitions())
                .map(|p| PartitionPlace {
                    id: p.id(),
                    leader: p.leader(),
                    replicas: p.replicas().to_vec(),
                })
                .collect())
        })
        .await?
    }
}

/// Where one partition lives: its leader and all its replicas.
struct PartitionPlace {
    id: i32,
    leader: i32,
    replicas: Vec<i32>,
}
