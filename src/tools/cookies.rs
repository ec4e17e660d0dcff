//! The cookie tools. `browser.cookies.list` (capability `network.read`): the cookies of a
//! controlled tab's browser context that apply to given URLs or belong to a domain, HttpOnly
//! ones included, with every value labelled `credential`. The cookie jar is per browser context
//! (the profile), not per tab, so the filter is what scopes the answer: without `urls` or
//! `domain` it is the tab's current URL, and nothing is ever returned unfiltered.
//!
//! `browser.cookies.set` and `browser.cookies.delete` (capability `network.control`, input
//! `credential`) write into that jar. A write into the profile the user's own tabs share needs
//! the Connection's `profile.write` as well ([`Jar`]); the evidence reads the jar back
//! (`verified` only when the browser holds the cookie as asked, or, for a delete, none is left).
//! A value given is compared inside the Broker and never returned, so neither result carries
//! one. Owns the URL and domain matching, the argument checks and the bounds; it never reads or
//! writes a cookie through the page.

use serde::Deserialize;
use serde_json::{Value, json};

use super::context::{TargetScope, ToolEnv};
use super::error::ToolError;
use super::manifest::{Gate, Lane, ToolDef, object, open_object};
use super::tab::{ControlledTab, SCRIPT_TIMEOUT};
use crate::cdp::CdpError;
use crate::cdp::storage::{
    Cookie, CookieList, DeleteCookies, GetContextCookies, GetCookies, SetCookie,
};
use crate::cdp::{BrowserContextId, SessionId};
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};

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
/// Longest cookie name, domain or path returned, and accepted by a write.
pub const MAX_FIELD_CHARS: usize = 1024;
/// The capability a cookie write into the shared profile needs beside `network.control`.
pub const PROFILE_WRITE: &str = "profile.write";

pub fn defs() -> Vec<ToolDef> {
    vec![
        ToolDef {
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
        },
        ToolDef {
            name: "browser.cookies.set",
            description: "Sets one cookie in the tab's browser context: a host-only cookie of `url` (default: the tab's URL) or a domain cookie of `domain`. Evidence reads it back: `verified` when the browser holds it as asked. In a shared-profile Workspace also needs `profile.write`. The value is never echoed.",
            capability: "network.control",
            mutating: true,
            input_schema: object(
                json!({
                    "name": {"type": "string", "minLength": 1, "maxLength": MAX_FIELD_CHARS, "x-browser-pilot-sensitivity": ["browser_data"], "description": "Cookie name."},
                    "value": {"type": "string", "maxLength": MAX_VALUE_CHARS, "x-browser-pilot-sensitivity": ["credential"], "description": "Cookie value; never echoed."},
                    "url": {"type": "string", "minLength": 1, "maxLength": MAX_FILTER_CHARS, "x-browser-pilot-sensitivity": ["browser_data"], "description": "http(s) URL whose host gets a host-only cookie."},
                    "domain": {"type": "string", "minLength": 1, "maxLength": MAX_FILTER_CHARS, "x-browser-pilot-sensitivity": ["browser_data"], "description": "Domain for a domain cookie (sent to its subdomains too)."},
                    "path": {"type": "string", "minLength": 1, "maxLength": MAX_FIELD_CHARS, "description": "Cookie path; default /."},
                    "secure": {"type": "boolean", "description": "Sent over https only."},
                    "httpOnly": {"type": "boolean", "description": "Hidden from page scripts."},
                    "sameSite": {"enum": ["Strict", "Lax", "None"], "description": "SameSite attribute; default the browser's."},
                    "expires": {"type": "number", "minimum": 1, "description": "Expiry, seconds since the epoch; default a session cookie."},
                }),
                &["name", "value"],
            ),
            output_schema: open_object(
                json!({
                    "workspaceId": {"type": "string"},
                    "leaseId": {"type": "string"},
                    "targetId": {"type": "string"},
                    "cookie": {"type": ["object", "null"], "properties": written_cookie_properties(), "description": "The cookie as the browser holds it, without its value."},
                    "evidence": written_evidence_schema(),
                }),
                &["targetId", "cookie", "evidence"],
            ),
            sensitivity_input: &["browser_data", "credential"],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(Target: set),
        },
        ToolDef {
            name: "browser.cookies.delete",
            description: "Deletes the cookies named `name` that the browser would send to `url` (default: the tab's URL), or whose domain is `domain`, limited to `path` when given. Evidence reads the jar back: `verified` when none is left. In a shared-profile Workspace also needs `profile.write`.",
            capability: "network.control",
            mutating: true,
            input_schema: object(
                json!({
                    "name": {"type": "string", "minLength": 1, "maxLength": MAX_FIELD_CHARS, "x-browser-pilot-sensitivity": ["browser_data"], "description": "Cookie name."},
                    "url": {"type": "string", "minLength": 1, "maxLength": MAX_FILTER_CHARS, "x-browser-pilot-sensitivity": ["browser_data"], "description": "Only cookies sent to this http(s) URL."},
                    "domain": {"type": "string", "minLength": 1, "maxLength": MAX_FILTER_CHARS, "x-browser-pilot-sensitivity": ["browser_data"], "description": "Only cookies of exactly this domain."},
                    "path": {"type": "string", "minLength": 1, "maxLength": MAX_FIELD_CHARS, "description": "Only cookies of this path."},
                }),
                &["name"],
            ),
            output_schema: open_object(
                json!({
                    "workspaceId": {"type": "string"},
                    "leaseId": {"type": "string"},
                    "targetId": {"type": "string"},
                    "deleted": {"type": "integer", "description": "Matching cookies before the delete."},
                    "evidence": written_evidence_schema(),
                }),
                &["targetId", "deleted", "evidence"],
            ),
            sensitivity_input: &["browser_data", "credential"],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(Target: delete),
        },
    ]
}

