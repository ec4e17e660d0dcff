//! `browser.cookies.list` (capability `network.read`): the cookies of a controlled tab's
//! browser context that apply to given URLs or belong to a domain, HttpOnly ones included, with
//! every value labelled `credential`. The cookie jar is per browser context (the profile), not
//! per tab, so the filter is what scopes the answer: without `urls` or `domain` it is the tab's
//! current URL, and nothing is ever returned unfiltered. Owns the URL and domain matching and
//! the bounds; it never writes a cookie and never reads one through the page.

use serde::Deserialize;
use serde_json::{Value, json};

use super::context::{TargetScope, ToolEnv};
use super::error::ToolError;
use super::manifest::{Gate, Lane, ToolDef, object, open_object};
use super::tab::{ControlledTab, SCRIPT_TIMEOUT};
use crate::cdp::storage::{Cookie, GetCookies};
use crate::protocol::errors::RpcError;

/// Most URLs one call may name (each adds a pass over the jar).
pub const MAX_URLS: usize = 20;
/// Longest URL or domain accepted as a filter.
pub const MAX_FILTER_CHARS: usize = 2048;
/// Default and largest `limit`: 500 cookies of at most ~4.4 KB each stay well inside the 4 MiB
/// result limit.
pub const DEFAULT_LIMIT: u64 = 100;
pub const MAX_LIMIT: u64 = 500;
/// Longest cookie value returned (browsers keep name + value under 4,096 bytes; a longer one is
/// cut and marked `valueTruncated`).
pub const MAX_VALUE_CHARS: usize = 4096;
/// Longest cookie name, domain or path returned.
pub const MAX_FIELD_CHARS: usize = 1024;

pub fn defs() -> Vec<ToolDef> {
    vec![ToolDef {
        name: "browser.cookies.list",
        description: "Cookies of the tab's browser context that the browser would send to `urls` (http/https), or whose domain is `domain` or one of its subdomains; HttpOnly cookies included. Without either filter: the cookies of the tab's current URL. The jar is profile-wide, so the filter is the scope. Values are credentials; at most `limit` cookies, values cut at 4,096 characters.",
        capability: "network.read",
        mutating: false,
        input_schema: object(
            json!({
                "urls": {"type": "array", "minItems": 1, "maxItems": MAX_URLS, "items": {"type": "string", "minLength": 1, "maxLength": MAX_FILTER_CHARS, "x-browser-pilot-sensitivity": ["browser_data"]}, "description": "Only cookies sent to one of these URLs."},
                "domain": {"type": "string", "minLength": 1, "maxLength": MAX_FILTER_CHARS, "x-browser-pilot-sensitivity": ["browser_data"], "description": "Only cookies whose domain matches this one."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "Most cookies to return."},
            }),
            &[],
        ),
        output_schema: open_object(
            json!({
                "workspaceId": {"type": "string"},
                "leaseId": {"type": "string"},
                "targetId": {"type": "string"},
                "cookies": {"type": "array", "maxItems": MAX_LIMIT, "items": open_object(json!({
                    "name": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
                    "value": {"type": "string", "maxLength": MAX_VALUE_CHARS, "x-browser-pilot-sensitivity": ["credential"]},
                    "valueTruncated": {"type": "boolean"},
                    "domain": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
                    "hostOnly": {"type": "boolean"},
                    "path": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
                    "expires": {"type": ["number", "null"]},
                    "session": {"type": "boolean"},
                    "httpOnly": {"type": "boolean"},
                    "secure": {"type": "boolean"},
                    "sameSite": {"type": ["string", "null"]},
                }), &["name", "value", "valueTruncated", "domain", "hostOnly", "path", "expires", "session", "httpOnly", "secure", "sameSite"])},
                "total": {"type": "integer"},
                "truncated": {"type": "boolean"},
            }),
            &["targetId", "cookies", "total", "truncated"],
        ),
        sensitivity_input: &["browser_data"],
        sensitivity_output: &["browser_data", "credential"],
        lane: Lane::Ordinary,
        gate: Gate::InTool,
        handler: handler!(Target: list),
    }]
}

#[derive(Deserialize)]
struct ListParams {
    urls: Option<Vec<String>>,
    domain: Option<String>,
    limit: Option<u64>,
}

