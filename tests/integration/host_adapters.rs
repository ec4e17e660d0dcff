//! Process tests of the host adapters against a real headless Chromium (one of the
//! module's, shared by its tests that run at the same time) and fixture pages on 127.0.0.1:
//! `browser-pilot mcp` driven by the official MCP TypeScript SDK client; the adapter library's
//! transport-loss, cursor-recovery, Lease-renewal and no-state-files guarantees; and both
//! reference adapters in `examples/adapters/`.

use crate::support;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use browser_pilot::adapter::{
    BridgeSession, ClientIdentity, LaunchSpec, LeaseOptions, LeaseStatus, SessionOptions, ToolCall,
    WorkspaceOptions,
};
use browser_pilot::protocol::errors::ErrorCode;
use serde_json::{Value, json};
use support::chromium::{Chromium, Fixtures};
use support::{BIN, TestHome, wait_until};

/// The pinned official MCP TypeScript SDK (the client this project did not write).
const MCP_SDK: &str = "@modelcontextprotocol/sdk@1.32.2";

/// One Chromium and one fixture server for every test of this module running at the same time.
struct Shared {
    profile: tempfile::TempDir,
    _chromium: Chromium,
    fixtures: Fixtures,
}

fn shared() -> Arc<Shared> {
    static SHARED: Mutex<Weak<Shared>> = Mutex::new(Weak::new());
    let mut slot = SHARED.lock().unwrap();
    if let Some(shared) = slot.upgrade() {
        return shared;
    }
    let profile = tempfile::tempdir().unwrap();
    let chromium = Chromium::start(profile.path());
    let shared = Arc::new(Shared {
        profile,
        _chromium: chromium,
        fixtures: Fixtures::start(),
    });
    *slot = Arc::downgrade(&shared);
    shared
}

impl Shared {
    /// A fresh Broker home that discovers the shared Chromium.
    fn home(&self, env: &[(&str, &str)]) -> TestHome {
        let mut home = TestHome::new().with_env(
            "BROWSER_PILOT_DISCOVERY_DIRS",
            self.profile.path().to_str().unwrap(),
        );
        for (key, value) in env {
            home = home.with_env(key, value);
        }
        home
    }
}

fn launch_spec(home: &TestHome) -> LaunchSpec {
    let mut spec = LaunchSpec::new(BIN);
    spec.env
        .push(("BROWSER_PILOT_HOME".into(), home.path().into()));
    for (key, value) in &home.env {
        spec.env.push((key.into(), value.into()));
    }
    spec
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn debug_count(home: &TestHome, table: &str) -> i64 {
    let (code, out, err) = home.run(
        BIN,
        &[
            "debug",
            "sql",
            &format!("SELECT count(*) AS n FROM {table}"),
        ],
    );
    assert_eq!(code, 0, "debug sql: {err}");
    serde_json::from_str::<Value>(out.trim()).unwrap()["n"]
        .as_i64()
        .unwrap()
}

/// The SDK's directory: `BROWSER_PILOT_MCP_SDK_DIR` (scripts/test installs it there), else a
/// scratch install with npm. A missing node or npm is a loud failure with the install command.
fn mcp_sdk_dir() -> (PathBuf, Option<tempfile::TempDir>) {
    support::npm_packages(
        "BROWSER_PILOT_MCP_SDK_DIR",
        "node_modules/@modelcontextprotocol/sdk/package.json",
        &[MCP_SDK],
    )
}

#[test]
fn official_mcp_sdk_client_drives_browser_pilot_mcp() {
    let shared = shared();
    let home = shared.home(&[]);
    let (sdk_dir, _scratch) = mcp_sdk_dir();
    let output = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/sdk_client.cjs");
    let run = home
        .command("node")
        .arg(&script)
        .env("BROWSER_PILOT_BIN", BIN)
        .env("MCP_SDK_DIR", &sdk_dir)
        .env("FIXTURE_BASE", shared.fixtures.url(""))
        .env("OUTPUT_DIR", output.path())
        .output()
        .expect("node is required: sudo apt-get install -y nodejs npm");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "sdk client failed:\n{stderr}");
    let report: Value = serde_json::from_slice(&run.stdout)
        .unwrap_or_else(|e| panic!("report: {e}: {}", String::from_utf8_lossy(&run.stdout)));
    eprintln!("sdk client report: {report}");
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["protocolVersion"], "2025-11-25");
    assert!(report["tools"].as_u64().unwrap() >= 20, "{report}");
    assert!(
        report["errorCode"] == "stale_ref" || report["errorCode"] == "observation_not_found",
        "{report}"
    );
    // The cancelled navigation never reached the browser; the slow one ran once.
    assert_eq!(shared.fixtures.hits("/page/cancelled"), 0);
    assert_eq!(shared.fixtures.hits("/slow?ms=4000"), 1);
    // EOF ended the session: the Workspace was released explicitly, no Lease is left.
    assert!(
        wait_until(Duration::from_secs(10), || debug_count(&home, "workspaces")
            == 0),
        "a Workspace is left after the MCP session ended"
    );
    assert_eq!(debug_count(&home, "leases"), 0);
    // Only the exported PDF is in the output directory.
    let exported: Vec<String> = std::fs::read_dir(output.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(exported, vec![report["pdf"].as_str().unwrap().to_owned()]);
}

/// The JSON an MCP result's first text block carries (results other than pages and actions).
fn text_json(result: &Value) -> Value {
    let text = result["content"][0]["text"].as_str().unwrap_or("");
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {result}"))
}

fn identity(name: &str) -> ClientIdentity {
    ClientIdentity::ephemeral(&format!("com.example.{name}"), "Adapter Test", "test")
}

/// A session with a Workspace, a Lease, a browser connection and one fixture tab.
struct Open {
    session: BridgeSession,
    workspace: Arc<browser_pilot::adapter::Workspace>,
    lease: Arc<browser_pilot::adapter::Lease>,
    target: String,
}

async fn open(home: &TestHome, shared: &Shared, page: &str, lease: LeaseOptions) -> Open {
    let (session, _notifications) = BridgeSession::launch(
        &launch_spec(home),
        &identity("adapter"),
        &SessionOptions::default(),
    )
    .await
    .expect("launch");
    assert_eq!(
        session.initialized().protocol,
        json!({"major": 1, "minor": 1})
    );
    assert!(session.tool("browser.navigate").is_some_and(|t| t.mutating));
    let workspace = session
        .create_workspace(&WorkspaceOptions {
            client_key: Some("work-scope".into()),
            browser_id: None,
            ..WorkspaceOptions::default()
        })
        .await
        .expect("workspace");
    // The same clientKey is the same Workspace.
    let again = session
        .create_workspace(&WorkspaceOptions {
            client_key: Some("work-scope".into()),
            browser_id: None,
            ..WorkspaceOptions::default()
        })
        .await
        .expect("workspace again");
    assert_eq!(again.id(), workspace.id());
    let lease = workspace.create_lease(&lease).await.expect("lease");
    workspace
        .call(
            &lease,
            &ToolCall::new("browser.connect", json!({}), "connect"),
        )
        .await
        .expect("connect");
    let opened = workspace
        .call(
            &lease,
            &ToolCall::new(
                "browser.open",
                json!({"url": shared.fixtures.url(page)}),
                "open",
            ),
        )
        .await
        .expect("open");
    let target = opened.result["targetId"].as_str().unwrap().to_owned();
    Open {
        session,
        workspace: Arc::new(workspace),
        lease: Arc::new(lease),
        target,
    }
}