/// A cookie as a write's result shows it: `browser.cookies.list`'s fields but the value.
fn written_cookie_properties() -> Value {
    json!({
        "name": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
        "domain": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
        "hostOnly": {"type": "boolean"},
        "path": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
        "expires": {"type": ["number", "null"]},
        "session": {"type": "boolean"},
        "httpOnly": {"type": "boolean"},
        "secure": {"type": "boolean"},
        "sameSite": {"type": ["string", "null"]},
    })
}

/// The `evidence` of a cookie write: what reading the jar back showed.
fn written_evidence_schema() -> Value {
    open_object(
        json!({
            "status": {"enum": ["verified", "mismatch", "unavailable"]},
            "reason": {"enum": ["absent", "differs", "remains", "refused", "unreadable"]},
            "differs": {"type": "array", "items": {"enum": ["value", "secure", "httpOnly", "sameSite", "expires"]}, "description": "Fields the browser holds otherwise than asked (never their values)."},
            "remaining": {"type": "integer"},
            "browserMessage": {"type": "string"},
        }),
        &["status"],
    )
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
    let jar = read_jar(env, &tab, scope, &session).await?;
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

/// Whose jar a write on a tab reaches: the browser context the tab lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Jar {
    /// A browser context of the Workspace's own (`isolation: "context"`): its cookies are
    /// shared with nobody else.
    Workspace,
    /// The profile the user's own tabs and every shared-profile Workspace use.
    SharedProfile,
}

impl Jar {
    /// The jar of a tab in browser context `tab_context`, for a Workspace whose own context is
    /// `workspace_context` (`None`: the Workspace shares the profile). A tab the Workspace
    /// controls in any other context (a user tab) is the shared profile's.
    fn of(tab_context: Option<&str>, workspace_context: Option<&str>) -> Jar {
        match (tab_context, workspace_context) {
            (Some(tab), Some(own)) if tab == own => Jar::Workspace,
            _ => Jar::SharedProfile,
        }
    }
}

/// The refusal of a write into the shared profile by a Connection without `profile.write`.
fn profile_write_denied() -> RpcError {
    RpcError::new(
        ErrorCode::CapabilityDenied,
        "this Workspace shares the user's browser profile; writing its cookies needs profile.write",
    )
    .with_context("capability", json!(PROFILE_WRITE))
    .with_context("jar", json!("shared_profile"))
    .with_remediation(
        RemediationAction::RequestCapability,
        "Request \"profile.write\" in initialize.requestedCapabilities (the user's own tabs see the cookie too), or use a Workspace created with isolation \"context\".",
    )
}

