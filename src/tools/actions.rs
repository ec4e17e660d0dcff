//! Actions with evidence: `browser.click` (keyboard and typing tools are in `keys.rs`),
//! `browser.scroll`, `browser.dropdown.options`, `browser.dropdown.select`,
//! and the out-of-band dialog tools `browser.dialogs.list` / `browser.dialogs.respond`.
//!
//! Evidence is browser-level: what the page observably did after the action (states of the
//! acted-on element, navigation, a new document, popups, dialogs). Every action returns a fresh
//! Observation; hosts decide from it whether the task succeeded. Nothing is retried, accepted or
//! dismissed automatically.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::context::{CallScope, ToolEnv, str_arg, u32_arg};
use super::error::ToolError;
use super::evidence::{Action, Effect, Evidence, EvidenceReason, Status};
use super::manifest::{Gate, Lane, Scope, ToolDef, object, open_object};
use super::observe::{observation_schema, observe_input_properties, observe_options};
use super::pointer;
use super::progress::{self, Subject};
use super::tab::{ControlledTab, PageContext, SCRIPT_TIMEOUT, page_context};
use crate::cdp::{CdpClient, CdpError, TargetId};
use crate::events::Emit;
use crate::page::{
    self, ArmClick, Checked, ClickEvent, ClickPoint, ClickRecord, ClickVerdict, Delivery,
    ElementState, EventHint, ListOptions, RefTarget, ScrollContainer, ScrollPage, ScrollPosition,
    ScrollToText, ScrollXY, SelectOptions, StateSnapshot,
};
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};
use crate::session::TabGuard;

