//! SigV4 signing for the direct transport, with credentials from the AWS configuration's provider
//! (the default chain unless one was given), cached until shortly before they expire.

use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;

use crate::sigv4::{SigningKeys, fast_sign};

/// Credentials are fetched again this long before they expire (or, for credentials that live
/// shorter, after half of what was left of their life when fetched)...
const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(300);
/// ...and are used until this long before they expire (the SDK's identity cache's buffer), also
/// when fetching them again fails: a request is never signed with credentials about to lapse, and a
/// provider's hiccup does not fail calls while the credentials in hand are still good.
const USABLE_UNTIL_EXPIRY: Duration = Duration::from_secs(10);

/// Why a request could not be signed.
#[derive(Debug)]
pub(crate) enum SignError {
    /// No credentials: the provider failed (or none is configured).
    Credentials(CredentialsError),
    /// The request could not be signed (e.g. a header that is not valid text).
    Signing(String),
}

impl fmt::Display for SignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignError::Credentials(e) => {
                write!(
                    f,
                    "no usable AWS credentials: {}",
                    outbox_core::error_chain(e)
                )
            }
            SignError::Signing(e) => write!(f, "cannot sign the request: {e}"),
        }
    }
}

impl std::error::Error for SignError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SignError::Credentials(e) => Some(e),
            SignError::Signing(_) => None,
        }
    }
}

/// After a failed refresh, how long the credentials in hand are used before the provider is asked
/// again (while they are still usable).
const RETRY_REFRESH_AFTER: Duration = Duration::from_secs(10);
/// After a fetch failed with no usable credentials in hand, the requests within this long fail with
/// its error rather than each asking the provider again.
const FAIL_FAST_WINDOW: Duration = Duration::from_secs(1);
/// How long one call of the provider may take (the SDK's identity cache waits as long).
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(5);

/// Signs requests to one service in one region.
pub(crate) struct Signer {
    provider: Option<SharedCredentialsProvider>,
    region: String,
    service: &'static str,
    cached: Mutex<Option<Cached>>,
    /// When fetching credentials last failed with none usable in hand, and why.
    failed: Mutex<Option<(SystemTime, String)>>,
    /// Serialises refreshes: one provider call at a time, not one per batch.
    refreshing: tokio::sync::Mutex<()>,
    /// The signing key of the day, for [`fast_sign`].
    keys: SigningKeys,
}

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signer")
            .field("region", &self.region)
            .field("service", &self.service)
            .finish_non_exhaustive()
    }
}

/// Credentials without an expiry time are fetched again after this long, as the AWS SDK's
/// identity cache does: a rotated profile file or environment is picked up without a restart, and
/// the keys in hand stay in use if fetching fails.
const REFRESH_WITHOUT_EXPIRY: Duration = Duration::from_secs(15 * 60);

/// Credentials in hand, and when to fetch them again.
#[derive(Clone)]
struct Cached {
    credentials: Credentials,
    refresh_at: Option<SystemTime>,
}

impl Cached {
    fn new(credentials: Credentials, now: SystemTime) -> Self {
        let refresh_at = Some(match credentials.expiry() {
            Some(expiry) => {
                let half_left = expiry.duration_since(now).unwrap_or_default() / 2;
                let early = expiry
                    .checked_sub(REFRESH_BEFORE_EXPIRY)
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                early.max(now + half_left)
            }
            // Keys without expiry (a profile file, say) may still be rotated where they come from.
            None => now + REFRESH_WITHOUT_EXPIRY,
        });
        Cached {
            credentials,
            refresh_at,
        }
    }

    /// Not yet due for a refresh.
    fn fresh(&self, now: SystemTime) -> bool {
        self.refresh_at.is_none_or(|at| now < at)
    }

    /// Still good to sign with.
    fn usable(&self, now: SystemTime) -> bool {
        self.credentials
            .expiry()
            .is_none_or(|expiry| expiry > now + USABLE_UNTIL_EXPIRY)
    }
}

