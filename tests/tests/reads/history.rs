//! GET /api/v1/history, as api-v1 §4.5 and decisions.md describe it (the
//! API in process: see `super::world::World`).

use ratewire_e2e::{at, day, Board};

use super::world::World;
use serde_json::json;

#[tokio::test]
async fn history_returns_the_record_in_force_at_the_end_of_the_day() -> anyhow::Result<()> {
    let mut world = World::new().await?;
    let key = world.api_key("history").await?;
    let cbe = world.register_bank("CBE", "CBE").await?;
    for (when, buying) in [
        (at(5, 10), "150.10"),
        (at(5, 15), "150.20"),
        (at(2, 9), "151"),
    ] {
        let board = Board::at(when)
            .rate("USD", buying, 160)
            .transactional("USD", 150, "159.5");
        world.publish(cbe, &board).await?;
    }
    let query = |d: i64| format!("/api/v1/history?bankId={cbe}&date={}", day(d));
    let (status, body) = world.get(&query(2), Some(&key)).await?;
    assert_eq!(status, 200);
    assert_eq!(body["message"], "success");
    assert_eq!(body["status"], 200);
    assert_eq!(body["date"], day(2));
    assert_eq!(body["data"]["cashBuying"], 151);
    assert_eq!(body["data"]["currency"]["symbol"], "USD", "USD by default");

    // The last record of day -5, and still in force on days -4 and -3.
    for d in [5, 4, 3] {
        let (status, raw) = world.get_raw(&query(d), Some(&key)).await?;
        assert_eq!(status, 200);
        assert!(raw.contains(r#""cashBuying":150.20"#), "day -{d}: {raw}");
        assert!(
            raw.contains(&format!(r#""timestamp":"{}T15:00:00.000Z""#, day(5))),
            "{raw}"
        );
        assert!(raw.contains(r#""transactionalSelling":159.5"#), "{raw}");
    }
    let (status, body) = world.get(&query(6), Some(&key)).await?;
    assert_eq!(
        (status, body["message"].as_str()),
        (404, Some("No history found"))
    );
    Ok(())
}

#[tokio::test]
async fn history_names_what_it_cannot_find() -> anyhow::Result<()> {
    let mut world = World::new().await?;
    let key = world.api_key("history").await?;
    let cbe = world.register_bank("CBE", "CBE").await?;
    let awash = world.register_bank("AWASH", "Awash").await?;
    world
        .publish(cbe, &Board::at(at(1, 8)).rate("USD", 1, 2))
        .await?;
    world
        .publish(awash, &Board::at(at(1, 8)).rate("EUR", 1, 2))
        .await?;
    let today = day(0);
    let (s1, _) = world
        .get(
            &format!("/api/v1/history?bankId={cbe}&date={today}"),
            Some(&key),
        )
        .await?;
    let (s2, _) = world
        .get(
            &format!("/api/v1/history?bankId={awash}&date={today}&currencyCode=eur"),
            Some(&key),
        )
        .await?;
    assert_eq!((s1, s2), (200, 200), "both boards folded");

    let cases = [
        (format!("bankId=999&date={today}"), "Bank not found"),
        (
            format!("bankId={cbe}&date={today}&currencyCode=QQQ"),
            "Currency not found",
        ),
        (
            format!("bankId={cbe}&date={today}&currencyCode=JPY"),
            "Currency not found",
        ),
        (
            format!("bankId={cbe}&date={today}&currencyCode=EUR"),
            "No history found",
        ),
    ];
    for (query, message) in cases {
        let (status, body) = world
            .get(&format!("/api/v1/history?{query}"), Some(&key))
            .await?;
        assert_eq!(
            (status, body["message"].as_str()),
            (404, Some(message)),
            "{query}"
        );
    }

    // Deactivated banks keep their history.
    world.update_bank(cbe, json!({"active": false})).await?;
    let (status, _) = world
        .get(
            &format!("/api/v1/history?bankId={cbe}&date={today}"),
            Some(&key),
        )
        .await?;
    assert_eq!(status, 200);
    Ok(())
}

#[tokio::test]
async fn history_reports_every_bad_parameter() -> anyhow::Result<()> {
    let world = World::new().await?;
    let key = world.api_key("history").await?;
    let (status, body) = world.get("/api/v1/history", Some(&key)).await?;
    assert_eq!(status, 400);
    assert_eq!(body["message"], "Validation errors occurred.");
    assert_eq!(body["errors"]["bankId"], json!(["bankId is required"]));
    assert_eq!(body["errors"]["date"], json!(["date is required"]));

    let (status, body) = world
        .get(
            "/api/v1/history?bankId=0&date=2026-02-30&currencyCode=1",
            Some(&key),
        )
        .await?;
    assert_eq!(status, 400);
    let errors = body["errors"].as_object().unwrap();
    assert_eq!(
        errors.keys().collect::<Vec<_>>(),
        ["bankId", "currencyCode", "date"]
    );
    Ok(())
}

#[tokio::test]
async fn history_for_a_date_after_today_is_400_naming_date() -> anyhow::Result<()> {
    let mut world = World::new().await?;
    let key = world.api_key("history").await?;
    let cbe = world.register_bank("CBE", "CBE").await?;
    world
        .publish(cbe, &Board::at(at(1, 8)).rate("USD", 1, 2))
        .await?;
    // Today (the service zone is UTC here) is answered with its record.
    let (status, body) = world
        .get(
            &format!("/api/v1/history?bankId={cbe}&date={}", day(0)),
            Some(&key),
        )
        .await?;
    assert_eq!((status, &body["date"]), (200, &json!(day(0))), "{body}");
    // A day to come has no record: never today's labelled with it.
    for date in [day(-1), "2030-01-01".to_owned()] {
        let (status, body) = world
            .get(
                &format!("/api/v1/history?bankId={cbe}&date={date}"),
                Some(&key),
            )
            .await?;
        assert_eq!(status, 400, "{date}: {body}");
        assert_eq!(body["message"], "Validation errors occurred.");
        assert_eq!(
            body["errors"],
            json!({"date": [format!("date must not be after today ({} in UTC)", day(0))]}),
            "{date}"
        );
    }
    Ok(())
}
