//! Log lines captured in a test: what an operator would read, checked for what it must say (a
//! cause) and must not (a payload, a secret).

use std::io::Write;
use std::sync::{Arc, Mutex};

/// The log lines written under [`install`](Self::install)'s subscriber, as text.
#[derive(Clone, Default)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl Write for LogCapture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl LogCapture {
    /// Captures the outbox crates' own log lines at every level, on the current thread until the
    /// guard is dropped: in a current-thread runtime (`#[tokio::test]`), the tasks it spawns too.
    /// (Not the AWS SDK's: at `trace` it logs whole HTTP responses, bodies included — keep
    /// `aws_smithy_*` at `info` or above in production.)
    pub fn install(&self) -> tracing::subscriber::DefaultGuard {
        use tracing_subscriber::Layer;
        use tracing_subscriber::layer::SubscriberExt;
        let logs = self.clone();
        let ours = tracing_subscriber::filter::Targets::new()
            .with_target("outbox_sqs", tracing::Level::TRACE)
            .with_target("outbox_core", tracing::Level::TRACE);
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(move || logs.clone())
                .with_filter(ours),
        );
        // Threads without a capture (the other tests of the binary, run in parallel) fall back
        // to a global subscriber that keeps nothing: with none, a span or event first met on such
        // a thread had its interest cached as `never` for every thread, and went missing from
        // the captured lines (a span check here failed whenever such a test ran alongside).
        static GLOBAL: std::sync::Once = std::sync::Once::new();
        GLOBAL.call_once(|| {
            // Only this crate's targets, as captured: the AWS SDK's spans are not made for nothing.
            let targets = tracing_subscriber::filter::Targets::new()
                .with_target("outbox_sqs", tracing::Level::TRACE)
                .with_target("outbox_core", tracing::Level::TRACE);
            let _ = tracing::subscriber::set_global_default(
                tracing_subscriber::registry().with(targets),
            );
        });
        tracing::subscriber::set_default(subscriber)
    }

    /// Everything captured so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}
