//! How ingest and the projector connect to Kafka: where the brokers are,
//! TLS and SASL, and any other librdkafka property. The settings become
//! librdkafka properties here, checked at start (exit 2 naming the
//! variable); each process hands them to every Kafka client it makes, so
//! its producer, consumers and admin client connect alike, and reports
//! their errors to [`ClientReports`]. This crate links no Kafka client: it
//! only speaks librdkafka's property names and error codes.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// The connection settings of a process with Kafka clients.
#[derive(clap::Args, Debug, Clone)]
pub struct KafkaConnection {
    /// Kafka bootstrap servers, comma separated.
    #[arg(
        long = "kafka-brokers",
        env = "RATEWIRE_KAFKA_BROKERS",
        default_value = "127.0.0.1:9092"
    )]
    pub brokers: String,
    /// `plaintext`, `ssl`, `sasl_plaintext` or `sasl_ssl` (librdkafka's
    /// `security.protocol`). Managed services want `sasl_ssl`. Brokers that
    /// refuse the credentials at start stop the process with status 2,
    /// naming the settings to check.
    #[arg(long = "kafka-security-protocol", env = "RATEWIRE_KAFKA_SECURITY_PROTOCOL", default_value = "plaintext", value_parser = ["plaintext", "ssl", "sasl_plaintext", "sasl_ssl"])]
    pub security_protocol: String,
    /// The SASL mechanism with `sasl_*`: `PLAIN` (Confluent Cloud API keys),
    /// `SCRAM-SHA-256` or `SCRAM-SHA-512` (MSK, Aiven, Redpanda). Others,
    /// such as `OAUTHBEARER`, through `RATEWIRE_KAFKA_PROPERTIES`.
    #[arg(long = "kafka-sasl-mechanism", env = "RATEWIRE_KAFKA_SASL_MECHANISM", value_parser = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"])]
    pub sasl_mechanism: Option<String>,
    /// The SASL user name (with `PLAIN` or `SCRAM-*`; an API key on
    /// Confluent Cloud).
    #[arg(long = "kafka-sasl-username", env = "RATEWIRE_KAFKA_SASL_USERNAME")]
    pub sasl_username: Option<String>,
    /// The SASL password; prefer `RATEWIRE_KAFKA_SASL_PASSWORD_FILE` (set
    /// one of the two).
    #[arg(
        long = "kafka-sasl-password",
        env = "RATEWIRE_KAFKA_SASL_PASSWORD",
        hide_env_values = true
    )]
    pub sasl_password: Option<String>,
    /// A file holding the SASL password (a mounted secret), read at start;
    /// a trailing newline is ignored.
    #[arg(
        long = "kafka-sasl-password-file",
        env = "RATEWIRE_KAFKA_SASL_PASSWORD_FILE"
    )]
    pub sasl_password_file: Option<PathBuf>,
    /// CA certificates (PEM) that sign the brokers' certificates, with
    /// `ssl` or `sasl_ssl`; unset: the system's CA store.
    #[arg(long = "kafka-ssl-ca", env = "RATEWIRE_KAFKA_SSL_CA_LOCATION")]
    pub ssl_ca_location: Option<PathBuf>,
    /// This client's certificate (PEM), for brokers that authenticate
    /// clients by TLS (mutual TLS); needs `RATEWIRE_KAFKA_SSL_KEY_LOCATION`.
    #[arg(
        long = "kafka-ssl-certificate",
        env = "RATEWIRE_KAFKA_SSL_CERTIFICATE_LOCATION"
    )]
    pub ssl_certificate_location: Option<PathBuf>,
    /// The private key (PEM) of that certificate.
    #[arg(long = "kafka-ssl-key", env = "RATEWIRE_KAFKA_SSL_KEY_LOCATION")]
    pub ssl_key_location: Option<PathBuf>,
    /// The key's password, when it is encrypted.
    #[arg(
        long = "kafka-ssl-key-password",
        env = "RATEWIRE_KAFKA_SSL_KEY_PASSWORD",
        hide_env_values = true
    )]
    pub ssl_key_password: Option<String>,
    /// Any other librdkafka properties, as `name=value` pairs separated by
    /// `;` or new lines (for example `client.rack=use1-az1;
    /// socket.keepalive.enable=true`). Applied last, so they override the
    /// settings above; the ones each process sets for correctness (acks,
    /// idempotence, offsets) are refused.
    #[arg(long = "kafka-properties", env = "RATEWIRE_KAFKA_PROPERTIES", value_parser = parse_properties)]
    pub properties: Option<Properties>,
}

