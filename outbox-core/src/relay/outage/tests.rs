use super::*;

#[test]
fn one_warning_a_reminder_a_minute_and_one_recovery_line() {
    let o = Outage::default();
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    assert_eq!(o.succeeded_at(t0, true, false), Report::Fine);
    assert_eq!(o.failed_at(t0, true), Report::Started);
    // Four workers failing with back-off for 23 s: no more warnings.
    for i in 1..40 {
        assert_eq!(o.failed_at(at(i * 500), true), Report::Quiet, "{i}");
    }
    // A worker that claims nothing (the others hold the events) proves nothing of SQS.
    assert_eq!(o.succeeded_at(at(30_000), false, true), Report::Quiet);
    assert_eq!(
        o.failed_at(at(61_000), true),
        Report::StillFailing {
            for_: Duration::from_secs(61),
            batches: 41
        }
    );
    assert_eq!(o.failed_at(at(62_000), true), Report::Quiet);
    assert_eq!(
        o.succeeded_at(at(70_000), true, false),
        Report::Recovered {
            after: Duration::from_secs(70),
            batches: 42,
            warned: true
        }
    );
    assert_eq!(o.succeeded_at(at(71_000), true, false), Report::Fine);
}

#[test]
fn a_database_outage_ends_with_any_claim_a_publisher_outage_with_a_publish() {
    let o = Outage::default();
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    assert_eq!(o.failed_at(t0, false), Report::Started);
    assert_eq!(
        o.succeeded_at(at(1), false, true),
        Report::Recovered {
            after: Duration::from_secs(1),
            batches: 1,
            warned: true
        }
    );
    // The publisher failed once in this outage, then the database: still the publisher's until
    // something is published.
    assert_eq!(o.failed_at(at(100), true), Report::Started);
    assert_eq!(o.failed_at(at(101), false), Report::Quiet);
    assert_eq!(o.succeeded_at(at(102), false, true), Report::Quiet);
    assert!(matches!(
        o.succeeded_at(at(103), true, false),
        Report::Recovered { .. }
    ));
}

/// Batches that fail and succeed by turns (a topic down while a queue works, one event per batch)
/// warn once a minute, not once per event.
#[test]
fn outages_by_turns_warn_once_a_minute() {
    let o = Outage::default();
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    assert_eq!(o.failed_at(t0, true), Report::Started);
    assert!(matches!(
        o.succeeded_at(at(1), true, false),
        Report::Recovered { .. }
    ));
    for s in 2..60 {
        assert_eq!(o.failed_at(at(s), true), Report::Quiet, "{s}");
        assert_eq!(o.succeeded_at(at(s), true, false), Report::Quiet, "{s}");
    }
    assert_eq!(o.failed_at(at(61), true), Report::Started);
}

/// An outage that starts less than a minute after another's warning is quiet at first, but not
/// for more than a minute after that warning, and says that it ended when it lasted a while
/// (black-box run: a minute's stall 15 s after a short outage logged nothing at all).
#[test]
fn an_outage_soon_after_another_is_told_within_a_minute_of_the_last_warning() {
    let o = Outage::default();
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    assert_eq!(o.failed_at(t0, false), Report::Started);
    assert!(matches!(
        o.succeeded_at(at(1), false, true),
        Report::Recovered { .. }
    ));
    assert_eq!(o.failed_at(at(15), false), Report::Quiet);
    for s in 16..60 {
        assert_eq!(o.failed_at(at(s), false), Report::Quiet, "{s}");
    }
    assert_eq!(
        o.failed_at(at(60), false),
        Report::StillFailing {
            for_: Duration::from_secs(45),
            batches: 46
        }
    );
    assert!(matches!(
        o.succeeded_at(at(61), false, true),
        Report::Recovered { .. }
    ));
    // Not warned, but 20 s long: its end is told.
    assert_eq!(o.failed_at(at(70), false), Report::Quiet);
    assert_eq!(
        o.succeeded_at(at(90), false, true),
        Report::Recovered {
            after: Duration::from_secs(20),
            batches: 1,
            warned: false
        }
    );
    // Short and not warned: quiet.
    assert_eq!(o.failed_at(at(95), false), Report::Quiet);
    assert_eq!(o.succeeded_at(at(96), false, true), Report::Quiet);
}