/// How long an action waits for effects that follow input (field notes §0 item 10: 2-10 ms
/// typically; a little more covers microtask-scheduled handlers).
pub(super) const SETTLE: Duration = Duration::from_millis(15);
/// After a navigation starts, how long to wait for the new document to load.
const NAVIGATION_SETTLE: Duration = Duration::from_secs(5);
/// Timeout of one input event.
pub(super) const INPUT_TIMEOUT: Duration = Duration::from_secs(10);
pub(super) fn ref_properties() -> Value {
    json!({"observationId": {"type": "string", "minLength": 1, "maxLength": 128}, "ref": {"type": "integer", "minimum": 1}})
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

/// Click evidence adds how the click met its element (docs/observation.md, "Click evidence").
fn click_evidence_schema() -> Value {
    let mut schema = evidence_schema("click");
    schema["properties"]["delivery"] =
        json!({"enum": ["reached", "intercepted", "stopped", "not_observed", "unknown"]});
    schema["properties"]["defaultPrevented"] = json!({"type": "boolean"});
    schema["properties"]["reason"] = json!({"enum": ["no_observable_effect", "click_intercepted", "propagation_stopped", "click_not_observed", "default_prevented"]});
    schema
}

pub fn defs() -> Vec<ToolDef> {
    let observe = json!({"observe": object(observe_input_properties(), &[])});
    vec![
        ToolDef {
            name: "browser.click",
            description: "Click an Observation ref or viewport coordinates of the selected frame (transformed frames included); `button` left|right|middle, `clickCount` 2 for a double click. A ref click first waits until its element is attached, visible, stable, enabled and not covered, else element_not_actionable with context.reason. Returns evidence {action, status: verified|mismatch|unavailable, kind, effects, delivery} and a fresh Observation; verified only when the click reached the element. A dialog the click opens stays open (see browser.dialogs.*).",
            capability: "action.input",
            scope: Scope::Target,
            mutating: true,
            input_schema: {
                let mut schema = object(
                    merged(
                        merged(
                            ref_properties(),
                            json!({
                                "x": {"type": "number", "minimum": 0, "maximum": 100000},
                                "y": {"type": "number", "minimum": 0, "maximum": 100000},
                                "button": {"enum": ["left", "right", "middle"]},
                                "clickCount": {"type": "integer", "minimum": 1, "maximum": 2},
                            }),
                        ),
                        observe.clone(),
                    ),
                    &[],
                );
                schema["anyOf"] =
                    json!([{"required": ["observationId", "ref"]}, {"required": ["x", "y"]}]);
                schema
            },
            output_schema: action_output(click_evidence_schema()),
            sensitivity_input: &[],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(click),
        },
        ToolDef {
            name: "browser.scroll",
            description: "Scroll the page (`direction` and `amount` in pixels, or `page`), an Observation ref into view, a CSS-selected container, or to the first visible text match (`text`). Returns typed evidence (before/after scroll position) and a fresh Observation.",
            capability: "action.input",
            scope: Scope::Target,
            mutating: false,
            input_schema: object(
                merged(
                    merged(
                        ref_properties(),
                        json!({
                            "direction": {"enum": ["up", "down", "left", "right"]},
                            "amount": {"type": "integer", "minimum": 1, "maximum": 100000},
                            "selector": {"type": "string", "minLength": 1, "maxLength": 1024},
                            "text": {"type": "string", "minLength": 1, "maxLength": 1024, "x-browser-pilot-sensitivity": ["browser_data"]},
                        }),
                    ),
                    observe.clone(),
                ),
                &[],
            ),
            output_schema: action_output(evidence_schema("scroll")),
            sensitivity_input: &["browser_data"],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(scroll),
        },
        ToolDef {
            name: "browser.dropdown.options",
            description: "List the options of a native select or of a currently exposed ARIA listbox/combobox (an Observation ref), bounded.",
            capability: "observation.read",
            scope: Scope::Target,
            mutating: false,
            input_schema: object(
                merged(
                    ref_properties(),
                    json!({"limit": {"type": "integer", "minimum": 1, "maximum": page::OPTIONS_MAX_LIMIT}}),
                ),
                &["observationId", "ref"],
            ),
            output_schema: open_object(
                json!({
                    "kind": {"enum": ["native", "aria"]},
                    "multiple": {"type": "boolean"},
                    "options": {"type": "array", "items": {"type": "object", "x-browser-pilot-sensitivity": ["browser_data"]}},
                    "total": {"type": "integer"},
                    "truncated": {"type": "boolean"},
                }),
                &["kind", "options", "total", "truncated"],
            ),
            sensitivity_input: &[],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(dropdown_options),
        },
        ToolDef {
            name: "browser.dropdown.select",
            description: "Select option(s) of a native select by value (or by label) and verify the value change; for custom ARIA listboxes, click the option's ref from a fresh Observation instead.",
            capability: "action.input",
            scope: Scope::Target,
            mutating: true,
            input_schema: object(
                merged(
                    merged(
                        ref_properties(),
                        json!({
                            "values": {"type": "array", "minItems": 1, "maxItems": 500, "items": {"type": "string", "maxLength": 1000}},
                            "labels": {"type": "array", "minItems": 1, "maxItems": 500, "items": {"type": "string", "maxLength": 1000}},
                        }),
                    ),
                    observe.clone(),
                ),
                &["observationId", "ref"],
            ),
            output_schema: action_output(evidence_schema("select")),
            sensitivity_input: &["browser_data"],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(dropdown_select),
        },
        ToolDef {
            name: "browser.dialogs.list",
            description: "JavaScript dialogs (alert, confirm, prompt, beforeunload) open on tabs this Workspace knows. Out-of-band: answers even while the command that opened the dialog is still pending.",
            capability: "observation.read",
            scope: Scope::Workspace,
            mutating: false,
            input_schema: object(json!({}), &[]),
            output_schema: open_object(
                json!({"dialogs": {"type": "array", "items": open_object(json!({
                "dialogId": {"type": "string"},
                "targetId": {"type": "string"},
                "type": {"type": "string"},
                "message": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
                "defaultPrompt": {"type": ["string", "null"], "x-browser-pilot-sensitivity": ["browser_data"]},
                "url": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
                "openedAt": {"type": "integer"},
            }), &["dialogId", "targetId", "type", "message"])}}),
                &["dialogs"],
            ),
            sensitivity_input: &[],
            sensitivity_output: &["browser_data"],
            lane: Lane::OutOfBand,
            gate: Gate::Dispatch,
            handler: handler!(dialogs_list),
        },
        ToolDef {
            name: "browser.dialogs.respond",
            description: "Answer a dialog explicitly: `action` accept or dismiss, `promptText` for prompts. Out-of-band. Browser Pilot never answers a dialog by itself.",
            capability: "action.input",
            scope: Scope::Workspace,
            mutating: true,
            input_schema: object(
                json!({
                    "dialogId": {"type": "string", "minLength": 1, "maxLength": 128},
                    "action": {"enum": ["accept", "dismiss"]},
                    "promptText": {"type": "string", "maxLength": 10000, "x-browser-pilot-sensitivity": ["browser_data"]},
                }),
                &["dialogId", "action"],
            ),
            output_schema: open_object(
                json!({"dialogId": {"type": "string"}, "action": {"type": "string"}, "closed": {"type": "boolean"}}),
                &["dialogId", "action", "closed"],
            ),
            sensitivity_input: &["browser_data"],
            sensitivity_output: &[],
            lane: Lane::OutOfBand,
            gate: Gate::Dispatch,
            handler: handler!(dialogs_respond),
        },
    ]
}

pub(super) struct Before {
    pub(super) url: String,
    pub(super) popups: usize,
    pub(super) element: Option<ElementState>,
}

pub(super) async fn snapshot(
    client: &CdpClient,
    ctx: &PageContext,
    target: &RefTarget,
) -> Result<ElementState, ToolError> {
    page::run(
        client,
        &ctx.session,
        ctx.context,
        &StateSnapshot(target.clone()),
        SCRIPT_TIMEOUT,
    )
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
    let mut list = Vec::new();
    let tab = guard.target.clone();
    let dialog = dialog_seen || drain_dialog(dialogs, &tab);
    if dialog {
        list.push(Effect::DialogOpened);
        // The page is paused behind the dialog: nothing else can be read until it is answered.
        return Effects {
            list,
            after: None,
            dialog,
        };
    }
    let url = current_url(client, guard).await;
    if !url.is_empty() && url != before.url {
        list.push(Effect::Navigation);
        wait_loaded(client, guard).await;
    }
    let mut after = None;
    if let (Some(target), Some(element_before)) = (target, &before.element) {
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
    Effects {
        list,
        after,
        dialog,
    }
}

fn drain_dialog(dialogs: &mut tokio::sync::broadcast::Receiver<TargetId>, tab: &TargetId) -> bool {
    let mut seen = false;
    while let Ok(target) = dialogs.try_recv() {
        seen |= &target == tab;
    }
    seen
}

fn state_effects(before: &ElementState, after: &ElementState, list: &mut Vec<Effect>) {
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

fn checked_json(checked: Option<Checked>) -> Value {
    match checked {
        Some(Checked::True) => json!(true),
        Some(Checked::False) => json!(false),
        Some(Checked::Mixed) => json!("mixed"),
        None => Value::Null,
    }
}

/// Click evidence. A ref click is `verified` only when its click reached the element: the
/// click-truth record (`record`) saw a trusted click aimed inside the element reach its target,
/// and then a semantic control must also reach its expected state, and anything else must show
/// an observable effect. A click that landed elsewhere or was stopped on its way is a
/// `mismatch`, one whose default the page prevented with no other effect too; no trusted click
/// at all is `unavailable`. Without a readable record (the click navigated, replaced the
/// document or opened a dialog) the effects decide as before, but focus alone proves nothing.
fn click_evidence(
    kind: &str,
    effects: &Effects,
    before: Option<&ElementState>,
    record: Option<&ClickRecord>,
) -> Evidence {
    let after = effects.after.as_ref();
    let left_page = effects.list.iter().any(|e| e.leaves_page());
    let expected = match kind {
        "checkbox" | "switch" | "menuitemcheckbox" => {
            Some(after.is_some_and(|a| before.is_some_and(|b| a.checked != b.checked)))
        }
        "radio" | "menuitemradio" => Some(after.is_some_and(|a| a.checked == Some(Checked::True))),
        "tab" | "option" | "treeitem" if after.is_some_and(|a| a.selected.is_some()) => {
            Some(after.is_some_and(|a| a.selected == Some(true)))
        }
        _ if before.is_some_and(|b| b.pressed.is_some()) => {
            Some(after.is_some_and(|a| before.is_some_and(|b| a.pressed != b.pressed)))
        }
        _ if before.is_some_and(|b| b.expanded.is_some()) => {
            Some(after.is_some_and(|a| before.is_some_and(|b| a.expanded != b.expanded)))
        }
        _ => None,
    };
    let delivery = record.and_then(ClickRecord::delivery);
    let prevented = record.is_some_and(|r| r.prevented) && delivery == Some(Delivery::Reached);
    // Effects that are more than the focus a mousedown moves.
    let effected = effects.list.iter().any(|e| *e != Effect::FocusChanged);
    let by_effects = match (expected, effects.list.is_empty()) {
        (Some(true), _) => (Status::Verified, None),
        (Some(false), _) if left_page => (Status::Verified, None),
        (Some(false), _) if prevented => (Status::Mismatch, Some(EvidenceReason::DefaultPrevented)),
        (Some(false), _) => (Status::Mismatch, None),
        (None, _) if prevented && !effected => {
            (Status::Mismatch, Some(EvidenceReason::DefaultPrevented))
        }
        (None, false) => (Status::Verified, None),
        (None, true) => (
            Status::Unavailable,
            Some(EvidenceReason::NoObservableEffect),
        ),
    };
    let (status, reason) = match delivery {
        Some(Delivery::Reached) => by_effects,
        Some(Delivery::Intercepted) => (Status::Mismatch, Some(EvidenceReason::ClickIntercepted)),
        Some(Delivery::Stopped) => (Status::Mismatch, Some(EvidenceReason::PropagationStopped)),
        Some(Delivery::NotObserved) => {
            (Status::Unavailable, Some(EvidenceReason::ClickNotObserved))
        }
        // No record: the page left (navigation, new document, dialog, popup) or it could not be
        // read. Focus moving is no proof that the click reached the element.
        None if expected.is_none() && !effected && !effects.list.is_empty() => (
            Status::Unavailable,
            Some(EvidenceReason::NoObservableEffect),
        ),
        None => by_effects,
    };
    let mut evidence = Evidence::new(Action::Click, status, kind, effects.list.clone());
    evidence.reason = reason;
    evidence.set("delivery", delivery.map_or("unknown", Delivery::as_str));
    if prevented {
        evidence.set("defaultPrevented", true);
    }
    if let Some(after) = after {
        if after.checked.is_some() {
            evidence.set("checked", checked_json(after.checked));
        }
        if let Some(selected) = after.selected {
            evidence.set("selected", json!(selected));
        }
        if let Some(expanded) = after.expanded {
            evidence.set("expanded", json!(expanded));
        }
        if after.pressed.is_some() {
            evidence.set("pressed", checked_json(after.pressed));
        }
        evidence.set("focused", json!(after.focused));
    }
    evidence
}

async fn mouse(
    client: &CdpClient,
    session: &crate::cdp::SessionId,
    kind: &str,
    x: f64,
    y: f64,
    button: &str,
    click_count: u64,
) -> Result<(), CdpError> {
    let buttons = match (kind, button) {
        ("mousePressed", "left") => 1,
        ("mousePressed", "right") => 2,
        ("mousePressed", "middle") => 4,
        _ => 0,
    };
    let button = if kind == "mouseMoved" { "none" } else { button };
    client
        .call(Some(session), "Input.dispatchMouseEvent", json!({"type": kind, "x": x, "y": y, "button": button, "buttons": buttons, "clickCount": click_count}), INPUT_TIMEOUT)
        .await
        .map(|_| ())
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
}

pub(super) async fn finish_with_observation(
    env: &ToolEnv,
    tab: &mut ControlledTab,
    scope: &CallScope,
    finished: Finished<'_>,
) -> Result<Value, ToolError> {
    let Finished {
        arguments,
        evidence,
        dialog_open,
        subject,
        frame_id,
    } = finished;
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
            let options = arguments
                .get("observe")
                .and_then(Value::as_object)
                .map(observe_options)
                .unwrap_or_default();
            tab.observe(scope, options).await?
        }
    };
    let action = evidence.action.as_str();
    let session = tab.session_key();
    let actor = progress::Actor {
        workspace_id: scope.workspace_id.as_deref().unwrap_or_default(),
        lease_id: scope.lease_id.as_deref().unwrap_or_default(),
        session: &session,
        frame_id: &frame_id,
        control_epoch: tab.guard.control_epoch(),
    };
    let page = (!dialog_open).then(|| progress::fingerprint(&result));
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
        let workspace_id = scope.workspace_id.as_deref().unwrap_or_default();
        let mut emit = Emit::new(
            workspace_id,
            "watchdog.no_progress",
            json!({"targetId": scope.target_id, "action": action, "reason": crossed.reason.as_str(), "consecutiveActions": crossed.consecutive, "hints": event_hints}),
        );
        emit.lease_id = scope.lease_id.clone();
        emit.target_id = scope.target_id.clone();
        if let Err(error) = env.events.emit(emit).await {
            tracing::debug!(%error, "watchdog.no_progress not journaled");
        }
    }
    result.insert("evidence".into(), serde_json::to_value(&evidence)?);
    Ok(Value::Object(result))
}

