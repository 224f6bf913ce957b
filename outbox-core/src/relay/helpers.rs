//! The relay's helper tasks (LISTEN, waiting, metrics, housekeeping): they run beside the
//! workers, each under a name, and one that dies is noticed.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use tokio::task::{Id, JoinSet};

use super::guard::panic_message;
use crate::error::{Error, ErrorKind};

/// The helper tasks of one [`Relay::run`](super::Relay::run).
#[derive(Default)]
pub(super) struct HelperTasks {
    set: JoinSet<()>,
    names: HashMap<Id, &'static str>,
}

impl HelperTasks {
    /// Starts `task` as the helper `name`.
    pub(super) fn spawn(
        &mut self,
        name: &'static str,
        task: impl Future<Output = ()> + Send + 'static,
    ) {
        let handle = self.set.spawn(task);
        self.names.insert(handle.id(), name);
    }

    /// Waits until a helper dies (a panic) and says which and why. Helpers that return (on
    /// shutdown, or with nothing to do) are let go; with none left this never returns.
    pub(super) async fn first_death(&mut self) -> Error {
        loop {
            match self.set.join_next_with_id().await {
                None => return std::future::pending().await,
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    let name = self.names.get(&e.id()).copied().unwrap_or("helper");
                    // The kind's name says "panicked" in front of the message.
                    let message = match e.try_into_panic() {
                        Ok(payload) => {
                            format!(
                                "the relay's {name} task: {}",
                                panic_message(payload.as_ref())
                            )
                        }
                        Err(_) => format!("the relay's {name} task was cancelled"),
                    };
                    return Error::new(ErrorKind::Panic, message);
                }
            }
        }
    }

    /// Waits up to `grace` for the helpers to stop (their token cancelled), then aborts the rest.
    pub(super) async fn finish(mut self, grace: Duration) {
        let drained = tokio::time::timeout(grace, async {
            while self.set.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            self.set.abort_all();
            while self.set.join_next().await.is_some() {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_helper_that_panics_is_named_and_one_that_returns_is_let_go() {
        let mut tasks = HelperTasks::default();
        tasks.spawn("quiet", async {});
        tasks.spawn("housekeeping", async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            panic!("injected helper panic");
        });
        let died = tokio::time::timeout(Duration::from_secs(5), tasks.first_death())
            .await
            .expect("the death is noticed");
        assert_eq!(died.kind(), ErrorKind::Panic);
        assert_eq!(
            died.to_string(),
            "panicked: the relay's housekeeping task: injected helper panic"
        );
        // Nothing else dies: waiting goes on.
        assert!(
            tokio::time::timeout(Duration::from_millis(100), tasks.first_death())
                .await
                .is_err()
        );
        tasks.finish(Duration::from_secs(1)).await;
    }
}
