//! Remote browsers of `remote-browsers.toml` (docs/remote.md). `sessions = "shared"`: a second
//! plain headless Chromium with its own debugging port stands in for a shared endpoint, with a
//! token in the endpoint's query and in an `Authorization` header (Chromium ignores both), and a
//! real engine, browserless (`support::browserless`, one instance for the module, as uid nobody),
//! checks its token. The tests check the candidate, a connection that then works like a local
//! one, on the plain endpoint and on the engine, the diagnostics of broken files, the refused
//! handshake (the engine's 401 for a wrong token), and that no token shows up anywhere a host,
//! `bp`, `debug sql`, the locator file, the janitor's command line or the Broker's log could
//! show it. `sessions = "per_workspace"` in a `[[pool]]` of two engines of the test's own
//! (`OwnBrowserless`), with eight agents at once each running the whole loop (uploads the
//! engine cannot read from disk, downloads streamed back that never land on it): placement by
//! capacity, `browser_busy` when full, one engine's death reaching only its own Workspaces, and
//! no managed page left on either after a Broker SIGKILL. A session the engine ends on its own
//! (its per-connection `timeout`) is lost only in its Workspace and reconnected by the next
//! `browser.connect`, and two connects of one Workspace at once share one attempt. A shared
//! link that goes silent behind a frozen TCP proxy (no close, no reset) is found by the
//! janitor's pings and lost only in its Workspace. Remote candidates follow the local ones in
//! the file's order, never win the default binding over a running local browser, and no engine
//! is contacted before `browser.connect`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::browserless::{BROWSERLESS_TOKEN, Browserless, OwnBrowserless};
use crate::support::chromium::{Fixtures, OwnCdp, TempChromium};
use crate::support::rig::Agent;
use crate::support::*;

/// The token the tests put in their token files; it must never come back.
const TOKEN: &str = "tok-5ecret-Remote-7f3a9c";

/// A Broker home that discovers no local browser but the managed profile, logs at trace level
/// to a file, and reads the `remote-browsers.toml` the test writes.
struct RemoteHome {
    home: TestHome,
    /// The log and the token file: outside the home, which holds only Browser Pilot's files.
    _outside: tempfile::TempDir,
    log: PathBuf,
    token_file: PathBuf,
}

impl RemoteHome {
    fn new() -> RemoteHome {
        let home = TestHome::new();
        let outside = tempfile::tempdir().unwrap();
        let log = outside.path().join("test-broker.log");
        let token_file = outside.path().join("farm.token");
        write_mode(&token_file, &format!("{TOKEN}\n"), 0o600);
        let home = home
            .with_env("BROWSER_PILOT_DISCOVERY_DIRS", "")
            .with_env("BROWSER_PILOT_BROKER_LOG", log.to_str().unwrap())
            .with_env("BROWSER_PILOT_LOG", "trace");
        RemoteHome {
            home,
            _outside: outside,
            log,
            token_file,
        }
    }

    fn with_env(mut self, key: &str, value: &str) -> RemoteHome {
        self.home = self.home.with_env(key, value);
        self
    }

    fn config(&self) -> PathBuf {
        self.home.path().join("remote-browsers.toml")
    }

    fn write_config(&self, text: &str, mode: u32) {
        write_mode(&self.config(), text, mode);
    }

    /// One shared entry `id` for the browser at `ws_url`, with the token in the query and in a
    /// header.
    fn entry(&self, id: &str, ws_url: &str) -> String {
        format!(
            "[[browser]]\nid = \"{id}\"\nendpoint = \"{ws_url}?token={{token}}\"\ntoken_file = \"{}\"\nheaders = {{ Authorization = \"Bearer {{token}}\" }}\nsessions = \"shared\"\nmax_sessions = 4\n",
            self.token_file.display()
        )
    }

    fn broker_log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Every row `debug sql` shows of the tables a token could end up in.
    fn store_dump(&self) -> String {
        let mut dump = String::new();
        for table in ["events", "commands", "workspaces", "connections"] {
            let (code, out, err) =
                (self.home).run(BIN, &["debug", "sql", &format!("SELECT * FROM {table}")]);
            assert_eq!(code, 0, "debug sql {table}: {err}");
            dump.push_str(&out);
        }
        dump
    }

    /// None of `tokens` is in `output` or the Broker's trace log.
    fn assert_never_shown(&self, output: &str, tokens: &[&str]) {
        let log = self.broker_log();
        for (place, text) in [("output", output), ("Broker log", log.as_str())] {
            for token in tokens {
                assert!(!text.contains(token), "the {place} holds a token");
            }
        }
    }
}

fn write_mode(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn candidate<'a>(browsers: &'a Value, id: &str) -> &'a Value {
    browsers
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == id)
        .unwrap_or_else(|| panic!("no candidate {id} in {browsers}"))
}

fn discover(agent: &mut Agent) -> Value {
    agent.tool("browser.discover", None, json!({}))
}

