use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use ratewire_service::{init_telemetry, shutdown_on_signal};
use ratewire_tools::feed::backfill::{self, BackfillSettings, Format, Sending};
use ratewire_tools::feed::client::IngestClient;
use ratewire_tools::feed::load::{self, LoadSettings};
use ratewire_tools::feed::reference::{self, PollSettings};
use ratewire_tools::feed::{self, DemoSettings};

/// ratewire feed: publishes boards to ingest like a bank's feed would.
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// Base URL of the ingest service.
    #[arg(
        long,
        env = "RATEWIRE_INGEST_URL",
        default_value = "http://127.0.0.1:8081"
    )]
    ingest_url: String,
    /// Base URL of ingest's operator listener (banks and tokens).
    #[arg(
        long,
        env = "RATEWIRE_INGEST_OPERATOR_URL",
        default_value = "http://127.0.0.1:9081"
    )]
    operator_url: String,
    /// The operators' bearer token (to register banks and take tokens).
    #[arg(long, env = "RATEWIRE_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate Ethiopian banks publishing boards every few seconds.
    Demo {
        /// How many banks to simulate (at most 15).
        #[arg(long, env = "RATEWIRE_FEED_BANKS", default_value_t = 12, value_parser = clap::value_parser!(u64).range(1..=15))]
        banks: u64,
        /// How many currencies each bank quotes (at most 18).
        #[arg(long, env = "RATEWIRE_FEED_CURRENCIES", default_value_t = 12, value_parser = clap::value_parser!(u64).range(1..=18))]
        currencies: u64,
        /// Milliseconds between rounds.
        #[arg(long, env = "RATEWIRE_FEED_INTERVAL_MS", default_value_t = 3000, value_parser = clap::value_parser!(u64).range(50..))]
        interval_ms: u64,
        /// Publish a single round and exit.
        #[arg(long)]
        once: bool,
        /// Days of daily boards (and the National Bank's reference days)
        /// published through the backfill for the banks this run registers,
        /// beside the live rounds; 0 publishes none.
        #[arg(long, env = "RATEWIRE_FEED_HISTORY_DAYS", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=3660))]
        history_days: u32,
    },
    /// Publish past boards from a CSV or JSON file (format in
    /// docs/publishers.md), then print what was accepted and rejected.
    /// Exits 0 only when every row was published; running it again after a
    /// failure publishes nothing twice.
    Backfill {
        file: PathBuf,
        /// The file's format; by default from its extension (.csv, .json,
        /// .jsonl, .ndjson).
        #[arg(long, value_enum)]
        format: Option<Format>,
        /// A publisher token as BANK_ID=TOKEN; repeat for several banks.
        /// Banks without one get a token made with the operator token for
        /// this run and revoked at its end.
        #[arg(long = "token", value_parser = parse_token)]
        tokens: Vec<(i64, String)>,
        /// Banks published in parallel (each bank's boards go in order).
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=64))]
        concurrency: u64,
        /// Tries per board while ingest answers 503 or cannot be reached.
        #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=100))]
        attempts: u32,
        /// Check the file with ingest's rules and report; send nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// The National Bank's reference rates: import saved responses, or poll
    /// its endpoint.
    #[command(subcommand)]
    Reference(ReferenceCommand),
    /// Receive webhooks (to try alerts on this machine): each call's
    /// signature is checked against the secrets and printed as a JSON line.
    Receive {
        /// Where to listen, e.g. 127.0.0.1:9999.
        #[arg(long, default_value = "127.0.0.1:9999")]
        listen: std::net::SocketAddr,
        /// A webhook's secret (`whsec_...`); repeat for several (or for
        /// both during a rotation).
        #[arg(long = "secret", required = true, value_parser = parse_secret)]
        secrets: Vec<ratewire_alerts::Secret>,
    },
    /// Publish boards of many banks at a fixed rate (or as fast as possible)
    /// and report acknowledgement and publish-to-visible latency as
    /// `key value` lines.
    Load {
        #[arg(long, default_value_t = 50)]
        banks: usize,
        /// Currencies per board (at most 30).
        #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=30))]
        currencies: u64,
        /// Boards per second; 0 for as fast as the publishers can.
        #[arg(long, default_value_t = 100.0)]
        rate: f64,
        /// How long to publish, e.g. 30s.
        #[arg(long, default_value = "30s", value_parser = ratewire_service::settings::parse_duration)]
        duration: Duration,
        /// Stop after this many boards.
        #[arg(long)]
        boards: Option<usize>,
        /// Most pushes in flight at once.
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
        /// Measure publish-to-visible by polling this API base URL...
        #[arg(long, requires = "api_key")]
        watch_api: Option<String>,
        /// ...with this API key.
        #[arg(long)]
        api_key: Option<String>,
        /// The chance that a currency's quotes move from one board of a
        /// bank to the next (1: every value changes on every board; the
        /// demo's mix is 0.1).
        #[arg(long, default_value_t = 1.0, value_parser = parse_chance)]
        moves: f64,
    },
}

fn parse_chance(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(chance) if (0.0..=1.0).contains(&chance) => Ok(chance),
        _ => Err(format!("`{text}` is not a chance from 0 to 1")),
    }
}

