//! Redis holds only derived views: when they vanish, every endpoint answers
//! the same from Postgres, and the projector puts the views back.

use ratewire_e2e::{ago, eventually, without_computed_time, Board, Stack, VISIBLE_WITHIN};

#[tokio::test]
async fn every_endpoint_answers_the_same_without_redis_views() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let key = stack.api_key("loss").await?;
    let (cbe, cbe_token) = stack
        .bank_with_token("CBE", "Commercial Bank of Ethiopia")
        .await?;
    let (awash, awash_token) = stack.bank_with_token("AWASH", "Awash Bank").await?;
    for (id, token, hours, buying) in [
        (cbe, &cbe_token, 5, "155.10"),
        (cbe, &cbe_token, 1, "155.35"),
        (awash, &awash_token, 2, "154.9"),
    ] {
        let board = Board::at(ago(0, hours))
            .rate("USD", buying, "158.2")
            .transactional("USD", 155, 158)
            .rate("EUR", 180, "184.5");
        assert_eq!(stack.publish_board(id, token, board).await?.0, 202);
    }
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let paths = [
        "/api/v1/banks".to_owned(),
        "/api/v1/banks?withRecentEx=true".to_owned(),
        "/api/v1/currencies".to_owned(),
        "/api/v1/rates".to_owned(),
        "/api/v1/rates?transactional=true&socialLinks=true".to_owned(),
        format!("/api/v1/rates?bankId={awash}"),
        "/api/v1/rates/best-rates?currencyCode=USD".to_owned(),
        format!("/api/v1/history?bankId={cbe}&date={today}"),
    ];
    eventually("all boards folded", VISIBLE_WITHIN, || async {
        let (_, body) = stack.get("/api/v1/rates", Some(&key)).await.ok()?;
        let list = body["data"].as_array()?;
        let done = list.len() == 2
            && list[0]["data"][0]["exchangeRates"][1]["cashBuying"] == 155.35
            && !list[1]["data"][0]["exchangeRates"].as_array()?.is_empty();
        done.then_some(())
    })
    .await?;
    // Give the best-rates view the same moment to settle as the others.
    eventually("best rates folded", VISIBLE_WITHIN, || async {
        let (_, body) = stack
            .get("/api/v1/rates/best-rates?currencyCode=USD", Some(&key))
            .await
            .ok()?;
        (body["data"]["cashBuying"]["price"] == 155.35).then_some(())
    })
    .await?;

    // Views over all banks (/currencies, best rates) are written after the
    // banks' own: wait until they follow every board served.
    stack.wait_aggregates_written().await?;

    let mut before = vec![];
    for path in &paths {
        let (status, body) = stack.get(path, Some(&key)).await?;
        assert_eq!(status, 200, "{path}");
        before.push(without_computed_time(body));
    }
    stack.flush_redis().await?;
    for (path, expected) in paths.iter().zip(&before) {
        let (status, body) = stack.get(path, Some(&key)).await?;
        assert_eq!(status, 200, "{path}");
        assert_eq!(
            &without_computed_time(body),
            expected,
            "{path} differs when served from postgres"
        );
    }
    // The projector notices and renders the views again.
    let prefix = stack.views_prefix().await?;
    eventually("views back in redis", VISIBLE_WITHIN, || async {
        let client = redis::Client::open("redis://127.0.0.1:6379/0").ok()?;
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}view:*"))
            .query_async(&mut conn)
            .await
            .ok()?;
        // The API joins the lists of the banks' elements once a rebuild
        // has marked the views built.
        let expected = [
            "view:currencies".to_owned(),
            "view:best:USD".to_owned(),
            "view:best:EUR".to_owned(),
            format!("view:banks:bank:{cbe}:1"),
            format!("view:rates:bank:{awash}:11"),
            "view:built".to_owned(),
        ];
        expected
            .iter()
            .all(|k| keys.contains(&format!("{prefix}{k}")))
            .then_some(())
    })
    .await?;
    for (path, expected) in paths.iter().zip(&before) {
        let (_, body) = stack.get(path, Some(&key)).await?;
        assert_eq!(
            &without_computed_time(body),
            expected,
            "{path} differs after the rebuild"
        );
    }
    Ok(())
}