/// `name=value` pairs for librdkafka, in the order given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Properties(pub Vec<(String, String)>);

/// Properties ratewire sets itself because its guarantees rest on them: a
/// pass-through may not change them.
const OWN: [&str; 10] = [
    "acks",
    "enable.idempotence",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "group.id",
    "group.protocol",
    "bootstrap.servers",
    "security.protocol",
    "sasl.password",
    "isolation.level",
];

fn parse_properties(text: &str) -> Result<Properties, String> {
    let mut pairs = Vec::new();
    for item in text.split([';', '\n']).map(str::trim) {
        if item.is_empty() || item.starts_with('#') {
            continue;
        }
        let (name, value) = item
            .split_once('=')
            .map(|(n, v)| (n.trim(), v.trim()))
            .filter(|(n, _)| !n.is_empty())
            .ok_or_else(|| format!("expected `name=value` pairs separated by `;`, got {item:?}"))?;
        if OWN.contains(&name) {
            return Err(format!(
                "{name} is set by ratewire itself (or by its own RATEWIRE_KAFKA_* setting) and cannot be passed through"
            ));
        }
        pairs.push((name.to_owned(), value.to_owned()));
    }
    Ok(Properties(pairs))
}

impl KafkaConnection {
    /// The librdkafka properties these settings make, or what is wrong
    /// with them, naming the variable.
    pub fn properties(&self) -> Result<Vec<(String, String)>, String> {
        let mut properties = vec![
            ("bootstrap.servers".to_owned(), self.brokers.clone()),
            (
                "security.protocol".to_owned(),
                self.security_protocol.clone(),
            ),
        ];
        let sasl = self.security_protocol.starts_with("sasl_");
        let password = self.password()?;
        match (&self.sasl_mechanism, sasl) {
            (Some(mechanism), true) => {
                properties.push(("sasl.mechanism".to_owned(), mechanism.clone()));
                if matches!(mechanism.as_str(), "PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512") {
                    let username = self.sasl_username.clone().ok_or(
                        "RATEWIRE_KAFKA_SASL_USERNAME is needed with RATEWIRE_KAFKA_SASL_MECHANISM",
                    )?;
                    let password = password.ok_or(
                        "RATEWIRE_KAFKA_SASL_PASSWORD or RATEWIRE_KAFKA_SASL_PASSWORD_FILE is needed with RATEWIRE_KAFKA_SASL_MECHANISM",
                    )?;
                    properties.push(("sasl.username".to_owned(), username));
                    properties.push(("sasl.password".to_owned(), password));
                }
            }
            (None, true) => {
                return Err(format!(
                    "RATEWIRE_KAFKA_SASL_MECHANISM is needed with RATEWIRE_KAFKA_SECURITY_PROTOCOL={}",
                    self.security_protocol
                ))
            }
            (Some(_), false) => {
                return Err(
                    "RATEWIRE_KAFKA_SASL_MECHANISM needs RATEWIRE_KAFKA_SECURITY_PROTOCOL sasl_ssl or sasl_plaintext"
                        .to_owned(),
                )
            }
            (None, false) => {}
        }
        let tls = matches!(self.security_protocol.as_str(), "ssl" | "sasl_ssl");
        for (variable, name, path) in [
            (
                "RATEWIRE_KAFKA_SSL_CA_LOCATION",
                "ssl.ca.location",
                &self.ssl_ca_location,
            ),
            (
                "RATEWIRE_KAFKA_SSL_CERTIFICATE_LOCATION",
                "ssl.certificate.location",
                &self.ssl_certificate_location,
            ),
            (
                "RATEWIRE_KAFKA_SSL_KEY_LOCATION",
                "ssl.key.location",
                &self.ssl_key_location,
            ),
        ] {
            let Some(path) = path else { continue };
            if !tls {
                return Err(format!(
                    "{variable} needs RATEWIRE_KAFKA_SECURITY_PROTOCOL ssl or sasl_ssl"
                ));
            }
            if !path.is_file() {
                return Err(format!("{variable}: no file at {}", path.display()));
            }
            properties.push((name.to_owned(), path.display().to_string()));
        }
        if self.ssl_certificate_location.is_some() != self.ssl_key_location.is_some() {
            return Err(
                "RATEWIRE_KAFKA_SSL_CERTIFICATE_LOCATION and RATEWIRE_KAFKA_SSL_KEY_LOCATION go together"
                    .to_owned(),
            );
        }
        if let Some(password) = &self.ssl_key_password {
            properties.push(("ssl.key.password".to_owned(), password.clone()));
        }
        if let Some(Properties(extra)) = &self.properties {
            properties.extend(extra.iter().cloned());
        }
        Ok(properties)
    }

