//! The schema's history as a release reads it: a database a newer release migrated, a history
//! with a hole or another build's version, and a migration run that fails part-way. Each is said in
//! the product's words, naming the versions (refinery's own text said "migration V12__x is missing
//! from the filesystem" for a database ahead of the binary, and nothing of what a partial run had
//! applied; the relay's start-up check read the latest version only, and started on a history
//! with a hole).

use outbox_core::{
    ErrorKind, SCHEMA_HISTORY_TABLE, check_relay_database, error_chain, migrate, migrate_up_to,
    schema_version,
};
use outbox_tests::{LogCapture, TestDb};

async fn history(client: &tokio_postgres::Client, sql: &str) {
    client
        .batch_execute(&sql.replace("{history}", SCHEMA_HISTORY_TABLE))
        .await
        .unwrap();
}

/// A newer release migrated the database: `migrate` refuses, saying so (it cannot take a schema
/// back); the relay starts (as during a rolling upgrade), with a warning naming both versions.
#[tokio::test]
async fn a_database_a_newer_release_migrated_is_named_so() {
    let logs = LogCapture::default();
    let _g = logs.install();
    let db = TestDb::new().await;
    let mut client = db.connect().await;
    let next = schema_version() + 1;
    history(
        &client,
        &format!(
            "INSERT INTO {{history}} (version, name, applied_on, checksum)
             VALUES ({next}, 'from_a_newer_release', '2026-12-06T10:00:00Z', '1')"
        ),
    )
    .await;
    let refused = migrate(&mut client).await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Migration);
    let text = error_chain(&refused);
    assert!(
        text.contains(&format!("is at version {next}"))
            && text.contains("newer than this binary's latest")
            && !text.contains("missing from the filesystem"),
        "{text}"
    );
    let report = check_relay_database(&client, false).await.unwrap();
    assert_eq!(report.schema_version, next);
    let logs = logs.text();
    assert!(
        logs.contains(&format!(
            "is at version {next}, newer than this binary's {}",
            schema_version()
        )),
        "{logs}"
    );
}

/// A version's row removed by hand while later ones stay: `migrate` names it (it would not apply
/// it out of order) and the relay refuses to start, naming it too.
#[tokio::test]
async fn a_history_with_a_hole_is_refused_naming_the_version() {
    let db = TestDb::new().await;
    let mut client = db.connect().await;
    history(&client, "DELETE FROM {history} WHERE version IN (3, 5)").await;
    let refused = migrate(&mut client).await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Migration);
    let text = error_chain(&refused);
    assert!(
        text.contains("version 3 of the outbox schema") && text.contains("is not recorded"),
        "{text}"
    );
    let refused = check_relay_database(&client, false).await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Config);
    let text = error_chain(&refused);
    assert!(
        text.contains(&format!(
            "records version {} but not version(s) 3, 5",
            schema_version()
        )),
        "{text}"
    );
}

/// A version applied by another build (its checksum differs): named, with both names.
#[tokio::test]
async fn a_version_another_build_applied_is_named() {
    let db = TestDb::new().await;
    let mut client = db.connect().await;
    history(
        &client,
        "UPDATE {history} SET checksum = '1' WHERE version = 2",
    )
    .await;
    let refused = migrate(&mut client).await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Migration);
    let text = error_chain(&refused);
    assert!(
        text.contains("version 2 of the outbox schema (V2__")
            && text.contains("with checksum 1, this binary's V2__")
            && text.contains("another build of outbox")
            && text.contains("SET checksum = '")
            && text.contains("WHERE version = 2"),
        "{text}"
    );
    // The statement it suggests records this binary's checksum: migrate goes through.
    let fix = &text[text.find("UPDATE ").unwrap()..];
    client.batch_execute(fix).await.unwrap();
    assert!(migrate(&mut client).await.unwrap().applied.is_empty());
}

/// A run that fails part-way says which migrations it applied (and kept) before the one that
/// failed, and why that one failed.
#[tokio::test]
async fn a_run_that_fails_part_way_says_what_it_applied() {
    let db = TestDb::empty().await;
    let mut client = db.connect().await;
    migrate_up_to(&mut client, 9).await.unwrap();
    // V11 makes this function with another return type: it fails; V10 goes through first.
    client
        .batch_execute(
            "CREATE FUNCTION outbox_events_notify_guard() RETURNS int LANGUAGE sql AS 'SELECT 1'",
        )
        .await
        .unwrap();
    let refused = migrate(&mut client).await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Migration);
    let text = error_chain(&refused);
    assert!(
        text.contains("applied first, and kept: V10__published_since")
            && text.contains("applying migration V11__notify_guard failed: SQLSTATE 42P13")
            && text.contains("cannot change return type"),
        "{text}"
    );
    // In the product's words, not refinery's ("`error applying migration …`, `db error`").
    assert!(
        !text.contains("`error ") && !text.contains("db error"),
        "{text}"
    );
    let latest: i32 = client
        .query_one(
            &format!("SELECT max(version) FROM {SCHEMA_HISTORY_TABLE}"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(latest, 10);
}

/// History rows refinery cannot read (it panicked on them: an `applied_on` written with
/// `now()::text`, a checksum that is no number): refused, naming their versions.
#[tokio::test]
async fn unreadable_history_rows_are_refused_naming_them() {
    let logs = LogCapture::default();
    let _g = logs.install();
    let db = TestDb::new().await;
    let mut client = db.connect().await;
    history(
        &client,
        "UPDATE {history} SET applied_on = now()::text WHERE version = 2;
         UPDATE {history} SET checksum = 'x' WHERE version = 4;
         UPDATE {history} SET checksum = '99999999999999999999' WHERE version = 5;
         UPDATE {history} SET name = NULL WHERE version = 6",
    )
    .await;
    let refused = migrate(&mut client).await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Migration);
    let text = error_chain(&refused);
    assert!(text.contains("the rows of version(s) 2, 4, 5, 6"), "{text}");
    // The relay needs none of them: it starts, saying so (a black-box run saw it start silently
    // on what `migrate` refused).
    check_relay_database(&client, false).await.unwrap();
    let logs = logs.text();
    assert!(
        logs.contains("the rows of version(s) 2, 4, 5, 6") && logs.contains("this relay runs"),
        "{logs}"
    );
}

/// A role that may not create the history table is told which step failed and the server's
/// reason (refinery's words were "`error asserting migrations table`, `db error`": black-box run).
#[tokio::test]
async fn a_role_without_rights_is_told_what_failed_and_why() {
    let db = TestDb::empty().await;
    let role = outbox_tests::TestRole::create(&db, "outbox_hk", "LOGIN").await;
    db.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        .await;
    let mut config = db.config().clone();
    config.user(role.name());
    let (mut client, connection) = config.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let result = migrate(&mut client).await;
    drop(client);
    let refused = result.expect_err("the role may not create the history table");
    assert_eq!(refused.kind(), ErrorKind::Migration);
    // The server's error is kept in the chain: the CLI's hint for it, a caller's retry decision.
    assert_eq!(refused.sqlstate(), Some("42501"));
    let text = error_chain(&refused);
    assert!(
        text.contains(&format!(
            "creating or reading its history table {SCHEMA_HISTORY_TABLE} failed: SQLSTATE 42501: \
             permission denied for schema public"
        )),
        "{text}"
    );
    assert!(
        !text.contains("`error ") && !text.contains("db error"),
        "{text}"
    );
}
