//! Process tests of `browser-pilot browser launch|stop` against the real
//! headless Chromium, each with its own temporary `BROWSER_PILOT_HOME`.

use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn require_chromium() {
    let path = std::env::var_os("BROWSER_PILOT_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(
        path.is_file(),
        "Chromium not found at {}: install it with `sudo apt-get install chromium` \
         (Debian/Ubuntu) or set BROWSER_PILOT_CHROMIUM",
        path.display()
    );
}

fn run(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_browser-pilot"))
        .args(args)
        .env("BROWSER_PILOT_HOME", home)
        .output()
        .expect("run browser-pilot")
}

fn json_stdout(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("stdout is one json value")
}

fn profile_dir(home: &Path) -> PathBuf {
    home.join("browser").join("managed-profile")
}

fn active_port(home: &Path) -> (u16, String) {
    let text = std::fs::read_to_string(profile_dir(home).join("DevToolsActivePort")).unwrap();
    let mut lines = text.lines();
    let port = lines.next().unwrap().parse().unwrap();
    (port, lines.next().unwrap().to_owned())
}

fn port_is_open(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok()
}

/// Stops the managed browser even when an assertion failed midway.
struct StopOnDrop<'a>(&'a Path);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        let _ = run(self.0, &["browser", "stop"]);
    }
}

#[test]
fn launch_is_idempotent_and_stop_closes_the_browser() {
    require_chromium();
    let home_dir = tempfile::tempdir().unwrap();
    let home = home_dir.path().join("bp-home");
    // A stale file from an earlier run must not be mistaken for a browser.
    std::fs::create_dir_all(profile_dir(&home)).unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let stale_port = closed.local_addr().unwrap().port();
    drop(closed);
    std::fs::write(
        profile_dir(&home).join("DevToolsActivePort"),
        format!("{stale_port}\n/devtools/browser/stale"),
    )
    .unwrap();

    let _stop = StopOnDrop(&home);
    let launched = json_stdout(&run(&home, &["browser", "launch", "--headless"]));
    assert_eq!(launched["managed"], true);
    assert_eq!(launched["channel"], "managed");
    assert_eq!(launched["state"], "ready");
    assert_eq!(launched["processState"], "running");
    assert_eq!(launched["remoteDebuggingState"], "enabled");
    assert_eq!(launched["authorizationState"], "unknown");
    assert!(launched.get("remediation").is_none());
    let id = launched["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("browser:"), "{id}");

    let (port, path) = active_port(&home);
    assert_ne!(port, stale_port);
    assert!(path.starts_with("/devtools/browser/"));
    assert!(port_is_open(port));
    let text = launched.to_string();
    assert!(
        !text.contains(&port.to_string()) && !text.contains(&path),
        "{text}"
    );
    for dir in [home.join("browser"), profile_dir(&home)] {
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", dir.display());
    }

    // Launch again: same browser, same id, same port.
    let again = json_stdout(&run(&home, &["browser", "launch", "--headless"]));
    assert_eq!(again["id"], id.as_str());
    assert_eq!(active_port(&home), (port, path));

    let stopped = json_stdout(&run(&home, &["browser", "stop"]));
    assert_eq!(stopped["stopped"], true);
    assert!(!port_is_open(port));
    let stopped = json_stdout(&run(&home, &["browser", "stop"]));
    assert_eq!(stopped["stopped"], false);
}

#[test]
fn missing_executable_fails_with_the_install_command() {
    let home = tempfile::tempdir().unwrap();
    let output = run(
        home.path(),
        &[
            "browser",
            "launch",
            "--headless",
            "--executable",
            "/nonexistent/chromium",
        ],
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("apt-get install chromium"), "{stderr}");
    assert!(stderr.contains("/nonexistent/chromium"), "{stderr}");

    let output = Command::new(env!("CARGO_BIN_EXE_browser-pilot"))
        .args(["browser", "launch", "--headless"])
        .env("BROWSER_PILOT_HOME", home.path())
        .env("BROWSER_PILOT_CHROMIUM", "/nonexistent/chrome-from-env")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("BROWSER_PILOT_CHROMIUM"), "{stderr}");
    assert!(stderr.contains("apt-get install chromium"), "{stderr}");
}
