//! The services a stack may have of its own, and the ways to Postgres it
//! may cut: started, stopped, frozen or cut on purpose.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use super::Stack;
use crate::support::free_port;
use crate::{broker, SASL_USER};

/// A broker listener taking SCRAM over TLS
/// ([`super::StackBuilder::sasl_ssl_broker`]).
pub(super) struct Secured {
    pub(super) listener: u16,
    /// For `deploy/stack kafka-exec`: the listener's properties and user.
    pub(super) broker_env: Vec<(String, String)>,
    /// The processes' connection settings.
    pub(super) clients: Vec<(&'static str, String)>,
}

impl Stack {
    /// Starts (again) this stack's own Redis, without persistence, as the
    /// machine's Redis runs.
    pub fn start_redis(&mut self) -> Result<()> {
        let port = self
            .own_redis
            .context("this stack shares the machine's redis")?
            .to_string();
        let args = [
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ];
        self.spawn("redis", Path::new("redis-server"), &args, &[])
    }

    /// Starts (again) this stack's own broker on its ports, with the log it
    /// kept, and waits until it takes connections.
    pub fn start_broker(&mut self) -> Result<()> {
        let ports = self
            .own_broker
            .context("start the stack with its own broker")?;
        let env = self.broker_env.clone();
        self.spawn_broker("broker", ports, &env)?;
        self.wait_broker("broker", ports.0)
    }

    /// Starts `deploy/stack kafka-exec` as the process `name`, its data in
    /// the stack's directory of that name, with `env` besides its ports.
    pub(super) fn spawn_broker(
        &mut self,
        name: &str,
        (port, controller): (u16, u16),
        env: &[(String, String)],
    ) -> Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.logs.join(format!("{name}.log")))?;
        let child = broker::command(&self.logs.join(name), port, controller)
            .envs(env.iter().map(|(n, v)| (n.as_str(), v.as_str())))
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting deploy/stack kafka-exec")?;
        self.processes.push((name.to_owned(), child));
        Ok(())
    }

    /// Waits until the broker `name` takes connections on `port`.
    pub(super) fn wait_broker(&mut self, name: &str, port: u16) -> Result<()> {
        let log = self.logs.join(format!("{name}.log"));
        let (_, child) = self
            .processes
            .iter_mut()
            .find(|(n, _)| n == name)
            .with_context(|| format!("no {name} running"))?;
        broker::wait_listening(child, port, &log)
    }

    /// The file holding the SASL password of a stack with a
    /// [`super::StackBuilder::sasl_ssl_broker`].
    pub fn sasl_password_file(&self) -> PathBuf {
        self.logs.join("tls/password")
    }

    /// Freezes (`true`) or thaws the broker process: it keeps its
    /// connections and state but answers nothing, as a hung broker would.
    pub fn pause_broker(&self, paused: bool) -> Result<()> {
        self.own_broker
            .context("start the stack with its own broker")?;
        self.signal("broker", if paused { "STOP" } else { "CONT" })
    }

    /// Stops the broker at once, as a crash would.
    pub fn stop_broker(&mut self) -> Result<()> {
        self.own_broker
            .context("start the stack with its own broker")?;
        self.kill("broker")
    }

    /// Stops this stack's own Redis at once, as a crash would.
    pub fn stop_redis(&mut self) -> Result<()> {
        self.kill("redis")
    }

    /// The broker's bootstrap address.
    pub fn kafka_brokers(&self) -> String {
        self.brokers.clone()
    }

    /// Runs a command on this stack's own Redis (`redis-cli`).
    pub fn redis_cli(&self, args: &[&str]) -> Result<String> {
        let port = self
            .own_redis
            .context("this stack shares the machine's redis")?
            .to_string();
        let output = Command::new("redis-cli")
            .args(["-p", &port])
            .args(args)
            .output()
            .context("running redis-cli")?;
        anyhow::ensure!(output.status.success(), "redis-cli {args:?} failed");
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }

    /// Cuts this stack's processes off Postgres: new connections are
    /// refused and open ones severed.
    pub fn postgres_down(&mut self) -> Result<()> {
        self.postgres_proxy
            .as_mut()
            .context("start the stack with Postgres through a proxy")?
            .down();
        Ok(())
    }

    /// Gives this stack's processes Postgres back.
    pub async fn postgres_up(&mut self) -> Result<()> {
        self.postgres_proxy
            .as_mut()
            .context("start the stack with Postgres through a proxy")?
            .up()
            .await
    }

    /// Cuts the API off its read replica (see [`super::StackBuilder::read_replica`]).
    pub fn replica_down(&mut self) -> Result<()> {
        self.replica_proxy
            .as_mut()
            .context("start the stack with a read replica")?
            .down();
        Ok(())
    }

    /// Gives the API its read replica back.
    pub async fn replica_up(&mut self) -> Result<()> {
        self.replica_proxy
            .as_mut()
            .context("start the stack with a read replica")?
            .up()
            .await
    }
}

