//! Observation hints: advisory, bounded items derived from one observation's
//! elements and signals (plus the main document's HTTP status the caller
//! knows), each with a stable `code`, `source`, `confidence` and
//! `recommendedAction`. Only refs of that observation appear. The download
//! and repeated-action hints come from other parts of the Broker; this file
//! gives them their shape. Pure: no I/O, no state (the authentication
//! baseline is passed in and returned by the caller).

use serde::Serialize;

use super::observe::{OverlayKind, PageObservation};

/// Hints on one observation at most: one per code and a few groups.
pub const MAX_HINTS: usize = 8;

/// Refs in one hint at most: enough to point at a dialog's controls or a
/// filter group without repeating the observation.
pub const MAX_REFS_PER_HINT: usize = 20;

/// Autocomplete popups reported at most.
const MAX_AUTOCOMPLETE_HINTS: usize = 2;

/// Filter groups reported at most.
const MAX_FILTER_HINTS: usize = 2;

/// A non-modal overlay must cover this fraction of the viewport.
const OVERLAY_MIN_COVERAGE: f64 = 0.5;

/// A covering element counts as an overlay from this `z-index` up, or when
/// it covers `OVERLAY_FULL_COVERAGE` of the viewport whatever its z-index.
const OVERLAY_MIN_Z_INDEX: i64 = 10;

/// See `OVERLAY_MIN_Z_INDEX`.
const OVERLAY_FULL_COVERAGE: f64 = 0.9;

/// HTTP statuses of the main document that mean access was refused.
const BLOCKED_STATUSES: [u16; 3] = [403, 429, 451];

/// Which hint this is. Hosts must ignore codes they do not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HintCode {
    Autocomplete,
    ModalOverlay,
    FilterControls,
    AuthenticationSurface,
    AccessBlocked,
    Download,
    RepeatedAction,
}

/// Where the evidence for a hint came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HintSource {
    /// The page script's walk of the document.
    Observation,
    /// The main document's HTTP response.
    Network,
    /// The browser's download events.
    Download,
    /// The Broker's no-progress watchdog.
    Watchdog,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    Strong,
    Medium,
    Weak,
}

/// The stable next-step suggestion of a hint (one or more per code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecommendedAction {
    /// autocomplete: pick a suggestion by ref, or keep typing.
    ChooseSuggestionOrContinue,
    /// modal_overlay: close or complete the overlay before anything else.
    ResolveOverlayFirst,
    /// filter_controls: narrow results with the page's filters.
    UseFilters,
    /// authentication_surface: sign in with known credentials or ask.
    AuthenticateOrAskUser,
    /// access_blocked: do not retry around the block; report it.
    StopAndReport,
    /// download (in progress): wait for the download event.
    WaitForDownload,
    /// download (completed): inspect the Artifact.
    InspectArtifact,
    /// download (failed or canceled): inspect why.
    InspectFailure,
    /// repeated_action: the same action is not progressing; change it.
    ChangeStrategy,
}

/// Authentication-surface transition of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthState {
    /// First observation after a reset shows a surface, or it is still there.
    Present,
    /// The session moved onto a surface.
    Entered,
    /// The session moved off one.
    Left,
}

impl AuthState {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthState::Present => "present",
            AuthState::Entered => "entered",
            AuthState::Left => "left",
        }
    }
}

/// Phase of a download a hint reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DownloadPhase {
    InProgress,
    Completed,
    Failed,
}

fn is_empty_slice<T>(items: &[T]) -> bool {
    items.is_empty()
}

/// One hint as the agent sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hint {
    pub code: HintCode,
    pub source: HintSource,
    pub confidence: Confidence,
    pub recommended_action: RecommendedAction,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocking: Option<bool>,
    #[serde(skip_serializing_if = "is_empty_slice")]
    pub refs: Vec<u32>,
    /// authentication_surface only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<AuthState>,
    /// download only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<DownloadPhase>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub download_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact_id: Option<String>,
    /// repeated_action only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// access_blocked only: the main document's status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Short machine-readable facts behind the hint (`http_403`,
    /// `captcha_frame`, `text:unusual traffic`, `dialog`, ...).
    #[serde(skip_serializing_if = "is_empty_slice")]
    pub evidence: Vec<String>,
}

