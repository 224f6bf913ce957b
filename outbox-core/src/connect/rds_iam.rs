//! RDS IAM authentication: the password of each new connection is a fresh auth token, a
//! SigV4-presigned `connect` URL signed with the default AWS credential chain.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{
    SignableBody, SignableRequest, SignatureLocation, SigningSettings, sign,
};
use aws_sigv4::sign::v4;

use super::password::{Password, PasswordProvider};

/// How long an RDS auth token is valid (RDS accepts at most 15 minutes). Only the connection's
/// start-up uses it: an open connection outlives its token.
pub const RDS_TOKEN_LIFETIME: Duration = Duration::from_secs(900);

/// The signing name of RDS IAM authentication.
const SIGNING_NAME: &str = "rds-db";

/// Credentials are fetched again this long before they expire (a token signed with them must stay
/// valid while the connection starts).
const CREDENTIALS_REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);

/// Credentials without an expiry time are fetched again after this long, as the AWS SDK's
/// identity cache does (a rotated profile file is picked up without a restart).
const REFRESH_WITHOUT_EXPIRY: Duration = Duration::from_secs(15 * 60);

/// Why no auth token could be made. Never contains a token or a secret key.
#[derive(Debug)]
pub struct RdsIamError {
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl RdsIamError {
    fn new(message: impl Into<String>) -> Self {
        RdsIamError {
            message: message.into(),
            source: None,
        }
    }

    fn with_source(mut self, e: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(e));
        self
    }
}

impl fmt::Display for RdsIamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RdsIamError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// The RDS auth token for `user` at `host:port` in `region`, signed with `credentials` at `time`:
/// `host:port/?Action=connect&DBUser=...&X-Amz-...&X-Amz-Signature=...`, valid
/// [`RDS_TOKEN_LIFETIME`] from `time`.
pub fn rds_auth_token(
    host: &str,
    port: u16,
    user: &str,
    region: &str,
    credentials: &Credentials,
    time: SystemTime,
) -> Result<String, RdsIamError> {
    let identity = credentials.clone().into();
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(RDS_TOKEN_LIFETIME);
    let params: aws_sigv4::http_request::SigningParams<'_> = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SIGNING_NAME)
        .time(time)
        .settings(settings)
        .build()
        .map_err(|e| RdsIamError::new("cannot sign the RDS auth token").with_source(e))?
        .into();
    let mut query = vec![
        ("Action".to_string(), "connect".to_string()),
        ("DBUser".to_string(), user.to_string()),
    ];
    let url = format!("https://{host}:{port}/?{}", encode_query(&query));
    let request = SignableRequest::new("GET", url, std::iter::empty(), SignableBody::Bytes(&[]))
        .map_err(|e| RdsIamError::new("cannot sign the RDS auth token").with_source(e))?;
    let (instructions, _) = sign(request, &params)
        .map_err(|e| RdsIamError::new("cannot sign the RDS auth token").with_source(e))?
        .into_parts();
    let (_, signed) = instructions.into_parts();
    query.extend(
        signed
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.into_owned())),
    );
    // The order botocore and the other SDKs print: the signature last.
    query.sort_by(|a, b| {
        (a.0 == "X-Amz-Signature")
            .cmp(&(b.0 == "X-Amz-Signature"))
            .then_with(|| a.0.cmp(&b.0))
    });
    Ok(format!("{host}:{port}/?{}", encode_query(&query)))
}

