//! Credentials and regions a request header cannot carry, refused as settings to fix. The access
//! key id, the session token and the region go into request headers, which take visible ASCII
//! only; aws-sigv4 and the SDK's signer unwrap the header they make, so a trailing newline in
//! `AWS_ACCESS_KEY_ID` (a secret made from a file, an env file with CRLF line ends) panicked the
//! relay's start-up check, and failed each later publish as a panic (review).

use std::time::Duration;

use aws_credential_types::Credentials;
use aws_credential_types::provider::ProvideCredentials;

use crate::error::{Error, ErrorKind, Result};

/// How long the check waits for the credential chain (the calls ask it again).
const PROVIDE_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether `text` may be a header value as the signers make it: visible ASCII and spaces.
fn sendable(text: &str) -> bool {
    text.bytes().all(|b| (0x20..0x7f).contains(&b))
}

/// What is wrong with `credentials` for a request header, if anything (never their text).
pub(crate) fn unsendable(credentials: &Credentials) -> Option<&'static str> {
    if !sendable(credentials.access_key_id()) {
        Some(
            "the AWS access key id holds a character a request header cannot carry (a trailing \
             newline or carriage return?): fix AWS_ACCESS_KEY_ID or the profile",
        )
    } else if !credentials.session_token().is_none_or(sendable) {
        Some(
            "the AWS session token holds a character a request header cannot carry (a line \
             break?): fix AWS_SESSION_TOKEN or the profile",
        )
    } else {
        None
    }
}

/// What is wrong with `region` for a request header, if anything.
pub(crate) fn unsendable_region(region: &str) -> Option<String> {
    (!sendable(region)).then(|| {
        format!(
            "the AWS region `{}` holds a character a request header cannot carry: fix AWS_REGION \
             or the profile",
            region.escape_debug()
        )
    })
}

/// The check, when the clients are built, of what they sign with: the region, and the
/// credentials the chain gives now (a chain that gives none is left to the calls, which say so).
/// A credentials error naming the problem, before any call could panic in the SDK's signer. The
/// credentials it got, for the direct transport's signer to start with (the chain was asked twice
/// at start: an STS call more with web identity or an assumed role).
pub(crate) async fn check_signing(
    provider: Option<impl ProvideCredentials>,
    region: Option<&str>,
) -> Result<Option<Credentials>> {
    if let Some(problem) = region.and_then(unsendable_region) {
        return Err(Error::new(ErrorKind::Config, problem));
    }
    let Some(provider) = provider else {
        return Ok(None);
    };
    let Ok(Ok(credentials)) =
        tokio::time::timeout(PROVIDE_TIMEOUT, provider.provide_credentials()).await
    else {
        return Ok(None);
    };
    if let Some(problem) = unsendable(&credentials) {
        return Err(Error::new(ErrorKind::Credentials, problem));
    }
    Ok(Some(credentials))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_credential_types::provider::SharedCredentialsProvider;

    fn sdk(key: &str) -> aws_config::SdkConfig {
        aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new("us-east-1"))
            .endpoint_url("http://127.0.0.1:9")
            .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
                key, "secret", None, None, "test",
            )))
            .build()
    }

    /// The clients are not built with an access key id ending in a line break: a credentials
    /// error naming the variable, never the key (the first call panicked in the signer).
    #[tokio::test]
    async fn clients_refuse_credentials_a_header_cannot_carry() {
        let config = crate::SqsConfig::default();
        let Err(e) = crate::clients::clients(&config, None, Some(sdk("AKIDSECRETISH\n"))).await
        else {
            panic!("built");
        };
        assert_eq!(e.kind(), ErrorKind::Credentials, "{e}");
        assert!(e.to_string().contains("AWS_ACCESS_KEY_ID"), "{e}");
        assert!(!e.to_string().contains("AKIDSECRETISH"), "{e}");
        assert!(
            crate::clients::clients(&config, None, Some(sdk("AKID")))
                .await
                .is_ok()
        );
    }

    #[test]
    fn a_line_break_in_a_key_or_token_or_region_is_unsendable() {
        let ok = Credentials::new("AKID", "se\ncret", Some("TOKEN".into()), None, "t");
        assert_eq!(unsendable(&ok), None, "the secret is not sent");
        let key = Credentials::new("AKID\n", "secret", None, None, "t");
        assert!(unsendable(&key).is_some_and(|p| p.contains("AWS_ACCESS_KEY_ID")));
        let token = Credentials::new("AKID", "secret", Some("TO\r\nKEN".into()), None, "t");
        assert!(unsendable(&token).is_some_and(|p| p.contains("AWS_SESSION_TOKEN")));
        assert!(unsendable_region("eu-west-1").is_none());
        assert_eq!(
            unsendable_region("eu-west-1\r").as_deref(),
            Some(
                "the AWS region `eu-west-1\\r` holds a character a request header cannot carry: \
                 fix AWS_REGION or the profile"
            )
        );
    }
}
