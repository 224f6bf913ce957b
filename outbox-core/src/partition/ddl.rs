//! The two statements of partition maintenance that are not generated queries.
//!
//! `ALTER TABLE … DETACH PARTITION … CONCURRENTLY` cannot run inside a transaction block, so
//! neither inside a plpgsql function (migration V4 holds the rest of the DDL) nor as a prepared
//! statement with a parameter (DDL takes no bind parameters): it is sent as simple-query text,
//! naming a partition that the catalog (through V4's `outbox_partition_list`) gave us and that is
//! checked against the layout's naming pattern first. `FINALIZE` completes a concurrent detach that
//! was interrupted. This module is the only place the outbox builds SQL text.

use crate::error::{Error, ErrorKind};

/// Whether `name` is one of the layout's partitions (`outbox_events_p` and lowercase letters,
/// digits or `_`): the only names this module will put into a statement.
fn is_partition_name(name: &str) -> bool {
    name.strip_prefix("outbox_events_p").is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    })
}

fn checked(name: &str) -> Result<&str, Error> {
    if is_partition_name(name) {
        Ok(name)
    } else {
        Err(Error::new(
            ErrorKind::Config,
            format!("refusing to detach `{name}`: not an outbox partition"),
        ))
    }
}

/// `DETACH PARTITION name CONCURRENTLY`: takes SHARE UPDATE EXCLUSIVE on `outbox_events` (writers
/// and relays go on) and waits for the transactions that may still see the partition.
pub(crate) async fn detach_concurrently(
    client: &tokio_postgres::Client,
    name: &str,
) -> Result<(), Error> {
    let name = checked(name)?;
    client
        .batch_execute(&format!(
            "ALTER TABLE outbox_events DETACH PARTITION {name} CONCURRENTLY"
        ))
        .await?;
    Ok(())
}

/// `DETACH PARTITION name FINALIZE`: completes a concurrent detach that was cancelled or whose
/// session died.
pub(crate) async fn finalize_detach(
    client: &tokio_postgres::Client,
    name: &str,
) -> Result<(), Error> {
    let name = checked(name)?;
    client
        .batch_execute(&format!(
            "ALTER TABLE outbox_events DETACH PARTITION {name} FINALIZE"
        ))
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_partition_names_pass() {
        for ok in [
            "outbox_events_p20261130",
            "outbox_events_p_tail",
            "outbox_events_p_head",
        ] {
            assert!(is_partition_name(ok), "{ok}");
        }
        for bad in [
            "outbox_events",
            "outbox_events_p",
            "outbox_events_p1; DROP TABLE x",
            "outbox_events_pX",
            "processed_events",
        ] {
            assert!(!is_partition_name(bad), "{bad}");
        }
    }
}
