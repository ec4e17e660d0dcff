//! `browser.wait`: holds the tab's turn and looks again every `POLL_INTERVAL` until one
//! condition holds (a text is shown or gone, a CSS selector has a visible match or none, the
//! tab's URL matches a glob, no request in flight for `idleMs`), or the Command's deadline comes
//! near; then `deadline_exceeded` with the last state seen. Text and selector looks are page
//! scripts in the selected frame (`page::WaitProbe`); the URL is the browser's navigation
//! history; requests in flight are the tab's `session::activity` book. It sends no input and
//! writes nothing to the page.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::context::{TargetScope, ToolEnv};
use super::error::ToolError;
use super::manifest::{Gate, Lane, ToolDef, described, object, open_object};
use super::tab::{ControlledTab, base_result};
use crate::cdp::CdpError;
use crate::page::{PageError, ScriptErrorCode, WaitProbe, WaitSeen};
use crate::protocol::errors::{ErrorCode, RpcError};

/// Time between two looks: a condition is reported at most this late.
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// Default quiet time of `networkIdle` (the common "network idle" of test tools).
const DEFAULT_IDLE_MS: u64 = 500;
/// Part of the remaining time kept to answer: at least this much...
const MIN_RESERVE: Duration = Duration::from_millis(50);
/// ...at most this much, else a tenth of the remaining time.
const MAX_RESERVE: Duration = Duration::from_millis(500);
/// Bytes of a text, selector or URL pattern.
const MAX_PATTERN_BYTES: usize = 2_048;

