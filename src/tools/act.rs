//! The action pipeline: the one skeleton every action tool runs, written once. [`run`] takes the
//! controlled tab and its page context, asks the tool to aim ([`ActionTool::aim`]), reads the
//! before state, arms the dialog race, has the tool dispatch its input through it
//! ([`Act::race`]), collects the effects, starts the late-effect watch, has the tool judge
//! ([`ActionTool::judge`], a pure evidence rule) and closes with a fresh Observation and the
//! no-progress check. Which of the shared steps an action takes is its [`Steps`]: page-script
//! actions (scroll, select) and guarded typing read no before state and collect no effects;
//! only the click keeps a late-effect watch.
//!
//! This file is the only caller of the dialog race (`dispatch_final`) and of the late-effect
//! watch (`watch_late_effects`); tidy checks it. It aims at nothing and judges nothing itself:
//! the tools' aims, dispatches and evidence rules are theirs (`click.rs`, `gesture.rs`,
//! `keys.rs`, `typing.rs`, `scroll.rs`, `dropdowns.rs`, `upload.rs`).

use std::future::Future;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::actions::{ObserveArgument, SETTLE, closing_request, snapshot, state_effects};
use super::context::{TargetScope, ToolEnv};
use super::error::ToolError;
use super::evidence::{Action, Effect, Evidence};
use super::progress::{self, Subject};
use super::tab::{ControlledTab, LoadMark, PageContext, TakenObservation};
use crate::cdp::{CdpError, TargetId};
use crate::events::Emit;
use crate::page::{ElementState, EventHint, RefTarget};
use crate::protocol::errors::{ErrorCode, RpcError};

/// The shared steps an action takes besides aim, dispatch, judge and the closing Observation.
#[derive(Debug, Clone, Copy)]
pub(super) struct Steps {
    /// Read the before state (URL, popups, file choosers, load history), race every input
    /// against one dialog subscription taken before the first, and collect the effects after.
    /// Without it each raced input subscribes on its own and the effects are the tool's.
    pub(super) effects: bool,
    /// Watch the tab for late effects after the evidence was taken (`action.late_effect`).
    pub(super) late_watch: bool,
}

/// What an action's aim found, as the shared steps need it; `own` is the tool's.
pub(super) struct Aimed<T> {
    /// Evidence `kind` (the element's role, `coordinates`, ...).
    pub(super) kind: String,
    /// What was acted on, for the no-progress signature.
    pub(super) subject: Subject,
    /// The element whose state the effects compare before and after.
    pub(super) target: Option<RefTarget>,
    /// The acted-on element's state before the input.
    pub(super) element: Option<ElementState>,
    /// The tab's URL, when the aim already read it for the before state.
    pub(super) url: Option<String>,
    /// The action targets a file input, whose chooser the browser reports a little later.
    pub(super) expects_chooser: bool,
    pub(super) own: T,
}

impl<T> Aimed<T> {
    /// An aim with no element to compare and nothing read ahead.
    pub(super) fn at(kind: impl Into<String>, subject: Subject, own: T) -> Aimed<T> {
        Aimed {
            kind: kind.into(),
            subject,
            target: None,
            element: None,
            url: None,
            expects_chooser: false,
            own,
        }
    }
}

/// What an action's judge decided: its evidence, and the closing Observation when the tool
/// already took it (after its last input and settle, with the call's `observe` options).
pub(super) struct Judged {
    pub(super) evidence: Evidence,
    pub(super) observation: Option<TakenObservation>,
}

impl From<Evidence> for Judged {
    fn from(evidence: Evidence) -> Judged {
        Judged {
            evidence,
            observation: None,
        }
    }
}

/// One action tool: its aim, its dispatch and its evidence rule. Everything else is [`run`]'s.
pub(super) trait ActionTool: Send {
    /// The tool's own part of its aim.
    type Aim: Send;
    /// What the tool read from the page after its input (records, read-backs, values).
    type Read: Send;
    /// The action its evidence names.
    const ACTION: Action;
    /// The shared steps this action takes.
    const STEPS: Steps;

    /// Finds what to act on in the selected frame (`act.ctx`), with the checks that must come
    /// before any input.
    fn aim(
        &mut self,
        act: &mut Act<'_>,
    ) -> impl Future<Output = Result<Aimed<Self::Aim>, ToolError>> + Send;

