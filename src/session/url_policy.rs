//! The URL policy of a Workspace (`workspaces/create` `urlPolicy`): the origin-pattern grammar,
//! its parse with the URL standard's parser (the `url` crate: punycode, default ports, IPv4
//! forms), the canonical form the store keeps, and the one decision every enforcement point asks
//! (`UrlPolicy::decide`): the navigation tools before dispatch and the Fetch controller for
//! every request of a tab the Workspace manages or controls. WebSocket handshakes, which no
//! request interception sees, are held by the same patterns translated to URLPattern rules
//! (`SocketRules`) that the Fetch controller sets as network conditions on every session of the
//! tab. Grammar and combination rules are documented in docs/network.md, "URL policy".

use std::fmt;

use serde_json::{Map, Value, json};
use url::{Host, Origin, Url};

/// Patterns per list (`allow`, `block`).
pub const MAX_POLICY_PATTERNS: usize = 64;

/// Longest pattern, in characters.
pub const MAX_POLICY_PATTERN_CHARS: usize = 512;

/// The two web schemes a pattern names; `ws` and `wss` are the same origins as `http` and
/// `https` (a WebSocket handshake is an HTTP request to that origin).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Scheme {
    Http,
    Https,
}

impl Scheme {
    fn of(scheme: &str) -> Option<Scheme> {
        match scheme {
            "http" | "ws" => Some(Scheme::Http),
            "https" | "wss" => Some(Scheme::Https),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// One parsed pattern: `scheme://host[:port]`, `scheme://*.domain[:port]`, port `*` for any.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct OriginPattern {
    scheme: Scheme,
    /// The host in the URL standard's serialisation (lower case, punycode, bracketed IPv6),
    /// without a trailing dot.
    host: String,
    /// `*.host`: any subdomain of `host`, not `host` itself.
    subdomains: bool,
    /// `None`: any port.
    port: Option<u16>,
}

impl OriginPattern {
    /// Parses one pattern; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<OriginPattern, &'static str> {
        if text.is_empty() {
            return Err("the pattern is empty");
        }
        if text.chars().count() > MAX_POLICY_PATTERN_CHARS {
            return Err("the pattern is longer than 512 characters");
        }
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("the pattern contains whitespace or a control character");
        }
        let (scheme, rest) = text
            .split_once("://")
            .ok_or("the pattern is not scheme://host[:port]")?;
        let scheme = Scheme::of(&scheme.to_ascii_lowercase())
            .ok_or("the pattern's scheme is not http, https, ws or wss")?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '\\', '?', '#', '@']) {
            return Err(
                "the pattern has a path, query, fragment or user info (only scheme://host[:port])",
            );
        }
        let (subdomains, rest) = match rest.strip_prefix("*.") {
            Some(domain) => (true, domain),
            None => (false, rest),
        };
        let (any_port, rest) = match rest.strip_suffix(":*") {
            Some(host) => (true, host),
            None => (false, rest),
        };
        if rest.contains('*') {
            return Err(
                "a wildcard is allowed only as a leading \"*.\" of the host or as the port \":*\"",
            );
        }
        let url =
            Url::parse(&format!("{}://{rest}/", scheme.name())).map_err(|error| match error {
                url::ParseError::EmptyHost => "the pattern has no host",
                url::ParseError::InvalidPort => {
                    "the pattern's port is not a number from 0 to 65535"
                }
                url::ParseError::IdnaError => "the pattern's host is not a valid domain name",
                url::ParseError::InvalidIpv4Address | url::ParseError::InvalidIpv6Address => {
                    "the pattern's host is not a valid IP address"
                }
                _ => "the pattern is not scheme://host[:port]",
            })?;
        let host = match url.host() {
            Some(Host::Domain(domain)) => domain.trim_end_matches('.').to_owned(),
            Some(_) if subdomains => return Err("\"*.\" needs a domain name, not an IP address"),
            Some(host) => host.to_string(),
            None => return Err("the pattern has no host"),
        };
        if host.is_empty() {
            return Err("the pattern has no host");
        }
        Ok(OriginPattern {
            scheme,
            host,
            subdomains,
            port: match any_port {
                true => None,
                false => Some(url.port().unwrap_or(scheme.default_port())),
            },
        })
    }

    fn matches(&self, scheme: Scheme, host: &str, port: u16) -> bool {
        let host_matches = match self.subdomains {
            false => host == self.host,
            true => host
                .strip_suffix(self.host.as_str())
                .is_some_and(|label| label.len() > 1 && label.ends_with('.')),
        };
        scheme == self.scheme && host_matches && self.port.is_none_or(|p| p == port)
    }

    /// The origins both patterns match, as one pattern (`None`: none). Two origin patterns
    /// always meet in one: the narrower host and the narrower port.
    fn intersect(&self, other: &OriginPattern) -> Option<OriginPattern> {
        if self.scheme != other.scheme {
            return None;
        }
        let port = match (self.port, other.port) {
            (None, port) | (port, None) => port,
            (Some(a), Some(b)) if a == b => Some(a),
            _ => return None,
        };
        // `within(a, b)`: every host `a` matches, `b` matches too.
        let within = |a: &OriginPattern, b: &OriginPattern| match (a.subdomains, b.subdomains) {
            (false, false) => a.host == b.host,
            (_, true) => {
                a.host
                    .strip_suffix(b.host.as_str())
                    .is_some_and(|label| match a.subdomains {
                        true => label.is_empty() || label.ends_with('.'),
                        false => label.len() > 1 && label.ends_with('.'),
                    })
            }
            (true, false) => false,
        };
        let narrower = match (within(self, other), within(other, self)) {
            (true, _) => self,
            (_, true) => other,
            _ => return None,
        };
        Some(OriginPattern {
            port,
            ..narrower.clone()
        })
    }

    /// The pattern's WebSocket URLs in URLPattern constructor syntax (what
    /// `Network.emulateNetworkConditionsByRule` matches): `ws` for an `http` pattern, `wss` for
    /// `https`; a domain also with its trailing dot (`{.}?`), since a WebSocket URL keeps it;
    /// every character of the host but letters, digits, `.` and `-` escaped; the default port
    /// omitted (URLPattern compares the URL's port with its default removed); any path, query
    /// and fragment.
    fn socket_pattern(&self) -> String {
        let scheme = match self.scheme {
            Scheme::Http => "ws",
            Scheme::Https => "wss",
        };
        let mut host = String::new();
        if self.subdomains {
            host.push_str("*.");
        }
        for c in self.host.chars() {
            if !(c.is_ascii_alphanumeric() || c == '.' || c == '-') {
                host.push('\\');
            }
            host.push(c);
        }
        if !self.host.starts_with('[') && self.host.parse::<std::net::Ipv4Addr>().is_err() {
            host.push_str("{.}?");
        }
        let port = match self.port {
            None => ":*".to_owned(),
            Some(port) if port == self.scheme.default_port() => String::new(),
            Some(port) => format!(":{port}"),
        };
        format!("{scheme}://{host}{port}/*")
    }
}

