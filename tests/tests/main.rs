//! The end-to-end suite, one subject per module, in one test binary: it
//! links once, not once per subject, and its subjects' tests run side by
//! side, as most of their time is spent waiting on processes, brokers and
//! deadlines. Every test keeps to its own database, Redis prefix, topic
//! and ports. The nemesis (`nemesis.rs`) is a binary of its own: its
//! cluster takes the cores, so it runs alone.

mod alert_faults;
mod alerts;
#[path = "as_known_at/main.rs"]
mod as_known_at;
mod backfill;
mod bank_changes;
mod board_source;
mod broker_faults;
mod cluster_faults;
mod corrections;
mod dashboard;
mod dashboard_alerts;
mod dashboard_known_at;
mod deploy_files;
mod documented_examples;
mod documented_metrics;
mod internet;
mod kafka_security;
mod keys;
mod layering;
mod lifecycle;
mod limits;
mod live;
mod log_contract;
mod module_layering;
mod openapi_fuzz;
mod operations;
mod operator_bodies;
mod operator_cli;
mod projector_faults;
mod projector_observability;
mod prometheus_scrape;
mod publishers;
mod quality;
mod quality_webhooks;
mod quiet_log;
mod read_headers;
mod read_replica;
mod readme_settings;
#[path = "reads/main.rs"]
mod reads;
mod recovery;
mod redis_cluster;
mod redis_faults;
mod redis_loss;
mod redis_outage;
mod reference_rates;
mod repeated_boards;
mod retention;
mod scale_out;
mod sdks;
mod signed_answers;
mod traces;
mod verify;
mod view_cache;
mod walking_skeleton;
mod webhook_deliveries;
