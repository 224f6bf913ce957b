//! Checking a request's SigV4 signature as SQS does: the signature is computed again from what
//! arrived — method, path, the headers the client says it signed, the body, its `x-amz-date` — with
//! the secret key the test configured, and compared.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use hyper::http::request::Parts;

use crate::sqs_error::SqsError;
use crate::{State, lock};

/// How far a request's `x-amz-date` may be from the server's clock (SQS: 5 minutes).
const MAX_SKEW: Duration = Duration::from_secs(300);

/// The checks SQS makes on a request before its action, at the server's time `now`: the request
/// time within [`MAX_SKEW`] of it (403 `RequestTimeTooSkewed`), and, with
/// [`verify_signatures`](crate::SqsFixture::verify_signatures), the signature (403
/// `SignatureDoesNotMatch`). Also records the `User-Agent`.
pub(crate) fn check(
    state: &State,
    parts: &Parts,
    body: &[u8],
    now: SystemTime,
) -> Result<(), SqsError> {
    if let Some(agent) = parts
        .headers
        .get("user-agent")
        .and_then(|v| v.to_str().ok())
    {
        *lock(&state.last_user_agent) = Some(agent.to_owned());
    }
    let sent = parts
        .headers
        .get("x-amz-date")
        .and_then(|v| v.to_str().ok())
        .and_then(|d| parse_amz_date(d).ok());
    if let Some(sent) = sent {
        let off = sent.duration_since(now).unwrap_or_else(|e| e.duration());
        if off > MAX_SKEW {
            return Err(SqsError::new(
                403,
                "RequestTimeTooSkewed",
                "RequestTimeTooSkewed",
                "The difference between the request time and the server's time is too large.",
            ));
        }
    }
    let key = lock(&state.signing_key).clone();
    if let Some((access_key, secret_key)) = key {
        verify(parts, body, &access_key, &secret_key)
            .map_err(|e| SqsError::new(403, "SignatureDoesNotMatch", "SignatureDoesNotMatch", e))?;
        state
            .signatures_verified
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(())
}

/// The parts of an `Authorization: AWS4-HMAC-SHA256 …` header.
struct Authorization<'a> {
    access_key: &'a str,
    region: &'a str,
    service: &'a str,
    signed_headers: Vec<&'a str>,
    signature: &'a str,
}

fn parse_authorization(header: &str) -> Result<Authorization<'_>, String> {
    let rest = header
        .strip_prefix("AWS4-HMAC-SHA256 ")
        .ok_or("not an AWS4-HMAC-SHA256 authorization")?;
    let mut credential = None;
    let mut signed = None;
    let mut signature = None;
    for part in rest.split(',').map(str::trim) {
        if let Some(v) = part.strip_prefix("Credential=") {
            credential = Some(v);
        } else if let Some(v) = part.strip_prefix("SignedHeaders=") {
            signed = Some(v);
        } else if let Some(v) = part.strip_prefix("Signature=") {
            signature = Some(v);
        }
    }
    let credential = credential.ok_or("no Credential")?;
    let scope: Vec<&str> = credential.split('/').collect();
    let [access_key, _date, region, service, "aws4_request"] = scope.as_slice() else {
        return Err(format!("malformed credential scope `{credential}`"));
    };
    Ok(Authorization {
        access_key,
        region,
        service,
        signed_headers: signed.ok_or("no SignedHeaders")?.split(';').collect(),
        signature: signature.ok_or("no Signature")?,
    })
}

/// `YYYYMMDDTHHMMSSZ` as a time.
fn parse_amz_date(s: &str) -> Result<SystemTime, String> {
    let bad = || format!("malformed x-amz-date `{s}`");
    let b = s.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return Err(bad());
    }
    let num = |from: usize, to: usize| -> Result<i64, String> {
        s.get(from..to).and_then(|d| d.parse().ok()).ok_or_else(bad)
    };
    let (y, m, d) = (num(0, 4)?, num(4, 6)?, num(6, 8)?);
    let (hh, mm, ss) = (num(9, 11)?, num(11, 13)?, num(13, 15)?);
    // Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    u64::try_from(secs)
        .map(|secs| UNIX_EPOCH + Duration::from_secs(secs))
        .map_err(|_| bad())
}

/// Checks the signature of a request whose head is `parts` and body `body`, signed with
/// `access_key` / `secret_key`. `Err` says what does not match.
pub(crate) fn verify(
    parts: &Parts,
    body: &[u8],
    access_key: &str,
    secret_key: &str,
) -> Result<(), String> {
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| format!("no `{name}` header"))
    };
    let auth = parse_authorization(header("authorization")?)?;
    if auth.access_key != access_key {
        return Err(format!("unknown access key `{}`", auth.access_key));
    }
    let time = parse_amz_date(header("x-amz-date")?)?;
    let mut headers = Vec::with_capacity(auth.signed_headers.len());
    for name in &auth.signed_headers {
        headers.push((*name, header(name)?));
    }
    // What SQS quotes back when the signature does not match: the canonical request it
    // expected, every signed header with its value (the session token's too).
    let canonical_headers: String = headers
        .iter()
        .map(|(name, value)| format!("{name}:{value}\n"))
        .collect();
    let signed_names = auth.signed_headers.join(";");
    let token = parts
        .headers
        .get("x-amz-security-token")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let identity = Credentials::new(access_key, secret_key, token, None, "fixture").into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(auth.region)
        .name(auth.service)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| e.to_string())?
        .into();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let uri = format!("http://{}{path}", header("host")?);
    let request = SignableRequest::new(
        parts.method.as_str(),
        uri,
        headers.into_iter(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| e.to_string())?;
    let (_, expected) = sign(request, &params)
        .map_err(|e| e.to_string())?
        .into_parts();
    if expected == auth.signature {
        Ok(())
    } else {
        Err(format!(
            "The request signature we calculated does not match the signature you provided. \
             Check your AWS Secret Access Key and signing method. Consult the service \
             documentation for details.\n\nThe Canonical String for this request should have \
             been\n'{method}\n{path}\n\n{canonical_headers}\n{signed_names}\n'\n\nThe \
             String-to-Sign should have been\n'AWS4-HMAC-SHA256\n'",
            method = parts.method.as_str(),
            path = parts.uri.path(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amz_dates() {
        assert_eq!(parse_amz_date("19700101T000000Z").unwrap(), UNIX_EPOCH);
        assert_eq!(
            parse_amz_date("20150830T123600Z").unwrap(),
            UNIX_EPOCH + Duration::from_secs(1_440_938_160)
        );
        assert!(parse_amz_date("2015-08-30").is_err());
    }

    #[test]
    fn authorization_headers() {
        let a = parse_authorization(
            "AWS4-HMAC-SHA256 Credential=AKID/20150830/us-east-1/sqs/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date, Signature=abc",
        )
        .unwrap();
        assert_eq!(
            (a.access_key, a.region, a.service, a.signature),
            ("AKID", "us-east-1", "sqs", "abc")
        );
        assert_eq!(a.signed_headers, ["content-type", "host", "x-amz-date"]);
        assert!(parse_authorization("Basic x").is_err());
    }
}
