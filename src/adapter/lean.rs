//! The text a model reads from a tool result: the lean form of a Broker result, shared by every
//! client front end (`browser-pilot mcp`, `bp`'s text output, the reference adapters).
//!
//! Owns the lean arguments (an Observation in compact lines within a token budget, an action's
//! closing Observation as a diff against the tab's previous one: [`arguments`]) and the
//! rendering, as pure functions of the Command's result: an Observation becomes a
//! one-line page header, the Broker's compact element lines (`format: "compact"`) and the
//! hints; an action's result becomes one line of evidence plus what changed since the tab's
//! previous Observation (the Broker's `sinceObservationId` diff: added lines marked `+`,
//! changed ones `~` with their current state, removed refs), and a full Observation when the
//! document changed; any other result is its JSON without the session's own ids. Which tab's
//! Observation is the previous one is the caller's (each keeps the latest per tab); the content
//! blocks around the text are the front end's. The form is documented in docs/adapters.md
//! ("Lean results").

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use super::ToolInfo;

/// Elements one Observation walks (the manifest's largest `limit`): an Observation and the
/// diffs after it walk the same elements, and `maxTokens` decides what is shown.
pub const OBSERVE_LIMIT: u32 = 5_000;

/// Token budget of a full Observation (about 21 KB of text; the Broker's estimate): elements in
/// the view first, then interactive ones, so scrolling and observing again pages through a
/// long page.
pub const OBSERVE_MAX_TOKENS: u32 = 8_000;

/// Token budget of what an action changed (about 5 KB of text).
pub const ACTION_MAX_TOKENS: u32 = 2_000;

/// The arguments of a full lean Observation (`browser.observe` in compact lines).
pub fn observe_arguments() -> Value {
    json!({"format": "compact", "limit": OBSERVE_LIMIT, "maxTokens": OBSERVE_MAX_TOKENS})
}

/// The lean shape of a tab tool's `arguments`, unless the caller gave them: an Observation in
/// compact lines within a token budget; an action's closing Observation as a diff against
/// `latest` (the tab's previous Observation in this Workspace); a ref's `observationId`
/// `latest`.
pub fn arguments(tool: &ToolInfo, latest: Option<&str>, arguments: &mut Map<String, Value>) {
    let offers = |name: &str| tool.input_schema["properties"].get(name).is_some();
    if tool.name == "browser.observe" {
        arguments
            .entry("format")
            .or_insert_with(|| json!("compact"));
        if arguments["format"] == "compact" {
            arguments
                .entry("limit")
                .or_insert_with(|| json!(OBSERVE_LIMIT));
            arguments
                .entry("maxTokens")
                .or_insert_with(|| json!(OBSERVE_MAX_TOKENS));
        }
    }
    if offers("observe") && !arguments.contains_key("observe") {
        let mut observe =
            json!({"format": "compact", "limit": OBSERVE_LIMIT, "maxTokens": ACTION_MAX_TOKENS});
        if let Some(latest) = latest {
            observe["sinceObservationId"] = json!(latest);
        }
        arguments.insert("observe".into(), observe);
    }
    if let (Some(Value::Object(annotations)), Some(latest)) =
        (arguments.get_mut("annotations"), latest)
    {
        annotations
            .entry("observationId")
            .or_insert_with(|| json!(latest));
    }
    if offers("observationId")
        && !arguments.contains_key("observationId")
        && (arguments.contains_key("ref") || arguments.contains_key("toRef"))
        && let Some(latest) = latest
    {
        arguments.insert("observationId".into(), json!(latest));
    }
}

/// Result fields the MCP session manages itself; the model never needs them.
const SESSION_FIELDS: &[&str] = &["workspaceId", "leaseId"];

/// Evidence effects a changed line already shows, so the evidence line does not repeat them.
const SHOWN_BY_LINES: &[&str] = &[
    "checked_changed",
    "selected_changed",
    "pressed_changed",
    "expanded_changed",
    "value_changed",
    "focus_changed",
    "content_appeared",
    "content_changed",
    "element_moved",
    "scrolled",
];