pub async fn click(
    env: &ToolEnv,
    scope: &CallScope,
    arguments: Map<String, Value>,
) -> Result<Value, ToolError> {
    let mut tab = ControlledTab::acquire(env, scope).await?;
    let ctx = tab.page_context().await?;
    let button = str_arg(&arguments, "button").unwrap_or("left").to_owned();
    let clicks = arguments
        .get("clickCount")
        .and_then(Value::as_u64)
        .unwrap_or(1);
    let by_ref = arguments.contains_key("observationId") || arguments.contains_key("ref");
    // The page scripts measure in the selected frame; the point is mapped through every frame's
    // <iframe> (transforms included) for the parents' hit tests and into the viewport of the
    // session that takes the input.
    let chain = pointer::chain(&tab.client, &mut tab.guard, &ctx).await?;
    let aimed = match by_ref {
        true => match tab.resolve_ref(scope, &ctx.frame_id, &arguments) {
            Ok((target, summary)) => {
                pointer::actionable(&tab.client, &ctx, &chain, &target, scope.deadline)
                    .await
                    .map(|aim| (aim, Some(target), summary.role))
            }
            Err(error) => Err(error),
        },
        false => {
            let x = arguments.get("x").and_then(Value::as_f64).unwrap_or(0.0);
            let y = arguments.get("y").and_then(Value::as_f64).unwrap_or(0.0);
            pointer::map_point(&tab.client, &ctx, &chain, (x, y))
                .await
                .map(|aim| (aim, None, "coordinates".to_owned()))
        }
    };
    pointer::release(&tab.client, &chain).await;
    let (aim, target, kind) = aimed?;
    let element = match &target {
        Some(target) => Some(snapshot(&tab.client, &ctx, target).await?),
        None => None,
    };
    let before = Before {
        url: current_url(&tab.client, &mut tab.guard).await,
        popups: env.browser.popups_of(&tab.guard.target),
        element,
    };
    // The click-truth listener of the element's document records what the click does.
    let armed = match &target {
        Some(_) => {
            let event = match button.as_str() {
                "left" => ClickEvent::Click,
                _ => ClickEvent::AuxClick,
            };
            page::run(
                &tab.client,
                &ctx.session,
                ctx.context,
                &ArmClick(event),
                SCRIPT_TIMEOUT,
            )
            .await
            .is_ok_and(|armed| armed.armed)
        }
        None => false,
    };
    let mut dialogs = env.browser.dialog_signals();
    let session = chain.dispatch_session.clone();
    let (x, y) = (aim.x, aim.y);
    mouse(&tab.client, &session, "mouseMoved", x, y, "none", 0).await?;
    let mut dialog = false;
    for count in 1..=clicks {
        mouse(&tab.client, &session, "mousePressed", x, y, &button, count).await?;
        let (client2, session2, button2) = (tab.client.clone(), session.clone(), button.clone());
        dialog = dispatch_final(env, &tab.guard.target, &mut dialogs, async move {
            mouse(&client2, &session2, "mouseReleased", x, y, &button2, count).await
        })
        .await?;
        if dialog {
            break;
        }
    }
    // `mouseReleased` is acknowledged after the page's synchronous handlers ran: the record is
    // complete now. A dialog pauses the page, so nothing can be read until it is answered.
    let record = match (armed, dialog) {
        (true, false) => page::run(
            &tab.client,
            &ctx.session,
            ctx.context,
            &ClickVerdict(target.clone()),
            SCRIPT_TIMEOUT,
        )
        .await
        .ok(),
        _ => None,
    };
    if !dialog {
        tokio::time::sleep(SETTLE).await;
    }
    let effects = collect_effects(
        env,
        &tab.client,
        &mut tab.guard,
        &before,
        target.as_ref(),
        &mut dialogs,
        dialog,
    )
    .await;
    let subject = match &before.element {
        Some(element) => Subject::Element(element.element_key.clone()),
        None => Subject::Point { x, y },
    };
    let evidence = match target {
        Some(_) => click_evidence(&kind, &effects, before.element.as_ref(), record.as_ref()),
        None => Evidence::by_any_effect(Action::Click, "coordinates", effects.list.clone()),
    };
    let finished = Finished {
        arguments: &arguments,
        evidence,
        dialog_open: effects.dialog,
        subject,
        frame_id: ctx.frame_id.clone(),
    };
    finish_with_observation(env, &mut tab, scope, finished).await
}