/// SigV4's URI encoding: everything but `A-Z a-z 0-9 - _ . ~` as `%XX`.
fn encode_query(pairs: &[(String, String)]) -> String {
    fn encode(s: &str) -> String {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect()
    }
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// A [`PasswordProvider`] giving a fresh RDS auth token for every new connection, signed with
/// credentials from the default AWS chain (environment, profile, web identity, instance or task
/// role). Needs TLS (RDS refuses IAM auth in plaintext) and the `rds_iam` role in the database.
#[derive(Clone)]
pub struct RdsIamTokenProvider {
    host: String,
    port: u16,
    user: String,
    region: String,
    credentials: SharedCredentialsProvider,
    /// The last credentials, reused until [`CREDENTIALS_REFRESH_MARGIN`] before they expire: the
    /// default chain does not cache (the SDK clients do, in their identity cache), so with web
    /// identity, SSO or an assumed role each new connection would otherwise call STS.
    /// With when they were fetched: keys without expiry are fetched again after
    /// [`REFRESH_WITHOUT_EXPIRY`].
    cached: Arc<Mutex<Option<(Credentials, SystemTime)>>>,
    /// Held while the credentials are fetched.
    fetching: Arc<tokio::sync::Mutex<()>>,
}

impl fmt::Debug for RdsIamTokenProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RdsIamTokenProvider")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl RdsIamTokenProvider {
    /// Tokens for `user` at `host:port` in `region`, signed with `credentials`.
    pub fn new(
        host: impl Into<String>,
        port: u16,
        user: impl Into<String>,
        region: impl Into<String>,
        credentials: impl ProvideCredentials + 'static,
    ) -> Self {
        RdsIamTokenProvider {
            host: host.into(),
            port,
            user: user.into(),
            region: region.into(),
            credentials: SharedCredentialsProvider::new(credentials),
            cached: Arc::default(),
            fetching: Arc::default(),
        }
    }

    /// Tokens for the host, port and user of `pg` (one host), with the credentials of the default
    /// AWS chain (environment, profile, instance metadata, ...) and the region of the host's RDS
    /// name (`….<region>.rds.amazonaws.com`), or else the chain's (`AWS_REGION`, profile). A URL
    /// with several hosts is refused: tokio-postgres gives every host the same password, and a
    /// token is signed for one host.
    pub async fn from_env(pg: &tokio_postgres::Config) -> Result<Self, RdsIamError> {
        if let Some(refusal) = url_refusal(pg) {
            return Err(RdsIamError::new(refusal));
        }
        let (Some(tokio_postgres::config::Host::Tcp(host)), Some(user)) =
            (pg.get_hosts().first(), pg.get_user())
        else {
            return Err(RdsIamError::new(
                "RDS IAM auth needs a TCP host name and a user",
            ));
        };
        let (host, user) = (host.clone(), user.to_string());
        let port = pg.get_ports().first().copied().unwrap_or(5432);
        // `aws-config` panics on retry settings it cannot use: refused here, by name; one in the
        // AWS profile is caught.
        if let Some(refusal) = crate::env::aws_retry_refusal(|name| std::env::var(name).ok()) {
            return Err(RdsIamError::new(refusal));
        }
        let load = aws_config::load_defaults(aws_config::BehaviorVersion::latest());
        let aws = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(load))
            .await
            .map_err(|panic| {
                RdsIamError::new(format!(
                    "the AWS configuration (environment or profile) is invalid: {}",
                    crate::relay::panic_message(panic.as_ref())
                ))
            })?;
        // The token must be signed for the database's region, which may not be the one the
        // environment names for SQS.
        let region = match (region_of_host(&host), aws.region()) {
            (Some(r), _) => r.to_string(),
            (None, Some(r)) => r.to_string(),
            (None, None) => {
                return Err(RdsIamError::new(
                    "RDS IAM auth needs an AWS region: set AWS_REGION (the host name does not say it)",
                ));
            }
        };
        let credentials = aws.credentials_provider().ok_or_else(|| {
            RdsIamError::new("RDS IAM auth needs AWS credentials (none in the default chain)")
        })?;
        Ok(RdsIamTokenProvider {
            host,
            port,
            user,
            region,
            credentials,
            cached: Arc::default(),
            fetching: Arc::default(),
        })
    }
}