/// Fields whose change alone is layout or focus bookkeeping: such an element is not listed as
/// changed (focus is shown on the element that has it when that one is listed anyway).
const QUIET_FIELDS: &[&str] = &["inViewport", "focused"];

/// Facts the host learned beside the result that the model must be told, and how it names
/// tools.
#[derive(Debug)]
pub struct Notes {
    /// Lines stated before everything else (a dialog waiting, a popup opened).
    pub lines: Vec<String>,
    /// The front end's name of a Broker tool (`browser_observe`, `bp observe`), for the lines
    /// that say what to call next.
    pub tool_name: fn(&str) -> String,
}

impl Default for Notes {
    fn default() -> Notes {
        Notes {
            lines: Vec::new(),
            tool_name: host_tool_name,
        }
    }
}

/// The host-tool name of a Broker tool (`browser.observe` -> `browser_observe`), as MCP and
/// the reference adapters list them.
pub fn host_tool_name(broker_name: &str) -> String {
    broker_name.replace('.', "_")
}

/// The lean text of a successful Broker result of `tool` (its Broker name).
pub fn text(tool: &str, result: &Value, notes: &Notes) -> String {
    let mut out = String::new();
    if let Some(evidence) = result.get("evidence").filter(|e| e.is_object()) {
        push_line(&mut out, &evidence_line(evidence));
    }
    for line in &notes.lines {
        push_line(&mut out, line);
    }
    if result.get("observationId").is_some_and(Value::is_string) {
        match result.get("diff").filter(|d| d.is_object()) {
            Some(diff) => push_diff(&mut out, result, diff, notes),
            None => push_observation(&mut out, result, notes),
        }
        return out;
    }
    if result.get("evidence").is_some() {
        // An action without an Observation (a dialog blocks the page): the notes say why.
        return out;
    }
    if tool == "browser.read"
        && let Some(body) = result["text"].as_str()
    {
        push_line(&mut out, body);
        if let Value::Object(rest) = plain(result) {
            let rest: Map<String, Value> = rest
                .into_iter()
                .filter(|(key, value)| match key.as_str() {
                    "text" | "targetId" | "url" | "title" | "charCount" => {
                        result["truncated"] == true && key == "charCount"
                    }
                    "truncated" => *value == true,
                    "truncationReasons" => value.as_array().is_some_and(|r| !r.is_empty()),
                    _ => true,
                })
                .collect();
            if !rest.is_empty() {
                push_line(&mut out, &Value::Object(rest).to_string());
            }
        }
        return out;
    }
    push_line(&mut out, &plain(result).to_string());
    out
}

/// `result` without the session's own ids (an object; anything else as it is).
pub fn plain(result: &Value) -> Value {
    match result {
        Value::Object(map) => {
            let kept: Map<String, Value> = map
                .iter()
                .filter(|(key, _)| !SESSION_FIELDS.contains(&key.as_str()))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            Value::Object(kept)
        }
        other => other.clone(),
    }
}

fn push_line(out: &mut String, line: &str) {
    if line.is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(line);
}

/// `verified`, `mismatch (reason)` or `unavailable (reason)`, then the effects the lines below
/// do not show (a navigation, a new document, a dialog, a popup, a file chooser).
pub fn evidence_line(evidence: &Value) -> String {
    let mut line = evidence["status"].as_str().unwrap_or("unknown").to_owned();
    if let Some(reason) = evidence["reason"].as_str() {
        let _ = write!(line, " ({reason})");
    }
    let effects: Vec<&str> = evidence["effects"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(Value::as_str)
                .filter(|effect| !SHOWN_BY_LINES.contains(effect))
                .collect()
        })
        .unwrap_or_default();
    if !effects.is_empty() {
        let _ = write!(line, ": {}", effects.join(", "));
    }
    line
}

/// The ref a compact line starts with.
fn line_ref(line: &str) -> Option<u64> {
    line.split(' ').next()?.parse().ok()
}

/// A compact line as the model reads it: its ref in brackets (`[12] checkbox "Agree"`), the
/// notation agents and the peer harness look for, so a ref is never mistaken for a count.
fn bracketed(line: &str) -> String {
    match line.split_once(' ') {
        Some((number, rest)) if number.parse::<u64>().is_ok() => format!("[{number}] {rest}"),
        _ => line.to_owned(),
    }
}