fn codes(diagnostics: &Value) -> Vec<String> {
    diagnostics
        .as_array()
        .map(|list| {
            list.iter()
                .map(|d| d["code"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn shared_remote_browser_is_a_candidate_and_drives_a_page_without_leaking_its_token() {
    let remote = RemoteHome::new();
    let chromium = TempChromium::start();
    let fixtures = Fixtures::start();
    remote.write_config(&remote.entry("farm", &chromium.ws_url()), 0o600);
    let mut output = String::new();

    let mut probe = remote.home.spawn_bridge();
    let init = probe.initialize("com.example.probe", "p");
    output.push_str(&init.to_string());
    let browsers = init["browsers"].clone();
    let listed = browsers.as_array().unwrap();
    assert_eq!(
        listed.last().unwrap()["id"],
        "browser:remote:farm",
        "remote candidates come after the local ones: {browsers}"
    );
    assert!(
        listed
            .iter()
            .any(|b| b["managed"] == true && b["kind"] == "local")
    );
    let farm = candidate(&browsers, "browser:remote:farm");
    assert_eq!(farm["kind"], "remote");
    assert_eq!(farm["state"], "ready");
    assert_eq!(farm["product"], "remote");
    assert_eq!(farm["channel"], "shared");
    assert_eq!(
        farm["authorizationState"], "unknown",
        "discovery is passive"
    );
    assert!(farm.get("diagnostics").is_none(), "{farm}");
    drop(probe);

    let mut bridge = remote.home.spawn_bridge();
    bridge.initialize("com.example.remote", "i1");
    let ws = bridge.ok(
        "workspaces/create",
        json!({"browserId": "browser:remote:farm"}),
    );
    output.push_str(&ws.to_string());
    let workspace_id = ws["workspace"]["id"].clone();
    let lease = bridge.ok(
        "leases/create",
        json!({"workspaceId": workspace_id, "ttlMs": TEST_LEASE_TTL_MS}),
    );
    let mut agent = Agent {
        bridge,
        workspace_id,
        lease_id: lease["lease"]["id"].clone(),
        cursor: ws["eventCursor"].as_str().unwrap().to_owned(),
    };
    let connected = agent.connect();
    output.push_str(&connected.to_string());
    assert_eq!(connected["browserId"], "browser:remote:farm");
    assert_eq!(connected["browserConnectionGeneration"], 1);

    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": fixtures.url("/fixture/form")}),
    );
    output.push_str(&opened.to_string());
    let target = opened["targetId"].clone();
    assert_eq!(opened["managed"], true);
    let observation = agent.tool("browser.observe", Some(&target), json!({"limit": 500}));
    output.push_str(&observation.to_string());
    let agree = observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["role"] == "checkbox" && e["name"].as_str().unwrap_or("").contains("I agree"))
        .unwrap_or_else(|| panic!("no checkbox in {observation}"))["ref"]
        .clone();
    let clicked = agent.tool(
        "browser.click",
        Some(&target),
        json!({"observationId": observation["observationId"], "ref": agree}),
    );
    output.push_str(&clicked.to_string());
    assert_eq!(clicked["evidence"]["status"], "verified", "{clicked}");
    assert_eq!(clicked["evidence"]["checked"], true);

    let after = discover(&mut agent);
    output.push_str(&after.to_string());
    let farm = candidate(&after["browsers"], "browser:remote:farm");
    assert_eq!(farm["state"], "connected");
    assert_eq!(farm["authorizationState"], "authorized");
    let tabs = agent.tool("browser.tabs.list", None, json!({}));
    output.push_str(&tabs.to_string());
    output.push_str(&json!(agent.events()).to_string());

    // The token reached the janitor through its environment, not its command line.
    let broker = remote.home.broker_pid().expect("broker pid");
    let janitor = janitor_pid(broker).expect("the remote browser's janitor");
    let cmdline = std::fs::read(format!("/proc/{janitor}/cmdline")).unwrap();
    output.push_str(&String::from_utf8_lossy(&cmdline));
    let locator = std::fs::read_to_string(remote.home.path().join("broker-locator.json")).unwrap();
    output.push_str(&locator);
    output.push_str(&remote.store_dump());
    assert!(output.contains("browser:remote:farm"));
    assert!(
        remote.broker_log().contains("Target.createTarget"),
        "the trace log shows the CDP traffic"
    );
    remote.assert_never_shown(&output, &[TOKEN]);
    agent.bridge.ok(
        "workspaces/release",
        json!({"workspaceId": agent.workspace_id}),
    );
}

/// On a remote browser only the tabs the Broker created are eligible: a tab another client of
/// the shared endpoint opened (a direct `Target.createTarget`), like the browser's own first
/// tab, is not listed to a Workspace of an entry without `list_foreign_tabs`; a Workspace of an
/// entry on the same endpoint with `list_foreign_tabs = true` lists it as a user tab
/// (`managed: false`) and may control it. After a Broker SIGKILL the janitors close the
/// Broker's tab and leave that one open.
#[test]
fn a_tab_the_broker_did_not_create_on_a_remote_browser_is_listed_only_with_list_foreign_tabs() {
    let remote = RemoteHome::new();
    let chromium = TempChromium::start();
    let fixtures = Fixtures::start();
    let mut other_client = OwnCdp::connect(&chromium.chromium);
    other_client.open_user_tab(&fixtures.url("/page/theirs"));
    other_client.wait_for_document("/page/theirs", "theirs");
    let open = remote.entry("open", &chromium.ws_url()).replace(
        "max_sessions = 4\n",
        "max_sessions = 4\nlist_foreign_tabs = true\n",
    );
    let strict = remote.entry("farm", &chromium.ws_url());
    remote.write_config(&format!("{strict}\n{open}"), 0o600);
    let is_theirs = |tab: &Value| tab["url"].as_str().unwrap_or("").ends_with("/page/theirs");

    let mut agent = agent_on(&remote.home, "browser:remote:farm");
    agent.connect();
    let mine = agent.tool(
        "browser.open",
        None,
        json!({"url": fixtures.url("/page/mine")}),
    )["targetId"]
        .clone();
    let listed = agent.tabs();
    assert_eq!(listed.len(), 1, "only the Broker's own tab: {listed:?}");
    assert_eq!(listed[0]["targetId"], mine);
    assert_eq!(listed[0]["managed"], true);

    let mut foreign = agent_on(&remote.home, "browser:remote:open");
    foreign.connect();
    let mut listed = Vec::new();
    assert!(
        wait_until(Duration::from_secs(10), || {
            listed = foreign.tabs();
            listed.iter().any(is_theirs)
        }),
        "list_foreign_tabs lists the other client's tab: {listed:?}"
    );
    let theirs = listed.iter().find(|tab| is_theirs(tab)).unwrap();
    assert_eq!(theirs["managed"], false, "{theirs}");
    let observed = foreign.tool("browser.observe", Some(&theirs["targetId"]), json!({}));
    assert_eq!(observed["title"], "theirs", "{observed}");

    // The strict entry's Workspace still sees only its own tab.
    let listed = agent.tabs();
    assert!(!listed.iter().any(is_theirs), "{listed:?}");
    assert_eq!(listed.len(), 1, "{listed:?}");

    // The Broker is SIGKILLed: its janitors close the tab it made, never the one it controlled
    // but did not create.
    let pid = remote.home.broker_pid().unwrap();
    unsafe_kill(pid, "KILL");
    let mut pages = Vec::new();
    assert!(
        wait_until(Duration::from_secs(15), || {
            pages = other_client.pages();
            !pages.iter().any(|(_, url)| url.ends_with("/page/mine"))
        }),
        "the Broker's tab outlived it: {pages:?}"
    );
    assert!(
        pages.iter().any(|(_, url)| url.ends_with("/page/theirs")),
        "the janitor closed a tab the Broker did not create: {pages:?}"
    );
}

#[test]
fn broken_remote_entries_are_diagnostics_and_a_refused_handshake_names_the_candidate() {
    let remote = RemoteHome::new();
    let chromium = TempChromium::start();
    let mut agent = Agent::with_home(&remote.home, "com.example.remote");
    let mut output = String::new();

    // A file others can read: listed, with the diagnostic, and not connectable.
    remote.write_config(&remote.entry("farm", &chromium.ws_url()), 0o644);
    let found = discover(&mut agent);
    output.push_str(&found.to_string());
    assert_eq!(
        codes(&found["diagnostics"]),
        ["remote_config_not_owner_only"]
    );
    let farm = candidate(&found["browsers"], "browser:remote:farm");
    assert_eq!(farm["state"], "needs_setup");
    assert_eq!(
        codes(&farm["diagnostics"]),
        ["remote_config_not_owner_only"]
    );
    assert_eq!(farm["remediation"]["action"], "fix_remote_config");
    let (code, error) = agent.tool_err(
        "browser.connect",
        None,
        json!({"browserId": "browser:remote:farm"}),
    );
    output.push_str(&error.to_string());
    assert_eq!(code, "remote_config_invalid");
    assert_eq!(error["data"]["retryable"], false);
    assert_eq!(error["data"]["context"]["browserId"], "browser:remote:farm");
    assert_eq!(error["data"]["remediation"]["action"], "fix_remote_config");

    // A token file others can read, a pool without entries and one naming an entry the file
    // does not have: each on its own; a usable per-Workspace entry beside them connects on its
    // own (nothing listens on its port: retryable, not a config error).
    write_mode(&remote.token_file, TOKEN, 0o644);
    let per_workspace = "[[browser]]\nid = \"perws\"\nendpoint = \"ws://127.0.0.1:1/\"\nsessions = \"per_workspace\"\n";
    remote.write_config(
        &format!(
            "{}\n{per_workspace}\n[[pool]]\nid = \"both\"\n\n[[pool]]\nid = \"ghosts\"\nbrowsers = [\"perws\", \"nobody\"]\n",
            remote.entry("farm", &chromium.ws_url())
        ),
        0o600,
    );
    let found = discover(&mut agent);
    output.push_str(&found.to_string());
    assert_eq!(codes(&found["diagnostics"]), Vec::<String>::new());
    let farm = candidate(&found["browsers"], "browser:remote:farm");
    assert_eq!(codes(&farm["diagnostics"]), ["remote_token_not_owner_only"]);
    let perws = candidate(&found["browsers"], "browser:remote:perws");
    assert_eq!(
        (&perws["state"], &perws["channel"]),
        (&json!("ready"), &json!("per_workspace"))
    );
    for pool in ["browser:remote:both", "browser:remote:ghosts"] {
        let pool = candidate(&found["browsers"], pool);
        assert_eq!(codes(&pool["diagnostics"]), ["remote_config_malformed"]);
        assert_eq!(
            (&pool["state"], &pool["channel"]),
            (&json!("needs_setup"), &json!("pool"))
        );
    }
    let (code, error) = agent.tool_err(
        "browser.connect",
        None,
        json!({"browserId": "browser:remote:ghosts"}),
    );
    output.push_str(&error.to_string());
    assert_eq!(code, "remote_config_invalid");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("browser:remote:ghosts"),
        "{error}"
    );
    let (code, error) = agent.tool_err(
        "browser.connect",
        None,
        json!({"browserId": "browser:remote:perws"}),
    );
    output.push_str(&error.to_string());
    assert_eq!(code, "browser_not_ready", "{error}");
    assert_eq!(error["data"]["retryable"], true);

    // A file that is not TOML: one diagnostic for the file, no candidate, the Broker answers on.
    remote.write_config("[[browser]]\nid = \"farm\nendpoint = 3\n", 0o600);
    let found = discover(&mut agent);
    output.push_str(&found.to_string());
    assert_eq!(codes(&found["diagnostics"]), ["remote_config_malformed"]);
    assert!(
        found["diagnostics"][0]["message"]
            .as_str()
            .unwrap()
            .contains("line 2"),
        "{found}"
    );
    assert!(
        found["browsers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["kind"] == "local"),
        "{found}"
    );

    // The endpoint answers the upgrade with an HTTP error (here Chromium's 404 for a browser id
    // it does not have; an engine answers a wrong token with 401 or 403): non-retryable, named.
    write_mode(&remote.token_file, TOKEN, 0o600);
    let wrong = format!(
        "ws://127.0.0.1:{}/devtools/browser/not-this-one",
        chromium.chromium.port
    );
    remote.write_config(&remote.entry("farm", &wrong), 0o600);
    let found = discover(&mut agent);
    output.push_str(&found.to_string());
    assert_eq!(
        candidate(&found["browsers"], "browser:remote:farm")["state"],
        "ready"
    );
    let (code, error) = agent.tool_err(
        "browser.connect",
        None,
        json!({"browserId": "browser:remote:farm"}),
    );
    output.push_str(&error.to_string());
    assert_eq!(code, "authorization_denied", "{error}");
    assert_eq!(error["data"]["retryable"], false);
    assert_eq!(error["data"]["context"]["browserId"], "browser:remote:farm");
    assert_eq!(error["data"]["context"]["httpStatus"], 404);
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("browser:remote:farm"),
        "{error}"
    );
    let found = discover(&mut agent);
    assert_eq!(
        candidate(&found["browsers"], "browser:remote:farm")["authorizationState"],
        "denied"
    );

    let log = remote.broker_log();
    for code in [
        "remote_config_not_owner_only",
        "remote_token_not_owner_only",
        "remote_config_malformed",
    ] {
        assert!(log.contains(code), "the Broker's stderr names {code}");
    }
    for (place, text) in [("output", &output), ("Broker log", &log)] {
        assert!(!text.contains(TOKEN), "the {place} holds the token");
    }
    drop(chromium);
}

/// A Workspace of a fresh agent bound to `browser_id` and leased; not connected yet.
fn agent_on(home: &TestHome, browser_id: &str) -> Agent {
    Agent::bound(home, "com.example.remote", Some(browser_id))
}

/// A browserless entry `id` with the token in the query, as the engine expects it.
fn browserless_entry(id: &str, engine: &Browserless, token_file: &Path) -> String {
    format!(
        "[[browser]]\nid = \"{id}\"\nendpoint = \"{}?token={{token}}\"\ntoken_file = \"{}\"\nsessions = \"shared\"\n",
        engine.ws_url(),
        token_file.display()
    )
}

/// The same engine named by its `http://` form: the Broker asks its `/json/version` for the
/// WebSocket at connect.
fn browserless_http_entry(id: &str, engine: &Browserless, token_file: &Path) -> String {
    format!(
        "[[browser]]\nid = \"{id}\"\nendpoint = \"http://127.0.0.1:{}/?token={{token}}\"\ntoken_file = \"{}\"\n",
        engine.port,
        token_file.display()
    )
}

/// The body of a plain HTTP GET to the engine on 127.0.0.1.
fn engine_get(engine: &Browserless, path_and_query: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", engine.port)).unwrap();
    write!(
        stream,
        "GET {path_and_query} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// Everything `bp status` shows about the home's Broker.
fn bp_status(home: &TestHome) -> String {
    let (_, out, err) = home.run(BP, &["status", "--json"]);
    format!("{out}{err}")
}

#[test]
fn a_wrong_browserless_token_is_a_named_non_retryable_refusal_that_never_echoes_it() {
    let engine = Browserless::shared();
    let remote = RemoteHome::new();
    // TOKEN is not the engine's: the upgrade is refused.
    remote.write_config(
        &browserless_entry("engine", engine, &remote.token_file),
        0o600,
    );
    let mut output = String::new();
    let mut agent = agent_on(&remote.home, "browser:remote:engine");
    let (code, error) = agent.tool_err(
        "browser.connect",
        None,
        json!({"browserId": "browser:remote:engine"}),
    );
    output.push_str(&error.to_string());
    assert_eq!(code, "authorization_denied", "{error}");
    assert_eq!(error["data"]["retryable"], false);
    assert_eq!(
        error["data"]["context"]["browserId"],
        "browser:remote:engine"
    );
    assert_eq!(error["data"]["context"]["httpStatus"], 401, "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("browser:remote:engine"),
        "{error}"
    );
    // Asking again gets the same answer (nothing cached a half-open connection), and so does
    // the engine's http:// form, whose /json/version lookup carries the same token.
    let (code, again) = agent.tool_err(
        "browser.connect",
        None,
        json!({"browserId": "browser:remote:engine"}),
    );
    output.push_str(&again.to_string());
    assert_eq!(code, "authorization_denied", "{again}");
    remote.write_config(
        &format!(
            "{}{}",
            browserless_entry("engine", engine, &remote.token_file),
            browserless_http_entry("byhttp", engine, &remote.token_file)
        ),
        0o600,
    );
    let (code, by_http) = agent.tool_err(
        "browser.connect",
        None,
        json!({"browserId": "browser:remote:byhttp"}),
    );
    output.push_str(&by_http.to_string());
    assert_eq!(code, "authorization_denied", "{by_http}");
    assert_eq!(by_http["data"]["context"]["httpStatus"], 401, "{by_http}");
    assert_eq!(
        by_http["data"]["context"]["browserId"],
        "browser:remote:byhttp"
    );
    let found = discover(&mut agent);
    output.push_str(&found.to_string());
    assert_eq!(
        candidate(&found["browsers"], "browser:remote:engine")["authorizationState"],
        "denied"
    );
    // bp on the same Broker: its refusal names the candidate, never the token.
    let (code, out, err) = remote.home.run(
        BP,
        &["connect", "--browser", "browser:remote:engine", "--json"],
    );
    let bp_output = format!("{out}{err}");
    assert_ne!(code, 0, "{bp_output}");
    assert!(bp_output.contains("authorization_denied"), "{bp_output}");
    output.push_str(&bp_output);
    output.push_str(&bp_status(&remote.home));
    output.push_str(&remote.store_dump());
    remote.assert_never_shown(&output, &[TOKEN, BROWSERLESS_TOKEN]);
}

/// The TLS endpoint of the `wss://` test: a CA and a server certificate for `localhost` and
/// 127.0.0.1 made with the `openssl` CLI, and a TLS-terminating proxy (Python's asyncio) on
/// 127.0.0.1 in front of a plain Chromium's debugging port. Killed on drop.
struct TlsProxy {
    child: std::process::Child,
    port: u16,
    /// The CA's certificate (PEM), for `ca_file`.
    ca: PathBuf,
    _dir: tempfile::TempDir,
}

const TLS_PROXY: &str = r#"
import asyncio, os, ssl, sys

async def main():
    cert, key, upstream, ready = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    async def pump(reader, writer):
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def serve(reader, writer):
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", upstream)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=context)
    with open(ready + ".tmp", "w") as out:
        out.write(str(server.sockets[0].getsockname()[1]))
    os.rename(ready + ".tmp", ready)
    await server.serve_forever()

asyncio.run(main())
"#;

impl TlsProxy {
    fn start(upstream_port: u16) -> TlsProxy {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name);
        std::fs::write(
            path("server.ext"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        let openssl = |args: &[&str]| {
            let output = std::process::Command::new("openssl")
                .args(args)
                .current_dir(dir.path())
                .output()
                .expect(
                    "the openssl CLI makes the test certificates: sudo apt-get install -y openssl",
                );
            assert!(
                output.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ];
        openssl(
            &[
                &["req", "-x509"][..],
                &ec,
                &["-keyout", "ca.key", "-out", "ca.pem", "-days", "2"],
                &["-subj", "/CN=Browser Pilot test CA"],
                &["-addext", "basicConstraints=critical,CA:TRUE"],
                &["-addext", "keyUsage=critical,keyCertSign"],
            ]
            .concat(),
        );
        openssl(
            &[
                &["req"][..],
                &ec,
                &["-keyout", "server.key", "-out", "server.csr"],
                &["-subj", "/CN=localhost"],
            ]
            .concat(),
        );
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-set_serial",
            "2",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.pem",
        ]);
        let ready = path("port");
        let child = std::process::Command::new("python3")
            .args(["-c", TLS_PROXY])
            .arg(path("server.pem"))
            .arg(path("server.key"))
            .arg(upstream_port.to_string())
            .arg(&ready)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            // asyncio reports each refused handshake; those are the point of the test.
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("python3 runs the TLS proxy");
        assert!(
            wait_until(std::time::Duration::from_secs(20), || ready.exists()),
            "the TLS proxy listens"
        );
        let port = std::fs::read_to_string(&ready).unwrap().parse().unwrap();
        TlsProxy {
            child,
            port,
            ca: path("ca.pem"),
            _dir: dir,
        }
    }
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_wss_endpoint_is_refused_until_its_ca_file_is_given_then_drives_a_page() {
    let remote = RemoteHome::new();
    let chromium = TempChromium::start();
    let fixtures = Fixtures::start();
    let proxy = TlsProxy::start(chromium.chromium.port);
    let endpoint = format!(
        "wss://localhost:{}{}",
        proxy.port, chromium.chromium.ws_path
    );
    remote.write_config(&remote.entry("tls", &endpoint), 0o600);
    let mut output = String::new();
    let mut agent = agent_on(&remote.home, "browser:remote:tls");
    let found = discover(&mut agent);
    let tls = candidate(&found["browsers"], "browser:remote:tls");
    assert_eq!(tls["state"], "ready", "{tls}");

    // The certificate's CA is no web-PKI root: the handshake fails, named and not retryable.
    let (code, error) = agent.tool_err(
        "browser.connect",
        None,
        json!({"browserId": "browser:remote:tls"}),
    );
    output.push_str(&error.to_string());
    assert_eq!(code, "remote_tls_failed", "{error}");
    assert_eq!(error["data"]["retryable"], false);
    assert_eq!(error["data"]["context"]["browserId"], "browser:remote:tls");
    assert_eq!(error["data"]["remediation"]["action"], "fix_remote_config");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("browser:remote:tls"), "{error}");
    assert!(message.contains("certificate"), "{error}");

    // The same entry trusting the test CA: connected, and the page works through TLS.
    let with_ca = format!(
        "{}ca_file = \"{}\"\n",
        remote.entry("tls", &endpoint),
        proxy.ca.display()
    );
    remote.write_config(&with_ca, 0o600);
    let connected = agent.tool(
        "browser.connect",
        None,
        json!({"browserId": "browser:remote:tls"}),
    );
    output.push_str(&connected.to_string());
    assert_eq!(connected["browserId"], "browser:remote:tls");
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": fixtures.url("/fixture/form")}),
    );
    output.push_str(&opened.to_string());
    let observation = agent.tool(
        "browser.observe",
        Some(&opened["targetId"]),
        json!({"limit": 50}),
    );
    output.push_str(&observation.to_string());
    assert_eq!(observation["title"], "Form", "{observation}");

    let log = remote.broker_log();
    for (place, text) in [("output", &output), ("Broker log", &log)] {
        assert!(!text.contains(TOKEN), "the {place} holds the token");
    }
    agent.bridge.ok(
        "workspaces/release",
        json!({"workspaceId": agent.workspace_id}),
    );
}

#[test]
fn an_http_endpoint_is_resolved_through_the_engines_json_version() {
    let engine = Browserless::shared();
    let remote = RemoteHome::new();
    write_mode(&remote.token_file, BROWSERLESS_TOKEN, 0o600);
    let fixtures = Fixtures::start();
    remote.write_config(
        &browserless_http_entry("byhttp", engine, &remote.token_file),
        0o600,
    );
    let mut agent = agent_on(&remote.home, "browser:remote:byhttp");
    let found = discover(&mut agent);
    let entry = candidate(&found["browsers"], "browser:remote:byhttp");
    assert_eq!(entry["state"], "ready", "{entry}");
    let connected = agent.connect();
    assert_eq!(connected["browserId"], "browser:remote:byhttp");
    let url = fixtures.url("/page/through-json-version");
    let opened = agent.tool("browser.open", None, json!({"url": url}));
    let observation = agent.tool(
        "browser.observe",
        Some(&opened["targetId"]),
        json!({"limit": 20}),
    );
    assert_eq!(
        observation["title"], "through-json-version",
        "{observation}"
    );
    let sessions = engine_get(engine, &format!("/sessions?token={BROWSERLESS_TOKEN}"));
    assert!(
        sessions.contains(&url),
        "the engine runs the page: {sessions}"
    );
    let log = remote.broker_log();
    assert!(
        !log.contains(BROWSERLESS_TOKEN),
        "the Broker log holds the token"
    );
    agent.bridge.ok(
        "workspaces/release",
        json!({"workspaceId": agent.workspace_id}),
    );
}

/// The page every agent of the pool test works on, `/loop/NAME` (`@NAME@` replaced): a form
/// (a checkbox and an email field), a file input whose `change` handler writes the selected
/// file's name, size and text into `#got` (and counts `input` events), and every kind of
/// download: an attachment (`/attach/NAME.csv`), a `download` link to a text file
/// (`/plain/NAME.txt`, which the browser would show), a `data:` link, a blob the page makes and
/// one it revokes at once.
const LOOP_PAGE: &str = r#"<!doctype html><html><head><title>@NAME@</title></head><body>
<label><input type="checkbox" id="agree"> I agree</label>
<label>Email <input type="email" id="email"></label>
<label>Resume <input type="file" id="resume"></label>
<p id="got">nothing yet</p>
<a href="/attach/@NAME@.csv">Attachment</a>
<a href="/plain/@NAME@.txt" download="@NAME@.txt">Download link</a>
<a href="data:text/plain;base64,aGVsbG8gZnJvbSBhIGRhdGEgVVJM" download="data.txt">Data link</a>
<button type="button" id="blob">Generate file</button>
<button type="button" id="revoked">Generate and revoke</button>
<p id="still">still here</p>
<script>
  const input = document.getElementById('resume');
  let inputs = 0;
  input.addEventListener('input', () => { inputs += 1; });
  input.addEventListener('change', async () => {
    const file = input.files[0];
    const text = await file.text();
    document.getElementById('got').textContent = `inputs=${inputs} ${file.name} ${file.size} [${text}]`;
  });
  function generate(name, revoke) {
    const a = document.createElement('a');
    a.href = URL.createObjectURL(new Blob(['made in the page'], {type: 'text/plain'}));
    a.download = name;
    document.body.append(a);
    a.click();
    if (revoke) URL.revokeObjectURL(a.href);
  }
  document.getElementById('blob').addEventListener('click', () => generate('generated.txt', false));
  document.getElementById('revoked').addEventListener('click', () => generate('revoked.txt', true));
</script></body></html>"#;

/// The bytes served for a file name: the name repeated, so no two files match.
fn file_body(name: &str) -> Vec<u8> {
    name.bytes().cycle().take(3000).collect()
}

/// Serves `/loop/NAME`, `/attach/NAME` (an attachment) and `/plain/NAME` (a text file) on
/// 127.0.0.1; returns the port.
fn serve_loop_pages() -> u16 {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request = String::new();
                if reader.read_line(&mut request).is_err() {
                    return;
                }
                let mut header = String::new();
                while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                    header.clear();
                }
                let path = request.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let (kind, body, disposition) = match path.as_str() {
                    p if p.starts_with("/loop/") => (
                        "text/html",
                        LOOP_PAGE
                            .replace("@NAME@", &p["/loop/".len()..])
                            .into_bytes(),
                        None,
                    ),
                    p if p.starts_with("/attach/") => {
                        let name = &p["/attach/".len()..];
                        ("text/csv", file_body(name), Some(name.to_owned()))
                    }
                    p if p.starts_with("/plain/") => {
                        ("text/plain", file_body(&p["/plain/".len()..]), None)
                    }
                    _ => ("text/plain", Vec::new(), None),
                };
                let disposition = disposition
                    .map(|n| format!("Content-Disposition: attachment; filename=\"{n}\"\r\n"))
                    .unwrap_or_default();
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n{disposition}Connection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(&body);
            });
        }
    });
    port
}

