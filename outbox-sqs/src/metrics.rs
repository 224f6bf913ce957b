//! The publisher's own Prometheus metrics: which queues are unavailable (circuit breaker open).
//!
//! | name | type | meaning |
//! |---|---|---|
//! | `outbox_sqs_queue_unavailable{queue}` | gauge | 1 while the queue's circuit breaker is open, else 0 |

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabel {
    queue: String,
}

/// The registry of the publisher's metrics and the gauge family in it.
pub(crate) struct SqsMetrics {
    registry: Registry,
    unavailable: Family<QueueLabel, Gauge>,
}

impl SqsMetrics {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::default();
        let unavailable = Family::<QueueLabel, Gauge>::default();
        registry.register(
            "outbox_sqs_queue_unavailable",
            "1 while the queue's circuit breaker is open (it failed as a whole and has not \
             answered normally since), else 0",
            unavailable.clone(),
        );
        SqsMetrics {
            registry,
            unavailable,
        }
    }

    /// The gauge of queue `url` (shown as 0 from now on).
    pub(crate) fn unavailable(&self, url: &str) -> Gauge {
        self.unavailable
            .get_or_create(&QueueLabel {
                queue: url.to_owned(),
            })
            .clone()
    }

    /// The metrics in the text exposition format (OpenMetrics, ending in `# EOF`).
    pub(crate) fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail; an empty answer would be the only consequence.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
