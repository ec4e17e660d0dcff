//! Typing text: `browser.type` (into an Observation ref) and `browser.keyboard` (into the
//! focused element), as guarded composite actions in the action pipeline (`act.rs`): their
//! aims (focus the field, pin target, session, document and focused element), their dispatch
//! (guarded steps that re-check the pins between keys, key bursts behind the page's keystroke
//! guard (`page/js/keyguard.js`: arm, send at once, read what reached the page, go on step by
//! step when it cut a burst short), fill's one insertion, the native value setter, submit) and
//! their evidence rules (the value as the browser normalises it, lengths in code points). The
//! key encoding and the US layout are `cdp/input.rs`'s; a single key press is `keys.rs`'s. The
//! rules are written down in docs/keyboard.md.
//!
//! This file never reads a typed value back into its output: evidence carries lengths only.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::act::{self, Act, ActionTool, Aimed, Call, Effects, Judged, Steps};
use super::actions::{
    ObserveArgument, SETTLE, action_output, closing_request, evidence_schema, merged,
    observe_property, ref_properties, snapshot,
};
use super::context::{TargetScope, ToolEnv};
use super::error::ToolError;
use super::evidence::{Action, Effect, Evidence, EvidenceReason, Status};
use super::manifest::{Gate, Lane, ToolDef, object};
use super::progress::Subject;
use super::tab::{
    Along, ControlledTab, LoadMark, PageContext, RefParams, TabCalls, TakenObservation,
};
use crate::cdp::SessionId;
use crate::cdp::input::table;
use crate::cdp::input::{Key, Stroke, stroke_events, stroke_for};
use crate::page::{
    self, ActiveElement, ActiveElementKey, ActiveElementState, ActiveState, ArmKeys, ElementState,
    KeyRecord, KeysArmed, KeysRecorded, NATIVE_VALUE_TYPES, PrepareTyping, RefTarget,
    SetNativeValue, ValueOutcome,
};
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};

/// Longest text `browser.type` / `browser.keyboard` accept.
const MAX_TYPE_CHARS: usize = 10_000;
/// Native-setter input types in which Enter submits the form (Chromium opens the picker of a
/// color input and ignores Enter in a range input).
const IMPLICIT_SUBMIT_TYPES: &[&str] = &["date", "time", "datetime-local", "month", "week"];

/// The typing tools' definitions, in manifest order (after `browser.press`).
pub fn defs() -> Vec<ToolDef> {
    let observe = observe_property();
    vec![
        ToolDef {
            name: "browser.type",
            description: "Type text into an Observation ref as a guarded composite action: focus, select-all and delete (unless clear: false), one US-layout keystroke per character (Shift held for shifted characters; characters with no US key, such as emoji, as one text insertion each), optional Enter (submit). `mode: fill` replaces the whole value with one editing insertion of the text over the selected value (no key events; still guarded and verified; an empty text deletes). Target, session, document and the focused element are pinned and re-checked between steps; a change before the first mutation fails with action_not_verified, after it with unknown_outcome. Date/time/color/range inputs use the native value setter (beforeinput, input; change when the edit is committed by blur or submit). Evidence compares the value as the browser normalises it and reports lengths in Unicode code points, never a password value.",
            capability: "action.input",
            mutating: true,
            input_schema: object(
                merged(
                    merged(
                        ref_properties(),
                        json!({
                            "text": {"type": "string", "maxLength": MAX_TYPE_CHARS, "x-browser-pilot-sensitivity": ["browser_data", "credential"], "description": "Text to type into the element."},
                            "clear": {"type": "boolean", "description": "Clear the element's current value first when true."},
                            "submit": {"type": "boolean", "description": "Press Enter after typing when true."},
                            "verification": {"enum": ["best_effort", "require_exact"], "description": "require_exact fails unless the value equals the text."},
                            "mode": {"enum": ["keys", "fill"], "description": "Type key by key, or fill the value at once."},
                        }),
                    ),
                    observe.clone(),
                ),
                &["observationId", "ref", "text"],
            ),
            output_schema: action_output(evidence_schema("type")),
            sensitivity_input: &["browser_data", "credential"],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(Target: type_text),
        },
        ToolDef {
            name: "browser.keyboard",
            description: "Type text into the element that has focus now, at its caret, keystrokes and insertions as in browser.type, guarded like browser.type (the focused element is pinned and re-checked between characters). Evidence compares the resulting value: keys the page cancelled are a mismatch.",
            capability: "action.input",
            mutating: true,
            input_schema: object(
                merged(
                    json!({
                        "text": {"type": "string", "minLength": 1, "maxLength": MAX_TYPE_CHARS, "x-browser-pilot-sensitivity": ["browser_data", "credential"], "description": "Text to type into the focused element."},
                        "submit": {"type": "boolean", "description": "Press Enter after typing when true."},
                    }),
                    observe.clone(),
                ),
                &["text"],
            ),
            output_schema: action_output(evidence_schema("keyboard")),
            sensitivity_input: &["browser_data", "credential"],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(Target: keyboard),
        },
    ]
}

#[derive(Deserialize, Serialize)]
struct TypeParams {
    #[serde(flatten)]
    target: RefParams,
    text: String,
    clear: Option<bool>,
    submit: Option<bool>,
    /// `best_effort` or `require_exact` (the schema's enum).
    verification: Option<String>,
    /// `keys` (the default) or `fill` (the schema's enum).
    mode: Option<String>,
    #[serde(flatten)]
    observe: ObserveArgument,
}

#[derive(Deserialize, Serialize)]
struct KeyboardParams {
    text: String,
    submit: Option<bool>,
    #[serde(flatten)]
    observe: ObserveArgument,
}

/// What a guarded composite action pins and re-checks between steps.
struct Pin {
    context: crate::page::ExecutionContextId,
    document_key: String,
    active_key: Option<String>,
    session: SessionId,
    frame_id: String,
    /// The main frame's loader when the pinned frame is the main frame: a new document
    /// committed there (`loader_changed`) ends typing before a key can reach it.
    loader: Option<LoadMark>,
}

