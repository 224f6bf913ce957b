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

/// Credentials are fetched again this long before they expire (the SDK's identity cache uses the
/// same margin's order of magnitude), so a request is never signed with credentials about to lapse.
const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(300);

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

/// Signs requests to one service in one region.
pub(crate) struct Signer {
    provider: Option<SharedCredentialsProvider>,
    region: String,
    service: &'static str,
    cached: Mutex<Option<Credentials>>,
    /// Serialises refreshes: one provider call at a time, not one per batch.
    refreshing: tokio::sync::Mutex<()>,
}

impl fmt::Debug for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signer")
            .field("region", &self.region)
            .field("service", &self.service)
            .finish_non_exhaustive()
    }
}

fn fresh(credentials: &Credentials, now: SystemTime) -> bool {
    credentials
        .expiry()
        .is_none_or(|expiry| expiry > now + REFRESH_BEFORE_EXPIRY)
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
            refreshing: tokio::sync::Mutex::new(()),
        }
    }

    fn cached(&self, now: SystemTime) -> Option<Credentials> {
        let cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        cached.as_ref().filter(|c| fresh(c, now)).cloned()
    }

    /// Credentials that do not expire within the refresh margin.
    async fn credentials(&self) -> Result<Credentials, SignError> {
        if let Some(c) = self.cached(SystemTime::now()) {
            return Ok(c);
        }
        let _refresh = self.refreshing.lock().await;
        if let Some(c) = self.cached(SystemTime::now()) {
            return Ok(c);
        }
        let Some(provider) = &self.provider else {
            return Err(SignError::Credentials(CredentialsError::not_loaded(
                "no credentials provider in the AWS configuration",
            )));
        };
        let credentials = provider
            .provide_credentials()
            .await
            .map_err(SignError::Credentials)?;
        *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = Some(credentials.clone());
        Ok(credentials)
    }

    /// Forgets the cached credentials (after the service refused them), so the next request
    /// fetches them again.
    pub(crate) fn forget(&self) {
        *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = None;
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
        let credentials = self.credentials().await?;
        let identity = credentials.into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(self.service)
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
    }

    impl ProvideCredentials for Counting {
        fn provide_credentials<'a>(
            &'a self,
        ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            self.calls.fetch_add(1, Ordering::SeqCst);
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

    fn request() -> http::Request<()> {
        http::Request::post("https://sqs.eu-west-1.amazonaws.com/")
            .header("host", "sqs.eu-west-1.amazonaws.com")
            .header("content-type", "application/x-amz-json-1.0")
            .body(())
            .unwrap()
    }

    #[tokio::test]
    async fn signs_with_cached_credentials_until_they_near_expiry() {
        let calls = Arc::new(AtomicUsize::new(0));
        let long = Signer::new(
            Some(SharedCredentialsProvider::new(Counting {
                calls: calls.clone(),
                expires_in: Some(Duration::from_secs(3600)),
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

        let short_calls = Arc::new(AtomicUsize::new(0));
        let short = Signer::new(
            Some(SharedCredentialsProvider::new(Counting {
                calls: short_calls.clone(),
                expires_in: Some(Duration::from_secs(60)),
            })),
            "eu-west-1".into(),
            "sqs",
        );
        short
            .sign(&mut request(), b"{}", SystemTime::now())
            .await
            .unwrap();
        short
            .sign(&mut request(), b"{}", SystemTime::now())
            .await
            .unwrap();
        assert_eq!(
            short_calls.load(Ordering::SeqCst),
            2,
            "near expiry: refreshed"
        );

        let none = Signer::new(None, "eu-west-1".into(), "sqs");
        let err = none
            .sign(&mut request(), b"{}", SystemTime::now())
            .await
            .unwrap_err();
        assert!(matches!(err, SignError::Credentials(_)), "{err}");
        assert!(!err.to_string().contains("SECRET"));
    }
}
