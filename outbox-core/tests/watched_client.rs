//! `WatchedClient`: a command's connection watched from another while an answer takes long.
//! (The CLI's tests drive it through `outbox stats` and `dead-letters`: stalls, slow links.)

use std::time::Duration;

use outbox_core::{PgConnector, WatchedClient};
use outbox_tests::TestDb;

/// A connection whose session sat idle long before its statement (an operator answering a
/// prompt) is given the whole idle limit from the statement on: a statement held up 12 s on its
/// way (here: sent 12 s late, nothing moving meanwhile) is waited for. Before, the session's idle
/// time counted from before the prompt, and the wait was given up at the first look, 5 s in
/// (black-box recheck: a purge lost to an 8 s hiccup).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_idle_before_its_statement_gets_the_whole_limit_after_it() {
    let db = TestDb::new().await;
    let connector = PgConnector::from_url(&db.url()).unwrap();
    let conn = WatchedClient::connect(&connector, "test connection")
        .await
        .unwrap();
    tokio::time::sleep(outbox_core::connect::IDLE_AT_MOST + Duration::from_secs(1)).await;
    let asked = async {
        tokio::time::sleep(Duration::from_secs(12)).await;
        conn.client()
            .simple_query("SELECT 'after the prompt'")
            .await
            .map_err(Box::<dyn std::error::Error + Send + Sync>::from)
    };
    // Given up, or the statement failed.
    if let Err(e) = conn.answer(asked).await {
        panic!("{e}");
    }
}
