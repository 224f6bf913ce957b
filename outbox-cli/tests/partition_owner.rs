//! Partitions belong to the owner of `outbox_events`, whichever role made them: maintenance run
//! once by a superuser (or a member of the owning role) leaves nothing the owner's own runs cannot
//! carve, drain or retire. Black-box: the owner's run after a superuser's failed with "permission
//! denied for table outbox_events_p_tail" and left the tail detached, for good.

mod support;

use std::process::Command;

use outbox_core::partition::Granularity;
use outbox_tests::TestDb;
use support::RelayRole;
use support::commands::{outbox, succeeds};

/// A database whose outbox tables and partitions all belong to a login role (as when the
/// service's own role ran `outbox migrate`), and that role.
async fn owned_by_a_role() -> (TestDb, RelayRole) {
    let db = TestDb::partitioned(Granularity::Daily).await;
    let role = RelayRole::create(&db).await;
    db.give_tables_to(role.name()).await;
    (db, role)
}

/// Each partition of `outbox_events` (attached or not) with its owner, by name.
async fn owners(db: &TestDb) -> Vec<(String, String, bool)> {
    db.connect()
        .await
        .query(
            "SELECT c.relname::text, pg_get_userbyid(c.relowner)::text,
                    EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid)
               FROM pg_class c
              WHERE c.relkind = 'r' AND c.relname ~ '^outbox_events_p'
              ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

fn maintain(url: &str) -> Command {
    let mut cmd = outbox(url);
    cmd.args(["partitions", "maintain"]);
    cmd
}

#[tokio::test]
async fn after_a_superusers_maintenance_the_owner_still_carves_the_tail() {
    let (db, role) = owned_by_a_role().await;
    // A period passes (one more partition ahead): a superuser maintains once, then the owner.
    db.execute("UPDATE outbox_partitioning SET ahead = ahead + 1")
        .await;
    succeeds(&mut maintain(&db.url()));
    db.execute("UPDATE outbox_partitioning SET ahead = ahead + 1")
        .await;
    let out = succeeds(&mut maintain(&role.url(&db)));
    assert!(out.contains("created 1 partitions ahead"), "{out}");
    let owners = owners(&db).await;
    for (name, owner, attached) in &owners {
        assert_eq!(owner, role.name(), "{name}: {owners:?}");
        assert!(attached, "{name} is attached: {owners:?}");
    }
    assert!(
        owners.iter().any(|(n, ..)| n == "outbox_events_p_tail"),
        "{owners:?}"
    );
}

#[tokio::test]
async fn partitions_the_maintainer_cannot_act_for_are_refused_before_anything_changes() {
    let (db, role) = owned_by_a_role().await;
    // A partition made by a superuser's maintenance before migration V9.
    db.execute("ALTER TABLE outbox_events_p_tail OWNER TO postgres")
        .await;
    db.execute("UPDATE outbox_partitioning SET ahead = ahead + 1")
        .await;
    let before = owners(&db).await;
    let out = maintain(&role.url(&db)).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("outbox_events_p_tail (owned by postgres)")
            && err.contains("run `outbox partitions maintain` once as a superuser"),
        "{err}"
    );
    assert_eq!(owners(&db).await, before, "nothing changed");

    // A superuser's run gives the tail to the owner; the owner's runs work again.
    succeeds(&mut maintain(&db.url()));
    db.execute("UPDATE outbox_partitioning SET ahead = ahead + 1")
        .await;
    let out = succeeds(&mut maintain(&role.url(&db)));
    assert!(out.contains("created 1 partitions ahead"), "{out}");
    assert!(
        owners(&db)
            .await
            .iter()
            .all(|(_, owner, attached)| owner == role.name() && *attached),
        "{:?}",
        owners(&db).await
    );
}