impl Pin {
    /// The pinned context, for the keystroke guard's scripts (which aim at nothing).
    fn page(&self) -> PageContext {
        PageContext {
            session: self.session.clone(),
            frame_id: self.frame_id.clone(),
            context: self.context,
            session_root: false,
        }
    }

    /// The tab's current loader, when `ctx` is the main frame.
    fn loader_of(tab: &mut ControlledTab, ctx: &PageContext) -> Option<LoadMark> {
        tab.is_main_frame(&ctx.frame_id).then(|| tab.load_mark())
    }
}

/// Step-failure bookkeeping for guarded typing.
struct Guarded {
    action: &'static str,
    dispatched: u64,
    pin: Pin,
    /// The focused element read right after the focus call, queued with it (the page ran it
    /// right after): the first step's check uses it instead of asking again.
    prechecked: Option<ActiveElement>,
    /// Whether the keystroke guard is armed for the next burst.
    armed: bool,
}

impl Guarded {
    async fn check(
        &mut self,
        tab: &mut ControlledTab,
        step: &str,
    ) -> Result<PageContext, ToolError> {
        // The pinned isolated-world context dies with its document, so a call into it is the
        // document check; a different session means the tab was re-attached.
        let session = tab
            .session()
            .await
            .map_err(|_| self.fail(step, "target_changed"))?;
        // The pinned session is the tab's, or that of the out-of-process frame selected.
        let session_root = tab
            .repin(&session, &self.pin.session, &self.pin.frame_id)
            .map_err(|reason| self.fail(step, reason))?;
        if let Some(pinned) = &self.pin.loader
            && !tab.load_mark().same_loader(pinned)
        {
            return Err(ToolError::from(self.fail(step, "loader_changed")));
        }
        let ctx = PageContext {
            session: self.pin.session.clone(),
            frame_id: self.pin.frame_id.clone(),
            context: self.pin.context,
            session_root,
        };
        let active = match self.prechecked.take() {
            Some(active) => active,
            None => ctx
                .run(tab.calls(), &ActiveElementKey)
                .await
                .map_err(|_| self.fail(step, "document_changed"))?,
        };
        if active.document_key != self.pin.document_key {
            return Err(ToolError::from(self.fail(step, "document_changed")));
        }
        if active.key != self.pin.active_key {
            return Err(ToolError::from(self.fail(step, "focus_changed")));
        }
        Ok(ctx)
    }

    fn fail(&self, step: &str, reason: &str) -> RpcError {
        match self.dispatched {
            0 => RpcError::new(ErrorCode::ActionNotVerified, format!("{reason} before {step}; nothing was changed"))
                .with_context("action", json!(self.action))
                .with_context("step", json!(step))
                .with_context("reason", json!(reason))
                .with_remediation(RemediationAction::Observe, "Observe the page and decide whether to try again."),
            dispatched => RpcError::new(ErrorCode::UnknownOutcome, format!("{reason} before {step}; {dispatched} step(s) had already run"))
                .with_context("action", json!(self.action))
                .with_context("step", json!(step))
                .with_context("reason", json!(reason))
                .with_context("dispatchedSteps", json!(dispatched))
                .with_context("remainingStepsStopped", json!(true))
                .with_remediation(RemediationAction::InspectState, "Observe the page and decide from its current state; never replay the whole input automatically."),
        }
    }

    /// Arms the keystroke guard for the next burst, in the pinned context; the answer is also
    /// the next step's focus check. Not armed when the call failed.
    async fn arm(&mut self, tab: &ControlledTab) {
        let arm = burst_arm();
        match self.pin.page().run(tab.calls(), &arm).await {
            Ok(armed) => self.take_arm(armed),
            Err(_) => self.armed = false,
        }
    }

    /// Keeps what an `ArmKeys` call answered: the focus check for the next step, and whether
    /// the guard is armed.
    fn take_arm(&mut self, armed: KeysArmed) {
        self.prechecked = Some(armed.active);
        self.armed = armed.armed;
    }

    /// Disarms the keystroke guard (a failure before the burst or the insertion was sent; nothing
    /// else).
    async fn disarm(&mut self, tab: &ControlledTab) {
        if std::mem::take(&mut self.armed) {
            let _ = key_record(tab.calls(), &self.pin.page()).await;
        }
    }

    /// One burst: `steps` (key strokes, at most `BURST_MAX_STEPS`) sent at once behind the armed
    /// keystroke guard, which lets a key reach the page only while the pinned element has focus
    /// (see `js/keyguard.js`). Returns how many steps went through; fewer than `steps` only
    /// when the guard's deadline or the page's pause stopped the rest (the caller goes on one
    /// guarded step per character). A focus change, a new document or a dialog ends typing
    /// with what reached the page counted.
    async fn burst(&mut self, act: &mut Act<'_>, steps: &[TypeStep]) -> Result<usize, ToolError> {
        let tab = &mut act.tab;
        let ctx = match self.check(tab, &steps[0].name).await {
            Ok(ctx) => ctx,
            Err(error) => {
                self.disarm(tab).await;
                return Err(error);
            }
        };
        self.armed = false;
        let strokes: Vec<_> = steps
            .iter()
            .map(|step| match &step.stroke {
                Stroke::Key { key, shift } => stroke_events(key, *shift),
                Stroke::Insert(_) | Stroke::InsertText(_) => Vec::new(),
            })
            .collect();
        let answered = std::sync::Arc::new(AtomicU64::new(0));
        let (input, session, counted) = (tab.input(), ctx.session.clone(), answered.clone());
        let send = async move { input.strokes(&session, strokes, &counted).await };
        let sent_at = tokio::time::Instant::now();
        let dialog = act.race(send).await;
        if let Ok(true) = dialog {
            // The keys behind the dialog reach the page once it is answered, held longer than
            // the guard allows (answered after this returns), so it stops them.
            tokio::time::sleep_until(sent_at + 2 * BURST_GAP).await;
            let held = (answered.load(Ordering::Acquire) as usize).min(steps.len() - 1);
            self.dispatched += held as u64 + 1;
            return Err(self.dialog_opened(&steps[held].name));
        }
        dialog?;
        let record = key_record(act.tab.calls(), &ctx).await;
        let sent = steps.len() as u64;
        let record = match record {
            Ok(record) if record.armed => record,
            // The keys came later than the guard waits (a loaded machine) and went through
            // unguarded, in order: they count as sent when the pinned element still has focus
            // in the pinned document, and the evidence judges the value. Keys that went
            // through after stopped ones (`cut`) landed out of order.
            Ok(record) if record.lapsed.is_some() => {
                self.dispatched += sent;
                if record.lapsed.as_deref() != Some("clean") {
                    return Err(ToolError::from(self.fail("the end", "guard_lapsed")));
                }
                self.check(&mut act.tab, "the end").await?;
                return Ok(steps.len());
            }
            // The pinned document is gone: where the keys went is not known.
            _ => {
                self.dispatched += sent;
                return Err(ToolError::from(self.fail("the end", "document_changed")));
            }
        };
        let reached = sent - record.stopped.min(sent);
        self.dispatched += reached;
        let stopped_at = steps
            .get(reached as usize)
            .map_or("the end", |step| step.name.as_str());
        if record.refused.as_deref() == Some("focus_changed") || record.seen < sent {
            return Err(ToolError::from(self.fail(stopped_at, "focus_changed")));
        }
        Ok(reached as usize)
    }

