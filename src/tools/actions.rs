//! The action tools' shared plumbing: ref properties and evidence schemas, the before state,
//! effect collection, the dialog-aware final dispatch and the closing Observation with the
//! no-progress check. The tools themselves are one file per family: `click.rs`, `keys.rs`,
//! `scroll.rs`, `dropdowns.rs`, `dialogs.rs`.
//!
//! Evidence is browser-level: what the page observably did after the action (states of the
//! acted-on element, navigation, a new document, popups, dialogs). Every action returns a fresh
//! Observation; hosts decide from it whether the task succeeded. Nothing is retried, accepted or
//! dismissed automatically.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::context::{TargetScope, ToolEnv};
use super::error::ToolError;
use super::evidence::{Effect, Evidence};
use super::manifest::{described, object, open_object};
use super::observe::{observation_schema, observe_input_properties, observe_request};
use super::progress::{self, Subject};
use super::tab::{ControlledTab, PageContext, TakenObservation, page_context};
use crate::cdp::{CdpClient, CdpError, TargetId};
use crate::events::Emit;
use crate::page::{ElementState, EventHint, RefTarget, StateSnapshot};
use crate::protocol::errors::{ErrorCode, RpcError};
use crate::session::{LoadMark, TabGuard};

/// How long an action waits for effects that follow input (field notes §0 item 10: 2-10 ms
/// typically; a little more covers microtask-scheduled handlers).
pub(super) const SETTLE: Duration = Duration::from_millis(15);
/// After a navigation starts, how long to wait for the new document to load.
const NAVIGATION_SETTLE: Duration = Duration::from_secs(5);
/// Timeout of one input event.
pub(super) const INPUT_TIMEOUT: Duration = Duration::from_secs(10);
/// The `observe` argument every action accepts (options of the closing Observation).
pub(super) fn observe_property() -> Value {
    json!({"observe": described(object(observe_input_properties(), &[]), "Options of the fresh Observation this action returns.")})
}

pub(super) fn ref_properties() -> Value {
    json!({
        "observationId": {"type": "string", "minLength": 1, "maxLength": 128, "description": "Observation the ref belongs to; give with ref."},
        "ref": {"type": "integer", "minimum": 1, "description": "Element ref from that Observation's element list."},
    })
}

/// A viewport coordinate argument (CSS pixels of the selected frame).
pub(super) fn point_property(description: &str) -> Value {
    json!({"type": "number", "minimum": 0, "maximum": 100000, "description": description})
}

pub(super) fn merged(mut base: Value, extra: Value) -> Value {
    if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
        base.extend(extra.clone());
    }
    base
}

/// An action's result: evidence plus a fresh Observation, except while a dialog the action
/// opened blocks the page (`dialogOpen: true`, no Observation until it is answered).
pub(super) fn action_output(evidence: Value) -> Value {
    let mut schema = observation_schema();
    schema["properties"]["evidence"] = evidence;
    schema["properties"]["dialogOpen"] = json!({"type": "boolean"});
    schema["required"] = json!(["targetId", "evidence"]);
    schema
}

pub(super) fn evidence_schema(action: &str) -> Value {
    open_object(
        json!({
            "action": {"const": action},
            "status": {"enum": ["verified", "mismatch", "unavailable"]},
            "kind": {"type": "string"},
            "effects": {"type": "array", "items": {"enum": Effect::ALL.map(Effect::as_str)}},
        }),
        &["action", "status", "effects"],
    )
}

pub(super) struct Before {
    pub(super) url: String,
    pub(super) popups: usize,
    pub(super) element: Option<ElementState>,
    /// File choosers the tab had opened before the action (`TabGuard::file_choosers`).
    pub(super) file_choosers: u64,
    /// The action targets a file input, whose chooser the browser reports a little later.
    pub(super) expects_chooser: bool,
    /// The tab's load history before the input: a navigation after it is the action's.
    pub(super) load: LoadMark,
    /// When the browser acknowledged the action's last input event, if the action noted it:
    /// the settle window counts from there, so work done since (reading the click-truth record)
    /// overlaps it. Otherwise the window starts when effects are collected.
    pub(super) input_done: Option<tokio::time::Instant>,
    /// The target's state read right after the input, set by an action when it already shows
    /// the action's expected outcome (a checkbox toggled, the text in the field): the settle
    /// window is then skipped unless the tab's network moved since `taken`.
    pub(super) shown: Option<ElementState>,
    /// The tab's URL read together with `shown`.
    pub(super) shown_url: Option<String>,
    /// When this before state was taken (the action's input came after it).
    pub(super) taken: tokio::time::Instant,
}