    /// Work between the before state and the input (arming a page-side record); best effort.
    fn arm(
        &mut self,
        _act: &mut Act<'_>,
        _aimed: &mut Aimed<Self::Aim>,
    ) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Sends the input (each event that may open a dialog through [`Act::race`]) and reads
    /// what the tool judges from.
    fn dispatch(
        &mut self,
        act: &mut Act<'_>,
        aimed: &mut Aimed<Self::Aim>,
    ) -> impl Future<Output = Result<Self::Read, ToolError>> + Send;

    /// Reads that complete the effects once they are collected (what a key did to its field).
    fn after_effects(
        &mut self,
        _act: &mut Act<'_>,
        _aimed: &Aimed<Self::Aim>,
        _effects: &mut Effects,
    ) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// The evidence rule: the action's evidence from its aim, its reads and its effects (a
    /// refusal when the call asked for an outcome the page did not show).
    fn judge(
        &self,
        aimed: &Aimed<Self::Aim>,
        read: Self::Read,
        effects: &Effects,
    ) -> Result<Judged, ToolError>;
}

/// What the pipeline reads of an action's params: the options of its closing Observation and
/// the arguments its no-progress signature hashes (the params as the wire spells them; the ref
/// and `observe` are left out by `progress::signature`).
pub(super) struct Call {
    pub(super) observe: ObserveArgument,
    signed: Map<String, Value>,
}

impl Call {
    pub(super) fn of<P: Serialize>(params: &P, observe: &ObserveArgument) -> Call {
        let signed = match serde_json::to_value(params) {
            Ok(Value::Object(signed)) => signed,
            _ => Map::new(),
        };
        Call {
            observe: observe.clone(),
            signed,
        }
    }
}

/// One action in flight: the call, its tab and frame, and the pipeline's state around the
/// input (the before state, the dialog subscription, whether a dialog opened).
pub(super) struct Act<'a> {
    pub(super) env: &'a ToolEnv,
    pub(super) scope: &'a TargetScope<'a>,
    /// The call's `observe` argument and signed arguments.
    pub(super) call: Call,
    pub(super) tab: ControlledTab,
    /// The selected frame, as the prologue found it.
    pub(super) ctx: PageContext,
    before: Option<Before>,
    dialogs: Option<tokio::sync::broadcast::Receiver<TargetId>>,
    dialog: bool,
}

impl Act<'_> {
    /// Sends one input that may open a dialog: Chromium does not answer an input event until a
    /// dialog it opened is answered, so a dialog ends the wait (true). An action that collects
    /// effects races every input against the subscription taken before its first; otherwise
    /// each input subscribes on its own.
    pub(super) async fn race<F>(&mut self, send: F) -> Result<bool, ToolError>
    where
        F: Future<Output = Result<(), CdpError>> + Send + 'static,
    {
        let tab = self.tab.target().clone();
        let opened = match &mut self.dialogs {
            Some(dialogs) => dispatch_final(self.env, &tab, dialogs, send).await?,
            None => {
                let mut dialogs = self.env.browser.dialog_signals();
                dispatch_final(self.env, &tab, &mut dialogs, send).await?
            }
        };
        self.dialog |= opened;
        Ok(opened)
    }

    /// The before state (actions that collect effects), for an action that refines it after
    /// its input (when the input was acknowledged, what it already shows).
    pub(super) fn before_mut(&mut self) -> Option<&mut Before> {
        self.before.as_mut()
    }
}