/// Makes a CA and the broker's certificate (for 127.0.0.1) with
/// openssl, and the broker properties of a SASL_SSL listener taking
/// SCRAM-SHA-512; returns that listener's port, the broker's
/// environment and the processes' connection settings.
pub(super) fn sasl_ssl(logs: &Path, (port, controller): (u16, u16)) -> Result<Secured> {
    let tls = logs.join("tls");
    std::fs::create_dir_all(&tls)?;
    let openssl = |args: &[&str]| -> Result<()> {
        let output = Command::new("openssl")
            .current_dir(&tls)
            .args(args)
            .output()
            .context("running openssl")?;
        anyhow::ensure!(
            output.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(())
    };
    let subject_ca = "/CN=ratewire-e2e-ca";
    openssl(&[
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
        "-days", "2", "-subj", subject_ca,
    ])?;
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "broker.key",
        "-out",
        "broker.csr",
        "-subj",
        "/CN=localhost",
    ])?;
    std::fs::write(
        tls.join("san.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )?;
    openssl(&[
        "x509",
        "-req",
        "-in",
        "broker.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "broker.crt",
        "-days",
        "2",
        "-extfile",
        "san.ext",
    ])?;
    let pem = std::fs::read_to_string(tls.join("broker.key"))?
        + &std::fs::read_to_string(tls.join("broker.crt"))?;
    std::fs::write(tls.join("broker.pem"), pem)?;
    let password = uuid::Uuid::new_v4().simple().to_string();
    std::fs::write(tls.join("password"), format!("{password}\n"))?;

    let secured = free_port();
    let properties = format!(
        "listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller},SASL_SSL://127.0.0.1:{secured}\n\
         advertised.listeners=PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{secured}\n\
         listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL\n\
         sasl.enabled.mechanisms=SCRAM-SHA-512\n\
         listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n\
         listener.name.sasl_ssl.ssl.keystore.type=PEM\n\
         listener.name.sasl_ssl.ssl.keystore.location={}\n",
        tls.join("broker.pem").display()
    );
    std::fs::write(tls.join("broker.properties"), properties)?;
    let broker_env = vec![
        (
            "RATEWIRE_KAFKA_EXTRA_CONFIG".to_owned(),
            tls.join("broker.properties").display().to_string(),
        ),
        (
            "RATEWIRE_KAFKA_SCRAM".to_owned(),
            format!("SCRAM-SHA-512=[name={SASL_USER},password={password}]"),
        ),
    ];
    let clients = [
        ("RATEWIRE_KAFKA_SECURITY_PROTOCOL", "sasl_ssl".to_owned()),
        ("RATEWIRE_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512".to_owned()),
        ("RATEWIRE_KAFKA_SASL_USERNAME", SASL_USER.to_owned()),
        (
            "RATEWIRE_KAFKA_SASL_PASSWORD_FILE",
            tls.join("password").display().to_string(),
        ),
        (
            "RATEWIRE_KAFKA_SSL_CA_LOCATION",
            tls.join("ca.crt").display().to_string(),
        ),
    ]
    .into();
    Ok(Secured {
        listener: secured,
        broker_env,
        clients,
    })
}