impl Before {
    /// The tab's state before an action that expects no file chooser: its URL, popups, file
    /// choosers and load history, with `element` (the target's state, when it has one).
    pub(super) async fn read(
        env: &ToolEnv,
        tab: &mut ControlledTab,
        element: Option<ElementState>,
    ) -> Before {
        let url = current_url(&tab.client, &mut tab.guard).await;
        Before::new(env, &tab.guard, url, element, false)
    }

    /// The before state from a URL the action already read (`current_url`), taken now.
    pub(super) fn new(
        env: &ToolEnv,
        guard: &TabGuard,
        url: String,
        element: Option<ElementState>,
        expects_chooser: bool,
    ) -> Before {
        Before {
            url,
            popups: env.browser.popups_of(&guard.target),
            element,
            file_choosers: guard.file_choosers().opened(),
            expects_chooser,
            load: guard.load_mark(),
            input_done: None,
            shown: None,
            shown_url: None,
            taken: tokio::time::Instant::now(),
        }
    }

    /// Whether the settle window can be skipped: the action's expected outcome already shows
    /// (`shown`) and no request of the tab started or ended since the input, so nothing the
    /// page was waiting for is pending. Effects later than this are the late watch's.
    fn settled_early(&self, guard: &TabGuard) -> bool {
        self.shown.is_some() && network_quiet_since(guard, self.taken)
    }
}

/// Whether the tab's network is counted and no request of it started or ended since `since`.
pub(super) fn network_quiet_since(guard: &TabGuard, since: tokio::time::Instant) -> bool {
    let network = guard.activity().network();
    network.counting && network.in_flight == 0 && network.quiet_since <= since
}

/// How long an action on a file input waits for the browser to report its (intercepted)
/// chooser; other actions only get the settle window.
const CHOOSER_PATIENCE: Duration = Duration::from_secs(2);
/// Poll step of that wait.
const CHOOSER_POLL: Duration = Duration::from_millis(10);

/// Whether the tab opened a file chooser since `before`; waits up to [`CHOOSER_PATIENCE`]
/// when the action targeted a file input.
async fn chooser_opened(guard: &TabGuard, before: &Before) -> bool {
    let until = tokio::time::Instant::now() + CHOOSER_PATIENCE;
    loop {
        if guard.file_choosers().opened() > before.file_choosers {
            return true;
        }
        if !before.expects_chooser || tokio::time::Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(CHOOSER_POLL).await;
    }
}

pub(super) async fn snapshot(
    client: &CdpClient,
    ctx: &PageContext,
    target: &RefTarget,
) -> Result<ElementState, ToolError> {
    ctx.run(client, &StateSnapshot(target.clone()))
        .await
        .map_err(ToolError::from)
}

/// The tab's committed top-level URL, from the browser's history (never the page's world).
pub(super) async fn current_url(client: &CdpClient, guard: &mut TabGuard) -> String {
    match guard.page_info(client).await {
        Ok((url, _)) => url,
        Err(_) => String::new(),
    }
}

/// What changed after an input action, and how it compares with what the control should do.
pub(super) struct Effects {
    pub(super) list: Vec<Effect>,
    pub(super) after: Option<ElementState>,
    pub(super) dialog: bool,
    /// Judged from what was read right after the input, with no settle window and nothing
    /// started since: an Observation taken with those reads shows the page as judged.
    pub(super) in_place: bool,
}