/// Runs one action tool: the prologue (controlled tab, page context), its aim, the before
/// state, its arming and dispatch behind the dialog race, the effects, the late watch, its
/// judge, and the closing Observation with the no-progress check.
pub(super) async fn run<T: ActionTool>(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    call: Call,
    mut tool: T,
) -> Result<Value, ToolError> {
    let mut tab = ControlledTab::acquire(env, scope).await?;
    let ctx = tab.page_context().await?;
    let mut act = Act {
        env,
        scope,
        call,
        tab,
        ctx,
        before: None,
        dialogs: None,
        dialog: false,
    };
    let mut aimed = tool.aim(&mut act).await?;
    if T::STEPS.effects {
        let url = match aimed.url.take() {
            Some(url) => url,
            None => act.tab.current_url().await,
        };
        let element = aimed.element.clone();
        act.before = Some(Before::new(
            env,
            &act.tab,
            url,
            element,
            aimed.expects_chooser,
        ));
    }
    tool.arm(&mut act, &mut aimed).await;
    if T::STEPS.effects {
        act.dialogs = Some(env.browser.dialog_signals());
    }
    let read = tool.dispatch(&mut act, &mut aimed).await?;
    let mut effects = match (&act.before, &mut act.dialogs) {
        (Some(before), Some(dialogs)) => {
            collect_effects(
                env,
                &mut act.tab,
                before,
                aimed.target.as_ref(),
                dialogs,
                act.dialog,
            )
            .await
        }
        _ => Effects::none(),
    };
    tool.after_effects(&mut act, &aimed, &mut effects).await;
    if T::STEPS.late_watch {
        let action = T::ACTION.as_str();
        watch_late_effects(env, scope, &act.tab, &effects.list, action);
    }
    let judged = tool.judge(&aimed, read, &effects)?;
    let finished = Finished {
        call: &act.call,
        evidence: judged.evidence,
        dialog_open: effects.dialog,
        subject: aimed.subject,
        frame_id: act.ctx.frame_id.clone(),
        observation: judged.observation,
    };
    finish_with_observation(env, &mut act.tab, scope, finished).await
}

/// After a navigation starts, how long to wait for the new document to load.
const NAVIGATION_SETTLE: Duration = Duration::from_secs(5);

pub(super) struct Before {
    pub(super) url: String,
    pub(super) popups: usize,
    pub(super) element: Option<ElementState>,
    /// File choosers the tab had opened before the action (`ControlledTab::file_choosers_opened`).
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
    /// The before state from a URL the action already read (`current_url`), taken now.
    pub(super) fn new(
        env: &ToolEnv,
        tab: &ControlledTab,
        url: String,
        element: Option<ElementState>,
        expects_chooser: bool,
    ) -> Before {
        // One book at a time: the tab's books share one lock.
        let file_choosers = tab.file_choosers_opened();
        Before {
            url,
            popups: env.browser.popups_of(tab.target()),
            element,
            file_choosers,
            expects_chooser,
            load: tab.load_mark(),
            input_done: None,
            shown: None,
            shown_url: None,
            taken: tokio::time::Instant::now(),
        }
    }

    /// Whether the settle window can be skipped: the action's expected outcome already shows
    /// (`shown`) and no request of the tab started or ended since the input, so nothing the
    /// page was waiting for is pending. Effects later than this are the late watch's.
    fn settled_early(&self, tab: &ControlledTab) -> bool {
        self.shown.is_some() && tab.network_quiet_since(self.taken)
    }
}

/// How long an action on a file input waits for the browser to report its (intercepted)
/// chooser; other actions only get the settle window.
const CHOOSER_PATIENCE: Duration = Duration::from_secs(2);
/// Poll step of that wait.
const CHOOSER_POLL: Duration = Duration::from_millis(10);