    /// What the guard's record says of fill's insertion: stopped in the page (nothing was
    /// inserted anywhere) fails as if refused before it; a lapsed guard (the insertion came
    /// later than it waits) let it through unguarded, so the pinned element must still have
    /// focus in the pinned document; an unreadable record means the pinned document is gone
    /// and where the text went is not known.
    async fn judge_insertion(
        &mut self,
        tab: &mut ControlledTab,
        record: Option<KeysRecorded>,
    ) -> Result<(), ToolError> {
        match record {
            Some(record) if record.armed && record.blocked > 0 => {
                self.dispatched = self.dispatched.saturating_sub(1);
                let reason = record.refused.as_deref().unwrap_or("focus_changed");
                Err(ToolError::from(self.fail("insert_text", reason)))
            }
            Some(record) if record.armed => Ok(()),
            Some(record) if record.lapsed.as_deref() == Some("clean") => {
                self.check(tab, "the end").await.map(|_| ())
            }
            Some(record) if record.lapsed.is_some() => {
                Err(ToolError::from(self.fail("the end", "guard_lapsed")))
            }
            _ => Err(ToolError::from(self.fail("the end", "document_changed"))),
        }
    }

    /// A dialog the page opened during `step` holds the page (and any key behind it): typing
    /// ends, with what was dispatched counted (the step itself included).
    fn dialog_opened(&self, step: &str) -> ToolError {
        let dispatched = self.dispatched;
        ToolError::from(
            RpcError::new(
                ErrorCode::UnknownOutcome,
                format!("a dialog opened during {step}; {dispatched} step(s) had been dispatched"),
            )
            .with_context("action", json!(self.action))
            .with_context("step", json!(step))
            .with_context("reason", json!("dialog_opened"))
            .with_context("dispatchedSteps", json!(dispatched))
            .with_context("remainingStepsStopped", json!(true))
            .with_context("dialogOpen", json!(true))
            .with_remediation(
                RemediationAction::ListDialogs,
                "A dialog the page opened while typing holds it; list and answer it, then observe the field.",
            ),
        )
    }

    /// One guarded step: re-check the pins, send, count it. A dialog the step opened ends
    /// typing (the step's events are not answered until the dialog is).
    async fn step(
        &mut self,
        act: &mut Act<'_>,
        step: &str,
        stroke: &Stroke,
    ) -> Result<(), ToolError> {
        let tab = &mut act.tab;
        let ctx = self.check(tab, step).await?;
        let (input, session, stroke) = (tab.input(), ctx.session.clone(), stroke.clone());
        let send = async move { input.stroke(&session, &stroke).await };
        let dialog = act.race(send).await?;
        self.dispatched += 1;
        match dialog {
            true => Err(self.dialog_opened(step)),
            false => Ok(()),
        }
    }
}

/// How many typed characters went each way: as key presses, or as editing insertions.
#[derive(Debug, Default, Clone, Copy)]
struct Typed {
    keystrokes: u64,
    insertions: u64,
}

/// One step of typing: its name in failures, and its stroke.
struct TypeStep {
    name: String,
    stroke: Stroke,
}

/// The most steps one burst sends.
const BURST_MAX_STEPS: usize = 32;

/// The longest a key of a burst may be held on its way to the page (the guard compares its
/// arrival with its timeStamp): longer means the page stalled, most likely behind a dialog,
/// and the rest waits for guarded steps.
const BURST_GAP: std::time::Duration = std::time::Duration::from_millis(50);

/// After a burst's deadline, how long a key still counts as the burst's (one made later
/// disarms the guard: a guard left armed never stops the user's own typing for long).
const BURST_LINGER: std::time::Duration = std::time::Duration::from_secs(1);

/// How long a burst of `steps` may take before the guard stops the rest.
fn burst_budget(steps: usize) -> std::time::Duration {
    std::time::Duration::from_millis(60 + 4 * steps as u64)
}

/// The keystroke guard's arming for one burst.
fn burst_arm() -> ArmKeys {
    ArmKeys {
        budget: burst_budget(BURST_MAX_STEPS),
        gap: BURST_GAP,
        linger: BURST_LINGER,
    }
}

/// Reads and disarms the keystroke guard of `context`.
async fn key_record(calls: &TabCalls, ctx: &PageContext) -> Result<KeysRecorded, page::PageError> {
    ctx.run(calls, &KeyRecord).await
}

/// Whether every step is a key stroke other than Enter (a burst carries only those: an
/// editing insertion sends no key event the guard could stop, and Enter may submit).
fn burstable(steps: &[TypeStep]) -> bool {
    steps.iter().all(|step| match &step.stroke {
        Stroke::Key { key, .. } => key.code != table::ENTER.code,
        Stroke::Insert(_) | Stroke::InsertText(_) => false,
    })
}

/// The steps of typing `text`, one per character.
fn character_steps(text: &str) -> Vec<TypeStep> {
    text.chars()
        .enumerate()
        .map(|(index, ch)| TypeStep {
            name: format!("type_character:{index}"),
            stroke: stroke_for(ch),
        })
        .collect()
}