/// Whether uid nobody (the engines') can read `path`.
fn nobody_reads(path: &Path) -> bool {
    std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "test",
            "-r",
        ])
        .arg(path)
        .status()
        .expect("setpriv (util-linux)")
        .success()
}

/// Files under `dir` (recursively) whose name is one of `names`.
fn files_named(dir: &Path, names: &[String]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_named(&path, names));
        } else if names.iter().any(|n| *entry.file_name() == **n) {
            found.push(path);
        }
    }
    found
}

/// A `per_workspace` entry on an engine, taking `max_sessions` Workspaces.
fn per_workspace_entry(id: &str, engine: &Browserless, token_file: &Path, max: u32) -> String {
    format!(
        "[[browser]]\nid = \"{id}\"\nendpoint = \"{}?token={{token}}\"\ntoken_file = \"{}\"\nsessions = \"per_workspace\"\nmax_sessions = {max}\n",
        engine.ws_url(),
        token_file.display()
    )
}

/// The engine's own list of its sessions (the pages its browsers show).
fn engine_sessions(engine: &Browserless) -> String {
    engine_get(engine, &format!("/sessions?token={BROWSERLESS_TOKEN}"))
}

/// Whether the Workspace's journal holds every sequence number from 1 on, none missing (the
/// network events this host may not poll included).
fn gapless(home: &TestHome, workspace_id: &Value) -> bool {
    let query = format!(
        "SELECT count(*) AS n, max(e.sequence) AS hi FROM events AS e JOIN workspaces AS w ON w.workspace_key = e.workspace_key WHERE w.workspace_id = '{}'",
        workspace_id.as_str().unwrap()
    );
    let (code, out, err) = home.run(BIN, &["debug", "sql", &query]);
    assert_eq!(code, 0, "{err}");
    let row: Value = serde_json::from_str(out.trim()).unwrap();
    row["n"].as_u64().unwrap() > 0 && row["n"] == row["hi"]
}

