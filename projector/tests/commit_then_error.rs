//! A batch whose commit succeeded but whose client saw an error is fetched
//! and applied again: every message is skipped by its stored offset, and
//! the views of what it applied must still be refreshed.

use chrono::{SubsecRound, Utc};
use ratewire_projector::fold::{apply_batch, Incoming};
use ratewire_proto::{BankId, BankRegistered, CurrencyCode, Envelope, Event};

mod common;
use common::{board, dec, drop_database, entry, fresh_pool, messages};

#[tokio::test]
async fn a_batch_applied_again_after_its_commit_still_names_its_banks_and_currencies(
) -> anyhow::Result<()> {
    let (pool, name) = fresh_pool("rw_retry").await?;
    let bank = BankId::new(7).unwrap();
    let usd = CurrencyCode::parse("USD").unwrap();
    let now = Utc::now().trunc_subsecs(0);
    let log = [
        Envelope::new(
            bank,
            now,
            Event::BankRegistered(BankRegistered {
                code: "B7".into(),
                name: "Bank 7".into(),
                image_url: "https://i.test/b7.png".into(),
                social_links: vec![],
                schedule: None,
            }),
        ),
        Envelope::new(
            bank,
            now,
            Event::BoardPublished(board(
                now,
                vec![entry("USD", dec(15_510), dec(15_800), None)],
            )),
        ),
    ];
    let messages: Vec<Incoming> = messages(&log);

    let first = apply_batch(&pool, "retry", &messages, &[], None).await?;
    assert_eq!(first.applied, 2);

    let again = apply_batch(&pool, "retry", &messages, &[], None).await?;
    assert_eq!(
        (again.applied, again.skipped),
        (0, 2),
        "nothing applied twice"
    );
    assert!(again.banks.contains(&bank), "the bank's views refreshed");
    assert!(again.currencies.contains(&usd), "its best rates refreshed");

    drop_database(pool, name).await
}