/// The canonical text: lower case, punycode, no default port.
impl fmt::Display for OriginPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let wildcard = if self.subdomains { "*." } else { "" };
        write!(f, "{}://{wildcard}{}", self.scheme.name(), self.host)?;
        match self.port {
            None => write!(f, ":*"),
            Some(port) if port == self.scheme.default_port() => Ok(()),
            Some(port) => write!(f, ":{port}"),
        }
    }
}

/// A Workspace's policy: `block` wins; an empty `allow` admits everything not blocked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UrlPolicy {
    allow: Vec<OriginPattern>,
    block: Vec<OriginPattern>,
}

/// A policy member that is refused: where (`params.urlPolicy.block[1]`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    pub path: String,
    pub message: String,
}

/// Why a URL is outside the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocked {
    /// It matches this `block` pattern (canonical text).
    BlockList(String),
    /// `allow` is not empty and no pattern of it matches.
    NotAllowed,
}

impl Blocked {
    /// The reason as it appears in errors and `network.response` (`urlPolicy.reason`).
    pub fn reason(&self) -> &'static str {
        match self {
            Blocked::BlockList(_) => "blocked",
            Blocked::NotAllowed => "not_allowed",
        }
    }

    /// `{reason, pattern?}`: what an error's `context` and a blocked request's event carry.
    pub fn to_json(&self) -> Value {
        match self {
            Blocked::BlockList(pattern) => json!({"reason": self.reason(), "pattern": pattern}),
            Blocked::NotAllowed => json!({"reason": self.reason()}),
        }
    }
}

