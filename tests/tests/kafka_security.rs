//! Managed brokers take TLS and SASL: ingest and the projector reach a
//! broker whose listener takes only SCRAM-SHA-512 over TLS (certificates
//! made by the test), and a wrong password stops each of them at start with
//! status 2 and the settings to check.

use std::time::Duration;

use ratewire_e2e::{free_port, Board, Stack};

#[tokio::test]
async fn ingest_and_the_projector_work_over_sasl_ssl_and_a_wrong_password_stops_them(
) -> anyhow::Result<()> {
    let stack = Stack::builder().sasl_ssl_broker().start().await?;
    let key = stack.api_key("tls").await?;
    let (bank, token) = stack.bank_with_token("CBE", "CBE").await?;
    let board = Board::now().rate("USD", "155.1", "158");
    assert_eq!(stack.publish_board(bank, &token, board).await?.0, 202);
    stack
        .wait_served("the board, through the secured broker", bank, &key, "155.1")
        .await?;

    let wrong = stack.logs.join("tls/wrong-password");
    std::fs::write(&wrong, "not-the-password\n")?;
    let wrong = wrong.display().to_string();
    // The projector outside the group too (fixed partitions), where no
    // member reports the broker's refusal.
    for (binary, partitions) in [
        ("ratewire-ingest", "auto"),
        ("ratewire-projector", "auto"),
        ("ratewire-projector", "all"),
    ] {
        // Listeners of their own: the stack's processes hold theirs.
        let listen = [
            "RATEWIRE_INGEST_LISTEN",
            "RATEWIRE_INGEST_OPERATOR_LISTEN",
            "RATEWIRE_PROJECTOR_LISTEN",
        ]
        .map(|name| (name, format!("127.0.0.1:{}", free_port())));
        let mut env: Vec<(&str, &str)> = listen.iter().map(|(n, v)| (*n, v.as_str())).collect();
        env.push(("RATEWIRE_KAFKA_SASL_PASSWORD_FILE", &wrong));
        env.push(("RATEWIRE_PROJECTOR_PARTITIONS", partitions));
        let output = tokio::time::timeout(Duration::from_secs(30), stack.run(binary, &[], &env))
            .await
            .map_err(|_| {
                anyhow::anyhow!("{binary} ({partitions}) kept running with a wrong password")
            })??;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{binary} ({partitions}): {stderr}"
        );
        assert!(
            stderr.contains("refused this process's credentials")
                && stderr.contains("RATEWIRE_KAFKA_SASL_PASSWORD"),
            "{binary} does not name the setting: {stderr}"
        );
    }
    Ok(())
}