#[test]
fn a_killed_bridge_during_a_mutating_call_is_unknown_outcome() {
    let shared = shared();
    let home = shared.home(&[]);
    runtime().block_on(async {
        let open = open(&home, &shared, "/page/kill-start", LeaseOptions::default()).await;
        let slow = "/slow?ms=8001";
        let call = ToolCall::new(
            "browser.navigate",
            json!({"action": "goto", "url": shared.fixtures.url(slow)}),
            "navigate-slow",
        )
        .on_target(Some(open.target.clone()));
        let (workspace, lease) = (open.workspace.clone(), open.lease.clone());
        let pending = tokio::spawn(async move { workspace.call(&lease, &call).await });
        // Dispatched: the browser is loading the slow page.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while shared.fixtures.hits(slow) == 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "navigation never reached the page"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let pid = open.session.bridge_pid().await.expect("bridge pid");
        support::unsafe_kill(pid, "KILL");
        let error = pending
            .await
            .unwrap()
            .expect_err("the bridge died mid-call");
        assert_eq!(error.code, ErrorCode::UnknownOutcome, "{error}");
        assert!(!error.code.retryable());
        assert!(error.remediation.is_some());
        assert_eq!(
            error.context.as_ref().unwrap()["commandId"],
            json!(open.session.command_identity("navigate-slow").0)
        );
        // A read after the loss was never sent: retryable, not unknown.
        let read = open
            .workspace
            .call(
                &open.lease,
                &ToolCall::new("browser.tabs.list", json!({}), "list").on_target(None),
            )
            .await
            .expect_err("bridge gone");
        assert_eq!(read.code, ErrorCode::BrokerUnavailable);
        assert!(read.code.retryable());
        // Cleanup invalidates local state even though the Broker cannot be told.
        let released = open.workspace.release().await;
        assert!(released.is_err());
        assert!(open.workspace.is_released());
        let refused = open
            .workspace
            .call(
                &open.lease,
                &ToolCall::new("browser.tabs.list", json!({}), "after"),
            )
            .await
            .expect_err("released locally");
        assert_eq!(refused.code, ErrorCode::WorkspaceNotFound);
        assert_eq!(refused.context.unwrap()["state"], "released");
    });
}