/// One agent of the pool test: its Workspace, every event it polled, and what it showed.
struct PoolAgent {
    agent: Agent,
    name: String,
    seen: Vec<Value>,
    output: String,
    /// The tab of its loop.
    target: Value,
}

impl PoolAgent {
    /// Polls the journal into `seen` until a `download` event's payload satisfies `pred`.
    fn download_event(&mut self, what: &str, pred: &dyn Fn(&Value) -> bool) -> Value {
        let mut found = None;
        let done = wait_until(Duration::from_secs(30), || {
            self.seen.extend(self.agent.events());
            found = (self.seen.iter())
                .filter(|e| e["type"] == "download")
                .find(|e| pred(&e["payload"]))
                .cloned();
            found.is_some()
        });
        assert!(
            done,
            "{}: no download event {what}: {:?}",
            self.name, self.seen
        );
        found.unwrap()["payload"].clone()
    }

    /// Clicks the element; returns the payload that ended the download `name` it started.
    fn click_download(&mut self, target: &Value, role: &str, label: &str, name: &str) -> Value {
        let observation = (self.agent).tool("browser.observe", Some(target), json!({"limit": 50}));
        let element = crate::support::rig::find_ref(&observation, role, label);
        self.agent.tool(
            "browser.click",
            Some(target),
            json!({"observationId": observation["observationId"], "ref": element}),
        );
        let started = self.download_event(name, &|p| {
            p["state"] == "started" && p["suggestedFilename"] == name
        });
        let id = started["downloadId"].clone();
        let ended =
            self.download_event(name, &|p| p["downloadId"] == id && p["state"] != "started");
        self.output.push_str(&ended.to_string());
        ended
    }