/// The coarse viewport `y` a compact line ends with (`… @x,y`).
fn line_y(line: &str) -> Option<i64> {
    let at = line.rfind(" @")?;
    line[at + 2..].split(',').nth(1)?.parse().ok()
}

/// A changed element's line: its ref, name and current state, without the role (unless that
/// changed) and without coordinates.
fn changed_line(line: &str, fields: &[&str]) -> String {
    let body = match line.rfind(" @") {
        Some(at) => &line[..at],
        None => line,
    };
    let mut parts = body.splitn(3, ' ');
    let (Some(element_ref), Some(role), Some(rest)) = (parts.next(), parts.next(), parts.next())
    else {
        return format!("~{body}");
    };
    match fields.contains(&"role") || fields.contains(&"level") {
        true => format!("~[{element_ref}] {role} {rest}"),
        false => format!("~[{element_ref}] {rest}"),
    }
}

/// The one-line page header of a full Observation: title, URL, scroll position and the
/// elements outside the view (and what is not shown, with how to see it).
fn header(result: &Value, lines: &[&str], notes: &Notes) -> String {
    let page = &result["page"];
    let mut out = String::new();
    let title = result["title"].as_str().unwrap_or("");
    let _ = write!(
        out,
        "{} {}",
        serde_json::to_string(title).unwrap_or_default(),
        result["url"].as_str().unwrap_or("")
    );
    let viewport = page["viewport"]["height"].as_i64().unwrap_or(0);
    let document = page["document"]["height"].as_i64().unwrap_or(0);
    let scroll = page["scroll"]["y"].as_i64().unwrap_or(0);
    let end = (document - viewport).max(0);
    if end > 0 {
        let _ = write!(out, " | scroll {scroll}/{end}");
    }
    let (mut above, mut below) = (0usize, 0usize);
    for y in lines.iter().filter_map(|line| line_y(line)) {
        if y < 0 {
            above += 1;
        } else if viewport > 0 && y >= viewport {
            below += 1;
        }
    }
    match (above, below) {
        (0, 0) => {}
        (0, below) => {
            let _ = write!(out, " | {below} below view");
        }
        (above, 0) => {
            let _ = write!(out, " | {above} above view");
        }
        (above, below) => {
            let _ = write!(out, " | {above} above, {below} below view");
        }
    }
    if result["truncated"] == true {
        let total = result["candidateCount"].as_u64().unwrap_or(0);
        let _ = write!(
            out,
            " | {} of {total} shown: {}, then {} for the rest",
            lines.iter().filter(|line| line_ref(line).is_some()).count(),
            (notes.tool_name)("browser.scroll"),
            (notes.tool_name)("browser.observe"),
        );
    }
    out
}

fn compact_lines(result: &Value) -> Vec<&str> {
    result["compact"]
        .as_str()
        .map(|text| text.lines().filter(|l| !l.is_empty()).collect())
        .unwrap_or_default()
}

