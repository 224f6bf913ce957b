//! The password of each new connection, asked for when the connection is made.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;

use futures::FutureExt;

/// A password (or an auth token). `Debug` and `Display` never show it.
#[derive(Clone)]
pub struct Password(String);

impl Password {
    /// Wraps a secret.
    pub fn new(secret: impl Into<String>) -> Password {
        Password(secret.into())
    }

    /// The secret itself, for the connection's start-up message only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

/// Gives the password of every *new* connection (connections already open keep theirs): an RDS IAM
/// auth token, a secret rotated by a vault, ...
///
/// Install one with [`PgConnector::password_provider`](super::PgConnector::password_provider).
pub trait PasswordProvider: Send + Sync + 'static {
    /// Why no password could be had. Its text is shown to operators: never put the secret in it.
    type Error: StdError + Send + Sync + 'static;

    /// The password to use for the connection being opened now.
    fn password(&self) -> impl Future<Output = Result<Password, Self::Error>> + Send;
}

pub(crate) type BoxError = Box<dyn StdError + Send + Sync>;
type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The object-safe form of [`PasswordProvider`].
pub(crate) trait DynPasswordProvider: Send + Sync {
    fn password(&self) -> BoxFuture<'_, Result<Password, BoxError>>;
}

impl<P: PasswordProvider> DynPasswordProvider for P {
    fn password(&self) -> BoxFuture<'_, Result<Password, BoxError>> {
        Box::pin(async move {
            // The provider is the caller's code: one that panics fails this connection attempt
            // (retried like any other failure) instead of the task opening it — the relay's
            // LISTEN task died silently, a worker took down its batch.
            let asked = AssertUnwindSafe(async { PasswordProvider::password(self).await });
            match asked.catch_unwind().await {
                Ok(answer) => answer.map_err(|e| Box::new(e) as BoxError),
                Err(payload) => Err(format!(
                    "the password provider panicked: {}",
                    crate::relay::panic_message(payload.as_ref())
                )
                .into()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts() {
        let p = Password::new("s3cret-token");
        assert_eq!(format!("{p:?}"), "Password(<redacted>)");
        assert_eq!(p.expose(), "s3cret-token");
    }
}
