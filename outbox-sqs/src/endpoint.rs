//! The SQS endpoint the direct transport sends to, resolved the way `aws-sdk-sqs` resolves it:
//! the builder's `endpoint_url`, else `AWS_ENDPOINT_URL_SQS` (or the profile's `sqs` section),
//! else `AWS_ENDPOINT_URL`, else AWS's regional endpoint (FIPS and dual-stack variants included).

use aws_config::SdkConfig;
use aws_sdk_sqs::config::endpoint::{DefaultResolver, Params, ResolveEndpoint};
use aws_types::service_config::ServiceConfigKey;

use crate::error::{Result, config_error};

/// The endpoint URL override for SQS in `sdk`, as `aws_sdk_sqs::config::Builder::from` reads it.
fn configured_override(sdk: &SdkConfig) -> Option<String> {
    if sdk.get_origin("endpoint_url").is_client_config() {
        return sdk.endpoint_url().map(str::to_owned);
    }
    let key = ServiceConfigKey::builder()
        .service_id("SQS")
        .env("AWS_ENDPOINT_URL")
        .profile("endpoint_url")
        .build()
        .ok();
    key.and_then(|key| sdk.service_config().and_then(|c| c.load_config(key)))
        .or_else(|| sdk.endpoint_url().map(str::to_owned))
}

/// The URL `SendMessageBatch` is posted to.
pub(crate) async fn sqs_endpoint(
    sdk: &SdkConfig,
    endpoint_url: Option<&str>,
    region: &str,
) -> Result<String> {
    let endpoint = endpoint_url
        .map(str::to_owned)
        .or_else(|| configured_override(sdk));
    let params = Params::builder()
        .region(region.to_owned())
        .use_fips(sdk.use_fips().unwrap_or(false))
        .use_dual_stack(sdk.use_dual_stack().unwrap_or(false))
        .set_endpoint(endpoint)
        .build()
        .map_err(|e| config_error(format!("no SQS endpoint for region `{region}`: {e}")))?;
    let resolved = DefaultResolver::new()
        .resolve_endpoint(&params)
        .await
        .map_err(|e| config_error(format!("no SQS endpoint for region `{region}`: {e}")))?;
    let url = resolved.url().to_owned();
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(config_error(format!(
            "the SQS endpoint `{url}` is not an http:// or https:// URL"
        )));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_config::BehaviorVersion;

    fn sdk() -> SdkConfig {
        SdkConfig::builder()
            .behavior_version(BehaviorVersion::latest())
            .build()
    }

    #[tokio::test]
    async fn regional_fips_and_overridden_endpoints() {
        assert_eq!(
            sqs_endpoint(&sdk(), None, "eu-west-1").await.unwrap(),
            "https://sqs.eu-west-1.amazonaws.com"
        );
        let fips = sdk().into_builder().use_fips(true).build();
        assert_eq!(
            sqs_endpoint(&fips, None, "us-east-1").await.unwrap(),
            "https://sqs-fips.us-east-1.amazonaws.com"
        );
        let general = sdk()
            .into_builder()
            .endpoint_url("http://127.0.0.1:4566")
            .build();
        assert_eq!(
            sqs_endpoint(&general, None, "us-east-1").await.unwrap(),
            "http://127.0.0.1:4566"
        );
        assert_eq!(
            sqs_endpoint(&general, Some("http://127.0.0.1:9"), "us-east-1")
                .await
                .unwrap(),
            "http://127.0.0.1:9"
        );
        assert!(sqs_endpoint(&sdk(), None, "not a region").await.is_err());
    }
}
