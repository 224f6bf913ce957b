//! W3C trace context carried through the outbox: `emit` stores the caller's `traceparent` in the
//! event's metadata and publishers send it as a message attribute, so a trace continues from the
//! transaction that wrote the event to the consumer that reads it.
//!
//! A caller sets the trace context for a scope with [`with_traceparent`] (e.g. in a request
//! middleware, from the incoming `traceparent` header). With the `opentelemetry` cargo feature,
//! `emit` otherwise takes it from the current OpenTelemetry context (`opentelemetry::Context::current()`)
//! when that holds a valid span.
//!
//! With the `opentelemetry` feature, [`with_traceparent`] also makes the `traceparent`'s span the
//! current OpenTelemetry context's remote parent for the scope: spans an OpenTelemetry tracer
//! starts inside it (and the events emitted inside those spans) belong to the producer's trace.
//! That is how `outbox_sqs::Consumer` continues the producer's trace in a handler. With
//! `tracing-opentelemetry`, make a `tracing` span a child of it with
//! `span.set_parent(remote_context(traceparent))` (see `remote_context`, with the feature).

use std::future::Future;

use crate::message::METADATA_TRACEPARENT;

tokio::task_local! {
    static TRACEPARENT: String;
}

/// Runs `future` with `traceparent` as the current W3C trace context: every event emitted inside it
/// carries it. An invalid value (not `version-traceid-spanid-flags` in lowercase hex) is ignored.
///
/// With the `opentelemetry` feature, a valid `traceparent` becomes the remote parent of the current
/// OpenTelemetry context while `future` runs (`remote_context`): spans started inside are
/// children of the producer's span, and an event emitted inside such a span carries the span's own
/// trace context.
pub async fn with_traceparent<F: Future>(traceparent: impl Into<String>, future: F) -> F::Output {
    let traceparent = traceparent.into();
    #[cfg(feature = "opentelemetry")]
    if let Some(context) = remote_context(&traceparent) {
        use opentelemetry::context::FutureExt;
        return future.with_context(context).await;
    }
    TRACEPARENT.scope(traceparent, future).await
}

/// The current OpenTelemetry context with `traceparent`'s span as its remote parent, or `None`
/// when `traceparent` is not a valid W3C `traceparent`. (Feature `opentelemetry`.)
///
/// Useful with `tracing-opentelemetry`: `tracing::Span::current().set_parent(context)` links a
/// `tracing` span to the producer's trace.
#[cfg(feature = "opentelemetry")]
pub fn remote_context(traceparent: &str) -> Option<opentelemetry::Context> {
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    let mut parts = valid_traceparent(traceparent)?.split('-').skip(1);
    let trace_id = TraceId::from_hex(parts.next()?).ok()?;
    let span_id = SpanId::from_hex(parts.next()?).ok()?;
    let flags = u8::from_str_radix(parts.next()?, 16).ok()?;
    let span = SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags),
        true,
        TraceState::default(),
    );
    Some(opentelemetry::Context::current().with_remote_span_context(span))
}

/// The current valid W3C `traceparent`: the one set with [`with_traceparent`], else (with the
/// `opentelemetry` feature) the current OpenTelemetry span's.
pub fn current_traceparent() -> Option<String> {
    TRACEPARENT
        .try_with(|tp| valid_traceparent(tp).map(str::to_owned))
        .ok()
        .flatten()
        .or_else(opentelemetry_traceparent)
}

#[cfg(feature = "opentelemetry")]
fn opentelemetry_traceparent() -> Option<String> {
    use opentelemetry::trace::TraceContextExt;
    let context = opentelemetry::Context::current();
    let span = context.span();
    let sc = span.span_context();
    sc.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        )
    })
}

#[cfg(not(feature = "opentelemetry"))]
fn opentelemetry_traceparent() -> Option<String> {
    None
}

/// The metadata `emit` stores with an event: the trace context when there is one.
pub(crate) fn current_metadata() -> serde_json::Value {
    let mut metadata = serde_json::Map::new();
    if let Some(tp) = current_traceparent() {
        metadata.insert(METADATA_TRACEPARENT.to_string(), tp.into());
    }
    serde_json::Value::Object(metadata)
}