#[test]
fn put_back_events_are_counted_in_a_line_a_minute() {
    let o = Outage::default();
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    assert_eq!(o.deferred_at(t0, 100), Some(100));
    for s in 1..60 {
        assert_eq!(o.deferred_at(at(s), 10), None, "{s}");
    }
    assert_eq!(o.deferred_at(at(60), 10), Some(600));
}

/// The last events put back are not left uncounted until the next line: a batch that sends and
/// puts none back, once none has been put back for a while, ends it with their count; at most
/// once a minute.
#[test]
fn putting_back_ends_with_a_line_counting_the_rest() {
    let o = Outage::new(Duration::ZERO, Duration::from_secs(10));
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    assert_eq!(o.sent_at(t0, true), None, "nothing was put back");
    assert_eq!(o.deferred_at(t0, 100), Some(100));
    assert_eq!(o.deferred_at(at(5), 7), None);
    // A destination still down puts its events back every few seconds; healthy events sent in
    // between do not end it (a reviewer saw the end line seconds after the warning).
    assert_eq!(o.sent_at(at(7), true), None);
    assert_eq!(o.deferred_at(at(10), 2), None);
    assert_eq!(o.sent_at(at(19), true), None);
    assert_eq!(
        o.sent_at(at(20), true),
        Some(9),
        "the end, with the 9 not logged yet"
    );
    assert_eq!(o.sent_at(at(21), true), None, "ended once");
    // Failing again within the minute: counted quietly; its end waits for the minute, with them.
    assert_eq!(o.deferred_at(at(30), 3), None);
    assert_eq!(o.sent_at(at(45), true), None);
    assert_eq!(o.sent_at(at(80), true), Some(3));
    // A minute after the last warning: a warning again, then its end.
    assert_eq!(o.deferred_at(at(90), 2), Some(2));
    assert_eq!(o.sent_at(at(140), true), Some(0));
}

/// Events put back until their destination's limit and then dead-lettered were not sent: no
/// batch published since, so no line says they are sent again (black-box run: `events are sent
/// again` while the queue was still gone and nothing had been sent). The next batch that
/// publishes ends it.
#[test]
fn events_dead_lettered_after_being_put_back_are_not_sent_again() {
    let o = Outage::new(Duration::ZERO, Duration::from_secs(10));
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    assert_eq!(o.deferred_at(t0, 10), Some(10));
    // Their batch dead-letters them (nothing put back, nothing published), then claims are empty.
    assert_eq!(o.sent_at(at(5), false), None);
    assert_eq!(o.sent_at(at(20), false), None);
    assert_eq!(o.sent_at(at(200), false), None);
    // Sent before the quiet period is over: the line waits for it, then says so.
    assert_eq!(o.sent_at(at(205), true), Some(0));
    assert_eq!(o.sent_at(at(300), true), None, "ended once");
    // Published within the quiet period, then an empty claim after it: the end line.
    assert_eq!(o.deferred_at(at(400), 4), Some(4));
    assert_eq!(o.sent_at(at(402), true), None);
    assert_eq!(o.sent_at(at(411), false), Some(0));
}

/// A publish over its time limit fails with `Timeout`, as a claim over its own can: the batch
/// marks the error the publisher's (on the error, not in state shared by the workers, which
/// another worker's failure could take), and a claim that finds nothing does not end it.
#[test]
fn a_publish_time_out_is_the_publishers() {
    use crate::error::{Error, ErrorKind};
    assert!(!Error::new(ErrorKind::Timeout, "claim").is_publishers());
    assert!(
        Error::new(ErrorKind::Timeout, "publish")
            .publishers()
            .is_publishers()
    );
    assert!(Error::new(ErrorKind::Publish, "publish").is_publishers());
    let o = Outage::default();
    let t0 = Instant::now();
    assert_eq!(o.failed_at(t0, true), Report::Started);
    assert_eq!(
        o.succeeded_at(t0 + Duration::from_secs(1), false, true),
        Report::Quiet
    );
    assert!(matches!(
        o.succeeded_at(t0 + Duration::from_secs(2), true, false),
        Report::Recovered { .. }
    ));
}

/// An outage that starts with a claim waiting on a silent database is dated from that claim.
#[test]
fn an_outage_is_dated_from_the_start_of_its_first_batch() {
    let o = Outage::default();
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    assert_eq!(o.failed_between(t0, at(35), false), Report::Started);
    assert_eq!(
        o.succeeded_at(at(40), true, false),
        Report::Recovered {
            after: Duration::from_secs(40),
            batches: 1,
            warned: true
        }
    );
}

