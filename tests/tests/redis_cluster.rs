//! The projector and the API on a Redis Cluster of three primaries
//! (`RATEWIRE_REDIS_URL=redis-cluster://...`): views served from the
//! cluster, a plan's minute shared by two API instances, the live stream,
//! and the month's usage saved to Postgres; each generation's views in one
//! slot, the counters of each caller in a slot of their own; and
//! `ratewire-projector verify` over the cluster.

use ratewire_e2e::redis_cluster::RedisCluster;
use ratewire_e2e::sse::{next_board, subscribe};
use ratewire_e2e::{ago, eventually, room_in_this_minute, Board, Stack, VISIBLE_WITHIN};

const PLANS: &str = "free=60/10000/1,tiny=6/1000/1,anonymous=10/1000/1";

fn board(buying: &str, hours_ago: i64) -> Board {
    Board::at(ago(0, hours_ago)).rate("USD", buying, 160)
}

/// The API's count of views it served from Redis.
async fn views_from_redis(stack: &Stack) -> f64 {
    let metrics = stack
        .text_at(&format!("{}/metrics", stack.api_operator_url))
        .await
        .unwrap_or_default();
    metrics
        .lines()
        .filter(|l| l.starts_with("ratewire_api_views_served_total") && l.contains("redis"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn the_projector_and_two_api_instances_run_on_a_three_primary_cluster() -> anyhow::Result<()>
{
    let dir = std::env::temp_dir().join(format!(
        "rw-redis-cluster-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let cluster = RedisCluster::start(&dir).await?;
    let url = cluster.url();
    let mut stack = Stack::builder()
        .env("RATEWIRE_REDIS_URL", &url)
        .env("RATEWIRE_PLANS", PLANS)
        .env("RATEWIRE_USAGE_SYNC_SECS", "1")
        .start()
        .await?;
    let key = stack.api_key_on("cluster", "free").await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;
    assert_eq!(
        stack.publish_board(bank, &token, board("151", 2)).await?.0,
        202
    );
    stack
        .wait_served("the board", bank, &key, "\"cashBuying\":151")
        .await?;
    let ready = stack
        .json_at(&format!("{}/readyz", stack.api_url))
        .await
        .expect("readiness");
    assert_eq!(ready["redis"], true, "{ready}");
    // Until the projector has written it, a view is rendered from Postgres.
    eventually("a view served from the cluster", VISIBLE_WITHIN, || async {
        stack
            .get(&format!("/api/v1/rates?bankId={bank}"), Some(&key))
            .await
            .ok()?;
        (views_from_redis(&stack).await > 0.0).then_some(())
    })
    .await?;

    // A board pushed now reaches a subscriber.
    let mut source = subscribe(&stack, &key, &format!("bankId={bank}&events=board"), None).await;
    assert_eq!(
        stack.publish_board(bank, &token, board("152", 1)).await?.0,
        202
    );
    let (_, data) = loop {
        let (id, data) = next_board(&mut source).await?;
        if data.to_string().contains("152") {
            break (id, data);
        }
    };
    assert_eq!(data["id"], bank, "{data}");
    source.close();

    // One plan minute, counted across two API instances in the cluster.
    // Made before the second instance starts, which then knows it from
    // its first request.
    let tiny = stack.api_key_on("tiny", "tiny").await?;
    let (second, _) = stack.start_api_as("api-2").await?;
    room_in_this_minute(10).await;
    let mut statuses = Vec::new();
    for round in 0..8 {
        let base = if round % 2 == 0 {
            stack.api_url.clone()
        } else {
            second.clone()
        };
        let response = stack
            .http()
            .get(format!("{base}/api/v1/rates?bankId={bank}"))
            .header("x-api-key", &tiny)
            .send()
            .await?;
        statuses.push(response.status().as_u16());
    }
    assert_eq!(
        statuses,
        [200, 200, 200, 200, 200, 200, 429, 429],
        "six a minute between both instances"
    );

    // The month's counts reach Postgres (a scan of every primary).
    let subject = format!("key:{}", tiny.split('_').nth(1).expect("a key prefix"));
    stack
        .wait_count(
            "the month's count saved",
            &format!(
                "SELECT count(*) FROM api.usage_months WHERE subject = '{subject}' AND used >= 6"
            ),
            1,
            VISIBLE_WITHIN,
        )
        .await?;

    // Where the keys went: a generation's views on one node, and callers'
    // counters in their own slots.
    let keys = cluster.keys()?;
    let view_nodes: std::collections::BTreeSet<u16> = keys
        .iter()
        .filter(|(_, k)| k.contains("{readmodel."))
        .map(|(port, _)| *port)
        .collect();
    assert_eq!(view_nodes.len(), 1, "one slot for the views: {keys:?}");
    assert!(
        keys.iter()
            .any(|(_, k)| k.contains(&format!("rl:minute:{{{subject}}}:"))),
        "the minute counter, tagged by its subject: {keys:?}"
    );

    // The operator's check reads and drops a generation's keys by prefix
    // on every primary: the fold equals a replay, and no key of the check
    // generation is left.
    stack.wait_aggregates_written().await?;
    let rows = stack.assert_fold_matches_replay().await?;
    assert_eq!(rows["boards"], 2);
    let keys = cluster.keys()?;
    assert!(
        !keys.iter().any(|(_, k)| k.contains("{verify_")),
        "the check generation's keys are gone: {keys:?}"
    );
    Ok(())
}
