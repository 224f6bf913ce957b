//! SigV4 for the direct transport's own requests, written straight into one buffer.
//!
//! The direct transport sends one shape of request: `POST /` with no query and a handful of
//! single-valued headers. For that shape the canonical request, the string to sign and the
//! `authorization` header are written here without the general signer's header map, sorting and
//! formatting, and the signing key (four HMACs of the secret, the date, the region and the
//! service) is derived once a day per secret instead of once per request. Anything else — a path
//! other than `/`, a query, a repeated header, a header value with spaces or bytes outside visible
//! ASCII — is left to `aws-sigv4` ([`fast_sign`] returns `None`). The tests check the two agree.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_credential_types::Credentials;
use http::HeaderValue;
use http::header::AUTHORIZATION;
use sha2::{Digest, Sha256};

use crate::message::push_hex;

/// Headers never signed (`aws-sigv4`'s defaults): changed by proxies, or computed by signing.
const UNSIGNED: [&str; 4] = [
    "authorization",
    "user-agent",
    "x-amzn-trace-id",
    "transfer-encoding",
];
const X_AMZ_DATE: &str = "x-amz-date";
const X_AMZ_SECURITY_TOKEN: &str = "x-amz-security-token";
const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// The signing key of the last (day, secret) signed with. It is as secret as the secret itself:
/// no `Debug`, never logged.
#[derive(Default)]
pub(crate) struct SigningKeys {
    last: Mutex<Option<Key>>,
}

struct Key {
    day: [u8; 8],
    secret: String,
    key: [u8; 32],
}

impl SigningKeys {
    /// The key for `day` (`YYYYMMDD`), `secret`, `region` and `service`, derived again only when
    /// the day or the secret changed.
    fn key(&self, day: &[u8; 8], secret: &str, region: &str, service: &str) -> [u8; 32] {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = last.as_ref() {
            if &k.day == day && k.secret == secret {
                return k.key;
            }
        }
        let mut prefixed = Vec::with_capacity(4 + secret.len());
        prefixed.extend_from_slice(b"AWS4");
        prefixed.extend_from_slice(secret.as_bytes());
        let k = hmac(&prefixed, day);
        let k = hmac(&k, region.as_bytes());
        let k = hmac(&k, service.as_bytes());
        let key = hmac(&k, b"aws4_request");
        *last = Some(Key {
            day: *day,
            secret: secret.to_owned(),
            key,
        });
        key
    }
}

