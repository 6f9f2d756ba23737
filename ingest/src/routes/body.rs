//! Reading a request body under the size limit.
//!
//! A body over the limit is still read to its end (discarded, within a
//! bound) before the 413 goes out: answering early and closing makes the
//! kernel reset the connection under a client that is still sending, and
//! the client then sees a broken pipe instead of our 413 (what nginx's
//! lingering close is for).

use std::time::Duration;

use axum::body::{Body, Bytes};
use futures_util::StreamExt;

use crate::error::Error;

/// The most discarded after the limit is reached, as a multiple of it.
const DRAIN_FACTOR: usize = 16;
/// The longest spent discarding.
const DRAIN_TIME: Duration = Duration::from_secs(2);

pub async fn read_limited(body: Body, limit: usize) -> Result<Bytes, Error> {
    let mut stream = body.into_data_stream();
    let mut read = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|e| Error::validation("body", format!("could not be read: {e}")))?;
        if read.len() + chunk.len() > limit {
            drain(stream, limit.saturating_mul(DRAIN_FACTOR)).await;
            return Err(Error::PayloadTooLarge(limit));
        }
        read.extend_from_slice(&chunk);
    }
    Ok(read.into())
}

async fn drain(mut stream: axum::body::BodyDataStream, cap: usize) {
    let mut discarded = 0usize;
    let _ = tokio::time::timeout(DRAIN_TIME, async {
        while let Some(Ok(chunk)) = stream.next().await {
            discarded += chunk.len();
            if discarded > cap {
                break;
            }
        }
    })
    .await;
}