impl UrlPolicy {
    /// Parses `urlPolicy` as sent (`path` names it in errors): an object with optional `allow`
    /// and `block` arrays of pattern strings, nothing else. Lists come back sorted without
    /// duplicates. `None` for null and for a policy with both lists empty (no policy).
    pub fn from_json(value: &Value, path: &str) -> Result<Option<UrlPolicy>, PolicyError> {
        let fail = |path: String, message: &str| PolicyError {
            path,
            message: message.to_owned(),
        };
        let object = match value {
            Value::Null => return Ok(None),
            Value::Object(object) => object,
            _ => return Err(fail(path.to_owned(), "must be an object {allow, block}")),
        };
        if let Some(unknown) = object
            .keys()
            .find(|k| !matches!(k.as_str(), "allow" | "block"))
        {
            return Err(fail(
                format!("{path}.{unknown}"),
                "is not a urlPolicy member (allow, block)",
            ));
        }
        let list = |name: &str| -> Result<Vec<OriginPattern>, PolicyError> {
            let path = format!("{path}.{name}");
            let items = match object.get(name) {
                None | Some(Value::Null) => return Ok(Vec::new()),
                Some(Value::Array(items)) => items,
                Some(_) => return Err(fail(path, "must be an array of strings")),
            };
            if items.len() > MAX_POLICY_PATTERNS {
                return Err(fail(path, "has more than 64 patterns"));
            }
            let mut patterns = items
                .iter()
                .enumerate()
                .map(|(index, item)| {
                    let path = format!("{path}[{index}]");
                    let text = item
                        .as_str()
                        .ok_or_else(|| fail(path.clone(), "must be a string"))?;
                    OriginPattern::parse(text).map_err(|why| fail(path, why))
                })
                .collect::<Result<Vec<_>, _>>()?;
            patterns.sort();
            patterns.dedup();
            Ok(patterns)
        };
        let policy = UrlPolicy {
            allow: list("allow")?,
            block: list("block")?,
        };
        Ok((!policy.is_empty()).then_some(policy))
    }

    /// Parses the canonical text the store keeps (`to_canonical`).
    pub fn from_canonical(text: &str) -> Option<UrlPolicy> {
        let value: Value = serde_json::from_str(text).ok()?;
        UrlPolicy::from_json(&value, "urlPolicy").ok().flatten()
    }

    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.block.is_empty()
    }

    /// `{allow: [...], block: [...]}` with canonical pattern texts.
    pub fn to_json(&self) -> Value {
        let texts = |list: &[OriginPattern]| -> Vec<Value> {
            list.iter().map(|p| Value::String(p.to_string())).collect()
        };
        let mut object = Map::new();
        object.insert("allow".into(), Value::Array(texts(&self.allow)));
        object.insert("block".into(), Value::Array(texts(&self.block)));
        Value::Object(object)
    }

    /// The stored form: equal policies have equal text (a repeated `clientKey` compares it).
    pub fn to_canonical(&self) -> String {
        self.to_json().to_string()
    }

    /// Whether `url` may be loaded. `about:blank` and `about:srcdoc` always may; a `blob:` URL
    /// is judged by the origin it names; any other URL without an http(s)/ws(s) origin
    /// (`data:`, `file:`, an unparsable one) only while `allow` is empty.
    pub fn decide(&self, url: &str) -> Result<(), Blocked> {
        let parsed = match Url::parse(url) {
            Ok(parsed) => parsed,
            Err(_) => return self.non_web(),
        };
        if parsed.scheme() == "about" && matches!(parsed.path(), "blank" | "srcdoc") {
            return Ok(());
        }
        let Origin::Tuple(scheme, host, port) = parsed.origin() else {
            return self.non_web();
        };
        let Some(scheme) = Scheme::of(&scheme) else {
            return self.non_web();
        };
        let host = match host {
            Host::Domain(domain) => domain.trim_end_matches('.').to_owned(),
            other => other.to_string(),
        };
        if let Some(pattern) = self.block.iter().find(|p| p.matches(scheme, &host, port)) {
            return Err(Blocked::BlockList(pattern.to_string()));
        }
        if !self.allow.is_empty() && !self.allow.iter().any(|p| p.matches(scheme, &host, port)) {
            return Err(Blocked::NotAllowed);
        }
        Ok(())
    }

    fn non_web(&self) -> Result<(), Blocked> {
        match self.allow.is_empty() {
            true => Ok(()),
            false => Err(Blocked::NotAllowed),
        }
    }
}