/// Whether the tab opened a file chooser since `before`; waits up to [`CHOOSER_PATIENCE`]
/// when the action targeted a file input.
async fn chooser_opened(tab: &ControlledTab, before: &Before) -> bool {
    let until = tokio::time::Instant::now() + CHOOSER_PATIENCE;
    loop {
        if tab.file_choosers_opened() > before.file_choosers {
            return true;
        }
        if !before.expects_chooser || tokio::time::Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(CHOOSER_POLL).await;
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

impl Effects {
    /// The effects of an action that collects none (its evidence lists its own).
    pub(super) fn none() -> Effects {
        Effects {
            list: Vec::new(),
            after: None,
            dialog: false,
            in_place: false,
        }
    }
}

async fn collect_effects(
    env: &ToolEnv,
    tab: &mut ControlledTab,
    before: &Before,
    target: Option<&RefTarget>,
    dialogs: &mut tokio::sync::broadcast::Receiver<TargetId>,
    dialog_seen: bool,
) -> Effects {
    // Late effects of the input (microtask handlers, a navigation commit) get the settle window;
    // a dialog already open blocks the page, so there is nothing to wait for. The window ends
    // early when the main frame starts navigating or a dialog opens: there is no need to wait
    // for what already happened. Effects after it are the late watch's (`watch_late_effects`).
    let tab_id = tab.target().clone();
    let mut dialog = dialog_seen;
    let early = !dialog_seen && before.settled_early(tab);
    if !dialog_seen && !early {
        let until = before.input_done.unwrap_or_else(tokio::time::Instant::now) + SETTLE;
        let handle = tab.handle();
        tokio::select! {
            _ = handle.wait_navigation_since(&before.load, until) => {}
            opened = dialog_on(dialogs, &tab_id) => dialog = opened,
        }
    }
    let mut list = Vec::new();
    let dialog = dialog || drain_dialog(dialogs, &tab_id);
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
    let started = tab.handle().navigated_since(&before.load);
    if started {
        wait_loaded(tab).await;
    }
    let url = match (early, &before.shown_url, started) {
        // Read with `shown`, right after the input: no window followed, nothing started since.
        (true, Some(url), false) => url.clone(),
        _ => tab.current_url().await,
    };
    if !url.is_empty() && url != before.url {
        list.push(Effect::Navigation);
        if !started {
            wait_loaded(tab).await;
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
        match tab.page_context().await {
            Ok(ctx) => match snapshot(tab.calls(), &ctx, target).await {
                Ok(state) if state.document_key == element_before.document_key => {
                    state_effects(element_before, &state, &mut list);
                    after = Some(state);
                }
                _ => list.push(Effect::DocumentChanged),
            },
            Err(_) => list.push(Effect::DocumentChanged),
        }
    }
    if env.browser.popups_of(&tab_id) > before.popups {
        list.push(Effect::PopupOpened);
    }
    if chooser_opened(tab, before).await {
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
/// still attributed to it (docs/cdp.md, "effect timing": a `setTimeout` navigation arrived at +203 ms).
const LATE_WINDOW: Duration = Duration::from_millis(300);
/// How often the late watch looks at the tab's popup count (navigations and dialogs wake it).
const LATE_POPUP_POLL: Duration = Duration::from_millis(10);

/// Starts the late watch of an action whose evidence is `reported`: for [`LATE_WINDOW`] after
/// now, a main-frame navigation, a popup or a dialog of the tab that the evidence does not list
/// yet is announced as an `action.late_effect` event naming the action's Command (one event per
/// effect, docs/observation.md "Late effects"). The action's result does not wait for it. The
/// watch ends early when a later Command takes the tab (its effects are its own).
fn watch_late_effects(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    controlled: &ControlledTab,
    reported: &[Effect],
    action: &'static str,
) {
    let handle = controlled.handle();
    let turn = controlled.turn_number();
    let tab = controlled.target().clone();
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
            emit.lease_id = Some(lease_id.to_string());
            emit.target_id = Some(target_id.to_string());
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

/// Waits (bounded) until the tab's lifecycle events show the new document loaded.
async fn wait_loaded(tab: &ControlledTab) {
    let until = tokio::time::Instant::now() + NAVIGATION_SETTLE;
    tab.wait_until_settled(until).await;
}

/// Sends the final input event; if the page opens a dialog, Chromium does not answer the event
/// until the dialog is answered, so a dialog ends the wait instead.
async fn dispatch_final<F>(
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
struct Finished<'a> {
    call: &'a Call,
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

async fn finish_with_observation(
    env: &ToolEnv,
    tab: &mut ControlledTab,
    scope: &TargetScope<'_>,
    finished: Finished<'_>,
) -> Result<Value, ToolError> {
    let Finished {
        call,
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
                    let request = closing_request(&call.observe)?;
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
        control_epoch: tab.control_epoch(),
    };
    let page = fingerprint;
    let completed = progress::Completed::new(
        actor,
        progress::signature(action, &subject, &call.signed),
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
        emit.lease_id = Some(scope.lease_id.to_string());
        emit.target_id = Some(scope.target_id.to_string());
        if let Err(error) = env.events.emit(emit).await {
            tracing::debug!(%error, "watchdog.no_progress not journaled");
        }
    }
    result.insert("evidence".into(), serde_json::to_value(&evidence)?);
    Ok(Value::Object(result))
}
