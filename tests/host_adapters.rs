//! Process tests of the host adapters against a real headless Chromium (one per test binary,
//! shared by the tests that run at the same time) and fixture pages on 127.0.0.1:
//! `browser-pilot mcp` driven by the official MCP TypeScript SDK client; the adapter library's
//! transport-loss, cursor-recovery, Lease-renewal and no-state-files guarantees; and both
//! reference adapters in `examples/adapters/`.

mod support;

use std::collections::BTreeMap;
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

/// One Chromium and one fixture server for every test of this binary running at the same time.
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
    spec.env.push(("BROWSER_PILOT_HOME".into(), home.path().into()));
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
        &["debug", "sql", &format!("SELECT count(*) AS n FROM {table}")],
    );
    assert_eq!(code, 0, "debug sql: {err}");
    serde_json::from_str::<Value>(out.trim()).unwrap()["n"]
        .as_i64()
        .unwrap()
}

/// The SDK's directory: `BROWSER_PILOT_MCP_SDK_DIR` (scripts/test installs it there), else a
/// scratch install with npm. A missing node or npm is a loud failure with the install command.
fn mcp_sdk_dir() -> (PathBuf, Option<tempfile::TempDir>) {
    if let Some(dir) = std::env::var_os("BROWSER_PILOT_MCP_SDK_DIR") {
        let dir = PathBuf::from(dir);
        assert!(
            dir.join("node_modules/@modelcontextprotocol/sdk/package.json")
                .is_file(),
            "BROWSER_PILOT_MCP_SDK_DIR={} has no @modelcontextprotocol/sdk",
            dir.display()
        );
        return (dir, None);
    }
    let scratch = tempfile::tempdir().unwrap();
    let status = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
        .arg(scratch.path())
        .arg(MCP_SDK)
        .status()
        .expect("npm is required: sudo apt-get install -y nodejs npm");
    assert!(status.success(), "npm install {MCP_SDK} failed");
    (scratch.path().to_owned(), Some(scratch))
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
        wait_until(Duration::from_secs(10), || debug_count(&home, "workspaces") == 0),
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
