//! `SqsPublisher`'s settings against the SQS test fixture: the start-up check, the builder's
//! validation, and the standard AWS environment variables.

mod common;

use std::time::Duration;

use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{ProvideCredentials, future};
use common::{assert_all_published, builder, event, events, publisher};
use outbox_core::Publisher;
use outbox_sqs::{ErrorKind, SqsPublisher};
use outbox_sqs_fixture::{CallFault, SqsFixture};
use outbox_tests::sqs::sdk_config_for;
use serde_json::json;

#[tokio::test]
async fn check_reports_missing_queue_unreachable_server_and_missing_credentials() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("events");
    publisher(&fx, &q).await.check().await.unwrap();
    assert_eq!(fx.calls_to("GetQueueAttributes"), 1);

    let missing = fx.queue_url("nope");
    let err = publisher(&fx, &missing).await.check().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::QueueNotFound, "{err}");
    assert!(err.to_string().contains(&missing), "{err}");
    assert!(err.to_string().contains("does not exist"), "{err}");

    // Queue names resolve through GetQueueUrl at build.
    let by_name = builder(&fx)
        .await
        .default_queue("events")
        .build()
        .await
        .unwrap();
    assert_eq!(by_name.queue_urls(), vec![q.as_str()]);
    let err = builder(&fx)
        .await
        .default_queue("nope")
        .build()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::QueueNotFound, "{err}");

    #[derive(Debug)]
    struct NoCredentials;
    impl ProvideCredentials for NoCredentials {
        fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            future::ProvideCredentials::ready(Err(CredentialsError::not_loaded(
                "no credentials in this test",
            )))
        }
    }
    let sdk = sdk_config_for(&fx.endpoint_url())
        .await
        .into_builder()
        .credentials_provider(
            aws_credential_types::provider::SharedCredentialsProvider::new(NoCredentials),
        )
        .build();
    let no_creds = SqsPublisher::builder()
        .sdk_config(sdk)
        .max_attempts(1)
        .default_queue(q.as_str())
        .build()
        .await
        .unwrap();
    let err = no_creds.check().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Credentials, "{err:?}");
    assert!(err.to_string().contains(&q), "{err}");
    // Publishing without credentials is a whole-call failure.
    let err = no_creds
        .publish(&events(2, "order.created"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Credentials, "{err:?}");

    // SQS refusing the credentials.
    fx.fail_next_calls(
        1,
        CallFault::Error {
            status: 403,
            code: "InvalidClientTokenId".into(),
            message: "The security token included in the request is invalid.".into(),
        },
    );
    let err = publisher(&fx, &q).await.check().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Credentials, "{err}");

    fx.refuse_connections().await;
    let err = publisher(&fx, &q).await.check().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains(&q), "{err}");
}

#[tokio::test]
async fn build_validates_settings() {
    let fx = SqsFixture::start().await;
    let q = fx.create_queue("events");
    let config_err = |e: outbox_sqs::Error| {
        assert_eq!(e.kind(), ErrorKind::Config, "{e}");
        e.to_string()
    };
    let msg = config_err(builder(&fx).await.build().await.unwrap_err());
    assert!(msg.contains("no SQS queue configured"), "{msg}");
    let msg = config_err(
        builder(&fx)
            .await
            .default_queue(q.as_str())
            .max_in_flight(0)
            .build()
            .await
            .unwrap_err(),
    );
    assert!(msg.contains("max_in_flight"), "{msg}");
    let msg = config_err(
        builder(&fx)
            .await
            .default_queue(q.as_str())
            .call_timeout(Duration::ZERO)
            .build()
            .await
            .unwrap_err(),
    );
    assert!(msg.contains("call_timeout"), "{msg}");
    let msg = config_err(
        builder(&fx)
            .await
            .route("order.*.x", q.as_str())
            .build()
            .await
            .unwrap_err(),
    );
    assert!(msg.contains("order.*.x"), "{msg}");
    let msg = config_err(
        builder(&fx)
            .await
            .default_queue(q.as_str())
            .endpoint_url("127.0.0.1:4566")
            .build()
            .await
            .unwrap_err(),
    );
    assert!(msg.contains("endpoint_url"), "{msg}");
    let no_region = aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .build();
    let msg = config_err(
        SqsPublisher::builder()
            .sdk_config(no_region)
            .default_queue(q.as_str())
            .build()
            .await
            .unwrap_err(),
    );
    assert!(msg.contains("region"), "{msg}");
}

