//! Parsing connection strings: what goes to tokio-postgres, what is ours, what is refused.

use super::super::{RootCerts, SslMode};
use super::*;

#[test]
fn url_ssl_parameters_are_ours_the_rest_goes_to_tokio_postgres() {
    let c: ConnectConfig = "postgres://u:p%3Fw@h:6543/db?application_name=x&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem"
        .parse()
        .unwrap();
    assert_eq!(c.tls.mode, SslMode::VerifyFull);
    assert_eq!(c.tls.root_certs, RootCerts::File("/etc/ca.pem".into()));
    assert_eq!(c.pg.get_application_name(), Some("x"));
    assert_eq!(c.pg.get_password(), Some(&b"p?w"[..]));
    assert_eq!(c.pg.get_ports(), &[6543]);
    assert_eq!(
        c.pg.get_ssl_mode(),
        tokio_postgres::config::SslMode::Require
    );
}

/// Several hosts in the query's `host=` (libpq's form): each is a host (it was looked up as one
/// name, `a,b`: black-box run); a socket directory among them too.
#[test]
fn hosts_listed_in_the_querys_host_are_several_hosts() {
    use tokio_postgres::config::Host;
    let c: ConnectConfig =
        "postgresql://u:p@/db?host=db1,db2%2C%2Frun%2Fpg&port=5433,5434,5435&sslmode=require"
            .parse()
            .unwrap();
    assert_eq!(
        c.pg.get_hosts(),
        &[
            Host::Tcp("db1".into()),
            Host::Tcp("db2".into()),
            Host::Unix("/run/pg".into())
        ]
    );
    assert_eq!(c.pg.get_ports(), &[5433, 5434, 5435]);
}

/// A client certificate asked for is refused as such (it read as a hint to percent-encode the
/// password: black-box run).
#[test]
fn a_client_certificate_is_refused_as_unsupported() {
    for url in [
        "postgres://u:p@h/db?sslmode=verify-full&sslcert=%2Fc.pem&sslkey=%2Fk.pem",
        "host=h user=u sslkey=/k.pem",
    ] {
        let e = url.parse::<ConnectConfig>().unwrap_err().to_string();
        assert!(
            e.contains("client certificates (sslcert, sslkey, sslpassword) are not supported")
                && !e.contains("percent-encoded"),
            "{url}: {e}"
        );
    }
}

#[test]
fn a_raw_question_mark_in_the_password_does_not_hide_sslmode() {
    // It made our parser read `ss@h/db?sslmode=require` as the query: sslmode stayed `prefer`.
    let c: ConnectConfig = "postgres://u:pa?ss@h/db?sslmode=require".parse().unwrap();
    assert_eq!(c.tls.mode, SslMode::Require);
    assert_eq!(c.pg.get_password(), Some(&b"pa?ss"[..]));
    assert_eq!(c.pg.get_dbname(), Some("db"));
    let c: ConnectConfig = "postgres://h/db?sslmode=disable".parse().unwrap();
    assert_eq!(c.tls.mode, SslMode::Disable);
}

/// A raw `@` in a user name, the password after it read as a bad port, says to percent-encode
/// (black-box run: "invalid value for option `port`" alone); the password is not quoted.
#[test]
fn a_raw_at_sign_in_the_user_name_says_to_percent_encode() {
    for url in [
        "postgres://relay@corp:S3cret@127.0.0.1/db",
        "postgres://relay@corp:S3cret@127.0.0.1:5432/db?sslmode=require",
    ] {
        let e = url.parse::<ConnectConfig>().unwrap_err();
        let text = crate::error_chain(&e);
        assert!(text.contains("percent-encoded: %40"), "{url}: {text}");
        assert!(!text.contains("S3cret"), "{url}: {text}");
    }
    let e = "postgres://127.0.0.1:notaport/db"
        .parse::<ConnectConfig>()
        .unwrap_err();
    assert!(!e.to_string().contains("percent"), "no credentials: {e}");
}

#[test]
fn a_raw_at_sign_in_the_password_or_the_query_is_refused_without_quoting_it() {
    // The password `S3C@RETpw`: tokio-postgres ends it at the first `@`, leaving `RETpw@…` as
    // the host, which every connection error then printed.
    let e = "postgres://postgres:S3C@RETpw@127.0.0.1:5432/db"
        .parse::<ConnectConfig>()
        .unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::Config);
    assert!(e.to_string().contains("%40"), "{e}");
    assert!(!e.to_string().contains("RETpw"), "{e}");
    // An `@` in the query of a URL without credentials (sslmode was lost with it).
    let e = "postgres://h/db?sslmode=require&application_name=a@b"
        .parse::<ConnectConfig>()
        .unwrap_err();
    assert!(e.to_string().contains("%40"), "{e}");
    // With a port, an IPv6 host or several hosts (tokio-postgres then read host:port as
    // user:password, and sslmode was lost silently).
    for url in [
        "postgres://db.internal:5432/app?sslmode=verify-full&application_name=billing@eu",
        "postgres://[::1]/db?application_name=a@b",
        "postgres://h1:5432,h2:5432/db?x=a@b",
    ] {
        let e = url.parse::<ConnectConfig>().unwrap_err();
        assert!(e.to_string().contains("%40"), "{url}: {e}");
    }
    // A role name with a `/`, percent-encoded or as a parameter, is a valid user.
    let c: ConnectConfig = "postgres://a%2Fb@host/db".parse().unwrap();
    assert_eq!(c.pg.get_user(), Some("a/b"));
    let c: ConnectConfig = "postgres://host/db?user=svc/reporting".parse().unwrap();
    assert_eq!(c.pg.get_user(), Some("svc/reporting"));
    // Encoded, both are fine.
    let c: ConnectConfig = "postgres://u:S3C%40RET@h/db?application_name=a%40b&sslmode=require"
        .parse()
        .unwrap();
    assert_eq!(c.pg.get_password(), Some(&b"S3C@RET"[..]));
    assert_eq!(c.pg.get_application_name(), Some("a@b"));
    assert_eq!(c.tls.mode, SslMode::Require);
}

