//! Drives the real `browser-pilot-conformance` executable against the
//! independent Python fake in `tests/fixtures/fake_bridge.py`, one
//! misbehaviour per `FAKE_MODE`, and asserts the exit status, which check
//! failed with which code, and that the report leaks nothing.
//!
//! These tests never start a browser and never import the runner's modules:
//! they see the runner exactly as CI or an integrator does.

use std::process::{Command, Output};

use serde_json::Value;

const RUNNER: &str = env!("CARGO_BIN_EXE_browser-pilot-conformance");
const MAIN: &str = env!("CARGO_BIN_EXE_browser-pilot");
const FAKE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/fake_bridge.py");

/// Every check, in report order.
const CHECKS: [&str; 8] = [
    "initialize",
    "tools_list",
    "workspace_lease_lifecycle",
    "managed_target",
    "observation",
    "screenshot_artifact",
    "event_polling",
    "cleanup",
];

/// Opaque id prefixes that must never start a word in the report.
const ID_PREFIXES: [&str; 6] = [
    "workspace:",
    "lease:",
    "target:",
    "command:",
    "observation:",
    "artifact:",
];

/// Strings the fake plants in responses and stderr; none may reach the report.
const LEAK_BAIT: [&str; 5] = [
    "SECRET",
    "bank.example",
    "/home",
    "/tmp",
    "fake-bridge-artifacts",
];

struct Run {
    status: i32,
    stdout: String,
    stderr: String,
    report: Value,
}

fn finish(output: Output) -> Run {
    let stdout = String::from_utf8(output.stdout).expect("stdout is UTF-8");
    let stderr = String::from_utf8(output.stderr).expect("stderr is UTF-8");
    let report = match stdout.trim().is_empty() {
        true => Value::Null,
        false => serde_json::from_str(&stdout)
            .unwrap_or_else(|error| panic!("stdout is one JSON report ({error}): {stdout}")),
    };
    Run {
        status: output.status.code().expect("runner exited normally"),
        stdout,
        stderr,
        report,
    }
}

/// Runs the runner with `runner_args`, then `-- python3 fake_bridge.py`.
fn run_fake(mode: &str, runner_args: &[&str]) -> Run {
    let output = Command::new(RUNNER)
        .args(runner_args)
        .args(["--", "python3", FAKE])
        .env("FAKE_MODE", mode)
        .output()
        .expect("runner starts");
    finish(output)
}