/// HMAC-SHA256 (RFC 2104) of `data` under `key`.
fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    inner.update(data);
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// `time` as SigV4's `YYYYMMDDTHHMMSSZ` (UTC); `None` before 1970 or after 9999.
fn amz_date(time: SystemTime) -> Option<[u8; 16]> {
    let secs = time.duration_since(UNIX_EPOCH).ok()?.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (H. Hinnant's `civil_from_days`).
    let z = i64::try_from(days).ok()? + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    if !(1970..=9999).contains(&year) {
        return None;
    }
    let mut out = [b'0'; 16];
    let mut put = |at: usize, width: usize, mut n: u64| {
        for i in (at..at + width).rev() {
            out[i] = b'0' + (n % 10) as u8;
            n /= 10;
        }
    };
    put(0, 4, year as u64);
    put(4, 2, month as u64);
    put(6, 2, day as u64);
    put(9, 2, rem / 3600);
    put(11, 2, rem % 3600 / 60);
    put(13, 2, rem % 60);
    out[8] = b'T';
    out[15] = b'Z';
    Some(out)
}

/// A header value as signed: visible ASCII only (no spaces, so nothing to trim or fold).
fn plain(value: &HeaderValue) -> Option<&str> {
    let bytes = value.as_bytes();
    if bytes.iter().all(|b| b.is_ascii_graphic()) {
        std::str::from_utf8(bytes).ok()
    } else {
        None
    }
}

/// Signs `request` as `aws-sigv4` with its default settings would (headers, double-encoded
/// normalised path, no payload-hash header, session token signed), adding `x-amz-date`,
/// `x-amz-security-token` (temporary credentials) and `authorization`. `None`, with `request`
/// untouched, when the request is not of the one shape this handles.
pub(crate) fn fast_sign(
    request: &mut http::Request<()>,
    body: &[u8],
    time: SystemTime,
    credentials: &Credentials,
    region: &str,
    service: &str,
    keys: &SigningKeys,
) -> Option<()> {
    if request.uri().path() != "/" || request.uri().query().is_some() {
        return None;
    }
    let date = amz_date(time)?;
    let date_str = std::str::from_utf8(&date).ok()?;
    let token = match credentials.session_token() {
        Some(t) => {
            let mut value = HeaderValue::from_str(t).ok()?;
            value.set_sensitive(true);
            Some(value)
        }
        None => None,
    };
    // The signed headers, sorted by name: the request's own plus the two added here.
    let mut signed: Vec<(&str, &str)> = Vec::with_capacity(request.headers().len() + 2);
    for (name, value) in request.headers() {
        let name = name.as_str();
        if UNSIGNED.contains(&name) {
            continue;
        }
        if name == X_AMZ_DATE || name == X_AMZ_SECURITY_TOKEN {
            return None;
        }
        signed.push((name, plain(value)?));
    }
    signed.push((X_AMZ_DATE, date_str));
    if let Some(token) = &token {
        signed.push((X_AMZ_SECURITY_TOKEN, plain(token)?));
    }
    signed.sort_unstable_by(|a, b| a.0.cmp(b.0));
    if signed.windows(2).any(|w| w[0].0 == w[1].0) {
        return None;
    }

    let mut text = String::with_capacity(512);
    text.push_str(request.method().as_str());
    text.push_str("\n/\n\n");
    for (name, value) in &signed {
        text.push_str(name);
        text.push(':');
        text.push_str(value);
        text.push('\n');
    }
    text.push('\n');
    let names_start = text.len();
    for (i, (name, _)) in signed.iter().enumerate() {
        if i > 0 {
            text.push(';');
        }
        text.push_str(name);
    }
    let names_end = text.len();
    text.push('\n');
    push_hex(&mut text, &Sha256::digest(body));
    let canonical_hash = Sha256::digest(text.as_bytes());

    // The string to sign goes after the canonical request in the same buffer.
    let day: [u8; 8] = date[..8].try_into().ok()?;
    let to_sign_start = text.len();
    text.push_str(ALGORITHM);
    text.push('\n');
    text.push_str(date_str);
    text.push('\n');
    let scope_start = text.len();
    text.push_str(&date_str[..8]);
    text.push('/');
    text.push_str(region);
    text.push('/');
    text.push_str(service);
    text.push_str("/aws4_request");
    let scope_end = text.len();
    text.push('\n');
    push_hex(&mut text, &canonical_hash);
    let key = keys.key(&day, credentials.secret_access_key(), region, service);
    let signature = hmac(&key, &text.as_bytes()[to_sign_start..]);

    let mut auth = String::with_capacity(256);
    auth.push_str(ALGORITHM);
    auth.push_str(" Credential=");
    auth.push_str(credentials.access_key_id());
    auth.push('/');
    auth.push_str(&text[scope_start..scope_end]);
    auth.push_str(", SignedHeaders=");
    auth.push_str(&text[names_start..names_end]);
    auth.push_str(", Signature=");
    push_hex(&mut auth, &signature);
    let mut auth = HeaderValue::from_str(&auth).ok()?;
    auth.set_sensitive(true);
    let date_value = HeaderValue::from_bytes(&date).ok()?;

    let headers = request.headers_mut();
    headers.insert(X_AMZ_DATE, date_value);
    if let Some(token) = token {
        headers.insert(X_AMZ_SECURITY_TOKEN, token);
    }
    headers.insert(AUTHORIZATION, auth);
    Some(())
}

#[cfg(test)]
#[path = "sigv4_tests.rs"]
mod tests;
