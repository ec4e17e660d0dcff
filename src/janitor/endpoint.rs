//! Parsing and vetting the browser WebSocket URL handed to the janitor. A URL on the command
//! line must be loopback; only a remote browser the user listed in `remote-browsers.toml`
//! (handed over in `REMOTE_ENV`, with its handshake headers and CA file) may name another host,
//! over `wss://`, or over plain `ws://` when its entry allows it; its `http(s)://` form names an
//! engine whose `/json/version` gives the WebSocket URL. No I/O here.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;

use super::socket::JanitorError;

/// A vetted `ws://<loopback>:<port>/<path>` endpoint, or a remote browser's.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct WsEndpoint {
    /// The loopback address (unspecified for a remote endpoint, which has `remote`).
    pub(super) address: SocketAddr,
    /// The URL as sent in the handshake request (Host is the loopback IP).
    pub(super) url: String,
    /// Extra handshake headers (a remote browser's, maybe carrying its token).
    pub(super) headers: Vec<(String, String)>,
    /// A remote endpoint's `host:port`, resolved when connecting.
    pub(super) remote: Option<String>,
    /// A `wss://` (or `https://`) endpoint's TLS: the server name its certificate must carry.
    pub(super) tls: Option<Tls>,
    /// `url` is an `http(s)://` base whose `/json/version` names the WebSocket (see
    /// `socket::resolve_json_version`).
    pub(super) json_version: bool,
}

/// How a `wss://` endpoint's certificate is checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Tls {
    /// The URL's host (a DNS name or an IP address).
    pub(super) server_name: String,
    /// A PEM CA bundle trusted besides the web-PKI roots.
    pub(super) ca_file: Option<PathBuf>,
}

/// Never shows the URL or the headers (a remote one may carry a token).
impl std::fmt::Debug for WsEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WsEndpoint({})", self.address)
    }
}

/// What the Broker hands a janitor for a remote browser, in `REMOTE_ENV`.
#[derive(serde::Deserialize)]
struct RemoteSpec {
    url: String,
    #[serde(default)]
    headers: Vec<(String, String)>,
    #[serde(default, rename = "allowInsecure")]
    allow_insecure: bool,
    #[serde(default, rename = "caFile")]
    ca_file: Option<PathBuf>,
}

/// Parses the remote spec (JSON) of `REMOTE_ENV`. Errors never quote it.
pub(super) fn parse_remote_spec(spec: &str) -> Result<WsEndpoint, JanitorError> {
    let invalid = || JanitorError::InvalidUrl("the remote browser's endpoint".to_owned());
    let spec: RemoteSpec = serde_json::from_str(spec).map_err(|_| invalid())?;
    let url = url::Url::parse(&spec.url).map_err(|_| invalid())?;
    let host = url
        .host_str()
        .filter(|host| !host.is_empty())
        .ok_or_else(invalid)?;
    let port = url.port_or_known_default().ok_or_else(invalid)?;
    let loopback = {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        bare.eq_ignore_ascii_case("localhost")
            || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    };
    let tls = match url.scheme() {
        "wss" | "https" => Some(Tls {
            server_name: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            ca_file: spec.ca_file,
        }),
        "ws" | "http" if (loopback || spec.allow_insecure) && spec.ca_file.is_none() => None,
        _ => return Err(invalid()),
    };
    let json_version = matches!(url.scheme(), "http" | "https");
    if port == 0 {
        return Err(invalid());
    }
    Ok(WsEndpoint {
        address: SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        url: spec.url,
        headers: spec.headers,
        remote: Some(format!("{host}:{port}")),
        tls,
        json_version,
    })
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
        headers: Vec::new(),
        remote: None,
        tls: None,
        json_version: false,
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

    #[test]
    fn remote_specs_need_loopback_or_allow_insecure() {
        let spec = |url: &str, insecure: bool| {
            let json = serde_json::json!({"url": url, "headers": [["X-Key", "k"]], "allowInsecure": insecure});
            parse_remote_spec(&json.to_string())
        };
        let local = spec("ws://localhost:3000/chrome?token=T", false).unwrap();
        assert_eq!(local.remote.as_deref(), Some("localhost:3000"));
        assert_eq!(local.url, "ws://localhost:3000/chrome?token=T");
        assert_eq!(local.headers, [("X-Key".to_owned(), "k".to_owned())]);
        assert!(spec("ws://10.0.0.1:3000/chrome", false).is_err());
        let far = spec("ws://farm.example/chrome", true).unwrap();
        assert_eq!(far.remote.as_deref(), Some("farm.example:80"));
        assert_eq!(far.tls, None);
        let tls = spec("wss://farm.example/chrome", false).unwrap();
        assert_eq!(tls.remote.as_deref(), Some("farm.example:443"));
        assert_eq!(
            tls.tls,
            Some(Tls {
                server_name: "farm.example".to_owned(),
                ca_file: None
            })
        );
        let with_ca = serde_json::json!({"url": "wss://[::1]:9443/", "caFile": "/etc/farm-ca.pem"});
        let with_ca = parse_remote_spec(&with_ca.to_string()).unwrap();
        assert_eq!(
            with_ca.tls,
            Some(Tls {
                server_name: "::1".to_owned(),
                ca_file: Some(PathBuf::from("/etc/farm-ca.pem"))
            })
        );
        assert!(!tls.json_version);
        let https = spec("https://farm.example/?token=T", false).unwrap();
        assert!(https.json_version && https.tls.is_some());
        assert_eq!(https.remote.as_deref(), Some("farm.example:443"));
        let http = spec("http://localhost:3000/", false).unwrap();
        assert!(http.json_version && http.tls.is_none());
        assert!(spec("http://10.0.0.1:3000/", false).is_err());
        let plain_with_ca = serde_json::json!({"url": "ws://127.0.0.1:1/", "caFile": "/ca.pem"});
        assert!(parse_remote_spec(&plain_with_ca.to_string()).is_err());
        let error = spec("ws://10.0.0.1:3000/?token=SECRET", false).unwrap_err();
        assert!(!error.to_string().contains("SECRET"));
        assert!(!format!("{local:?}").contains("token"));
        assert!(parse_remote_spec("not json").is_err());
    }
}
