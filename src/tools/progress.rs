//! The no-progress detector behind `watchdog.no_progress` and the `repeated_action` hint.
//!
//! After every completed action the action tools hand it who acted where (Workspace, Lease,
//! session, frame, control epoch), the action's signature (tool, the acted-on element's
//! identity or the coordinates, and a hash of the bounded arguments) and a fingerprint of the
//! fresh Observation (URL, scroll position, element roles/names/values/states). It keeps two
//! streaks per tab in `TabState::progress`: consecutive browser-observable mismatches, and
//! repetitions of one signature while the fingerprint stays unchanged. A streak crossing
//! `NO_PROGRESS_THRESHOLD` is reported once; the caller adds the hint to the action's result
//! and emits the event. Signatures and fingerprints are 64-bit hashes that never leave the
//! Broker (not in results, events or logs). Pure: no I/O, no clock, no CDP.

use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::{Map, Value};

use super::evidence::{Evidence, Status};
use super::tab::TabState;
use crate::page::{Confidence, Hint};

/// Consecutive actions without progress that make one report (the spec's "three").
pub const NO_PROGRESS_THRESHOLD: u32 = 3;

/// Serialized argument bytes hashed into a signature at most: covers every argument the
/// action tools accept except a huge `dropdown.select` list, whose first 64 KiB suffice to
/// tell two calls apart.
const SIGNATURE_MAX_ARGUMENT_BYTES: usize = 64 * 1024;

/// Observation elements hashed into a fingerprint at most: an Observation holds up to 25,000,
/// and the detector must stay cheap next to the Observation itself. Changes further down a
/// huge page show up through `candidateCount`, scrolling or the URL.
const FINGERPRINT_MAX_ELEMENTS: usize = 5_000;

/// Element fields that make up the page state. Bounds and viewport membership (layout, and
/// covered by the scroll position) and `focused` (clicking a control focuses it without any
/// progress) are left out.
const FINGERPRINT_ELEMENT_FIELDS: &[&str] = &[
    "role",
    "name",
    "value",
    "valueLength",
    "checked",
    "selected",
    "expanded",
    "pressed",
    "disabled",
    "readonly",
    "tag",
    "inputType",
    "href",
];

/// Arguments that name an Observation rather than the action: a fresh Observation gives the
/// same element a new `observationId` (and maybe a new `ref`), and `observe` only shapes the
/// returned representation.
const SIGNATURE_IGNORED_ARGUMENTS: &[&str] = &["observationId", "ref", "observe"];

/// Why a streak was reported; also the hint's `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoProgressReason {
    /// Consecutive actions whose evidence was `mismatch`.
    Mismatch,
    /// The same action repeated while the page fingerprint stayed unchanged.
    StagnantPage,
}

impl NoProgressReason {
    pub fn as_str(self) -> &'static str {
        match self {
            NoProgressReason::Mismatch => "mismatch",
            NoProgressReason::StagnantPage => "stagnant_page",
        }
    }

    /// The `repeated_action` hint the threshold result and the event both carry. A mismatch is
    /// the browser's own evidence (strong); a stagnant fingerprint may miss text the
    /// Observation does not list (medium).
    pub fn hint(self) -> Hint {
        let mut hint = Hint::repeated_action(self.as_str());
        hint.confidence = match self {
            NoProgressReason::Mismatch => Confidence::Strong,
            NoProgressReason::StagnantPage => Confidence::Medium,
        };
        hint
    }
}

/// A crossed threshold, reported once per streak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoProgress {
    pub reason: NoProgressReason,
    /// Length of the streak that crossed (the threshold).
    pub consecutive: u32,
}

/// How the evidence judged one action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// `verified`: observable success, ends a mismatch streak.
    Verified,
    /// `mismatch`: the control did not reach its expected state.
    Mismatch,
    /// `unavailable`: nothing conclusive (coordinates, canvas, a key with no effect); neither
    /// counts as a mismatch nor ends a streak.
    Inconclusive,
}