/// The Workspace scope of a write on the controlled tab: refused before anything is sent when
/// the tab's jar is the shared profile and the Connection lacks `profile.write`.
fn writable_jar(env: &ToolEnv, scope: &TargetScope<'_>) -> Result<Jar, ToolError> {
    let jar = tab_jar(env, scope).0;
    match (jar, scope.granted(PROFILE_WRITE)) {
        (Jar::SharedProfile, false) => Err(profile_write_denied().into()),
        _ => Ok(jar),
    }
}

/// The jar of the controlled tab and, when it is the Workspace's own browser context, that
/// context (`isolation: "context"`, `session::contexts`).
fn tab_jar(env: &ToolEnv, scope: &TargetScope<'_>) -> (Jar, Option<BrowserContextId>) {
    let own = env.browser.workspace_context(scope.workspace_id);
    let tab = env.browser.tab_context(scope.workspace_id, scope.target_id);
    let jar = Jar::of(
        tab.as_ref().map(BrowserContextId::as_str),
        own.as_ref().map(BrowserContextId::as_str),
    );
    match jar {
        Jar::Workspace => (jar, own),
        Jar::SharedProfile => (jar, None),
    }
}

/// Every cookie of the tab's jar. A page session's `Storage.getCookies` answers the default
/// context's whatever the page's context (docs/cdp.md, "browser contexts"), so a tab in the
/// Workspace's own context is read by naming that context on the browser connection.
async fn read_jar(
    env: &ToolEnv,
    tab: &ControlledTab,
    scope: &TargetScope<'_>,
    session: &SessionId,
) -> Result<CookieList, CdpError> {
    match tab_jar(env, scope).1 {
        Some(context) => {
            let command = GetContextCookies {
                browser_context_id: context,
            };
            tab.calls().execute(None, &command, SCRIPT_TIMEOUT).await
        }
        None => tab.execute(session, &GetCookies {}, SCRIPT_TIMEOUT).await,
    }
}

/// A cookie name or path as RFC 6265 allows it in a `Set-Cookie` line: no control character,
/// no `;`, and for a name no `=`, space or separator either.
fn cookie_token(text: &str, name: bool) -> bool {
    !text.is_empty()
        && text.chars().all(|c| {
            !c.is_control()
                && c != ';'
                && (!name || !(c.is_whitespace() || "=,\"()<>@:\\/[]?{}".contains(c)))
        })
}

fn bad_argument(path: &str, message: &str) -> RpcError {
    RpcError::invalid_params(format!("arguments.{path} {message}"))
        .with_context("path", json!(format!("arguments.{path}")))
}

/// Where a write goes: a host-only cookie of a URL's host, or a domain cookie.
#[derive(Debug, Clone, PartialEq)]
enum WriteScope {
    Url { url: String, host: String },
    Domain(String),
}

impl WriteScope {
    /// From `url` / `domain` (they exclude each other); `None` when neither is given.
    fn from_args(url: Option<&str>, domain: Option<&str>) -> Result<Option<WriteScope>, RpcError> {
        match (url, domain) {
            (Some(_), Some(_)) => Err(bad_argument("domain", "and url exclude each other")),
            (Some(url), None) => match CookieUrl::parse(url) {
                Some(parsed) => Ok(Some(WriteScope::Url {
                    url: url.to_owned(),
                    host: parsed.host,
                })),
                None => Err(bad_argument(
                    "url",
                    "must be an http or https URL with a host",
                )),
            },
            (None, Some(domain)) => {
                let params = ListParams {
                    urls: None,
                    domain: Some(domain.to_owned()),
                    limit: None,
                };
                match CookieFilter::from_params(&params) {
                    Ok(Some(CookieFilter::Domain(domain))) => Ok(Some(WriteScope::Domain(domain))),
                    _ => Err(bad_argument(
                        "domain",
                        "must be a host name such as example.com",
                    )),
                }
            }
            (None, None) => Ok(None),
        }
    }

    /// The tab's URL as the scope (a tab not on an http(s) page has none).
    async fn of_tab(tab: &mut ControlledTab) -> Result<WriteScope, ToolError> {
        let (url, _) = tab.page_info().await?;
        match CookieUrl::parse(&url) {
            Some(parsed) => Ok(WriteScope::Url {
                url,
                host: parsed.host,
            }),
            None => Err(RpcError::invalid_params(
                "the tab is not on an http(s) page: give url or domain",
            )
            .with_context("path", json!("arguments.url"))
            .into()),
        }
    }

