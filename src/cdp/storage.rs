//! The `Storage` domain: `Storage.getCookies`, which answers every cookie of the browser
//! context of the session it is sent on (HttpOnly ones included; docs/cdp.md, "cookies"). Wire shapes
//! only: which cookies a tool may return, and how they are filtered and bounded, is
//! `tools::cookies`'.

use serde::{Deserialize, Serialize};

use super::command::Command;

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
}
