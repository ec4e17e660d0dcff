//! The versioned conformance report: check outcomes, counts, timings and
//! version metadata, rendered as JSON for stdout and `--report`, and as one
//! human line per check for stderr.
//!
//! Every free text passes through `scrub` here, at the only exit, so no
//! opaque id, Artifact path, URL or bridge stderr can reach either output.
//! It must not run checks or talk to the child.

use std::time::Duration;

use serde_json::{Value, json};

use super::scrub::{MAX_MESSAGE_CHARS, MAX_VERSION_CHARS, scrub};

/// The report format version; bumped only on an incompatible change.
pub const REPORT_VERSION: u64 = 1;

/// The runner's name in the report.
pub const RUNNER_NAME: &str = "browser-pilot-conformance";

/// Longest failure code kept; real codes are short snake_case words.
const MAX_CODE_CHARS: usize = 64;

/// How one check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Passed,
    Failed,
    Skipped,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Failed => "failed",
            Status::Skipped => "skipped",
        }
    }
}

/// Why a check failed, before scrubbing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckError {
    /// A stable snake_case code: the executable's `data.code` or the runner's own.
    pub code: Option<String>,
    /// Human text; may contain anything until scrubbed.
    pub message: String,
}

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResult {
    pub name: &'static str,
    pub status: Status,
    pub duration: Duration,
    pub error: Option<CheckError>,
    /// Why a check was skipped.
    pub reason: Option<String>,
}

/// Versions the executable reported in `initialize`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecutableInfo {
    pub version: Option<String>,
    pub service_version: Option<String>,
    /// The negotiated protocol as `major.minor`.
    pub protocol: Option<String>,
}

/// A whole run.
#[derive(Debug, Clone)]
pub struct Report {
    pub executable: ExecutableInfo,
    pub checks: Vec<CheckResult>,
    pub duration: Duration,
    pub n_event_notifications: u64,
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn scrubbed_version(version: Option<&String>) -> Node {
    Node::Leaf(match version {
        Some(version) => Value::String(scrub(version, MAX_VERSION_CHARS)),
        None => Value::Null,
    })
}

/// A JSON tree whose objects keep their keys in the order written, so the
/// report reads in the documented order (`serde_json::Value` sorts keys).
enum Node {
    Leaf(Value),
    Array(Vec<Node>),
    Object(Vec<(&'static str, Node)>),
}

impl Node {
    #[cfg(test)]
    fn into_value(self) -> Value {
        match self {
            Node::Leaf(value) => value,
            Node::Array(items) => Value::Array(items.into_iter().map(Node::into_value).collect()),
            Node::Object(fields) => Value::Object(
                fields
                    .into_iter()
                    .map(|(key, node)| (key.to_owned(), node.into_value()))
                    .collect(),
            ),
        }
    }

    fn render_into(&self, out: &mut String) {
        match self {
            Node::Leaf(value) => out.push_str(&value.to_string()),
            Node::Array(items) => {
                out.push('[');
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        out.push(',');
                    }
                    item.render_into(out);
                }
                out.push(']');
            }
            Node::Object(fields) => {
                out.push('{');
                for (index, (key, node)) in fields.iter().enumerate() {
                    if index > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::from(*key).to_string());
                    out.push(':');
                    node.render_into(out);
                }
                out.push('}');
            }
        }
    }
}

impl Report {
    fn count(&self, status: Status) -> usize {
        self.checks
            .iter()
            .filter(|check| check.status == status)
            .count()
    }

    /// Whether the executable conforms: nothing failed.
    pub fn passed(&self) -> bool {
        self.count(Status::Failed) == 0
    }

    /// The report document as a value, for assertions.
    #[cfg(test)]
    pub fn to_json(&self) -> Value {
        self.to_node().into_value()
    }

    /// The report as text, keys in documentation order, newline-terminated.
    pub fn render(&self) -> String {
        let mut text = String::new();
        self.to_node().render_into(&mut text);
        text.push('\n');
        text
    }

    fn to_node(&self) -> Node {
        let count = |status| Node::Leaf(json!(self.count(status)));
        Node::Object(vec![
            ("reportVersion", Node::Leaf(json!(REPORT_VERSION))),
            (
                "runner",
                Node::Object(vec![
                    ("name", Node::Leaf(json!(RUNNER_NAME))),
                    ("version", Node::Leaf(json!(env!("CARGO_PKG_VERSION")))),
                ]),
            ),
            (
                "executable",
                Node::Object(vec![
                    (
                        "version",
                        scrubbed_version(self.executable.version.as_ref()),
                    ),
                    (
                        "serviceVersion",
                        scrubbed_version(self.executable.service_version.as_ref()),
                    ),
                    (
                        "protocol",
                        scrubbed_version(self.executable.protocol.as_ref()),
                    ),
                ]),
            ),
            ("passed", Node::Leaf(json!(self.passed()))),
            (
                "counts",
                Node::Object(vec![
                    ("passed", count(Status::Passed)),
                    ("failed", count(Status::Failed)),
                    ("skipped", count(Status::Skipped)),
                ]),
            ),
            ("durationMs", Node::Leaf(json!(millis(self.duration)))),
            (
                "eventNotifications",
                Node::Leaf(json!(self.n_event_notifications)),
            ),
            (
                "checks",
                Node::Array(self.checks.iter().map(check_node).collect()),
            ),
        ])
    }