    /// The bytes of a download that ended `completed`, read from its Artifact's protected path.
    fn downloaded(&mut self, ended: &Value, name: &str) -> Vec<u8> {
        assert_eq!(ended["state"], "completed", "{name}: {ended}");
        let artifact = &ended["artifact"];
        assert_eq!(artifact["kind"], "download");
        assert_eq!(artifact["fileName"], name);
        let got = self.agent.bridge.ok(
            "artifacts/get",
            json!({"workspaceId": self.agent.workspace_id, "leaseId": self.agent.lease_id, "artifactId": artifact["id"]}),
        );
        std::fs::read(got["path"].as_str().expect("protected path")).unwrap()
    }

    /// The agent's whole loop on its own `/loop/NAME` page: open, observe, click, type,
    /// capture; an upload of a file whose protected path the engine (uid nobody) cannot read,
    /// which the page's own `change` handler reads byte for byte; an attachment streamed back
    /// into a `download` Artifact; and the agent's share (`n % 4`) of the other kinds: a
    /// `download` link (streamed), a blob and a `data:` link (read from the page), a blob the
    /// page revoked at once (`capture_unavailable`, `not_streamable`). Returns the file names
    /// of the downloads that crossed the network.
    fn run_loop(&mut self, n: usize, port: u16) -> Vec<String> {
        let name = self.name.clone();
        let client_dir = tempfile::tempdir().unwrap();
        let resume = client_dir.path().join(format!("resume-{name}.txt"));
        let contents = format!("quarterly numbers of {name}");
        std::fs::write(&resume, &contents).unwrap();
        let (workspace_id, lease_id) =
            (self.agent.workspace_id.clone(), self.agent.lease_id.clone());
        let imported = self.agent.bridge.ok(
            "artifacts/import",
            json!({"workspaceId": workspace_id, "leaseId": lease_id, "path": resume}),
        );
        let artifact = imported["artifact"]["id"].clone();
        let got = self.agent.bridge.ok(
            "artifacts/get",
            json!({"workspaceId": workspace_id, "leaseId": lease_id, "artifactId": artifact}),
        );
        let stored = PathBuf::from(got["path"].as_str().expect("protected path"));
        assert_eq!(std::fs::read_to_string(&stored).unwrap(), contents);
        assert!(
            !nobody_reads(&stored),
            "the engine's uid can read the Artifact's file: the upload would prove nothing"
        );

        let url = format!("http://127.0.0.1:{port}/loop/{name}");
        let opened = self.agent.tool("browser.open", None, json!({"url": url}));
        self.output.push_str(&opened.to_string());
        let target = opened["targetId"].clone();
        self.target = target.clone();
        let observation = self
            .agent
            .tool("browser.observe", Some(&target), json!({"limit": 50}));
        self.output.push_str(&observation.to_string());
        let find =
            |role: &str, label: &str| crate::support::rig::find_ref(&observation, role, label);
        let (agree, email) = (find("checkbox", "I agree"), find("textbox", "Email"));
        let clicked = self.agent.tool(
            "browser.click",
            Some(&target),
            json!({"observationId": observation["observationId"], "ref": agree}),
        );
        assert_eq!(clicked["evidence"]["status"], "verified", "{clicked}");
        assert_eq!(clicked["evidence"]["checked"], true);
        let address = format!("{name}@example.com");
        let typed = self.agent.tool(
            "browser.type",
            Some(&target),
            json!({"observationId": observation["observationId"], "ref": email, "text": address, "mode": "fill"}),
        );
        assert_eq!(typed["evidence"]["status"], "verified", "{typed}");
        let field = (typed["elements"].as_array().unwrap().iter())
            .find(|e| e["ref"] == email)
            .unwrap_or_else(|| panic!("no email field in {typed}"));
        assert_eq!(field["value"], address.as_str(), "{typed}");
        let shot = self.agent.tool("browser.capture", Some(&target), json!({}));
        assert_eq!(shot["artifact"]["kind"], "screenshot");
        assert_eq!(shot["artifact"]["mimeType"], "image/png");
        assert!(
            shot["artifact"]["byteLength"].as_u64().unwrap() > 1000,
            "{shot}"
        );
        self.output.push_str(&shot.to_string());

        // The upload sends the bytes: the engine could not have read the file.
        let input = (observation["elements"].as_array().unwrap().iter())
            .find(|e| e["inputType"] == "file")
            .unwrap_or_else(|| panic!("no file input in {observation}"))["ref"]
            .clone();
        let uploaded = self.agent.tool(
            "browser.upload",
            Some(&target),
            json!({"artifactId": artifact, "observationId": observation["observationId"], "ref": input}),
        );
        self.output.push_str(&uploaded.to_string());
        let evidence = &uploaded["evidence"];
        assert_eq!(evidence["status"], "verified", "{uploaded}");
        assert_eq!(evidence["fileCount"], 1);
        assert_eq!(evidence["fileNameMatches"], true);
        assert!(
            !uploaded.to_string().contains(stored.to_str().unwrap()),
            "a path leaked: {uploaded}"
        );
        let mut text = String::new();
        assert!(
            wait_until(Duration::from_secs(10), || {
                let read =
                    (self.agent).tool("browser.read", Some(&target), json!({"selector": "#got"}));
                text = read["text"].as_str().unwrap_or("").to_owned();
                text.contains('[')
            }),
            "the page never saw the file: {text}"
        );
        assert_eq!(
            text.trim(),
            format!("inputs=1 resume-{name}.txt {} [{contents}]", contents.len())
        );

        // Downloads: one started each, ended by one of the four states.
        let attachment = format!("{name}.csv");
        let ended = self.click_download(&target, "link", "Attachment", &attachment);
        assert_eq!(self.downloaded(&ended, &attachment), file_body(&attachment));
        let mut streamed = vec![attachment];
        let mut starts = 2;
        match n % 4 {
            0 => {
                let plain = format!("{name}.txt");
                let ended = self.click_download(&target, "link", "Download link", &plain);
                assert_eq!(self.downloaded(&ended, &plain), file_body(&plain));
                streamed.push(plain);
            }
            1 => {
                let ended =
                    self.click_download(&target, "button", "Generate file", "generated.txt");
                assert_eq!(
                    self.downloaded(&ended, "generated.txt"),
                    b"made in the page"
                );
            }
            2 => {
                let ended = self.click_download(&target, "link", "Data link", "data.txt");
                assert_eq!(
                    self.downloaded(&ended, "data.txt"),
                    b"hello from a data URL"
                );
            }
            _ => {
                let observation =
                    self.agent
                        .tool("browser.observe", Some(&target), json!({"limit": 50}));
                let button =
                    crate::support::rig::find_ref(&observation, "button", "Generate and revoke");
                self.agent.tool(
                    "browser.click",
                    Some(&target),
                    json!({"observationId": observation["observationId"], "ref": button}),
                );
                let unavailable =
                    self.download_event("revoked blob", &|p| p["state"] == "capture_unavailable");
                assert_eq!(unavailable["reason"], "not_streamable", "{unavailable}");
                assert_eq!(unavailable["scheme"], "blob");
                assert_eq!(unavailable["suggestedFilename"], "revoked.txt");
                starts = 1;
            }
        }
        let started = (self.seen.iter())
            .filter(|e| e["type"] == "download" && e["payload"]["state"] == "started")
            .count();
        assert_eq!(
            started, starts,
            "one started per captured download: {:?}",
            self.seen
        );
        let read = self
            .agent
            .tool("browser.read", Some(&target), json!({"selector": "#still"}));
        assert_eq!(read["text"], "still here", "the page stayed: {read}");
        streamed
    }
}

/// Runs `work` for every agent at once, each on a thread of its own; a thread's panic (printed
/// above) fails the test.
fn each_at_once<T: Send>(
    agents: &mut [PoolAgent],
    work: impl Fn(usize, &mut PoolAgent) -> T + Sync,
) -> Vec<T> {
    std::thread::scope(|scope| {
        let work = &work;
        let running: Vec<_> = (agents.iter_mut().enumerate())
            .map(|(n, agent)| scope.spawn(move || work(n, agent)))
            .collect();
        (running.into_iter().enumerate())
            .map(|(n, thread)| {
                thread
                    .join()
                    .unwrap_or_else(|_| panic!("agent {n} failed (its panic is above)"))
            })
            .collect()
    })
}