impl Hint {
    fn new(
        code: HintCode,
        source: HintSource,
        confidence: Confidence,
        recommended_action: RecommendedAction,
    ) -> Hint {
        Hint {
            code,
            source,
            confidence,
            recommended_action,
            blocking: None,
            refs: Vec::new(),
            state: None,
            phase: None,
            download_id: None,
            artifact_id: None,
            reason: None,
            status: None,
            evidence: Vec::new(),
        }
    }

    fn with_refs(mut self, refs: impl IntoIterator<Item = u32>) -> Hint {
        let mut refs: Vec<u32> = refs.into_iter().collect();
        refs.sort_unstable();
        refs.dedup();
        refs.truncate(MAX_REFS_PER_HINT);
        self.refs = refs;
        self
    }

    /// A download hint: `wait_for_download` while in progress,
    /// `inspect_artifact` once completed, `inspect_failure` when it failed.
    pub fn download(
        phase: DownloadPhase,
        download_id: Option<String>,
        artifact_id: Option<String>,
    ) -> Hint {
        let action = match phase {
            DownloadPhase::InProgress => RecommendedAction::WaitForDownload,
            DownloadPhase::Completed => RecommendedAction::InspectArtifact,
            DownloadPhase::Failed => RecommendedAction::InspectFailure,
        };
        let mut hint = Hint::new(
            HintCode::Download,
            HintSource::Download,
            Confidence::Strong,
            action,
        );
        hint.phase = Some(phase);
        hint.download_id = download_id;
        hint.artifact_id = artifact_id;
        hint
    }

    /// The network's `access_blocked` hint for a main document answered 403 or 429: what
    /// `network.response` carries and what the next Observation of that document repeats
    /// (`HintContext::main_document_status`, when nothing else on the page adds evidence).
    pub fn access_blocked_by_status(status: u16) -> Hint {
        let mut hint = Hint::new(
            HintCode::AccessBlocked,
            HintSource::Network,
            Confidence::Strong,
            RecommendedAction::StopAndReport,
        );
        hint.blocking = Some(true);
        hint.status = Some(status);
        hint.evidence = vec![format!("http_{status}")];
        hint
    }

    /// The no-progress watchdog's hint, also carried by the action result
    /// that crossed the threshold. `reason` is a short snake_case cause such
    /// as `consecutive_mismatches` or `stagnant_page`.
    pub fn repeated_action(reason: &str) -> Hint {
        let mut hint = Hint::new(
            HintCode::RepeatedAction,
            HintSource::Watchdog,
            Confidence::Strong,
            RecommendedAction::ChangeStrategy,
        );
        hint.reason = Some(reason.to_owned());
        hint
    }
}

/// A hint as an event carries it (`payload.hints`, an array): every field of an Observation hint
/// except `refs`, since refs belong to one Observation and never travel in network, download or
/// watchdog events. The one hint type for every event producer.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct EventHint(Hint);

impl From<Hint> for EventHint {
    fn from(mut hint: Hint) -> EventHint {
        hint.refs.clear();
        EventHint(hint)
    }
}

/// What the caller knows beyond the observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HintContext {
    /// HTTP status of the frame's main document, when known.
    pub main_document_status: Option<u16>,
    /// Whether the previous observation of this session and frame showed an
    /// authentication surface; `None` after a reset (new session, frame
    /// selection) or before the first observation.
    pub previous_auth_surface: Option<bool>,
}

/// The transition of the authentication surface: `present` on the first
/// observed surface (and while it stays), `entered` when a session moves
/// onto one, `left` when it moves off one, nothing otherwise.
pub fn auth_transition(previous: Option<bool>, now: bool) -> Option<&'static str> {
    auth_state(previous, now).map(AuthState::as_str)
}

