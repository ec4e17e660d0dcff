//! Process tests of the data tools behind the extra capabilities, against a real headless
//! Chromium: `browser.cookies.list` (HttpOnly cookies set by a fixture server, URL and domain
//! filters, bounds), `browser.cookies.set|delete` (read back through the list and by the page,
//! refused in the shared profile without `profile.write`, values nowhere but the jar),
//! `browser.emulate` (a phone's viewport, locale, timezone, position and dark scheme seen by the
//! page, offline and back, a user tab handed back as it was found), `browser.eval` (an expression, a function with arguments, a promise, a
//! throw and a rejection, a 50 MB string and a large array bounded in the page, a cycle, an
//! eval whose outcome is unknown), and least privilege (an omitted `requestedCapabilities`
//! grants the six; a Connection without an extra neither sees its tools nor can call them, nor
//! read their recorded results with `commands/get` or `debug sql`).
//! It also holds `browser.type`'s fill mode (one editing insertion, verified against fields
//! that rewrite their value), to share the module's one Chromium and one Broker.

use crate::support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use support::TEST_LEASE_TTL_MS;
use support::rig::{Agent, Rig};

const SIX: [&str; 6] = [
    "browser.control",
    "workspace.manage",
    "observation.read",
    "action.input",
    "artifact.read",
    "event.read",
];
const EXTRA_TOOLS: [&str; 2] = ["browser.cookies.list", "browser.eval"];

/// A site that logs you in the way real ones do: an HttpOnly session cookie, a persistent
/// preference cookie, a cookie scoped to `/admin`, and one set by the page's own script.
struct CookieSite {
    port: u16,
}

impl CookieSite {
    fn start() -> CookieSite {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || serve_cookie_site(stream));
            }
        });
        CookieSite { port }
    }

    /// The same server under another host name (`localhost`): another cookie host.
    fn url(&self, host: &str, path: &str) -> String {
        format!("http://{host}:{}{path}", self.port)
    }
}