#[test]
fn cursor_expired_is_recovered_by_rebuild_and_reset() {
    let shared = shared();
    let home = shared.home(&[("BROWSER_PILOT_EVENT_JOURNAL_SIZE", "16")]);
    runtime().block_on(async {
        let open = open(&home, &shared, "/page/cursor", LeaseOptions::default()).await;
        let (workspace, lease) = (&open.workspace, &open.lease);
        let ids = |events: &[Value]| -> Vec<String> {
            events
                .iter()
                .map(|e| e["id"].as_str().unwrap().to_owned())
                .collect()
        };
        // A second poll before acknowledgement starts from the same cursor.
        let first = workspace.poll_events(100).await.expect("poll");
        assert!(!first.events.is_empty());
        let second = workspace.poll_events(100).await.expect("poll again");
        assert_eq!(ids(&first.events), ids(&second.events));
        workspace.acknowledge_events(&first.next_cursor);
        assert_eq!(workspace.event_cursor(), first.next_cursor);
        let after_ack = workspace.poll_events(100).await.expect("poll after ack");
        assert!(
            after_ack
                .events
                .iter()
                .all(|e| !ids(&first.events).contains(&e["id"].as_str().unwrap().to_owned()))
        );
        workspace.acknowledge_events(&after_ack.next_cursor);

        // Overflow the 16-event journal while the host is not polling.
        for i in 0..24 {
            workspace
                .call(
                    lease,
                    &ToolCall::new("browser.tabs.list", json!({}), format!("list-{i}")),
                )
                .await
                .expect("tabs.list");
        }
        let expired = workspace
            .poll_events(100)
            .await
            .expect_err("cursor predates the journal");
        assert_eq!(expired.code, ErrorCode::CursorExpired);
        assert!(
            expired
                .context
                .as_ref()
                .unwrap()
                .contains_key("earliestCursor")
        );
        // Rebuild tab state, then take workspaces/get's cursor as the new baseline.
        let tabs = workspace
            .call(
                lease,
                &ToolCall::new("browser.tabs.list", json!({}), "rebuild"),
            )
            .await
            .expect("rebuild");
        assert!(
            tabs.result["tabs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["targetId"] == json!(open.target))
        );
        let baseline = workspace.reset_event_cursor().await.expect("reset");
        assert_eq!(workspace.event_cursor(), baseline);
        let observe = ToolCall::new("browser.observe", json!({}), "after-reset")
            .on_target(Some(open.target.clone()));
        workspace.call(lease, &observe).await.expect("observe");
        let batch = workspace.poll_events(100).await.expect("poll after reset");
        let command_id = open.session.command_identity("after-reset").0;
        assert!(
            batch
                .events
                .iter()
                .any(|e| e["type"] == "command.status"
                    && e["payload"]["commandId"] == json!(command_id)),
            "{:?}",
            batch.events
        );
        assert!(
            batch
                .events
                .iter()
                .all(|e| e["payload"]["commandId"]
                    != json!(open.session.command_identity("list-0").0))
        );
        workspace.acknowledge_events(&batch.next_cursor);
        open.workspace.release().await.expect("release");
        open.session.shutdown().await;
    });
}

#[test]
fn the_lease_is_renewed_across_a_call_longer_than_its_ttl() {
    let shared = shared();
    let home = shared.home(&[]);
    runtime().block_on(async {
        let lease = LeaseOptions {
            ttl_ms: Some(2000),
            client_key: Some("invocation".into()),
        };
        let open = open(&home, &shared, "/page/lease", lease).await;
        assert_eq!(open.lease.ttl_ms(), 2000);
        let mut call = ToolCall::new(
            "browser.navigate",
            json!({"action": "goto", "url": shared.fixtures.url("/slow?ms=7000")}),
            "long-call",
        )
        .on_target(Some(open.target.clone()));
        call.deadline_ms = Some(30_000);
        let outcome = open
            .workspace
            .call(&open.lease, &call)
            .await
            .expect("long call");
        assert_eq!(outcome.command["status"], "completed");
        assert!(
            open.lease.renewals() >= 3,
            "renewals: {}",
            open.lease.renewals()
        );
        assert!(matches!(open.lease.status(), LeaseStatus::Active { .. }));
        // The same Lease still works after three TTLs.
        open.workspace
            .call(
                &open.lease,
                &ToolCall::new("browser.tabs.list", json!({}), "after-long"),
            )
            .await
            .expect("lease still active");
        open.lease.release().await.expect("lease release");
        assert!(wait_until(Duration::from_secs(5), || open.lease.status()
            == LeaseStatus::Released));
        open.workspace.release().await.expect("release");
        open.session.shutdown().await;
    });
}

/// Every file under `dir` (relative path -> size), skipping build output and git metadata.
fn tree(dir: &Path) -> BTreeMap<String, u64> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, u64>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == "target" || name == ".git" {
                continue;
            }
            let relative = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => {
                    out.insert(format!("{relative}/"), 0);
                    walk(root, &path, out);
                }
                _ => {
                    out.insert(relative, entry.metadata().map(|m| m.len()).unwrap_or(0));
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

#[test]
fn a_full_session_writes_no_state_files() {
    let shared = shared();
    let user_home = tempfile::tempdir().unwrap();
    let home = shared.home(&[("HOME", user_home.path().to_str().unwrap())]);
    let exports = tempfile::tempdir().unwrap();
    let cwd = std::env::current_dir().unwrap();
    let (home_before, cwd_before) = (tree(user_home.path()), tree(&cwd));
    runtime().block_on(async {
        let open = open(&home, &shared, "/fixture/form", LeaseOptions::default()).await;
        let (workspace, lease) = (&open.workspace, &open.lease);
        let on_tab = |call: ToolCall| call.on_target(Some(open.target.clone()));
        let observed = workspace
            .call(lease, &on_tab(ToolCall::new("browser.observe", json!({}), "observe")))
            .await
            .expect("observe");
        let terms = observed.result["elements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["role"] == "checkbox")
            .unwrap()["ref"]
            .clone();
        let clicked = workspace
            .call(
                lease,
                &on_tab(ToolCall::new(
                    "browser.click",
                    json!({"observationId": observed.result["observationId"], "ref": terms}),
                    "click",
                )),
            )
            .await
            .expect("click");
        assert_eq!(clicked.result["evidence"]["status"], "verified");
        // An image: read from the protected path, then released.
        let captured = workspace
            .call(lease, &on_tab(ToolCall::new("browser.capture", json!({}), "capture")))
            .await
            .expect("capture");
        let image = workspace
            .read_image(lease, &captured.result["artifact"])
            .await
            .expect("read image");
        assert_eq!(&image.bytes[..4], b"\x89PNG");
        let gone = open
            .session
            .request(
                "artifacts/get",
                json!({"workspaceId": workspace.id(), "leaseId": lease.id(), "artifactId": captured.result["artifact"]["id"]}),
            )
            .await
            .expect_err("released after reading");
        assert_eq!(gone.code, ErrorCode::ArtifactNotFound);
        // A file: exported into the host-owned directory, then released.
        let printed = workspace
            .call(lease, &on_tab(ToolCall::new("browser.pdf", json!({}), "pdf")))
            .await
            .expect("pdf");
        let file = workspace
            .export_file(lease, &printed.result["artifact"], exports.path())
            .await
            .expect("export");
        assert_eq!(file.path.parent().unwrap(), exports.path());
        assert!(std::fs::read(&file.path).unwrap().starts_with(b"%PDF-"));
        // A second export of another PDF never overwrites the first.
        let printed_again = workspace
            .call(lease, &on_tab(ToolCall::new("browser.pdf", json!({}), "pdf-2")))
            .await
            .expect("pdf again");
        let mut descriptor = printed_again.result["artifact"].clone();
        descriptor["fileName"] = json!(file.path.file_name().unwrap().to_string_lossy());
        let second = workspace
            .export_file(lease, &descriptor, exports.path())
            .await
            .expect("export again");
        assert_ne!(second.path, file.path);
        let batch = workspace.poll_events(100).await.expect("events");
        workspace.acknowledge_events(&batch.next_cursor);
        workspace.release().await.expect("release");
        open.session.shutdown().await;
    });
    assert_eq!(
        tree(user_home.path()),
        home_before,
        "files appeared in HOME"
    );
    assert_eq!(
        tree(&cwd),
        cwd_before,
        "files appeared in the working directory"
    );
    // The Broker home holds only its own files, and no Artifact bytes after release.
    let allowed = [
        "broker-locator.json",
        "broker-versions.json",
        "broker.sock",
        "startup.lock",
        "artifacts/",
    ];
    for (path, _) in tree(home.path()) {
        assert!(
            allowed.iter().any(|a| path == *a)
                || (path.starts_with("artifacts/") && path.ends_with('/')),
            "unexpected file in the Broker home: {path}"
        );
    }
    assert_eq!(
        std::fs::read_dir(exports.path()).unwrap().count(),
        2,
        "only the two exports"
    );
}

#[path = "../../examples/adapters/tool_runtime.rs"]
mod tool_runtime;

#[test]
fn reference_tool_runtime_adapter_runs_a_turn() {
    let shared = shared();
    let home = shared.home(&[]);
    let output = tempfile::tempdir().unwrap();
    let report = runtime()
        .block_on(tool_runtime::run_turn(
            &launch_spec(&home),
            &shared.fixtures.url("/fixture/form"),
            output.path().to_owned(),
        ))
        .expect("turn");
    let tools = report["tools"].as_array().unwrap();
    assert!(tools.contains(&json!("browser_observe")) && tools.contains(&json!("browser_click")));
    let steps = &report["steps"];
    for step in ["connect", "open", "observe", "click", "capture", "pdf"] {
        assert_eq!(steps[step]["isError"], false, "{step}: {report}");
    }
    assert_eq!(steps["click"]["evidence"], "verified", "{report}");
    // The model reads the lean text: the Observation's header and element lines, the click's
    // evidence and the checkbox it changed, with its ref.
    let observed = steps["observe"]["content"][0]["text"].as_str().unwrap();
    assert!(observed.starts_with('"'), "{observed}");
    let checkbox = lean_lines(observed)
        .into_iter()
        .find(|l| l.role.as_deref() == Some("checkbox"))
        .unwrap_or_else(|| panic!("no checkbox line in:\n{observed}"));
    let clicked = steps["click"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(clicked.lines().next(), Some("verified"), "{clicked}");
    assert!(
        lean_lines(clicked).iter().any(|l| l.mark == '~'
            && l.element_ref == checkbox.element_ref
            && l.rest.starts_with(" checked")),
        "{clicked}"
    );
    assert_eq!(steps["capture"]["content"][1]["type"], "image");
    assert_eq!(steps["capture"]["content"][1]["png"], true);
    let file = &steps["pdf"]["content"][1];
    assert_eq!(file["type"], "file");
    let path = PathBuf::from(file["path"].as_str().unwrap());
    assert_eq!(path.parent().unwrap(), output.path());
    assert!(std::fs::read(&path).unwrap().starts_with(b"%PDF-"));
    assert_eq!(steps["error"]["isError"], true);
    assert_eq!(steps["error"]["code"], "observation_not_found", "{report}");
    // The turn released its Workspace.
    assert!(wait_until(Duration::from_secs(10), || debug_count(
        &home,
        "workspaces"
    ) == 0));
}

#[test]
fn reference_python_dispatcher_runs_a_turn() {
    let shared = shared();
    let home = shared.home(&[]);
    let output = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/adapters/dispatcher.py");
    let run = home
        .command("python3")
        .arg(&script)
        .args([
            "--executable",
            BIN,
            "--url",
            &shared.fixtures.url("/fixture/form"),
        ])
        .arg("--output-dir")
        .arg(output.path())
        .output()
        .expect("python3 is required: sudo apt-get install -y python3");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "dispatcher failed:\n{stderr}");
    let report: Value = serde_json::from_slice(&run.stdout).expect("one JSON line");
    let steps = &report["steps"];
    for step in ["connect", "open", "observe", "click", "capture", "pdf"] {
        assert_eq!(steps[step]["isError"], false, "{step}: {report}");
    }
    assert_eq!(steps["click"]["evidence"], "verified", "{report}");
    // The lean text: the Observation's element lines, the click's evidence and changed checkbox.
    let observed = steps["observe"]["text"].as_str().unwrap();
    let checkbox = lean_lines(observed)
        .into_iter()
        .find(|l| l.role.as_deref() == Some("checkbox"))
        .unwrap_or_else(|| panic!("no checkbox line in:\n{observed}"));
    let clicked = steps["click"]["text"].as_str().unwrap();
    assert!(clicked.starts_with("verified"), "{clicked}");
    assert!(
        lean_lines(clicked).iter().any(|l| l.mark == '~'
            && l.element_ref == checkbox.element_ref
            && l.role.is_none()
            && l.rest.starts_with(" checked")),
        "{clicked}"
    );
    assert_eq!(steps["capture"]["content"], json!(["text", "image"]));
    assert_eq!(steps["capture"]["png"], true);
    let pdf = PathBuf::from(steps["pdf"]["path"].as_str().unwrap());
    assert_eq!(pdf.parent().unwrap(), output.path());
    assert!(std::fs::read(&pdf).unwrap().starts_with(b"%PDF-"));
    assert_eq!(steps["error"]["code"], "observation_not_found", "{report}");
    assert_eq!(steps["unknown"]["code"], "tool_not_found");
    assert_eq!(report["releaseError"], Value::Null);
    assert_eq!(report["afterClose"], "workspace_not_found");
    assert!(wait_until(Duration::from_secs(10), || debug_count(
        &home,
        "workspaces"
    ) == 0));
}

#[test]
fn mcp_wire_rules_capability_withholding_and_sigterm_cleanup() {
    let shared = shared();
    let home = shared.home(&[]);
    let output = tempfile::tempdir().unwrap();
    let mut command = home.command(BIN);
    command
        .args(["mcp", "--capabilities"])
        .arg("browser.control,workspace.manage,observation.read,artifact.read,event.read")
        .arg("--output-dir")
        .arg(output.path())
        .arg("--url-allow")
        .arg(shared.fixtures.url(""));
    let mut mcp = support::Bridge::spawn(command);
    // Before initialize only ping is answered.
    assert_eq!(mcp.call("tools/list", json!({}))["error"]["code"], -32002);
    assert_eq!(mcp.ok("ping", json!({})), json!({}));
    // A line that is not JSON is answered with id null and the session goes on.
    mcp.send_raw(b"{not json\n");
    let parse_error = mcp
        .next_message(support::RESPONSE_TIMEOUT)
        .expect("parse error answer");
    assert_eq!(parse_error["id"], Value::Null);
    assert_eq!(parse_error["error"]["code"], -32700);
    // An older revision is answered in that revision.
    let init = mcp.ok(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw-host", "version": "1"}}),
    );
    assert_eq!(init["protocolVersion"], "2025-06-18");
    assert_eq!(init["capabilities"]["tools"]["listChanged"], false);
    assert_eq!(init["serverInfo"]["name"], "browser-pilot");
    mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    assert_eq!(mcp.call("initialize", json!({}))["error"]["code"], -32600);
    // Withheld action.input: no action tools are listed or callable.
    let tools = mcp.ok("tools/list", json!({}));
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"browser_observe") && names.contains(&"browser_open"),
        "{names:?}"
    );
    assert!(
        !names.contains(&"browser_click") && !names.contains(&"browser_type"),
        "{names:?}"
    );
    let refused = mcp.call(
        "tools/call",
        json!({"name": "browser_click", "arguments": {"x": 1, "y": 1}}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    // A read-only session still works.
    let opened = mcp.ok(
        "tools/call",
        json!({"name": "browser_open", "arguments": {"url": shared.fixtures.url("/page/sigterm")}}),
    );
    assert_ne!(opened["isError"], true, "{opened}");
    let read = mcp.ok(
        "tools/call",
        json!({"name": "browser_read", "arguments": {}}),
    );
    assert_ne!(read["isError"], true, "{read}");
    // Text only (no --structured): the page's text itself.
    assert!(read.get("structuredContent").is_none(), "{read}");
    assert!(
        read["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("sigterm"),
        "{read}"
    );
    // --url-allow holds the session's Workspace to the fixture origin: `localhost` is another.
    let elsewhere = shared
        .fixtures
        .url("/page/mcp-elsewhere")
        .replace("127.0.0.1", "localhost");
    let blocked = mcp.ok(
        "tools/call",
        json!({"name": "browser_open", "arguments": {"url": elsewhere}}),
    );
    assert_eq!(blocked["isError"], true, "{blocked}");
    assert_eq!(
        blocked["_meta"]["browser-pilot/error"]["code"], "url_blocked",
        "{blocked}"
    );
    assert_eq!(shared.fixtures.hits("/page/mcp-elsewhere"), 0);
    // Bad arguments are a tool error the model can read, with the code.
    let bad = mcp.ok(
        "tools/call",
        json!({"name": "browser_observe", "arguments": {"limit": "many"}}),
    );
    assert_eq!(bad["isError"], true);
    assert_eq!(
        bad["_meta"]["browser-pilot/error"]["code"],
        "invalid_params"
    );
    assert_eq!(debug_count(&home, "workspaces"), 1);
    // SIGTERM ends the session like EOF: the Workspace is released explicitly.
    support::unsafe_kill(mcp.child.id(), "TERM");
    assert_eq!(mcp.wait_exit(Duration::from_secs(20)), Some(0));
    assert!(
        wait_until(Duration::from_secs(10), || debug_count(&home, "workspaces")
            == 0),
        "SIGTERM left the Workspace"
    );
    assert_eq!(std::fs::read_dir(output.path()).unwrap().count(), 0);
}

#[test]
fn mcp_headless_launches_the_managed_chromium_when_nothing_is_ready() {
    let shared = shared();
    let nothing = tempfile::tempdir().unwrap();
    let home = TestHome::new()
        .with_env(
            "BROWSER_PILOT_DISCOVERY_DIRS",
            nothing.path().to_str().unwrap(),
        )
        .with_env(
            "BROWSER_PILOT_CHROMIUM",
            support::chromium::chromium_path().to_str().unwrap(),
        );
    let initialize = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw-host", "version": "1"}});
    let open = |mcp: &mut support::Bridge| {
        mcp.ok(
            "tools/call",
            json!({"name": "browser_open", "arguments": {"url": shared.fixtures.url("/page/headless")}}),
        )
    };
    // Without --headless: the session's browser.connect fails with the setup remediation.
    let mut command = home.command(BIN);
    command.arg("mcp");
    let mut mcp = support::Bridge::spawn(command);
    mcp.ok("initialize", initialize.clone());
    let refused = open(&mut mcp);
    assert_eq!(refused["isError"], true, "{refused}");
    let error = &refused["_meta"]["browser-pilot/error"];
    assert_eq!(error["code"], "browser_not_ready", "{refused}");
    assert_eq!(error["retryable"], true);
    assert!(error["remediation"]["action"].is_string(), "{refused}");
    mcp.close_stdin();
    assert_eq!(mcp.wait_exit(Duration::from_secs(20)), Some(0));
    // With --headless the managed Chromium is started and used; --structured adds the
    // Command's result as structuredContent and the output schemas.
    let mut command = home.command(BIN);
    command.args(["mcp", "--headless", "--structured"]);
    let mut mcp = support::Bridge::spawn(command);
    mcp.ok("initialize", initialize);
    let opened = open(&mut mcp);
    assert_ne!(opened["isError"], true, "{opened}");
    assert_eq!(opened["structuredContent"]["title"], "headless", "{opened}");
    let tools = mcp.ok("tools/list", json!({}));
    assert!(
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|tool| tool["outputSchema"]["type"] == "object"),
        "{tools}"
    );
    mcp.close_stdin();
    assert_eq!(mcp.wait_exit(Duration::from_secs(20)), Some(0));
    let (code, out, err) = home.run(BIN, &["browser", "stop"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), r#"{"stopped":true}"#);
}

/// The Python dispatcher's own transport-loss rule, driven through its class: the bridge is
/// killed while a mutating call is dispatched (read back from the Broker with `debug sql`).
const PYTHON_KILL_SCENARIO: &str = r#"
import json, os, subprocess, sys, threading, time
sys.path.insert(0, sys.argv[1])
from dispatcher import Dispatcher
executable, url, slow, out = sys.argv[2:6]
d = Dispatcher(executable, "kill-scope", out, "install:kill-scenario")
d.browser("k1", "browser.connect")
d.browser("k2", "browser.open", {"url": url})
outcome = {}
worker = threading.Thread(target=lambda: outcome.update(d.browser("k3", "browser.navigate", {"action": "goto", "url": slow})))
worker.start()
deadline = time.time() + 20
while time.time() < deadline:
    rows = subprocess.run([executable, "debug", "sql", "SELECT status FROM commands WHERE method = 'browser.navigate'"], capture_output=True, text=True).stdout
    if '"dispatched"' in rows:
        break
    time.sleep(0.05)
d.bridge.proc.kill()
worker.join(30)
after = d.browser("k4", "browser.tabs.list")
print(json.dumps({"mutating": outcome["details"], "read": after["details"]}))
"#;

#[test]
fn reference_python_dispatcher_reports_unknown_outcome_after_transport_loss() {
    let shared = shared();
    let home = shared.home(&[]);
    let output = tempfile::tempdir().unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/adapters");
    let run = home
        .command("python3")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .args(["-c", PYTHON_KILL_SCENARIO])
        .arg(&examples)
        .arg(BIN)
        .arg(shared.fixtures.url("/page/python-kill"))
        .arg(shared.fixtures.url("/slow?ms=8002"))
        .arg(output.path())
        .output()
        .expect("python3 is required: sudo apt-get install -y python3");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "scenario failed:\n{stderr}");
    let report: Value = serde_json::from_slice(&run.stdout).expect("one JSON line");
    assert_eq!(report["mutating"]["code"], "unknown_outcome", "{report}");
    assert_eq!(report["mutating"]["retryable"], false);
    assert_eq!(report["read"]["code"], "broker_unavailable", "{report}");
    assert_eq!(report["read"]["retryable"], true);
}

/// Strict tool hosts (Anthropic's, OpenAI's and Bedrock's tool APIs) refuse `anyOf`/`oneOf`/
/// `allOf` at the root of an input schema and limit tool names; every property is described so
/// a model can fill it in. Checked over what `tools/list` (every capability granted) and
/// `browser-pilot mcp` actually serve; the alternatives the schemas no longer say are refused
/// in code with `invalid_params`.
#[test]
fn served_schemas_are_strict_host_safe() {
    use browser_pilot::tools::schema::host_problems;
    let home = TestHome::new();
    let mut bridge = home.spawn_bridge();
    let mut params = support::initialize_params("com.example.lint", "i1", (1, 1));
    let probe = home.spawn_bridge().ok("initialize", params.clone());
    params["requestedCapabilities"] = probe["capabilities"]["supported"].clone();
    let extras: Vec<String> = probe["capabilities"]["supported"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("+{}", c.as_str().unwrap()))
        .collect();
    bridge.ok("initialize", params);
    let listed = bridge.ok("tools/list", json!({}))["tools"].clone();
    let broker_names: Vec<String> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(broker_names.len() >= 30, "{broker_names:?}");
    for tool in listed.as_array().unwrap() {
        assert_eq!(
            host_problems(&tool["inputSchema"]),
            Vec::<String>::new(),
            "{}",
            tool["name"]
        );
    }
    // A click naming neither a ref nor coordinates is refused before it becomes a Command.
    let ws = bridge.ok("workspaces/create", json!({}));
    let workspace_id = ws["workspace"]["id"].clone();
    let lease = bridge.ok("leases/create", json!({"workspaceId": workspace_id}));
    let (code, data) = bridge.err(
        "tools/call",
        json!({"name": "browser.click", "workspaceId": workspace_id, "leaseId": lease["lease"]["id"], "targetId": "target:none", "arguments": {"button": "left"}}),
    );
    assert_eq!(code, "invalid_params", "{data}");

    let output = tempfile::tempdir().unwrap();
    let mut command = home.command(BIN);
    command
        .args(["mcp", "--capabilities", &extras.join(",")])
        .arg("--output-dir")
        .arg(output.path());
    let mut mcp = support::Bridge::spawn(command);
    mcp.ok(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "lint", "version": "1"}}),
    );
    let served = mcp.ok("tools/list", json!({}))["tools"].clone();
    // Every Broker tool, plus the server's own download export (no --upload-dir: no import).
    assert_eq!(served.as_array().unwrap().len(), broker_names.len() + 1);
    let dotted = |text: &str| {
        broker_names
            .iter()
            .filter(|name| {
                text.match_indices(name.as_str()).any(|(at, _)| {
                    !text[at + name.len()..]
                        .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                })
            })
            .cloned()
            .collect::<Vec<_>>()
    };
    for tool in served.as_array().unwrap() {
        let name = tool["name"].as_str().unwrap();
        assert!(
            (1..=64).contains(&name.len())
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
            "{name}"
        );
        assert_eq!(
            host_problems(&tool["inputSchema"]),
            Vec::<String>::new(),
            "{name}"
        );
        // Descriptions name the MCP tools a host can call, not the Broker's dotted names.
        let description = tool["description"].as_str().unwrap();
        assert_eq!(
            dotted(description),
            Vec::<String>::new(),
            "{name}: {description}"
        );
        let schema_text = tool["inputSchema"].to_string();
        assert_eq!(dotted(&schema_text), Vec::<String>::new(), "{name}");
    }
    mcp.close_stdin();
    assert_eq!(mcp.wait_exit(Duration::from_secs(20)), Some(0));
}