fn auth_state(previous: Option<bool>, now: bool) -> Option<AuthState> {
    match (previous, now) {
        (None, true) | (Some(true), true) => Some(AuthState::Present),
        (Some(false), true) => Some(AuthState::Entered),
        (Some(true), false) => Some(AuthState::Left),
        (None, false) | (Some(false), false) => None,
    }
}

/// Whether the observation shows a password field or a sign-in form; the
/// caller keeps it as the next `previous_auth_surface`.
pub fn has_auth_surface(observation: &PageObservation) -> bool {
    let auth = &observation.signals.auth;
    auth.password_count > 0 || !auth.form_refs.is_empty()
}

/// Every hint of one observation, most urgent first, at most `MAX_HINTS`.
pub fn observation_hints(observation: &PageObservation, context: &HintContext) -> Vec<Hint> {
    let mut hints = Vec::new();
    hints.extend(access_blocked(observation, context));
    hints.extend(modal_overlay(observation));
    hints.extend(authentication_surface(observation, context));
    hints.extend(autocomplete(observation));
    hints.extend(filter_controls(observation));
    hints.truncate(MAX_HINTS);
    hints
}

fn access_blocked(observation: &PageObservation, context: &HintContext) -> Option<Hint> {
    let blocked = &observation.signals.blocked;
    let status = context
        .main_document_status
        .filter(|status| BLOCKED_STATUSES.contains(status));
    let mut evidence = Vec::new();
    if let Some(status) = status {
        evidence.push(format!("http_{status}"));
    }
    if blocked.captcha_frames > 0 {
        evidence.push("captcha_frame".to_owned());
    }
    // Phrases on a long page are likely content about blocking, not a block.
    if blocked.text_sample_complete {
        evidence.extend(
            blocked
                .phrases
                .iter()
                .map(|phrase| format!("text:{phrase}")),
        );
    }
    let (source, confidence) = match (status, evidence.len()) {
        (Some(_), _) => (HintSource::Network, Confidence::Strong),
        (None, 0) => return None,
        (None, 1) => (HintSource::Observation, Confidence::Medium),
        (None, _) => (HintSource::Observation, Confidence::Strong),
    };
    let mut hint = Hint::new(
        HintCode::AccessBlocked,
        source,
        confidence,
        RecommendedAction::StopAndReport,
    );
    hint.blocking = Some(true);
    hint.status = status;
    hint.evidence = evidence;
    Some(hint)
}

fn modal_overlay(observation: &PageObservation) -> Option<Hint> {
    let overlays = &observation.signals.overlays;
    let modal = overlays.iter().find(|overlay| overlay.modal);
    let (overlay, confidence, evidence) = match modal {
        Some(overlay) => (overlay, Confidence::Strong, "modal_dialog"),
        None => {
            let covering = overlays.iter().find(|overlay| {
                let high = overlay.z_index.unwrap_or(0) >= OVERLAY_MIN_Z_INDEX
                    || overlay.coverage >= OVERLAY_FULL_COVERAGE;
                overlay.coverage >= OVERLAY_MIN_COVERAGE
                    && (overlay.kind != OverlayKind::Covering || high)
            })?;
            let evidence = match covering.kind {
                OverlayKind::Covering => "covering_element",
                OverlayKind::Dialog | OverlayKind::AriaDialog => "large_dialog",
            };
            (covering, Confidence::Medium, evidence)
        }
    };
    let refs = overlay
        .overlay_ref
        .into_iter()
        .chain(overlay.control_refs.iter().copied());
    let mut hint = Hint::new(
        HintCode::ModalOverlay,
        HintSource::Observation,
        confidence,
        RecommendedAction::ResolveOverlayFirst,
    )
    .with_refs(refs);
    hint.blocking = Some(true);
    hint.evidence = vec![evidence.to_owned()];
    Some(hint)
}