pub fn defs() -> Vec<ToolDef> {
    let text = json!({"type": "string", "minLength": 1, "maxLength": 1024, "x-browser-pilot-sensitivity": ["browser_data"]});
    let input_schema = object(
        json!({
            "text": described(text.clone(), "Wait until this text is shown."),
            "textGone": described(text, "Wait until this text is no longer shown."),
            "selector": {"type": "string", "minLength": 1, "maxLength": 1024, "description": "Wait for this CSS selector to match visibly, or not."},
            "state": {"enum": ["visible", "hidden"], "description": "With selector: wait for a visible match, or none."},
            "url": {"type": "string", "minLength": 1, "maxLength": MAX_PATTERN_BYTES, "x-browser-pilot-sensitivity": ["browser_data"], "description": "Wait until the tab's URL matches this glob."},
            "networkIdle": {"const": true, "description": "Wait until no request is in flight."},
            "idleMs": {"type": "integer", "minimum": 0, "maximum": 10000, "description": "With networkIdle: quiet milliseconds required; default 500."},
        }),
        &[],
    );

    let state = open_object(
        json!({
            "textFound": {"type": "boolean"},
            "matched": {"type": "integer", "minimum": 0},
            "visible": {"type": "integer", "minimum": 0},
            "url": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
            "inFlight": {"type": "integer", "minimum": 0},
            "quietMs": {"type": "integer", "minimum": 0},
            "counting": {"type": "boolean"},
            "unreadable": {"type": "boolean"},
        }),
        &[],
    );
    vec![ToolDef {
        name: "browser.wait",
        description: "Wait, within the Command's deadline, for exactly one condition on the target: `text` shown (case-insensitive, whitespace collapsed, in the selected frame), `textGone`, a CSS `selector` with a visible match (`state: visible`, the default) or none (`state: hidden`), the tab's `url` matching a glob (`*` is any run of characters; the whole URL must match), or `networkIdle` (no request in flight for `idleMs`, default 500). Returns `condition` and the `state` that satisfied it; when the deadline comes first, deadline_exceeded with context.condition and context.lastState.",
        capability: "observation.read",
        mutating: false,
        input_schema,
        output_schema: open_object(
            json!({
                "workspaceId": {"type": "string"},
                "leaseId": {"type": "string"},
                "targetId": {"type": "string"},
                "url": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
                "title": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
                "condition": {"enum": ["text", "text_gone", "selector_visible", "selector_hidden", "url", "network_idle"]},
                "state": state,
                "waitedMs": {"type": "integer", "minimum": 0},
            }),
            &["targetId", "condition", "state"],
        ),
        sensitivity_input: &["browser_data"],
        sensitivity_output: &["browser_data"],
        lane: Lane::Ordinary,
        gate: Gate::InTool,
        handler: handler!(Target: wait),
    }]
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WaitParams {
    text: Option<String>,
    text_gone: Option<String>,
    selector: Option<String>,
    /// `visible` or `hidden` (the schema's enum).
    state: Option<String>,
    url: Option<String>,
    network_idle: Option<bool>,
    idle_ms: Option<u64>,
}

/// The one condition a call waits for.
#[derive(Debug, Clone, PartialEq)]
enum Condition {
    Text(String),
    TextGone(String),
    Selector { selector: String, visible: bool },
    Url(String),
    NetworkIdle { idle: Duration },
}

impl Condition {
    fn from_params(params: WaitParams) -> Result<Condition, RpcError> {
        let given = [
            params.text.is_some(),
            params.text_gone.is_some(),
            params.selector.is_some(),
            params.url.is_some(),
            params.network_idle.is_some(),
        ];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(RpcError::invalid_params(
                "give exactly one condition: text, textGone, selector, url or networkIdle",
            )
            .with_context("path", json!("arguments")));
        }
        if params.state.is_some() && params.selector.is_none() {
            return Err(
                RpcError::invalid_params("\"state\" applies only to \"selector\"")
                    .with_context("path", json!("arguments.state")),
            );
        }
        if params.idle_ms.is_some() && params.network_idle.is_none() {
            return Err(
                RpcError::invalid_params("\"idleMs\" applies only to \"networkIdle\"")
                    .with_context("path", json!("arguments.idleMs")),
            );
        }
        Ok(match params {
            WaitParams {
                text: Some(text), ..
            } => Condition::Text(text),
            WaitParams {
                text_gone: Some(text),
                ..
            } => Condition::TextGone(text),
            WaitParams {
                selector: Some(selector),
                state,
                ..
            } => Condition::Selector {
                selector,
                visible: state.as_deref() != Some("hidden"),
            },
            WaitParams { url: Some(url), .. } => Condition::Url(url),
            WaitParams { idle_ms, .. } => Condition::NetworkIdle {
                idle: Duration::from_millis(idle_ms.unwrap_or(DEFAULT_IDLE_MS)),
            },
        })
    }

    fn name(&self) -> &'static str {
        match self {
            Condition::Text(_) => "text",
            Condition::TextGone(_) => "text_gone",
            Condition::Selector { visible: true, .. } => "selector_visible",
            Condition::Selector { visible: false, .. } => "selector_hidden",
            Condition::Url(_) => "url",
            Condition::NetworkIdle { .. } => "network_idle",
        }
    }

    /// Whether the state seen satisfies the condition.
    fn holds(&self, seen: &Seen) -> bool {
        match self {
            Condition::Text(_) => seen.page.is_some_and(|p| p.text_found == Some(true)),
            Condition::TextGone(_) => seen.page.is_some_and(|p| p.text_found == Some(false)),
            Condition::Selector { visible, .. } => seen
                .page
                .and_then(|p| p.visible)
                .is_some_and(|n| (n > 0) == *visible),
            Condition::Url(pattern) => seen
                .url
                .as_deref()
                .is_some_and(|u| glob_matches(pattern, u)),
            Condition::NetworkIdle { idle } => seen
                .network
                .flatten()
                .is_some_and(|(in_flight, quiet)| in_flight == 0 && quiet >= *idle),
        }
    }
}

/// What one look saw.
#[derive(Debug, Clone, Default)]
struct Seen {
    page: Option<WaitSeen>,
    url: Option<String>,
    /// Requests in flight and how long nothing started or ended (`None` inside when requests
    /// are not counted on this tab: never idle then).
    network: Option<Option<(usize, Duration)>>,
    /// The page could not be read this time (a navigation replaced its world).
    unreadable: bool,
}

