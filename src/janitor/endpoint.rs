//! Parsing and vetting the browser WebSocket URL handed to the janitor. Only
//! loopback endpoints are accepted: the janitor must never carry CDP to
//! another host. No I/O here.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::socket::JanitorError;

/// A vetted `ws://<loopback>:<port>/<path>` endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct WsEndpoint {
    pub(super) address: SocketAddr,
    /// The URL as sent in the handshake request (Host is the loopback IP).
    pub(super) url: String,
}

/// Accepts `ws://127.0.0.1:PORT/...`, `ws://localhost:PORT/...` and
/// `ws://[::1]:PORT/...`.
pub(super) fn parse_ws_url(url: &str) -> Result<WsEndpoint, JanitorError> {
    let invalid = || JanitorError::InvalidUrl(url.to_owned());
    let rest = url.strip_prefix("ws://").ok_or_else(invalid)?;
    let (authority, path) = match rest.find('/') {
        Some(slash) => rest.split_at(slash),
        None => (rest, "/"),
    };
    let (host, port) = authority.rsplit_once(':').ok_or_else(invalid)?;
    let port: u16 = port.parse().map_err(|_| invalid())?;
    let ip = match host {
        "127.0.0.1" | "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
        "[::1]" => IpAddr::V6(Ipv6Addr::LOCALHOST),
        _ => return Err(invalid()),
    };
    if port == 0 {
        return Err(invalid());
    }
    let address = SocketAddr::new(ip, port);
    let host = match ip {
        IpAddr::V4(_) => "127.0.0.1".to_owned(),
        IpAddr::V6(_) => "[::1]".to_owned(),
    };
    Ok(WsEndpoint {
        address,
        url: format!("ws://{host}:{port}{path}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(url: &str, expect: Option<&str>) {
        let got = parse_ws_url(url).ok().map(|endpoint| endpoint.url);
        assert_eq!(got.as_deref(), expect, "{url}");
    }

    #[test]
    fn only_loopback_ws_urls_are_accepted() {
        check(
            "ws://127.0.0.1:9222/devtools/browser/abc",
            Some("ws://127.0.0.1:9222/devtools/browser/abc"),
        );
        check(
            "ws://localhost:9222/devtools/browser",
            Some("ws://127.0.0.1:9222/devtools/browser"),
        );
        check(
            "ws://[::1]:9222/devtools/browser/x",
            Some("ws://[::1]:9222/devtools/browser/x"),
        );
        check("ws://127.0.0.1:9222", Some("ws://127.0.0.1:9222/"));
        check("ws://10.0.0.1:9222/devtools/browser", None);
        check("ws://evil.example:9222/devtools/browser", None);
        check("wss://127.0.0.1:9222/devtools/browser", None);
        check("http://127.0.0.1:9222/json", None);
        check("ws://127.0.0.1:0/devtools/browser", None);
        check("ws://127.0.0.1:port/devtools/browser", None);
        check("ws://127.0.0.1/devtools/browser", None);
    }
}