/// Runs `steps`: in bursts behind the keystroke guard while it is armed (`guarded.armed`),
/// otherwise (and after a burst the guard cut short) one guarded step each.
async fn run_steps(
    act: &mut Act<'_>,
    guarded: &mut Guarded,
    steps: &[TypeStep],
) -> Result<(), ToolError> {
    let mut next = 0;
    while next < steps.len() {
        if guarded.armed {
            let chunk = &steps[next..steps.len().min(next + BURST_MAX_STEPS)];
            let through = guarded.burst(act, chunk).await?;
            next += through;
            if through == chunk.len() && next < steps.len() {
                guarded.arm(&act.tab).await;
            }
            continue;
        }
        guarded
            .step(act, &steps[next].name, &steps[next].stroke)
            .await?;
        next += 1;
    }
    Ok(())
}

/// How many of `steps` went each way: as key presses, or as editing insertions.
fn typed_by(steps: &[TypeStep]) -> Typed {
    let mut typed = Typed::default();
    for step in steps {
        match step.stroke {
            Stroke::Key { .. } => typed.keystrokes += 1,
            Stroke::Insert(_) | Stroke::InsertText(_) => typed.insertions += 1,
        }
    }
    typed
}

/// Fill mode: the whole text as one guarded editing insertion over the selected value (nothing
/// for an empty text). Behind the armed keystroke guard the page refuses the insertion itself
/// once focus left the element (its `beforeinput` is stopped), so nothing lands elsewhere even
/// when focus moves between the check and the insertion; unarmed, the focus is checked afresh
/// right before it. Also answers whether the guard was armed: its record is then read (and the
/// guard disarmed) with the value, and judged by [`Guarded::judge_insertion`].
async fn fill_text(
    act: &mut Act<'_>,
    guarded: &mut Guarded,
    text: &str,
) -> Result<(Typed, bool), ToolError> {
    if text.is_empty() {
        return Ok((Typed::default(), false));
    }
    if !guarded.armed {
        guarded.prechecked = None;
    }
    let stroke = Stroke::InsertText(text.to_owned());
    let dispatched = guarded.dispatched;
    if let Err(error) = guarded.step(act, "insert_text", &stroke).await {
        // Refused before sending: disarmed here. After it only a dialog fails the step; it
        // holds the page, and the guard disarms itself later.
        if guarded.dispatched == dispatched {
            guarded.disarm(&act.tab).await;
        }
        return Err(error);
    }
    let armed = std::mem::take(&mut guarded.armed);
    let typed = Typed {
        keystrokes: 0,
        insertions: 1,
    };
    Ok((typed, armed))
}

/// The submit step: Enter on the still-focused element.
async fn submit_step(act: &mut Act<'_>, guarded: &mut Guarded) -> Result<(), ToolError> {
    let enter = Stroke::Key {
        key: Key::named(table::ENTER),
        shift: false,
    };
    guarded.step(act, "submit", &enter).await?;
    tokio::time::sleep(SETTLE).await;
    Ok(())
}

