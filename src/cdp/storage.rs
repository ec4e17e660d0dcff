//! The cookie jar: `Storage.getCookies`, which answers every cookie of the browser context of
//! the session it is sent on (HttpOnly ones included; docs/cdp.md, "cookies"), and the two
//! `Network` writes into that jar, `Network.setCookie` (one cookie, refused by the browser with
//! an error when it is malformed) and `Network.deleteCookies`. Wire shapes only: which cookies
//! a tool may read or write, and how they are filtered, checked and bounded, is
//! `tools::cookies`'.

use serde::{Deserialize, Serialize};

use super::command::Command;
use super::ids::BrowserContextId;

/// `Storage.getCookies {}`: the cookies of the session's browser context (a profile-wide jar,
/// not a per-tab one).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GetCookies {}

impl Command for GetCookies {
    const METHOD: &'static str = "Storage.getCookies";
    type Reply = CookieList;
}

/// The reply of `Storage.getCookies`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CookieList {
    #[serde(default)]
    pub cookies: Vec<Cookie>,
}

/// One `Network.Cookie`, reduced to what the Broker reads. `domain` starts with `.` for a
/// domain cookie and is the bare host for a host-only one; `expires` is seconds since the epoch,
/// `-1` for a session cookie.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cookie {
    pub name: String,
    pub value: String,
    pub domain: String,
    pub path: String,
    #[serde(default)]
    pub expires: f64,
    #[serde(default)]
    pub http_only: bool,
    #[serde(default)]
    pub secure: bool,
    #[serde(default)]
    pub session: bool,
    /// `Strict`, `Lax` or `None`; absent when the cookie set none.
    #[serde(default)]
    pub same_site: Option<String>,
}

/// `Network.setCookie`: one cookie into the jar of the session's browser context. `url` or
/// `domain` says whose it is (with `url` a host-only cookie of its host, with `domain` a domain
/// cookie); absent fields keep the browser's defaults. The browser answers an error for a
/// cookie it refuses.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetCookie {
    pub name: String,
    pub value: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    pub path: String,
    pub secure: bool,
    pub http_only: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub same_site: Option<String>,
    /// Seconds since the epoch; absent for a session cookie.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires: Option<f64>,
}

/// The reply of `Network.setCookie`: `success` is deprecated and may be absent (a refusal is an
/// error reply).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SetCookieReply {
    #[serde(default)]
    pub success: Option<bool>,
}

impl Command for SetCookie {
    const METHOD: &'static str = "Network.setCookie";
    type Reply = SetCookieReply;
}

/// `Network.deleteCookies`: every cookie named `name` that `url` would be sent (or whose
/// domain is exactly `domain`), limited to `path` when given.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeleteCookies {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

impl Command for DeleteCookies {
    const METHOD: &'static str = "Network.deleteCookies";
    type Reply = super::command::Empty;
}

/// `Storage.getCookies {browserContextId}` on the browser connection: every cookie of that
/// context. On a page session `Storage.getCookies` answers the *default* context's jar whatever
/// the page's context (Chromium 156; docs/cdp.md, "browser contexts"), so an isolated
/// Workspace's jar is read by naming its context on the browser connection.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GetContextCookies {
    #[serde(serialize_with = "super::command::browser_context_id")]
    pub browser_context_id: BrowserContextId,
}

impl Command for GetContextCookies {
    const METHOD: &'static str = "Storage.getCookies";
    type Reply = CookieList;
}

/// One cookie to write with `Storage.setCookies` (a `Network.CookieParam`). A `domain` with a
/// leading `.` is a domain cookie, a bare host a host-only one.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CookieParam {
    pub name: String,
    pub value: String,
    pub domain: String,
    pub path: String,
    pub secure: bool,
    pub http_only: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub same_site: Option<String>,
    /// Seconds since the epoch; absent for a session cookie.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires: Option<f64>,
}

/// `Storage.setCookies {cookies, browserContextId}` on the browser connection: writes the
/// cookies into that context's jar, or without a context into the default one (which is also
/// what a page session's `Storage.setCookies` writes, whatever the page's context).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetContextCookies {
    pub cookies: Vec<CookieParam>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "super::command::optional_browser_context_id"
    )]
    pub browser_context_id: Option<BrowserContextId>,
}

impl Command for SetContextCookies {
    const METHOD: &'static str = "Storage.setCookies";
    type Reply = super::command::Empty;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::command::testing::{params, reply};
    use super::*;

    /// A reply recorded from Chromium 156 (one HttpOnly host-only cookie, one domain cookie).
    #[test]
    fn get_cookies_has_the_wire_shape() {
        assert_eq!(params(&GetCookies {}), json!({}));
        let list = reply::<GetCookies>(json!({"cookies": [
            {"domain":"127.0.0.1","expires":-1,"httpOnly":true,"name":"sid","path":"/","priority":"Medium","sameParty":false,"secure":false,"session":true,"size":9,"sourcePort":41234,"sourceScheme":"NonSecure","value":"s3cret"},
            {"domain":".example.com","expires":1800000000.5,"httpOnly":false,"name":"pref","path":"/app","priority":"Medium","sameSite":"Lax","secure":true,"session":false,"size":8,"sourcePort":443,"sourceScheme":"Secure","value":"dark"}
        ]}));
        assert_eq!(list.cookies.len(), 2);
        assert!(list.cookies[0].http_only && list.cookies[0].session);
        assert_eq!(list.cookies[0].same_site, None);
        assert_eq!(list.cookies[1].domain, ".example.com");
        assert_eq!(list.cookies[1].same_site.as_deref(), Some("Lax"));
        assert_eq!(reply::<GetCookies>(json!({})).cookies, Vec::new());
    }

    #[test]
    fn cookie_writes_have_the_wire_shape() {
        let set = SetCookie {
            name: "sid".into(),
            value: "v".into(),
            url: Some("http://127.0.0.1:8080/".into()),
            domain: None,
            path: "/".into(),
            secure: false,
            http_only: true,
            same_site: Some("Lax".into()),
            expires: None,
        };
        assert_eq!(
            params(&set),
            json!({"name": "sid", "value": "v", "url": "http://127.0.0.1:8080/", "path": "/", "secure": false, "httpOnly": true, "sameSite": "Lax"})
        );
        assert_eq!(
            reply::<SetCookie>(json!({"success": true})).success,
            Some(true)
        );
        assert_eq!(reply::<SetCookie>(json!({})).success, None);
        let delete = DeleteCookies {
            name: "sid".into(),
            url: None,
            domain: Some("example.com".into()),
            path: None,
        };
        assert_eq!(
            params(&delete),
            json!({"name": "sid", "domain": "example.com"})
        );
    }

    #[test]
    fn context_cookie_calls_name_the_context() {
        let context = BrowserContextId::new("C");
        assert_eq!(
            params(&GetContextCookies {
                browser_context_id: context.clone()
            }),
            json!({"browserContextId": "C"})
        );
        let set = SetContextCookies {
            cookies: vec![CookieParam {
                name: "sid".into(),
                value: "v".into(),
                domain: "127.0.0.1".into(),
                path: "/".into(),
                secure: false,
                http_only: true,
                same_site: None,
                expires: None,
            }],
            browser_context_id: Some(context),
        };
        assert_eq!(
            params(&set),
            json!({"cookies": [{"name": "sid", "value": "v", "domain": "127.0.0.1", "path": "/", "secure": false, "httpOnly": true}], "browserContextId": "C"})
        );
    }
}
