//! What a stack's Redis holds: the views the projector wrote, read
//! directly (the API may render them from Postgres meanwhile).

use anyhow::{Context, Result};
use serde_json::Value;

use super::Stack;

impl Stack {
    /// Whether the projector has written `bank`'s /rates element to Redis
    /// (the API may render it from Postgres before): the change it made is
    /// then on the live stream's log too.
    pub async fn bank_view_written(&self, bank: i64) -> Result<bool> {
        let client = redis::Client::open(self.redis_url.as_str())?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        let key = format!("{}view:rates:bank:{bank}:00", self.views_prefix().await?);
        Ok(redis::cmd("EXISTS").arg(key).query_async(&mut conn).await?)
    }

    /// Every stored view of the active generation, by key, its JSON parsed
    /// and with what a rendering stamps with its own time (the best rates'
    /// `timestamp`) removed, so two renderings of the same data compare
    /// equal.
    pub async fn stored_views(&self) -> Result<std::collections::BTreeMap<String, Value>> {
        self.stored_views_under(&self.redis_prefix).await
    }

    /// [`Stack::stored_views`] as written under another
    /// `RATEWIRE_REDIS_PREFIX` (by a command run beside the stack's
    /// processes, say a `rebuild`).
    pub async fn stored_views_under(
        &self,
        redis_prefix: &str,
    ) -> Result<std::collections::BTreeMap<String, Value>> {
        let client = redis::Client::open(self.redis_url.as_str())?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        let views = self.views_prefix().await?;
        let generation = views
            .strip_prefix(self.redis_prefix.as_str())
            .context("the views live under the stack's prefix")?;
        let prefix = format!("{redis_prefix}{generation}view:");
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}*"))
            .query_async(&mut conn)
            .await?;
        let mut views = std::collections::BTreeMap::new();
        for key in keys {
            let name = key.trim_start_matches(&prefix).to_owned();
            let value: Value = match name.as_str() {
                // Bookkeeping, not a view.
                "versions" | "etags" => continue,
                "banks:active" => {
                    let ids: Vec<String> = redis::cmd("ZRANGE")
                        .arg(&key)
                        .arg(0)
                        .arg(-1)
                        .query_async(&mut conn)
                        .await?;
                    Value::from(ids)
                }
                _ => {
                    let text: String = redis::cmd("GET").arg(&key).query_async(&mut conn).await?;
                    let mut value: Value = serde_json::from_str(&format!("[{text}]"))
                        .with_context(|| format!("{key} holds no JSON"))?;
                    if name.starts_with("best:") {
                        value[0] = crate::support::without_computed_time(value[0].take());
                    }
                    value
                }
            };
            views.insert(name, value);
        }
        Ok(views)
    }
}