/// Line ends as one `\n` each: each is one Enter, and a textarea's value spells them so.
fn normalize_line_ends(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// A length in evidence: Unicode code points, the unit the page scripts count in too.
fn code_points(text: &str) -> u64 {
    text.chars().count() as u64
}

fn value_length(state: &ElementState) -> u64 {
    state
        .value_length
        .or(state.value.as_deref().map(code_points))
        .unwrap_or(0)
}

/// Whether a native-setter value landed: the page did not cancel it, the request was a value
/// of the input's type, and the field now holds it as the browser spells it (a range compares
/// as a number: `5.0` is `5`; a clamped or stepped range value did not land).
fn native_value_landed(input_type: &str, outcome: &ValueOutcome) -> bool {
    if outcome.canceled || !outcome.valid {
        return false;
    }
    match input_type {
        "range" => match (
            outcome.after.trim().parse::<f64>(),
            outcome.normalized.trim().parse::<f64>(),
        ) {
            (Ok(after), Ok(wanted)) => after == wanted,
            _ => false,
        },
        _ => outcome.after == outcome.normalized,
    }
}

/// Whether the document the action typed into is still there after a submit.
async fn document_after_submit(tab: &mut ControlledTab, target: Option<&RefTarget>) -> bool {
    let Ok(ctx) = tab.page_context().await else {
        return false;
    };
    match target {
        Some(target) => snapshot(tab.calls(), &ctx, target).await.is_ok(),
        None => true,
    }
}

async fn type_text(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: TypeParams,
) -> Result<Value, ToolError> {
    let call = Call::of(&params, &params.observe);
    act::run(env, scope, call, Type { params }).await
}

/// `browser.type` in the action pipeline.
struct Type {
    params: TypeParams,
}

/// The field typed into, the text and the call's options, the field's state before and the
/// guard pinned on it.
struct TypeAim {
    target: RefTarget,
    text: String,
    clear: bool,
    submit: bool,
    verification: String,
    fill: bool,
    /// Fill with a text to insert (an empty fill deletes).
    insert: bool,
    /// The input type, when the native value setter types into it.
    native_type: Option<String>,
    characters: Vec<TypeStep>,
    before: ElementState,
    before_length: u64,
    caret_at_end: bool,
    guarded: Guarded,
}

/// What typing left in the field, as its evidence reports it.
struct TypeOutcome {
    status: Status,
    reason: Option<EvidenceReason>,
    effects: Vec<Effect>,
    sensitive: bool,
    before_length: u64,
    expected_length: u64,
    after_length: Option<u64>,
    /// `keys`, `insert` or `native_setter`.
    method: &'static str,
    /// Keys and insertions sent (not for the native setter).
    typed: Option<Typed>,
    /// Whether the page cancelled the native setter's value.
    canceled: Option<bool>,
    /// The field holds exactly the expected value.
    exact: bool,
    /// The closing Observation, when it was taken with the value's read.
    closing: Option<TakenObservation>,
}

impl ActionTool for Type {
    type Aim = TypeAim;
    type Read = TypeOutcome;
    const ACTION: Action = Action::Type;
    const STEPS: Steps = Steps {
        effects: false,
        late_watch: false,
    };

    async fn aim(&mut self, act: &mut Act<'_>) -> Result<Aimed<TypeAim>, ToolError> {
        let (tab, ctx) = (&mut act.tab, &act.ctx);
        let (target, summary) = tab.resolve_ref(act.scope, &ctx.frame_id, &self.params.target)?;
        let params = &self.params;
        let text = normalize_line_ends(&params.text);
        let clear = params.clear.unwrap_or(true);
        let submit = params.submit.unwrap_or(false);
        let verification = params
            .verification
            .clone()
            .unwrap_or_else(|| "best_effort".to_owned());
        let fill = params.mode.as_deref() == Some("fill");
        if fill && !clear {
            return Err(ToolError::from(
                RpcError::invalid_params(
                    "arguments.clear: fill mode replaces the whole value; clear: false needs mode keys",
                )
                .with_context("path", json!("arguments.clear")),
            ));
        }
        let native_type = summary
            .input_type
            .as_deref()
            .filter(|t| NATIVE_VALUE_TYPES.contains(t));
        let kind = match (&summary.input_type, summary.tag.as_str()) {
            (Some(input_type), _) => format!("input:{input_type}"),
            (None, "textarea") => "textarea".to_owned(),
            (None, "input") => "input".to_owned(),
            (None, _) => "contenteditable".to_owned(),
        };
        if submit && native_type.is_some_and(|t| !IMPLICIT_SUBMIT_TYPES.contains(&t)) {
            return Err(ToolError::from(RpcError::invalid_params(
                "Enter does not submit a form from a color or range input",
            )
            .with_context("path", json!("arguments.submit"))
            .with_context("reason", json!("submit_not_supported"))
            .with_remediation(
                RemediationAction::SubmitSeparately,
                "Type without submit, then click the form's submit button (or press Enter in one of its text fields).",
            )));
        }
        // Plain key strokes in the main frame go in bursts behind the keystroke guard, armed in
        // the same call (docs/keyboard.md); anything else one guarded step per character.
        let characters = character_steps(&text);
        let guardable = native_type.is_none() && tab.frame_selection().is_none();
        let burst = !fill && guardable && burstable(&characters);
        // Fill's one insertion replaces the selected value (as a paste over it would), behind
        // the same guard: only an empty fill deletes.
        let insert = fill && !text.is_empty();
        // The element's state before, then the focus (a native-setter control is replaced
        // whole; typing appends only when asked to), then the first step's focus check: one
        // page call. A stale ref fails before anything is focused.
        let prepare = PrepareTyping {
            target: target.clone(),
            replace: clear || native_type.is_some(),
            arm: (burst || (insert && guardable)).then(burst_arm),
        };
        let prepared = tab.run(ctx, &prepare).await?;
        let (before, focus) = (prepared.before, prepared.focus);
        if !focus.focused && prepared.active.armed {
            // Typing ends here: the guard armed in the same call is not left waiting.
            let _ = key_record(tab.calls(), ctx).await;
        }
        let before_length = value_length(&before);
        if !focus.focused {
            return Err(ToolError::from(
                RpcError::new(
                    ErrorCode::ElementNotActionable,
                    "the element did not take focus",
                )
                .with_context("reason", json!("not_focusable")),
            ));
        }
        let pin = Pin {
            context: ctx.context,
            document_key: before.document_key.clone(),
            active_key: focus.active_element_key.clone(),
            session: ctx.session.clone(),
            frame_id: ctx.frame_id.clone(),
            loader: Pin::loader_of(tab, ctx),
        };
        let mut guarded = Guarded {
            action: "type",
            dispatched: 0,
            pin,
            prechecked: None,
            armed: false,
        };
        guarded.take_arm(prepared.active);
        let subject = Subject::Element(before.element_key.clone());
        let own = TypeAim {
            target,
            text,
            clear,
            submit,
            verification,
            fill,
            insert,
            native_type: native_type.map(str::to_owned),
            characters,
            before,
            before_length,
            caret_at_end: focus.caret_at_end,
            guarded,
        };
        Ok(Aimed::at(kind, subject, own))
    }

    async fn dispatch(
        &mut self,
        act: &mut Act<'_>,
        aimed: &mut Aimed<TypeAim>,
    ) -> Result<TypeOutcome, ToolError> {
        match aimed.own.native_type.clone() {
            Some(input_type) => type_native(act, &mut aimed.own, &input_type).await,
            None => type_keys(act, &mut aimed.own).await,
        }
    }

    fn judge(
        &self,
        aimed: &Aimed<TypeAim>,
        outcome: TypeOutcome,
        _effects: &Effects,
    ) -> Result<Judged, ToolError> {
        let verification = &aimed.own.verification;
        let evidence = type_evidence(&aimed.kind, verification, &outcome);
        if verification == "require_exact" && !outcome.exact {
            return Err(ToolError::from(
                RpcError::new(
                    ErrorCode::VerificationFailed,
                    "the field's value after typing is not the expected one",
                )
                .with_context("evidence", evidence.to_json())
                .with_remediation(
                    RemediationAction::Observe,
                    "Observe the field: the page may have rewritten, sanitized or rejected the input.",
                ),
            ));
        }
        Ok(Judged {
            evidence,
            observation: outcome.closing,
        })
    }
}

/// Type evidence: the status typing reached, with lengths (never a value), the method and
/// what was sent.
fn type_evidence(kind: &str, verification: &str, outcome: &TypeOutcome) -> Evidence {
    let effects = outcome.effects.clone();
    let mut evidence = Evidence::new(Action::Type, outcome.status, kind, effects);
    evidence.reason = outcome.reason;
    evidence.set("sensitive", outcome.sensitive);
    evidence.set("beforeLength", outcome.before_length);
    evidence.set("expectedLength", outcome.expected_length);
    if let Some(after_length) = outcome.after_length {
        evidence.set("afterLength", after_length);
    }
    evidence.set("verification", verification);
    evidence.set("method", outcome.method);
    if let Some(typed) = outcome.typed {
        evidence.set("keystrokes", typed.keystrokes);
        evidence.set("insertions", typed.insertions);
    }
    if let Some(canceled) = outcome.canceled {
        evidence.set("canceled", canceled);
    }
    evidence
}

/// `browser.type` on a date/time/colour/range input: the native value setter as one guarded
/// step (see docs/keyboard.md for its events), judged after the browser's normalisation.
async fn type_native(
    act: &mut Act<'_>,
    own: &mut TypeAim,
    input_type: &str,
) -> Result<TypeOutcome, ToolError> {
    let guarded = &mut own.guarded;
    let tab = &mut act.tab;
    let ctx = guarded.check(tab, "set_value").await?;
    let set = SetNativeValue {
        target: own.target.clone(),
        value: own.text.clone(),
    };
    let outcome = ctx.run(tab.calls(), &set).await?;
    if !outcome.canceled {
        guarded.dispatched += 1;
    }
    let matches = native_value_landed(input_type, &outcome);
    let expected = match outcome.valid {
        true => code_points(&outcome.normalized),
        false => code_points(&own.text),
    };
    let mut effects = match outcome.before != outcome.after {
        true => vec![Effect::ValueChanged],
        false => vec![],
    };
    if own.submit {
        submit_step(act, guarded).await?;
        let tab = &mut act.tab;
        if !document_after_submit(tab, Some(&own.target)).await {
            effects.push(Effect::DocumentChanged);
        }
    }
    Ok(TypeOutcome {
        status: match matches {
            true => Status::Verified,
            false => Status::Mismatch,
        },
        reason: None,
        effects,
        sensitive: false,
        before_length: code_points(&outcome.before),
        expected_length: expected,
        after_length: Some(code_points(&outcome.after)),
        method: "native_setter",
        typed: None,
        canceled: Some(outcome.canceled),
        exact: matches,
        closing: None,
    })
}

/// `browser.type` key by key (or fill's one insertion), then the value judged, then submit.
async fn type_keys(act: &mut Act<'_>, own: &mut TypeAim) -> Result<TypeOutcome, ToolError> {
    let (clear, insert, before_length) = (own.clear, own.insert, own.before_length);
    let characters = std::mem::take(&mut own.characters);
    let guarded = &mut own.guarded;
    let text = &own.text;
    let text_length = code_points(text);
    let mut steps = Vec::with_capacity(characters.len() + 1);
    if clear && before_length > 0 && !insert {
        steps.push(TypeStep {
            name: "delete".to_owned(),
            stroke: Stroke::Key {
                key: Key::named(table::DELETE),
                shift: false,
            },
        });
    }
    // Inputs without a selection API (email, number) cannot place the caret from script: End
    // does, as it would for a user.
    if !clear && !own.caret_at_end && before_length > 0 {
        steps.push(TypeStep {
            name: "caret_to_end".to_owned(),
            stroke: Stroke::Key {
                key: Key::named(table::END),
                shift: false,
            },
        });
    }
    let input_started = tokio::time::Instant::now();
    // Whether fill's insertion went behind the armed guard, whose record is still to be read.
    let (typed, guard_pending) = match own.fill {
        true => {
            run_steps(act, guarded, &steps).await?;
            fill_text(act, guarded, text).await?
        }
        false => {
            let typed = typed_by(&characters);
            steps.extend(characters);
            run_steps(act, guarded, &steps).await?;
            (typed, false)
        }
    };
    let before = &own.before;
    let expected_value = match (clear, &before.value) {
        (true, _) => Some(text.clone()),
        (false, Some(value)) => Some(format!("{value}{text}")),
        (false, None) => None,
    };
    let expected_length = if clear {
        text_length
    } else {
        before_length + text_length
    };
    // The value is judged before any submit: afterwards the document may be gone. Read at once,
    // and again after the settle window unless it already holds the text and the tab's network
    // stayed quiet (a page that reacts later, e.g. a formatter behind a request, gets the window).
    let exact_in = |after: &Option<ElementState>| {
        let after_length = after.as_ref().map(value_length);
        let sensitive = before.sensitive || after.as_ref().is_some_and(|a| a.sensitive);
        match after {
            Some(after) if !sensitive && after.value.is_some() => {
                after.value == expected_value && after_length == Some(expected_length)
            }
            Some(_) => after_length == Some(expected_length),
            None => false,
        }
    };
    // Without a submit the closing Observation is asked for with the value (queued behind it)
    // when the page is cheap to observe: it is kept when no settle window follows.
    let request = closing_request(&act.call.observe)?;
    let tab = &mut act.tab;
    let prefetch = !own.submit && tab.cheap_to_observe();
    let target = &own.target;
    // The guard's record of fill's insertion and the value are read by the Observation's own
    // page call, first (in that order); without that call, the record on its own first.
    let reading = match prefetch {
        true => {
            let along = Along {
                key_record: guard_pending,
                state_of: Some(target),
                ..Along::default()
            };
            tab.take_observation_reading(act.scope, &request, true, along)
                .await
                .ok()
        }
        false => None,
    };
    let record = match (guard_pending, &reading) {
        (false, _) => None,
        (true, Some((_, read))) => Some(read.keys.clone()),
        (true, None) => Some(key_record(tab.calls(), &guarded.pin.page()).await.ok()),
    };
    if let Some(record) = record {
        guarded.judge_insertion(tab, record).await?;
    }
    let (mut after, mut closing) = match reading {
        Some((closing, read)) => (read.state, Some(closing)),
        None => (read_state(tab, target).await, None),
    };
    if !(exact_in(&after) && tab.network_quiet_since(input_started)) {
        tokio::time::sleep(SETTLE).await;
        after = read_state(tab, target).await;
        closing = None;
    }
    let exact = exact_in(&after);
    let after_length = after.as_ref().map(value_length);
    let sensitive = before.sensitive || after.as_ref().is_some_and(|a| a.sensitive);
    let mut effects = Vec::new();
    if after
        .as_ref()
        .is_some_and(|a| a.value != before.value || a.value_length != before.value_length)
    {
        effects.push(Effect::ValueChanged);
    }
    let status = match (&after, exact) {
        (None, _) => {
            effects.push(Effect::DocumentChanged);
            Status::Unavailable
        }
        (Some(_), true) => Status::Verified,
        (Some(_), false) => Status::Mismatch,
    };
    if own.submit {
        // The guard refuses (unknown_outcome) when the document or focus is gone by now.
        submit_step(act, guarded).await?;
        let tab = &mut act.tab;
        if !document_after_submit(tab, Some(target)).await {
            effects.push(Effect::DocumentChanged);
        }
    }
    Ok(TypeOutcome {
        status,
        reason: (status == Status::Unavailable).then_some(EvidenceReason::DocumentChanged),
        effects,
        sensitive,
        before_length,
        expected_length,
        after_length,
        method: if own.fill { "insert" } else { "keys" },
        typed: Some(typed),
        canceled: None,
        exact,
        closing,
    })
}

/// The typed-into element's state now, if its document still has it.
async fn read_state(tab: &mut ControlledTab, target: &RefTarget) -> Option<ElementState> {
    let ctx = tab.page_context().await.ok()?;
    snapshot(tab.calls(), &ctx, target).await.ok()
}

/// What `browser.keyboard` should leave in the focused element, from its state before: the
/// value with the selection (or caret) replaced by the text when the value and the selection
/// are known; otherwise only the length.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Expectation {
    value: Option<String>,
    length: Option<u64>,
    /// No caret position is known (inputs without a selection API): the text must appear and
    /// the length grow by exactly the typed length.
    contains: bool,
}