/// What `browser-pilot mcp` says when it refuses its flags: exit 2 and the reason on stderr.
fn mcp_refuses(home: &TestHome, args: &[&std::ffi::OsStr]) -> String {
    let mut command = home.command(BIN);
    command
        .arg("mcp")
        .args(args)
        .stdin(std::process::Stdio::null());
    let output = command.output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{args:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Pages cannot write into the host's project: a completed download is announced and kept as
/// an Artifact; only a call naming it writes it, as `download-<id>-<name>`, within the
/// session's budget. The output directory and upload directories must be the user's own, not a
/// symlink, not writable by others. Imports read only regular files under `--upload-dir`,
/// symlinks resolved.
#[cfg(unix)]
#[test]
fn mcp_writes_downloads_only_when_asked_and_imports_only_from_upload_dirs() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let shared = shared();
    let home = shared.home(&[]);
    let scratch = tempfile::tempdir().unwrap();
    let output = scratch.path().join("out");
    let uploads = scratch.path().join("uploads");
    for dir in [&output, &uploads] {
        std::fs::create_dir(dir).unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    // Refused directories: a symlink, one owned by another user, one others can write into.
    let link = scratch.path().join("link");
    symlink(&output, &link).unwrap();
    let foreign = scratch.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::set_permissions(&foreign, std::fs::Permissions::from_mode(0o700)).unwrap();
    let chowned = Command::new("chown")
        .args(["65534:65534"])
        .arg(&foreign)
        .status()
        .is_ok_and(|s| s.success());
    let open = scratch.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let said = mcp_refuses(&home, &["--output-dir".as_ref(), link.as_os_str()]);
    assert!(said.contains("symlink"), "{said}");
    let said = mcp_refuses(&home, &["--output-dir".as_ref(), open.as_os_str()]);
    assert!(said.contains("writable by other users"), "{said}");
    let said = mcp_refuses(&home, &["--upload-dir".as_ref(), link.as_os_str()]);
    assert!(said.contains("symlink"), "{said}");
    if chowned {
        let said = mcp_refuses(&home, &["--output-dir".as_ref(), foreign.as_os_str()]);
        assert!(said.contains("owned by another user"), "{said}");
    }

    std::fs::write(uploads.join("cv.txt"), "my cv").unwrap();
    std::fs::write(scratch.path().join("secret.txt"), "secret").unwrap();
    symlink(
        scratch.path().join("secret.txt"),
        uploads.join("escape.txt"),
    )
    .unwrap();
    let mut command = home.command(BIN);
    command
        .arg("mcp")
        .arg("--output-dir")
        .arg(&output)
        .arg("--upload-dir")
        .arg(&uploads);
    let mut mcp = support::Bridge::spawn(command);
    mcp.ok(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "files", "version": "1"}}),
    );
    let tools = mcp.ok("tools/list", json!({}));
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"browser_file_import") && names.contains(&"browser_download_export"),
        "{names:?}"
    );
    let mut call = |name: &str, arguments: Value| {
        mcp.ok("tools/call", json!({"name": name, "arguments": arguments}))
    };
    let opened = call(
        "browser_open",
        json!({"url": shared.fixtures.url("/fixture/mcp-download")}),
    );
    assert_ne!(opened["isError"], true, "{opened}");

    // Imports: outside the upload directory, or a symlink out of it, are refused.
    for refused in [
        scratch.path().join("secret.txt"),
        uploads.join("escape.txt"),
    ] {
        let answer = call(
            "browser_file_import",
            json!({"path": refused.to_str().unwrap()}),
        );
        assert_eq!(answer["isError"], true, "{answer}");
        assert_eq!(
            answer["_meta"]["browser-pilot/error"]["code"], "path_not_allowed",
            "{answer}"
        );
    }
    let imported = call(
        "browser_file_import",
        json!({"path": uploads.join("cv.txt").to_str().unwrap(), "mimeType": "text/plain"}),
    );
    assert_ne!(imported["isError"], true, "{imported}");
    let artifact = &text_json(&imported)["artifact"];
    assert_eq!(artifact["kind"], "upload_input", "{imported}");
    assert_eq!(artifact["byteLength"], 5);

    // The page's download is announced, not written.
    let clicked = call("browser_click", json!({"x": 40, "y": 40}));
    assert_ne!(clicked["isError"], true, "{clicked}");
    let mut notice = clicked["_meta"]["browser-pilot/downloads"].clone();
    assert!(
        wait_until(Duration::from_secs(20), || {
            if notice.is_null() {
                notice = call("browser_tabs_list", json!({}))["_meta"]["browser-pilot/downloads"]
                    .clone();
            }
            !notice.is_null()
        }),
        "no download notice"
    );
    assert_eq!(notice[0]["fileName"], "conftest.py", "{notice}");
    assert_eq!(std::fs::read_dir(&output).unwrap().count(), 0);

    // Asked for by id: written under a name that shadows nothing, once.
    let artifact_id = notice[0]["artifactId"].as_str().unwrap().to_owned();
    let exported = call(
        "browser_download_export",
        json!({"artifactId": artifact_id}),
    );
    assert_ne!(exported["isError"], true, "{exported}");
    let exported = text_json(&exported);
    let name = exported["fileName"].as_str().unwrap();
    assert!(
        name.starts_with("download-") && name.ends_with("-conftest.py"),
        "{name}"
    );
    let written: Vec<String> = std::fs::read_dir(&output)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(written, vec![name.to_owned()]);
    assert_eq!(
        std::fs::read_to_string(output.join(name)).unwrap(),
        "import os\n"
    );
    let again = call(
        "browser_download_export",
        json!({"artifactId": artifact_id}),
    );
    assert_eq!(again["isError"], true, "{again}");
    mcp.close_stdin();
    assert_eq!(mcp.wait_exit(Duration::from_secs(20)), Some(0));
}