impl Seen {
    fn to_json(&self) -> Value {
        let mut state = Map::new();
        if let Some(page) = self.page {
            if let Some(found) = page.text_found {
                state.insert("textFound".into(), json!(found));
            }
            if let Some(matched) = page.matched {
                state.insert("matched".into(), json!(matched));
            }
            if let Some(visible) = page.visible {
                state.insert("visible".into(), json!(visible));
            }
        }
        if let Some(url) = &self.url {
            state.insert("url".into(), json!(url));
        }
        match self.network {
            Some(Some((in_flight, quiet))) => {
                state.insert("inFlight".into(), json!(in_flight));
                state.insert("quietMs".into(), json!(quiet.as_millis() as u64));
            }
            Some(None) => {
                state.insert("counting".into(), json!(false));
            }
            None => {}
        }
        if self.unreadable {
            state.insert("unreadable".into(), json!(true));
        }
        Value::Object(state)
    }
}

/// `*` matches any run of characters (also none, also `/`); everything else matches itself; the
/// pattern must cover the whole text.
fn glob_matches(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    let (mut p, mut t) = (0, 0);
    // The last `*` seen and the text position it currently covers up to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == '*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((star_p, star_t)) = star {
            p = star_p + 1;
            t = star_t + 1;
            star = Some((star_p, star_t + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

/// A failure of one look that a later look may not have: the page's world went away under a
/// navigation (`Cannot find context`, `Execution context was destroyed`).
fn transient(error: &ToolError) -> bool {
    matches!(
        error,
        ToolError::Cdp(CdpError::Remote { .. })
            | ToolError::Page(PageError::Cdp(CdpError::Remote { .. }))
            | ToolError::Page(PageError::ScriptThrew { .. })
    )
}

async fn look(tab: &mut ControlledTab, condition: &Condition) -> Result<Seen, ToolError> {
    let mut seen = Seen::default();
    match condition {
        Condition::Text(text) | Condition::TextGone(text) => {
            let probe = WaitProbe {
                text: Some(text.clone()),
                selector: None,
            };
            seen.page = Some(run_probe(tab, &probe).await?);
        }
        Condition::Selector { selector, .. } => {
            let probe = WaitProbe {
                text: None,
                selector: Some(selector.clone()),
            };
            seen.page = Some(run_probe(tab, &probe).await?);
        }
        Condition::Url(_) => seen.url = Some(tab.page_info().await?.0),
        Condition::NetworkIdle { .. } => {
            // Attaching starts the request count (a no-op once attached).
            tab.session().await?;
            let network = tab.activity().network();
            let quiet = tokio::time::Instant::now().saturating_duration_since(network.quiet_since);
            seen.network = Some(network.counting.then_some((network.in_flight, quiet)));
        }
    }
    Ok(seen)
}

async fn run_probe(tab: &mut ControlledTab, probe: &WaitProbe) -> Result<WaitSeen, ToolError> {
    let ctx = tab.page_context().await?;
    match tab.run(&ctx, probe).await {
        Err(ToolError::Page(error))
            if error.refusal() == Some(ScriptErrorCode::InvalidSelector) =>
        {
            Err(ToolError::from(
                RpcError::invalid_params("the selector is not valid CSS")
                    .with_context("path", json!("arguments.selector")),
            ))
        }
        other => other,
    }
}

async fn wait(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: WaitParams,
) -> Result<Value, ToolError> {
    let condition = Condition::from_params(params)?;
    let mut tab = ControlledTab::acquire(env, scope).await?;
    let started = tokio::time::Instant::now();
    let remaining = scope.deadline.saturating_duration_since(started);
    let reserve = (remaining / 10).clamp(MIN_RESERVE, MAX_RESERVE);
    let until = started + remaining.saturating_sub(reserve);
    let mut last = Seen::default();
    loop {
        // A look slowed by a busy page or machine must not run into the Command's deadline:
        // the answer at `until` is this tool's, with the last state seen.
        let seen = match tokio::time::timeout_at(until, look(&mut tab, &condition)).await {
            Err(_late) => return Err(not_held(&condition, &last)),
            Ok(Ok(seen)) => seen,
            Ok(Err(error)) if transient(&error) => Seen {
                unreadable: true,
                ..last.clone()
            },
            Ok(Err(error)) => return Err(error),
        };
        if !seen.unreadable && condition.holds(&seen) {
            let (url, title) = tab.page_info().await?;
            let mut result = base_result(scope, url, title);
            result.insert("condition".into(), json!(condition.name()));
            result.insert("state".into(), seen.to_json());
            let waited = tokio::time::Instant::now().saturating_duration_since(started);
            result.insert("waitedMs".into(), json!(waited.as_millis() as u64));
            return Ok(Value::Object(result));
        }
        last = seen;
        if tokio::time::Instant::now() + POLL_INTERVAL > until {
            return Err(not_held(&condition, &last));
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// The condition did not hold before the deadline: `deadline_exceeded` naming it, with the
/// last state seen.
fn not_held(condition: &Condition, last: &Seen) -> ToolError {
    ToolError::from(
        RpcError::new(
            ErrorCode::DeadlineExceeded,
            format!(
                "the {} condition did not hold before the deadline",
                condition.name()
            ),
        )
        .with_context("condition", json!(condition.name()))
        .with_context("lastState", last.to_json()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(value: Value) -> WaitParams {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn exactly_one_condition_and_its_own_options() {
        assert_eq!(
            Condition::from_params(params(json!({"selector": "#x", "state": "hidden"}))).unwrap(),
            Condition::Selector {
                selector: "#x".into(),
                visible: false
            }
        );
        assert_eq!(
            Condition::from_params(params(json!({"networkIdle": true}))).unwrap(),
            Condition::NetworkIdle {
                idle: Duration::from_millis(500)
            }
        );
        for bad in [
            json!({}),
            json!({"text": "a", "url": "b"}),
            json!({"text": "a", "state": "hidden"}),
            json!({"url": "*", "idleMs": 5}),
        ] {
            let error = Condition::from_params(params(bad.clone())).unwrap_err();
            assert_eq!(error.code, ErrorCode::InvalidParams, "{bad}");
        }
    }

    #[test]
    fn url_globs_match_the_whole_url() {
        for (pattern, url, expected) in [
            ("*/done", "http://a.test/x/done", true),
            ("*/done", "http://a.test/done?x=1", false),
            ("*/done*", "http://a.test/done?x=1", true),
            ("http://a.test/*/end", "http://a.test/p/q/end", true),
            ("http://a.test/", "http://a.test/", true),
            ("http://a.test/", "http://a.test/x", false),
            ("*step=*2*", "http://a.test/?step=12", true),
            ("**", "", true),
            ("a*b*c", "abxbc", true),
            ("a*b*c", "abxbd", false),
        ] {
            assert_eq!(glob_matches(pattern, url), expected, "{pattern} ~ {url}");
        }
    }

    #[test]
    fn conditions_hold_on_what_was_seen() {
        let page = |text_found, visible| Seen {
            page: Some(WaitSeen {
                text_found,
                matched: visible,
                visible,
            }),
            ..Seen::default()
        };
        assert!(Condition::Text("a".into()).holds(&page(Some(true), None)));
        assert!(!Condition::TextGone("a".into()).holds(&page(Some(true), None)));
        let hidden = Condition::Selector {
            selector: "#x".into(),
            visible: false,
        };
        assert!(hidden.holds(&page(None, Some(0))));
        assert!(!hidden.holds(&page(None, Some(2))));
        let idle = Condition::NetworkIdle {
            idle: Duration::from_millis(500),
        };
        let net = |in_flight, ms| Seen {
            network: Some(Some((in_flight, Duration::from_millis(ms)))),
            ..Seen::default()
        };
        let uncounted = Seen {
            network: Some(None),
            ..Seen::default()
        };
        assert!(!idle.holds(&uncounted), "no count, no idle");
        assert_eq!(uncounted.to_json(), json!({"counting": false}));
        assert!(idle.holds(&net(0, 600)));
        assert!(!idle.holds(&net(0, 100)));
        assert!(!idle.holds(&net(1, 10_000)));
        assert_eq!(net(2, 30).to_json(), json!({"inFlight": 2, "quietMs": 30}));
    }
}
