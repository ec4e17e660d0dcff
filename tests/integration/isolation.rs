//! Process tests of isolated Workspaces (`workspaces/create` with `isolation: "context"`) and
//! storage state Artifacts against a real headless Chromium and a login site served from
//! 127.0.0.1 on two origins (`127.0.0.1:PORT` and `localhost:PORT`): two isolated Workspaces
//! signed in as different users each see only their own session, and neither the user's tabs
//! nor a shared-profile Workspace sees either; a saved storage state restores the login in a
//! fresh isolated Workspace without typing, its `localStorage` loaded before the first
//! navigation there when the page's first script runs (written through a scratch page whose
//! navigation never reaches the site); secrets never reach results, events, the Broker's trace
//! log or any table of `debug sql`; another Principal can read none of it; and a janitor left
//! alone by a SIGKILLed Broker disposes exactly the contexts the Broker made.

use crate::support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use support::chromium::OwnCdp;
use support::rig::{Agent, Rig};
use support::{BIN, TEST_LEASE_TTL_MS, unsafe_kill, wait_until};

/// A tiny login site: `/login?user=NAME` signs NAME in (an HttpOnly session cookie whose value
/// is a secret, and a `localStorage` token set by the page), `/whoami` is titled by the session
/// the request carries, `/token` is titled by the `localStorage` token the page finds.
struct LoginSite {
    port: u16,
    /// The path of every request, in arrival order.
    seen: Arc<Mutex<Vec<String>>>,
}

impl LoginSite {
    fn start() -> LoginSite {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        // Session secret -> user.
        let sessions = Arc::new(Mutex::new(HashMap::new()));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (sessions, log) = (sessions.clone(), log.clone());
                std::thread::spawn(move || serve_login(stream, &sessions, &log));
            }
        });
        LoginSite { port, seen }
    }

    fn paths(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    /// `http://127.0.0.1:PORT{path}`.
    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The same site on its second origin, `http://localhost:PORT{path}`.
    fn other_origin(&self, path: &str) -> String {
        format!("http://localhost:{}{path}", self.port)
    }
}

/// The session secret of `user` (what its cookie carries) and its `localStorage` token.
fn secrets(user: &str) -> (String, String) {
    (
        format!("s3cret-session-{user}"),
        format!("s3cret-token-{user}"),
    )
}