/// After a publisher outage, a relay whose claims find nothing (another relay published the
/// backlog) ends it once no batch has failed for a while, dated by its last failure.
#[test]
fn a_publisher_outage_ends_after_a_quiet_while_of_empty_claims() {
    let o = Outage::default();
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    assert_eq!(o.failed_at(t0, true), Report::Started);
    assert_eq!(o.failed_at(at(20), true), Report::Quiet);
    // A batch that claimed events and published none (put back) proves nothing, quiet or not.
    assert_eq!(
        o.succeeded_at(at(20) + QUIET_END, false, false),
        Report::Quiet
    );
    assert_eq!(o.succeeded_at(at(30), false, true), Report::Quiet);
    assert_eq!(
        o.succeeded_at(at(20) + QUIET_END, false, true),
        Report::Recovered {
            after: Duration::from_secs(20),
            batches: 2,
            warned: true
        }
    );
}

/// With a long publish timeout a batch can hang on a silent broker longer than the least quiet
/// while: the empty claims of the other workers (the hanging batch holds the events) end nothing
/// before the relay's own quiet while.
#[test]
fn the_quiet_while_outlasts_the_relays_longest_batch() {
    let o = Outage::new(Duration::from_secs(95), Duration::ZERO);
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    assert_eq!(o.failed_at(t0, true), Report::Started);
    assert_eq!(o.succeeded_at(at(60), false, true), Report::Quiet);
    assert!(matches!(
        o.succeeded_at(at(100), false, true),
        Report::Recovered { .. }
    ));
}

/// A connection dropped again and again (an idle timeout) warns once a minute, and says it is
/// back only after a loss it warned about.
#[test]
fn a_connection_that_keeps_dropping_warns_once_a_minute() {
    let mut r = Reconnects::up_to(Duration::from_secs(30));
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    assert!(r.failed_at(t0).1, "the first loss");
    assert!(!r.failed_at(at(1)).1, "a failed reconnect");
    assert!(r.connected(), "back after a loss warned about");
    for s in 2..60 {
        assert!(!r.failed_at(at(s)).1, "{s}");
        assert!(!r.connected(), "{s}");
    }
    assert!(r.failed_at(at(61)).1);
    assert!(r.connected());
}

/// A failed batch's line names the cause at the bottom of its error's chain (a pool's TLS failure
/// said "error performing TLS handshake", not why: black-box run).
#[test]
fn a_failed_batch_is_logged_with_its_whole_chain() {
    #[derive(Debug)]
    struct Handshake(std::io::Error);
    impl std::fmt::Display for Handshake {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("error performing TLS handshake")
        }
    }
    impl std::error::Error for Handshake {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    let logs = outbox_tests::LogCapture::default();
    let _g = logs.install();
    let cause = std::io::Error::other("invalid peer certificate: UnknownIssuer");
    let e = Error::new(
        crate::error::ErrorKind::Pool,
        "could not get a connection from the pool",
    )
    .with_source(Handshake(cause));
    Outage::default().failed(&e, Instant::now(), 1, Duration::from_millis(100), false);
    let text = logs.text();
    assert!(
        text.contains("error performing TLS handshake: invalid peer certificate: UnknownIssuer"),
        "{text}"
    );
}

/// A batch that began during an outage and fails just after it ended (it waited out the silent
/// database) belongs to that outage: no new one, and no second line saying batches succeed again.
#[test]
fn a_batch_failing_late_after_the_recovery_opens_no_new_outage() {
    let o = Outage::default();
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    assert_eq!(o.failed_at(t0, false), Report::Started);
    assert!(matches!(
        o.succeeded_at(at(40_000), true, false),
        Report::Recovered { warned: true, .. }
    ));
    for (began, failed) in [(10_000, 40_050), (20_000, 40_100)] {
        assert_eq!(
            o.failed_between(at(began), at(failed), false),
            Report::Quiet
        );
        assert_eq!(o.succeeded_at(at(failed + 50), true, false), Report::Fine);
    }
    // A batch begun after the recovery that fails is a new outage (told within the minute of
    // the last warning, so quietly; its end says so once it has lasted).
    assert_eq!(
        o.failed_between(at(41_000), at(41_500), false),
        Report::Quiet
    );
    assert!(matches!(
        o.succeeded_at(at(60_000), true, false),
        Report::Recovered { warned: false, .. }
    ));
}