/// What the cookies are matched against.
#[derive(Debug, Clone, PartialEq)]
enum CookieFilter {
    /// Cookies the browser would send to any of these URLs.
    Urls(Vec<CookieUrl>),
    /// Cookies whose domain is this one or a subdomain of it (lowercase, no leading dot).
    Domain(String),
}

/// The parts of an http(s) URL cookie matching reads.
#[derive(Debug, Clone, PartialEq)]
struct CookieUrl {
    secure: bool,
    host: String,
    path: String,
}

impl CookieUrl {
    /// The URL standard's parse of `scheme://[userinfo@]host[:port]/path?query#fragment` (the
    /// `url` crate, as the browser parses it: the host lower-case and an internationalised name
    /// in punycode, as cookie domains are stored); `None` unless http(s) with a host.
    fn parse(text: &str) -> Option<CookieUrl> {
        let (_, rest) = text.split_once("://")?;
        if rest.starts_with(['/', '\\']) {
            return None;
        }
        let url = url::Url::parse(text).ok()?;
        let secure = match url.scheme() {
            "https" => true,
            "http" => false,
            _ => return None,
        };
        let host = url.host_str().filter(|host| !host.is_empty())?;
        Some(CookieUrl {
            secure,
            host: host.to_owned(),
            path: url.path().to_owned(),
        })
    }

    /// RFC 6265 §5.4: domain-match (host-only cookies need the exact host), path-match, and
    /// `Secure` only over https.
    fn sends(&self, cookie: &Cookie) -> bool {
        let domain = cookie.domain.to_ascii_lowercase();
        let domain_ok = match domain.strip_prefix('.') {
            Some(parent) => self.host == parent || self.host.ends_with(&format!(".{parent}")),
            None => self.host == domain,
        };
        domain_ok && path_matches(&self.path, &cookie.path) && (self.secure || !cookie.secure)
    }
}

/// RFC 6265 §5.1.4 path-match.
fn path_matches(request_path: &str, cookie_path: &str) -> bool {
    request_path == cookie_path
        || (request_path.starts_with(cookie_path)
            && (cookie_path.ends_with('/') || request_path[cookie_path.len()..].starts_with('/')))
}

impl CookieFilter {
    /// From the arguments: `urls` and `domain` exclude each other; a URL must be http(s) with a
    /// host. `None` when neither is given (the caller falls back to the tab's URL).
    fn from_params(params: &ListParams) -> Result<Option<CookieFilter>, RpcError> {
        match (&params.urls, &params.domain) {
            (Some(_), Some(_)) => Err(RpcError::invalid_params(
                "arguments.domain: give either urls or domain, not both",
            )
            .with_context("path", json!("arguments.domain"))),
            (Some(urls), None) => {
                let mut parsed = Vec::with_capacity(urls.len());
                for (i, url) in urls.iter().enumerate() {
                    match CookieUrl::parse(url) {
                        Some(url) => parsed.push(url),
                        None => {
                            let path = format!("arguments.urls[{i}]");
                            return Err(RpcError::invalid_params(format!(
                                "{path} must be an http or https URL with a host"
                            ))
                            .with_context("path", json!(path)));
                        }
                    }
                }
                Ok(Some(CookieFilter::Urls(parsed)))
            }
            (None, Some(domain)) => {
                let domain = domain.trim_start_matches('.').to_ascii_lowercase();
                let valid = !domain.is_empty()
                    && domain
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
                match valid {
                    true => Ok(Some(CookieFilter::Domain(domain))),
                    false => Err(RpcError::invalid_params(
                        "arguments.domain must be a host name such as example.com",
                    )
                    .with_context("path", json!("arguments.domain"))),
                }
            }
            (None, None) => Ok(None),
        }
    }

    fn keeps(&self, cookie: &Cookie) -> bool {
        match self {
            CookieFilter::Urls(urls) => urls.iter().any(|url| url.sends(cookie)),
            CookieFilter::Domain(domain) => {
                let own = cookie.domain.trim_start_matches('.').to_ascii_lowercase();
                own == *domain || own.ends_with(&format!(".{domain}"))
            }
        }
    }
}

/// The first `max` characters of `text`, and whether it was cut.
fn cut(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (text[..at].to_owned(), true),
        None => (text.to_owned(), false),
    }
}