#[test]
fn key_value_form_keeps_quoted_values() {
    let c: ConnectConfig =
        r"host=h user=u password='it\'s x' sslmode = verify-ca sslrootcert='/a b.pem' dbname=d"
            .parse()
            .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(c.tls.mode, SslMode::VerifyCa);
    assert_eq!(c.tls.root_certs, RootCerts::File("/a b.pem".into()));
    assert_eq!(c.pg.get_dbname(), Some("d"));
    assert_eq!(c.pg.get_password(), Some(&b"it's x"[..]));
}

/// sslmode on a Unix socket is ignored, as libpq ignores it (it asked the server for TLS on
/// the socket and failed with "the server does not offer TLS").
#[test]
fn sslmode_does_not_apply_to_unix_sockets() {
    use tokio_postgres::config::SslMode as Pg;
    for url in [
        "postgres://u@%2Fvar%2Frun%2Fpostgresql/db?sslmode=require",
        "host=/var/run/postgresql user=u dbname=db sslmode=verify-full",
    ] {
        let c: ConnectConfig = url.parse().unwrap();
        assert_eq!(c.pg.get_ssl_mode(), Pg::Disable, "{url}");
    }
    let tcp: ConnectConfig = "postgres://u@h/db?sslmode=require".parse().unwrap();
    assert_eq!(tcp.pg.get_ssl_mode(), Pg::Require);
}

/// `hostaddr` without `host`: TLS below verify-full works (tokio-postgres refused TLS
/// without a host name, so with the default `prefer` every server offering TLS failed).
#[test]
fn an_address_without_a_host_name_can_use_tls_below_verify_full() {
    let c: ConnectConfig = "hostaddr=10.1.2.3 user=u sslmode=require".parse().unwrap();
    assert_eq!(
        c.pg.get_hosts(),
        &[tokio_postgres::config::Host::Tcp("10.1.2.3".into())]
    );
    let e = "hostaddr=10.1.2.3 user=u sslmode=verify-full"
        .parse::<ConnectConfig>()
        .unwrap_err();
    assert!(e.to_string().contains("host name"), "{e}");
}

#[test]
fn defaults_and_disable() {
    let c: ConnectConfig = "postgres://u@h/db".parse().unwrap();
    assert_eq!(c.tls.mode, SslMode::Prefer);
    let c: ConnectConfig = "host=h sslmode=disable".parse().unwrap();
    assert_eq!(
        c.pg.get_ssl_mode(),
        tokio_postgres::config::SslMode::Disable
    );
    assert!(
        "postgres://u@h/db?sslmode=verify"
            .parse::<ConnectConfig>()
            .is_err()
    );
    assert!("host=h user".parse::<ConnectConfig>().is_err());
}

/// Missing settings are refused by the parse, before anything is contacted (black-box run:
/// both came from the first connection, as "cannot connect to PostgreSQL at  (…)" with an
/// empty host, and the CLI's exit status was 1, not a usage error's 2).
#[test]
fn a_missing_host_or_ca_is_a_parse_error() {
    for (url, says) in [
        ("", "is empty"),
        ("  ", "is empty"),
        ("postgres:///db", "names no host"),
        ("user=u dbname=d", "names no host"),
    ] {
        let e = url.parse::<ConnectConfig>().unwrap_err();
        assert!(e.to_string().contains(says), "{url:?}: {e}");
    }
    // Unless ~/.postgresql/root.crt exists (libpq's default), which this test cannot assume
    // away: only checked where it does not.
    if Tls::resolve(Some("verify-full"), None)
        .unwrap()
        .missing_roots()
        .is_some()
    {
        for url in [
            "postgres://u@h/db?sslmode=verify-full",
            "host=h sslmode=verify-ca",
        ] {
            let e = url.parse::<ConnectConfig>().unwrap_err();
            assert!(e.to_string().contains("sslrootcert"), "{url}: {e}");
        }
    }
    // A socket ignores sslmode, as libpq does: no CA needed.
    assert!(
        "host=/var/run/postgresql sslmode=verify-full"
            .parse::<ConnectConfig>()
            .is_ok()
    );
}