    /// What every Kafka client of a process starts from: the client id
    /// the brokers log and meter it by, then [`Self::properties`] (checked
    /// at start by [`Self::check`], so none is missing here). Each process
    /// adds what its client is for and makes the client from the pairs.
    pub fn client_properties(&self, client_id: &str) -> Vec<(String, String)> {
        let mut properties = vec![("client.id".to_owned(), client_id.to_owned())];
        properties.extend(self.properties().unwrap_or_default());
        properties
    }

    fn password(&self) -> Result<Option<String>, String> {
        match (&self.sasl_password, &self.sasl_password_file) {
            (Some(_), Some(_)) => Err(
                "set RATEWIRE_KAFKA_SASL_PASSWORD or RATEWIRE_KAFKA_SASL_PASSWORD_FILE, not both"
                    .to_owned(),
            ),
            (Some(password), None) => Ok(Some(password.clone())),
            (None, Some(path)) => std::fs::read_to_string(path)
                .map(|text| Some(text.trim_end_matches(['\r', '\n']).to_owned()))
                .map_err(|e| {
                    format!(
                        "RATEWIRE_KAFKA_SASL_PASSWORD_FILE: cannot read {}: {e}",
                        path.display()
                    )
                }),
            (None, None) => Ok(None),
        }
    }

    /// The properties, or exit with status 2 and the problem, as a bad
    /// setting does (called once at start, before any client is made).
    pub fn check(&self) {
        if let Err(problem) = self.properties() {
            eprintln!("error: bad setting: {problem}");
            std::process::exit(2);
        }
    }

    /// What to tell an operator whose brokers refused to authenticate this
    /// process: which settings to look at.
    pub fn refused(&self, reason: &str) -> String {
        let settings = if self.security_protocol.starts_with("sasl_") {
            "RATEWIRE_KAFKA_SASL_USERNAME and RATEWIRE_KAFKA_SASL_PASSWORD (or _FILE)"
        } else {
            "RATEWIRE_KAFKA_SECURITY_PROTOCOL and the RATEWIRE_KAFKA_SSL_* settings"
        };
        format!("the Kafka brokers at {} refused this process's credentials; check {settings}: {reason}", self.brokers)
    }
}

/// librdkafka's error codes for credentials the brokers refused:
/// `RD_KAFKA_RESP_ERR__AUTHENTICATION` and
/// `RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED`.
const REFUSED_CREDENTIALS: [i32; 2] = [-169, 58];

/// What a process's Kafka clients report, shared by all of them: whether
/// any has had an answer from the brokers, and what a refusal means. Each
/// process wraps it in the client context its Kafka library wants.
#[derive(Debug)]
pub struct ClientReports {
    connection: KafkaConnection,
    reached: AtomicBool,
}

impl ClientReports {
    pub fn new(connection: &KafkaConnection) -> Self {
        Self {
            connection: connection.clone(),
            reached: AtomicBool::new(false),
        }
    }

    /// Records that the brokers answered one of this process's clients.
    pub fn reached(&self) {
        self.reached.store(true, Ordering::Relaxed);
    }

    /// A client's error report, with librdkafka's error code: when the
    /// brokers refused this process's credentials before any client of it
    /// had reached them, the settings are wrong, not the network: say
    /// which, and exit with status 2. Later refusals (credentials rotated
    /// under a running process) are logged; the process stays up and
    /// reports the broker unavailable.
    pub fn error(&self, code: Option<i32>, reason: &str) {
        if !code.is_some_and(|code| REFUSED_CREDENTIALS.contains(&code)) {
            tracing::warn!(reason, "kafka client error");
            return;
        }
        let message = self.connection.refused(reason);
        if self.reached.load(Ordering::Relaxed) {
            tracing::error!("{message}");
        } else {
            exit_for_bad_setting(&message);
        }
    }
}