fn keyboard_expectation(before: &ActiveState, text: &str) -> Expectation {
    let typed = code_points(text);
    let Some(state) = &before.state else {
        return Expectation {
            value: None,
            length: None,
            contains: false,
        };
    };
    let length = value_length(state);
    match (before.selection_start, before.selection_end) {
        (Some(start), Some(end)) if start <= end && end <= length => {
            let value = state.value.as_ref().map(|value| {
                let prefix: String = value.chars().take(start as usize).collect();
                let suffix: String = value.chars().skip(end as usize).collect();
                format!("{prefix}{text}{suffix}")
            });
            Expectation {
                value,
                length: Some(length - (end - start) + typed),
                contains: false,
            }
        }
        _ => match before.selected_length {
            Some(selected) if selected <= length => Expectation {
                value: None,
                length: Some(length - selected + typed),
                contains: true,
            },
            _ => Expectation {
                value: None,
                length: Some(length + typed),
                contains: true,
            },
        },
    }
}

/// Whether the focused element now holds what the keyboard should have left there.
fn keyboard_landed(expectation: &Expectation, after: &ElementState, text: &str) -> bool {
    let length = value_length(after);
    if expectation
        .length
        .is_some_and(|expected| expected != length)
    {
        return false;
    }
    match (&expectation.value, &after.value) {
        (Some(expected), Some(value)) => expected == value,
        (None, Some(value)) if expectation.contains => value.contains(text),
        (_, None) => after.sensitive && expectation.length.is_some(),
        (None, Some(_)) => expectation.length.is_some(),
    }
}