impl Verdict {
    /// From the evidence `status`.
    pub fn of(evidence: &Evidence) -> Verdict {
        match evidence.status {
            Status::Verified => Verdict::Verified,
            Status::Mismatch => Verdict::Mismatch,
            Status::Unavailable => Verdict::Inconclusive,
        }
    }
}

/// What an action was done to, for its signature.
#[derive(Debug, Clone, PartialEq)]
pub enum Subject {
    /// An element's identity within its document (the page scripts' element key).
    Element(String),
    /// A ref whose element identity was not read: its position and role in the Observation.
    RefPosition { element_ref: u64, role: String },
    /// Viewport coordinates, to the CSS pixel.
    Point { x: f64, y: f64 },
    /// Whatever has focus (`browser.keyboard`): the focused element's key, if any.
    Focused(Option<String>),
    /// The page itself (`browser.scroll` without a ref).
    Page,
}

/// Who acted where: streaks of another actor are void.
pub struct Actor<'a> {
    pub workspace_id: &'a str,
    pub lease_id: &'a str,
    pub session: &'a str,
    pub frame_id: &'a str,
    pub control_epoch: u64,
}

impl Actor<'_> {
    fn key(&self) -> u64 {
        let mut hasher = DefaultHasher::new();
        (
            self.workspace_id,
            self.lease_id,
            self.session,
            self.frame_id,
            self.control_epoch,
        )
            .hash(&mut hasher);
        hasher.finish()
    }
}

/// The hash of one action: its tool (evidence `action`), subject and bounded arguments.
pub fn signature(action: &str, subject: &Subject, arguments: &Map<String, Value>) -> u64 {
    let mut hasher = DefaultHasher::new();
    action.hash(&mut hasher);
    match subject {
        Subject::Element(key) => (0u8, key).hash(&mut hasher),
        Subject::RefPosition { element_ref, role } => (1u8, element_ref, role).hash(&mut hasher),
        Subject::Point { x, y } => (2u8, x.round() as i64, y.round() as i64).hash(&mut hasher),
        Subject::Focused(key) => (3u8, key).hash(&mut hasher),
        Subject::Page => 4u8.hash(&mut hasher),
    }
    let mut writer = BoundedHashWriter {
        hasher: &mut hasher,
        left: SIGNATURE_MAX_ARGUMENT_BYTES,
    };
    for (name, value) in arguments {
        if SIGNATURE_IGNORED_ARGUMENTS.contains(&name.as_str()) {
            continue;
        }
        name.hash(writer.hasher);
        // serde_json's map keeps keys sorted, so equal arguments serialize equally.
        if serde_json::to_writer(&mut writer, value).is_err() {
            break;
        }
    }
    hasher.finish()
}

/// The fingerprint of a fresh Observation: `(url hash, page state hash)`.
pub fn fingerprint(observation: &Map<String, Value>) -> (u64, u64) {
    let url = observation
        .get("url")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut url_hasher = DefaultHasher::new();
    url.hash(&mut url_hasher);
    let mut hasher = DefaultHasher::new();
    url.hash(&mut hasher);
    let mut writer = BoundedHashWriter {
        hasher: &mut hasher,
        left: usize::MAX,
    };
    for key in ["candidateCount", "truncated"] {
        let _ = serde_json::to_writer(&mut writer, &observation.get(key));
    }
    let _ = serde_json::to_writer(
        &mut writer,
        &observation.get("page").and_then(|p| p.get("scroll")),
    );
    let elements = observation
        .get("elements")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    elements.len().hash(writer.hasher);
    for element in elements.iter().take(FINGERPRINT_MAX_ELEMENTS) {
        for field in FINGERPRINT_ELEMENT_FIELDS {
            let _ = serde_json::to_writer(&mut writer, &element.get(*field));
        }
    }
    (url_hasher.finish(), hasher.finish())
}

