//! Who may read the live view: the one-time secrets `browser-pilot view` hands out in the URL's
//! fragment, the in-memory tokens the page exchanges them for, and the `Host` and `Origin`
//! checks that refuse other sites' pages (DNS rebinding, cross-origin requests).
//!
//! All in memory: a secret or token is never written anywhere. Pure bookkeeping, no I/O.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use ring::rand::{SecureRandom, SystemRandom};

/// How long a secret may wait for its page: the browser opens the URL within seconds.
pub const SECRET_TTL: Duration = Duration::from_secs(120);

/// Secrets waiting for their page at once; the oldest is forgotten beyond it.
const MAX_SECRETS: usize = 16;

/// Tokens (open pages) at once; the oldest is forgotten beyond it, and its page must be opened
/// afresh with a new URL.
const MAX_TOKENS: usize = 16;

/// 256 random bits as lowercase hex.
fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system random source works");
    crate::hex::encode(&bytes)
}

/// Equal without a timing difference that depends on where two strings first differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The view's gate for one server (its port).
pub struct Gate {
    port: u16,
    secrets: Mutex<Vec<(String, Instant)>>,
    tokens: Mutex<Vec<String>>,
}

impl Gate {
    pub fn new(port: u16) -> Gate {
        Gate {
            port,
            secrets: Mutex::new(Vec::new()),
            tokens: Mutex::new(Vec::new()),
        }
    }

    /// The one `Host` the server answers: its own loopback address and port.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The view's origin, the only `Origin` it accepts.
    pub fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A fresh one-time secret.
    pub fn issue_secret(&self) -> String {
        let secret = random_hex();
        let mut secrets = self.secrets.lock().expect("secrets lock");
        secrets.retain(|(_, issued)| issued.elapsed() < SECRET_TTL);
        if secrets.len() >= MAX_SECRETS {
            secrets.remove(0);
        }
        secrets.push((secret.clone(), Instant::now()));
        secret
    }

    /// Spends a secret for a token: each secret buys one token, once, within `SECRET_TTL`.
    pub fn exchange(&self, secret: &str) -> Option<String> {
        let mut secrets = self.secrets.lock().expect("secrets lock");
        secrets.retain(|(_, issued)| issued.elapsed() < SECRET_TTL);
        let position = secrets.iter().position(|(s, _)| same(s, secret))?;
        secrets.remove(position);
        drop(secrets);
        let token = random_hex();
        let mut tokens = self.tokens.lock().expect("tokens lock");
        if tokens.len() >= MAX_TOKENS {
            tokens.remove(0);
        }
        tokens.push(token.clone());
        Some(token)
    }

    pub fn token_ok(&self, token: &str) -> bool {
        let tokens = self.tokens.lock().expect("tokens lock");
        tokens.iter().any(|t| same(t, token))
    }

    /// Only the server's own `host:port`: a name that resolves to 127.0.0.1 (DNS rebinding) is
    /// another site.
    pub fn host_ok(&self, host: Option<&str>) -> bool {
        host.is_some_and(|h| h == self.host())
    }

    /// No `Origin` (a same-origin GET, a terminal client) or exactly the view's own.
    pub fn origin_ok(&self, origin: Option<&str>) -> bool {
        origin.is_none_or(|o| o == self.origin())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_buys_one_token_once() {
        let gate = Gate::new(4000);
        let secret = gate.issue_secret();
        assert_eq!(secret.len(), 64);
        assert!(gate.exchange("0").is_none());
        let token = gate.exchange(&secret).expect("the secret is good once");
        assert!(gate.token_ok(&token));
        assert!(!gate.token_ok(&secret));
        assert!(gate.exchange(&secret).is_none(), "a secret is spent");
        assert!(!gate.token_ok(""));
    }

    #[test]
    fn only_the_servers_own_host_and_origin_pass() {
        let gate = Gate::new(4000);
        assert!(gate.host_ok(Some("127.0.0.1:4000")));
        for host in [
            None,
            Some("localhost:4000"),
            Some("evil.test:4000"),
            Some("127.0.0.1:4001"),
        ] {
            assert!(!gate.host_ok(host), "{host:?}");
        }
        assert!(gate.origin_ok(None));
        assert!(gate.origin_ok(Some("http://127.0.0.1:4000")));
        for origin in [
            "http://evil.test",
            "null",
            "http://127.0.0.1:4001",
            "http://localhost:4000",
        ] {
            assert!(!gate.origin_ok(Some(origin)), "{origin}");
        }
    }
}