fn check<'a>(run: &'a Run, name: &str) -> &'a Value {
    run.report["checks"]
        .as_array()
        .expect("checks array")
        .iter()
        .find(|check| check["name"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {}", run.stdout))
}

fn assert_status(run: &Run, name: &str, status: &str) {
    assert_eq!(
        check(run, name)["status"],
        status,
        "{name} in {}",
        run.stdout
    );
}

/// Asserts exit 1 with `name` failed with `code` and everything else not failed.
fn assert_failed_only(run: &Run, name: &str, code: &str) {
    assert_eq!(run.status, 1, "stderr: {}", run.stderr);
    assert_eq!(run.report["passed"], false);
    assert_eq!(run.report["counts"]["failed"], 1, "{}", run.stdout);
    assert_status(run, name, "failed");
    assert_eq!(check(run, name)["error"]["code"], code, "{}", run.stdout);
}

/// Whether `prefix` occurs in `text` other than as the tail of a longer word
/// (so `release:` is not mistaken for a `lease:` id).
fn has_id_prefix(text: &str, prefix: &str) -> bool {
    text.match_indices(prefix).any(|(index, _)| {
        !text[..index]
            .chars()
            .next_back()
            .is_some_and(|previous| previous.is_ascii_alphabetic())
    })
}

fn assert_no_leaks(run: &Run) {
    for prefix in ID_PREFIXES {
        assert!(
            !has_id_prefix(&run.stdout, prefix),
            "report has a {prefix} id: {}",
            run.stdout
        );
    }
    for bait in LEAK_BAIT {
        assert!(
            !run.stdout.contains(bait),
            "report contains {bait:?}: {}",
            run.stdout
        );
    }
    assert!(
        !run.stderr.contains("SECRET"),
        "summary leaks: {}",
        run.stderr
    );
}

#[test]
fn passing_fake_passes_every_check() {
    let run = run_fake("pass", &[]);
    assert_eq!(run.status, 0, "stderr: {}", run.stderr);
    for name in CHECKS {
        assert_status(&run, name, "passed");
    }
    let report = &run.report;
    assert_eq!(report["reportVersion"], 1);
    assert_eq!(report["runner"]["name"], "browser-pilot-conformance");
    assert!(report["runner"]["version"].is_string());
    assert_eq!(report["executable"]["version"], "0.0.0-fake");
    assert_eq!(report["executable"]["serviceVersion"], "0.0.0-fake-service");
    assert_eq!(report["executable"]["protocol"], "1.1");
    assert_eq!(report["passed"], true);
    assert_eq!(report["counts"]["passed"], 8);
    assert_eq!(report["counts"]["failed"], 0);
    assert_eq!(report["counts"]["skipped"], 0);
    assert!(report["durationMs"].is_u64());
    assert!(report["eventNotifications"].as_u64() > Some(0));
    for check in report["checks"].as_array().expect("checks") {
        assert!(check["durationMs"].is_u64());
        assert!(check.get("error").is_none() && check.get("reason").is_none());
    }
    let names: Vec<&str> = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter_map(|check| check["name"].as_str())
        .collect();
    assert_eq!(names, CHECKS);
    let summary: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(summary.len(), CHECKS.len() + 1, "{}", run.stderr);
    assert!(
        summary[..CHECKS.len()]
            .iter()
            .all(|line| line.starts_with("PASS"))
    );
    assert!(summary[CHECKS.len()].starts_with("conformance passed"));
    assert_no_leaks(&run);
}

/// The contract's form: `browser-pilot conformance -- COMMAND ARGS...`, with `--` right after
/// the subcommand and the command's own `--flags` passed through untouched.
#[test]
fn main_binary_takes_the_command_right_after_the_separator() {
    let output = Command::new(MAIN)
        .args(["conformance", "--", "python3", FAKE, "bridge", "--stdio"])
        .env("FAKE_MODE", "pass")
        .output()
        .expect("runner starts");
    let run = finish(output);
    assert_eq!(run.status, 0, "stderr: {}", run.stderr);
    for name in CHECKS {
        assert_status(&run, name, "passed");
    }
    // Runner options before the separator still parse, and stay the runner's.
    let output = Command::new(MAIN)
        .args(["conformance", "--timeout-ms", "0", "--", "python3", FAKE])
        .output()
        .expect("runner starts");
    assert_eq!(output.status.code(), Some(2), "timeout 0 is out of range");
}

#[test]
fn fake_without_browser_tools_fails_rather_than_skips() {
    let run = run_fake("no_browser_tools", &[]);
    assert_eq!(run.status, 1, "stderr: {}", run.stderr);
    for name in [
        "initialize",
        "tools_list",
        "workspace_lease_lifecycle",
        "event_polling",
        "cleanup",
    ] {
        assert_status(&run, name, "passed");
    }
    assert_status(&run, "managed_target", "failed");
    let failure = &check(&run, "managed_target")["error"];
    assert_eq!(failure["code"], "tool_not_advertised", "{}", run.stdout);
    assert!(
        failure["message"]
            .as_str()
            .is_some_and(|message| message.contains("browser.open")),
        "{failure}"
    );
    for name in ["observation", "screenshot_artifact"] {
        assert_status(&run, name, "skipped");
        assert_eq!(
            check(&run, name)["reason"],
            "depends on failed managed_target"
        );
    }
    assert_eq!(run.report["passed"], false);
    assert_eq!(run.report["counts"]["failed"], 1);
}

#[test]
fn bad_initialize_shape_fails_initialize_and_skips_the_rest() {
    let run = run_fake("bad_initialize", &[]);
    assert_failed_only(&run, "initialize", "invalid_result");
    let message = check(&run, "initialize")["error"]["message"]
        .as_str()
        .unwrap_or("");
    assert!(
        message.contains("limits.service.eventJournalSize"),
        "{message}"
    );
    for name in &CHECKS[1..] {
        assert_status(&run, name, "skipped");
        assert_eq!(check(&run, name)["reason"], "depends on failed initialize");
    }
    assert_eq!(run.report["executable"]["version"], Value::Null);
}

#[test]
fn granted_capability_outside_request_fails_initialize() {
    let run = run_fake("extra_grant", &[]);
    assert_failed_only(&run, "initialize", "capability_mismatch");
}

#[test]
fn missing_tools_fail_tools_list_and_still_clean_up() {
    let run = run_fake("missing_tools", &[]);
    assert_failed_only(&run, "tools_list", "invalid_result");
    assert_eq!(
        check(&run, "managed_target")["reason"],
        "depends on failed tools_list"
    );
    assert_status(&run, "workspace_lease_lifecycle", "passed");
    assert_status(&run, "cleanup", "passed");
}

#[test]
fn duplicate_tool_names_fail_tools_list() {
    let run = run_fake("duplicate_tools", &[]);
    assert_failed_only(&run, "tools_list", "duplicate_tool");
}

#[test]
fn lease_heartbeat_error_fails_lifecycle_with_its_code() {
    let run = run_fake("heartbeat_error", &[]);
    assert_failed_only(&run, "workspace_lease_lifecycle", "lease_expired");
    for name in ["managed_target", "event_polling"] {
        assert_eq!(
            check(&run, name)["reason"],
            "depends on failed workspace_lease_lifecycle"
        );
    }
    // Best-effort cleanup still releases the Lease and Workspace it created.
    assert_status(&run, "cleanup", "passed");
    assert_no_leaks(&run);
}

#[test]
fn tabs_list_without_the_target_fails_managed_target() {
    let run = run_fake("tabs_without_target", &[]);
    assert_failed_only(&run, "managed_target", "target_not_listed");
    for name in ["observation", "screenshot_artifact"] {
        assert_eq!(
            check(&run, name)["reason"],
            "depends on failed managed_target"
        );
    }
    assert_status(&run, "event_polling", "passed");
    assert_status(&run, "cleanup", "passed");
    assert_no_leaks(&run);
}

#[test]
fn no_ready_browser_fails_with_the_reported_remediation() {
    let run = run_fake("no_ready_browser", &[]);
    assert_failed_only(&run, "managed_target", "browser_not_ready");
    let message = check(&run, "managed_target")["error"]["message"]
        .as_str()
        .unwrap_or("");
    assert!(
        message.contains("launch_browser: start it with browser-pilot browser launch"),
        "{message}"
    );
    assert_no_leaks(&run);
}

#[cfg(unix)]
#[test]
fn world_readable_artifact_fails_screenshot_artifact() {
    let run = run_fake("world_readable_artifact", &[]);
    assert_failed_only(&run, "screenshot_artifact", "artifact_unprotected");
    assert_status(&run, "cleanup", "passed");
    assert_no_leaks(&run);
}

#[test]
fn artifact_readable_after_release_fails_screenshot_artifact() {
    let run = run_fake("artifact_survives_release", &[]);
    assert_failed_only(&run, "screenshot_artifact", "artifact_still_available");
}

#[test]
fn non_increasing_event_sequence_fails_event_polling() {
    let run = run_fake("non_increasing_events", &[]);
    assert_failed_only(&run, "event_polling", "sequence_not_increasing");
    assert_status(&run, "cleanup", "passed");
}

#[test]
fn workspace_double_release_error_fails_cleanup() {
    let run = run_fake("double_release_error", &[]);
    assert_failed_only(&run, "cleanup", "workspace_not_found");
    let message = check(&run, "cleanup")["error"]["message"]
        .as_str()
        .unwrap_or("");
    assert!(
        message.starts_with("second call: workspaces/release"),
        "{message}"
    );
    assert_no_leaks(&run);
}

#[test]
fn non_json_stdout_is_a_protocol_error() {
    let run = run_fake("garbage_stdout", &[]);
    assert_failed_only(&run, "tools_list", "protocol_error");
}

#[test]
fn hung_bridge_times_out_skips_the_rest_and_is_killed() {
    let pid_dir = tempfile::tempdir().expect("temp dir");
    let pid_file = pid_dir.path().join("pid");
    let output = Command::new(RUNNER)
        // Long enough for a slow interpreter start (a pyenv shim takes ~600 ms under load) to
        // write the pid file before the runner gives up on the first request.
        .args(["--timeout-ms", "4000", "--", "python3", FAKE])
        .env("FAKE_MODE", "hang")
        .env("FAKE_PID_FILE", &pid_file)
        .output()
        .expect("runner starts");
    let run = finish(output);
    // The fake hangs on its first request, so a slow interpreter start
    // cannot change which check times out.
    assert_failed_only(&run, "initialize", "timeout");
    for name in &CHECKS[1..] {
        assert_eq!(
            check(&run, name)["reason"],
            "bridge unavailable after failed initialize"
        );
    }
    let pid = std::fs::read_to_string(&pid_file).expect("fake wrote its pid");
    assert_process_gone(pid.trim());
}

#[cfg(target_os = "linux")]
fn assert_process_gone(pid: &str) {
    let proc_dir = std::path::Path::new("/proc").join(pid);
    // The runner reaps its child, so not even a zombie entry remains.
    assert!(!proc_dir.exists(), "fake bridge {pid} still exists");
}

#[cfg(not(target_os = "linux"))]
fn assert_process_gone(pid: &str) {
    assert!(!pid.is_empty());
}

#[test]
fn bridge_exiting_early_fails_with_bridge_exited() {
    let run = run_fake("exit_early", &[]);
    assert_failed_only(&run, "workspace_lease_lifecycle", "bridge_exited");
    assert_status(&run, "tools_list", "passed");
    assert_eq!(
        check(&run, "cleanup")["reason"],
        "bridge unavailable after failed workspace_lease_lifecycle"
    );
}

#[test]
fn unstartable_command_fails_initialize() {
    let output = Command::new(RUNNER)
        .args(["--", "/nonexistent/browser-pilot", "bridge", "--stdio"])
        .output()
        .expect("runner starts");
    let run = finish(output);
    assert_failed_only(&run, "initialize", "spawn_failed");
    assert!(!run.stdout.contains("nonexistent"));
}

#[test]
fn invalid_runner_arguments_exit_two() {
    for args in [
        &["--timeout-ms", "soon", "--", "python3", FAKE][..],
        &["--timeout-ms", "0", "--", "python3", FAKE][..],
        &["--no-such-flag"][..],
        &["python3", FAKE][..],
    ] {
        let output = Command::new(RUNNER)
            .args(args)
            .output()
            .expect("runner starts");
        let run = finish(output);
        assert_eq!(run.status, 2, "{args:?}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{args:?} printed a report");
        assert!(run.stderr.contains("error:"), "{args:?}: {}", run.stderr);
    }
}

#[test]
fn report_file_holds_the_same_json_as_stdout() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("report.json");
    let path_text = path.to_str().expect("UTF-8 temp path");
    let run = run_fake("tabs_without_target", &["--report", path_text]);
    assert_eq!(run.status, 1);
    let written = std::fs::read_to_string(&path).expect("report file written");
    assert_eq!(written, run.stdout);
    assert!(written.starts_with("{\"reportVersion\":1,"));
}