    /// One line per check and a closing verdict, for stderr.
    pub fn summary_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.checks.iter().map(summary_line).collect();
        lines.push(format!(
            "conformance {}: {} passed, {} failed, {} skipped in {} ms",
            match self.passed() {
                true => "passed",
                false => "FAILED",
            },
            self.count(Status::Passed),
            self.count(Status::Failed),
            self.count(Status::Skipped),
            millis(self.duration),
        ));
        lines
    }
}

fn check_node(check: &CheckResult) -> Node {
    let mut fields = vec![
        ("name", Node::Leaf(json!(check.name))),
        ("status", Node::Leaf(json!(check.status.as_str()))),
        ("durationMs", Node::Leaf(json!(millis(check.duration)))),
    ];
    if let Some(error) = &check.error {
        let mut error_fields = Vec::new();
        if let Some(code) = &error.code {
            error_fields.push(("code", Node::Leaf(json!(scrub(code, MAX_CODE_CHARS)))));
        }
        error_fields.push((
            "message",
            Node::Leaf(json!(scrub(&error.message, MAX_MESSAGE_CHARS))),
        ));
        fields.push(("error", Node::Object(error_fields)));
    }
    if let Some(reason) = &check.reason {
        fields.push((
            "reason",
            Node::Leaf(json!(scrub(reason, MAX_MESSAGE_CHARS))),
        ));
    }
    Node::Object(fields)
}

fn summary_line(check: &CheckResult) -> String {
    let head = format!(
        "{:<7} {} ({} ms)",
        match check.status {
            Status::Passed => "PASS",
            Status::Failed => "FAIL",
            Status::Skipped => "SKIP",
        },
        check.name,
        millis(check.duration)
    );
    match (&check.error, &check.reason) {
        (Some(error), _) => format!(
            "{head}: [{}] {}",
            scrub(error.code.as_deref().unwrap_or("error"), MAX_CODE_CHARS),
            scrub(&error.message, MAX_MESSAGE_CHARS)
        ),
        (None, Some(reason)) => format!("{head}: {}", scrub(reason, MAX_MESSAGE_CHARS)),
        (None, None) => head,
    }
}

#[cfg(test)]
mod tests {
    use super::{CheckError, CheckResult, ExecutableInfo, Report, Status};
    use std::time::Duration;

    fn sample() -> Report {
        Report {
            executable: ExecutableInfo {
                version: Some("1.2.3".to_owned()),
                service_version: Some("1.2.3".to_owned()),
                protocol: Some("1.1".to_owned()),
            },
            checks: vec![
                CheckResult {
                    name: "initialize",
                    status: Status::Passed,
                    duration: Duration::from_millis(5),
                    error: None,
                    reason: None,
                },
                CheckResult {
                    name: "managed_target",
                    status: Status::Failed,
                    duration: Duration::from_millis(7),
                    error: Some(CheckError {
                        code: Some("target_not_listed".to_owned()),
                        message: "target:abc missing at /tmp/x".to_owned(),
                    }),
                    reason: None,
                },
                CheckResult {
                    name: "observation",
                    status: Status::Skipped,
                    duration: Duration::ZERO,
                    error: None,
                    reason: Some("depends on failed managed_target".to_owned()),
                },
            ],
            duration: Duration::from_millis(20),
            n_event_notifications: 2,
        }
    }

    #[test]
    fn json_has_counts_verdict_and_scrubbed_errors() {
        let report = sample();
        let json = report.to_json();
        assert!(!report.passed());
        assert_eq!(json["reportVersion"], 1);
        assert_eq!(json["passed"], false);
        assert_eq!(json["counts"]["passed"], 1);
        assert_eq!(json["counts"]["failed"], 1);
        assert_eq!(json["counts"]["skipped"], 1);
        assert_eq!(json["executable"]["protocol"], "1.1");
        assert_eq!(json["checks"][1]["error"]["code"], "target_not_listed");
        assert_eq!(
            json["checks"][1]["error"]["message"],
            "<target-id> missing at <path>"
        );
        assert_eq!(
            json["checks"][2]["reason"],
            "depends on failed managed_target"
        );
        assert!(json["checks"][0].get("error").is_none());
    }

    #[test]
    fn rendered_text_keeps_documented_key_order_and_parses_back() {
        let report = sample();
        let text = report.render();
        assert!(text.starts_with("{\"reportVersion\":1,\"runner\":{\"name\":"));
        assert!(text.ends_with("}\n"));
        let check_start = text.find("{\"name\":\"managed_target\",\"status\":\"failed\"");
        assert!(check_start.is_some(), "{text}");
        let parsed: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(parsed, report.to_json());
    }

    #[test]
    fn summary_has_one_line_per_check_plus_verdict() {
        let lines = sample().summary_lines();
        assert_eq!(lines.len(), 4);
        assert!(lines[1].starts_with("FAIL"));
        assert!(lines[1].contains("[target_not_listed] <target-id> missing"));
        assert!(lines[3].starts_with("conformance FAILED"));
    }
}
