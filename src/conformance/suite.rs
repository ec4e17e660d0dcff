//! The check order, the dependencies between checks, and their timing: runs
//! the optional browser launch, spawns the bridge, runs each check whose
//! prerequisites passed, and turns the outcomes into a `Report`.
//!
//! It must not know what a check sends or expects (that is `checks`), nor how
//! the report is rendered (that is `report`).

use std::ffi::OsString;
use std::io;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::checks::{self, Failure, Outcome, Session};
use super::client::Client;
use super::codes::RunnerCode;
use super::report::{CheckError, CheckResult, ExecutableInfo, Report, Status};

/// How often the runner checks whether `browser launch` has finished.
const LAUNCH_POLL_INTERVAL: Duration = Duration::from_millis(50);

/// How long a bridge that did not get to `shutdown` (but still answers) may
/// take to exit on stdin EOF before it is killed: EOF is how a host that
/// gives up disconnects, and a short wait lets it release its Leases.
const EOF_EXIT_GRACE: Duration = Duration::from_secs(2);

/// Bytes of randomness in the per-run client instance id.
const INSTANCE_ID_RANDOM_BYTES: usize = 16;

/// The name of the optional browser-launch step in the report.
pub const LAUNCH_BROWSER: &str = "launch_browser";

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The bridge command: program first, then its exact arguments.
    pub program: OsString,
    pub args: Vec<OsString>,
    pub timeout: Duration,
    /// Run `<program> browser launch --headless` first.
    pub launch_browser: bool,
    /// The browser candidate the Workspace is created on (`None`: the default binding).
    pub browser_id: Option<String>,
}

type CheckFn = fn(&mut Session) -> Result<Outcome, Failure>;

/// One check and the checks that must have passed before it runs.
struct CheckSpec {
    name: &'static str,
    depends_on: &'static [&'static str],
    run: CheckFn,
}

/// Every check, in the order they run.
const CHECKS: [CheckSpec; 8] = [
    CheckSpec {
        name: "initialize",
        depends_on: &[],
        run: checks::initialize,
    },
    CheckSpec {
        name: "tools_list",
        depends_on: &["initialize"],
        run: checks::tools_list,
    },
    CheckSpec {
        name: "workspace_lease_lifecycle",
        depends_on: &["initialize"],
        run: checks::workspace_lease_lifecycle,
    },
    CheckSpec {
        name: "managed_target",
        depends_on: &["tools_list", "workspace_lease_lifecycle"],
        run: checks::managed_target,
    },
    CheckSpec {
        name: "observation",
        depends_on: &["managed_target"],
        run: checks::observation,
    },
    CheckSpec {
        name: "screenshot_artifact",
        depends_on: &["managed_target"],
        run: checks::screenshot_artifact,
    },
    CheckSpec {
        name: "event_polling",
        depends_on: &["workspace_lease_lifecycle"],
        run: checks::event_polling,
    },
    CheckSpec {
        name: "cleanup",
        depends_on: &["initialize"],
        run: checks::cleanup,
    },
];

fn failed(name: &'static str, duration: Duration, code: &str, message: String) -> CheckResult {
    CheckResult {
        name,
        status: Status::Failed,
        duration,
        error: Some(CheckError {
            code: Some(code.to_owned()),
            message,
        }),
        reason: None,
    }
}

fn skipped(name: &'static str, reason: String) -> CheckResult {
    CheckResult {
        name,
        status: Status::Skipped,
        duration: Duration::ZERO,
        error: None,
        reason: Some(reason),
    }
}

/// Every check skipped for the same reason.
fn skip_all(reason: &str) -> Vec<CheckResult> {
    CHECKS
        .iter()
        .map(|spec| skipped(spec.name, reason.to_owned()))
        .collect()
}

/// A fresh, unguessable client instance id for this run.
fn new_instance_id() -> String {
    use ring::rand::SecureRandom;
    let mut bytes = [0_u8; INSTANCE_ID_RANDOM_BYTES];
    let random = ring::rand::SystemRandom::new();
    let hex: String = match random.fill(&mut bytes) {
        Ok(()) => bytes.iter().map(|byte| format!("{byte:02x}")).collect(),
        // Uniqueness, not secrecy, is what matters here.
        Err(_) => format!(
            "{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.as_nanos())
        ),
    };
    format!("conformance:{hex}")
}

/// Runs `<program> browser launch --headless` and waits for it to exit 0.
fn launch_browser(plan: &Plan) -> Result<(), (RunnerCode, String)> {
    let mut child = Command::new(&plan.program)
        .args(["browser", "launch", "--headless"])
        .stdin(Stdio::null())
        // Stdout is reserved for the report; launch diagnostics go to the
        // runner's stderr, never into the report.
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|error| {
            (
                RunnerCode::LaunchFailed,
                format!(
                    "could not start `browser launch --headless`: {}",
                    error.kind()
                ),
            )
        })?;
    let deadline = Instant::now() + plan.timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                return Err((
                    RunnerCode::LaunchFailed,
                    format!(
                        "`browser launch --headless` exited with {}",
                        status
                            .code()
                            .map_or("a signal".to_owned(), |code| format!("status {code}"))
                    ),
                ));
            }
            Ok(None) if Instant::now() < deadline => thread::sleep(LAUNCH_POLL_INTERVAL),
            Ok(None) => {
                // Ignored: it may have exited just now; either way it is reaped.
                let _ = child.kill();
                let _ = child.wait();
                return Err((
                    RunnerCode::Timeout,
                    "`browser launch --headless` did not finish before the timeout".to_owned(),
                ));
            }
            Err(error) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err((RunnerCode::LaunchFailed, error.kind().to_string()));
            }
        }
    }
}

