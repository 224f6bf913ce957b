//! A role without a privilege a command needs gets the database's refusal and what to do about
//! it (it got a bare "permission denied for schema public"); so does a read-only session (a bare
//! "cannot execute SELECT in a read-only transaction": black-box run).

mod support;

use outbox_tests::TestDb;
use support::RelayRole;
use support::commands::outbox;

#[tokio::test]
async fn a_refused_privilege_says_what_to_do() {
    let db = TestDb::new().await;
    let role = RelayRole::create(&db).await;
    for (args, says) in [
        (
            &["migrate"][..],
            "hint: migrating creates and alters the outbox's tables: run `outbox migrate` as \
             their owner",
        ),
        // The relay migrating at start (it was told to grant what Least privilege lists).
        (
            &[
                "relay",
                "--migrate",
                "--default-queue",
                "http://sqs.us-east-1.127.0.0.1:4566/000000000000/no-such-queue",
            ],
            "hint: migrating creates and alters the outbox's tables: run `outbox migrate` as \
             their owner",
        ),
        (
            &["dead-letters", "purge", "--all", "--yes"],
            "hint: this role lacks a privilege on the outbox's tables: grant what the README's \
             \"Least privilege\" section lists",
        ),
    ] {
        let out = outbox(&role.url(&db)).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("permission denied"), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[tokio::test]
async fn a_read_only_session_says_what_to_do() {
    let db = TestDb::new().await;
    let read_only = format!(
        "{}{}options=-c%20default_transaction_read_only%3Don",
        db.url(),
        if db.url().contains('?') { "&" } else { "?" }
    );
    for args in [
        &["migrate"][..],
        &["dead-letters", "retry", "--all"],
        &["cleanup", "--older-than", "30d"],
    ] {
        let out = outbox(&read_only).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("hint: the database session is read-only"),
            "{args:?}: {err}"
        );
    }
}

/// The tests' relay role is gone once dropped, while its database still holds its grants (as when
/// a test's locals drop in reverse): it was left on the server, ~30 per run of the suite.
#[tokio::test]
async fn a_dropped_relay_role_leaves_no_role_behind() {
    let db = TestDb::new().await;
    let role = RelayRole::create(&db).await;
    let name = role.name().to_string();
    let client = db.connect().await;
    let exists = async |name: &str| -> bool {
        client
            .query_one("SELECT count(*) FROM pg_roles WHERE rolname = $1", &[&name])
            .await
            .unwrap()
            .get::<_, i64>(0)
            == 1
    };
    assert!(exists(&name).await, "the role was created");
    drop(role);
    assert!(!exists(&name).await, "role {name} is left on the server");
}