/// A restarted Python dispatcher of the same host instance repeats a tool-use id.
const PYTHON_RESTART_SCENARIO: &str = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
from dispatcher import Dispatcher
executable, url, out = sys.argv[2:5]
first = Dispatcher(executable, "restart-scope", out, "install:stable-python-host")
first.browser("toolu_connect", "browser.connect")
opened = first.browser("toolu_open", "browser.open", {"url": url})
second = Dispatcher(executable, "restart-scope", out, "install:stable-python-host")
again = second.browser("toolu_open", "browser.open", {"url": url})
second.close()
first.close()
print(json.dumps({"first": opened["details"].get("targetId"), "again": again["details"].get("targetId"),
                  "ids": [first.identity("toolu_open"), second.identity("toolu_open")]}))
"#;

#[test]
fn reference_adapters_answer_a_repeated_tool_use_id_from_the_record_after_a_restart() {
    let shared = shared();
    let home = shared.home(&[]);
    let output = tempfile::tempdir().unwrap();
    let spec = launch_spec(&home);
    let url = shared.fixtures.url("/page/restart-rust");
    let (opened, again) = runtime().block_on(async {
        let start = || {
            tool_runtime::ToolRuntime::start(
                &spec,
                "restart-scope",
                "install:stable-rust-host",
                output.path().to_owned(),
            )
        };
        let first = start().await.expect("first runtime");
        let connected = first
            .execute("toolu_connect", "browser_connect", json!({}))
            .await;
        assert!(!connected.is_error, "{}", connected.details);
        let opened = first
            .execute("toolu_open", "browser_open", json!({"url": url}))
            .await;
        // The host restarts: another process of the same instance and work scope.
        let second = start().await.expect("second runtime");
        let again = second
            .execute("toolu_open", "browser_open", json!({"url": url}))
            .await;
        second.close().await.expect("release");
        let _ = first.close().await;
        (opened, again)
    });
    assert!(!opened.is_error && !again.is_error, "{}", again.details);
    assert_eq!(
        opened.details["targetId"], again.details["targetId"],
        "the recorded outcome"
    );
    assert_eq!(shared.fixtures.hits("/page/restart-rust"), 1, "opened once");

    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/adapters");
    let run = home
        .command("python3")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .args(["-c", PYTHON_RESTART_SCENARIO])
        .arg(&examples)
        .arg(BIN)
        .arg(shared.fixtures.url("/page/restart-python"))
        .arg(output.path())
        .output()
        .expect("python3 is required: sudo apt-get install -y python3");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "scenario failed:\n{stderr}");
    let report: Value = serde_json::from_slice(&run.stdout).expect("one JSON line");
    assert_eq!(report["ids"][0], report["ids"][1], "{report}");
    assert!(report["first"].is_string(), "{report}");
    assert_eq!(report["first"], report["again"], "{report}");
    assert_eq!(shared.fixtures.hits("/page/restart-python"), 1);
}

