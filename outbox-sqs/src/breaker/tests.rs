//! The breaker's states, clocks and log lines.

use super::*;

const PROBE: Duration = Duration::from_secs(5);
const LIMIT: Duration = Duration::from_secs(60);

fn breaker() -> Breaker {
    Breaker::new("https://sqs/q".into(), PROBE, LIMIT, Gauge::default())
}

#[test]
fn a_topic_is_called_a_topic() {
    let topic = Breaker::new(
        "arn:aws:sns:us-east-1:000000000000:t".into(),
        PROBE,
        LIMIT,
        Gauge::default(),
    );
    let reason = topic.reason(Duration::from_secs(20), true, "NotFound");
    assert!(
        reason.starts_with("SNS topic `arn:aws:sns:us-east-1:000000000000:t` unavailable"),
        "{reason}"
    );
    let reason = breaker().reason(Duration::from_secs(20), false, "x");
    assert!(reason.starts_with("SQS queue `https://sqs/q`"), "{reason}");
}

/// What `f` logs (every level of this crate's targets), as text: on this thread, under
/// `LogCapture` (whose global fallback keeps other test threads from caching a call site as
/// disabled). It set a global subscriber of its own, which failed whenever a `LogCapture` test
/// of this binary had set the fallback first.
fn logged(f: impl FnOnce()) -> String {
    let logs = outbox_tests::LogCapture::default();
    let _guard = logs.install();
    f();
    logs.text()
}

/// Each breaker logs its destination under the field its gauge uses: a bucket's lines said
/// `queue=s3://…`, and a topic's `queue=arn:…`.
#[test]
fn each_kind_of_destination_logs_under_its_own_field() {
    for (url, field) in [
        ("https://sqs/q", "queue=https://sqs/q"),
        (
            "arn:aws:sns:us-east-1:000000000000:t",
            "topic=arn:aws:sns:us-east-1:000000000000:t",
        ),
        ("s3://offload", "bucket=offload"),
    ] {
        let b = Breaker::new(url.into(), PROBE, LIMIT, Gauge::default());
        let t0 = Instant::now();
        let lines = logged(|| {
            b.failed_at(t0, "AccessDenied", false);
            assert_eq!(b.admit_at(t0 + PROBE), Admit::Probe);
            b.succeeded_at(t0 + PROBE);
        });
        assert_eq!(lines.lines().count(), 3, "opened, probed, closed: {lines}");
        for line in lines.lines() {
            assert!(
                line.split_whitespace().any(|token| token == field),
                "{field} in {line}"
            );
            if !url.starts_with("https:") {
                assert!(!line.contains("queue="), "{line}");
            }
        }
    }
}

#[test]
fn closed_until_a_failure_then_refuses_until_the_probe_is_due() {
    let b = breaker();
    let t0 = Instant::now();
    assert_eq!(b.admit_at(t0), Admit::Call);
    assert!(!b.failed_at(t0, "QueueDoesNotExist", false));
    assert!(b.is_open());
    assert_eq!(b.gauge.get(), 1, "the gauge shows it open");
    match b.admit_at(t0 + Duration::from_secs(1)) {
        Admit::Refuse {
            reason,
            dead_letter,
        } => {
            assert!(!dead_letter);
            assert!(reason.contains("QueueDoesNotExist"), "{reason}");
            assert!(reason.contains("https://sqs/q"), "{reason}");
        }
        other => panic!("expected Refuse, got {other:?}"),
    }
    // One probe when due; the others keep being refused until the next interval.
    assert_eq!(b.admit_at(t0 + PROBE), Admit::Probe);
    assert!(matches!(
        b.admit_at(t0 + PROBE + Duration::from_millis(1)),
        Admit::Refuse { .. }
    ));
    assert_eq!(b.admit_at(t0 + PROBE * 2), Admit::Probe);
}

#[test]
fn a_success_closes_it() {
    let b = breaker();
    let t0 = Instant::now();
    b.failed_at(t0, "AccessDenied", false);
    assert_eq!(b.admit_at(t0 + PROBE), Admit::Probe);
    b.succeeded_at(t0 + PROBE);
    assert!(!b.is_open());
    assert_eq!(b.gauge.get(), 0);
    assert_eq!(b.admit_at(t0 + PROBE), Admit::Call);
    // A new failure starts a new open period (the dead-letter clock restarts).
    assert!(!b.failed_at(t0 + LIMIT * 2, "AccessDenied", false));
}