fn cookie_json(cookie: &Cookie) -> Value {
    let (value, value_truncated) = cut(&cookie.value, MAX_VALUE_CHARS);
    let field = |text: &str| cut(text, MAX_FIELD_CHARS).0;
    let session = cookie.session || cookie.expires < 0.0;
    json!({
        "name": field(&cookie.name),
        "value": value,
        "valueTruncated": value_truncated,
        "domain": field(&cookie.domain),
        "hostOnly": !cookie.domain.starts_with('.'),
        "path": field(&cookie.path),
        "expires": (!session).then_some(cookie.expires),
        "session": session,
        "httpOnly": cookie.http_only,
        "secure": cookie.secure,
        "sameSite": cookie.same_site,
    })
}

/// The cookies `filter` keeps, in a stable order (domain, path, name), at most `limit`, and how
/// many matched.
fn select(cookies: &[Cookie], filter: &CookieFilter, limit: usize) -> (Vec<Value>, usize) {
    let mut kept: Vec<&Cookie> = cookies.iter().filter(|c| filter.keeps(c)).collect();
    kept.sort_by(|a, b| {
        (a.domain.trim_start_matches('.'), &a.path, &a.name).cmp(&(
            b.domain.trim_start_matches('.'),
            &b.path,
            &b.name,
        ))
    });
    let total = kept.len();
    (
        kept.into_iter().take(limit).map(cookie_json).collect(),
        total,
    )
}