/// The W3C `traceparent` `tp` as a version-00 reader takes it: `version-traceid-spanid-flags`
/// (2, 32, 16 and 2 lowercase hex digits, ids not all zero, version not `ff`), or `None` when it
/// is not one. A later version may append fields (`-…`): as the specification asks, they are
/// cut off and the first 55 characters read.
///
/// ```
/// use outbox_core::trace::valid_traceparent;
/// let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
/// assert_eq!(valid_traceparent(tp), Some(tp));
/// let later = "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-comes";
/// assert_eq!(valid_traceparent(later), Some(&later[..55]));
/// assert_eq!(valid_traceparent("garbage"), None);
/// ```
pub fn valid_traceparent(tp: &str) -> Option<&str> {
    const LEN: usize = 55;
    let head = tp.get(..2)?;
    let tp = match tp.len() {
        LEN => tp,
        // Version 00 has exactly these fields; a later one may add some after a dash.
        n if n > LEN && head != "00" && tp.as_bytes()[LEN] == b'-' => tp.get(..LEN)?,
        _ => return None,
    };
    let parts: Vec<&str> = tp.split('-').collect();
    let hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    (parts.len() == 4
        && hex(parts[0], 2)
        && parts[0] != "ff"
        && hex(parts[1], 32)
        && parts[1].bytes().any(|b| b != b'0')
        && hex(parts[2], 16)
        && parts[2].bytes().any(|b| b != b'0')
        && hex(parts[3], 2))
    .then_some(tp)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TP: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn validates_the_w3c_format() {
        assert_eq!(valid_traceparent(TP), Some(TP));
        for invalid in [
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "garbage",
        ] {
            assert_eq!(valid_traceparent(invalid), None, "{invalid}");
        }
        // A later version's extra fields are cut off; version 00 has none, ff is invalid.
        let later = format!("cc{}-extra", &TP[2..]);
        assert_eq!(valid_traceparent(&later), Some(&later[..55]));
        assert_eq!(valid_traceparent(&format!("{TP}-extra")), None);
        assert_eq!(valid_traceparent(&format!("cc{}extra", &TP[2..])), None);
        assert_eq!(valid_traceparent(&format!("ff{}", &TP[2..])), None);
        assert_eq!(valid_traceparent("é"), None);
        assert_eq!(valid_traceparent(&"é".repeat(40)), None);
    }

    #[tokio::test]
    async fn metadata_carries_the_scoped_trace_context() {
        assert_eq!(current_metadata(), serde_json::json!({}));
        let inside = with_traceparent(TP, async { current_metadata() }).await;
        assert_eq!(inside, serde_json::json!({ "traceparent": TP }));
        let invalid = with_traceparent("nope", async { current_metadata() }).await;
        assert_eq!(invalid, serde_json::json!({}));
    }

    #[cfg(feature = "opentelemetry")]
    #[test]
    fn the_current_opentelemetry_span_is_the_fallback() {
        use opentelemetry::trace::{
            SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
        };
        let sc = SpanContext::new(
            TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").unwrap(),
            SpanId::from_hex("b7ad6b7169203331").unwrap(),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        );
        let _guard = opentelemetry::Context::current()
            .with_remote_span_context(sc)
            .attach();
        assert_eq!(current_traceparent().as_deref(), Some(TP));
    }

    #[cfg(feature = "opentelemetry")]
    #[tokio::test]
    async fn with_traceparent_makes_the_span_the_remote_opentelemetry_parent() {
        use opentelemetry::trace::TraceContextExt;
        let seen = with_traceparent(TP, async {
            tokio::task::yield_now().await;
            let context = opentelemetry::Context::current();
            let sc = context.span().span_context().clone();
            (
                sc.trace_id().to_string(),
                sc.span_id().to_string(),
                sc.is_remote(),
                sc.is_sampled(),
                current_traceparent(),
            )
        })
        .await;
        assert_eq!(
            seen,
            (
                "0af7651916cd43dd8448eb211c80319c".to_owned(),
                "b7ad6b7169203331".to_owned(),
                true,
                true,
                Some(TP.to_owned())
            )
        );
        // Outside the scope: no span.
        assert_eq!(current_traceparent(), None);
        // Invalid values make no context.
        assert!(remote_context("00-garbage").is_none());
        let unsampled = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
        let context = remote_context(unsampled).expect("valid");
        assert!(!context.span().span_context().is_sampled());
    }
}