fn authentication_surface(observation: &PageObservation, context: &HintContext) -> Option<Hint> {
    let now = has_auth_surface(observation);
    let state = auth_state(context.previous_auth_surface, now)?;
    let auth = &observation.signals.auth;
    let confidence = match (now, auth.password_count > 0) {
        (true, false) => Confidence::Medium,
        (true, true) | (false, _) => Confidence::Strong,
    };
    let refs = auth
        .password_refs
        .iter()
        .chain(auth.form_refs.iter())
        .copied();
    let mut hint = Hint::new(
        HintCode::AuthenticationSurface,
        HintSource::Observation,
        confidence,
        RecommendedAction::AuthenticateOrAskUser,
    )
    .with_refs(refs);
    hint.state = Some(state);
    if now {
        hint.evidence = match auth.password_count > 0 {
            true => vec!["password_field".to_owned()],
            false => vec!["sign_in_form".to_owned()],
        };
    }
    Some(hint)
}

fn autocomplete(observation: &PageObservation) -> Vec<Hint> {
    observation
        .signals
        .comboboxes
        .iter()
        .filter(|combobox| combobox.popup_visible && !combobox.option_refs.is_empty())
        .take(MAX_AUTOCOMPLETE_HINTS)
        .map(|combobox| {
            let confidence = match combobox.expanded {
                Some(true) => Confidence::Strong,
                Some(false) | None => Confidence::Medium,
            };
            // The combobox first, then its suggestions in DOM order.
            let mut hint = Hint::new(
                HintCode::Autocomplete,
                HintSource::Observation,
                confidence,
                RecommendedAction::ChooseSuggestionOrContinue,
            );
            hint.refs = std::iter::once(combobox.combobox_ref)
                .chain(combobox.option_refs.iter().copied())
                .take(MAX_REFS_PER_HINT)
                .collect();
            hint
        })
        .collect()
}