/// Hints as `hint code: action refs 2,3`; with `blocking_only`, only those that block.
fn push_hints(out: &mut String, result: &Value, blocking_only: bool) {
    for hint in result["hints"].as_array().into_iter().flatten() {
        let blocking = hint["blocking"] == true;
        let progress = hint["source"].as_str().is_some_and(|s| s != "observation");
        if blocking_only && !blocking && !progress {
            continue;
        }
        let mut line = format!(
            "hint {}: {}",
            hint["code"].as_str().unwrap_or(""),
            hint["recommendedAction"].as_str().unwrap_or("")
        );
        let refs: Vec<String> = hint["refs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| r.to_string())
            .collect();
        if !refs.is_empty() {
            let _ = write!(line, " refs {}", refs.join(","));
        }
        if blocking {
            line.push_str(" (blocking)");
        }
        push_line(out, &line);
    }
}

/// A full Observation: header, one line per element, hints.
fn push_observation(out: &mut String, result: &Value, notes: &Notes) {
    let lines = compact_lines(result);
    push_line(out, &header(result, &lines, notes));
    for (index, line) in lines.iter().enumerate() {
        let next = lines.get(index + 1).copied().unwrap_or("");
        match dialog_named_below(line, next) {
            Some(grouping) => push_line(out, grouping),
            None => push_line(out, &bracketed(line)),
        }
    }
    if result.get("compact").is_none()
        && let Some(elements) = result["elements"].as_array()
    {
        // The model asked for JSON elements: one object per line.
        for element in elements {
            push_line(out, &element.to_string());
        }
    }
    push_hints(out, result, false);
}

/// A grouping line whose innermost section is a dialog, without the dialog's name, when `next`
/// is that dialog's own element line, which names it (`## main > dialog "Pay"` above `7 dialog
/// "Pay" @…` becomes `## main > dialog`): the name is shown once. The grouping line's name is
/// cut at 40 characters, so the element's may be longer.
fn dialog_named_below<'a>(line: &'a str, next: &str) -> Option<&'a str> {
    if !line.starts_with("##") {
        return None;
    }
    let at = line.rfind(" dialog \"")?;
    let quoted = &line[at + " dialog ".len()..];
    let section: String = serde_json::from_str(quoted).ok()?;
    let mut words = next.splitn(3, ' ');
    let (_, role, rest) = (line_ref(next)?, words.nth(1)?, words.next()?);
    if role != "dialog" && role != "alertdialog" {
        return None;
    }
    let name = serde_json::Deserializer::from_str(rest)
        .into_iter::<String>()
        .next()?
        .ok()?;
    let section = section.strip_suffix('\u{2026}').unwrap_or(&section);
    (!section.is_empty() && name.starts_with(section)).then_some(&line[..at + " dialog".len()])
}

