//! The retry quota of the AWS SDKs' standard retry mode, for the direct transport: retries draw
//! from a bucket of tokens shared by every call of one client, so that when SQS fails most calls
//! (an outage, an overloaded endpoint) each call is tried once instead of `max_attempts` times —
//! the client does not multiply the load on a service that is already failing. The circuit
//! breaker stops calls to one broken queue; this stops retry storms across all of them.
//!
//! The figures and the accounting are the Rust SDK's standard mode (`aws-smithy-runtime`'s
//! `TokenBucket`, which the `sdk` transport uses): 500 tokens; a retry costs 5, or 10 after a
//! transient failure (no answer at all — a timeout, a lost connection — or HTTP 500, 502, 503 or
//! 504). Each retry's tokens replace the previous retry's, which are spent for good; a call that
//! succeeds gives back only its last retry's tokens, and one that succeeds at its first attempt
//! adds 1 token, up to the 500. So a call that needs two retries to succeed still costs tokens:
//! when SQS fails two attempts in three, the quota drains as it does under the SDK.
//! One difference: the SDK shares one bucket among every client of the process for a service
//! and region (its retry partition); this one belongs to one publisher's transport.

use std::sync::atomic::{AtomicU32, Ordering};

/// Tokens in a full bucket.
const CAPACITY: u32 = 500;
/// What a retry after an error answer costs.
const RETRY_COST: u32 = 5;
/// What a retry after a transient failure (no answer, or HTTP 500, 502, 503, 504) costs.
const TRANSIENT_RETRY_COST: u32 = 10;
/// What a call that succeeded at its first attempt adds.
const NO_RETRY_INCREMENT: u32 = 1;

/// One client's retry tokens.
#[derive(Debug)]
pub(crate) struct RetryQuota {
    tokens: AtomicU32,
}

impl RetryQuota {
    /// A full bucket.
    pub(crate) fn new() -> Self {
        RetryQuota {
            tokens: AtomicU32::new(CAPACITY),
        }
    }

    /// Takes the cost of one retry (after a transient failure when `transient`): the tokens
    /// taken, or `None` when too few are left — the call is not retried.
    pub(crate) fn take_retry(&self, transient: bool) -> Option<u32> {
        let cost = if transient {
            TRANSIENT_RETRY_COST
        } else {
            RETRY_COST
        };
        self.tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| t.checked_sub(cost))
            .ok()
            .map(|_| cost)
    }

    /// A call succeeded; its last retry took `last_retry` tokens (0: it needed none). Those are
    /// given back — the tokens of its earlier retries stay spent — or, when it needed no retry,
    /// one token is added.
    pub(crate) fn succeeded(&self, last_retry: u32) {
        let add = if last_retry == 0 {
            NO_RETRY_INCREMENT
        } else {
            last_retry
        };
        let _ = self
            .tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                Some(t.saturating_add(add).min(CAPACITY))
            });
    }

    /// The tokens left.
    #[cfg(test)]
    fn tokens(&self) -> u32 {
        self.tokens.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_stop_when_the_quota_is_spent_and_successes_refill_it() {
        let q = RetryQuota::new();
        let mut retries = 0;
        while q.take_retry(false).is_some() {
            retries += 1;
        }
        assert_eq!(retries, CAPACITY / RETRY_COST);
        // Five successes at the first attempt pay for one retry after an error answer, not yet
        // for one after no answer.
        for _ in 0..5 {
            q.succeeded(0);
        }
        assert_eq!(q.take_retry(true), None);
        assert_eq!(q.take_retry(false), Some(RETRY_COST));
        assert_eq!(q.tokens(), 0);
        // A call that succeeds after retries gives its last retry's tokens back; never above the
        // capacity.
        q.succeeded(TRANSIENT_RETRY_COST);
        assert_eq!(q.tokens(), TRANSIENT_RETRY_COST);
        for _ in 0..(2 * CAPACITY) {
            q.succeeded(0);
        }
        assert_eq!(q.tokens(), CAPACITY);
    }
}