/// One completed action, as the detector sees it.
pub struct Completed<'a> {
    pub actor: Actor<'a>,
    pub signature: u64,
    pub verdict: Verdict,
    /// The evidence lists an effect other than focus moving (a value, state, popup, ...).
    pub changed: bool,
    /// The evidence reports a navigation or a new document.
    pub navigated: bool,
    /// The fresh Observation's fingerprint; `None` when the action returned none (a dialog
    /// blocks the page).
    pub page: Option<(u64, u64)>,
}

impl<'a> Completed<'a> {
    /// One completed action from its evidence: the verdict and what changed are read from the
    /// typed evidence itself.
    pub fn new(
        actor: Actor<'a>,
        signature: u64,
        evidence: &Evidence,
        page: Option<(u64, u64)>,
    ) -> Completed<'a> {
        Completed {
            actor,
            signature,
            verdict: Verdict::of(evidence),
            changed: evidence.changed(),
            navigated: evidence.navigated(),
            page,
        }
    }
}

/// Records one completed action on the tab; returns the report when a streak crosses the
/// threshold for the first time. At most one report per action: when both streaks cross
/// together the reason is `mismatch` and both count as reported.
pub fn record(state: &mut TabState, action: Completed<'_>) -> Option<NoProgress> {
    let memory = &mut state.progress;
    let actor = action.actor.key();
    let url = action.page.map(|(url, _)| url);
    let moved = matches!((memory.url, url), (Some(before), Some(now)) if before != now);
    if memory.actor != Some(actor) || action.navigated || moved {
        *memory = Default::default();
        memory.actor = Some(actor);
    }
    memory.url = url.or(memory.url);

    match action.verdict {
        Verdict::Verified => {
            memory.mismatches = 0;
            memory.mismatch_reported = false;
        }
        Verdict::Mismatch => memory.mismatches = memory.mismatches.saturating_add(1),
        Verdict::Inconclusive => {}
    }

    match action.page {
        Some((_, page)) if !action.changed => {
            let current = (action.signature, page);
            match memory.last_action == Some(current) {
                true => memory.repeats = memory.repeats.saturating_add(1),
                false => {
                    memory.last_action = Some(current);
                    memory.repeats = 1;
                    memory.repeat_reported = false;
                }
            }
        }
        Some((_, page)) => {
            // The action observably changed the page: a new baseline.
            memory.last_action = Some((action.signature, page));
            memory.repeats = 1;
            memory.repeat_reported = false;
        }
        None => {
            memory.last_action = None;
            memory.repeats = 0;
            memory.repeat_reported = false;
        }
    }

    let mismatch_due = memory.mismatches >= NO_PROGRESS_THRESHOLD && !memory.mismatch_reported;
    let stagnant_due = memory.repeats >= NO_PROGRESS_THRESHOLD && !memory.repeat_reported;
    let report = match (mismatch_due, stagnant_due) {
        (true, _) => NoProgress {
            reason: NoProgressReason::Mismatch,
            consecutive: memory.mismatches,
        },
        (false, true) => NoProgress {
            reason: NoProgressReason::StagnantPage,
            consecutive: memory.repeats,
        },
        (false, false) => return None,
    };
    memory.mismatch_reported |= memory.mismatches >= NO_PROGRESS_THRESHOLD;
    memory.repeat_reported |= memory.repeats >= NO_PROGRESS_THRESHOLD;
    Some(report)
}

/// Feeds serialized JSON into a hasher, up to a byte budget.
struct BoundedHashWriter<'a> {
    hasher: &'a mut DefaultHasher,
    left: usize,
}

impl std::io::Write for BoundedHashWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        match self.left {
            0 => Err(std::io::ErrorKind::WriteZero.into()),
            left => {
                let taken = &bytes[..bytes.len().min(left)];
                self.hasher.write(taken);
                self.left -= taken.len();
                Ok(taken.len())
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn actor(lease_id: &str) -> Actor<'_> {
        Actor {
            workspace_id: "workspace:1",
            lease_id,
            session: "s",
            frame_id: "f",
            control_epoch: 0,
        }
    }