impl Signer {
    pub(crate) fn new(
        provider: Option<SharedCredentialsProvider>,
        region: String,
        service: &'static str,
    ) -> Self {
        Signer {
            provider,
            region,
            service,
            cached: Mutex::new(None),
            keys: SigningKeys::default(),
            failed: Mutex::new(None),
            refreshing: tokio::sync::Mutex::new(()),
        }
    }

    /// The same signer, with `credentials` (just given by its provider) cached to begin with.
    pub(crate) fn starting_with(self, credentials: Option<Credentials>) -> Self {
        if let Some(c) = credentials {
            self.store(Cached::new(c, SystemTime::now()));
        }
        self
    }

    fn cached(&self) -> Option<Cached> {
        self.cached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Credentials to sign with at `now`: the cached ones until they are due for a refresh, then
    /// fresh ones from the provider (one call at a time, within [`PROVIDER_TIMEOUT`]). While the
    /// cached ones are still usable, a refresh never holds up other requests (they sign with the
    /// cached ones meanwhile) and a failed one is tried again only after
    /// [`RETRY_REFRESH_AFTER`]: a provider that is down or slow costs one request at most its
    /// time-out per period, instead of queueing every request behind it.
    async fn credentials(&self, now: SystemTime) -> Result<Credentials, SignError> {
        let cached = self.cached();
        let usable = cached.as_ref().filter(|c| c.usable(now));
        if let Some(c) = usable.filter(|c| c.fresh(now)) {
            return Ok(c.credentials.clone());
        }
        let _refresh = match usable {
            Some(c) => match self.refreshing.try_lock() {
                Ok(guard) => guard,
                // Someone else is refreshing: the credentials in hand will do meanwhile.
                Err(_) => return Ok(c.credentials.clone()),
            },
            None => self.refreshing.lock().await,
        };
        let cached = self.cached();
        if let Some(c) = cached.as_ref().filter(|c| c.fresh(now) && c.usable(now)) {
            return Ok(c.credentials.clone());
        }
        match cached.as_ref().filter(|c| c.usable(now)) {
            // The next refresh is put off before this one starts: if this request is dropped
            // (its call timed out) while the provider is slow, the next one does not start
            // another refresh at once.
            Some(c) => self.store(Cached {
                refresh_at: Some(now + RETRY_REFRESH_AFTER),
                ..c.clone()
            }),
            // Nothing to sign with: the requests that queued behind a refresh that just failed
            // fail with its error instead of each asking the provider again.
            None => {
                let failed = self
                    .failed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                let recent = failed
                    .filter(|(at, _)| now.duration_since(*at).is_ok_and(|d| d < FAIL_FAST_WINDOW));
                if let Some((_, error)) = recent {
                    return Err(SignError::Credentials(CredentialsError::not_loaded(error)));
                }
            }
        }
        let Some(provider) = &self.provider else {
            return Err(SignError::Credentials(CredentialsError::not_loaded(
                "no credentials provider in the AWS configuration",
            )));
        };
        let fetched =
            match tokio::time::timeout(PROVIDER_TIMEOUT, provider.provide_credentials()).await {
                Ok(fetched) => fetched,
                Err(_) => Err(CredentialsError::provider_timed_out(PROVIDER_TIMEOUT)),
            };
        // Credentials a header cannot carry fail here, not in aws-sigv4's unwrap (review).
        let fetched = fetched.and_then(|c| match crate::header_text::unsendable(&c) {
            None => Ok(c),
            Some(problem) => Err(CredentialsError::invalid_configuration(problem)),
        });
        match fetched {
            Ok(credentials) => {
                self.store(Cached::new(credentials.clone(), now));
                Ok(credentials)
            }
            Err(e) => match cached.filter(|c| c.usable(now)) {
                Some(c) => {
                    tracing::warn!(
                        error = %outbox_core::error_chain(&e),
                        retry_in_s = RETRY_REFRESH_AFTER.as_secs(),
                        "cannot refresh the AWS credentials; signing with the ones in hand until they near expiry"
                    );
                    Ok(c.credentials)
                }
                None => {
                    *self.failed.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some((now, outbox_core::error_chain(&e)));
                    Err(SignError::Credentials(e))
                }
            },
        }
    }

    fn store(&self, cached: Cached) {
        *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = Some(cached);
    }

    /// Makes the cached credentials due for a refresh (after the service refused them), so the
    /// next request fetches them again; they stay in hand in case the provider fails meanwhile.
    pub(crate) fn forget(&self) {
        if let Some(c) = self
            .cached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            c.refresh_at = Some(SystemTime::UNIX_EPOCH);
        }
    }