/// Exits with status 2 from a client's callback thread. `exit` would run
/// the atexit handlers (OpenSSL's cleanup among them) while the other
/// clients' threads still speak TLS, and two clients refused at once
/// would call it together: the process then died of a signal, not with 2.
/// `_exit` ends it at once; a second caller waits here until it has.
fn exit_for_bad_setting(message: &str) -> ! {
    use std::io::Write;
    static EXITING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _first = EXITING.lock();
    eprintln!("error: bad setting: {message}");
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: _exit(2) has no preconditions; it skips the atexit handlers
    // and buffers on purpose (standard error is unbuffered, and standard
    // output was flushed above).
    unsafe { libc::_exit(2) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        kafka: KafkaConnection,
    }

    fn settings(args: &[&str]) -> Result<Vec<(String, String)>, String> {
        let cli = Cli::try_parse_from(std::iter::once("test").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        cli.kafka.properties()
    }

    fn get<'a>(properties: &'a [(String, String)], name: &str) -> Option<&'a str> {
        properties
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn plaintext_by_default() {
        let properties = settings(&[]).unwrap();
        assert_eq!(
            get(&properties, "bootstrap.servers"),
            Some("127.0.0.1:9092")
        );
        assert_eq!(get(&properties, "security.protocol"), Some("plaintext"));
        assert_eq!(get(&properties, "sasl.mechanism"), None);
    }

    #[test]
    fn scram_over_tls_takes_a_user_and_a_password_from_a_file() {
        let dir = std::env::temp_dir().join(format!("rw-kafka-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("password");
        std::fs::write(&file, "s3cret\n").unwrap();
        let properties = settings(&[
            "--kafka-security-protocol=sasl_ssl",
            "--kafka-sasl-mechanism=SCRAM-SHA-512",
            "--kafka-sasl-username=ratewire",
            &format!("--kafka-sasl-password-file={}", file.display()),
            &format!("--kafka-ssl-ca={}", file.display()),
        ])
        .unwrap();
        assert_eq!(get(&properties, "sasl.mechanism"), Some("SCRAM-SHA-512"));
        assert_eq!(get(&properties, "sasl.username"), Some("ratewire"));
        assert_eq!(get(&properties, "sasl.password"), Some("s3cret"));
        assert!(get(&properties, "ssl.ca.location").is_some());
    }

    #[test]
    fn incomplete_or_contradictory_settings_name_the_variable() {
        let error = settings(&["--kafka-security-protocol=sasl_ssl"]).unwrap_err();
        assert!(error.contains("RATEWIRE_KAFKA_SASL_MECHANISM"), "{error}");
        let error = settings(&[
            "--kafka-security-protocol=sasl_ssl",
            "--kafka-sasl-mechanism=PLAIN",
            "--kafka-sasl-username=key",
        ])
        .unwrap_err();
        assert!(error.contains("RATEWIRE_KAFKA_SASL_PASSWORD"), "{error}");
        let error = settings(&["--kafka-ssl-ca=/nowhere"]).unwrap_err();
        assert!(error.contains("RATEWIRE_KAFKA_SSL_CA_LOCATION"), "{error}");
        let error =
            settings(&["--kafka-security-protocol=ssl", "--kafka-ssl-ca=/nowhere"]).unwrap_err();
        assert!(error.contains("no file"), "{error}");
    }

    #[test]
    fn every_client_names_its_process_unless_the_operator_does() {
        let cli = Cli::try_parse_from(["test"]).unwrap();
        let properties = cli.kafka.client_properties("ratewire-ingest");
        assert_eq!(get(&properties, "client.id"), Some("ratewire-ingest"));
        assert_eq!(
            get(&properties, "bootstrap.servers"),
            Some("127.0.0.1:9092")
        );
        let cli = Cli::try_parse_from(["test", "--kafka-properties=client.id=eu-ingest"]).unwrap();
        let properties = cli.kafka.client_properties("ratewire-ingest");
        assert_eq!(get(&properties, "client.id"), Some("eu-ingest"));
    }

    #[test]
    fn other_properties_pass_through_but_not_the_ones_ratewire_relies_on() {
        let properties =
            settings(&["--kafka-properties=client.rack=use1-az1; socket.keepalive.enable=true"])
                .unwrap();
        assert_eq!(get(&properties, "client.rack"), Some("use1-az1"));
        assert_eq!(get(&properties, "socket.keepalive.enable"), Some("true"));
        let error = settings(&["--kafka-properties=acks=1"]).unwrap_err();
        assert!(error.contains("acks"), "{error}");
        assert!(settings(&["--kafka-properties=nonsense"]).is_err());
    }
}
