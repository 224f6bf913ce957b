//! The direct transport: `SendMessageBatch` (and the start-up check's `GetQueueAttributes`) over
//! one pooled HTTP/1.1 client, the request body
//! written straight from the prepared entries' JSON, signed with SigV4 — the AWS SDK's request
//! pipeline (its orchestrator, interceptors, request types and re-serialisation) left out of the
//! relay's hot path. The SDK still provides the configuration: credentials, region, endpoint and
//! retry settings.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime};

use aws_config::SdkConfig;
use bytes::Bytes;
use http::header::{CONTENT_TYPE, HOST, USER_AGENT};
use http::{HeaderName, HeaderValue, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::capture_connection;
use hyper_util::rt::TokioExecutor;

use crate::answer::BatchAnswer;
use crate::classify::{is_credentials_refused, is_throttling, is_transient_code, normalize};
use crate::endpoint::sqs_endpoint;
use crate::error::{Result, config_error};
use crate::retry_quota::RetryQuota;
use crate::signer::{SignError, Signer};
use crate::sqs_json::{self, GET_QUEUE_ATTRIBUTES_TARGET, SEND_MESSAGE_BATCH_TARGET};

/// The operation's header of the AWS JSON 1.0 protocol.
const X_AMZ_TARGET: HeaderName = HeaderName::from_static("x-amz-target");

/// Asks SQS for the legacy query error codes (`x-amzn-query-error`), as the SDK does.
const X_AMZN_QUERY_MODE: HeaderName = HeaderName::from_static("x-amzn-query-mode");

/// The largest answer read from SQS (a `SendMessageBatch` answer is a few KiB).
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// How long an idle pooled connection is kept.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(50);

/// The standard retry mode's defaults (as `aws-config`'s `RetryConfig::standard()`).
const DEFAULT_MAX_ATTEMPTS: u32 = 3;

/// How long a connection may take to open unless the AWS configuration's timeout settings say
/// otherwise (the SDK's default), so that an unreachable endpoint costs one attempt, not the call.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_millis(3100);

/// Why a direct call failed as a whole.
#[derive(Debug)]
pub(crate) enum DirectError {
    /// SQS answered with an error status.
    Service {
        status: u16,
        code: String,
        message: Option<String>,
    },
    /// SQS answered 2xx with something that is not the operation's answer.
    Unreadable { status: u16, detail: String },
    /// No answer: connection refused, reset, DNS, TLS, a body cut short.
    Transport(Box<dyn std::error::Error + Send + Sync>),
    /// The request could not be signed (no credentials, most often).
    Sign(SignError),
}

impl fmt::Display for DirectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DirectError::Service {
                status,
                code,
                message,
            } => write!(
                f,
                "{code} (HTTP {status}): {}",
                message.as_deref().unwrap_or("")
            ),
            DirectError::Unreadable { status, detail } => write!(f, "HTTP {status}: {detail}"),
            DirectError::Transport(e) => {
                write!(
                    f,
                    "cannot reach SQS: {}",
                    outbox_core::error_chain(e.as_ref())
                )
            }
            DirectError::Sign(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for DirectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DirectError::Transport(e) => Some(e.as_ref()),
            DirectError::Sign(e) => Some(e),
            _ => None,
        }
    }
}

impl DirectError {
    /// Whether the call is worth another attempt at once (what the SDK's standard retry mode
    /// retries): no answer, a server error, throttling or a transient code — or a request time
    /// SQS found too far off its clock (the next attempt is signed with the corrected time).
    fn retryable(&self) -> bool {
        match self {
            DirectError::Transport(_) => true,
            DirectError::Service { status, code, .. } => {
                *status >= 500 || is_transient_code(code) || is_clock_skew(code)
            }
            DirectError::Unreadable { .. } | DirectError::Sign(_) => false,
        }
    }

    /// A transient failure, whose retry costs the retry quota more, as the SDK classifies it: no
    /// answer at all, a request timeout code, or HTTP 500, 502, 503 or 504 without a throttling
    /// code (throttling and every other code cost less).
    fn transient(&self) -> bool {
        match self {
            DirectError::Transport(_) => true,
            DirectError::Service { status, code, .. } => {
                !is_throttling(code)
                    && (matches!(status, 500 | 502 | 503 | 504)
                        || matches!(
                            normalize(code),
                            "RequestTimeout" | "RequestTimeoutException"
                        ))
            }
            DirectError::Unreadable { .. } | DirectError::Sign(_) => false,
        }
    }
}

/// Codes by which AWS says the request's time is too far from its clock.
fn is_clock_skew(code: &str) -> bool {
    matches!(
        normalize(code),
        "RequestTimeTooSkewed" | "RequestExpired" | "InvalidSignatureException"
    )
}

/// `to - from` in milliseconds (negative when `to` is earlier).
/// The most SQS's clock, read from an answer's `Date`, is taken to differ from this machine's:
/// a day. Farther, the date is not a clock to sign by.
const MAX_CLOCK_OFFSET_MS: u64 = 24 * 3600 * 1000;

