//! For tests only (the `testing` feature, which crates enable from their
//! dev-dependencies): a Postgres database of a test's own.
//!
//! Tests that talk to Postgres each get a database with a name of its own,
//! so they run in parallel and leave nothing behind that another run could
//! trip over; the database goes when the value does, even when the test
//! panics.

use sqlx::{Connection, PgConnection};

/// The Postgres server tests use: the local one the development stack
/// runs (or finds).
pub const POSTGRES: &str = "postgres://postgres@127.0.0.1:5432";

/// A database made for one test, dropped (with its connections) when this
/// value is.
#[derive(Debug)]
pub struct TestDatabase {
    name: String,
}

impl TestDatabase {
    /// Creates an empty database named `{prefix}_` and 12 random hex
    /// digits.
    pub async fn create(prefix: &str) -> Result<Self, sqlx::Error> {
        let name = format!(
            "{prefix}_{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        let mut admin = PgConnection::connect(&format!("{POSTGRES}/postgres")).await?;
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await?;
        admin.close().await?;
        Ok(Self { name })
    }

    /// The database's connection URL.
    pub fn url(&self) -> String {
        format!("{POSTGRES}/{}", self.name)
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for TestDatabase {
    /// Drops the database on a thread of its own: `Drop` cannot wait on the
    /// test's runtime, which may be the very thread dropping it.
    fn drop(&mut self) {
        let admin = format!("{POSTGRES}/postgres");
        let statement = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime
                .block_on(async {
                    let mut admin = PgConnection::connect(&admin).await?;
                    sqlx::query(&statement).execute(&mut admin).await?;
                    admin.close().await
                })
                .map_err(|e| e.to_string())
        })
        .join();
        if let Ok(Err(e)) | Err(e) = dropped.map_err(|_| "panicked".to_owned()) {
            eprintln!("test database {} left behind: {e}", self.name);
        }
    }
}