/// One element line of `browser-pilot mcp`'s lean text: `12 role "name" rest` (a full
/// Observation), `+12 role "name" rest` (added) or `~12 "name" rest` (changed, current state).
#[derive(Debug, Clone)]
struct LeanLine {
    mark: char,
    element_ref: u64,
    role: Option<String>,
    name: String,
    rest: String,
}

fn lean_lines(text: &str) -> Vec<LeanLine> {
    let mut lines = Vec::new();
    for line in text.lines() {
        let (mark, body) = match line.chars().next() {
            Some(c @ ('+' | '~')) => (c, &line[1..]),
            _ => (' ', line),
        };
        let Some((number, after)) = body.split_once(' ') else {
            continue;
        };
        let Some(number) = number.strip_prefix('[').and_then(|n| n.strip_suffix(']')) else {
            continue;
        };
        let Ok(element_ref) = number.parse::<u64>() else {
            continue;
        };
        let (role, quoted) = match after.starts_with('"') {
            true => (None, after),
            false => match after.split_once(' ') {
                Some((role, quoted)) if quoted.starts_with('"') => {
                    (Some(role.split(':').next().unwrap().to_owned()), quoted)
                }
                _ => continue,
            },
        };
        let mut names = serde_json::Deserializer::from_str(quoted).into_iter::<String>();
        let Some(Ok(name)) = names.next() else {
            continue;
        };
        let rest = quoted[names.byte_offset()..].to_owned();
        lines.push(LeanLine {
            mark,
            element_ref,
            role,
            name,
            rest,
        });
    }
    lines
}