/// The region in an RDS host name: `mydb.abc123.eu-west-1.rds.amazonaws.com` → `eu-west-1`
/// (also `….rds.amazonaws.com.cn`); `None` for any other name (a proxy, an IP address).
fn region_of_host(host: &str) -> Option<&str> {
    let labels: Vec<&str> = host.trim_end_matches('.').split('.').collect();
    let rds = labels
        .windows(2)
        .position(|w| w[0].eq_ignore_ascii_case("rds") && w[1].eq_ignore_ascii_case("amazonaws"))?;
    labels
        .get(rds.checked_sub(1)?)
        .copied()
        .filter(|r| !r.is_empty())
}

impl RdsIamTokenProvider {
    /// The cached credentials at `now`, if they have [`CREDENTIALS_REFRESH_MARGIN`] left (or, for
    /// keys without expiry, were fetched less than [`REFRESH_WITHOUT_EXPIRY`] ago).
    fn cached_fresh(&self, now: SystemTime) -> Option<Credentials> {
        self.cached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .filter(|(c, fetched)| match c.expiry() {
                Some(expiry) => expiry
                    .duration_since(now)
                    .is_ok_and(|left| left > CREDENTIALS_REFRESH_MARGIN),
                None => now
                    .duration_since(*fetched)
                    .is_ok_and(|age| age < REFRESH_WITHOUT_EXPIRY),
            })
            .map(|(c, _)| c)
    }

    /// The cached credentials while they have [`CREDENTIALS_REFRESH_MARGIN`] left (or never
    /// expire), else fresh ones from the chain.
    async fn credentials(&self, now: SystemTime) -> Result<Credentials, RdsIamError> {
        if let Some(c) = self.cached_fresh(now) {
            return Ok(c);
        }
        // One fetch at a time: a pool opening many connections at once (start-up, a failover)
        // made as many calls to the credential chain (STS), which throttles them.
        let _fetching = self.fetching.lock().await;
        if let Some(c) = self.cached_fresh(now) {
            return Ok(c);
        }
        let credentials = match self.credentials.provide_credentials().await {
            Ok(credentials) => credentials,
            Err(e) => {
                let e = RdsIamError::new("cannot load AWS credentials for the RDS auth token")
                    .with_source(e);
                // Keys that do not expire stay good when fetching them again fails.
                let lasting = self
                    .cached
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone()
                    .map(|(c, _)| c)
                    .filter(|c| c.expiry().is_none());
                return match lasting {
                    Some(c) => {
                        tracing::warn!(error = %crate::error_chain(&e),
                            "cannot refresh the AWS credentials; signing with the ones in hand");
                        Ok(c)
                    }
                    None => Err(e),
                };
            }
        };
        *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = Some((credentials.clone(), now));
        Ok(credentials)
    }
}

impl PasswordProvider for RdsIamTokenProvider {
    type Error = RdsIamError;

    async fn password(&self) -> Result<Password, RdsIamError> {
        let credentials = self.credentials(SystemTime::now()).await?;
        let token = rds_auth_token(
            &self.host,
            self.port,
            &self.user,
            &self.region,
            &credentials,
            SystemTime::now(),
        )?;
        Ok(Password::new(token))
    }
}

/// Why a token cannot be signed for the URL `pg` (one TCP host and a user are needed), or
/// `None`: settings in conflict with RDS IAM auth, found before anything is contacted.
pub(crate) fn url_refusal(pg: &tokio_postgres::Config) -> Option<&'static str> {
    if pg.get_hosts().len() > 1 {
        Some(
            "RDS IAM auth signs a token for one host, but the URL names several: give one \
             endpoint (a cluster's writer or reader endpoint follows fail-overs by itself)",
        )
    } else if !matches!(
        pg.get_hosts().first(),
        Some(tokio_postgres::config::Host::Tcp(_))
    ) {
        Some("RDS IAM auth needs a TCP host name")
    } else if pg.get_user().is_none() {
        Some("RDS IAM auth needs a user name")
    } else if pg.get_password().is_some() {
        // Replaced by the token without a word, it read as if it were used (black-box run).
        Some(
            "RDS IAM auth authenticates with a token, not the URL's password: remove the password \
             from the URL",
        )
    } else {
        None
    }
}

#[cfg(test)]
mod tests;
