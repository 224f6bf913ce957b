//! Tests of `rds_iam`.

use super::*;

/// The vectors were computed independently with botocore 1.43 (`generate_db_auth_token` under a
/// fixed clock): see `scripts/rds-token-vector.py`.
const TIME_SECS: u64 = 1_705_307_400; // 2024-01-15T08:30:00Z
const HOST: &str = "mydb.abc123.eu-west-1.rds.amazonaws.com";
const BOTOCORE: &str = "mydb.abc123.eu-west-1.rds.amazonaws.com:5432/?Action=connect&DBUser=outbox_relay&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20240115%2Feu-west-1%2Frds-db%2Faws4_request&X-Amz-Date=20240115T083000Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host&X-Amz-Signature=47879b4a23bcc23701213db46f85161ad04a0b0063bc4dbdc3aa5942b9f1a005";
const BOTOCORE_SESSION: &str = "mydb.abc123.eu-west-1.rds.amazonaws.com:5432/?Action=connect&DBUser=outbox_relay&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20240115%2Feu-west-1%2Frds-db%2Faws4_request&X-Amz-Date=20240115T083000Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host&X-Amz-Security-Token=SESSIONTOKEN%2Fwith%2Bchars%3D&X-Amz-Signature=4a42ffef6c5b8920ef2da7332e81e7475b87961113bac08b31abde2c34ea5b68";

/// Counts its calls; its credentials expire after `lifetime` (never with `None`). Calls after
/// `fails_after` fail.
#[derive(Debug)]
struct Counting {
    calls: Arc<std::sync::atomic::AtomicUsize>,
    lifetime: Option<Duration>,
    fails_after: usize,
}

impl ProvideCredentials for Counting {
    fn provide_credentials<'a>(
        &'a self,
    ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        let n = self
            .calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n >= self.fails_after {
            return aws_credential_types::provider::future::ProvideCredentials::ready(Err(
                aws_credential_types::provider::error::CredentialsError::provider_timed_out(
                    Duration::from_secs(1),
                ),
            ));
        }
        aws_credential_types::provider::future::ProvideCredentials::ready(Ok(Credentials::new(
            "AKIDEXAMPLE",
            "secret",
            None,
            self.lifetime.map(|l| SystemTime::now() + l),
            "test",
        )))
    }
}

/// A provider of tokens for the test host, with `credentials`.
fn provider_with(credentials: impl ProvideCredentials + 'static) -> RdsIamTokenProvider {
    RdsIamTokenProvider::new(
        HOST,
        5432,
        "outbox_relay",
        "eu-west-1",
        SharedCredentialsProvider::new(credentials),
    )
}

#[tokio::test]
async fn credentials_are_reused_until_shortly_before_they_expire() {
    for (lifetime, calls) in [(Duration::from_secs(3600), 1), (Duration::from_secs(60), 3)] {
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counting = Counting {
            calls: Arc::clone(&count),
            lifetime: Some(lifetime),
            fails_after: usize::MAX,
        };
        let provider = provider_with(counting);
        let again = provider.clone();
        for p in [&provider, &again, &provider] {
            p.password().await.unwrap();
        }
        assert_eq!(
            count.load(std::sync::atomic::Ordering::Relaxed),
            calls,
            "credentials valid for {lifetime:?}"
        );
    }
}

#[tokio::test]
async fn credentials_without_expiry_are_fetched_again_after_15_minutes() {
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let provider = provider_with(Counting {
        calls: Arc::clone(&count),
        lifetime: None,
        fails_after: 2,
    });
    let calls = || count.load(std::sync::atomic::Ordering::Relaxed);
    let t0 = SystemTime::now();
    provider.credentials(t0).await.unwrap();
    provider
        .credentials(t0 + Duration::from_secs(14 * 60))
        .await
        .unwrap();
    assert_eq!(calls(), 1);
    provider
        .credentials(t0 + Duration::from_secs(16 * 60))
        .await
        .unwrap();
    assert_eq!(calls(), 2);
    // Fetching fails: the keys in hand do not expire and still sign.
    provider
        .credentials(t0 + Duration::from_secs(32 * 60))
        .await
        .unwrap();
    assert_eq!(calls(), 3);
}