    /// Whether `cookie` is the one this scope writes (same jar entry: host-only cookie of the
    /// host, or the domain's cookie; the browser keeps an IP address's as host-only).
    fn holds(&self, cookie: &Cookie) -> bool {
        let domain = cookie.domain.to_ascii_lowercase();
        match self {
            WriteScope::Url { host, .. } => domain == *host,
            WriteScope::Domain(own) => domain.trim_start_matches('.') == own,
        }
    }

    /// Whether a delete of this scope reaches `cookie`: cookies the URL is sent, or exactly the
    /// domain's.
    fn reaches(&self, cookie: &Cookie) -> bool {
        match self {
            WriteScope::Url { url, .. } => {
                CookieUrl::parse(url).is_some_and(|url| url.sends(cookie))
            }
            WriteScope::Domain(_) => self.holds(cookie),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SetParams {
    name: String,
    value: String,
    url: Option<String>,
    domain: Option<String>,
    path: Option<String>,
    secure: Option<bool>,
    http_only: Option<bool>,
    same_site: Option<String>,
    expires: Option<f64>,
}

impl SetParams {
    /// The checks the schema cannot say: cookie syntax, and the scope.
    fn check(&self) -> Result<Option<WriteScope>, RpcError> {
        if !cookie_token(&self.name, true) {
            return Err(bad_argument(
                "name",
                "must be a cookie name (no spaces, control characters or ;=,)",
            ));
        }
        if self.value.chars().any(|c| c.is_control() || c == ';') {
            return Err(bad_argument(
                "value",
                "must not hold ; or control characters",
            ));
        }
        if let Some(path) = &self.path
            && !(path.starts_with('/') && cookie_token(path, false))
        {
            return Err(bad_argument(
                "path",
                "must start with / and hold no ; or control characters",
            ));
        }
        WriteScope::from_args(self.url.as_deref(), self.domain.as_deref())
    }
}

/// What reading the jar back after a set showed, as wire evidence.
fn set_evidence(
    params: &SetParams,
    path: &str,
    scope: &WriteScope,
    jar: &[Cookie],
) -> (Value, Value) {
    let Some(held) = jar
        .iter()
        .find(|c| c.name == params.name && c.path == path && scope.holds(c))
    else {
        return (
            Value::Null,
            json!({"status": "mismatch", "reason": "absent"}),
        );
    };
    let mut differs = Vec::new();
    if held.value != params.value {
        differs.push("value");
    }
    if held.secure != params.secure.unwrap_or(false) {
        differs.push("secure");
    }
    if held.http_only != params.http_only.unwrap_or(false) {
        differs.push("httpOnly");
    }
    if let Some(same_site) = &params.same_site
        && held.same_site.as_deref().unwrap_or("None") != same_site
    {
        differs.push("sameSite");
    }
    let session = held.session || held.expires < 0.0;
    match params.expires {
        // The browser may shorten an expiry (Chromium caps it at 400 days), never lengthen it.
        Some(expires) if session || held.expires > expires + 1.0 => differs.push("expires"),
        None if !session => differs.push("expires"),
        _ => {}
    }
    let mut cookie = cookie_json(held);
    if let Some(cookie) = cookie.as_object_mut() {
        cookie.remove("value");
        cookie.remove("valueTruncated");
    }
    let evidence = match differs.is_empty() {
        true => json!({"status": "verified"}),
        false => json!({"status": "mismatch", "reason": "differs", "differs": differs}),
    };
    (cookie, evidence)
}

/// A browser refusal of the write (an error reply: the cookie was not stored), as evidence.
fn refused(error: CdpError) -> Result<String, ToolError> {
    match error {
        CdpError::Remote { message, .. } => Ok(cut(&message, 200).0),
        other => Err(other.into()),
    }
}

async fn set(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: SetParams,
) -> Result<Value, ToolError> {
    let given = params.check()?;
    let mut tab = ControlledTab::acquire(env, scope).await?;
    writable_jar(env, scope)?;
    let write = match given {
        Some(write) => write,
        None => WriteScope::of_tab(&mut tab).await?,
    };
    let session = tab.session().await?;
    let path = params.path.clone().unwrap_or_else(|| "/".to_owned());
    let (url, domain) = match &write {
        WriteScope::Url { url, .. } => (Some(url.clone()), None),
        WriteScope::Domain(domain) => (None, Some(domain.clone())),
    };
    let command = SetCookie {
        name: params.name.clone(),
        value: params.value.clone(),
        url,
        domain,
        path: path.clone(),
        secure: params.secure.unwrap_or(false),
        http_only: params.http_only.unwrap_or(false),
        same_site: params.same_site.clone(),
        expires: params.expires,
    };
    let refusal = match tab.execute(&session, &command, SCRIPT_TIMEOUT).await {
        Ok(reply) if reply.success == Some(false) => {
            Some("the browser did not store the cookie".to_owned())
        }
        Ok(_) => None,
        Err(error) => Some(refused(error)?),
    };
    let (cookie, mut evidence) = match read_jar(env, &tab, scope, &session).await {
        Ok(jar) => set_evidence(&params, &path, &write, &jar.cookies),
        Err(_) => (
            Value::Null,
            json!({"status": "unavailable", "reason": "unreadable"}),
        ),
    };
    if let Some(message) = refusal
        && evidence["status"] != "verified"
    {
        evidence["reason"] = json!("refused");
        evidence["browserMessage"] = json!(message);
    }
    Ok(json!({
        "workspaceId": scope.workspace_id,
        "leaseId": scope.lease_id,
        "targetId": scope.target_id,
        "cookie": cookie,
        "evidence": evidence,
    }))
}

#[derive(Deserialize)]
struct DeleteParams {
    name: String,
    url: Option<String>,
    domain: Option<String>,
    path: Option<String>,
}

async fn delete(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: DeleteParams,
) -> Result<Value, ToolError> {
    if !cookie_token(&params.name, true) {
        return Err(bad_argument(
            "name",
            "must be a cookie name (no spaces, control characters or ;=,)",
        )
        .into());
    }
    if let Some(path) = &params.path
        && !(path.starts_with('/') && cookie_token(path, false))
    {
        return Err(bad_argument(
            "path",
            "must start with / and hold no ; or control characters",
        )
        .into());
    }
    let given = WriteScope::from_args(params.url.as_deref(), params.domain.as_deref())?;
    let mut tab = ControlledTab::acquire(env, scope).await?;
    writable_jar(env, scope)?;
    let write = match given {
        Some(write) => write,
        None => WriteScope::of_tab(&mut tab).await?,
    };
    let session = tab.session().await?;
    let matching = |jar: &[Cookie]| {
        jar.iter()
            .filter(|c| {
                c.name == params.name
                    && params.path.as_ref().is_none_or(|p| *p == c.path)
                    && write.reaches(c)
            })
            .count()
    };
    let before = read_jar(env, &tab, scope, &session)
        .await
        .map(|jar| matching(&jar.cookies))?;
    let (url, domain) = match &write {
        WriteScope::Url { url, .. } => (Some(url.clone()), None),
        WriteScope::Domain(domain) => (None, Some(domain.clone())),
    };
    let command = DeleteCookies {
        name: params.name.clone(),
        url,
        domain,
        path: params.path.clone(),
    };
    tab.execute(&session, &command, SCRIPT_TIMEOUT).await?;
    // A domain cookie is stored under `.domain`: the delete names both forms.
    if let WriteScope::Domain(domain) = &write {
        let dotted = DeleteCookies {
            domain: Some(format!(".{domain}")),
            ..command
        };
        tab.execute(&session, &dotted, SCRIPT_TIMEOUT).await?;
    }
    let evidence = match read_jar(env, &tab, scope, &session).await {
        Ok(jar) => match matching(&jar.cookies) {
            0 => json!({"status": "verified"}),
            remaining => json!({"status": "mismatch", "reason": "remains", "remaining": remaining}),
        },
        Err(_) => json!({"status": "unavailable", "reason": "unreadable"}),
    };
    Ok(json!({
        "workspaceId": scope.workspace_id,
        "leaseId": scope.lease_id,
        "targetId": scope.target_id,
        "deleted": before,
        "evidence": evidence,
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

    fn set_params(v: Value) -> SetParams {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn only_the_workspaces_own_context_is_its_jar() {
        assert_eq!(Jar::of(Some("C1"), Some("C1")), Jar::Workspace);
        assert_eq!(Jar::of(Some("DEFAULT"), Some("C1")), Jar::SharedProfile);
        assert_eq!(Jar::of(Some("C1"), None), Jar::SharedProfile);
        assert_eq!(Jar::of(None, Some("C1")), Jar::SharedProfile);
    }

    #[test]
    fn writes_are_checked_before_they_are_sent() {
        let path_of = |v: Value| {
            let error = set_params(v).check().unwrap_err();
            error.context.unwrap()["path"].clone()
        };
        for (args, path) in [
            (json!({"name": "a b", "value": "v"}), "arguments.name"),
            (json!({"name": "a=b", "value": "v"}), "arguments.name"),
            (json!({"name": "a", "value": "v;w"}), "arguments.value"),
            (json!({"name": "a", "value": "v\n"}), "arguments.value"),
            (
                json!({"name": "a", "value": "v", "path": "x"}),
                "arguments.path",
            ),
            (
                json!({"name": "a", "value": "v", "url": "ftp://h/"}),
                "arguments.url",
            ),
            (
                json!({"name": "a", "value": "v", "domain": "a b"}),
                "arguments.domain",
            ),
            (
                json!({"name": "a", "value": "v", "url": "http://h/", "domain": "h"}),
                "arguments.domain",
            ),
        ] {
            assert_eq!(path_of(args.clone()), path, "{args}");
        }
        assert_eq!(
            set_params(json!({"name": "a", "value": ""}))
                .check()
                .unwrap(),
            None
        );
        assert_eq!(
            set_params(json!({"name": "a", "value": "v", "domain": ".Example.com"}))
                .check()
                .unwrap(),
            Some(WriteScope::Domain("example.com".into()))
        );
        assert_eq!(
            set_params(json!({"name": "a", "value": "v", "url": "https://Shop.example/x"}))
                .check()
                .unwrap(),
            Some(WriteScope::Url {
                url: "https://Shop.example/x".into(),
                host: "shop.example".into()
            })
        );
    }

    #[test]
    fn the_evidence_compares_the_jar_with_the_request_without_echoing_the_value() {
        let scope = WriteScope::Url {
            url: "http://a.test/".into(),
            host: "a.test".into(),
        };
        let mut held = cookie("sid", "a.test", "/", false);
        held.value = "secret".into();
        let params = set_params(json!({"name": "sid", "value": "secret"}));
        let (cookie_out, evidence) =
            set_evidence(&params, "/", &scope, std::slice::from_ref(&held));
        assert_eq!(evidence, json!({"status": "verified"}));
        assert!(cookie_out.get("value").is_none() && !cookie_out.to_string().contains("secret"));
        // Another value, attributes otherwise than asked.
        let params = set_params(
            json!({"name": "sid", "value": "other", "httpOnly": true, "sameSite": "Strict", "expires": 2e9}),
        );
        let (_, evidence) = set_evidence(&params, "/", &scope, std::slice::from_ref(&held));
        assert_eq!(evidence["status"], "mismatch");
        assert_eq!(
            evidence["differs"],
            json!(["value", "httpOnly", "sameSite", "expires"])
        );
        assert!(!evidence.to_string().contains("other"));
        // Another path or a domain cookie of the host is not the cookie written.
        let (none, evidence) = set_evidence(&params, "/app", &scope, std::slice::from_ref(&held));
        assert_eq!(
            (none, evidence),
            (
                Value::Null,
                json!({"status": "mismatch", "reason": "absent"})
            )
        );
        let domain = cookie("sid", ".a.test", "/", false);
        let (_, evidence) = set_evidence(&params, "/", &scope, std::slice::from_ref(&domain));
        assert_eq!(evidence["reason"], "absent");
        let (_, evidence) = set_evidence(
            &params,
            "/",
            &WriteScope::Domain("a.test".into()),
            &[domain],
        );
        assert_eq!(evidence["reason"], "differs");
        // An expiry the browser shortened still counts as set; a longer one does not.
        let mut persistent = held.clone();
        (persistent.session, persistent.expires) = (false, 1.5e9);
        let params = set_params(json!({"name": "sid", "value": "secret", "expires": 2e9}));
        let (_, evidence) = set_evidence(&params, "/", &scope, std::slice::from_ref(&persistent));
        assert_eq!(evidence["status"], "verified");
        persistent.expires = 2.5e9;
        let (_, evidence) = set_evidence(&params, "/", &scope, &[persistent]);
        assert_eq!(evidence["differs"], json!(["expires"]));
    }
}