fn filter_controls(observation: &PageObservation) -> Vec<Hint> {
    observation
        .signals
        .filter_groups
        .iter()
        .filter(|group| !group.refs.is_empty())
        .take(MAX_FILTER_HINTS)
        .map(|group| {
            let confidence = match group.label_source.as_str() {
                "aria" | "legend" | "heading" => Confidence::Strong,
                _ => Confidence::Medium,
            };
            let mut hint = Hint::new(
                HintCode::FilterControls,
                HintSource::Observation,
                confidence,
                RecommendedAction::UseFilters,
            )
            .with_refs(group.refs.iter().copied());
            hint.evidence = vec![format!("label_{}", group.label_source)];
            hint
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn event_hints_keep_every_field_but_refs() {
        let mut hint = Hint::new(
            HintCode::ModalOverlay,
            HintSource::Observation,
            Confidence::Strong,
            RecommendedAction::ResolveOverlayFirst,
        )
        .with_refs([7, 3]);
        hint.blocking = Some(true);
        hint.evidence = vec!["dialog".to_owned()];
        let observed = serde_json::to_value(&hint).unwrap();
        assert_eq!(observed["refs"], json!([3, 7]));
        let event = serde_json::to_value(EventHint::from(hint)).unwrap();
        let mut expected = observed.clone();
        expected.as_object_mut().unwrap().remove("refs");
        assert_eq!(event, expected);
    }

    fn observation(signals: Value) -> PageObservation {
        let mut base = json!({
            "overlays": [], "comboboxes": [], "filterGroups": [],
            "auth": {"passwordCount": 0, "passwordRefs": [], "formRefs": []},
            "blocked": {"captchaFrames": 0, "phrases": [], "textSampleComplete": true}
        });
        for (key, value) in signals.as_object().unwrap() {
            base[key] = value.clone();
        }
        serde_json::from_value(json!({
            "documentKey": "doc:test",
            "elements": [],
            "page": {
                "viewport": {"width": 800, "height": 600},
                "document": {"width": 800, "height": 600},
                "scroll": {"x": 0, "y": 0},
                "remaining": {"up": 0, "down": 0, "left": 0, "right": 0},
                "percent": {"x": 0, "y": 0}
            },
            "truncated": false, "truncationReasons": [], "candidateCount": 0,
            "signals": base
        }))
        .unwrap()
    }

    fn hints(signals: Value, context: HintContext) -> Value {
        serde_json::to_value(observation_hints(&observation(signals), &context)).unwrap()
    }

    #[test]
    fn auth_transitions_follow_the_contract() {
        let cases = [
            (None, true, Some("present")),
            (None, false, None),
            (Some(false), true, Some("entered")),
            (Some(true), false, Some("left")),
            (Some(true), true, Some("present")),
            (Some(false), false, None),
        ];
        for (previous, now, expected) in cases {
            assert_eq!(
                auth_transition(previous, now),
                expected,
                "{previous:?} {now}"
            );
        }
    }

    #[test]
    fn nothing_on_a_plain_page() {
        assert_eq!(hints(json!({}), HintContext::default()), json!([]));
    }

    #[test]
    fn blocked_status_is_strong_and_blocking() {
        let context = HintContext {
            main_document_status: Some(429),
            previous_auth_surface: None,
        };
        assert_eq!(
            hints(json!({}), context),
            json!([{"code": "access_blocked", "source": "network", "confidence": "strong",
                "recommendedAction": "stop_and_report", "blocking": true, "status": 429,
                "evidence": ["http_429"]}])
        );
        let ok = HintContext {
            main_document_status: Some(200),
            previous_auth_surface: None,
        };
        assert_eq!(hints(json!({}), ok), json!([]));
    }

    #[test]
    fn blocked_text_counts_only_on_short_pages() {
        let short = hints(
            json!({"blocked": {"captchaFrames": 1, "phrases": ["unusual traffic"], "textSampleComplete": true}}),
            HintContext::default(),
        );
        assert_eq!(short[0]["confidence"], json!("strong"));
        assert_eq!(
            short[0]["evidence"],
            json!(["captcha_frame", "text:unusual traffic"])
        );
        let long = hints(
            json!({"blocked": {"captchaFrames": 0, "phrases": ["access denied"], "textSampleComplete": false}}),
            HintContext::default(),
        );
        assert_eq!(long, json!([]));
    }

    #[test]
    fn modal_dialog_beats_covering_and_lists_refs() {
        let value = hints(
            json!({"overlays": [
                {"kind": "dialog", "ref": 4, "modal": true, "coverage": 0.3, "zIndex": null, "controlRefs": [6, 5]},
                {"kind": "covering", "ref": null, "modal": false, "coverage": 1.0, "zIndex": 100, "controlRefs": [9]}
            ]}),
            HintContext::default(),
        );
        assert_eq!(
            value,
            json!([{"code": "modal_overlay", "source": "observation", "confidence": "strong",
                "recommendedAction": "resolve_overlay_first", "blocking": true, "refs": [4, 5, 6],
                "evidence": ["modal_dialog"]}])
        );
    }

    #[test]
    fn covering_needs_coverage_and_height() {
        let low = hints(
            json!({"overlays": [{"kind": "covering", "ref": null, "modal": false, "coverage": 0.6, "zIndex": 0, "controlRefs": [1]}]}),
            HintContext::default(),
        );
        assert_eq!(low, json!([]));
        let high = hints(
            json!({"overlays": [{"kind": "covering", "ref": null, "modal": false, "coverage": 0.6, "zIndex": 50, "controlRefs": [1]}]}),
            HintContext::default(),
        );
        assert_eq!(high[0]["confidence"], json!("medium"));
        assert_eq!(high[0]["refs"], json!([1]));
        let small_dialog = hints(
            json!({"overlays": [{"kind": "aria_dialog", "ref": 3, "modal": false, "coverage": 0.1, "zIndex": 5, "controlRefs": []}]}),
            HintContext::default(),
        );
        assert_eq!(small_dialog, json!([]));
    }

    #[test]
    fn auth_hint_carries_state_and_left_has_no_refs() {
        let auth = json!({"auth": {"passwordCount": 1, "passwordRefs": [3], "formRefs": [2, 4]}});
        let present = hints(auth.clone(), HintContext::default());
        assert_eq!(present[0]["code"], json!("authentication_surface"));
        assert_eq!(present[0]["state"], json!("present"));
        assert_eq!(present[0]["refs"], json!([2, 3, 4]));
        assert_eq!(
            present[0]["recommendedAction"],
            json!("authenticate_or_ask_user")
        );
        let entered = hints(
            auth,
            HintContext {
                main_document_status: None,
                previous_auth_surface: Some(false),
            },
        );
        assert_eq!(entered[0]["state"], json!("entered"));
        let left = hints(
            json!({}),
            HintContext {
                main_document_status: None,
                previous_auth_surface: Some(true),
            },
        );
        assert_eq!(left[0]["state"], json!("left"));
        assert!(left[0].get("refs").is_none());
        let form_only = observation(
            json!({"auth": {"passwordCount": 0, "passwordRefs": [], "formRefs": [1, 2]}}),
        );
        assert!(has_auth_surface(&form_only));
        let hint = &observation_hints(&form_only, &HintContext::default())[0];
        assert_eq!(hint.confidence, Confidence::Medium);
    }

    #[test]
    fn autocomplete_needs_visible_options() {
        let value = hints(
            json!({"comboboxes": [
                {"ref": 2, "expanded": true, "autocomplete": "list", "popupVisible": true, "optionRefs": [3, 4]},
                {"ref": 7, "expanded": false, "autocomplete": null, "popupVisible": false, "optionRefs": []}
            ]}),
            HintContext::default(),
        );
        assert_eq!(
            value,
            json!([{"code": "autocomplete", "source": "observation", "confidence": "strong",
                "recommendedAction": "choose_suggestion_or_continue", "refs": [2, 3, 4]}])
        );
    }

    #[test]
    fn filter_groups_become_hints_with_label_confidence() {
        let value = hints(
            json!({"filterGroups": [
                {"label": "Filter results", "labelSource": "heading", "refs": [5, 6]},
                {"label": "filters sidebar", "labelSource": "attribute", "refs": [9]}
            ]}),
            HintContext::default(),
        );
        assert_eq!(value[0]["code"], json!("filter_controls"));
        assert_eq!(value[0]["confidence"], json!("strong"));
        assert_eq!(value[0]["recommendedAction"], json!("use_filters"));
        assert_eq!(value[0]["refs"], json!([5, 6]));
        assert_eq!(value[1]["confidence"], json!("medium"));
    }

    #[test]
    fn hint_refs_are_bounded() {
        let many: Vec<u32> = (1..=100).collect();
        let value = hints(
            json!({"filterGroups": [{"label": "Filters", "labelSource": "aria", "refs": many}]}),
            HintContext::default(),
        );
        assert_eq!(
            value[0]["refs"].as_array().unwrap().len(),
            MAX_REFS_PER_HINT
        );
    }

    #[test]
    fn constructed_hints_have_their_shapes() {
        let started = serde_json::to_value(Hint::download(
            DownloadPhase::InProgress,
            Some("download:1".to_owned()),
            None,
        ))
        .unwrap();
        assert_eq!(
            started,
            json!({"code": "download", "source": "download", "confidence": "strong",
                "recommendedAction": "wait_for_download", "phase": "in_progress",
                "downloadId": "download:1"})
        );
        let done = Hint::download(
            DownloadPhase::Completed,
            None,
            Some("artifact:9".to_owned()),
        );
        assert_eq!(done.recommended_action, RecommendedAction::InspectArtifact);
        let failed = Hint::download(DownloadPhase::Failed, None, None);
        assert_eq!(failed.recommended_action, RecommendedAction::InspectFailure);
        assert_eq!(
            serde_json::to_value(Hint::repeated_action("consecutive_mismatches")).unwrap(),
            json!({"code": "repeated_action", "source": "watchdog", "confidence": "strong",
                "recommendedAction": "change_strategy", "reason": "consecutive_mismatches"})
        );
    }
}
