//! `browser-pilot --version --json`: the machine-readable version that a release's
//! `manifest.json` repeats (scripts/release reads it from the built executable). Drives the
//! real executable; no browser, no Broker.

use std::process::Command;

use serde_json::{Value, json};

const MAIN: &str = env!("CARGO_BIN_EXE_browser-pilot");

fn run(args: &[&str]) -> (i32, String) {
    let output = Command::new(MAIN).args(args).output().expect("runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).expect("utf-8"),
    )
}

#[test]
fn version_json_names_the_version_and_every_protocol_spoken() {
    let (code, stdout) = run(&["--version", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(stdout.lines().count(), 1, "one JSON line: {stdout}");
    let version: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(
        version,
        json!({
            "name": "browser-pilot",
            "version": env!("CARGO_PKG_VERSION"),
            "service": {"version": env!("CARGO_PKG_VERSION")},
            "protocols": [{"major": 1, "minor": 0}, {"major": 1, "minor": 1}],
            "ipcVersion": 1,
        })
    );
    let (code, swapped) = run(&["--json", "--version"]);
    assert_eq!((code, swapped), (0, stdout), "either order");
}

#[test]
fn plain_version_stays_human_and_json_alone_is_an_error() {
    let (code, stdout) = run(&["--version"]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout.trim(),
        format!("browser-pilot {}", env!("CARGO_PKG_VERSION"))
    );
    let (code, stdout) = run(&["--json"]);
    assert_eq!(
        (code, stdout.as_str()),
        (2, ""),
        "usage error, nothing on stdout"
    );
}
