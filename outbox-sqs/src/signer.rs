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
            SignError::Credentials(e) => f.write_str(&crate::sdk_error::no_credentials(
                &outbox_core::error_chain(e),
            )),
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
mod tests;