#[test]
fn a_failed_probe_keeps_it_open_and_after_the_limit_events_are_dead_lettered() {
    let b = breaker();
    let t0 = Instant::now();
    b.failed_at(t0, "QueueDoesNotExist", false);
    assert_eq!(b.admit_at(t0 + PROBE), Admit::Probe);
    assert!(!b.failed_at(t0 + PROBE, "KMS.DisabledException", false));
    match b.admit_at(t0 + PROBE + Duration::from_secs(1)) {
        Admit::Refuse { reason, .. } => assert!(reason.contains("KMS.DisabledException")),
        other => panic!("expected Refuse, got {other:?}"),
    }
    // Past the limit: a failed probe dead-letters, and so does a refusal.
    assert!(b.failed_at(t0 + LIMIT, "QueueDoesNotExist", false));
    match b.admit_at(t0 + LIMIT + Duration::from_secs(1)) {
        Admit::Refuse {
            reason,
            dead_letter,
        } => {
            assert!(dead_letter);
            assert!(reason.contains("longer than the limit of 60 s"), "{reason}");
        }
        other => panic!("expected Refuse, got {other:?}"),
    }
}

/// Throttling opens the breaker but never dead-letters: an hour of a shared KMS quota used up
/// dead-lettered every event of the queue, though none was at fault. A failure of another
/// kind starts the clock from its own time.
#[test]
fn throttling_alone_never_dead_letters() {
    let b = breaker();
    let t0 = Instant::now();
    assert!(!b.failed_at(t0, "KMS.ThrottlingException", true));
    assert!(b.is_open());
    assert!(!b.failed_at(t0 + LIMIT * 10, "ThrottlingException", true));
    match b.admit_at(t0 + LIMIT * 10 + Duration::from_secs(1)) {
        Admit::Refuse { dead_letter, .. } => assert!(!dead_letter),
        other => panic!("expected Refuse, got {other:?}"),
    }
    assert!(!b.failed_at(t0 + LIMIT * 11, "AccessDenied", false));
    assert!(!b.failed_at(t0 + LIMIT * 11 + PROBE, "ThrottlingException", true));
    assert!(b.failed_at(t0 + LIMIT * 12, "AccessDenied", false));
}

/// While a probe is under way, the others are put back, never dead-lettered, whatever the clock
/// says: the probe may be finding the destination fixed (black-box run: events retried by an
/// operator once a deleted topic was back were dead-lettered again in the millisecond the probe
/// that closed the breaker was under way). Its failure brings dead-lettering back.
#[test]
fn past_the_limit_nothing_is_dead_lettered_while_a_probe_is_under_way() {
    let b = breaker();
    let t0 = Instant::now();
    b.failed_at(t0, "NotFound", false);
    let later = t0 + LIMIT * 2;
    assert_eq!(b.admit_at(later), Admit::Probe);
    match b.admit_at(later + Duration::from_millis(1)) {
        Admit::Refuse { dead_letter, .. } => assert!(!dead_letter, "the probe may close it"),
        other => panic!("expected Refuse, got {other:?}"),
    }
    assert_eq!(
        b.refusal_at(later + Duration::from_millis(1))
            .map(|(_, dead)| dead),
        Some(false)
    );
    // A refusal answered since (the probe's, or another call's): still broken, dead-lettering
    // again.
    assert!(b.failed_at(later + Duration::from_millis(2), "NotFound", false));
    match b.admit_at(later + Duration::from_millis(3)) {
        Admit::Refuse { dead_letter, .. } => assert!(dead_letter),
        other => panic!("expected Refuse, got {other:?}"),
    }
}

/// A probe that ends without a verdict (a time-out, its caller cancelled) holds dead-lettering
/// off for one probe interval, not for good.
#[test]
fn a_probe_without_a_verdict_holds_dead_lettering_off_for_one_interval_only() {
    let b = breaker();
    let t0 = Instant::now();
    b.failed_at(t0, "NotFound", false);
    let later = t0 + LIMIT * 2;
    assert_eq!(b.admit_at(later), Admit::Probe);
    match b.admit_at(later + PROBE / 2) {
        Admit::Refuse { dead_letter, .. } => assert!(!dead_letter),
        other => panic!("expected Refuse, got {other:?}"),
    }
    assert_eq!(
        b.refusal_at(later + PROBE).map(|(_, dead)| dead),
        Some(true)
    );
}