fn serve_login(
    stream: TcpStream,
    sessions: &Mutex<HashMap<String, String>>,
    seen: &Mutex<Vec<String>>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut cookie = String::new();
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => break,
            Ok(_) if header == "\r\n" || header == "\n" => break,
            Ok(_) => {
                if let Some(value) = header
                    .strip_prefix("Cookie: ")
                    .or_else(|| header.strip_prefix("cookie: "))
                {
                    cookie = value.trim().to_owned();
                }
            }
        }
    }
    let path = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or("/")
        .to_owned();
    seen.lock().unwrap().push(path.clone());
    let user_of_cookie = cookie
        .split(';')
        .filter_map(|pair| pair.trim().strip_prefix("sid="))
        .find_map(|sid| sessions.lock().unwrap().get(sid).cloned());
    let mut extra_headers = String::new();
    let (title, script) = match path.split_once('?') {
        Some(("/login", query)) => {
            let user = query.strip_prefix("user=").unwrap_or("nobody").to_owned();
            let (session, token) = secrets(&user);
            sessions
                .lock()
                .unwrap()
                .insert(session.clone(), user.clone());
            extra_headers = format!("Set-Cookie: sid={session}; Path=/; HttpOnly\r\n");
            (
                format!("signed in {user}"),
                format!("localStorage.setItem('token', '{token}');"),
            )
        }
        _ if path.split('?').next() == Some("/whoami") => (
            format!("user {}", user_of_cookie.as_deref().unwrap_or("anonymous")),
            String::new(),
        ),
        _ if path == "/token" => (
            "token".to_owned(),
            "document.title = 'token ' + (localStorage.getItem('token') || 'none');".to_owned(),
        ),
        _ => ("login site".to_owned(), String::new()),
    };
    let body = format!(
        "<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1><script>{script}</script></body></html>"
    );
    let status = match path.as_str() {
        "/favicon.ico" => "404 Not Found",
        _ => "200 OK",
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html\r\n{extra_headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = stream;
    let _ = stream.write_all(response.as_bytes());
    let _ = stream.flush();
    let mut rest = Vec::new();
    let _ = reader.read_to_end(&mut rest);
}

/// An agent whose Workspace is isolated, with the given extra capabilities.
fn isolated_agent(rig: &Rig, client: &str, extra: &[&str]) -> Agent {
    agent_with(rig, client, extra, json!({"isolation": "context"}))
}

fn agent_with(rig: &Rig, client: &str, extra: &[&str], create: Value) -> Agent {
    let mut bridge = rig.home.spawn_bridge();
    let mut params = support::initialize_params(client, "i1", (1, 1));
    for capability in extra {
        params["requestedCapabilities"]
            .as_array_mut()
            .unwrap()
            .push(json!(capability));
    }
    bridge.ok("initialize", params);
    let ws = bridge.ok("workspaces/create", create);
    let workspace_id = ws["workspace"]["id"].clone();
    let lease = bridge.ok(
        "leases/create",
        json!({"workspaceId": workspace_id, "ttlMs": TEST_LEASE_TTL_MS}),
    );
    Agent {
        bridge,
        workspace_id,
        lease_id: lease["lease"]["id"].clone(),
        cursor: ws["eventCursor"].as_str().unwrap().to_owned(),
    }
}

/// The browser contexts Chromium holds besides the default one.
fn contexts(own: &mut OwnCdp) -> Vec<String> {
    let reply = own.call("Target.getBrowserContexts", json!({}));
    let mut ids: Vec<String> = reply["browserContextIds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

/// A user's own tab at `/whoami?by=user` loads as nobody's session.
fn assert_user_tab_anonymous(own: &mut OwnCdp, site: &LoginSite) {
    let target = own.open_user_tab(&site.url("/whoami?by=user"));
    own.wait_for_document("/whoami?by=user", "user anonymous");
    own.call("Target.closeTarget", json!({"targetId": target}));
}

#[test]
fn two_isolated_workspaces_each_see_only_their_own_session() {
    let rig = Rig::start();
    let site = LoginSite::start();
    let mut own = OwnCdp::connect(&rig.chromium);
    let mut alice = isolated_agent(&rig, "com.example.alice", &[]);
    let mut bob = isolated_agent(&rig, "com.example.bob", &[]);
    alice.connect();
    bob.connect();
    // Creating and connecting made no context: the first managed navigation makes it.
    assert!(contexts(&mut own).is_empty());

    let signed = alice.tool(
        "browser.open",
        None,
        json!({"url": site.url("/login?user=alice")}),
    );
    assert_eq!(signed["title"], "signed in alice");
    assert_eq!(signed["isolated"], true, "{signed}");
    assert_eq!(contexts(&mut own).len(), 1);
    let bob_tab = bob.tool(
        "browser.open",
        None,
        json!({"url": site.url("/login?user=bob")}),
    )["targetId"]
        .clone();
    assert_eq!(contexts(&mut own).len(), 2);

    // Each sees its own session on the same origin, in a new tab of its Workspace too.
    let alice_sees = alice.tool("browser.open", None, json!({"url": site.url("/whoami")}));
    assert_eq!(alice_sees["title"], "user alice");
    let bob_sees = bob.tool(
        "browser.navigate",
        Some(&bob_tab),
        json!({"action": "goto", "url": site.url("/whoami")}),
    );
    assert_eq!(bob_sees["title"], "user bob");
    assert_eq!(bob_sees["isolated"], true);

    // Neither the user's own tabs nor a shared-profile Workspace share either session.
    assert_user_tab_anonymous(&mut own, &site);
    let mut shared = Agent::new(&rig, "com.example.shared");
    shared.connect();
    let shared_sees = shared.tool("browser.open", None, json!({"url": site.url("/whoami")}));
    assert_eq!(shared_sees["title"], "user anonymous");
    assert!(shared_sees.get("isolated").is_none(), "{shared_sees}");

    // An isolated Workspace lists the user's tabs and may control one: `isolated: false`.
    let user_target = own.open_user_tab(&site.url("/page-of-the-user"));
    own.wait_for_document("/page-of-the-user", "login site");
    let tabs = alice.tabs();
    let user_row = tabs
        .iter()
        .find(|tab| tab["url"].as_str().unwrap().ends_with("/page-of-the-user"))
        .expect("the user's tab is listed");
    assert_eq!(user_row["isolated"], false);
    assert_eq!(user_row["managed"], false);
    let own_rows: Vec<&Value> = tabs.iter().filter(|tab| tab["managed"] == true).collect();
    assert_eq!(own_rows.len(), 2, "{tabs:?}");
    assert!(own_rows.iter().all(|tab| tab["isolated"] == true));
    assert!(
        !Value::Array(tabs.clone()).to_string().contains("user bob"),
        "Bob's tabs are not Alice's to see"
    );
    let controlled = alice.tool(
        "browser.navigate",
        Some(&user_row["targetId"]),
        json!({"action": "reload"}),
    );
    assert_eq!(controlled["isolated"], false, "{controlled}");
    alice.tool(
        "browser.tabs.release",
        Some(&user_row["targetId"]),
        json!({}),
    );

    // Release disposes Alice's context (its tabs with it) and leaves Bob's and the user's.
    let before = contexts(&mut own);
    alice.bridge.ok(
        "workspaces/release",
        json!({"workspaceId": alice.workspace_id}),
    );
    assert!(
        wait_until(Duration::from_secs(10), || contexts(&mut own).len() == 1),
        "Alice's context is disposed at release"
    );
    let after = contexts(&mut own);
    assert!(before.contains(&after[0]));
    let pages = own.pages();
    assert!(
        pages.iter().any(|(id, _)| *id == user_target),
        "the user's tab stays"
    );
    assert!(
        !pages
            .iter()
            .any(|(_, url)| url.ends_with("/login?user=alice")),
        "Alice's managed tabs are gone: {pages:?}"
    );
    let still = bob.tool(
        "browser.navigate",
        Some(&bob_tab),
        json!({"action": "reload"}),
    );
    assert_eq!(still["title"], "user bob");
}

#[test]
fn isolation_is_protocol_1_1_and_part_of_the_client_key() {
    let rig = Rig::start();
    let mut bridge = rig.home.spawn_bridge();
    bridge.initialize("com.example.keys", "i1");
    let first = bridge.ok(
        "workspaces/create",
        json!({"clientKey": "k", "isolation": "context"}),
    );
    assert_eq!(first["workspace"]["isolation"], "context");
    let again = bridge.ok(
        "workspaces/create",
        json!({"clientKey": "k", "isolation": "context"}),
    );
    assert_eq!(again["workspace"]["id"], first["workspace"]["id"]);
    let (code, error) = bridge.err("workspaces/create", json!({"clientKey": "k"}));
    assert_eq!(code, "client_key_conflict", "{error}");
    let (code, _) = bridge.err(
        "workspaces/create",
        json!({"clientKey": "k", "isolation": "profile"}),
    );
    assert_eq!(code, "client_key_conflict");
    let got = bridge.ok(
        "workspaces/get",
        json!({"workspaceId": first["workspace"]["id"]}),
    );
    assert_eq!(got["workspace"]["isolation"], "context");
    let (code, error) = bridge.err("workspaces/create", json!({"isolation": "tab"}));
    assert_eq!(code, "invalid_params", "{error}");

    let mut old = rig.home.spawn_bridge();
    old.ok(
        "initialize",
        support::initialize_params("com.example.old", "i1", (1, 0)),
    );
    let (code, error) = old.err("workspaces/create", json!({"isolation": "context"}));
    assert_eq!(code, "invalid_params", "{error}");
    assert_eq!(error["data"]["context"]["path"], "params.isolation");
}

#[test]
fn a_janitor_left_by_a_killed_broker_disposes_every_context_it_made_and_no_other() {
    let rig = Rig::start();
    let site = LoginSite::start();
    let mut own = OwnCdp::connect(&rig.chromium);
    // Another client's context, with a page of its own: never the Broker's to dispose.
    let foreign = own.call("Target.createBrowserContext", json!({}))["browserContextId"]
        .as_str()
        .unwrap()
        .to_owned();
    let foreign_page = own.call(
        "Target.createTarget",
        json!({"url": site.url("/foreign"), "browserContextId": foreign}),
    )["targetId"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut alice = isolated_agent(&rig, "com.example.alice", &[]);
    let mut bob = isolated_agent(&rig, "com.example.bob", &[]);
    alice.connect();
    alice.tool(
        "browser.open",
        None,
        json!({"url": site.url("/login?user=alice")}),
    );
    bob.tool(
        "browser.open",
        None,
        json!({"url": site.other_origin("/login?user=bob")}),
    );
    assert_eq!(contexts(&mut own).len(), 3);

    let broker = rig.home.broker_pid().expect("broker pid");
    unsafe_kill(broker, "KILL");
    assert!(
        wait_until(Duration::from_secs(15), || contexts(&mut own)
            == vec![foreign.clone()]),
        "the janitor disposed the Broker's two contexts and kept the other: {:?}",
        contexts(&mut own)
    );
    let pages = own.pages();
    assert!(pages.iter().any(|(id, _)| *id == foreign_page), "{pages:?}");
    assert!(
        !pages.iter().any(|(_, url)| url.contains("/login?user=")),
        "{pages:?}"
    );
}

/// Every text the test can see of a Workspace: its events, and every row of every table of
/// `debug sql`.
fn visible_text(rig: &Rig, agent: &mut Agent) -> String {
    let events = agent.events();
    let mut all = Value::Array(events).to_string();
    let tables = "SELECT name FROM sqlite_master WHERE type = 'table'";
    let (code, out, err) = rig.home.run(BIN, &["debug", "sql", tables]);
    assert_eq!(code, 0, "{err}");
    let names: Vec<String> = out
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|row| row["name"].as_str().map(str::to_owned))
        .filter(|name| !name.starts_with("sqlite_"))
        .collect();
    assert!(names.iter().any(|n| n == "artifacts"), "tables: {out}");
    for name in names {
        let query = format!("SELECT * FROM {name}");
        let (code, out, err) = rig.home.run(BIN, &["debug", "sql", &query]);
        assert_eq!(code, 0, "{query}: {err}");
        all.push_str(&out);
    }
    all
}

#[test]
fn a_saved_storage_state_restores_the_login_in_a_fresh_isolated_workspace() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let rig = Rig::start_logging(log.path());
    let site = LoginSite::start();
    let extras = ["network.read", "network.control"];
    let mut alice = isolated_agent(&rig, "com.example.alice", &extras);
    alice.connect();
    let (session_secret, token_secret) = secrets("alice");
    alice.tool(
        "browser.open",
        None,
        json!({"url": site.url("/login?user=alice")}),
    );
    let on_token = alice.tool("browser.open", None, json!({"url": site.url("/token")}));
    assert_eq!(on_token["title"], format!("token {token_secret}"));
    // A second origin of the same site, with a login of its own.
    alice.tool(
        "browser.open",
        None,
        json!({"url": site.other_origin("/login?user=alice")}),
    );

    let saved = alice.tool("browser.storage.save", None, json!({}));
    let mut seen = saved.to_string();
    assert_eq!(saved["artifact"]["kind"], "storage_state");
    assert_eq!(saved["artifact"]["sensitivity"], "credential");
    assert_eq!(saved["cookies"], 2, "{saved}");
    let origins = saved["origins"].as_array().unwrap();
    assert_eq!(origins.len(), 2, "{saved}");
    assert!(origins.iter().all(|o| o["localStorage"] == 1), "{saved}");

    // The host holds the state: it exports it, and the Broker keeps nothing of it.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("alice-state.json");
    alice.bridge.ok(
        "artifacts/export",
        json!({"workspaceId": alice.workspace_id, "leaseId": alice.lease_id, "artifactId": saved["artifact"]["id"], "path": file}),
    );
    let state: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(state["format"], "browser-pilot.storage-state");
    assert_eq!(state["version"], 1);
    assert!(
        state.to_string().contains(&session_secret) && state.to_string().contains(&token_secret)
    );

    // Another Principal can read none of it.
    let mut mallory = isolated_agent(&rig, "com.example.mallory", &extras);
    let (code, _) = mallory.tool_err(
        "browser.storage.load",
        None,
        json!({"artifactId": saved["artifact"]["id"]}),
    );
    assert_eq!(code, "artifact_not_found");
    let (code, _) = mallory.bridge.err(
        "artifacts/get",
        json!({"workspaceId": alice.workspace_id, "leaseId": mallory.lease_id, "artifactId": saved["artifact"]["id"]}),
    );
    assert!(
        ["workspace_not_found", "lease_not_found", "lease_not_owned"].contains(&code.as_str()),
        "{code}"
    );
    mallory.connect();
    let mallory_sees = mallory.tool("browser.open", None, json!({"url": site.url("/whoami")}));
    assert_eq!(mallory_sees["title"], "user anonymous");

    // A fresh isolated Workspace: loaded before its first navigation, it is signed in.
    let mut fresh = isolated_agent(&rig, "com.example.alice-next", &extras);
    let imported = fresh.bridge.ok(
        "artifacts/import",
        json!({"workspaceId": fresh.workspace_id, "leaseId": fresh.lease_id, "path": file, "mimeType": "application/json"}),
    );
    let loaded = fresh.tool(
        "browser.storage.load",
        None,
        json!({"artifactId": imported["artifact"]["id"]}),
    );
    seen.push_str(&loaded.to_string());
    assert_eq!(loaded["cookies"], 2);
    assert_eq!(loaded["isolated"], true);
    // The localStorage of both origins went into the context before any page of them opened.
    assert!(
        loaded["origins"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["applied"] == true),
        "{loaded}"
    );
    // The page's first script finds it: the title is set from it while the page loads.
    let tab = fresh.tool("browser.open", None, json!({"url": site.url("/token")}));
    assert_eq!(tab["title"], format!("token {token_secret}"));
    let who = fresh.tool("browser.open", None, json!({"url": site.url("/whoami")}));
    assert_eq!(who["title"], "user alice", "restored without typing");
    let other = fresh.tool(
        "browser.open",
        None,
        json!({"url": site.other_origin("/whoami")}),
    );
    assert_eq!(other["title"], "user alice");
    // Written through a scratch page whose navigation never reached the site.
    let paths = site.paths();
    assert!(
        !paths.iter().any(|p| p.contains("browser-pilot")),
        "{paths:?}"
    );
    // Loaded again with a tab showing an origin: that tab gets it, the other origin its context.
    let again = fresh.tool(
        "browser.storage.load",
        None,
        json!({"artifactId": imported["artifact"]["id"]}),
    );
    seen.push_str(&again.to_string());
    let applied: Vec<&Value> = again["origins"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["applied"] == true)
        .collect();
    assert_eq!(applied.len(), 2, "{again}");

    // The storage tools' results carry neither secret; the session secret (HttpOnly, in no
    // title) reached no event and no row of debug sql either. The token is in page titles on
    // purpose (the page wrote it there), which is browser data, not the storage tools' output.
    assert!(
        !seen.contains(&session_secret) && !seen.contains(&token_secret),
        "{seen}"
    );
    let mut everything = visible_text(&rig, &mut alice);
    everything.push_str(&visible_text(&rig, &mut fresh));
    assert!(
        !everything.contains(&session_secret),
        "the session secret leaked"
    );
    // Nor the Broker's trace log; and the other Principal's events hold neither secret.
    let broker_log = std::fs::read_to_string(log.path()).unwrap();
    assert!(!broker_log.is_empty());
    assert!(
        !broker_log.contains(&session_secret),
        "the Broker log holds the session secret"
    );
    let mallory_text = Value::Array(mallory.events()).to_string();
    assert!(!mallory_text.contains(&session_secret) && !mallory_text.contains(&token_secret));
}

#[test]
fn storage_state_needs_isolation_or_profile_write() {
    let rig = Rig::start();
    let site = LoginSite::start();
    let mut alice = isolated_agent(
        &rig,
        "com.example.alice",
        &["network.read", "network.control"],
    );
    alice.connect();
    alice.tool(
        "browser.open",
        None,
        json!({"url": site.url("/login?user=alice")}),
    );
    let saved = alice.tool("browser.storage.save", None, json!({}));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("state.json");
    alice.bridge.ok(
        "artifacts/export",
        json!({"workspaceId": alice.workspace_id, "leaseId": alice.lease_id, "artifactId": saved["artifact"]["id"], "path": file}),
    );

    // The default tool list has neither tool.
    let mut plain = Agent::new(&rig, "com.example.plain");
    let listed = plain.bridge.ok("tools/list", json!({}));
    assert!(!listed.to_string().contains("browser.storage."), "{listed}");

    // A shared-profile Workspace: no save, and no load without profile.write.
    let mut shared = agent_with(
        &rig,
        "com.example.shared",
        &["network.read", "network.control"],
        json!({}),
    );
    let (code, error) = shared.tool_err("browser.storage.save", None, json!({}));
    assert_eq!(code, "workspace_not_isolated", "{error}");
    let imported = shared.bridge.ok(
        "artifacts/import",
        json!({"workspaceId": shared.workspace_id, "leaseId": shared.lease_id, "path": file}),
    );
    let (code, error) = shared.tool_err(
        "browser.storage.load",
        None,
        json!({"artifactId": imported["artifact"]["id"]}),
    );
    assert_eq!(code, "capability_denied", "{error}");
    assert_eq!(error["data"]["context"]["capability"], "profile.write");

    // A file that is not a storage state is refused by path, its content never quoted.
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"cookies":[{"name":"sid","value":"s3cret-x","domain":"a","sameSite":"s3cret-y"}]}"#,
    )
    .unwrap();
    let imported = alice.bridge.ok(
        "artifacts/import",
        json!({"workspaceId": alice.workspace_id, "leaseId": alice.lease_id, "path": bad}),
    );
    let (code, error) = alice.tool_err(
        "browser.storage.load",
        None,
        json!({"artifactId": imported["artifact"]["id"]}),
    );
    assert_eq!(code, "storage_state_invalid", "{error}");
    assert_eq!(error["data"]["context"]["path"], "cookies[0].sameSite");
    assert!(!error.to_string().contains("s3cret"), "{error}");
}