fn serve_cookie_site(stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => break,
            Ok(_) if header == "\r\n" || header == "\n" => break,
            Ok(_) => {}
        }
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("/");
    let (cookies, body): (&[&str], &str) = match path.split('?').next().unwrap_or(path) {
        "/login" => (
            &[
                "sid=s3cret-session-value; HttpOnly; Path=/; SameSite=Lax",
                "theme=dark; Path=/; Max-Age=3600",
                "scoped=admin-only; Path=/admin",
            ],
            "<!doctype html><title>Signed in</title><h1>Welcome back</h1><script>document.cookie = 'seen=1; path=/';</script>",
        ),
        "/other" => (
            &["other=elsewhere; Path=/"],
            "<!doctype html><title>Other host</title><p>other</p>",
        ),
        "/mobile" => (
            &[],
            "<!doctype html><meta name=\"viewport\" content=\"width=device-width\"><title>Mobile</title><p>mobile</p>",
        ),
        _ => (&[], "<!doctype html><title>Data</title><p>data</p>"),
    };
    let mut head = String::from("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n");
    for cookie in cookies {
        head.push_str(&format!("Set-Cookie: {cookie}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    let mut stream = stream;
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
    let _ = stream.flush();
}

/// A bridge initialized with `capabilities` (`None`: the field omitted), plus a Workspace and
/// a Lease; also the `initialize` result.
fn agent_with(rig: &Rig, client: &str, capabilities: Option<&[&str]>) -> (Agent, Value) {
    let mut bridge = rig.home.spawn_bridge();
    let mut params = support::initialize_params(client, "i1", (1, 1));
    match capabilities {
        Some(list) => params["requestedCapabilities"] = json!(list),
        None => {
            params
                .as_object_mut()
                .unwrap()
                .remove("requestedCapabilities");
        }
    }
    let initialized = bridge.ok("initialize", params);
    let ws = bridge.ok("workspaces/create", json!({}));
    let workspace_id = ws["workspace"]["id"].clone();
    let lease = bridge.ok(
        "leases/create",
        json!({"workspaceId": workspace_id, "ttlMs": TEST_LEASE_TTL_MS}),
    );
    let agent = Agent {
        bridge,
        workspace_id,
        lease_id: lease["lease"]["id"].clone(),
        cursor: ws["eventCursor"].as_str().unwrap().to_owned(),
    };
    (agent, initialized)
}

fn tool_names(agent: &mut Agent) -> Vec<String> {
    agent.bridge.ok("tools/list", json!({}))["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

fn cookie_names(listed: &Value) -> Vec<String> {
    let mut names: Vec<String> = listed["cookies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

fn cookie<'a>(listed: &'a Value, name: &str) -> &'a Value {
    listed["cookies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no cookie {name} in {listed}"))
}

#[test]
fn data_tools_against_real_pages() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let rig = Rig::start_logging(log.path());
    let site = CookieSite::start();
    least_privilege(&rig);
    cookie_writes(&rig, &site, log.path());
    emulation(&rig, &site);
    let (mut agent, _) = agent_with(
        &rig,
        "com.example.data",
        Some(&[&SIX[..], &["network.read", "page.eval"]].concat()),
    );
    agent.connect();
    cookies(&mut agent, &site);
    eval(&mut agent, &site);
    gated_results_stay_gated(&mut agent, &rig);
    fill_mode(&mut agent, &rig);
}

/// A second Connection of the same client without `network.read` and `page.eval` learns the
/// Command ids from `command.status` events, but `commands/get` gives it status and times, not
/// the cookie values or eval values; `debug sql` shows no result at all.
fn gated_results_stay_gated(agent: &mut Agent, rig: &Rig) {
    let mut second = rig.home.spawn_bridge();
    second.initialize("com.example.data", "i1");
    let journal = second.ok(
        "events/poll",
        json!({"workspaceId": agent.workspace_id, "cursor": "cursor:0", "limit": 1000}),
    );
    let completed = |method: &str| -> Vec<Value> {
        journal["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| {
                e["type"] == "command.status"
                    && e["payload"]["method"] == method
                    && e["payload"]["status"] == "completed"
            })
            .map(|e| e["payload"]["commandId"].clone())
            .collect()
    };
    let cookie_lists = completed("browser.cookies.list");
    let evals = completed("browser.eval");
    assert!(!cookie_lists.is_empty() && !evals.is_empty(), "{journal}");
    let mut withheld = std::collections::HashSet::new();
    for (id, capability) in cookie_lists
        .iter()
        .map(|id| (id, "network.read"))
        .chain(evals.iter().map(|id| (id, "page.eval")))
    {
        let got = second.ok("commands/get", json!({"commandId": id}));
        assert_eq!(got["command"]["status"], "completed", "{got}");
        assert!(got["command"]["completedAt"].is_i64(), "{got}");
        assert!(got.get("result").is_none(), "{got}");
        if got.get("error").is_some() {
            // A recorded error is still returned (unknown_outcome recovery relies on it).
            continue;
        }
        withheld.insert(capability);
        assert_eq!(got["context"]["reason"], "capability_withheld", "{got}");
        assert_eq!(got["context"]["capability"], capability, "{got}");
        assert!(!got.to_string().contains("s3cret-session-value"), "{got}");
    }
    assert_eq!(
        withheld.len(),
        2,
        "both capabilities' results were withheld"
    );
    // The Connection that holds the capability still reads the result.
    let own = agent
        .bridge
        .ok("commands/get", json!({"commandId": cookie_lists[0]}));
    assert!(
        own["result"].to_string().contains("s3cret-session-value"),
        "{own}"
    );
    let (code, out, err) = rig.home.run(
        env!("CARGO_BIN_EXE_browser-pilot"),
        &[
            "debug",
            "sql",
            "SELECT method, status, result_json FROM commands WHERE method = 'browser.cookies.list'",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("completed"), "{out}");
    assert!(!out.contains("s3cret-session-value"), "{out}");
}

/// An omitted list grants the six and lists all ten as supported; without an extra its tools
/// are neither listed nor callable; naming one extra grants exactly that one.
fn least_privilege(rig: &Rig) {
    let (mut plain, initialized) = agent_with(rig, "com.example.plain", None);
    let supported = strings(&initialized["capabilities"]["supported"]);
    for name in SIX.iter().chain(&[
        "network.read",
        "network.control",
        "page.eval",
        "profile.write",
    ]) {
        assert!(
            supported.iter().any(|s| s == name),
            "{name} in {supported:?}"
        );
    }
    assert_eq!(strings(&initialized["capabilities"]["granted"]), SIX);
    plain.connect();
    let listed = tool_names(&mut plain);
    assert!(listed.iter().any(|t| t == "browser.observe"), "{listed:?}");
    for extra in EXTRA_TOOLS {
        assert!(
            !listed.iter().any(|t| t == extra),
            "{extra} listed: {listed:?}"
        );
    }
    let opened = plain.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/page/plain")}),
    );
    let target = opened["targetId"].clone();
    for (tool, capability, arguments) in [
        (
            "browser.eval",
            "page.eval",
            json!({"expression": "document.title = 'owned'"}),
        ),
        ("browser.cookies.list", "network.read", json!({})),
    ] {
        let (code, error) = plain.tool_err(tool, Some(&target), arguments);
        assert_eq!(code, "capability_denied", "{tool}: {error}");
        assert_eq!(error["data"]["context"]["capability"], capability);
        assert_eq!(error["data"]["remediation"]["action"], "request_capability");
    }
    // The denied eval never ran.
    let read = plain.tool("browser.read", Some(&target), json!({}));
    assert_eq!(read["title"], "plain");

    // Naming one extra grants that one only.
    let (mut evaluator, initialized) = agent_with(
        rig,
        "com.example.evaluator",
        Some(&["page.eval", "workspace.manage", "made.up"]),
    );
    assert_eq!(
        strings(&initialized["capabilities"]["granted"]),
        ["workspace.manage", "page.eval"]
    );
    let listed = tool_names(&mut evaluator);
    assert!(listed.iter().any(|t| t == "browser.eval"), "{listed:?}");
    assert!(
        !listed.iter().any(|t| t == "browser.cookies.list"),
        "{listed:?}"
    );
    assert!(!listed.iter().any(|t| t == "browser.open"), "{listed:?}");
}

fn cookies(agent: &mut Agent, site: &CookieSite) {
    // A cookie of another host, in the same profile-wide jar.
    let other = agent.tool(
        "browser.open",
        None,
        json!({"url": site.url("localhost", "/other")}),
    )["targetId"]
        .clone();
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": site.url("127.0.0.1", "/login")}),
    );
    let target = opened["targetId"].clone();

    // No filter: the cookies the tab's current URL gets, HttpOnly included.
    let listed = agent.tool("browser.cookies.list", Some(&target), json!({}));
    assert_eq!(cookie_names(&listed), ["seen", "sid", "theme"], "{listed}");
    assert_eq!(listed["truncated"], false);
    let sid = cookie(&listed, "sid");
    assert_eq!(sid["value"], "s3cret-session-value");
    assert_eq!(sid["httpOnly"], true);
    assert_eq!(sid["session"], true);
    assert_eq!(sid["expires"], Value::Null);
    assert_eq!(sid["sameSite"], "Lax");
    assert_eq!(sid["hostOnly"], true);
    assert_eq!(sid["domain"], "127.0.0.1");
    let theme = cookie(&listed, "theme");
    assert_eq!(theme["httpOnly"], false);
    assert_eq!(theme["session"], false);
    assert!(theme["expires"].as_f64().unwrap() > 1.7e9, "{theme}");
    // The page itself cannot see the HttpOnly cookie: the value came from the browser's jar.
    let page_view = agent.tool(
        "browser.eval",
        Some(&target),
        json!({"expression": "document.cookie"}),
    );
    let page_cookies = page_view["value"].as_str().unwrap();
    assert!(page_cookies.contains("theme=dark"), "{page_cookies}");
    assert!(!page_cookies.contains("s3cret"), "{page_cookies}");

    // By URL: the /admin path adds the scoped cookie; another host's URL gets only its own.
    let admin = agent.tool(
        "browser.cookies.list",
        Some(&target),
        json!({"urls": [site.url("127.0.0.1", "/admin/users")]}),
    );
    assert_eq!(cookie_names(&admin), ["scoped", "seen", "sid", "theme"]);
    let both = agent.tool(
        "browser.cookies.list",
        Some(&target),
        json!({"urls": [site.url("localhost", "/"), site.url("127.0.0.1", "/")], "limit": 2}),
    );
    assert_eq!(both["total"], 4, "{both}");
    assert_eq!(both["truncated"], true);
    assert_eq!(both["cookies"].as_array().unwrap().len(), 2);

    // By domain.
    let by_domain = agent.tool(
        "browser.cookies.list",
        Some(&target),
        json!({"domain": "localhost"}),
    );
    assert_eq!(cookie_names(&by_domain), ["other"]);
    let by_domain = agent.tool(
        "browser.cookies.list",
        Some(&other),
        json!({"domain": "127.0.0.1"}),
    );
    assert_eq!(cookie_names(&by_domain), ["scoped", "seen", "sid", "theme"]);

    // Bad filters name their path.
    let (code, error) = agent.tool_err(
        "browser.cookies.list",
        Some(&target),
        json!({"urls": ["http://127.0.0.1/", "javascript:alert(1)"]}),
    );
    assert_eq!(code, "invalid_params");
    assert_eq!(error["data"]["context"]["path"], "arguments.urls[1]");
    let (code, error) = agent.tool_err(
        "browser.cookies.list",
        Some(&target),
        json!({"urls": ["http://127.0.0.1/"], "domain": "127.0.0.1"}),
    );
    assert_eq!(code, "invalid_params");
    assert_eq!(error["data"]["context"]["path"], "arguments.domain");
    agent.tool("browser.tabs.close", Some(&other), json!({}));
}