/// Eight agents on eight Workspaces bound to a `[[pool]]` of two browserless engines (uid
/// nobody, 4 sessions each), all at once: placement by free capacity (the first connect to
/// the pool's first entry on the tie, then 4 and 4 however the connects interleave), each
/// agent's whole loop (`PoolAgent::run_loop`: uploads the engine could not read from disk,
/// downloads streamed back that never land in the engine's private folders), `browser_busy`
/// when full, one engine's death reaching only its own four Workspaces while the other four
/// keep completing Commands with gapless journals, a restart and `browser.connect` restoring
/// the lost ones on newer sessions, a release freeing its place, no managed page left on either
/// engine after a Broker SIGKILL, and the token nowhere a host, `bp`, `debug sql` or the trace
/// log shows.
#[test]
fn eight_agents_on_a_pool_of_two_engines_run_the_whole_loop_and_one_engines_death_touches_only_its_own()
 {
    let _alone = many_agents();
    let (mut first, second) = std::thread::scope(|scope| {
        let first = scope.spawn(OwnBrowserless::start);
        let second = scope.spawn(OwnBrowserless::start);
        (first.join().unwrap(), second.join().unwrap())
    });
    for dir in first
        .engine
        .private_dirs
        .iter()
        .chain(&second.engine.private_dirs)
    {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(dir).unwrap();
        assert_eq!(
            (meta.mode() & 0o777, meta.uid()),
            (0o700, 65534),
            "the engine's folders are private to it: {}",
            dir.display()
        );
    }
    let remote = RemoteHome::new();
    write_mode(&remote.token_file, BROWSERLESS_TOKEN, 0o600);
    let port = serve_loop_pages();
    remote.write_config(
        &format!(
            "{}\n{}\n[[pool]]\nid = \"farm\"\nbrowsers = [\"a\", \"b\"]\n",
            per_workspace_entry("a", &first.engine, &remote.token_file, 4),
            per_workspace_entry("b", &second.engine, &remote.token_file, 4)
        ),
        0o600,
    );
    let farm = "browser:remote:farm";
    let page = |n: usize| format!("/loop/agent{n}");
    let mut agents: Vec<PoolAgent> = (0..8)
        .map(|n| PoolAgent {
            agent: agent_on(&remote.home, farm),
            name: format!("agent{n}"),
            seen: Vec::new(),
            output: String::new(),
            target: Value::Null,
        })
        .collect();
    let mut ninth = agent_on(&remote.home, farm);

    // The first connect meets a tie and takes the pool's first entry; the other seven connect
    // at once. Then all eight run their loops at once.
    let connect = |agent: &mut PoolAgent| {
        let started = std::time::Instant::now();
        let connected = agent.agent.connect();
        eprintln!(
            "connect to a per_workspace session: {:?}",
            started.elapsed()
        );
        agent.output.push_str(&connected.to_string());
        assert_eq!(connected["browserId"], farm);
        assert_eq!(connected["reused"], false);
        connected["browserConnectionGeneration"].as_u64().unwrap()
    };
    let mut generations = vec![connect(&mut agents[0])];
    generations.extend(each_at_once(&mut agents[1..], |_, agent| connect(agent)));
    let mut distinct = generations.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 8, "a connection each: {generations:?}");
    let streamed: Vec<String> = each_at_once(&mut agents, |n, agent| agent.run_loop(n, port))
        .into_iter()
        .flatten()
        .collect();

    // Each engine runs exactly four of the Workspaces' pages, agent 0's on the first.
    let (on_first, on_second) = (
        engine_sessions(&first.engine),
        engine_sessions(&second.engine),
    );
    let (lost, kept): (Vec<usize>, Vec<usize>) = (0..8).partition(|n| on_first.contains(&page(*n)));
    assert!(
        lost.contains(&0),
        "a tie goes to the pool's first entry: {on_first}"
    );
    assert_eq!(lost.len(), 4, "4 and 4: {on_first}\n{on_second}");
    for n in &kept {
        assert!(on_second.contains(&page(*n)), "agent {n}: {on_second}");
    }
    // The streamed downloads never landed in the engines' private folders.
    let landed = (first
        .engine
        .private_dirs
        .iter()
        .chain(&second.engine.private_dirs))
    .flat_map(|dir| files_named(dir, &streamed))
    .collect::<Vec<_>>();
    assert!(
        landed.is_empty(),
        "downloads landed on an engine: {landed:?}"
    );

    // A ninth Workspace finds every entry full: retryable, and nobody is evicted.
    let (code, error) = ninth.tool_err("browser.connect", None, json!({}));
    remote.assert_never_shown(&error.to_string(), &[BROWSERLESS_TOKEN]);
    assert_eq!(code, "browser_busy", "{error}");
    assert_eq!(error["data"]["retryable"], true);
    assert_eq!(
        error["data"]["context"]["capacity"],
        json!({"maxSessions": 8, "inUse": 8})
    );
    assert_eq!(error["data"]["remediation"]["action"], "wait_for_release");

    // The first engine dies while every agent works: its four hear of it, the other four keep
    // completing Commands, their journals gapless and without a word of the other's loss.
    let killed = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let killed = &killed;
        let running: Vec<_> = (agents.iter_mut().enumerate())
            .map(|(n, agent)| {
                let on_dead = lost.contains(&n);
                let generation = generations[n];
                scope.spawn(move || {
                    let target = agent.target.clone();
                    if on_dead {
                        let lost = agent.agent.wait_event("connection.lost");
                        assert_eq!(lost["browserConnectionGeneration"], generation);
                        let (code, _) =
                            (agent.agent).tool_err("browser.observe", Some(&target), json!({}));
                        assert_eq!(code, "browser_disconnected");
                        return;
                    }
                    // Round after round, the last one begun after the engine was gone.
                    loop {
                        let after_kill = killed.load(std::sync::atomic::Ordering::SeqCst);
                        let observed =
                            (agent.agent).tool("browser.observe", Some(&target), json!({}));
                        assert_eq!(observed["title"], agent.name, "{observed}");
                        (agent.agent).tool(
                            "browser.navigate",
                            Some(&target),
                            json!({"action": "reload"}),
                        );
                        if after_kill {
                            break;
                        }
                    }
                    agent.seen.extend(agent.agent.events());
                    assert!(
                        (agent.seen.iter()).all(|e| e["type"] != "connection.lost"
                            && e["browserConnectionGeneration"].as_u64().unwrap() <= generation),
                        "agent {n}: {:?}",
                        agent.seen
                    );
                })
            })
            .collect();
        first.kill();
        killed.store(true, std::sync::atomic::Ordering::SeqCst);
        for (n, thread) in running.into_iter().enumerate() {
            thread
                .join()
                .unwrap_or_else(|_| panic!("agent {n} failed (its panic is above)"));
        }
    });
    for n in &kept {
        assert!(
            gapless(&remote.home, &agents[*n].agent.workspace_id),
            "agent {n}"
        );
    }

    // The engine comes back: browser.connect gives each lost Workspace a newer session there
    // (the other entry is full).
    first.restart();
    let mut lost_agents: Vec<&mut PoolAgent> = (agents.iter_mut().enumerate())
        .filter(|(n, _)| lost.contains(n))
        .map(|(_, agent)| agent)
        .collect();
    std::thread::scope(|scope| {
        for agent in lost_agents.iter_mut() {
            let n: usize = agent.name["agent".len()..].parse().unwrap();
            let before = generations[n];
            scope.spawn(move || {
                let connected = agent.agent.connect();
                let generation = connected["browserConnectionGeneration"].as_u64().unwrap();
                assert!(generation > before, "{connected}");
                let restored = agent.agent.wait_event("connection.restored");
                assert_eq!(restored["payload"]["generation"], generation);
                let url = format!("http://127.0.0.1:{port}{}", page(n));
                agent.agent.tool("browser.open", None, json!({"url": url}));
            });
        }
    });
    let on_first = engine_sessions(&first.engine);
    for n in &lost {
        assert!(on_first.contains(&page(*n)), "agent {n}: {on_first}");
    }

    // A release ends its Workspace's session at the engine and frees its place.
    let released = kept[0];
    let workspace_id = agents[released].agent.workspace_id.clone();
    (agents[released].agent.bridge).ok("workspaces/release", json!({"workspaceId": workspace_id}));
    assert!(
        wait_until(Duration::from_secs(15), || !engine_sessions(&second.engine)
            .contains(&page(released))),
        "the released Workspace's session ended"
    );
    ninth.connect();
    let url = format!("http://127.0.0.1:{port}{}", page(8));
    ninth.tool("browser.open", None, json!({"url": url}));
    assert!(engine_sessions(&second.engine).contains(&page(8)));

    // Nothing the hosts, bp or debug sql show holds the token; the trace log shows CDP, no
    // token.
    let mut output: String = agents.iter().map(|agent| agent.output.as_str()).collect();
    output.push_str(&bp_status(&remote.home));
    output.push_str(&remote.store_dump());
    assert!(output.contains(farm));
    assert!(
        remote.broker_log().contains("Target.createTarget"),
        "the trace log shows CDP"
    );
    remote.assert_never_shown(&output, &[BROWSERLESS_TOKEN]);

    // The Broker is SIGKILLed: its janitors end every session; no managed page stays open on
    // either engine.
    let pid = remote.home.broker_pid().unwrap();
    unsafe_kill(pid, "KILL");
    for engine in [&first.engine, &second.engine] {
        assert!(
            wait_until(Duration::from_secs(15), || !engine_sessions(engine)
                .contains("/loop/agent")),
            "the engine still runs a managed page: {}",
            engine_sessions(engine)
        );
    }
}