/// The WebSocket part of the URL policies that hold one tab, as the URLPattern rules of
/// `Network.emulateNetworkConditionsByRule` (first match wins): handshakes to `refuse` fail,
/// then those to `admit` go on, then, when `refuse_rest`, every other `ws`/`wss` one fails. A
/// handshake is admitted exactly when every policy admits its URL (`UrlPolicy::decide`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SocketRules {
    pub refuse: Vec<String>,
    pub admit: Vec<String>,
    pub refuse_rest: bool,
}

/// The two URLPatterns of every WebSocket URL.
pub const EVERY_SOCKET: [&str; 2] = ["ws://*:*/*", "wss://*:*/*"];

impl SocketRules {
    /// The rules of these policies together: every `block` pattern refused; the origins each
    /// non-empty `allow` list admits (their intersection, when several have one) admitted and
    /// the rest refused.
    pub fn of(policies: &[&UrlPolicy]) -> SocketRules {
        let mut refuse: Vec<&OriginPattern> = policies.iter().flat_map(|p| &p.block).collect();
        refuse.sort();
        refuse.dedup();
        let mut admitted: Option<Vec<OriginPattern>> = None;
        for policy in policies.iter().filter(|p| !p.allow.is_empty()) {
            admitted = Some(match admitted {
                None => policy.allow.clone(),
                Some(so_far) => {
                    let mut both: Vec<OriginPattern> = so_far
                        .iter()
                        .flat_map(|a| policy.allow.iter().filter_map(|b| a.intersect(b)))
                        .collect();
                    both.sort();
                    both.dedup();
                    both
                }
            });
        }
        SocketRules {
            refuse: refuse.iter().map(|p| p.socket_pattern()).collect(),
            refuse_rest: admitted.is_some(),
            admit: admitted
                .unwrap_or_default()
                .iter()
                .map(OriginPattern::socket_pattern)
                .collect(),
        }
    }

    /// Whether the rules hold nothing (no policy).
    pub fn is_empty(&self) -> bool {
        self.refuse.is_empty() && !self.refuse_rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(text: &str) -> Result<String, &'static str> {
        OriginPattern::parse(text).map(|p| p.to_string())
    }

    fn policy(allow: &[&str], block: &[&str]) -> UrlPolicy {
        UrlPolicy::from_json(&json!({"allow": allow, "block": block}), "urlPolicy")
            .unwrap()
            .unwrap()
    }

    #[test]
    fn socket_rules_are_the_policies_websocket_urls() {
        let one = policy(
            &[
                "https://example.com",
                "http://127.0.0.1:*",
                "https://*.bücher.de:8443",
            ],
            &[
                "http://[::1]:3000",
                "http://ads.test",
                "https://*.evil.test",
            ],
        );
        assert_eq!(
            SocketRules::of(&[&one]),
            SocketRules {
                refuse: vec![
                    r"ws://\[\:\:1\]:3000/*".to_owned(),
                    "ws://ads.test{.}?/*".to_owned(),
                    "wss://*.evil.test{.}?/*".to_owned(),
                ],
                admit: vec![
                    "ws://127.0.0.1:*/*".to_owned(),
                    "wss://example.com{.}?/*".to_owned(),
                    "wss://*.xn--bcher-kva.de{.}?:8443/*".to_owned(),
                ],
                refuse_rest: true,
            }
        );
        let block_only = policy(&[], &["http://127.0.0.1:9"]);
        let rules = SocketRules::of(&[&block_only]);
        assert_eq!(rules.refuse, vec!["ws://127.0.0.1:9/*".to_owned()]);
        assert!(rules.admit.is_empty() && !rules.refuse_rest && !rules.is_empty());
        assert!(SocketRules::of(&[]).is_empty());
    }