async fn keyboard(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: KeyboardParams,
) -> Result<Value, ToolError> {
    let call = Call::of(&params, &params.observe);
    act::run(env, scope, call, Keyboard { params }).await
}

/// `browser.keyboard` in the action pipeline.
struct Keyboard {
    params: KeyboardParams,
}

/// The text, the focused element's field state before, and the guard pinned on it.
struct KeyboardAim {
    text: String,
    submit: bool,
    before: ActiveState,
    guarded: Guarded,
}

/// What typing at the caret left in the focused element, as its evidence reports it.
struct KeyboardOutcome {
    status: Status,
    reason: Option<EvidenceReason>,
    effects: Vec<Effect>,
    sensitive: bool,
    typed_length: u64,
    dispatched: u64,
    typed: Typed,
    before_length: Option<u64>,
    expected_length: Option<u64>,
    after_length: Option<u64>,
}

impl ActionTool for Keyboard {
    type Aim = KeyboardAim;
    type Read = KeyboardOutcome;
    const ACTION: Action = Action::Keyboard;
    const STEPS: Steps = Steps {
        effects: false,
        late_watch: false,
    };

    async fn aim(&mut self, act: &mut Act<'_>) -> Result<Aimed<KeyboardAim>, ToolError> {
        let (tab, ctx) = (&mut act.tab, &act.ctx);
        let text = normalize_line_ends(&self.params.text);
        let submit = self.params.submit.unwrap_or(false);
        let active = ctx.run(tab.calls(), &ActiveElementKey).await?;
        if active.key.is_none() || !active.editable {
            return Err(ToolError::from(
                RpcError::new(
                    ErrorCode::ElementNotActionable,
                    "no editable element has focus",
                )
                .with_context("reason", json!("no_focus")),
            ));
        }
        let before = ctx.run(tab.calls(), &ActiveElementState).await?;
        let pin = Pin {
            context: ctx.context,
            document_key: active.document_key.clone(),
            active_key: active.key.clone(),
            session: ctx.session.clone(),
            frame_id: ctx.frame_id.clone(),
            loader: Pin::loader_of(tab, ctx),
        };
        let guarded = Guarded {
            action: "keyboard",
            dispatched: 0,
            pin,
            prechecked: None,
            armed: false,
        };
        let own = KeyboardAim {
            text,
            submit,
            before,
            guarded,
        };
        let kind = active.tag.unwrap_or_default();
        Ok(Aimed::at(kind, Subject::Focused(active.key), own))
    }