/// A line's state as the model compares it: role, name and states, without the coarse position
/// and focus (which the lean diff leaves out on purpose).
fn lean_state(line: &LeanLine) -> String {
    let rest = match line.rest.rfind(" @") {
        Some(at) => &line.rest[..at],
        None => &line.rest,
    };
    let rest = rest.replace(" focused", "");
    format!(
        "{} {:?}{rest}",
        line.role.as_deref().unwrap_or(""),
        line.name
    )
}

/// The diff never hides what the next action needs: every element that a full Observation
/// after the action shows added or changed against the full Observation before it is in the
/// action's result with its ref (added as `+` with its whole line, changed as `~` with its new
/// state), and every ref that is gone is in its `removed` line.
fn assert_result_covers_changes(before: &[LeanLine], result: &str, after: &[LeanLine]) {
    let shown = lean_lines(result);
    let was: HashMap<u64, String> = before
        .iter()
        .map(|l| (l.element_ref, lean_state(l)))
        .collect();
    for line in after {
        let now = lean_state(line);
        match was.get(&line.element_ref) {
            Some(old) if *old == now => {}
            Some(_) => {
                let listed = shown
                    .iter()
                    .find(|l| l.element_ref == line.element_ref && l.mark == '~')
                    .unwrap_or_else(|| panic!("changed {now} is not in:\n{result}"));
                let shown_state = lean_state(listed);
                let expected = lean_state(&LeanLine {
                    role: None,
                    ..line.clone()
                });
                assert_eq!(shown_state, expected, "in:\n{result}");
            }
            None => {
                let listed = shown
                    .iter()
                    .find(|l| l.element_ref == line.element_ref && l.mark == '+')
                    .unwrap_or_else(|| panic!("added {now} is not in:\n{result}"));
                assert_eq!(lean_state(listed), now, "in:\n{result}");
            }
        }
    }
    let removed: Vec<u64> = result
        .lines()
        .find_map(|l| l.strip_prefix("removed "))
        .map(|list| list.split(',').map(|r| r.parse().unwrap()).collect())
        .unwrap_or_default();
    for line in before {
        if !after.iter().any(|l| l.element_ref == line.element_ref) {
            assert!(
                removed.contains(&line.element_ref),
                "gone {} is not in the removed refs of:\n{result}",
                lean_state(line)
            );
        }
    }
}

/// An MCP session on `browser-pilot mcp` with default flags (the lean form).
struct LeanMcp {
    mcp: support::Bridge,
}

impl LeanMcp {
    fn start(home: &TestHome) -> LeanMcp {
        let mut command = home.command(BIN);
        command.arg("mcp");
        let mut mcp = support::Bridge::spawn(command);
        mcp.ok(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "lean-test", "version": "1"}}),
        );
        LeanMcp { mcp }
    }

    /// A successful call's text (and the whole result).
    fn text(&mut self, name: &str, arguments: Value) -> (String, Value) {
        let result = self
            .mcp
            .ok("tools/call", json!({"name": name, "arguments": arguments}));
        assert_ne!(result["isError"], true, "{name}: {result}");
        assert!(
            result.get("structuredContent").is_none(),
            "no duplicate payload without --structured: {result}"
        );
        let text = result["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
        (text, result)
    }

    /// Every ref `lines` show resolves in the tab's latest Observation: an annotated capture
    /// draws each, skipping none as unknown or stale.
    fn assert_refs_resolve(&mut self, lines: &[LeanLine], context: &str) {
        let refs: Vec<u64> = lines.iter().map(|l| l.element_ref).collect();
        assert!(!refs.is_empty(), "no refs in {context}");
        let (text, _) = self.text("browser_capture", json!({"annotations": {"refs": refs}}));
        let captured: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        for skipped in captured["skippedRefs"].as_array().into_iter().flatten() {
            let reason = skipped["reason"].as_str().unwrap_or("");
            assert!(
                reason == "not_visible" || reason == "outside_viewport",
                "ref {skipped} shown in {context} does not resolve"
            );
        }
    }

    /// The full Observation's line of `element_ref` now, read back from the page.
    fn observed(&mut self, element_ref: u64) -> LeanLine {
        let (text, _) = self.text("browser_observe", json!({}));
        lean_lines(&text)
            .into_iter()
            .find(|l| l.element_ref == element_ref)
            .unwrap_or_else(|| panic!("ref {element_ref} not in {text}"))
    }

    fn end(mut self) {
        self.mcp.close_stdin();
        assert_eq!(self.mcp.wait_exit(Duration::from_secs(20)), Some(0));
    }
}