/// What changed since the base Observation: added lines (`+`), changed ones (`~`, current
/// state), removed refs; the blocking hints.
fn push_diff(out: &mut String, result: &Value, diff: &Value, notes: &Notes) {
    let added: HashSet<u64> = diff["added"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .collect();
    let changed: HashMap<u64, Vec<&str>> = diff["changed"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let fields = entry["fields"]
                .as_array()?
                .iter()
                .filter_map(Value::as_str)
                .collect();
            Some((entry["ref"].as_u64()?, fields))
        })
        .collect();
    for line in compact_lines(result) {
        let Some(element_ref) = line_ref(line) else {
            continue;
        };
        if added.contains(&element_ref) {
            push_line(out, &format!("+{}", bracketed(line)));
        } else if let Some(fields) = changed.get(&element_ref)
            && !fields.iter().all(|field| QUIET_FIELDS.contains(field))
        {
            push_line(out, &changed_line(line, fields));
        }
    }
    let removed: Vec<String> = diff["removed"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| r.to_string())
        .collect();
    if !removed.is_empty() {
        push_line(out, &format!("removed {}", removed.join(",")));
    }
    let budget_cut = result["truncationReasons"]
        .as_array()
        .is_some_and(|reasons| reasons.iter().any(|r| r == "tokens"));
    if budget_cut {
        let observe = (notes.tool_name)("browser.observe");
        push_line(
            out,
            &format!("more changed than shown: {observe} for the whole page"),
        );
    }
    push_hints(out, result, true);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn page() -> Value {
        json!({"viewport": {"height": 500, "width": 800}, "document": {"height": 1400, "width": 800}, "scroll": {"x": 0, "y": 0}})
    }

    #[test]
    fn a_full_observation_is_a_header_lines_and_hints() {
        let result = json!({
            "workspaceId": "workspace:1", "leaseId": "lease:1", "targetId": "target:1",
            "url": "http://x/a", "title": "Shop", "observationId": "observation:1",
            "compact": "1 link \"Home\" @20,20\n2 checkbox \"Agree\" unchecked @30,620",
            "page": page(), "truncated": false, "truncationReasons": [], "candidateCount": 2,
            "hints": [{"code": "modal_overlay", "recommendedAction": "resolve_overlay_first", "refs": [2], "blocking": true, "source": "observation", "confidence": "strong"}],
        });
        let text = text("browser.observe", &result, &Notes::default());
        assert_eq!(
            text,
            "\"Shop\" http://x/a | scroll 0/900 | 1 below view\n[1] link \"Home\" @20,20\n[2] checkbox \"Agree\" unchecked @30,620\nhint modal_overlay: resolve_overlay_first refs 2 (blocking)"
        );
    }

    #[test]
    fn a_dialog_is_named_once_by_its_own_line() {
        let result = json!({
            "url": "http://x/a", "title": "Shop", "observationId": "observation:1",
            "compact": "## main\n1 button \"Buy\" @20,20\n## main > dialog \"Confirm the order\"\n4 dialog \"Confirm the order\" @100,100\n5 button \"OK\" @120,200\n## dialog \"Long name of the alert that the section c\"\n8 alertdialog \"Long name of the alert that the section cuts short\" @0,0\n## dialog \"Other\"\n9 button \"Close\" @10,10",
            "page": page(), "truncated": false, "truncationReasons": [], "hints": [],
        });
        assert_eq!(
            text("browser.observe", &result, &Notes::default()),
            "\"Shop\" http://x/a | scroll 0/900\n## main\n[1] button \"Buy\" @20,20\n## main > dialog\n[4] dialog \"Confirm the order\" @100,100\n[5] button \"OK\" @120,200\n## dialog\n[8] alertdialog \"Long name of the alert that the section cuts short\" @0,0\n## dialog \"Other\"\n[9] button \"Close\" @10,10"
        );
    }

    #[test]
    fn an_action_is_evidence_and_what_changed() {
        let result = json!({
            "targetId": "target:1", "url": "http://x/a", "title": "Shop", "observationId": "observation:2",
            "evidence": {"action": "click", "status": "verified", "effects": ["checked_changed", "focus_changed", "popup_opened"]},
            "compact": "2 checkbox \"Agree\" checked focused @30,620\n3 button \"Apply\" focused @40,60\n9 button \"New\" @10,10",
            "diff": {"baseObservationId": "observation:1", "added": [9], "changed": [{"ref": 2, "fields": ["checked", "focused"]}, {"ref": 3, "fields": ["focused"]}], "removed": [4, 5], "unchanged": 3},
            "page": page(), "truncated": false, "truncationReasons": [], "hints": [],
        });
        let notes = Notes {
            lines: vec!["popup target:2 \"Pay\" http://x/pay".to_owned()],
            ..Notes::default()
        };
        assert_eq!(
            text("browser.click", &result, &notes),
            "verified: popup_opened\npopup target:2 \"Pay\" http://x/pay\n~[2] \"Agree\" checked focused\n+[9] button \"New\" @10,10\nremoved 4,5"
        );
    }

    #[test]
    fn a_read_is_its_text_and_what_was_cut() {
        let whole = json!({"targetId": "t", "url": "u", "title": "x", "text": "Hello", "truncated": false, "truncationReasons": [], "charCount": 5});
        assert_eq!(text("browser.read", &whole, &Notes::default()), "Hello");
        let cut = json!({"targetId": "t", "text": "Hel", "truncated": true, "truncationReasons": ["chars"], "charCount": 5});
        assert_eq!(
            text("browser.read", &cut, &Notes::default()),
            "Hel\n{\"charCount\":5,\"truncated\":true,\"truncationReasons\":[\"chars\"]}"
        );
    }

    #[test]
    fn other_results_drop_the_session_ids() {
        let result = json!({"workspaceId": "w", "leaseId": "l", "text": "hi", "charCount": 2});
        assert_eq!(
            text("browser.search", &result, &Notes::default()),
            "{\"charCount\":2,\"text\":\"hi\"}"
        );
    }

    #[test]
    fn evidence_names_a_reason_and_what_the_lines_cannot_show() {
        let evidence =
            json!({"status": "unavailable", "reason": "no_observable_effect", "effects": []});
        assert_eq!(
            evidence_line(&evidence),
            "unavailable (no_observable_effect)"
        );
        let navigated =
            json!({"status": "verified", "effects": ["navigation", "document_changed"]});
        assert_eq!(
            evidence_line(&navigated),
            "verified: navigation, document_changed"
        );
    }
}