    async fn dispatch(
        &mut self,
        act: &mut Act<'_>,
        aimed: &mut Aimed<KeyboardAim>,
    ) -> Result<KeyboardOutcome, ToolError> {
        let own = &mut aimed.own;
        let (text, guarded) = (&own.text, &mut own.guarded);
        let steps = character_steps(text);
        run_steps(act, guarded, &steps).await?;
        let typed = typed_by(&steps);
        tokio::time::sleep(SETTLE).await;
        let expectation = keyboard_expectation(&own.before, text);
        // Judged before any submit, on the element typing went to.
        let tab = &mut act.tab;
        let after = match tab.page_context().await {
            Ok(ctx) => ctx
                .run(tab.calls(), &ActiveElementState)
                .await
                .ok()
                .and_then(|a| a.state),
            Err(_) => None,
        };
        let before_state = own.before.state.as_ref();
        let same_element = |after: &ElementState| {
            before_state.is_some_and(|b| {
                b.element_key == after.element_key && b.document_key == after.document_key
            })
        };
        let after = after.filter(|a| same_element(a));
        let sensitive = before_state.is_some_and(|s| s.sensitive);
        let mut effects = Vec::new();
        let (status, reason) = match (&after, before_state) {
            (Some(after), Some(before)) => {
                if after.value != before.value || after.value_length != before.value_length {
                    effects.push(Effect::ValueChanged);
                }
                match keyboard_landed(&expectation, after, text) {
                    true => (Status::Verified, None),
                    false => (Status::Mismatch, None),
                }
            }
            _ => {
                effects.push(Effect::FocusChanged);
                (Status::Unavailable, Some(EvidenceReason::FocusChanged))
            }
        };
        if own.submit {
            // The guard refuses (unknown_outcome) when the document or focus is gone by now.
            submit_step(act, guarded).await?;
            let tab = &mut act.tab;
            if !document_after_submit(tab, None).await {
                effects.push(Effect::DocumentChanged);
            }
        }
        Ok(KeyboardOutcome {
            status,
            reason,
            effects,
            sensitive,
            typed_length: code_points(text),
            dispatched: guarded.dispatched,
            typed,
            before_length: before_state.map(value_length),
            expected_length: expectation.length,
            after_length: after.as_ref().map(value_length),
        })
    }

    fn judge(
        &self,
        aimed: &Aimed<KeyboardAim>,
        outcome: KeyboardOutcome,
        _effects: &Effects,
    ) -> Result<Judged, ToolError> {
        Ok(keyboard_evidence(&aimed.kind, outcome).into())
    }
}

/// Keyboard evidence: the status typing at the caret reached, with lengths (never a value)
/// and the steps sent.
fn keyboard_evidence(kind: &str, outcome: KeyboardOutcome) -> Evidence {
    let mut evidence = Evidence::new(Action::Keyboard, outcome.status, kind, outcome.effects);
    evidence.reason = outcome.reason;
    evidence.set("sensitive", outcome.sensitive);
    evidence.set("typedLength", outcome.typed_length);
    evidence.set("dispatchedSteps", outcome.dispatched);
    evidence.set("keystrokes", outcome.typed.keystrokes);
    evidence.set("insertions", outcome.typed.insertions);
    if let Some(before_length) = outcome.before_length {
        evidence.set("beforeLength", before_length);
    }
    if let Some(expected) = outcome.expected_length {
        evidence.set("expectedLength", expected);
    }
    if let Some(after_length) = outcome.after_length {
        evidence.set("afterLength", after_length);
    }
    evidence
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn line_ends_and_lengths() {
        assert_eq!(normalize_line_ends("a\r\nb\rc\n"), "a\nb\nc\n");
        assert_eq!(code_points("👋 hello 🌍"), 9);
        assert_eq!(code_points("#AbCd00"), 7);
    }

    fn outcome(after: &str, normalized: &str, valid: bool) -> ValueOutcome {
        ValueOutcome {
            before: String::new(),
            after: after.to_owned(),
            canceled: false,
            normalized: normalized.to_owned(),
            valid,
        }
    }

    #[test]
    fn native_values_compare_after_the_browsers_normalisation() {
        assert!(native_value_landed(
            "color",
            &outcome("#abcd00", "#abcd00", true)
        ));
        assert!(!native_value_landed(
            "color",
            &outcome("#000000", "#000000", false)
        ));
        assert!(native_value_landed("range", &outcome("5", "5.0", true)));
        assert!(!native_value_landed("range", &outcome("100", "150", true)));
        assert!(native_value_landed(
            "datetime-local",
            &outcome("2026-11-30T10:00", "2026-11-30T10:00", true)
        ));
        assert!(!native_value_landed("date", &outcome("", "", false)));
        let mut canceled = outcome("2026-11-30", "2026-11-30", true);
        canceled.canceled = true;
        assert!(!native_value_landed("date", &canceled));
    }

    fn state(value: Option<&str>, length: u64, sensitive: bool) -> ElementState {
        ElementState {
            document_key: "d".to_owned(),
            element_key: "d:e1".to_owned(),
            connected: true,
            checked: None,
            selected: None,
            expanded: None,
            pressed: None,
            value: value.map(str::to_owned),
            value_length: Some(length),
            sensitive,
            selected_values: None,
            focused: true,
        }
    }

    #[test]
    fn keyboard_expects_the_text_at_the_caret() {
        let before = ActiveState {
            state: Some(state(Some("ac"), 2, false)),
            selection_start: Some(1),
            selection_end: Some(1),
            selected_length: None,
        };
        let expectation = keyboard_expectation(&before, "👋b");
        assert_eq!(expectation.value.as_deref(), Some("a👋bc"));
        assert_eq!(expectation.length, Some(4));
        assert!(keyboard_landed(
            &expectation,
            &state(Some("a👋bc"), 4, false),
            "👋b"
        ));
        // A page that cancelled the keydown of "b".
        assert!(!keyboard_landed(
            &expectation,
            &state(Some("a👋c"), 3, false),
            "👋b"
        ));
        // A selection is replaced.
        let selected = ActiveState {
            state: Some(state(Some("hello"), 5, false)),
            selection_start: Some(0),
            selection_end: Some(5),
            selected_length: None,
        };
        assert_eq!(
            keyboard_expectation(&selected, "x").value.as_deref(),
            Some("x")
        );
        // A password: lengths only.
        let password = ActiveState {
            state: Some(state(None, 3, true)),
            selection_start: Some(3),
            selection_end: Some(3),
            selected_length: None,
        };
        let expectation = keyboard_expectation(&password, "ab");
        assert_eq!((expectation.value, expectation.length), (None, Some(5)));
        // No caret known (an email input): the text must appear and the length grow by it.
        let email = ActiveState {
            state: Some(state(Some("old"), 3, false)),
            selection_start: None,
            selection_end: None,
            selected_length: None,
        };
        let expectation = keyboard_expectation(&email, "@x");
        assert!(keyboard_landed(
            &expectation,
            &state(Some("old@x"), 5, false),
            "@x"
        ));
        assert!(!keyboard_landed(
            &expectation,
            &state(Some("oldx"), 4, false),
            "@x"
        ));
    }
}