#[test]
fn unwritable_report_path_exits_two() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("missing-dir").join("report.json");
    let run = run_fake(
        "pass",
        &["--report", path.to_str().expect("UTF-8 temp path")],
    );
    assert_eq!(run.status, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--report"));
    // Checked before anything runs: no bridge was started and no report printed.
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(!run.stderr.contains("conformance "), "{}", run.stderr);
    // A directory is no report file either, whatever the run would have found.
    let run = run_fake(
        "tabs_without_target",
        &["--report", dir.path().to_str().expect("UTF-8 temp path")],
    );
    assert_eq!(run.status, 2, "{}", run.stderr);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
}

#[cfg(unix)]
#[test]
fn launch_browser_runs_the_command_executable_first() {
    let passing = Command::new(RUNNER)
        .args(["--launch-browser", "--", FAKE])
        .env("FAKE_MODE", "pass")
        .output()
        .expect("runner starts");
    let run = finish(passing);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert_eq!(run.report["checks"][0]["name"], "launch_browser");
    assert_eq!(run.report["checks"][0]["status"], "passed");
    assert_eq!(run.report["counts"]["passed"], 9);

    let failing = Command::new(RUNNER)
        .args(["--launch-browser", "--", FAKE])
        .env("FAKE_MODE", "pass")
        .env("FAKE_LAUNCH_STATUS", "3")
        .output()
        .expect("runner starts");
    let run = finish(failing);
    assert_failed_only(&run, "launch_browser", "launch_failed");
    assert!(
        run.stderr.contains("--launch-browser failed"),
        "{}",
        run.stderr
    );
    assert!(
        check(&run, "launch_browser")["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("status 3"))
    );
    for name in CHECKS {
        assert_eq!(
            check(&run, name)["reason"],
            "depends on failed launch_browser"
        );
    }
}
