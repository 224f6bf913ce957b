//! Opening one connection as libpq does: every host of the connection string in turn (shuffled
//! with `load_balance_hosts=random`), and every address a host name resolves to, each attempt —
//! TCP connect, TLS handshake, login and the `target_session_attrs` check — bounded by
//! `connect_timeout` on its own. tokio-postgres bounds only the TCP connect, and a bound on the
//! whole let a first host that accepts and then stalls use up the time of the others.

use std::net::IpAddr;
use std::time::Duration;

use rand::seq::SliceRandom;
use tokio_postgres::config::{Host, LoadBalanceHosts};
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, Config, Connection, Socket};

/// Why no attempt succeeded: the last attempt's failure.
pub(crate) enum AttemptError {
    /// The server or the network refused (tokio-postgres' error).
    Pg(tokio_postgres::Error),
    /// No answer within the attempt's time.
    Timeout(Duration),
}

/// `pg` reduced to host number `i` (and, when given, one address of it): every other setting kept.
fn single(pg: &Config, i: usize, addr: Option<IpAddr>) -> Config {
    let mut one = Config::new();
    if let Some(user) = pg.get_user() {
        one.user(user);
    }
    if let Some(password) = pg.get_password() {
        one.password(password);
    }
    if let Some(dbname) = pg.get_dbname() {
        one.dbname(dbname);
    }
    if let Some(options) = pg.get_options() {
        one.options(options);
    }
    if let Some(name) = pg.get_application_name() {
        one.application_name(name);
    }
    one.ssl_mode(pg.get_ssl_mode())
        .ssl_negotiation(pg.get_ssl_negotiation())
        .keepalives(pg.get_keepalives())
        .keepalives_idle(pg.get_keepalives_idle())
        .target_session_attrs(pg.get_target_session_attrs())
        .channel_binding(pg.get_channel_binding())
        .load_balance_hosts(LoadBalanceHosts::Disable);
    if let Some(interval) = pg.get_keepalives_interval() {
        one.keepalives_interval(interval);
    }
    if let Some(retries) = pg.get_keepalives_retries() {
        one.keepalives_retries(retries);
    }
    if let Some(t) = pg.get_connect_timeout() {
        one.connect_timeout(*t);
    }
    if let Some(t) = pg.get_tcp_user_timeout() {
        one.tcp_user_timeout(*t);
    }
    match pg.get_hosts().get(i) {
        Some(Host::Tcp(name)) => {
            one.host(name);
        }
        #[cfg(unix)]
        Some(Host::Unix(path)) => {
            one.host_path(path);
        }
        None => {}
    }
    if let Some(ip) = addr.or_else(|| pg.get_hostaddrs().get(i).copied()) {
        one.hostaddr(ip);
    }
    let ports = pg.get_ports();
    one.port(ports.get(i).or(ports.first()).copied().unwrap_or(5432));
    one
}

/// Connects with `pg` through `tls`: each host in turn, each address of a host name in turn, each
/// attempt within `per_attempt` (the name's resolution too). The first connection that opens is
/// returned, else the last attempt's failure.
pub(crate) async fn connect_each<T>(
    pg: &Config,
    tls: T,
    per_attempt: Duration,
) -> Result<(Client, Connection<Socket, T::Stream>), AttemptError>
where
    T: MakeTlsConnect<Socket> + Clone,
{
    let hosts = pg.get_hosts().len().max(pg.get_hostaddrs().len());
    let random = pg.get_load_balance_hosts() == LoadBalanceHosts::Random;
    let mut order: Vec<usize> = (0..hosts.max(1)).collect();
    if random {
        order.shuffle(&mut rand::rng());
    }
    let mut last = AttemptError::Timeout(per_attempt);
    for i in order {
        // A host name's addresses, each its own attempt; `None`: one attempt that leaves the name
        // to tokio-postgres (an address given as hostaddr, a socket, or a name that did not
        // resolve here — its own error then says so).
        let mut addrs: Vec<Option<IpAddr>> = vec![None];
        if let (Some(Host::Tcp(name)), None) = (pg.get_hosts().get(i), pg.get_hostaddrs().get(i)) {
            let port = pg
                .get_ports()
                .get(i)
                .or(pg.get_ports().first())
                .copied()
                .unwrap_or(5432);
            let lookup = tokio::net::lookup_host((name.as_str(), port));
            if let Ok(Ok(found)) = tokio::time::timeout(per_attempt, lookup).await {
                let found: Vec<Option<IpAddr>> = found.map(|a| Some(a.ip())).collect();
                if !found.is_empty() {
                    addrs = found;
                }
            }
            if random {
                addrs.shuffle(&mut rand::rng());
            }
        }
        for addr in addrs {
            let one = single(pg, i, addr);
            match tokio::time::timeout(per_attempt, one.connect(tls.clone())).await {
                Ok(Ok(opened)) => return Ok(opened),
                Ok(Err(e)) => last = AttemptError::Pg(e),
                Err(_) => last = AttemptError::Timeout(per_attempt),
            }
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn a_single_host_keeps_every_other_setting() {
        let pg = Config::from_str(
            "postgres://u:p@a:5433,b:5434/db?application_name=x&options=-c%20x%3D1&connect_timeout=3\
             &target_session_attrs=read-write&keepalives_idle=7",
        )
        .unwrap();
        let one = single(&pg, 1, Some("10.0.0.9".parse().unwrap()));
        assert_eq!(one.get_hosts(), &[Host::Tcp("b".into())]);
        assert_eq!(
            one.get_hostaddrs(),
            &["10.0.0.9".parse::<IpAddr>().unwrap()]
        );
        assert_eq!(one.get_ports(), &[5434]);
        assert_eq!(one.get_user(), Some("u"));
        assert_eq!(one.get_password(), Some(&b"p"[..]));
        assert_eq!(one.get_dbname(), Some("db"));
        assert_eq!(one.get_application_name(), Some("x"));
        assert_eq!(one.get_options(), Some("-c x=1"));
        assert_eq!(one.get_connect_timeout(), Some(&Duration::from_secs(3)));
        assert_eq!(one.get_keepalives_idle(), Duration::from_secs(7));
        assert_eq!(
            one.get_target_session_attrs(),
            tokio_postgres::config::TargetSessionAttrs::ReadWrite
        );
        // One port for every host.
        let pg = Config::from_str("host=a,b port=6000 user=u").unwrap();
        assert_eq!(single(&pg, 0, None).get_ports(), &[6000]);
    }
}
