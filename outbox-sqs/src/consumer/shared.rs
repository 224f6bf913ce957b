//! One run of a consumer: what its receivers and units share — the consumer's settings and
//! clients, the delete batcher, the database's and S3's gates, and the receivers' long polls.

use std::ops::Deref;
use std::sync::Arc;

use aws_sdk_sqs::types::Message;
use outbox_core::CancellationToken;

use super::delete::Deleter;
use super::gate::{self, Gate};
use super::{Inner, payload, polls};

/// The shortest time a database step or probe (see [`Gate`]) is given.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// One run: the consumer, its delete batcher and its view of the database and of S3.
pub(crate) struct Shared {
    pub(super) inner: Arc<Inner>,
    pub(super) deleter: Deleter,
    pub(super) database: Gate,
    /// S3, for offloaded payloads.
    pub(super) offload: Gate,
    /// The receivers' long polls, which a release at shutdown waits out.
    pub(crate) polls: polls::Polls,
}

impl Shared {
    /// A new run of the consumer `inner`: its delete batcher started.
    pub(crate) fn new(inner: Arc<Inner>) -> Self {
        let deleter = Deleter::start(
            inner.client.clone(),
            inner.queue_url.clone(),
            inner.metrics.clone(),
            inner.config.call_timeout,
        );
        Shared {
            inner,
            deleter,
            database: Gate::new(gate::DATABASE),
            offload: Gate::new(gate::S3),
            polls: polls::Polls::default(),
        }
    }

    /// Waits while the database is known to fail (see [`Gate`]); `false` once `token` is
    /// cancelled.
    pub(crate) async fn database_up(&self, token: &CancellationToken) -> bool {
        let timeout = self.database_timeout();
        self.database
            .wait_up(&self.config.name, token, || {
                gate::probe_database(&self.pool, timeout)
            })
            .await
    }

    /// How long a database step (a connection, a statement, a probe) may take: see
    /// [`probe_timeout`](Self::probe_timeout).
    pub(crate) fn database_timeout(&self) -> std::time::Duration {
        self.probe_timeout()
    }

    /// How long a probe of a gate (the database's, S3's) may take: the call time-out, at least
    /// 10 s (`call_timeout` is sized for SQS calls, and a probe cut short while it connects would
    /// never let the gate open: S3 slower than a short call time-out kept offloaded messages
    /// waiting until the consumer was restarted).
    fn probe_timeout(&self) -> std::time::Duration {
        self.config.call_timeout.max(PROBE_TIMEOUT)
    }

    /// Waits, before reading the payload `message` offloaded (nothing to wait for when it carries
    /// its own), while S3 is known to fail (see [`Gate`]); `false` once `token` is cancelled.
    pub(crate) async fn s3_up(&self, message: &Message, token: &CancellationToken) -> bool {
        let Some(bucket) = payload::offloaded_bucket(message) else {
            return true;
        };
        // A bucket the consumer does not read from is refused when the body is read: not probed.
        if !payload::may_read(&self.config.offload_buckets, &bucket) {
            return true;
        }
        let timeout = self.probe_timeout();
        self.offload
            .wait_up(&self.config.name, token, || {
                payload::probe_bucket(&self.s3, &bucket, timeout)
            })
            .await
    }
}

impl Shared {
    /// `hidden`, or once `token` is cancelled — after the receivers' polls have settled — at
    /// least until this consumer's own long polls cut short are over at SQS: a message made
    /// visible before would be taken back by one of them (see `polls.rs`).
    pub(crate) async fn hidden_from_own_polls(
        &self,
        token: &CancellationToken,
        hidden: std::time::Duration,
    ) -> std::time::Duration {
        if token.is_cancelled() {
            self.polls
                .settled(polls::SHUTDOWN_POLL_GRACE + polls::POLL_MARGIN)
                .await;
            hidden.max(self.polls.quiet_in(self.config.wait))
        } else {
            hidden
        }
    }
}

impl Deref for Shared {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}