/// The conformance runner passes against a Workspace bound to the browserless engine
/// (`--browser-id`; the home discovers no local browser and launches none), and its report
/// carries no token; bound to a candidate the file does not list, it fails.
#[test]
fn the_conformance_runner_passes_against_a_workspace_on_browserless() {
    let engine = Browserless::shared();
    let remote = RemoteHome::new();
    write_mode(&remote.token_file, BROWSERLESS_TOKEN, 0o600);
    remote.write_config(
        &browserless_entry("engine", engine, &remote.token_file),
        0o600,
    );
    let report = remote.log.with_file_name("conformance-report.json");
    let run = |browser_id: &str| {
        let output = remote
            .home
            .command(env!("CARGO_BIN_EXE_browser-pilot-conformance"))
            .args(["--browser-id", browser_id, "--report"])
            .arg(&report)
            .output()
            .expect("the conformance runner");
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let text = std::fs::read_to_string(&report).unwrap();
        (output.status.code(), stderr, text)
    };
    let (code, stderr, text) = run("browser:remote:engine");
    assert_eq!(code, Some(0), "{stderr}\n{text}");
    let parsed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(parsed["passed"], true, "{text}");
    assert_eq!(parsed["counts"]["failed"], 0, "{text}");
    assert!(parsed["counts"]["passed"].as_u64().unwrap() >= 8, "{text}");
    remote.assert_never_shown(&text, &[BROWSERLESS_TOKEN]);
    remote.assert_never_shown(&stderr, &[BROWSERLESS_TOKEN]);

    let (code, stderr, text) = run("browser:remote:absent");
    assert_eq!(code, Some(1), "{stderr}\n{text}");
}

/// A `per_workspace` session the engine ends on its own (browserless's per-connection
/// `timeout`, its limit on a session's life) is not lost silently: its Workspace alone hears
/// `connection.lost` (a Workspace on another session of the same engine runs on), a Command on
/// it fails `browser_disconnected` instead of reconnecting behind the host's back, and the next
/// `browser.connect` gives it a new session with a newer generation. Two `browser.connect` calls
/// of one Workspace sent together share one attempt: one session (the entry takes one) and one
/// generation. The other session's entry carries the token only in its `headers` (the engine
/// checks it there), and that Workspace's annotated capture and PDF work as on a local browser.
#[test]
fn a_session_the_engine_ends_is_lost_only_in_its_workspace_and_reconnected_on_the_next_connect() {
    let engine = Browserless::shared();
    let remote = RemoteHome::new();
    write_mode(&remote.token_file, BROWSERLESS_TOKEN, 0o600);
    let fixtures = Fixtures::start();
    let brief = |timeout: &str| {
        per_workspace_entry("brief", engine, &remote.token_file, 1)
            .replace("?token={token}", &format!("?token={{token}}{timeout}"))
    };
    // The token only in a header: the engine admits the session only if the header reaches it.
    let steady = per_workspace_entry("steady", engine, &remote.token_file, 1).replace(
        "?token={token}\"\n",
        "\"\nheaders = { Authorization = \"Bearer {token}\" }\n",
    );
    assert!(steady.contains("headers"), "{steady}");
    remote.write_config(&format!("{}\n{steady}", brief("&timeout=4000")), 0o600);

    let mut other = agent_on(&remote.home, "browser:remote:steady");
    other.connect();
    let theirs = other.tool(
        "browser.open",
        None,
        json!({"url": fixtures.url("/page/steady")}),
    )["targetId"]
        .clone();

    // Two connects of one Workspace at once: one attempt, the one place the entry has.
    let mut agent = agent_on(&remote.home, "browser:remote:brief");
    let ids: Vec<Value> = (0..2)
        .map(|_| {
            agent.bridge.request(
                "tools/call",
                json!({"name": "browser.connect", "arguments": {}, "workspaceId": agent.workspace_id, "leaseId": agent.lease_id}),
            )
        })
        .collect();
    let connected: Vec<Value> = (ids.iter())
        .map(|id| {
            let response = agent.bridge.response(id);
            assert_eq!(
                response["result"]["command"]["status"], "completed",
                "{response}"
            );
            response["result"]["result"].clone()
        })
        .collect();
    let generation = connected[0]["browserConnectionGeneration"]
        .as_u64()
        .unwrap();
    assert_eq!(
        connected[1]["browserConnectionGeneration"], generation,
        "{connected:?}"
    );
    assert_eq!(
        (connected.iter()).filter(|c| c["reused"] == false).count(),
        1,
        "one session made, the other call joined it: {connected:?}"
    );

    // The engine ends the session: the Workspace hears it without asking.
    hears_lost(&mut agent, generation, "browser:remote:brief", &fixtures);

    // The Workspace on the other session heard nothing and works on; its annotated captures
    // and PDFs come back as on a local browser.
    let observed = other.tool("browser.observe", Some(&theirs), json!({}));
    assert_eq!(observed["title"], "steady", "{observed}");
    let annotated = other.tool(
        "browser.capture",
        Some(&theirs),
        json!({"annotations": {"observationId": observed["observationId"]}}),
    );
    assert!(
        annotated["annotationCount"].as_u64().unwrap() >= 1,
        "{annotated}"
    );
    let printed = other.tool("browser.pdf", Some(&theirs), json!({}));
    let got = other.bridge.ok(
        "artifacts/get",
        json!({"workspaceId": other.workspace_id, "leaseId": other.lease_id, "artifactId": printed["artifact"]["id"]}),
    );
    let bytes = std::fs::read(got["path"].as_str().expect("protected path")).unwrap();
    assert_eq!(&bytes[..5], b"%PDF-");
    let events = other.events();
    assert!(
        events.iter().all(|e| e["type"] != "connection.lost"),
        "{events:?}"
    );

    // The next browser.connect gives it a new session (the entry now without the engine's
    // limit, so that nothing ends it while the test looks).
    remote.write_config(&format!("{}\n{steady}", brief("")), 0o600);
    let again = restores(&mut agent, generation, "browser:remote:brief", &fixtures);
    assert_eq!(again["reused"], false, "{again}");
    assert!(engine_sessions(engine).contains(&fixtures.url("/page/restored")));
    release_both(&mut agent, &mut other);
}