#[test]
fn mcp_lean_observation_shows_every_control_of_the_checkout_page_with_a_live_ref() {
    let shared = shared();
    let home = shared.home(&[]);
    let mut lean = LeanMcp::start(&home);
    let tools = lean.mcp.ok("tools/list", json!({}));
    let listed: Vec<Value> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| json!([t["description"], t["inputSchema"]]))
        .collect();
    let size = Value::Array(listed).to_string().len();
    assert!(
        size <= 16_000,
        "tool descriptions + input schemas: {size} bytes"
    );
    assert!(tools["tools"][0].get("outputSchema").is_none(), "{tools}");

    let url = shared.fixtures.url("/fixture/checkout");
    let (opened, _) = lean.text("browser_open", json!({"url": url}));
    assert!(
        opened.contains(&format!("\"Checkout - Small Form\" {url}")),
        "{opened}"
    );
    // The run is recorded; browser_recording_stop at the end saves the player as a file.
    lean.text("browser_recording_start", json!({}));
    let (text, result) = lean.text("browser_observe", json!({}));
    assert_eq!(
        result["_meta"]["browser-pilot/sensitivity"]["output"],
        json!(["browser_data"])
    );
    let header = text.lines().next().unwrap();
    assert!(
        header.starts_with("\"Checkout - Small Form\" http://"),
        "{header}"
    );
    assert!(header.contains("below view"), "{header}");
    let lines = lean_lines(&text);
    let controls = [
        (
            "link",
            &[
                "Home",
                "Products",
                "Cart",
                "Account",
                "Help",
                "Privacy",
                "Terms",
                "Contact us",
                "FAQ",
            ][..],
        ),
        (
            "textbox",
            &[
                "First name",
                "Last name",
                "Email",
                "Phone",
                "Street",
                "City",
                "Postal code",
                "Delivery notes",
                "Coupon code",
                "Card number",
                "Expiry",
                "CVC",
            ][..],
        ),
        ("combobox", &["Country"][..]),
        ("radio", &["Standard", "Express", "Overnight"][..]),
        ("checkbox", &["I agree", "Subscribe", "This is a gift"][..]),
        (
            "button",
            &[
                "Apply coupon",
                "Place order",
                "Reset form",
                "Save for later",
            ][..],
        ),
    ];
    let mut found = 0;
    for (role, names) in controls {
        for name in names {
            assert!(
                lines
                    .iter()
                    .any(|l| l.role.as_deref() == Some(role) && l.name.starts_with(name)),
                "{role} {name:?} missing from:\n{text}"
            );
            found += 1;
        }
    }
    assert_eq!(found, 32);
    // The password field shows its length, never a value.
    let cvc = lines.iter().find(|l| l.name == "CVC").unwrap();
    assert!(
        cvc.rest.contains("sensitive") && !cvc.rest.contains(" =\""),
        "{cvc:?}"
    );
    // Grouping lines tell the page's sections apart: the navigation in the banner, the main
    // content, the footer.
    for group in [
        "## banner > navigation \"Main\"",
        "## banner",
        "## main",
        "## contentinfo",
    ] {
        assert!(
            text.lines().any(|l| l == group),
            "{group:?} not in:\n{text}"
        );
    }
    eprintln!("LEAN {} chars:\n{text}", text.len());
    assert!(text.len() <= 1_650, "{} chars:\n{text}", text.len());
    lean.assert_refs_resolve(&lines, "the checkout Observation");

    // A click: the evidence line and the changed checkbox with its ref, read back from the page.
    let agree = lines
        .iter()
        .find(|l| l.name.starts_with("I agree"))
        .unwrap();
    let (clicked, _) = lean.text("browser_click", json!({"ref": agree.element_ref}));
    assert_eq!(clicked.lines().next(), Some("verified"), "{clicked}");
    let changed = lean_lines(&clicked);
    let shown = changed
        .iter()
        .find(|l| l.element_ref == agree.element_ref)
        .unwrap_or_else(|| panic!("the clicked checkbox is not in:\n{clicked}"));
    assert_eq!(shown.mark, '~');
    assert!(shown.rest.starts_with(" checked"), "{clicked}");
    assert!(clicked.len() <= 140, "{} chars:\n{clicked}", clicked.len());
    let (after_click, _) = lean.text("browser_observe", json!({}));
    let after_click = lean_lines(&after_click);
    assert_result_covers_changes(&lines, &clicked, &after_click);
    assert!(
        after_click
            .iter()
            .any(|l| l.element_ref == agree.element_ref && l.rest.starts_with(" checked"))
    );
    let (status, _) = lean.text("browser_read", json!({"selector": "#status"}));
    assert!(status.contains("agree-changes=1"), "{status}");

    // A fill: the new value on the field's line.
    let coupon = lines.iter().find(|l| l.name == "Coupon code").unwrap();
    let (filled, _) = lean.text(
        "browser_type",
        json!({"ref": coupon.element_ref, "text": "ABCDEFGHIJKLMNOPQRST", "mode": "fill"}),
    );
    assert_eq!(filled.lines().next(), Some("verified"), "{filled}");
    assert!(
        lean_lines(&filled)
            .iter()
            .any(|l| l.element_ref == coupon.element_ref
                && l.rest.starts_with(" =\"ABCDEFGHIJKLMNOPQRST\"")),
        "{filled}"
    );
    assert!(filled.len() <= 60, "{} chars:\n{filled}", filled.len());
    let (after_fill, _) = lean.text("browser_observe", json!({}));
    assert_result_covers_changes(&after_click, &filled, &lean_lines(&after_fill));
    let (status, _) = lean.text("browser_read", json!({"selector": "#status"}));
    assert!(status.contains("coupon-length=20"), "{status}");
    let (_, stopped) = lean.text("browser_recording_stop", json!({}));
    let link = (stopped["content"].as_array().unwrap().iter())
        .find(|c| c["type"] == "resource_link")
        .unwrap_or_else(|| panic!("no file: {stopped}"))
        .clone();
    assert_eq!(link["mimeType"], "text/html", "{stopped}");
    let path = link["uri"]
        .as_str()
        .unwrap()
        .strip_prefix("file://")
        .unwrap();
    let player = std::fs::read_to_string(path).unwrap();
    assert!(player.contains("browser.type completed"), "{stopped}");
    assert!(
        !player.contains("ABCDEFGHIJKLMNOPQRST"),
        "no typed value in the recording"
    );
    lean.end();
}

#[test]
fn mcp_action_results_show_what_changed_and_state_dialogs_popups_and_navigations() {
    let shared = shared();
    let home = shared.home(&[]);
    let mut lean = LeanMcp::start(&home);
    let (page, _) = lean.text(
        "browser_open",
        json!({"url": shared.fixtures.url("/fixture/mcp-lean")}),
    );
    let lines = lean_lines(&page);
    let by_name = |name: &str| {
        lines
            .iter()
            .find(|l| l.name == name)
            .unwrap_or_else(|| panic!("{name:?} not in:\n{page}"))
            .clone()
    };
    let (more, note, gone) = (by_name("Show more"), by_name("Note"), by_name("Gone link"));

    // Added, changed and removed elements are all in the action's result.
    let (shown, _) = lean.text("browser_click", json!({"ref": more.element_ref}));
    let diff = lean_lines(&shown);
    let (after, _) = lean.text("browser_observe", json!({}));
    assert_result_covers_changes(&lines, &shown, &lean_lines(&after));
    let added = diff
        .iter()
        .find(|l| l.mark == '+' && l.name == "Added one")
        .unwrap_or_else(|| panic!("the added button is not in:\n{shown}"));
    assert_eq!(added.role.as_deref(), Some("button"));
    let changed = diff
        .iter()
        .find(|l| l.element_ref == note.element_ref)
        .unwrap_or_else(|| panic!("the changed field is not in:\n{shown}"));
    assert_eq!(changed.mark, '~');
    assert!(changed.rest.starts_with(" =\"shown\""), "{shown}");
    assert!(
        shown
            .lines()
            .any(|l| l == format!("removed {}", gone.element_ref)),
        "{shown}"
    );
    // Read back from the page: the same refs show the same state.
    let now = lean.observed(added.element_ref);
    assert_eq!(
        (now.name.as_str(), now.role.as_deref()),
        ("Added one", Some("button"))
    );
    assert!(
        lean.observed(note.element_ref)
            .rest
            .starts_with(" =\"shown\"")
    );
    lean.assert_refs_resolve(&diff, "the click's diff");
    // The added button is usable with the ref the diff gave.
    let (clicked, _) = lean.text("browser_click", json!({"ref": added.element_ref}));
    assert!(!clicked.starts_with("mismatch"), "{clicked}");

    // A dialog the action opened is stated with how to answer it.
    let (asked, _) = lean.text(
        "browser_click",
        json!({"ref": by_name("Confirm").element_ref}),
    );
    let dialog = asked
        .lines()
        .find(|l| l.starts_with("dialog confirm \"Sure?\" is waiting"))
        .unwrap_or_else(|| panic!("no dialog stated in:\n{asked}"));
    let dialog_id = dialog.rsplit(' ').next().unwrap();
    lean.text(
        "browser_dialogs_respond",
        json!({"dialogId": dialog_id, "action": "accept"}),
    );
    let (answer, _) = lean.text("browser_read", json!({"selector": "#answer"}));
    assert_eq!(answer, "yes");

    // A popup the action opened is stated with its tab.
    let (popped, _) = lean.text(
        "browser_click",
        json!({"ref": by_name("Popup").element_ref}),
    );
    assert!(
        popped.lines().next().unwrap().contains("popup_opened"),
        "{popped}"
    );
    assert!(
        popped.lines().any(|l| l.starts_with("popup target:")),
        "{popped}"
    );

    // A navigation is stated and the new document shown whole, with refs that resolve.
    let (navigated, _) = lean.text(
        "browser_click",
        json!({"ref": by_name("Next page").element_ref}),
    );
    let mut said = navigated.lines();
    let evidence = said.next().unwrap();
    assert!(evidence.contains("navigation"), "{navigated}");
    let header = said.next().unwrap();
    assert!(
        header.starts_with(&format!("\"next\" {}", shared.fixtures.url("/page/next"))),
        "{navigated}"
    );
    let fresh = lean_lines(&navigated);
    assert!(
        fresh
            .iter()
            .any(|l| l.role.as_deref() == Some("heading") && l.name == "next" && l.mark == ' '),
        "{navigated}"
    );
    lean.assert_refs_resolve(&fresh, "the new document");
    lean.end();
}