/// Child half of `standard_aws_endpoint_variables_are_honoured`, which runs it in a child process
/// (`--ignored --exact`) with the environment under test; ignored in a normal run, and failing
/// if run by hand without that environment.
#[tokio::test]
#[ignore = "run as a child process by standard_aws_endpoint_variables_are_honoured"]
async fn child_publishes_with_settings_from_the_environment() {
    assert!(
        std::env::var("OUTBOX_SQS_TEST_CHILD").is_ok(),
        "run by standard_aws_endpoint_variables_are_honoured, which sets OUTBOX_SQS_TEST_CHILD"
    );
    let mut builder = SqsPublisher::builder()
        .config(outbox_sqs::SqsConfig::from_env().unwrap())
        .max_attempts(1);
    if let Ok(url) = std::env::var("OUTBOX_SQS_TEST_EXPLICIT_ENDPOINT") {
        builder = builder.endpoint_url(url);
    }
    let publisher = builder.build().await.unwrap();
    let e = event("order.created", "order", "env", 1, json!({"from": "child"}));
    let outcomes = publisher.publish(&[e]).await.unwrap();
    assert_all_published(&outcomes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standard_aws_endpoint_variables_are_honoured() {
    let specific = SqsFixture::start().await;
    let general = SqsFixture::start().await;
    let q = specific.create_queue("env");
    general.create_queue("env");

    let run_child = |vars: Vec<(&'static str, String)>| {
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--ignored",
            "--exact",
            "child_publishes_with_settings_from_the_environment",
            "--nocapture",
        ]);
        for name in [
            "AWS_ENDPOINT_URL",
            "AWS_ENDPOINT_URL_SQS",
            "AWS_PROFILE",
            "AWS_SESSION_TOKEN",
            "OUTBOX_SQS_ROUTES",
            "OUTBOX_SQS_TEST_EXPLICIT_ENDPOINT",
        ] {
            cmd.env_remove(name);
        }
        cmd.env("OUTBOX_SQS_TEST_CHILD", "1")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("OUTBOX_SQS_DEFAULT_QUEUE_URL", &q);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
    };
    let check = |out: std::process::Output| {
        assert!(
            out.status.success(),
            "child failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };

    // AWS_ENDPOINT_URL_SQS.
    check(
        run_child(vec![("AWS_ENDPOINT_URL_SQS", specific.endpoint_url())])
            .await
            .unwrap(),
    );
    assert_eq!(specific.take_messages().len(), 1);
    // AWS_ENDPOINT_URL.
    check(
        run_child(vec![("AWS_ENDPOINT_URL", general.endpoint_url())])
            .await
            .unwrap(),
    );
    assert_eq!(general.take_messages().len(), 1);
    // Both: the service-specific one wins.
    check(
        run_child(vec![
            ("AWS_ENDPOINT_URL", general.endpoint_url()),
            ("AWS_ENDPOINT_URL_SQS", specific.endpoint_url()),
        ])
        .await
        .unwrap(),
    );
    assert_eq!(specific.take_messages().len(), 1);
    assert!(general.messages().is_empty());
    // The builder's endpoint wins over both.
    check(
        run_child(vec![
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:9".into()),
            ("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:9".into()),
            ("OUTBOX_SQS_TEST_EXPLICIT_ENDPOINT", general.endpoint_url()),
        ])
        .await
        .unwrap(),
    );
    assert_eq!(general.take_messages().len(), 1);
}