async fn list(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: ListParams,
) -> Result<Value, ToolError> {
    let filter = CookieFilter::from_params(&params)?;
    let limit = params.limit.unwrap_or(DEFAULT_LIMIT).min(MAX_LIMIT) as usize;
    let mut tab = ControlledTab::acquire(env, scope).await?;
    let session = tab.session().await?;
    let filter = match filter {
        Some(filter) => filter,
        None => {
            let (url, _) = tab.page_info().await?;
            // A tab on about:blank or a non-http page has no cookies to send.
            CookieFilter::Urls(CookieUrl::parse(&url).into_iter().collect())
        }
    };
    let jar = tab
        .execute(&session, &GetCookies {}, SCRIPT_TIMEOUT)
        .await?;
    let (cookies, total) = select(&jar.cookies, &filter, limit);
    Ok(json!({
        "workspaceId": scope.workspace_id,
        "leaseId": scope.lease_id,
        "targetId": scope.target_id,
        "truncated": total > cookies.len(),
        "total": total,
        "cookies": cookies,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cookie(name: &str, domain: &str, path: &str, secure: bool) -> Cookie {
        Cookie {
            name: name.to_owned(),
            value: format!("v-{name}"),
            domain: domain.to_owned(),
            path: path.to_owned(),
            expires: -1.0,
            http_only: false,
            secure,
            session: true,
            same_site: None,
        }
    }

    fn names(cookies: &[Cookie], filter: &CookieFilter) -> Vec<String> {
        select(cookies, filter, 100)
            .0
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_owned())
            .collect()
    }

    fn urls(list: &[&str]) -> CookieFilter {
        CookieFilter::Urls(list.iter().map(|u| CookieUrl::parse(u).unwrap()).collect())
    }

    #[test]
    fn urls_parse_to_scheme_host_and_path() {
        let check = |url: &str, want: Option<(bool, &str, &str)>| {
            let got = CookieUrl::parse(url).map(|u| (u.secure, u.host, u.path));
            let want = want.map(|(s, h, p)| (s, h.to_owned(), p.to_owned()));
            assert_eq!(got, want, "{url}");
        };
        check("http://127.0.0.1:8080", Some((false, "127.0.0.1", "/")));
        check(
            "HTTPS://user:pw@Shop.Example.com/a/b?q=1#f",
            Some((true, "shop.example.com", "/a/b")),
        );
        check("https://[::1]:9/x", Some((true, "[::1]", "/x")));
        check("http://h?x", Some((false, "h", "/")));
        check("ftp://example.com/", None);
        check("example.com", None);
        check("http:///path", None);
        check("file:///etc/passwd", None);
        check(
            "http://Bücher.example/Straße",
            Some((false, "xn--bcher-kva.example", "/Stra%C3%9Fe")),
        );
    }

    #[test]
    fn url_filters_follow_rfc_6265_matching() {
        let jar = [
            cookie("host", "shop.example.com", "/", false),
            cookie("parent", ".example.com", "/", false),
            cookie("other", "example.org", "/", false),
            cookie("deep", "shop.example.com", "/app", false),
            cookie("secure", ".example.com", "/", true),
            cookie("sibling", "mail.example.com", "/", false),
        ];
        assert_eq!(
            names(&jar, &urls(&["http://shop.example.com/"])),
            vec!["parent", "host"]
        );
        assert_eq!(
            names(&jar, &urls(&["https://shop.example.com/app/page"])),
            vec!["parent", "secure", "host", "deep"]
        );
        // `/application` does not path-match `/app`; the host-only cookie needs the exact host.
        assert_eq!(
            names(&jar, &urls(&["http://a.shop.example.com/application"])),
            vec!["parent"]
        );
        assert_eq!(
            names(
                &jar,
                &urls(&["http://example.org/", "http://mail.example.com/"])
            ),
            vec!["parent", "other", "sibling"]
        );
        assert!(names(&jar, &CookieFilter::Urls(Vec::new())).is_empty());
    }

    #[test]
    fn domain_filters_keep_the_domain_and_its_subdomains() {
        let jar = [
            cookie("host", "shop.example.com", "/", false),
            cookie("parent", ".example.com", "/", false),
            cookie("lookalike", "badexample.com", "/", false),
            cookie("other", "example.org", "/", true),
        ];
        let domain = |d: &str| CookieFilter::Domain(d.to_owned());
        assert_eq!(names(&jar, &domain("example.com")), vec!["parent", "host"]);
        assert_eq!(names(&jar, &domain("shop.example.com")), vec!["host"]);
        assert_eq!(names(&jar, &domain("example.org")), vec!["other"]);
    }

    #[test]
    fn filters_are_checked_with_their_path() {
        let params = |v: Value| serde_json::from_value::<ListParams>(v).unwrap();
        let error = CookieFilter::from_params(&params(
            json!({"urls": ["http://a/", "javascript:alert(1)"]}),
        ))
        .unwrap_err();
        assert_eq!(error.context.unwrap()["path"], "arguments.urls[1]");
        let error =
            CookieFilter::from_params(&params(json!({"urls": ["http://a/"], "domain": "a"})))
                .unwrap_err();
        assert_eq!(error.context.unwrap()["path"], "arguments.domain");
        let error = CookieFilter::from_params(&params(json!({"domain": "a b.com"}))).unwrap_err();
        assert_eq!(error.context.unwrap()["path"], "arguments.domain");
        assert_eq!(
            CookieFilter::from_params(&params(json!({"domain": ".Example.COM"}))).unwrap(),
            Some(CookieFilter::Domain("example.com".to_owned()))
        );
        assert_eq!(CookieFilter::from_params(&params(json!({}))).unwrap(), None);
    }

    #[test]
    fn results_are_bounded_and_labelled() {
        let mut long = cookie("a-long", "a.test", "/", false);
        long.value = "x".repeat(MAX_VALUE_CHARS + 10);
        long.http_only = true;
        long.session = false;
        long.expires = 1_900_000_000.0;
        let jar: Vec<Cookie> = std::iter::once(long)
            .chain((0..10).map(|i| cookie(&format!("c{i}"), "a.test", "/", false)))
            .collect();
        let (cookies, total) = select(&jar, &CookieFilter::Domain("a.test".into()), 3);
        assert_eq!((cookies.len(), total), (3, 11));
        let long = cookies.iter().find(|c| c["name"] == "a-long").unwrap();
        assert_eq!(long["value"].as_str().unwrap().len(), MAX_VALUE_CHARS);
        assert_eq!(long["valueTruncated"], true);
        assert_eq!(long["httpOnly"], true);
        assert_eq!(long["hostOnly"], true);
        assert_eq!(long["expires"], 1_900_000_000.0);
        let short = cookies.iter().find(|c| c["name"] == "c0").unwrap();
        assert_eq!(short["expires"], Value::Null);
        assert_eq!(short["session"], true);
        let schema = &defs()[0].output_schema;
        assert_eq!(
            schema["properties"]["cookies"]["items"]["properties"]["value"]["x-browser-pilot-sensitivity"],
            json!(["credential"])
        );
    }
}