fn parse_secret(text: &str) -> Result<ratewire_alerts::Secret, String> {
    ratewire_alerts::Secret::decode(text.trim())
        .ok_or_else(|| "a secret is whsec_ followed by base64".to_string())
}

fn parse_token(text: &str) -> Result<(i64, String), String> {
    let (bank, token) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not BANK_ID=TOKEN"))?;
    let bank = bank
        .trim()
        .parse::<ratewire_proto::BankId>()
        .map_err(|e| e.to_string())?;
    Ok((bank.get(), token.trim().to_owned()))
}

#[derive(Subcommand)]
enum ReferenceCommand {
    /// Post saved responses of the National Bank's `filter-exchange-rates`
    /// endpoint (one day each) as they are; a line per file. Exits 0 only
    /// when every file was imported.
    Import {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Fetch today's response (and any missed weekday's) every DURATION and
    /// post each day once it reads as that day's board; a 5xx, a timeout or
    /// a body that does not read is fetched again, never posted.
    Poll {
        /// The endpoint, e.g.
        /// `https://api.nbe.gov.et/api/filter-exchange-rates`; `{date}` in
        /// it is replaced by the day, else `date=YYYY-MM-DD` is added.
        #[arg(long, env = "RATEWIRE_REFERENCE_URL")]
        url: String,
        /// How often to look, e.g. 15m.
        #[arg(long, default_value = "15m", value_parser = ratewire_service::settings::parse_duration)]
        every: Duration,
        /// Weekdays looked back over for missed days (today included).
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=60))]
        days_back: u32,
        /// How long one fetch may take.
        #[arg(long, default_value = "20s", value_parser = ratewire_service::settings::parse_duration)]
        timeout: Duration,
        /// Tries per day and round.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=20))]
        attempts: u32,
        /// One round, then exit (for cron).
        #[arg(long)]
        once: bool,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let cli: Cli = ratewire_service::parse_settings();
    // The feed is a tool, not a service: it exports no traces of its own
    // unless an OTLP endpoint is set for it too.
    let _telemetry = init_telemetry("text", "ratewire-feed");
    let shutdown = shutdown_on_signal();
    match cli.command {
        Command::Demo {
            banks,
            currencies,
            interval_ms,
            once,
            history_days,
        } => {
            let settings = DemoSettings {
                ingest_url: cli.ingest_url,
                operator_url: cli.operator_url,
                admin_token: cli
                    .admin_token
                    .context("the demo needs the operator token (RATEWIRE_ADMIN_TOKEN)")?,
                banks: banks as usize,
                currencies: currencies as usize,
                interval: Duration::from_millis(interval_ms),
                once,
                history_days,
            };
            feed::run_demo(settings, shutdown).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Load {
            banks,
            currencies,
            rate,
            duration,
            boards,
            concurrency,
            watch_api,
            api_key,
            moves,
        } => {
            let settings = LoadSettings {
                banks,
                currencies: currencies as usize,
                rate,
                duration,
                boards,
                concurrency,
                watch: watch_api.zip(api_key),
                moves,
            };
            let client = IngestClient::new(
                &cli.ingest_url,
                &cli.operator_url,
                cli.admin_token.as_deref(),
            )?;
            let report = load::run(settings, client, shutdown).await?;
            writeln!(std::io::stdout(), "{}", report.render())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Receive { listen, secrets } => {
            feed::receive::serve(listen, secrets, true, shutdown.clone()).await?;
            tracing::info!(%listen, "receiving webhooks; stop with Ctrl-C");
            shutdown.cancelled().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Reference(command) => {
            let client = IngestClient::new(
                &cli.ingest_url,
                &cli.operator_url,
                cli.admin_token.as_deref(),
            )?;
            match command {
                ReferenceCommand::Import { files } => {
                    let complete = reference::import_files(&client, &files).await?;
                    Ok(if complete {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::from(2)
                    })
                }
                ReferenceCommand::Poll {
                    url,
                    every,
                    days_back,
                    timeout,
                    attempts,
                    once,
                } => {
                    let settings = PollSettings {
                        url,
                        every,
                        days_back,
                        timeout,
                        attempts,
                        once,
                    };
                    reference::poll(&client, settings, shutdown).await?;
                    Ok(ExitCode::SUCCESS)
                }
            }
        }
        Command::Backfill {
            file,
            format,
            tokens,
            concurrency,
            attempts,
            dry_run,
        } => {
            let settings = BackfillSettings {
                file,
                format,
                sending: Sending {
                    tokens: tokens.into_iter().collect::<HashMap<_, _>>(),
                    concurrency: concurrency as usize,
                    attempts,
                    dry_run,
                },
            };
            let client = IngestClient::new(
                &cli.ingest_url,
                &cli.operator_url,
                cli.admin_token.as_deref(),
            )?;
            let summary = backfill::run(settings, client, shutdown).await?;
            // The summary is the command's result: standard output.
            writeln!(std::io::stdout(), "{}", summary.render())?;
            Ok(if summary.complete() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            })
        }
    }
}