    fn action(signature: u64, verdict: Verdict, page: u64) -> Completed<'static> {
        Completed {
            actor: actor("lease:1"),
            signature,
            verdict,
            changed: false,
            navigated: false,
            page: Some((7, page)),
        }
    }

    /// Feeds actions in order; returns the reason reported after each (None when silent).
    fn check(actions: Vec<Completed<'_>>, expect: &[Option<&str>]) {
        let mut state = TabState::default();
        let got: Vec<Option<&str>> = actions
            .into_iter()
            .map(|a| record(&mut state, a).map(|r| r.reason.as_str()))
            .collect();
        assert_eq!(got, expect);
    }

    #[test]
    fn three_mismatches_report_once_per_streak() {
        use Verdict::*;
        check(
            (0..5).map(|i| action(i, Mismatch, i)).collect(),
            &[None, None, Some("mismatch"), None, None],
        );
        // Observable success ends the streak; a new one reports again.
        let mut list: Vec<_> = (0..2).map(|i| action(i, Mismatch, i)).collect();
        list.push(action(10, Verified, 10));
        list.extend((20..23).map(|i| action(i, Mismatch, i)));
        check(list, &[None, None, None, None, None, Some("mismatch")]);
        // Inconclusive evidence neither counts nor breaks the streak.
        check(
            vec![
                action(1, Mismatch, 1),
                action(2, Inconclusive, 2),
                action(3, Mismatch, 3),
                action(4, Mismatch, 4),
            ],
            &[None, None, None, Some("mismatch")],
        );
    }

    #[test]
    fn unobservable_coordinate_clicks_never_count_as_mismatches() {
        check(
            (0..4)
                .map(|i| action(i, Verdict::Inconclusive, i))
                .collect(),
            &[None, None, None, None],
        );
    }

    #[test]
    fn the_same_action_on_an_unchanged_page_is_stagnant() {
        use Verdict::*;
        check(
            (0..4).map(|_| action(5, Inconclusive, 9)).collect(),
            &[None, None, Some("stagnant_page"), None],
        );
        // A changed action or page restarts the count.
        check(
            vec![
                action(5, Inconclusive, 9),
                action(5, Inconclusive, 9),
                action(6, Inconclusive, 9),
                action(6, Inconclusive, 8),
                action(6, Inconclusive, 8),
                action(6, Inconclusive, 8),
            ],
            &[None, None, None, None, None, Some("stagnant_page")],
        );
        // Observable effects other than focus are a change even if the fingerprint misses them.
        let mut popup = action(5, Verified, 9);
        popup.changed = true;
        check(
            vec![action(5, Verified, 9), popup, action(5, Verified, 9)],
            &[None, None, None],
        );
    }

    #[test]
    fn both_streaks_crossing_together_report_mismatch_once() {
        check(
            (0..4).map(|_| action(5, Verdict::Mismatch, 9)).collect(),
            &[None, None, Some("mismatch"), None],
        );
    }

    #[test]
    fn another_actor_navigation_or_missing_observation_resets() {
        use Verdict::*;
        let other_lease = || {
            let mut other = action(5, Mismatch, 9);
            other.actor = actor("lease:2");
            other
        };
        check(
            vec![
                action(5, Mismatch, 9),
                action(5, Mismatch, 9),
                other_lease(),
                other_lease(),
                other_lease(),
            ],
            &[None, None, None, None, Some("mismatch")],
        );
        let mut navigated = action(5, Mismatch, 9);
        navigated.navigated = true;
        let elsewhere = |url| {
            let mut moved = action(5, Mismatch, 9);
            moved.page = Some((url, 9));
            moved
        };
        check(
            vec![
                action(5, Mismatch, 9),
                action(5, Mismatch, 9),
                navigated,
                action(5, Mismatch, 9),
                action(5, Mismatch, 9),
            ],
            &[None, None, None, None, Some("mismatch")],
        );
        // The page moved to another URL between actions: a navigation.
        check(
            vec![
                action(5, Mismatch, 9),
                action(5, Mismatch, 9),
                elsewhere(8),
                elsewhere(8),
                elsewhere(8),
            ],
            &[None, None, None, None, Some("mismatch")],
        );
        // Without an Observation the repetition streak restarts, the mismatch streak goes on.
        let mut dialog = action(5, Inconclusive, 9);
        dialog.page = None;
        check(
            vec![
                action(5, Inconclusive, 9),
                action(5, Inconclusive, 9),
                dialog,
                action(5, Inconclusive, 9),
            ],
            &[None, None, None, None],
        );
        let mut dialog = action(5, Mismatch, 9);
        dialog.page = None;
        check(
            vec![action(1, Mismatch, 1), action(2, Mismatch, 2), dialog],
            &[None, None, Some("mismatch")],
        );
    }

    #[test]
    fn signatures_ignore_observation_ids_and_tell_actions_apart() {
        let element = Subject::Element("doc:a:e1".into());
        let base = signature(
            "click",
            &element,
            json!({"observationId": "observation:1", "ref": 3, "button": "left"})
                .as_object()
                .unwrap(),
        );
        let later = signature(
            "click",
            &element,
            json!({"observationId": "observation:2", "ref": 4, "button": "left", "observe": {"limit": 5}})
                .as_object()
                .unwrap(),
        );
        assert_eq!(base, later);
        let right = json!({"button": "right"});
        assert_ne!(
            base,
            signature("click", &element, right.as_object().unwrap())
        );
        let other = Subject::Element("doc:a:e2".into());
        let left = json!({"button": "left"});
        assert_ne!(base, signature("click", &other, left.as_object().unwrap()));
        assert_ne!(
            base,
            signature("press", &element, left.as_object().unwrap())
        );
        let point = |x, y| signature("click", &Subject::Point { x, y }, &Map::new());
        assert_eq!(point(10.2, 20.0), point(9.8, 20.4));
        assert_ne!(point(10.0, 20.0), point(12.0, 20.0));
        let typed =
            |text: &str| signature("type", &element, json!({"text": text}).as_object().unwrap());
        assert_ne!(typed("a"), typed("b"));
        let huge = "x".repeat(SIGNATURE_MAX_ARGUMENT_BYTES * 2);
        assert_eq!(typed(&huge), typed(&format!("{huge}y")), "bounded");
    }

    #[test]
    fn fingerprints_follow_state_url_and_scroll_but_not_focus_or_layout() {
        let page = |checked: bool, focused: bool, url: &str, y: i64, top: i64| {
            let observation = json!({
                "url": url, "observationId": format!("observation:{top}"),
                "elements": [{"ref": 1, "role": "checkbox", "name": "Agree", "checked": checked, "focused": focused, "tag": "input", "bounds": {"x": 0, "y": top, "width": 10, "height": 10}, "inViewport": true}],
                "page": {"scroll": {"x": 0, "y": y}}, "truncated": false, "candidateCount": 1,
            });
            fingerprint(observation.as_object().unwrap())
        };
        let base = page(false, false, "http://a/", 0, 5);
        assert_eq!(base, page(false, true, "http://a/", 0, 9));
        assert_ne!(base.1, page(true, false, "http://a/", 0, 5).1);
        assert_ne!(base.1, page(false, false, "http://a/", 100, 5).1);
        let moved = page(false, false, "http://b/", 0, 5);
        assert_ne!(base.0, moved.0);
        assert_ne!(base.1, moved.1);
    }

    #[test]
    fn hints_carry_reason_and_confidence() {
        assert_eq!(
            serde_json::to_value(NoProgressReason::Mismatch.hint()).unwrap(),
            json!({"code": "repeated_action", "source": "watchdog", "confidence": "strong",
                "recommendedAction": "change_strategy", "reason": "mismatch"})
        );
        assert_eq!(
            serde_json::to_value(NoProgressReason::StagnantPage.hint()).unwrap()["confidence"],
            "medium"
        );
    }
}
