//! Tests of `signer`.

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
    let provider =
        SharedCredentialsProvider::new(Credentials::new("AKID\r\n", "SECRET", None, None, "test"));
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
