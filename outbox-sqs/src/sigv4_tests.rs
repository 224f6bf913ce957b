//! The fast signer against `aws-sigv4` on the same requests: every header it sets must be
//! byte-for-byte what the general signer sets.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_credential_types::Credentials;

use super::*;
use crate::signer::general_sign;

fn request(uri: &str, host: &str, extra: &[(&str, &str)]) -> http::Request<()> {
    let mut b = http::Request::post(uri)
        .header("host", host)
        .header("content-type", "application/x-amz-json-1.0")
        .header("x-amz-target", "AmazonSQS.SendMessageBatch")
        .header("x-amzn-query-mode", "true")
        .header("user-agent", "outbox-sqs/0.1.0");
    for (name, value) in extra {
        b = b.header(*name, *value);
    }
    b.body(()).unwrap()
}

fn credentials(token: Option<&str>) -> Credentials {
    Credentials::new(
        "AKIDEXAMPLE",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        token.map(str::to_owned),
        None,
        "test",
    )
}

/// The headers the fast signer sets equal the general signer's; `false` if it declined.
fn agrees(req: &http::Request<()>, body: &[u8], time: SystemTime, creds: &Credentials) -> bool {
    let keys = SigningKeys::default();
    let mut fast = req.clone();
    if fast_sign(&mut fast, body, time, creds, "eu-west-1", "sqs", &keys).is_none() {
        assert_eq!(
            fast.headers(),
            req.headers(),
            "a declined request is untouched"
        );
        return false;
    }
    let mut general = req.clone();
    general_sign(&mut general, body, time, creds.clone(), "eu-west-1", "sqs").unwrap();
    assert_eq!(fast.headers(), general.headers());
    for name in ["authorization", "x-amz-date"] {
        assert!(fast.headers().contains_key(name), "{name}");
    }
    assert_eq!(
        fast.headers().contains_key("x-amz-security-token"),
        creds.session_token().is_some()
    );
    true
}

#[test]
fn signs_as_aws_sigv4_does() {
    let bodies: [&[u8]; 4] = [
        b"",
        b"{}",
        &[b'x'; 200_000],
        "{\"é\":\"\\u0000\"}".as_bytes(),
    ];
    let times = [
        UNIX_EPOCH,
        UNIX_EPOCH + Duration::from_secs(951_782_399), // 2000-02-28 23:59:59
        UNIX_EPOCH + Duration::from_secs(951_868_800), // 2000-03-01 00:00:00
        UNIX_EPOCH + Duration::from_secs(4_107_542_399), // 2100-02-28 23:59:59
        UNIX_EPOCH + Duration::from_secs(253_402_300_799), // 9999-12-31 23:59:59
        SystemTime::now(),
    ];
    let hosts = [
        (
            "https://sqs.eu-west-1.amazonaws.com/",
            "sqs.eu-west-1.amazonaws.com",
        ),
        ("http://127.0.0.1:4566/", "127.0.0.1:4566"),
        ("http://[::1]:9324/", "[::1]:9324"),
    ];
    for token in [None, Some("FwoGZXIvYXdzEJr//////////wEaDOg+token=")] {
        let creds = credentials(token);
        for (uri, host) in hosts {
            for body in bodies {
                for time in times {
                    assert!(agrees(&request(uri, host, &[]), body, time, &creds));
                }
            }
            // Unsigned headers and extra signed ones, in any order.
            let extra = [("x-amzn-trace-id", "Root=1-5759e988"), ("accept", "*/*")];
            assert!(agrees(
                &request(uri, host, &extra),
                b"{}",
                SystemTime::now(),
                &creds
            ));
        }
    }
}

#[test]
fn other_shapes_are_left_to_aws_sigv4() {
    let creds = credentials(None);
    let now = SystemTime::now();
    let host = "sqs.eu-west-1.amazonaws.com";
    for req in [
        request("https://sqs.eu-west-1.amazonaws.com/prefix", host, &[]),
        request("https://sqs.eu-west-1.amazonaws.com/?a=b", host, &[]),
        request(
            "https://sqs.eu-west-1.amazonaws.com/",
            host,
            &[("x-a", "two  spaces")],
        ),
        request(
            "https://sqs.eu-west-1.amazonaws.com/",
            host,
            &[("x-a", " padded")],
        ),
        request(
            "https://sqs.eu-west-1.amazonaws.com/",
            host,
            &[("x-a", "1"), ("x-a", "2")],
        ),
        request(
            "https://sqs.eu-west-1.amazonaws.com/",
            host,
            &[("x-amz-date", "x")],
        ),
    ] {
        assert!(!agrees(&req, b"{}", now, &creds), "{req:?}");
    }
    // Before 1970: no date to write.
    let before = UNIX_EPOCH - Duration::from_secs(1);
    let req = request("https://sqs.eu-west-1.amazonaws.com/", host, &[]);
    assert!(!agrees(&req, b"{}", before, &creds));
}

#[test]
fn the_signing_key_follows_the_day_and_the_secret() {
    let keys = SigningKeys::default();
    let day1 = *b"20261204";
    let day2 = *b"20261205";
    let a = keys.key(&day1, "secret-a", "eu-west-1", "sqs");
    assert_eq!(a, keys.key(&day1, "secret-a", "eu-west-1", "sqs"));
    let b = keys.key(&day1, "secret-b", "eu-west-1", "sqs");
    assert_ne!(a, b);
    let c = keys.key(&day2, "secret-b", "eu-west-1", "sqs");
    assert_ne!(b, c);
    // After a change, the first key is derived again, not served stale.
    assert_eq!(a, keys.key(&day1, "secret-a", "eu-west-1", "sqs"));
    // AWS's documented example (SigV4 "Examples of how to derive a signing key").
    let doc = SigningKeys::default().key(
        b"20120215",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        "us-east-1",
        "iam",
    );
    let mut hex = String::new();
    push_hex(&mut hex, &doc);
    assert_eq!(
        hex,
        "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d"
    );
}

#[test]
fn hmac_matches_rfc_4231() {
    // Test case 2, and test case 6 (a key longer than the block).
    let mut hex = String::new();
    push_hex(&mut hex, &hmac(b"Jefe", b"what do ya want for nothing?"));
    assert_eq!(
        hex,
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
    hex.clear();
    push_hex(
        &mut hex,
        &hmac(
            &[0xaa; 131],
            b"Test Using Larger Than Block-Size Key - Hash Key First",
        ),
    );
    assert_eq!(
        hex,
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
    );
}

#[test]
fn dates_are_written_in_utc() {
    let at = |secs: u64| {
        let d = amz_date(UNIX_EPOCH + Duration::from_secs(secs)).unwrap();
        String::from_utf8(d.to_vec()).unwrap()
    };
    assert_eq!(at(0), "19700101T000000Z");
    assert_eq!(at(951_782_400), "20000229T000000Z");
    assert_eq!(at(1_796_083_199), "20261130T235959Z");
    assert_eq!(at(253_402_300_799), "99991231T235959Z");
    assert!(amz_date(UNIX_EPOCH + Duration::from_secs(253_402_300_800)).is_none());
}