/// A value only the jar may hold: never in a result, an event, the store or the Broker log.
const SECRET_VALUE: &str = "s3cret-written-token";
const SECRET_HTTP_ONLY: &str = "s3cret-written-httponly";

fn cookie_writes(rig: &Rig, site: &CookieSite, log: &std::path::Path) {
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        [&SIX[..], &["network.read", "page.eval"], extra].concat()
    };
    // network.control alone: the Workspace shares the user's profile, so writes are refused
    // before anything reaches the jar.
    let (mut plain, _) = agent_with(
        rig,
        "com.example.cookiewriter",
        Some(&with(&["network.control"])),
    );
    plain.connect();
    let target = plain.tool(
        "browser.open",
        None,
        json!({"url": site.url("127.0.0.1", "/data")}),
    )["targetId"]
        .clone();
    for (tool, arguments) in [
        (
            "browser.cookies.set",
            json!({"name": "token", "value": SECRET_VALUE}),
        ),
        ("browser.cookies.delete", json!({"name": "theme"})),
    ] {
        let (code, error) = plain.tool_err(tool, Some(&target), arguments);
        assert_eq!(code, "capability_denied", "{tool}: {error}");
        assert_eq!(error["data"]["context"]["capability"], "profile.write");
        assert_eq!(error["data"]["context"]["jar"], "shared_profile");
        assert_eq!(error["data"]["remediation"]["action"], "request_capability");
        assert!(!error.to_string().contains(SECRET_VALUE), "{error}");
    }
    let listed = plain.tool(
        "browser.cookies.list",
        Some(&target),
        json!({"domain": "127.0.0.1"}),
    );
    assert!(
        !cookie_names(&listed).contains(&"token".to_owned()),
        "{listed}"
    );
    plain.tool("browser.tabs.close", Some(&target), json!({}));

    // With profile.write: set, read back by the list and by the page, then deleted.
    let (mut agent, _) = agent_with(
        rig,
        "com.example.cookiewriter",
        Some(&with(&["network.control", "profile.write"])),
    );
    agent.connect();
    let target = agent.tool(
        "browser.open",
        None,
        json!({"url": site.url("127.0.0.1", "/data")}),
    )["targetId"]
        .clone();
    let mut results = Vec::new();
    let set = agent.tool(
        "browser.cookies.set",
        Some(&target),
        json!({"name": "token", "value": SECRET_VALUE, "sameSite": "Lax"}),
    );
    assert_eq!(set["evidence"]["status"], "verified", "{set}");
    assert_eq!(set["cookie"]["name"], "token");
    assert_eq!(set["cookie"]["domain"], "127.0.0.1");
    assert_eq!(set["cookie"]["hostOnly"], true);
    assert_eq!(set["cookie"]["path"], "/");
    assert_eq!(set["cookie"]["sameSite"], "Lax");
    assert!(set["cookie"].get("value").is_none(), "{set}");
    results.push(set);
    let hidden = agent.tool(
        "browser.cookies.set",
        Some(&target),
        json!({"name": "hsid", "value": SECRET_HTTP_ONLY, "httpOnly": true, "url": site.url("127.0.0.1", "/"), "expires": 4_000_000_000u64}),
    );
    assert_eq!(hidden["evidence"]["status"], "verified", "{hidden}");
    assert_eq!(hidden["cookie"]["httpOnly"], true);
    assert_eq!(hidden["cookie"]["session"], false);
    results.push(hidden);
    let listed = agent.tool("browser.cookies.list", Some(&target), json!({}));
    assert_eq!(cookie(&listed, "token")["value"], SECRET_VALUE);
    assert_eq!(cookie(&listed, "hsid")["value"], SECRET_HTTP_ONLY);
    let page = agent.tool(
        "browser.eval",
        Some(&target),
        json!({"expression": "document.cookie"}),
    );
    let page_cookies = page["value"].as_str().unwrap();
    assert!(
        page_cookies.contains(&format!("token={SECRET_VALUE}")),
        "{page_cookies}"
    );
    assert!(
        !page_cookies.contains(SECRET_HTTP_ONLY),
        "HttpOnly stays hidden: {page_cookies}"
    );

    // The browser's own answer decides the evidence: an expiry in the past stores nothing.
    let expired = agent.tool(
        "browser.cookies.set",
        Some(&target),
        json!({"name": "gone", "value": "x", "expires": 1}),
    );
    assert_eq!(expired["evidence"]["status"], "mismatch", "{expired}");
    assert_eq!(expired["evidence"]["reason"], "absent");
    assert_eq!(expired["cookie"], Value::Null);
    let (code, error) = agent.tool_err(
        "browser.cookies.set",
        Some(&target),
        json!({"name": "bad name", "value": "x"}),
    );
    assert_eq!(code, "invalid_params");
    assert_eq!(error["data"]["context"]["path"], "arguments.name");

    for name in ["token", "hsid"] {
        let deleted = agent.tool(
            "browser.cookies.delete",
            Some(&target),
            json!({"name": name}),
        );
        assert_eq!(deleted["evidence"]["status"], "verified", "{deleted}");
        assert_eq!(deleted["deleted"], 1, "{deleted}");
        results.push(deleted);
    }
    let listed = agent.tool(
        "browser.cookies.list",
        Some(&target),
        json!({"domain": "127.0.0.1"}),
    );
    let names = cookie_names(&listed);
    assert!(
        !names.contains(&"token".to_owned()) && !names.contains(&"hsid".to_owned()),
        "{listed}"
    );
    let page = agent.tool(
        "browser.eval",
        Some(&target),
        json!({"expression": "document.cookie"}),
    );
    assert!(
        !page["value"].as_str().unwrap().contains("token="),
        "{page}"
    );

    // The values are in no result, event, store row or log line.
    let journal: String = agent.events().iter().map(Value::to_string).collect();
    assert!(
        journal.contains("browser.cookies.set"),
        "the journal shows the writes"
    );
    let mut dump = String::new();
    for table in ["events", "commands"] {
        let (code, out, err) = rig.home.run(
            env!("CARGO_BIN_EXE_browser-pilot"),
            &["debug", "sql", &format!("SELECT * FROM {table}")],
        );
        assert_eq!(code, 0, "debug sql {table}: {err}");
        dump.push_str(&out);
    }
    assert!(
        dump.contains("browser.cookies.set"),
        "the dump shows the writes"
    );
    let broker_log = std::fs::read_to_string(log).unwrap_or_default();
    assert!(
        broker_log.contains("Network.setCookie"),
        "the trace log shows the writes"
    );
    for secret in [SECRET_VALUE, SECRET_HTTP_ONLY] {
        for result in &results {
            assert!(!result.to_string().contains(secret), "{result}");
        }
        assert!(
            !journal.contains(secret),
            "the journal holds a cookie value"
        );
        assert!(!dump.contains(secret), "debug sql holds a cookie value");
        assert!(
            !broker_log.contains(secret),
            "the Broker log holds a cookie value"
        );
    }
    agent.tool("browser.tabs.close", Some(&target), json!({}));
}