pub async fn scroll(
    env: &ToolEnv,
    scope: &CallScope,
    arguments: Map<String, Value>,
) -> Result<Value, ToolError> {
    let mut tab = ControlledTab::acquire(env, scope).await?;
    let ctx = tab.page_context().await?;
    // Read in the selected frame: that is the document the scroll moves.
    let before = position(tab.run(&ctx, &ScrollPosition).await?);
    let mut subject = Subject::Page;
    let (mode, container_moved) = if arguments.contains_key("observationId") {
        let (target, summary) = tab.resolve_ref(scope, &ctx.frame_id, &arguments)?;
        subject = Subject::RefPosition {
            element_ref: u64::from(target.element_ref),
            role: summary.role,
        };
        page::run(
            &tab.client,
            &ctx.session,
            ctx.context,
            &ClickPoint(target),
            SCRIPT_TIMEOUT,
        )
        .await?;
        ("ref", None)
    } else if let Some(text) = str_arg(&arguments, "text") {
        let found = page::run(
            &tab.client,
            &ctx.session,
            ctx.context,
            &ScrollToText {
                text: text.to_owned(),
            },
            SCRIPT_TIMEOUT,
        )
        .await?;
        if !found {
            return Err(ToolError::from(
                RpcError::invalid_params("no visible text matches")
                    .with_context("reason", json!("no_match")),
            ));
        }
        ("text", None)
    } else {
        let (dx, dy) = scroll_delta(&arguments);
        match str_arg(&arguments, "selector") {
            Some(selector) => {
                let script = ScrollContainer {
                    selector: selector.to_owned(),
                    dx,
                    dy,
                };
                let moved = page::run(
                    &tab.client,
                    &ctx.session,
                    ctx.context,
                    &script,
                    SCRIPT_TIMEOUT,
                )
                .await?;
                let Some(moved) = moved else {
                    return Err(ToolError::from(
                        RpcError::invalid_params("the selector matches no element")
                            .with_context("reason", json!("no_match")),
                    ));
                };
                ("container", Some(moved))
            }
            None => {
                page::run(
                    &tab.client,
                    &ctx.session,
                    ctx.context,
                    &ScrollPage { dx, dy },
                    SCRIPT_TIMEOUT,
                )
                .await?;
                ("page", None)
            }
        }
    };
    tokio::time::sleep(Duration::from_millis(30)).await;
    let after = position(tab.run(&ctx, &ScrollPosition).await?);
    let moved = match &container_moved {
        Some(container) => container.moved,
        None => after != before,
    };
    let effects = match moved {
        true => vec![Effect::Scrolled],
        false => vec![],
    };
    let mut evidence = Evidence::by_any_effect(Action::Scroll, mode, effects);
    evidence.set("before", json!({"x": before.0, "y": before.1}));
    evidence.set("after", json!({"x": after.0, "y": after.1}));
    if let Some(container) = container_moved {
        evidence.set(
            "container",
            json!({
                "moved": container.moved,
                "before": scroll_json(container.before),
                "after": scroll_json(container.after),
            }),
        );
    }
    let finished = Finished {
        arguments: &arguments,
        evidence,
        dialog_open: false,
        subject,
        frame_id: ctx.frame_id.clone(),
    };
    finish_with_observation(env, &mut tab, scope, finished).await
}