pub(super) async fn collect_effects(
    env: &ToolEnv,
    client: &CdpClient,
    guard: &mut TabGuard,
    before: &Before,
    target: Option<&RefTarget>,
    dialogs: &mut tokio::sync::broadcast::Receiver<TargetId>,
    dialog_seen: bool,
) -> Effects {
    // Late effects of the input (microtask handlers, a navigation commit) get the settle window;
    // a dialog already open blocks the page, so there is nothing to wait for. The window ends
    // early when the main frame starts navigating or a dialog opens: there is no need to wait
    // for what already happened. Effects after it are the late watch's (`watch_late_effects`).
    let tab = guard.target.clone();
    let mut dialog = dialog_seen;
    let early = !dialog_seen && before.settled_early(guard);
    if !dialog_seen && !early {
        let until = before.input_done.unwrap_or_else(tokio::time::Instant::now) + SETTLE;
        let handle = guard.handle();
        tokio::select! {
            _ = handle.wait_navigation_since(&before.load, until) => {}
            opened = dialog_on(dialogs, &tab) => dialog = opened,
        }
    }
    let mut list = Vec::new();
    let dialog = dialog || drain_dialog(dialogs, &tab);
    if dialog {
        list.push(Effect::DialogOpened);
        // The page is paused behind the dialog: nothing else can be read until it is answered.
        return Effects {
            list,
            after: None,
            dialog,
            in_place: false,
        };
    }
    // The window may have ended on a navigation that started but has not committed yet: the
    // history still shows the old URL until it does, so wait for it to settle first.
    let started = guard.handle().navigated_since(&before.load);
    if started {
        wait_loaded(client, guard).await;
    }
    let url = match (early, &before.shown_url, started) {
        // Read with `shown`, right after the input: no window followed, nothing started since.
        (true, Some(url), false) => url.clone(),
        _ => current_url(client, guard).await,
    };
    if !url.is_empty() && url != before.url {
        list.push(Effect::Navigation);
        if !started {
            wait_loaded(client, guard).await;
        }
    }
    let mut after = None;
    let mut in_place = false;
    if let (true, Some(state), Some(element_before), false) = (
        early,
        &before.shown,
        &before.element,
        started || list.contains(&Effect::Navigation),
    ) {
        // Read after the input and nothing moved since: the state is the one shown.
        state_effects(element_before, state, &mut list);
        after = Some(state.clone());
        in_place = true;
    } else if let (Some(target), Some(element_before)) = (target, &before.element) {
        match page_context(client, guard).await {
            Ok(ctx) => match snapshot(client, &ctx, target).await {
                Ok(state) if state.document_key == element_before.document_key => {
                    state_effects(element_before, &state, &mut list);
                    after = Some(state);
                }
                _ => list.push(Effect::DocumentChanged),
            },
            Err(_) => list.push(Effect::DocumentChanged),
        }
    }
    if env.browser.popups_of(&tab) > before.popups {
        list.push(Effect::PopupOpened);
    }
    if chooser_opened(guard, before).await {
        list.push(Effect::FileChooserOpened);
    }
    Effects {
        list,
        after,
        dialog,
        in_place,
    }
}

/// How long after an action's evidence was taken a navigation, popup or dialog of its tab is
/// still attributed to it (field notes §0 item 10: a `setTimeout` navigation arrived at +203 ms).
const LATE_WINDOW: Duration = Duration::from_millis(300);
/// How often the late watch looks at the tab's popup count (navigations and dialogs wake it).
const LATE_POPUP_POLL: Duration = Duration::from_millis(10);

