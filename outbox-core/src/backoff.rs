//! Backoff policies: pure functions of the attempt count and a random number, so they can be
//! tested on their own. The relay turns a delay into `retry_after = now() + delay` on the database's
//! clock, never the application's.

use std::time::Duration;

/// Exponential backoff with a cap and jitter: the `n`-th retry (counting from 0) waits
/// `min(base · 2ⁿ, cap)`, shortened by up to `jitter` of itself at random, so relays that failed
/// together do not retry together. The delay never exceeds `cap`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    jitter: f64,
}

impl Backoff {
    /// A backoff from `base` doubling up to `cap`, with `jitter` in `0.0..=1.0` (clamped).
    pub fn new(base: Duration, cap: Duration, jitter: f64) -> Self {
        Backoff {
            base,
            cap: cap.max(base),
            jitter: if jitter.is_nan() {
                0.0
            } else {
                jitter.clamp(0.0, 1.0)
            },
        }
    }

    /// The delay before retry number `attempt` (0 = the first retry), given `random` uniform in
    /// `0.0..1.0`.
    pub fn delay(&self, attempt: u32, random: f64) -> Duration {
        let exp = self
            .base
            .checked_mul(1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX))
            .unwrap_or(self.cap)
            .min(self.cap);
        let random = if random.is_nan() {
            0.0
        } else {
            random.clamp(0.0, 1.0)
        };
        let cut = Duration::try_from_secs_f64(exp.as_secs_f64() * self.jitter * random)
            .unwrap_or(exp)
            .min(exp);
        exp - cut
    }

    /// The delay before retry number `attempt`, with a random jitter.
    pub fn delay_random(&self, attempt: u32) -> Duration {
        self.delay(attempt, rand::random::<f64>())
    }
}

/// What the relay does with an event whose publication failed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Disposition {
    /// Retry after this delay (counted from the database's `now()`).
    RetryAfter(Duration),
    /// Give up: dead-letter the event.
    DeadLetter,
}

/// The relay's retry policy: how many attempts an event gets and how long it waits between them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Attempts before an event is dead-lettered (at least 1).
    pub max_attempts: u32,
    /// Delay between attempts.
    pub backoff: Backoff,
}

impl RetryPolicy {
    /// Decides the fate of an event that has failed `attempts_before` times before this failure.
    /// A permanent failure is dead-lettered at once; otherwise the event is dead-lettered when this
    /// failure uses up its last attempt.
    pub fn on_failure(&self, attempts_before: u32, permanent: bool, random: f64) -> Disposition {
        if permanent || attempts_before.saturating_add(1) >= self.max_attempts {
            Disposition::DeadLetter
        } else {
            Disposition::RetryAfter(self.backoff.delay(attempts_before, random))
        }
    }
}

/// Backoff for failures of the infrastructure (database unreachable, broker down as a whole): the
/// delay doubles from `base` up to `cap` while failures continue and starts over after a success.
#[derive(Debug, Clone)]
pub struct InfraBackoff {
    backoff: Backoff,
    failures: u32,
}

impl InfraBackoff {
    /// Doubling from `base` to `cap` with 20 % jitter.
    pub fn new(base: Duration, cap: Duration) -> Self {
        InfraBackoff {
            backoff: Backoff::new(base, cap, 0.2),
            failures: 0,
        }
    }

    /// Records a failure and returns how long to wait before trying again.
    pub fn failed(&mut self) -> Duration {
        let delay = self.backoff.delay_random(self.failures);
        self.failures = self.failures.saturating_add(1);
        delay
    }

    /// Records a success: the next failure waits `base` again.
    pub fn succeeded(&mut self) {
        self.failures = 0;
    }

    /// Consecutive failures so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn doubles_from_base_until_the_cap() {
        let b = Backoff::new(S(1), S(60), 0.0);
        let delays: Vec<u64> = (0..8).map(|n| b.delay(n, 0.5).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60]);
    }

    #[test]
    fn huge_attempt_counts_stay_at_the_cap() {
        let b = Backoff::new(Duration::from_millis(500), S(300), 0.0);
        for n in [31, 32, 64, 1000, u32::MAX] {
            assert_eq!(b.delay(n, 0.0), S(300), "attempt {n}");
        }
        let big = Backoff::new(S(u64::MAX / 2), Duration::MAX, 0.0);
        assert_eq!(big.delay(40, 0.0), Duration::MAX);
    }

    #[test]
    fn jitter_shortens_within_bounds_and_never_exceeds_the_cap() {
        let b = Backoff::new(S(1), S(10), 0.5);
        assert_eq!(b.delay(3, 0.0), S(8));
        assert_eq!(b.delay(3, 1.0), S(4));
        assert_eq!(b.delay(10, 0.0), S(10));
        for i in 0..100 {
            let d = b.delay_random(i % 12);
            assert!(d <= S(10), "{d:?}");
        }
        for i in 0..100 {
            let d = b.delay(3, f64::from(i) / 100.0);
            assert!(d >= S(4) && d <= S(8), "{d:?}");
        }
    }

    #[test]
    fn odd_inputs_are_tamed() {
        let b = Backoff::new(S(10), S(1), 7.0);
        assert_eq!(b.cap, S(10), "cap below base is raised to base");
        assert_eq!(b.delay(0, f64::NAN), S(10));
        assert_eq!(b.delay(0, 1.0), Duration::ZERO, "jitter clamped to 1");
    }

    #[test]
    fn retry_policy_dead_letters_after_max_attempts_or_at_once_when_permanent() {
        let p = RetryPolicy {
            max_attempts: 3,
            backoff: Backoff::new(S(1), S(60), 0.0),
        };
        assert_eq!(p.on_failure(0, false, 0.0), Disposition::RetryAfter(S(1)));
        assert_eq!(p.on_failure(1, false, 0.0), Disposition::RetryAfter(S(2)));
        assert_eq!(p.on_failure(2, false, 0.0), Disposition::DeadLetter);
        assert_eq!(p.on_failure(0, true, 0.0), Disposition::DeadLetter);
        let once = RetryPolicy {
            max_attempts: 1,
            ..p
        };
        assert_eq!(once.on_failure(0, false, 0.0), Disposition::DeadLetter);
    }

    #[test]
    fn infra_backoff_doubles_and_resets() {
        let mut b = InfraBackoff::new(Duration::from_millis(100), S(30));
        let first = b.failed();
        assert!(first <= Duration::from_millis(100) && first >= Duration::from_millis(80));
        for _ in 0..20 {
            assert!(b.failed() <= S(30));
        }
        assert!(b.failed() >= S(24), "reaches the cap");
        b.succeeded();
        assert_eq!(b.failures(), 0);
        assert!(b.failed() <= Duration::from_millis(100));
    }
}