/// The document's scroll position as whole CSS pixels.
fn position(scroll: ScrollXY) -> (i64, i64) {
    (scroll.x as i64, scroll.y as i64)
}

/// A container's scroll position as the page reported it (whole pixels stay integers).
fn scroll_json(scroll: ScrollXY) -> Value {
    let number = |v: f64| match v.fract() == 0.0 && v.abs() < 9e15 {
        true => json!(v as i64),
        false => json!(v),
    };
    json!({"x": number(scroll.x), "y": number(scroll.y)})
}

fn scroll_delta(arguments: &Map<String, Value>) -> (i64, i64) {
    let amount = arguments.get("amount").and_then(Value::as_i64).unwrap_or(0);
    let page = if amount == 0 { 600 } else { amount };
    match str_arg(arguments, "direction").unwrap_or("down") {
        "up" => (0, -page),
        "left" => (-page, 0),
        "right" => (page, 0),
        _ => (0, page),
    }
}

pub async fn dropdown_options(
    env: &ToolEnv,
    scope: &CallScope,
    arguments: Map<String, Value>,
) -> Result<Value, ToolError> {
    let mut tab = ControlledTab::acquire(env, scope).await?;
    let ctx = tab.page_context().await?;
    let (target, _) = tab.resolve_ref(scope, &ctx.frame_id, &arguments)?;
    let limit = u32_arg(&arguments, "limit", page::OPTIONS_DEFAULT_LIMIT);
    let list = page::run(
        &tab.client,
        &ctx.session,
        ctx.context,
        &ListOptions { target, limit },
        SCRIPT_TIMEOUT,
    )
    .await?;
    Ok(serde_json::to_value(list)?)
}