/// Starts the late watch of an action whose evidence is `reported`: for [`LATE_WINDOW`] after
/// now, a main-frame navigation, a popup or a dialog of the tab that the evidence does not list
/// yet is announced as an `action.late_effect` event naming the action's Command (one event per
/// effect, docs/observation.md "Late effects"). The action's result does not wait for it. The
/// watch ends early when a later Command takes the tab (its effects are its own).
pub(super) fn watch_late_effects(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    guard: &TabGuard,
    reported: &[Effect],
    action: &'static str,
) {
    let handle = guard.handle();
    let turn = guard.turn_number();
    let tab = guard.target.clone();
    let mark = handle.load_mark();
    let browser = env.browser.clone();
    let events = env.events.clone();
    let mut dialogs = browser.dialog_signals();
    let popups = browser.popups_of(&tab);
    let mut want_navigation =
        !reported.contains(&Effect::Navigation) && !reported.contains(&Effect::DocumentChanged);
    let mut want_popup = !reported.contains(&Effect::PopupOpened);
    let mut want_dialog =
        !reported.contains(&Effect::DialogOpened) && !browser.with_dialog_on(&tab);
    let announce = {
        let (workspace_id, lease_id) = (scope.workspace_id.to_owned(), scope.lease_id.to_owned());
        let (target_id, command_id) = (scope.target_id.to_owned(), scope.command_id.clone());
        move |effect: Effect| {
            let payload = json!({"targetId": target_id, "commandId": command_id, "action": action, "effect": effect.as_str()});
            let mut emit = Emit::new(&workspace_id, "action.late_effect", payload);
            emit.lease_id = Some(lease_id.clone());
            emit.target_id = Some(target_id.clone());
            emit
        }
    };
    tokio::spawn(async move {
        let until = tokio::time::Instant::now() + LATE_WINDOW;
        while (want_navigation || want_popup || want_dialog) && tokio::time::Instant::now() < until
        {
            let tick = std::cmp::min(until, tokio::time::Instant::now() + LATE_POPUP_POLL);
            let mut found = Vec::new();
            tokio::select! {
                moved = handle.wait_navigation_since(&mark, tick), if want_navigation => {
                    if moved {
                        want_navigation = false;
                        found.push(Effect::Navigation);
                    }
                }
                opened = dialog_on(&mut dialogs, &tab), if want_dialog => {
                    if opened {
                        want_dialog = false;
                        found.push(Effect::DialogOpened);
                    }
                }
                () = tokio::time::sleep_until(tick), if !want_navigation => {}
            }
            if want_popup && browser.popups_of(&tab) > popups {
                want_popup = false;
                found.push(Effect::PopupOpened);
            }
            // Once a later Command has the tab, what happens may be its doing: stop attributing.
            if handle.later_turn_started(turn) {
                break;
            }
            for effect in found {
                if let Err(error) = events.emit(announce(effect)).await {
                    tracing::debug!(%error, "action.late_effect not journaled");
                }
            }
        }
    });
}

/// Resolves when a dialog opens on `tab` (true); never resolves otherwise, until the channel
/// closes (false).
async fn dialog_on(
    dialogs: &mut tokio::sync::broadcast::Receiver<TargetId>,
    tab: &TargetId,
) -> bool {
    loop {
        match dialogs.recv().await {
            Ok(target) if &target == tab => return true,
            Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
            Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                return std::future::pending().await;
            }
        }
    }
}

fn drain_dialog(dialogs: &mut tokio::sync::broadcast::Receiver<TargetId>, tab: &TargetId) -> bool {
    let mut seen = false;
    while let Ok(target) = dialogs.try_recv() {
        seen |= &target == tab;
    }
    seen
}

pub(super) fn state_effects(before: &ElementState, after: &ElementState, list: &mut Vec<Effect>) {
    if before.checked != after.checked {
        list.push(Effect::CheckedChanged);
    }
    if before.selected != after.selected || before.selected_values != after.selected_values {
        list.push(Effect::SelectedChanged);
    }
    if before.pressed != after.pressed {
        list.push(Effect::PressedChanged);
    }
    if before.expanded != after.expanded {
        list.push(Effect::ExpandedChanged);
    }
    if before.value != after.value || before.value_length != after.value_length {
        list.push(Effect::ValueChanged);
    }
    if before.focused != after.focused {
        list.push(Effect::FocusChanged);
    }
}

/// Waits (bounded) until the tab's lifecycle events show the new document loaded.
async fn wait_loaded(_client: &CdpClient, guard: &mut TabGuard) {
    let until = tokio::time::Instant::now() + NAVIGATION_SETTLE;
    guard.wait_until_settled(until).await;
}

