//! A TCP proxy a test can cut and restore, to take a shared service (the
//! machine's Postgres) away from one stack only, as an outage would.

use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinHandle};

pub struct Proxy {
    pub port: u16,
    target: String,
    accept: Option<JoinHandle<()>>,
    connections: Arc<Mutex<Vec<AbortHandle>>>,
}

impl Proxy {
    /// A proxy on `port` to `target` (`host:port`), not yet forwarding.
    pub fn new(port: u16, target: &str) -> Self {
        Self {
            port,
            target: target.to_owned(),
            accept: None,
            connections: Arc::default(),
        }
    }

    /// Starts accepting and forwarding connections.
    pub async fn up(&mut self) -> Result<()> {
        if self.accept.is_some() {
            return Ok(());
        }
        let listener = TcpListener::bind(("127.0.0.1", self.port))
            .await
            .with_context(|| format!("proxy port {}", self.port))?;
        let target = self.target.clone();
        let connections = self.connections.clone();
        self.accept = Some(tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let target = target.clone();
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                let mut open = connections.lock().unwrap_or_else(|p| p.into_inner());
                open.retain(|t| !t.is_finished());
                open.push(task.abort_handle());
            }
        }));
        Ok(())
    }

    /// Stops listening and severs every open connection.
    pub fn down(&mut self) {
        if let Some(accept) = self.accept.take() {
            accept.abort();
        }
        for connection in self
            .connections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            connection.abort();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.down();
    }
}