/// Runs the whole plan and reports on it.
pub fn run(plan: &Plan) -> Report {
    let started = Instant::now();
    let mut results = Vec::new();
    if plan.launch_browser {
        let launch_started = Instant::now();
        match launch_browser(plan) {
            Ok(()) => results.push(CheckResult {
                name: LAUNCH_BROWSER,
                status: Status::Passed,
                duration: launch_started.elapsed(),
                error: None,
                reason: None,
            }),
            Err((code, message)) => {
                results.push(failed(
                    LAUNCH_BROWSER,
                    launch_started.elapsed(),
                    code.as_str(),
                    message,
                ));
                results.extend(skip_all("depends on failed launch_browser"));
                return finish(results, ExecutableInfo::default(), 0, started);
            }
        }
    }
    let spawn_started = Instant::now();
    let client = match Client::spawn(&plan.program, &plan.args, plan.timeout) {
        Ok(client) => client,
        Err(error) => {
            results.extend(spawn_failed(&error, spawn_started.elapsed()));
            return finish(results, ExecutableInfo::default(), 0, started);
        }
    };
    let timeout_ms = u64::try_from(plan.timeout.as_millis()).unwrap_or(u64::MAX);
    let mut session = Session::new(client, timeout_ms, new_instance_id());
    session.browser_id = plan.browser_id.clone();
    let (check_results, bridge_lost) = run_checks(&mut session);
    results.extend(check_results);
    let grace = match bridge_lost {
        true => Duration::ZERO,
        false => EOF_EXIT_GRACE.min(plan.timeout),
    };
    checks::abandon(&mut session, grace);
    let executable = match &session.negotiated {
        Some(negotiated) => ExecutableInfo {
            version: Some(negotiated.executable_version.clone()),
            service_version: Some(negotiated.service_version.clone()),
            protocol: Some(format!(
                "{}.{}",
                negotiated.protocol.0, negotiated.protocol.1
            )),
        },
        None => ExecutableInfo::default(),
    };
    let n_event_notifications = session.n_event_notifications();
    // Dropping the session kills a child that is still running.
    drop(session);
    finish(results, executable, n_event_notifications, started)
}

fn spawn_failed(error: &io::Error, duration: Duration) -> Vec<CheckResult> {
    let mut results = vec![failed(
        CHECKS[0].name,
        duration,
        RunnerCode::SpawnFailed.as_str(),
        format!("could not start the bridge command: {}", error.kind()),
    )];
    results.extend(
        CHECKS[1..]
            .iter()
            .map(|spec| skipped(spec.name, format!("depends on failed {}", CHECKS[0].name))),
    );
    results
}

/// Why a check cannot run, and the failed check at the root of its
/// dependency chain (`None` when a dependency was skipped for its own reason).
fn blocker(
    spec: &CheckSpec,
    results: &[CheckResult],
    failed_roots: &[(&'static str, &'static str)],
) -> Option<(String, Option<&'static str>)> {
    spec.depends_on.iter().find_map(|dependency| {
        let root = failed_roots
            .iter()
            .find(|(name, _)| name == dependency)
            .map(|(_, root)| *root);
        let status = results
            .iter()
            .find(|result| result.name == *dependency)
            .map(|result| result.status);
        match (root, status) {
            (Some(root), _) => Some((format!("depends on failed {root}"), Some(root))),
            (None, Some(Status::Passed)) => None,
            (None, _) => Some((format!("depends on skipped {dependency}"), None)),
        }
    })
}

/// Runs every check in order; also says whether the bridge hung or exited.
fn run_checks(session: &mut Session) -> (Vec<CheckResult>, bool) {
    let mut results: Vec<CheckResult> = Vec::new();
    // For each failed or failure-blocked check, the failed check at the root.
    let mut failed_roots: Vec<(&'static str, &'static str)> = Vec::new();
    let mut bridge_lost_at: Option<&'static str> = None;
    for spec in &CHECKS {
        if let Some(lost_at) = bridge_lost_at {
            results.push(skipped(
                spec.name,
                format!("bridge unavailable after failed {lost_at}"),
            ));
            continue;
        }
        if let Some((reason, root)) = blocker(spec, &results, &failed_roots) {
            if let Some(root) = root {
                failed_roots.push((spec.name, root));
            }
            results.push(skipped(spec.name, reason));
            continue;
        }
        let check_started = Instant::now();
        let outcome = (spec.run)(session);
        let duration = check_started.elapsed();
        results.push(match outcome {
            Ok(Outcome::Passed) => CheckResult {
                name: spec.name,
                status: Status::Passed,
                duration,
                error: None,
                reason: None,
            },
            Err(failure) => {
                if failure.fatal {
                    bridge_lost_at = Some(spec.name);
                }
                failed_roots.push((spec.name, spec.name));
                failed(spec.name, duration, &failure.code, failure.message)
            }
        });
    }
    (results, bridge_lost_at.is_some())
}

fn finish(
    checks: Vec<CheckResult>,
    executable: ExecutableInfo,
    n_event_notifications: u64,
    started: Instant,
) -> Report {
    Report {
        executable,
        checks,
        duration: started.elapsed(),
        n_event_notifications,
    }
}