    #[test]
    fn several_policies_admit_what_all_of_them_admit() {
        let a = policy(
            &[
                "https://*.example.com",
                "http://127.0.0.1:*",
                "https://other.test",
            ],
            &["https://ads.test"],
        );
        let b = policy(
            &[
                "https://*.a.example.com",
                "https://www.example.com",
                "http://127.0.0.1:8080",
            ],
            &["http://127.0.0.1:9"],
        );
        let rules = SocketRules::of(&[&a, &b]);
        assert_eq!(
            rules.refuse,
            vec![
                "ws://127.0.0.1:9/*".to_owned(),
                "wss://ads.test{.}?/*".to_owned()
            ]
        );
        assert_eq!(
            rules.admit,
            vec![
                "ws://127.0.0.1:8080/*".to_owned(),
                "wss://*.a.example.com{.}?/*".to_owned(),
                "wss://www.example.com{.}?/*".to_owned(),
            ]
        );
        assert!(rules.refuse_rest);
        // Allow lists that share nothing admit no socket at all.
        let c = policy(&["https://c.test"], &[]);
        let d = policy(&["https://d.test"], &[]);
        let none = SocketRules::of(&[&c, &d]);
        assert!(none.admit.is_empty() && none.refuse_rest);
        // An allow list and a policy without one: the list alone.
        let e = policy(&[], &["https://e.test"]);
        assert_eq!(SocketRules::of(&[&c, &e]).admit, vec!["wss://c.test{.}?/*"]);
    }

    #[test]
    fn patterns_parse_to_canonical_origins() {
        let cases = [
            ("https://example.com", "https://example.com"),
            ("https://example.com/", "https://example.com"),
            ("HTTPS://Example.COM:443", "https://example.com"),
            ("http://example.com:80", "http://example.com"),
            ("https://example.com:8443", "https://example.com:8443"),
            ("https://*.example.com", "https://*.example.com"),
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
            ("http://127.0.0.1:*", "http://127.0.0.1:*"),
            ("http://0x7f.1", "http://127.0.0.1"),
            ("http://[::1]:3000", "http://[::1]:3000"),
            ("https://bücher.de", "https://xn--bcher-kva.de"),
            ("https://*.Bücher.de", "https://*.xn--bcher-kva.de"),
            ("https://example.com.", "https://example.com"),
            ("wss://example.com", "https://example.com"),
            ("ws://example.com:80", "http://example.com"),
        ];
        for (text, expect) in cases {
            assert_eq!(canonical(text), Ok(expect.to_owned()), "{text}");
        }
    }

    #[test]
    fn malformed_patterns_say_why() {
        let cases = [
            ("", "the pattern is empty"),
            ("example.com", "the pattern is not scheme://host[:port]"),
            (
                "ftp://example.com",
                "the pattern's scheme is not http, https, ws or wss",
            ),
            (
                "https://example.com/path",
                "the pattern has a path, query, fragment or user info (only scheme://host[:port])",
            ),
            (
                "https://u:p@example.com",
                "the pattern has a path, query, fragment or user info (only scheme://host[:port])",
            ),
            (
                "https://ex*ample.com",
                "a wildcard is allowed only as a leading \"*.\" of the host or as the port \":*\"",
            ),
            (
                "https://*",
                "a wildcard is allowed only as a leading \"*.\" of the host or as the port \":*\"",
            ),
            (
                "https://*.127.0.0.1",
                "\"*.\" needs a domain name, not an IP address",
            ),
            (
                "https://example.com:99999",
                "the pattern's port is not a number from 0 to 65535",
            ),
            ("https://", "the pattern has no host"),
            (
                "https://exa mple.com",
                "the pattern contains whitespace or a control character",
            ),
        ];
        for (text, expect) in cases {
            assert_eq!(canonical(text), Err(expect), "{text}");
        }
        let long = format!("https://{}.com", "a".repeat(MAX_POLICY_PATTERN_CHARS));
        assert_eq!(
            canonical(&long),
            Err("the pattern is longer than 512 characters")
        );
    }

    #[test]
    fn the_json_form_names_the_bad_member() {
        let error = |value: Value| UrlPolicy::from_json(&value, "params.urlPolicy").unwrap_err();
        let bad = error(json!({"allow": ["https://a.com"], "block": ["https://b.com", "b.com"]}));
        assert_eq!(bad.path, "params.urlPolicy.block[1]");
        assert_eq!(bad.message, "the pattern is not scheme://host[:port]");
        assert_eq!(
            error(json!({"blocked": []})).path,
            "params.urlPolicy.blocked"
        );
        assert_eq!(error(json!({"allow": "x"})).path, "params.urlPolicy.allow");
        assert_eq!(
            error(json!({"allow": [1]})).path,
            "params.urlPolicy.allow[0]"
        );
        assert_eq!(error(json!([])).path, "params.urlPolicy");
        let many: Vec<String> = (0..=MAX_POLICY_PATTERNS)
            .map(|n| format!("https://h{n}.com"))
            .collect();
        assert_eq!(
            error(json!({"block": many})).message,
            "has more than 64 patterns"
        );
        assert_eq!(UrlPolicy::from_json(&json!({}), "p"), Ok(None));
        assert_eq!(UrlPolicy::from_json(&Value::Null, "p"), Ok(None));
    }