pub async fn dropdown_select(
    env: &ToolEnv,
    scope: &CallScope,
    arguments: Map<String, Value>,
) -> Result<Value, ToolError> {
    let mut tab = ControlledTab::acquire(env, scope).await?;
    let ctx = tab.page_context().await?;
    let (target, summary) = tab.resolve_ref(scope, &ctx.frame_id, &arguments)?;
    let subject = Subject::RefPosition {
        element_ref: u64::from(target.element_ref),
        role: summary.role,
    };
    let strings = |key: &str| -> Vec<String> {
        arguments
            .get(key)
            .and_then(Value::as_array)
            .map(|v| {
                v.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut values = strings("values");
    let labels = strings("labels");
    if values.is_empty() && labels.is_empty() {
        return Err(ToolError::from(
            RpcError::invalid_params("give \"values\" or \"labels\"")
                .with_context("path", json!("arguments.values")),
        ));
    }
    if !labels.is_empty() {
        let list = page::run(
            &tab.client,
            &ctx.session,
            ctx.context,
            &ListOptions {
                target: target.clone(),
                limit: page::OPTIONS_MAX_LIMIT,
            },
            SCRIPT_TIMEOUT,
        )
        .await?;
        if list.kind != page::OptionsKind::Native {
            return Err(ToolError::from(
                RpcError::new(
                    ErrorCode::ElementNotActionable,
                    "not a native select: click the option's ref from a fresh Observation",
                )
                .with_context("reason", json!("custom_listbox")),
            ));
        }
        for label in &labels {
            match list.options.iter().find(|o| o.label.trim() == label.trim()) {
                Some(option) => values.push(option.value.clone()),
                None => {
                    return Err(ToolError::from(
                        RpcError::invalid_params(format!("no option labelled {label:?}"))
                            .with_context("reason", json!("option_not_found")),
                    ));
                }
            }
        }
    }
    let outcome = page::run(
        &tab.client,
        &ctx.session,
        ctx.context,
        &SelectOptions {
            target,
            values: values.clone(),
        },
        SCRIPT_TIMEOUT,
    )
    .await?;
    let selected: Vec<&str> = outcome.selected.iter().map(|o| o.value.as_str()).collect();
    let verified = values.iter().all(|v| selected.contains(&v.as_str()));
    let status = match verified {
        true => Status::Verified,
        false => Status::Mismatch,
    };
    let effects = match outcome.changed {
        true => vec![Effect::SelectedChanged, Effect::ValueChanged],
        false => vec![],
    };
    let mut evidence = Evidence::new(Action::Select, status, "native_select", effects);
    evidence.set("selected", &outcome.selected);
    let finished = Finished {
        arguments: &arguments,
        evidence,
        dialog_open: false,
        subject,
        frame_id: ctx.frame_id.clone(),
    };
    finish_with_observation(env, &mut tab, scope, finished).await
}

pub async fn dialogs_list(
    env: &ToolEnv,
    scope: &CallScope,
    _arguments: Map<String, Value>,
) -> Result<Value, ToolError> {
    env.browser.live().ok_or(ToolError::Disconnected)?;
    let workspace_id = scope.workspace_id.as_deref().unwrap_or_default();
    let dialogs: Vec<Value> = env
        .browser
        .dialogs_for(workspace_id)
        .into_iter()
        .map(|(target_id, d)| json!({"dialogId": d.id, "targetId": target_id, "type": d.dialog_type, "message": d.message, "defaultPrompt": d.default_prompt, "url": d.url, "openedAt": d.opened_at}))
        .collect();
    Ok(json!({"dialogs": dialogs}))
}

pub async fn dialogs_respond(
    env: &ToolEnv,
    scope: &CallScope,
    arguments: Map<String, Value>,
) -> Result<Value, ToolError> {
    let live = env.browser.live().ok_or(ToolError::Disconnected)?;
    let workspace_id = scope.workspace_id.as_deref().unwrap_or_default();
    let lease_id = scope.lease_id.as_deref().unwrap_or_default();
    let dialog_id = str_arg(&arguments, "dialogId").unwrap_or_default();
    let action = str_arg(&arguments, "action")
        .unwrap_or("dismiss")
        .to_owned();
    let Some((opaque, dialog)) = env.browser.dialog(workspace_id, dialog_id) else {
        return Err(ToolError::from(
            RpcError::new(
                ErrorCode::TargetNotFound,
                "no open dialog with this id on a tab of this Workspace",
            )
            .with_context("reason", json!("dialog_not_found"))
            .with_remediation(RemediationAction::ListDialogs, "Call browser.dialogs.list."),
        ));
    };
    // Answering needs control of the tab; a live other controller keeps it.
    env.browser.control(workspace_id, lease_id, &opaque).await?;
    let mut params = json!({"accept": action == "accept"});
    if let Some(text) = str_arg(&arguments, "promptText") {
        params["promptText"] = json!(text);
    }
    scope
        .gate
        .watch(&live.client)
        .call(
            Some(&dialog.session),
            "Page.handleJavaScriptDialog",
            params,
            INPUT_TIMEOUT,
        )
        .await?;
    Ok(json!({"dialogId": dialog_id, "action": action, "closed": true}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn effects(list: &[&'static str], after: Option<ElementState>) -> Effects {
        let list: Vec<Effect> = list
            .iter()
            .map(|name| *Effect::ALL.iter().find(|e| e.as_str() == *name).unwrap())
            .collect();
        Effects {
            dialog: list.contains(&Effect::DialogOpened),
            list,
            after,
        }
    }

    fn record(observed: u32, inside: u32, reached: u32, prevented: bool) -> ClickRecord {
        ClickRecord {
            armed: true,
            early: true,
            observed,
            inside,
            reached,
            prevented,
        }
    }

    fn checkbox(checked: bool) -> ElementState {
        serde_json::from_value(json!({"documentKey": "d", "elementKey": "d:1", "connected": true, "checked": checked, "focused": true})).unwrap()
    }

    fn judged(
        kind: &str,
        effects: &Effects,
        before: Option<&ElementState>,
        record: Option<ClickRecord>,
    ) -> (String, Option<String>, String) {
        let evidence = click_evidence(kind, effects, before, record.as_ref()).to_json();
        (
            evidence["status"].as_str().unwrap().to_owned(),
            evidence["reason"].as_str().map(str::to_owned),
            evidence["delivery"].as_str().unwrap().to_owned(),
        )
    }

    #[test]
    fn a_click_is_verified_only_when_it_reached_its_element() {
        let focus = effects(&["focus_changed"], None);
        let reached = Some(record(1, 1, 1, false));
        assert_eq!(
            judged("button", &focus, None, reached),
            ("verified".into(), None, "reached".into())
        );
        assert_eq!(
            judged("button", &effects(&[], None), None, reached),
            (
                "unavailable".into(),
                Some("no_observable_effect".into()),
                "reached".into()
            )
        );
        // Focus moved, but the click went to an overlay or was stopped on its way.
        assert_eq!(
            judged("button", &focus, None, Some(record(1, 0, 0, false))).0,
            "mismatch"
        );
        assert_eq!(
            judged("button", &focus, None, Some(record(1, 0, 0, false))).1,
            Some("click_intercepted".into())
        );
        let (before, after) = (checkbox(false), checkbox(true));
        let toggled = effects(&["checked_changed"], Some(after));
        assert_eq!(
            judged(
                "checkbox",
                &toggled,
                Some(&before),
                Some(record(1, 1, 0, false))
            )
            .1,
            Some("propagation_stopped".into()),
            "a checkbox toggled by a stopped click is still not verified"
        );
        assert_eq!(
            judged("checkbox", &toggled, Some(&before), reached).0,
            "verified"
        );
        assert_eq!(
            judged("button", &focus, None, Some(record(0, 0, 0, false))),
            (
                "unavailable".into(),
                Some("click_not_observed".into()),
                "not_observed".into()
            )
        );
    }

    #[test]
    fn a_prevented_default_counts_only_with_another_effect() {
        let focus = effects(&["focus_changed"], None);
        let prevented = Some(record(1, 1, 1, true));
        let evidence = click_evidence("button", &focus, None, prevented.as_ref()).to_json();
        assert_eq!(evidence["status"], "mismatch");
        assert_eq!(evidence["reason"], "default_prevented");
        assert_eq!(evidence["defaultPrevented"], true);
        let routed = effects(&["navigation", "focus_changed"], None);
        assert_eq!(judged("link", &routed, None, prevented).0, "verified");
    }

    #[test]
    fn without_a_record_focus_alone_proves_nothing() {
        assert_eq!(
            judged("button", &effects(&["focus_changed"], None), None, None),
            (
                "unavailable".into(),
                Some("no_observable_effect".into()),
                "unknown".into()
            )
        );
        assert_eq!(
            judged("button", &effects(&["dialog_opened"], None), None, None).0,
            "verified"
        );
        let unarmed = ClickRecord {
            armed: false,
            ..record(0, 0, 0, false)
        };
        assert_eq!(
            judged("link", &effects(&["navigation"], None), None, Some(unarmed)).2,
            "unknown"
        );
    }

    /// Before/after element states in, evidence out, and the no-progress detector fed from
    /// that evidence directly: three clicks on a checkbox that never toggles are a mismatch
    /// streak; one that toggles ends it.
    #[test]
    fn evidence_from_states_drives_the_no_progress_detector() {
        let mut state = crate::session::TabState::default();
        let mut click = |after: bool| {
            let before = checkbox(false);
            let after = checkbox(after);
            let mut list = Vec::new();
            state_effects(&before, &after, &mut list);
            let effects = Effects {
                list,
                after: Some(after),
                dialog: false,
            };
            let evidence = click_evidence(
                "checkbox",
                &effects,
                Some(&before),
                Some(&record(1, 1, 1, false)),
            );
            let actor = progress::Actor {
                workspace_id: "workspace:1",
                lease_id: "lease:1",
                session: "s",
                frame_id: "f",
                control_epoch: 0,
            };
            let completed = progress::Completed::new(actor, 1, &evidence, Some((1, 2)));
            (evidence, progress::record(&mut state, completed))
        };
        let (evidence, report) = click(false);
        assert_eq!(evidence.status, Status::Mismatch);
        assert!(evidence.effects.is_empty() && report.is_none());
        assert!(click(false).1.is_none());
        let (_, report) = click(false);
        assert_eq!(
            report.map(|r| r.reason),
            Some(progress::NoProgressReason::Mismatch)
        );
        let (evidence, report) = click(true);
        assert_eq!(evidence.status, Status::Verified);
        assert_eq!(evidence.effects, vec![Effect::CheckedChanged]);
        assert_eq!(evidence.to_json()["checked"], true);
        assert!(report.is_none());
    }
}