/// Counts its calls and takes a while to answer, as STS does.
#[derive(Debug)]
struct Slow(Arc<std::sync::atomic::AtomicUsize>);

impl ProvideCredentials for Slow {
    fn provide_credentials<'a>(
        &'a self,
    ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        aws_credential_types::provider::future::ProvideCredentials::new(async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            Ok(Credentials::new(
                "AKIDEXAMPLE",
                "secret",
                None,
                Some(SystemTime::now() + Duration::from_secs(3600)),
                "test",
            ))
        })
    }
}

/// A pool opening eight connections at once fetches the credentials once (it made eight calls
/// to the credential chain, which STS throttles).
#[tokio::test]
async fn connections_opened_at_once_fetch_the_credentials_once() {
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let provider = provider_with(Slow(Arc::clone(&count)));
    let opening: Vec<_> = (0..8)
        .map(|_| {
            let p = provider.clone();
            tokio::spawn(async move { p.password().await.map(|_| ()) })
        })
        .collect();
    for o in opening {
        o.await.unwrap().unwrap();
    }
    assert_eq!(count.load(std::sync::atomic::Ordering::Relaxed), 1);
}

#[test]
fn the_region_comes_from_an_rds_host_name() {
    assert_eq!(region_of_host(HOST), Some("eu-west-1"));
    assert_eq!(
        region_of_host("db.cluster-ro-x.cn-north-1.rds.amazonaws.com.cn"),
        Some("cn-north-1")
    );
    for other in [
        "10.0.0.5",
        "db.internal",
        "rds.amazonaws.com",
        "proxy.example.com",
    ] {
        assert_eq!(region_of_host(other), None, "{other}");
    }
}

#[tokio::test]
async fn several_hosts_are_refused_one_token_signs_for_one() {
    let pg: tokio_postgres::Config =
        "postgres://u@writer.x.eu-west-1.rds.amazonaws.com,reader.x.eu-west-1.rds.amazonaws.com/db"
            .parse()
            .unwrap();
    let e = RdsIamTokenProvider::from_env(&pg).await.unwrap_err();
    assert!(e.to_string().contains("one host"), "{e}");
}

fn token(session: Option<&str>) -> String {
    let creds = Credentials::new(
        "AKIDEXAMPLE",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        session.map(str::to_string),
        None,
        "test",
    );
    let time = SystemTime::UNIX_EPOCH + Duration::from_secs(TIME_SECS);
    rds_auth_token(HOST, 5432, "outbox_relay", "eu-west-1", &creds, time).unwrap()
}

/// Parameters as a sorted list, so a difference in order alone is reported separately.
fn params(token: &str) -> Vec<String> {
    let mut p: Vec<String> = token
        .split_once('?')
        .map(|(_, q)| q.split('&').map(str::to_string).collect())
        .unwrap_or_default();
    p.sort();
    p
}

#[test]
fn token_matches_botocore_with_fixed_credentials_and_clock() {
    let ours = token(None);
    assert_eq!(params(&ours), params(BOTOCORE));
    assert_eq!(ours, BOTOCORE);
}

#[test]
fn token_with_a_session_token_matches_botocore() {
    let ours = token(Some("SESSIONTOKEN/with+chars="));
    // Same parameters and signature; botocore prints the session token after SignedHeaders,
    // we print it sorted (the order of query parameters does not matter to RDS).
    assert_eq!(params(&ours), params(BOTOCORE_SESSION));
    assert!(ours.starts_with(&format!("{HOST}:5432/?Action=connect&DBUser=outbox_relay&")));
}

#[test]
fn debug_shows_no_credentials() {
    let creds = Credentials::new("AKIDEXAMPLE", "SECRETKEY", None, None, "test");
    let p = RdsIamTokenProvider::new(HOST, 5432, "u", "eu-west-1", creds);
    let text = format!("{p:?}");
    assert!(
        !text.contains("SECRETKEY") && !text.contains("AKIDEXAMPLE"),
        "{text}"
    );
}