/// What the page says about its device, place and media.
const PAGE_SEES: &str = "(async () => ({width: innerWidth, ratio: devicePixelRatio, touch: navigator.maxTouchPoints, language: navigator.language, intl: Intl.DateTimeFormat().resolvedOptions().locale, timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone, dark: matchMedia('(prefers-color-scheme: dark)').matches, reduced: matchMedia('(prefers-reduced-motion: reduce)').matches, position: await new Promise(done => navigator.geolocation.getCurrentPosition(p => done([p.coords.latitude, p.coords.longitude]), e => done('error ' + e.code), {timeout: 5000}))}))()";
const FETCH: &str = "fetch('/data?probe').then(r => 'ok ' + r.status, e => 'failed')";

fn emulation(rig: &Rig, site: &CookieSite) {
    let (mut agent, _) = agent_with(
        rig,
        "com.example.emulator",
        Some(&[&SIX[..], &["page.eval", "page.emulate"]].concat()),
    );
    agent.connect();
    let target = agent.tool(
        "browser.open",
        None,
        json!({"url": site.url("127.0.0.1", "/mobile")}),
    )["targetId"]
        .clone();
    let own = eval_ok(&mut agent, &target, json!({"expression": PAGE_SEES}))["value"].clone();
    assert_eq!(own["dark"], false, "{own}");
    let emulated = agent.tool(
        "browser.emulate",
        Some(&target),
        json!({"device": "phone", "locale": "fr-FR", "timezone": "Asia/Tokyo", "geolocation": {"latitude": 48.8566, "longitude": 2.3522}, "colorScheme": "dark", "reducedMotion": true}),
    );
    let state = &emulated["emulation"];
    assert_eq!(
        state["viewport"],
        json!({"width": 390, "height": 844, "deviceScaleFactor": 3.0, "mobile": true})
    );
    assert_eq!(state["geolocationGrantedTo"], site.url("127.0.0.1", ""));
    let seen = eval_ok(&mut agent, &target, json!({"expression": PAGE_SEES}))["value"].clone();
    assert_eq!(
        seen,
        json!({"width": 390, "ratio": 3, "touch": 5, "language": "fr-FR", "intl": "fr-FR", "timeZone": "Asia/Tokyo", "dark": true, "reduced": true, "position": [48.8566, 2.3522]}),
        "the page sees the phone"
    );

    // Offline: the page's fetch fails; clearing it restores the network.
    agent.tool("browser.emulate", Some(&target), json!({"offline": true}));
    assert_eq!(
        eval_ok(&mut agent, &target, json!({"expression": FETCH}))["value"],
        "failed"
    );
    let online = agent.tool("browser.emulate", Some(&target), json!({"offline": false}));
    assert_eq!(online["emulation"]["offline"], false);
    assert_eq!(
        eval_ok(&mut agent, &target, json!({"expression": FETCH}))["value"],
        "ok 200"
    );
    let (code, error) =
        agent.tool_err("browser.emulate", Some(&target), json!({"locale": "fr FR"}));
    assert_eq!(code, "invalid_params", "{error}");
    let reset = agent.tool("browser.emulate", Some(&target), json!({"reset": true}));
    assert_eq!(reset["emulation"], Value::Null);
    let back = eval_ok(&mut agent, &target, json!({"expression": PAGE_SEES}))["value"].clone();
    assert_eq!(back["width"], own["width"], "{back}");
    assert_eq!(back["timeZone"], own["timeZone"], "{back}");
    agent.tool("browser.tabs.close", Some(&target), json!({}));

    // A user tab: emulated while controlled, as it was once its Lease is released.
    let mut cdp = support::chromium::OwnCdp::connect(&rig.chromium);
    cdp.open_user_tab(&site.url("127.0.0.1", "/mobile?user"));
    cdp.wait_for_document("/mobile?user", "Mobile");
    let user_sees = |cdp: &mut support::chromium::OwnCdp| {
        cdp.evaluate_in_page("/mobile?user", "JSON.stringify([innerWidth, devicePixelRatio, Intl.DateTimeFormat().resolvedOptions().timeZone, matchMedia('(prefers-color-scheme: dark)').matches, navigator.onLine])")["result"]["value"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let before = user_sees(&mut cdp);
    let user = agent
        .tabs()
        .into_iter()
        .find(|t| t["url"].as_str().unwrap_or("").ends_with("/mobile?user"))
        .expect("the user tab is listed")["targetId"]
        .clone();
    agent.tool(
        "browser.emulate",
        Some(&user),
        json!({"device": "tablet", "timezone": "America/Lima", "colorScheme": "dark", "offline": true, "geolocation": {"latitude": 1, "longitude": 2}}),
    );
    let during = eval_ok(
        &mut agent,
        &user,
        json!({"expression": "[innerWidth, Intl.DateTimeFormat().resolvedOptions().timeZone, matchMedia('(prefers-color-scheme: dark)').matches]"}),
    );
    assert_eq!(during["value"], json!([820, "America/Lima", true]));
    let id = (agent.workspace_id.clone(), agent.lease_id.clone());
    agent.bridge.ok(
        "leases/release",
        json!({"workspaceId": id.0, "leaseId": id.1}),
    );
    let mut after = String::new();
    assert!(
        support::wait_until(std::time::Duration::from_secs(10), || {
            after = user_sees(&mut cdp);
            after == before
        }),
        "the user tab is as it was found: {before} then {after}"
    );
}

fn eval_ok(agent: &mut Agent, target: &Value, arguments: Value) -> Value {
    agent.tool("browser.eval", Some(target), arguments)
}

/// Evaluates `expression` until it yields `want` (a page that is still loading may answer
/// otherwise for a moment); panics after 15 s.
fn wait_for_eval(agent: &mut Agent, target: &Value, expression: &str, want: Value) -> Value {
    let mut last = Value::Null;
    let found = support::wait_until(std::time::Duration::from_secs(15), || {
        let response = agent.call(
            "browser.eval",
            Some(target),
            json!({"expression": expression}),
        );
        last = response["result"]["result"].clone();
        last["value"] == want
    });
    assert!(found, "{expression} never became {want}: {last}");
    last
}

fn eval(agent: &mut Agent, site: &CookieSite) {
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": site.url("127.0.0.1", "/data")}),
    );
    let target = opened["targetId"].clone();

    // An expression in the main world: it sees the page's own globals.
    let result = eval_ok(
        agent,
        &target,
        json!({"expression": "document.title + ':' + (6 * 7)"}),
    );
    assert_eq!(result["type"], "string");
    assert_eq!(result["value"], "Data:42");
    assert_eq!(result["truncated"], false);
    assert_eq!(result["truncationReasons"], json!([]));

    // A function with JSON arguments; it changes the page, and the result reads it afterwards.
    let result = eval_ok(
        agent,
        &target,
        json!({"function": "function (a, b) { document.title = 'Sum ' + (a + b.n); return {sum: a + b.n, self: this === window}; }", "args": [2, {"n": 3}]}),
    );
    assert_eq!(result["value"], json!({"sum": 5, "self": true}));
    assert_eq!(result["type"], "object");
    assert_eq!(result["title"], "Sum 5");

    // A promise is awaited; top-level await works in an expression.
    let result = eval_ok(
        agent,
        &target,
        json!({"expression": "new Promise(r => setTimeout(() => r({ok: true, list: [1, 'two', null]}), 150))"}),
    );
    assert_eq!(
        result["value"],
        json!({"ok": true, "list": [1, "two", null]})
    );
    let result = eval_ok(
        agent,
        &target,
        json!({"expression": "await new Promise(r => setTimeout(r, 20)), 'after'"}),
    );
    assert_eq!(result["value"], "after");
    let result = eval_ok(agent, &target, json!({"expression": "undefined"}));
    assert_eq!(
        (&result["type"], &result["value"], &result["truncated"]),
        (&json!("undefined"), &Value::Null, &json!(false))
    );

    // A throw and a rejection: eval_exception with the page's text, a settled outcome.
    for (expression, text) in [
        ("(() => { throw new Error('boom-42'); })()", "boom-42"),
        ("Promise.reject(new TypeError('nope-7'))", "nope-7"),
        (
            "(() => { throw 'plain string thrown'; })()",
            "plain string thrown",
        ),
        ("1 +* 2", "SyntaxError"),
    ] {
        let (code, error) = agent.tool_err(
            "browser.eval",
            Some(&target),
            json!({"expression": expression}),
        );
        assert_eq!(code, "eval_exception", "{expression}: {error}");
        assert_eq!(error["data"]["retryable"], false);
        let exception = &error["data"]["context"]["exception"];
        assert!(
            exception["text"].as_str().unwrap().contains(text),
            "{expression}: {exception}"
        );
        assert_eq!(exception["sensitivity"], "browser_data");
    }
    // A huge thrown value is cut in the page too.
    let (code, error) = agent.tool_err(
        "browser.eval",
        Some(&target),
        json!({"expression": "(() => { throw 'y'.repeat(50 * 1024 * 1024); })()"}),
    );
    assert_eq!(code, "eval_exception");
    let text = error["data"]["context"]["exception"]["text"]
        .as_str()
        .unwrap();
    assert_eq!(text.len(), 2000, "cut to 2,000 characters");
    assert!(text.bytes().all(|b| b == b'y'));

    // 50 MB never leaves the page: a string and an array are cut to maxChars in the page.
    let result = eval_ok(
        agent,
        &target,
        json!({"expression": "'x'.repeat(50 * 1024 * 1024)"}),
    );
    assert_eq!(result["type"], "string");
    assert_eq!(result["truncated"], true);
    assert_eq!(result["truncationReasons"], json!(["max_chars"]));
    let cut = result["value"].as_str().unwrap();
    assert!(cut.len() > 60_000 && cut.len() <= 65_536, "{}", cut.len());
    assert!(cut.bytes().all(|b| b == b'x'));
    let result = eval_ok(
        agent,
        &target,
        json!({"expression": "Array.from({length: 5000000}, (_, i) => ({i, s: 'row-' + i}))", "maxChars": 4096}),
    );
    assert_eq!(result["type"], "array");
    assert_eq!(result["truncationReasons"], json!(["max_chars"]));
    let rows = result["value"].as_array().unwrap();
    assert!(rows.len() > 50 && rows.len() < 4096, "{}", rows.len());
    assert_eq!(rows[7], json!({"i": 7, "s": "row-7"}));
    assert!(serde_json::to_string(&result["value"]).unwrap().len() <= 4096);

    // Cycles and depth are cut with their reasons.
    let result = eval_ok(
        agent,
        &target,
        json!({"expression": "(() => { const a = {name: 'a', deep: {b: {c: {d: 1}}}}; a.self = a; return a; })()", "maxDepth": 3}),
    );
    assert_eq!(
        result["value"],
        json!({"name": "a", "deep": {"b": {"c": "[Object]"}}, "self": "[Circular]"})
    );
    let reasons = strings(&result["truncationReasons"]);
    assert!(reasons.contains(&"cycle".to_owned()), "{reasons:?}");
    assert!(reasons.contains(&"max_depth".to_owned()), "{reasons:?}");

    // Code that navigates away still completes: its value, or `unknown` if the box went with
    // the document, never a retryable error.
    let result = eval_ok(
        agent,
        &target,
        json!({"expression": "(location.href = '/data?after', 'leaving')"}),
    );
    assert!(
        result["type"] == "string" && result["value"] == "leaving"
            || result["type"] == "unknown" && result["value"].is_null(),
        "{result}"
    );
    let result = wait_for_eval(agent, &target, "location.search", json!("?after"));
    assert_eq!(
        result["url"],
        format!("http://127.0.0.1:{}/data?after", site.port)
    );

    // A promise that never settles: the deadline passes after the code was sent, so the outcome
    // is unknown (never retryable, never replayed), and the tab stays usable.
    let params = json!({"name": "browser.eval", "arguments": {"expression": "window.bpPending = (window.bpPending || 0) + 1, new Promise(() => {})"}, "workspaceId": agent.workspace_id, "leaseId": agent.lease_id, "targetId": target, "deadlineMs": 4000});
    let response = agent.bridge.call("tools/call", params);
    let error = &response["error"];
    assert_eq!(error["data"]["code"], "unknown_outcome", "{response}");
    assert_eq!(error["data"]["retryable"], false);
    assert_eq!(
        error["data"]["context"]["dispatched"]["first"],
        "script:eval"
    );
    let result = eval_ok(agent, &target, json!({"expression": "window.bpPending"}));
    assert_eq!(result["value"], 1, "the pending eval ran exactly once");
}

/// `browser.type` with `mode: "fill"` on the ref named `name` of a fresh Observation.
fn fill(agent: &mut Agent, target: &Value, name: &str, extra: Value) -> Value {
    let observation = agent.tool("browser.observe", Some(target), json!({"limit": 50}));
    let element_ref = support::rig::find_ref(&observation, "textbox", name);
    let mut arguments =
        json!({"observationId": observation["observationId"], "ref": element_ref, "mode": "fill"});
    if let (Some(arguments), Some(extra)) = (arguments.as_object_mut(), extra.as_object()) {
        arguments.extend(extra.clone());
    }
    agent.call("browser.type", Some(target), arguments)
}

/// The page's editing events for one field since the last call (read through `browser.eval`).
fn take_log(agent: &mut Agent, target: &Value, field: &str) -> Vec<Value> {
    let log = eval_ok(
        agent,
        target,
        json!({"function": "(field) => { const log = window.fillLog.filter(e => e.target === field); window.fillLog = []; return log; }", "args": [field]}),
    );
    log["value"].as_array().unwrap().clone()
}

fn fill_mode(agent: &mut Agent, rig: &Rig) {
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/fixture/fill")}),
    );
    let target = opened["targetId"].clone();

    // A plain field: select-all, then one insertion of the whole text over it; verified.
    let response = fill(agent, &target, "Full name", json!({"text": "Ada Lovelace"}));
    let evidence = &response["result"]["result"]["evidence"];
    assert_eq!(evidence["status"], "verified", "{response}");
    assert_eq!(evidence["method"], "insert");
    assert_eq!(evidence["insertions"], 1);
    assert_eq!(evidence["keystrokes"], 0);
    assert_eq!(
        (
            &evidence["beforeLength"],
            &evidence["expectedLength"],
            &evidence["afterLength"]
        ),
        (&json!(9), &json!(12), &json!(12))
    );
    let log = take_log(agent, &target, "plain");
    let inputs: Vec<&Value> = log.iter().filter(|e| e["type"] == "input").collect();
    assert_eq!(inputs.len(), 1, "one insertion replaced the value: {log:?}");
    assert_eq!(inputs[0]["inputType"], "insertText", "{log:?}");
    assert_eq!(inputs[0]["data"], "Ada Lovelace", "{log:?}");
    let keydowns: Vec<&Value> = log.iter().filter(|e| e["type"] == "keydown").collect();
    assert!(keydowns.is_empty(), "no key events: {log:?}");
    let value = eval_ok(
        agent,
        &target,
        json!({"expression": "document.getElementById('plain').value"}),
    );
    assert_eq!(value["value"], "Ada Lovelace");

    // A formatter that drops what is not a digit: the value the page kept is reported.
    let response = fill(
        agent,
        &target,
        "Phone",
        json!({"text": "+44 (20) 7946-0018"}),
    );
    let evidence = &response["result"]["result"]["evidence"];
    assert_eq!(evidence["status"], "mismatch", "{response}");
    assert_eq!(
        (&evidence["expectedLength"], &evidence["afterLength"]),
        (&json!(18), &json!(12))
    );
    let response = fill(
        agent,
        &target,
        "Phone",
        json!({"text": "call me", "verification": "require_exact"}),
    );
    assert_eq!(
        response["error"]["data"]["code"], "verification_failed",
        "{response}"
    );

    // A controlled input that rewrites the value after the input event: same length, other
    // text, so not verified.
    let response = fill(agent, &target, "Voucher code", json!({"text": "spring-25"}));
    let evidence = &response["result"]["result"]["evidence"];
    assert_eq!(evidence["status"], "mismatch", "{response}");
    assert_eq!(
        (&evidence["expectedLength"], &evidence["afterLength"]),
        (&json!(9), &json!(9))
    );
    let value = eval_ok(
        agent,
        &target,
        json!({"expression": "document.getElementById('voucher').value"}),
    );
    assert_eq!(value["value"], "SPRING-25");

    // A textarea takes line breaks in the one insertion.
    let response = fill(
        agent,
        &target,
        "Delivery notes",
        json!({"text": "ring twice\nthen wait"}),
    );
    let evidence = &response["result"]["result"]["evidence"];
    assert_eq!(evidence["status"], "verified", "{response}");
    assert_eq!(evidence["insertions"], 1);

    // Still guarded: a field that hands focus on after the focus check (in a microtask once
    // the focusing call returned) has the insertion refused in the page: the text is inserted
    // nowhere. The Command sent Input.insertText, so it ends `unknown_outcome` (never replayed)
    // with the guard's verdict as its cause.
    let response = fill(agent, &target, "Gift card", json!({"text": "NEW-CARD"}));
    let data = &response["error"]["data"];
    assert_eq!(data["code"], "unknown_outcome", "{response}");
    assert_eq!(
        data["context"]["cause"], "action_not_verified",
        "{response}"
    );
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("focus_changed before insert_text; nothing was changed"),
        "{response}"
    );
    let values = eval_ok(
        agent,
        &target,
        json!({"expression": "[document.getElementById('gift').value, document.getElementById('gift2').value, document.activeElement.id]"}),
    );
    assert_eq!(values["value"], json!(["OLD-CARD", "", "gift2"]));

    // Fill replaces the whole value: clear: false is refused before anything is typed.
    let response = fill(
        agent,
        &target,
        "Full name",
        json!({"text": "x", "clear": false}),
    );
    assert_eq!(
        response["error"]["data"]["code"], "invalid_params",
        "{response}"
    );
    assert_eq!(
        response["error"]["data"]["context"]["path"],
        "arguments.clear"
    );
    let value = eval_ok(
        agent,
        &target,
        json!({"expression": "document.getElementById('plain').value"}),
    );
    assert_eq!(value["value"], "Ada Lovelace");

    // Submit still follows the insertion.
    let response = fill(
        agent,
        &target,
        "Full name",
        json!({"text": "Grace Hopper", "submit": true}),
    );
    assert_eq!(
        response["result"]["result"]["evidence"]["status"], "verified",
        "{response}"
    );
    let status = eval_ok(
        agent,
        &target,
        json!({"expression": "document.getElementById('status').textContent"}),
    );
    assert_eq!(status["value"], "sent:Grace Hopper");
}