fn millis_between(from: SystemTime, to: SystemTime) -> i64 {
    match to.duration_since(from) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

/// A `SendMessageBatch` client of its own.
pub(crate) struct DirectSqs {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    endpoint: Uri,
    host: HeaderValue,
    signer: Signer,
    max_attempts: u32,
    initial_backoff: Duration,
    max_backoff: Duration,
    /// The longest one attempt may take (the AWS configuration's `operation_attempt_timeout`).
    attempt_timeout: Option<Duration>,
    /// Retries draw from it: none once SQS failed too many calls of late.
    retry_quota: RetryQuota,
    /// How far SQS's clock is ahead of this machine's, in milliseconds, as learnt from the `Date`
    /// of an answer refusing a request for its time (as the SDK corrects clock skew).
    clock_offset_ms: AtomicI64,
}

impl fmt::Debug for DirectSqs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DirectSqs")
            .field("endpoint", &self.endpoint)
            .field("max_attempts", &self.max_attempts)
            .finish_non_exhaustive()
    }
}

/// TLS with the platform's root certificates (only loaded for an `https://` endpoint).
fn tls_config(https: bool) -> Result<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    if https {
        let found = rustls_native_certs::load_native_certs();
        for cert in found.certs {
            // A certificate the platform store holds but rustls cannot read is skipped, as the
            // SDK's client skips it.
            let _ = roots.add(cert);
        }
        if roots.is_empty() {
            return Err(config_error(
                "no CA certificates found on this system for the SQS endpoint's TLS (install the \
                 ca-certificates package)",
            ));
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| config_error(format!("TLS settings: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

impl DirectSqs {
    /// Its signer (tests).
    #[cfg(test)]
    pub(crate) fn signer(&self) -> &Signer {
        &self.signer
    }

    /// A client for `region` from `sdk` (credentials, endpoint, retry settings), with the
    /// builder's `endpoint_url` and `max_attempts` overrides; its signer starts with `first`, the
    /// credentials the chain just gave, when given.
    pub(crate) async fn new(
        sdk: &SdkConfig,
        region: &str,
        endpoint_url: Option<&str>,
        max_attempts: Option<u32>,
        first: Option<aws_credential_types::Credentials>,
    ) -> Result<Self> {
        let url = sqs_endpoint(sdk, endpoint_url, region).await?;
        let endpoint: Uri = url
            .parse()
            .map_err(|e| config_error(format!("the SQS endpoint `{url}`: {e}")))?;
        let host = endpoint
            .authority()
            .map(|a| a.as_str())
            .and_then(|a| HeaderValue::from_str(a).ok())
            .ok_or_else(|| config_error(format!("the SQS endpoint `{url}` has no host")))?;
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        let timeouts = sdk.timeout_config();
        http.set_connect_timeout(Some(
            timeouts
                .and_then(|t| t.connect_timeout())
                .unwrap_or(DEFAULT_CONNECT_TIMEOUT),
        ));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config(url.starts_with("https://"))?)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .build(connector);
        let retry = sdk.retry_config();
        Ok(DirectSqs {
            client,
            endpoint,
            host,
            signer: Signer::new(sdk.credentials_provider(), region.to_owned(), "sqs")
                .starting_with(first),
            max_attempts: max_attempts
                .or_else(|| retry.map(|r| r.max_attempts()))
                .unwrap_or(DEFAULT_MAX_ATTEMPTS)
                .max(1),
            initial_backoff: retry.map_or(Duration::from_secs(1), |r| r.initial_backoff()),
            max_backoff: retry.map_or(Duration::from_secs(20), |r| r.max_backoff()),
            attempt_timeout: timeouts.and_then(|t| t.operation_attempt_timeout()),
            retry_quota: RetryQuota::new(),
            clock_offset_ms: AtomicI64::new(0),
        })
    }

    /// One `SendMessageBatch` of `entries` (each an entry's JSON) to `queue_url`, retried as the
    /// SDK's standard mode retries (up to `max_attempts`, exponential backoff with full jitter).
    /// The caller bounds the whole with its call timeout.
    pub(crate) async fn send_message_batch<'a>(
        &self,
        queue_url: &str,
        entries: impl Iterator<Item = &'a str>,
    ) -> std::result::Result<BatchAnswer, DirectError> {
        let body = Bytes::from(sqs_json::request_body(queue_url, entries));
        let (status, answer) = self.call(SEND_MESSAGE_BATCH_TARGET, body).await?;
        sqs_json::parse_answer(&answer).map_err(|detail| DirectError::Unreadable { status, detail })
    }

    /// `GetQueueAttributes` of `names` on `queue_url` (the start-up check: it proves that this
    /// transport's own HTTP client, TLS and signing reach the queue, as publishing will need),
    /// retried like [`send_message_batch`](Self::send_message_batch).
    pub(crate) async fn get_queue_attributes(
        &self,
        queue_url: &str,
        names: &[&str],
    ) -> std::result::Result<std::collections::HashMap<String, String>, DirectError> {
        let body = serde_json::json!({ "QueueUrl": queue_url, "AttributeNames": names });
        let (status, answer) = self
            .call(GET_QUEUE_ATTRIBUTES_TARGET, Bytes::from(body.to_string()))
            .await?;
        sqs_json::parse_attributes(&answer)
            .map_err(|detail| DirectError::Unreadable { status, detail })
    }

    /// One call of the operation `target` with `body`, retried as the SDK's standard mode
    /// retries (within its retry quota); the 2xx status and the answer's body.
    async fn call(
        &self,
        target: &'static str,
        body: Bytes,
    ) -> std::result::Result<(u16, Bytes), DirectError> {
        let mut attempt = 1;
        // The retry tokens this call's last retry took (the earlier retries' stay spent).
        let mut last_retry = 0;
        loop {
            let attempt_result = match self.attempt_timeout {
                Some(limit) => tokio::time::timeout(limit, self.attempt(target, body.clone()))
                    .await
                    .unwrap_or_else(|_| {
                        Err(DirectError::Transport(
                            format!("no answer within the attempt timeout ({limit:?})").into(),
                        ))
                    }),
                None => self.attempt(target, body.clone()).await,
            };
            match attempt_result {
                Err(e) if e.retryable() && attempt < self.max_attempts => {
                    // No tokens left: SQS is failing most calls; this one is not retried.
                    let Some(cost) = self.retry_quota.take_retry(e.transient()) else {
                        tracing::debug!(error = %e, "retry quota spent: not retrying this SQS call");
                        return Err(e);
                    };
                    last_retry = cost;
                    let cap = self
                        .initial_backoff
                        .saturating_mul(1 << (attempt - 1).min(16))
                        .min(self.max_backoff);
                    tokio::time::sleep(cap.mul_f64(rand::random::<f64>())).await;
                    attempt += 1;
                }
                Ok(answer) => {
                    self.retry_quota.succeeded(last_retry);
                    return Ok(answer);
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn attempt(
        &self,
        target: &'static str,
        body: Bytes,
    ) -> std::result::Result<(u16, Bytes), DirectError> {
        let mut request = http::Request::post(self.endpoint.clone())
            .header(HOST, self.host.clone())
            .header(
                CONTENT_TYPE,
                HeaderValue::from_static(sqs_json::CONTENT_TYPE),
            )
            .header(X_AMZ_TARGET, HeaderValue::from_static(target))
            .header(X_AMZN_QUERY_MODE, HeaderValue::from_static("true"))
            .header(
                USER_AGENT,
                HeaderValue::from_static(concat!("outbox-sqs/", env!("CARGO_PKG_VERSION"))),
            )
            .body(())
            .map_err(|e| DirectError::Transport(Box::new(e)))?;
        let offset = self.clock_offset_ms.load(Ordering::Relaxed);
        let by = Duration::from_millis(offset.unsigned_abs());
        let now = SystemTime::now();
        let time = if offset >= 0 { now + by } else { now - by };
        self.signer
            .sign(&mut request, &body, time)
            .await
            .map_err(DirectError::Sign)?;
        let (parts, ()) = request.into_parts();
        let mut request = http::Request::from_parts(parts, Full::new(body));
        let connection = capture_connection(&mut request);
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| DirectError::Transport(Box::new(e)))?;
        let status = response.status().as_u16();
        if status >= 500 {
            // A front end that answers with a server error may be the unhealthy one: the next
            // call goes out on a new connection, which may reach another (as the AWS SDK does).
            if let Some(connected) = connection.connection_metadata().as_ref() {
                connected.poison();
            }
        }
        let query_error = response
            .headers()
            .get("x-amzn-query-error")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let server_time = response
            .headers()
            .get(http::header::DATE)
            .and_then(|v| v.to_str().ok())
            .and_then(|d| httpdate::parse_http_date(d).ok());
        let bytes = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(DirectError::Transport)?
            .to_bytes();
        if (200..300).contains(&status) {
            return Ok((status, bytes));
        }
        let (code, message) = sqs_json::parse_error(query_error.as_deref(), &bytes);
        if let Some(server_time) = server_time.filter(|_| is_clock_skew(&code)) {
            let offset = millis_between(SystemTime::now(), server_time);
            if offset.unsigned_abs() > MAX_CLOCK_OFFSET_MS {
                // Not SQS's clock: a date years away signed every later request at a time the
                // signer cannot write, and it panicked (review).
                tracing::warn!(
                    offset_ms = offset,
                    code,
                    "SQS refused the request's time, but its answer's date is more than a day \
                     from this machine's clock: not taken; check the clock"
                );
            } else {
                tracing::warn!(
                    offset_ms = offset,
                    code,
                    "SQS refused the request's time; signing with SQS's clock from now on"
                );
                self.clock_offset_ms.store(offset, Ordering::Relaxed);
            }
        }
        if is_credentials_refused(&code) {
            // Refused credentials may have been rotated (a signature refused for a rotated secret
            // looks like one refused for the time): fetch them again for the next attempt. Not
            // for an access denied, which one queue's policy or key gives.
            self.signer.forget();
        }
        Err(DirectError::Service {
            status,
            code,
            message,
        })
    }
}