/// Discovery is passive and remote candidates never displace a local browser: with a local
/// Chromium that recorded its debugging endpoint and two remote entries pointing at a listener
/// of the test's, `initialize` and `browser.discover` (twice) list the local candidates first,
/// then the remote ones in the file's order, a Workspace created without `browserId` is bound
/// to the local browser, and the listener has been reached by nothing; the first TCP connection
/// it sees is the WebSocket upgrade of `browser.connect` to a remote entry. Once a shared
/// remote browser is connected, a Workspace created without `browserId` joins that connection
/// (the first ready connection wins). The Broker never writes the file.
#[test]
fn remote_candidates_follow_the_local_ones_are_never_auto_selected_and_are_not_contacted_before_connect()
 {
    let profile = tempfile::tempdir().unwrap();
    let local = crate::support::chromium::Chromium::start(profile.path());
    let mut remote = RemoteHome::new();
    (remote.home.env).retain(|(key, _)| key != "BROWSER_PILOT_DISCOVERY_DIRS");
    remote.home.env.push((
        "BROWSER_PILOT_DISCOVERY_DIRS".to_owned(),
        profile.path().to_str().unwrap().to_owned(),
    ));
    let engine = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!(
        "ws://127.0.0.1:{}/devtools/browser/engine",
        engine.local_addr().unwrap().port()
    );
    let plain = TempChromium::start();
    remote.write_config(
        &format!(
            "{}\n{}\n{}",
            remote.entry("zeta", &endpoint),
            remote.entry("alpha", &endpoint),
            remote.entry("plain", &plain.ws_url())
        ),
        0o600,
    );

    let written = std::fs::metadata(remote.config())
        .unwrap()
        .modified()
        .unwrap();
    let mut agent = Agent::with_home(&remote.home, "com.example.order");
    let ids = |browsers: &Value| -> Vec<String> {
        (browsers.as_array().unwrap().iter())
            .map(|b| b["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let initialized = remote
        .home
        .spawn_bridge()
        .initialize("com.example.order2", "i1");
    let listed = ids(&initialized["browsers"]);
    let first_remote = (initialized["browsers"].as_array().unwrap().iter())
        .position(|b| b["kind"] == "remote")
        .unwrap_or_else(|| panic!("{initialized}"));
    assert!(
        first_remote >= 2,
        "the managed and the running local first: {listed:?}"
    );
    assert!(
        (initialized["browsers"].as_array().unwrap()[..first_remote].iter())
            .all(|b| b["kind"] == "local"),
        "{listed:?}"
    );
    assert_eq!(
        listed[first_remote..],
        [
            "browser:remote:zeta",
            "browser:remote:alpha",
            "browser:remote:plain"
        ],
        "the file's order"
    );
    for _ in 0..2 {
        assert_eq!(
            ids(&discover(&mut agent)["browsers"]),
            listed,
            "stable order"
        );
    }
    let running = (initialized["browsers"].as_array().unwrap().iter())
        .find(|b| b["kind"] == "local" && b["managed"] == false && b["state"] == "ready")
        .unwrap_or_else(|| panic!("the running local browser is ready: {initialized}"))["id"]
        .clone();
    let workspace_id = agent.workspace_id.clone();
    let bound = agent
        .bridge
        .ok("workspaces/get", json!({"workspaceId": workspace_id}));
    assert_eq!(
        bound["workspace"]["browserId"], running,
        "bound to the local browser with a recorded endpoint: {bound}"
    );

    // Nothing has touched the listener so far (a connection would wait in its backlog).
    engine.set_nonblocking(true).unwrap();
    assert_eq!(
        engine.accept().map(|_| ()).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock,
        "discovery contacted a remote endpoint"
    );
    engine.set_nonblocking(false).unwrap();
    let accepted = std::thread::spawn(move || {
        use std::io::Read;
        let (mut stream, _) = engine.accept().unwrap();
        let mut head = [0u8; 64];
        let n = stream.read(&mut head).unwrap();
        String::from_utf8_lossy(&head[..n]).into_owned()
    });
    let (code, error) = agent.tool_err(
        "browser.connect",
        None,
        json!({"browserId": "browser:remote:alpha"}),
    );
    assert!(!code.is_empty(), "{error}");
    let head = accepted.join().unwrap();
    assert!(
        head.starts_with("GET /devtools/browser/engine"),
        "the upgrade: {head}"
    );

    // Once a remote browser is connected (shared), a Workspace created without `browserId`
    // joins that connection; the one bound earlier stays on the local browser.
    let mut on_plain = agent_on(&remote.home, "browser:remote:plain");
    on_plain.connect();
    let later = Agent::with_home(&remote.home, "com.example.later");
    let mut bridge = later.bridge;
    let bound = bridge.ok("workspaces/get", json!({"workspaceId": later.workspace_id}));
    assert_eq!(
        bound["workspace"]["browserId"], "browser:remote:plain",
        "{bound}"
    );
    let bound = agent
        .bridge
        .ok("workspaces/get", json!({"workspaceId": workspace_id}));
    assert_eq!(bound["workspace"]["browserId"], running, "{bound}");
    drop(on_plain);
    let config = remote.config();
    assert_eq!(
        std::fs::metadata(&config).unwrap().modified().unwrap(),
        written,
        "the Broker never writes remote-browsers.toml"
    );
    drop(local);
}

/// A TCP proxy on 127.0.0.1 in front of a local port that can freeze: while frozen it forwards
/// nothing in either direction and closes nothing, as a stalled route would.
struct FreezableProxy {
    port: u16,
    frozen: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl FreezableProxy {
    fn start(upstream: u16) -> FreezableProxy {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let frozen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&frozen);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                let pairs = [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ];
                for (from, to) in pairs {
                    let flag = std::sync::Arc::clone(&flag);
                    std::thread::spawn(move || forward_unless_frozen(from, to, &flag));
                }
            }
        });
        FreezableProxy { port, frozen }
    }

    fn set_frozen(&self, frozen: bool) {
        (self.frozen).store(frozen, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Copies `from` to `to` until either ends; while `frozen` neither reads nor writes.
fn forward_unless_frozen(
    mut from: std::net::TcpStream,
    mut to: std::net::TcpStream,
    frozen: &std::sync::atomic::AtomicBool,
) {
    use std::io::{ErrorKind, Read, Write};
    let tick = Duration::from_millis(20);
    from.set_read_timeout(Some(tick)).unwrap();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        if frozen.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::sleep(tick);
            continue;
        }
        match from.read(&mut buffer) {
            Ok(0) => break,
            Ok(count) => {
                if to.write_all(&buffer[..count]).is_err() {
                    break;
                }
            }
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
}

/// A shared remote link that goes silent (the proxy in front of the browser stops forwarding
/// and closes nothing) is found by the janitor's pings (a short test interval): that
/// Workspace alone hears `connection.lost`, while one on a direct entry to the same browser
/// works on, and once the route is back `browser.connect` restores it with a newer generation.
#[test]
fn a_remote_link_that_goes_silent_is_lost_only_in_its_workspace_and_restored_on_connect() {
    let chromium = TempChromium::start();
    let proxy = FreezableProxy::start(chromium.chromium.port);
    let fixtures = Fixtures::start();
    let remote = RemoteHome::new().with_env("BROWSER_PILOT_REMOTE_PING_INTERVAL_MS", "1000");
    let proxied = format!("ws://127.0.0.1:{}{}", proxy.port, chromium.chromium.ws_path);
    remote.write_config(
        &format!(
            "{}\n{}",
            remote.entry("stalling", &proxied),
            remote.entry("direct", &chromium.ws_url())
        ),
        0o600,
    );

    let mut agent = agent_on(&remote.home, "browser:remote:stalling");
    let generation = agent.connect()["browserConnectionGeneration"]
        .as_u64()
        .unwrap();
    let mine = agent.tool(
        "browser.open",
        None,
        json!({"url": fixtures.url("/page/proxied")}),
    )["targetId"]
        .clone();
    let mut other = agent_on(&remote.home, "browser:remote:direct");
    other.connect();
    let theirs = other.tool(
        "browser.open",
        None,
        json!({"url": fixtures.url("/page/direct")}),
    )["targetId"]
        .clone();
    let observed = agent.tool("browser.observe", Some(&mine), json!({}));
    assert_eq!(observed["title"], "proxied", "{observed}");
    assert!(
        agent
            .events()
            .iter()
            .all(|e| e["type"] != "connection.lost"),
        "a pinged link that answers stays up"
    );

    proxy.set_frozen(true);
    hears_lost(&mut agent, generation, "browser:remote:stalling", &fixtures);

    let observed = other.tool("browser.observe", Some(&theirs), json!({}));
    assert_eq!(observed["title"], "direct", "{observed}");
    let events = other.events();
    assert!(
        events.iter().all(|e| e["type"] != "connection.lost"),
        "{events:?}"
    );

    proxy.set_frozen(false);
    restores(&mut agent, generation, "browser:remote:stalling", &fixtures);
    release_both(&mut agent, &mut other);
}

/// The agent on a lost connection hears `connection.lost` of `generation` on `browser_id`
/// without asking, and a tool call meanwhile is `browser_disconnected`.
fn hears_lost(agent: &mut Agent, generation: u64, browser_id: &str, fixtures: &Fixtures) {
    let lost = agent.wait_event("connection.lost");
    assert_eq!(lost["browserConnectionGeneration"], generation, "{lost}");
    assert_eq!(lost["payload"]["browserId"], browser_id);
    let (code, error) = agent.tool_err(
        "browser.open",
        None,
        json!({"url": fixtures.url("/page/after")}),
    );
    assert_eq!(code, "browser_disconnected", "{error}");
}

/// `browser.connect` after a loss: the same candidate with a newer generation, announced by
/// `connection.restored`, and a page (`/page/restored`) opens and is observed on it. Answers
/// the connect's result.
fn restores(agent: &mut Agent, generation: u64, browser_id: &str, fixtures: &Fixtures) -> Value {
    let again = agent.connect();
    assert_eq!(again["browserId"], browser_id);
    assert!(
        again["browserConnectionGeneration"].as_u64().unwrap() > generation,
        "{again}"
    );
    let restored = agent.wait_event("connection.restored");
    assert_eq!(
        restored["payload"]["generation"],
        again["browserConnectionGeneration"]
    );
    let url = fixtures.url("/page/restored");
    let opened = agent.tool("browser.open", None, json!({"url": url}));
    let observed = agent.tool("browser.observe", Some(&opened["targetId"]), json!({}));
    assert_eq!(observed["title"], "restored", "{observed}");
    again
}

fn release_both(agent: &mut Agent, other: &mut Agent) {
    for agent in [agent, other] {
        let workspace_id = agent.workspace_id.clone();
        (agent.bridge).ok("workspaces/release", json!({"workspaceId": workspace_id}));
    }
}