    #[test]
    fn equal_policies_have_equal_canonical_text() {
        let a = policy(
            &["https://b.com", "HTTPS://a.com:443", "https://a.com"],
            &[],
        );
        let b = policy(&["https://a.com", "https://b.com/"], &[]);
        assert_eq!(a.to_canonical(), b.to_canonical());
        assert_eq!(
            a.to_canonical(),
            r#"{"allow":["https://a.com","https://b.com"],"block":[]}"#
        );
        assert_eq!(UrlPolicy::from_canonical(&a.to_canonical()), Some(a));
        assert_ne!(
            policy(&[], &["https://a.com"]).to_canonical(),
            policy(&["https://a.com"], &[]).to_canonical()
        );
    }

    #[test]
    fn block_wins_and_an_empty_allow_admits_the_rest() {
        let only_block = policy(&[], &["https://*.ads.test", "http://127.0.0.1:9"]);
        let check = |policy: &UrlPolicy, url: &str, expect: Result<(), Blocked>| {
            assert_eq!(policy.decide(url), expect, "{url}");
        };
        let blocked = |p: &str| Err(Blocked::BlockList(p.to_owned()));
        check(
            &only_block,
            "https://x.ads.test/a.js",
            blocked("https://*.ads.test"),
        );
        check(
            &only_block,
            "https://a.b.ads.test/",
            blocked("https://*.ads.test"),
        );
        check(&only_block, "https://ads.test/", Ok(()));
        check(&only_block, "https://xads.test/", Ok(()));
        check(&only_block, "http://x.ads.test/", Ok(()));
        check(
            &only_block,
            "http://127.0.0.1:9/p",
            blocked("http://127.0.0.1:9"),
        );
        check(&only_block, "http://127.0.0.1:10/p", Ok(()));
        check(&only_block, "data:text/html,x", Ok(()));
        check(&only_block, "file:///etc/hosts", Ok(()));

        let both = policy(
            &[
                "https://example.com",
                "http://127.0.0.1:*",
                "https://*.example.com",
            ],
            &["https://evil.example.com"],
        );
        check(&both, "https://example.com/x?y#z", Ok(()));
        check(&both, "https://EXAMPLE.com:443/", Ok(()));
        check(&both, "https://example.com./", Ok(()));
        check(&both, "wss://example.com/socket", Ok(()));
        check(&both, "https://www.example.com/", Ok(()));
        check(
            &both,
            "https://evil.example.com/",
            blocked("https://evil.example.com"),
        );
        check(
            &both,
            "https://evil.example.com./",
            blocked("https://evil.example.com"),
        );
        check(&both, "https://example.com:8443/", Err(Blocked::NotAllowed));
        check(&both, "http://example.com/", Err(Blocked::NotAllowed));
        check(&both, "http://127.0.0.1:4000/", Ok(()));
        check(&both, "http://2130706433/", Ok(()));
        check(&both, "http://localhost/", Err(Blocked::NotAllowed));
        check(&both, "blob:https://example.com/0b7c", Ok(()));
        check(
            &both,
            "blob:https://other.test/0b7c",
            Err(Blocked::NotAllowed),
        );
        check(&both, "about:blank", Ok(()));
        check(&both, "about:srcdoc", Ok(()));
        check(&both, "data:text/html,x", Err(Blocked::NotAllowed));
        check(&both, "file:///etc/hosts", Err(Blocked::NotAllowed));
        check(&both, "not a url", Err(Blocked::NotAllowed));

        let idn = policy(&[], &["https://bücher.de"]);
        check(
            &idn,
            "https://xn--bcher-kva.de/",
            blocked("https://xn--bcher-kva.de"),
        );
        check(
            &idn,
            "https://BÜCHER.de/",
            blocked("https://xn--bcher-kva.de"),
        );
    }
}