    /// Adds the SigV4 headers (`authorization`, `x-amz-date`, and `x-amz-security-token` for
    /// temporary credentials) to `request`, signing its method, URI, headers and `body` as of
    /// `time`.
    pub(crate) async fn sign(
        &self,
        request: &mut http::Request<()>,
        body: &[u8],
        time: SystemTime,
    ) -> Result<(), SignError> {
        let credentials = self.credentials(SystemTime::now()).await?;
        let region = self.region.as_str();
        if let Some(problem) = crate::header_text::unsendable_region(region) {
            return Err(SignError::Signing(problem));
        }
        if fast_sign(
            request,
            body,
            time,
            &credentials,
            region,
            self.service,
            &self.keys,
        )
        .is_some()
        {
            return Ok(());
        }
        general_sign(request, body, time, credentials, region, self.service)
    }
}

/// Signs `request` with `aws-sigv4` (any request; [`fast_sign`] handles the transport's usual one).
pub(crate) fn general_sign(
    request: &mut http::Request<()>,
    body: &[u8],
    time: SystemTime,
    credentials: Credentials,
    region: &str,
    service: &str,
) -> Result<(), SignError> {
    let identity = credentials.into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| SignError::Signing(e.to_string()))?
        .into();
    let mut headers = Vec::with_capacity(request.headers().len());
    for (name, value) in request.headers() {
        let value = value
            .to_str()
            .map_err(|e| SignError::Signing(format!("header `{name}`: {e}")))?;
        headers.push((name.as_str(), value));
    }
    let uri = request.uri().to_string();
    let signable = SignableRequest::new(
        request.method().as_str(),
        &uri,
        headers.into_iter(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| SignError::Signing(e.to_string()))?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| SignError::Signing(e.to_string()))?
        .into_parts();
    instructions.apply_to_request_http1x(request);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Debug)]
    struct Counting {
        calls: Arc<AtomicUsize>,
        expires_in: Option<Duration>,
        /// Calls after this many fail.
        fails_after: usize,
    }

    impl ProvideCredentials for Counting {
        fn provide_credentials<'a>(
            &'a self,
        ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            if self.calls.fetch_add(1, Ordering::SeqCst) >= self.fails_after {
                return aws_credential_types::provider::future::ProvideCredentials::ready(Err(
                    CredentialsError::provider_timed_out(Duration::from_secs(1)),
                ));
            }
            let expiry = self.expires_in.map(|d| SystemTime::now() + d);
            aws_credential_types::provider::future::ProvideCredentials::ready(Ok(Credentials::new(
                "AKID",
                "SECRET",
                Some("TOKEN".into()),
                expiry,
                "test",
            )))
        }
    }

    #[tokio::test]
    async fn credentials_without_expiry_are_fetched_again_after_15_minutes() {
        let calls = Arc::new(AtomicUsize::new(0));
        let signer = Signer::new(
            Some(SharedCredentialsProvider::new(Counting {
                calls: calls.clone(),
                expires_in: None,
                fails_after: 2,
            })),
            "eu-west-1".into(),
            "sqs",
        );
        let t0 = SystemTime::now();
        signer.credentials(t0).await.unwrap();
        signer
            .credentials(t0 + Duration::from_secs(14 * 60))
            .await
            .unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        signer
            .credentials(t0 + Duration::from_secs(16 * 60))
            .await
            .unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        // A failed refresh keeps the keys in hand: they do not expire.
        let later = t0 + Duration::from_secs(32 * 60);
        assert_eq!(
            signer.credentials(later).await.unwrap().access_key_id(),
            "AKID"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    fn request() -> http::Request<()> {
        http::Request::post("https://sqs.eu-west-1.amazonaws.com/")
            .header("host", "sqs.eu-west-1.amazonaws.com")
            .header("content-type", "application/x-amz-json-1.0")
            .body(())
            .unwrap()
    }

    /// An access key id a header cannot carry fails the signing (it panicked in aws-sigv4, the
    /// fast path having given up on it: review).
    #[tokio::test]
    async fn credentials_a_header_cannot_carry_fail_the_signing_without_a_panic() {
        let provider = SharedCredentialsProvider::new(Credentials::new(
            "AKID\r\n", "SECRET", None, None, "test",
        ));
        let signer = Signer::new(Some(provider), "eu-west-1".into(), "sqs");
        let mut r = request();
        let e = signer
            .sign(&mut r, b"{}", SystemTime::now())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("AWS_ACCESS_KEY_ID"), "{e}");
    }

    /// The credentials the clients' build-time check got are the direct transport's first: the
    /// chain is asked once at start, not twice (an STS call more with web identity).
    #[tokio::test]
    async fn the_chain_is_asked_once_at_start() {
        let calls = Arc::new(AtomicUsize::new(0));
        let sdk = aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new("eu-west-1"))
            .endpoint_url("http://127.0.0.1:9")
            .credentials_provider(SharedCredentialsProvider::new(Counting {
                calls: calls.clone(),
                expires_in: Some(Duration::from_secs(3600)),
                fails_after: usize::MAX,
            }))
            .build();
        let clients = crate::clients::clients(&crate::SqsConfig::default(), None, Some(sdk))
            .await
            .unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 1, "the check's");
        let direct = clients.direct.expect("the direct transport is the default");
        direct
            .signer()
            .sign(&mut request(), b"{}", SystemTime::now())
            .await
            .unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 1, "signed with the check's");
    }

    #[tokio::test]
    async fn signs_with_cached_credentials_until_they_near_expiry() {
        let calls = Arc::new(AtomicUsize::new(0));
        let long = Signer::new(
            Some(SharedCredentialsProvider::new(Counting {
                calls: calls.clone(),
                expires_in: Some(Duration::from_secs(3600)),
                fails_after: usize::MAX,
            })),
            "eu-west-1".into(),
            "sqs",
        );
        for _ in 0..3 {
            let mut r = request();
            long.sign(&mut r, b"{}", SystemTime::now()).await.unwrap();
            let auth = r.headers()["authorization"].to_str().unwrap();
            assert!(
                auth.starts_with("AWS4-HMAC-SHA256 Credential=AKID/"),
                "{auth}"
            );
            assert!(auth.contains("/eu-west-1/sqs/aws4_request"), "{auth}");
            assert!(auth.contains("SignedHeaders=content-type;host;"), "{auth}");
            assert_eq!(r.headers()["x-amz-security-token"], "TOKEN");
            assert!(r.headers().contains_key("x-amz-date"));
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1, "cached");
        long.forget();
        long.sign(&mut request(), b"{}", SystemTime::now())
            .await
            .unwrap();
        assert_eq!(
            calls.load(Ordering::SeqCst),
            2,
            "fetched again after forget"
        );
    }

    /// Credentials that live shorter than the refresh margin are not fetched again for every
    /// request, and a failing provider does not fail signing while the cached ones are usable.
    #[tokio::test]
    async fn short_lived_credentials_are_refreshed_halfway_and_kept_through_a_failing_provider() {
        let calls = Arc::new(AtomicUsize::new(0));
        let short = Signer::new(
            Some(SharedCredentialsProvider::new(Counting {
                calls: calls.clone(),
                expires_in: Some(Duration::from_secs(60)),
                fails_after: 2,
            })),
            "eu-west-1".into(),
            "sqs",
        );
        let now = SystemTime::now();
        short.credentials(now).await.unwrap();
        short.credentials(now).await.unwrap();
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "cached, though short-lived"
        );
        short
            .credentials(now + Duration::from_secs(31))
            .await
            .unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2, "refreshed halfway");
        // The provider fails from now on. The credentials in hand expire about 60 s after the
        // start (the test provider's expiry follows the real clock), are due for a refresh at
        // +45.5 s, and still sign until 10 s before they expire.
        short
            .credentials(now + Duration::from_secs(46))
            .await
            .unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 3, "a refresh was tried");
        // Not again for every request (each one asked the failing provider again, one at a time).
        for s in [46, 47, 49] {
            short
                .credentials(now + Duration::from_secs(s))
                .await
                .unwrap();
        }
        assert_eq!(calls.load(Ordering::SeqCst), 3, "tried again only later");
        let err = short
            .credentials(now + Duration::from_secs(52))
            .await
            .unwrap_err();
        assert!(matches!(err, SignError::Credentials(_)), "{err}");
        // The requests right behind that failure fail with it, without asking the provider again.
        let asked = calls.load(Ordering::SeqCst);
        let err = short
            .credentials(now + Duration::from_millis(52_500))
            .await
            .unwrap_err();
        assert!(matches!(err, SignError::Credentials(_)), "{err}");
        assert_eq!(calls.load(Ordering::SeqCst), asked, "failed fast");
        short
            .credentials(now + Duration::from_secs(54))
            .await
            .unwrap_err();
        assert_eq!(calls.load(Ordering::SeqCst), asked + 1, "asked again later");
    }

    /// A provider that never answers.
    #[derive(Debug)]
    struct Hanging;

    impl ProvideCredentials for Hanging {
        fn provide_credentials<'a>(
            &'a self,
        ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            aws_credential_types::provider::future::ProvideCredentials::new(std::future::pending())
        }
    }

    /// While one request waits for a refresh from a provider that hangs, the others sign with the
    /// credentials in hand (they queued behind it, each then asking the provider in turn).
    #[tokio::test]
    async fn a_hanging_refresh_holds_up_no_other_request() {
        let signer = Arc::new(Signer::new(
            Some(SharedCredentialsProvider::new(Hanging)),
            "eu-west-1".into(),
            "sqs",
        ));
        let now = SystemTime::now();
        let credentials = Credentials::new(
            "AKID",
            "SECRET",
            None,
            Some(now + Duration::from_secs(120)),
            "test",
        );
        signer.store(Cached::new(credentials, now));
        let due = now + Duration::from_secs(100);
        let stuck = tokio::spawn({
            let signer = signer.clone();
            async move {
                signer
                    .credentials(due)
                    .await
                    .map(|c| c.access_key_id().to_owned())
            }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !stuck.is_finished(),
            "the refresh is waiting for the provider"
        );
        let other = tokio::time::timeout(Duration::from_secs(1), signer.credentials(due))
            .await
            .expect("not held up by the refresh")
            .unwrap();
        assert_eq!(other.access_key_id(), "AKID");
        stuck.abort();
        // The refresh was dropped half-way: the next one waits its period, the requests sign on.
        let later = tokio::time::timeout(
            Duration::from_secs(1),
            signer.credentials(due + Duration::from_secs(1)),
        )
        .await
        .expect("no new refresh right after a dropped one")
        .unwrap();
        assert_eq!(later.access_key_id(), "AKID");
    }

    #[tokio::test]
    async fn no_provider_is_a_credentials_error() {
        let none = Signer::new(None, "eu-west-1".into(), "sqs");
        let err = none
            .sign(&mut request(), b"{}", SystemTime::now())
            .await
            .unwrap_err();
        assert!(matches!(err, SignError::Credentials(_)), "{err}");
        assert!(!err.to_string().contains("SECRET"));
    }
}
