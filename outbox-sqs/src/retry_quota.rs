//! The retry quota of the AWS SDKs' standard retry mode, for the direct transport: retries draw
//! from a bucket of tokens shared by every call of one client, so that when SQS fails most calls
//! (an outage, an overloaded endpoint) each call is tried once instead of `max_attempts` times —
//! the client does not multiply the load on a service that is already failing. The circuit
//! breaker stops calls to one broken queue; this stops retry storms across all of them.
//!
//! The figures are the SDKs' own: 500 tokens; a retry costs 5, or 10 after no answer at all
//! (a timeout or a lost connection); a call that succeeds gives back what its retries took, and
//! one that succeeds at its first attempt adds 1 token, up to the 500.

use std::sync::atomic::{AtomicU32, Ordering};

/// Tokens in a full bucket.
const CAPACITY: u32 = 500;
/// What a retry after an error answer costs.
const RETRY_COST: u32 = 5;
/// What a retry after no answer costs.
const NO_ANSWER_RETRY_COST: u32 = 10;
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

    /// Takes the cost of one retry (after no answer at all when `no_answer`): the tokens taken,
    /// or `None` when too few are left — the call is not retried.
    pub(crate) fn take_retry(&self, no_answer: bool) -> Option<u32> {
        let cost = if no_answer {
            NO_ANSWER_RETRY_COST
        } else {
            RETRY_COST
        };
        self.tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| t.checked_sub(cost))
            .ok()
            .map(|_| cost)
    }

    /// A call succeeded after its retries took `taken` tokens: they are given back, or, when it
    /// needed no retry, one token is added.
    pub(crate) fn succeeded(&self, taken: u32) {
        let add = if taken == 0 {
            NO_RETRY_INCREMENT
        } else {
            taken
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
        // A call that succeeds after retries gives their tokens back; never above the capacity.
        q.succeeded(NO_ANSWER_RETRY_COST);
        assert_eq!(q.tokens(), NO_ANSWER_RETRY_COST);
        for _ in 0..(2 * CAPACITY) {
            q.succeeded(0);
        }
        assert_eq!(q.tokens(), CAPACITY);
    }
}