/// Sends the final input event; if the page opens a dialog, Chromium does not answer the event
/// until the dialog is answered, so a dialog ends the wait instead.
pub(super) async fn dispatch_final<F>(
    env: &ToolEnv,
    tab: &TargetId,
    dialogs: &mut tokio::sync::broadcast::Receiver<TargetId>,
    send: F,
) -> Result<bool, ToolError>
where
    F: std::future::Future<Output = Result<(), CdpError>> + Send + 'static,
{
    let pending = tokio::spawn(send);
    tokio::pin!(pending);
    loop {
        tokio::select! {
            done = &mut pending => return match done {
                Ok(Ok(())) => Ok(false),
                Ok(Err(error)) => Err(ToolError::from(error)),
                Err(_) => Err(ToolError::from(RpcError::new(ErrorCode::InternalError, "input task failed"))),
            },
            signal = dialogs.recv() => match signal {
                Ok(target) if &target == tab => return Ok(true),
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    if env.browser.with_dialog_on(tab) {
                        return Ok(true);
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => {}
            },
        }
    }
}

/// An action's outcome on its way out: the evidence, and what the no-progress detector needs
/// (never sent).
pub(super) struct Finished<'a> {
    pub(super) arguments: &'a Map<String, Value>,
    pub(super) evidence: Evidence,
    /// A dialog the action opened blocks the page: no Observation until it is answered.
    pub(super) dialog_open: bool,
    /// What was acted on, for the action's signature.
    pub(super) subject: Subject,
    /// The frame the action ran in.
    pub(super) frame_id: String,
    /// The closing Observation when the action already took it (with the `observe` options of
    /// its arguments, after its last input and settle): used instead of taking another.
    pub(super) observation: Option<TakenObservation>,
}

/// The options of an action's closing Observation (its `observe` argument).
pub(super) fn closing_request(
    arguments: &Map<String, Value>,
) -> Result<super::observation::ObservationRequest, ToolError> {
    match arguments.get("observe").and_then(Value::as_object) {
        Some(observe) => observe_request(observe),
        None => Ok(Default::default()),
    }
}

pub(super) async fn finish_with_observation(
    env: &ToolEnv,
    tab: &mut ControlledTab,
    scope: &TargetScope<'_>,
    finished: Finished<'_>,
) -> Result<Value, ToolError> {
    let Finished {
        arguments,
        evidence,
        dialog_open,
        subject,
        frame_id,
        observation,
    } = finished;
    let mut fingerprint = None;
    let mut result = match dialog_open {
        true => {
            // The page is blocked by the dialog; an Observation would wait for it.
            let mut result = Map::new();
            result.insert("workspaceId".into(), json!(scope.workspace_id));
            result.insert("leaseId".into(), json!(scope.lease_id));
            result.insert("targetId".into(), json!(scope.target_id));
            result.insert("dialogOpen".into(), json!(true));
            result
        }
        false => {
            let taken = match observation {
                Some(taken) => taken,
                None => {
                    let request = closing_request(arguments)?;
                    tab.observe_with_fingerprint(scope, &request).await?
                }
            };
            fingerprint = taken.fingerprint;
            taken.result
        }
    };
    let action = evidence.action.as_str();
    let session = tab.session_key();
    let actor = progress::Actor {
        workspace_id: scope.workspace_id,
        lease_id: scope.lease_id,
        session: &session,
        frame_id: &frame_id,
        control_epoch: tab.guard.control_epoch(),
    };
    let page = fingerprint;
    let completed = progress::Completed::new(
        actor,
        progress::signature(action, &subject, arguments),
        &evidence,
        page,
    );
    let crossed = tab.record_progress(completed);
    if let Some(crossed) = crossed {
        let hint = crossed.reason.hint();
        let event_hints = [EventHint::from(hint.clone())];
        let hint = serde_json::to_value(hint)?;
        if let Some(Value::Array(hints)) = result.get_mut("hints") {
            hints.push(hint);
        }
        let workspace_id = scope.workspace_id;
        let mut emit = Emit::new(
            workspace_id,
            "watchdog.no_progress",
            json!({"targetId": scope.target_id, "action": action, "reason": crossed.reason.as_str(), "consecutiveActions": crossed.consecutive, "hints": event_hints}),
        );
        emit.lease_id = Some(scope.lease_id.to_owned());
        emit.target_id = Some(scope.target_id.to_owned());
        if let Err(error) = env.events.emit(emit).await {
            tracing::debug!(%error, "watchdog.no_progress not journaled");
        }
    }
    result.insert("evidence".into(), serde_json::to_value(&evidence)?);
    Ok(Value::Object(result))
}
