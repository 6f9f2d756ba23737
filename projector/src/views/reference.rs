//! The reference sources' views: the days each published, and each day's
//! whole answer. Reference boards are few (one a weekday), so they are
//! written by the fold loop itself after the commit that stored them, and
//! kept pending until Redis took them.

use std::collections::BTreeSet;

use chrono::NaiveDate;
use ratewire_proto::NATIONAL_BANK;
use ratewire_readmodel::store::{self, Version};
use ratewire_readmodel::views::{self, ViewStyle};
use sqlx::PgPool;
use tracing::{debug, warn};

use crate::error::Result;
use crate::views::redis::{RedisViews, ReferenceViews, Rendered, ViewUpdate};

/// Renders, in one snapshot, the views of `days` (source, date) and the
/// list of days of each of their sources; every day of every source when
/// `days` is `None` (a rebuild).
pub async fn load(
    pool: &PgPool,
    days: Option<&BTreeSet<(String, NaiveDate)>>,
    style: &ViewStyle,
) -> Result<ViewUpdate> {
    let mut tx = store::begin_snapshot(pool).await?;
    let mut update = ViewUpdate::at(Version::of(&mut tx).await?);
    let sources: BTreeSet<String> = match days {
        Some(days) => days.iter().map(|(source, _)| source.clone()).collect(),
        // The National Bank's list of days is written even empty, so that
        // readers find it in Redis and never ask Postgres for it.
        None => store::reference_sources(&mut *tx)
            .await?
            .into_iter()
            .chain([NATIONAL_BANK.to_owned()])
            .collect(),
    };
    for source in sources {
        let dates = store::reference_dates(&mut *tx, &source).await?;
        let wanted: Vec<NaiveDate> = match days {
            Some(days) => days
                .iter()
                .filter(|(s, _)| *s == source)
                .map(|(_, d)| *d)
                .collect(),
            None => dates.clone(),
        };
        let mut stored = store::reference_days(&mut *tx, &source, Some(&wanted))
            .await?
            .into_iter()
            .peekable();
        let mut rendered = Vec::with_capacity(wanted.len());
        let mut wanted = wanted;
        wanted.sort();
        wanted.dedup();
        for date in wanted {
            let day = stored.next_if(|day| day.date == date);
            rendered.push((
                date,
                day.map(|day| Rendered::new(views::reference_day_response(&day, style))),
            ));
        }
        update.reference.push(ReferenceViews {
            source,
            dates: Rendered::new(views::reference_dates_body(&dates)),
            days: rendered,
        });
    }
    tx.commit().await?;
    Ok(update)
}

/// Reference days folded whose views Redis has not taken yet.
pub struct Pending {
    days: BTreeSet<(String, NaiveDate)>,
    /// Every day of every source: at start and on a new generation, since
    /// a projector that stopped between a commit and its views' write left
    /// them behind (unchanged views are not written again).
    everything: bool,
    failing: bool,
}

impl Default for Pending {
    fn default() -> Self {
        Self {
            days: BTreeSet::new(),
            everything: true,
            failing: false,
        }
    }
}

impl Pending {
    /// Everything again (a new generation).
    pub fn all(&mut self) {
        self.everything = true;
    }

    pub fn add(&mut self, days: BTreeSet<(String, NaiveDate)>) {
        self.days.extend(days);
    }

    /// Writes what is pending; kept for the next try when Postgres or
    /// Redis fails (logged once per run of failures).
    pub async fn write(&mut self, pool: &PgPool, views: &mut RedisViews) {
        if self.days.is_empty() && !self.everything {
            return;
        }
        let written = async {
            let days = (!self.everything).then_some(&self.days);
            let update = load(pool, days, views.style()).await?;
            views.apply(&update).await
        }
        .await;
        match written {
            Ok(()) => {
                debug!(days = self.days.len(), "reference views written");
                self.days.clear();
                self.everything = false;
                self.failing = false;
            }
            Err(e) => {
                if !self.failing {
                    warn!(error = %e, days = self.days.len(),
                        "reference views not written; trying again");
                }
                self.failing = true;
            }
        }
    }
}
