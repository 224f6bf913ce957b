//! The AWS clients of a publisher — SQS, SNS and (with offloading) S3 — from one AWS
//! configuration and the builder's overrides.

use aws_config::{BehaviorVersion, SdkConfig};
use aws_sdk_sqs::config::retry::RetryConfig;
use aws_sdk_sqs::config::{Region, StalledStreamProtectionConfig};
use futures::FutureExt;

use crate::config::SqsConfig;
use crate::direct::DirectSqs;
use crate::error::{Result, config_error};
use crate::transport::SqsTransport;

/// The publisher's clients.
pub(crate) struct Clients {
    pub(crate) sqs: aws_sdk_sqs::Client,
    /// With [`SqsTransport::Direct`] and no client given.
    pub(crate) direct: Option<DirectSqs>,
    pub(crate) sns: aws_sdk_sns::Client,
    /// Only with an offload bucket.
    pub(crate) s3: Option<aws_sdk_s3::Client>,
}

/// `aws-config`'s default chains, with a builder's `region` and `endpoint` overrides. Fails,
/// naming the setting, where `aws-config` would panic: on the AWS SDK's retry settings in the
/// environment (checked first), or in the AWS profile (its panic caught).
pub(crate) async fn load_default(
    region: Option<&str>,
    endpoint: Option<&str>,
) -> Result<SdkConfig> {
    let env = |name: &str| std::env::var(name).ok();
    if let Some(refusal) = outbox_core::env::aws_retry_refusal(env)
        .or_else(|| crate::config_env::aws_endpoint_refusal(env))
    {
        return Err(config_error(refusal));
    }
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    if let Some(region) = region {
        loader = loader.region(Region::new(region.to_owned()));
    }
    if let Some(url) = endpoint {
        loader = loader.endpoint_url(url);
    }
    std::panic::AssertUnwindSafe(loader.load())
        .catch_unwind()
        .await
        .map_err(|panic| {
            config_error(format!(
                "the AWS configuration (environment or profile) is invalid: {}",
                crate::error::panic_text(panic.as_ref())
            ))
        })
}

/// The error of a builder that found no AWS region anywhere.
pub(crate) fn no_region() -> crate::error::Error {
    config_error(
        "no AWS region: set AWS_REGION or a region in the AWS profile (in code: \
         `SqsPublisherBuilder::region`)",
    )
}

/// Builds the clients: from `client` (SQS) and `sdk` when given, else from `aws-config`'s
/// default chains; `config`'s region, endpoint and attempts override every one of them.
///
/// S3 uses path-style addressing when an endpoint is overridden (the builder's `endpoint_url`,
/// `AWS_ENDPOINT_URL` or `AWS_ENDPOINT_URL_S3`): local and S3-compatible servers need it.
pub(crate) async fn clients(
    config: &SqsConfig,
    client: Option<aws_sdk_sqs::Client>,
    sdk: Option<SdkConfig>,
) -> Result<Clients> {
    let sdk = match sdk {
        Some(sdk) => sdk,
        None => load_default(config.region.as_deref(), config.endpoint_url.as_deref()).await?,
    };
    let region = config
        .region
        .clone()
        .map(Region::new)
        .or_else(|| client.as_ref().and_then(|c| c.config().region().cloned()))
        .or_else(|| sdk.region().cloned());
    let Some(region) = region else {
        return Err(no_region());
    };
    // Before any call: the SDK's signer panics on what a header cannot carry (`header_text.rs`).
    let first =
        crate::header_text::check_signing(sdk.credentials_provider(), Some(region.as_ref()))
            .await?;
    let retry = config.max_attempts.map(|attempts| {
        sdk.retry_config()
            .cloned()
            .unwrap_or_else(RetryConfig::standard)
            .with_max_attempts(attempts)
    });

    let direct = match (&client, config.transport) {
        (None, SqsTransport::Direct) => Some(
            DirectSqs::new(
                &sdk,
                region.as_ref(),
                config.endpoint_url.as_deref(),
                config.max_attempts,
                first,
            )
            .await?,
        ),
        _ => None,
    };

    let mut sqs = match &client {
        Some(client) => client.config().to_builder(),
        None => aws_sdk_sqs::config::Builder::from(&sdk),
    };
    // The publisher bounds every call with its own timeout (`call_timeout`); the SDK's
    // stalled-stream protection would only watch the same bodies again, on every call (≈ 4 % of
    // the relay's CPU in the profile in BENCHMARKS.md).
    sqs = sqs
        .region(region.clone())
        .stalled_stream_protection(StalledStreamProtectionConfig::disabled());
    if let Some(url) = &config.endpoint_url {
        sqs = sqs.endpoint_url(url);
    }
    let mut sqs = sqs.build();
    if let Some(attempts) = config.max_attempts {
        let retry = sqs
            .retry_config()
            .cloned()
            .unwrap_or_else(RetryConfig::standard)
            .with_max_attempts(attempts);
        sqs = sqs.to_builder().retry_config(retry).build();
    }

    let mut sns = aws_sdk_sns::config::Builder::from(&sdk)
        .region(region.clone())
        .stalled_stream_protection(aws_sdk_sns::config::StalledStreamProtectionConfig::disabled());
    if let Some(url) = &config.endpoint_url {
        sns = sns.endpoint_url(url);
    }
    if let Some(retry) = &retry {
        sns = sns.retry_config(retry.clone());
    }

    let s3 = config.offload_bucket.as_ref().map(|_| {
        s3_client(
            &sdk,
            Some(region.clone()),
            config.endpoint_url.as_deref(),
            retry.clone(),
        )
    });

    Ok(Clients {
        direct,
        sqs: aws_sdk_sqs::Client::from_conf(sqs),
        sns: aws_sdk_sns::Client::from_conf(sns.build()),
        s3,
    })
}

/// An S3 client from `sdk`, in `region`, at `endpoint` when given, with `retry` when given;
/// path-style addressing when an endpoint is overridden (`endpoint`, the configuration's own, or
/// `AWS_ENDPOINT_URL_S3`): local and S3-compatible servers need it.
pub(crate) fn s3_client(
    sdk: &SdkConfig,
    region: Option<Region>,
    endpoint: Option<&str>,
    retry: Option<RetryConfig>,
) -> aws_sdk_s3::Client {
    let mut s3 = aws_sdk_s3::config::Builder::from(sdk);
    if let Some(region) = region {
        s3 = s3.region(region);
    }
    if let Some(url) = endpoint {
        s3 = s3.endpoint_url(url);
    }
    if let Some(retry) = retry {
        s3 = s3.retry_config(retry);
    }
    let custom_endpoint = endpoint.is_some()
        || sdk.endpoint_url().is_some()
        || std::env::var_os("AWS_ENDPOINT_URL_S3").is_some();
    aws_sdk_s3::Client::from_conf(s3.force_path_style(custom_endpoint).build())
}
