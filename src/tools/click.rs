//! `browser.click`: aim (pointer.rs), arm the click-truth listener, press and release, then
//! judge the click from its record and the page's observable effects (`click_evidence`).
//! The pipeline around them is `act.rs`'s; this file holds only the click's aim, dispatch and
//! evidence rule.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::act::{self, Act, ActionTool, Aimed, Call, Effects, Judged, Steps};
use super::actions::*;
use super::context::{TargetScope, ToolEnv};
use super::error::ToolError;
use super::evidence::{Action, Effect, Evidence, EvidenceReason, Status};
use super::manifest::{Gate, Lane, ToolDef, object};
use super::pointer;
use super::progress::Subject;
use super::tab::{Along, ControlledTab, MouseStep, PageContext, RefParams, TakenObservation};
use crate::cdp::SessionId;
use crate::cdp::input::{MouseButton, MouseEventType};
use crate::page::{
    ArmClick, Checked, ClickEvent, ClickRecord, ClickVerdict, Delivery, ElementState, RefTarget,
};

pub fn defs() -> Vec<ToolDef> {
    let observe = observe_property();
    vec![ToolDef {
        name: "browser.click",
        description: "Click an Observation ref (`observationId` and `ref`) or viewport coordinates (`x` and `y`) of the selected frame (transformed frames included); `button` left|right|middle, `clickCount` 2 for a double click. A ref click first waits (at most `actionableTimeoutMs`, default 5000) until its element is attached, visible, stable, enabled and not covered, else element_not_actionable with context.reason and context.waitedMs. Returns evidence {action, status: verified|mismatch|unavailable, kind, effects, delivery} and a fresh Observation; verified only when the click reached the element. A dialog the click opens stays open (see browser.dialogs.*).",
        capability: "action.input",
        mutating: true,
        input_schema: object(
            merged(
                merged(
                    ref_properties(),
                    json!({
                        "x": point_property("Viewport x in CSS pixels; give with y."),
                        "y": point_property("Viewport y in CSS pixels; give with x."),
                        "button": {"enum": ["left", "right", "middle"], "description": "Mouse button to click with; default left."},
                        "clickCount": {"type": "integer", "minimum": 1, "maximum": 2, "description": "2 for a double click; default 1."},
                    }),
                ),
                merged(observe.clone(), pointer::actionable_property()),
            ),
            &[],
        ),
        output_schema: action_output(click_evidence_schema()),
        sensitivity_input: &[],
        sensitivity_output: &["browser_data"],
        lane: Lane::Ordinary,
        gate: Gate::InTool,
        handler: handler!(Target: click),
    }]
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
/// an observable effect other than focus (which any mousedown moves). A click that landed elsewhere or was stopped on its way is a
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
    let delivery = record.and_then(ClickRecord::delivery);
    // The document changed under the click (text, nodes, attributes): an effect of its own.
    let mut list = effects.list.clone();
    if delivery == Some(Delivery::Reached)
        && record.is_some_and(|r| r.mutations > 0)
        && !list.contains(&Effect::ContentChanged)
    {
        list.push(Effect::ContentChanged);
    }
    let left_page = list.iter().any(|e| e.leaves_page());
    let expected = expected_state(kind, before, after);
    let prevented = record.is_some_and(|r| r.prevented) && delivery == Some(Delivery::Reached);
    // Effects that are more than the focus a mousedown moves.
    let effected = list.iter().any(|e| *e != Effect::FocusChanged);
    // A prevented default with nothing but the page's content changing is how pages refuse
    // (a validation message): still not the click's effect.
    let beyond_content = list
        .iter()
        .any(|e| !matches!(e, Effect::FocusChanged | Effect::ContentChanged));
    let by_effects = match (expected, list.is_empty()) {
        (Some(true), _) => (Status::Verified, None),
        (Some(false), _) if left_page => (Status::Verified, None),
        (Some(false), _) if prevented => (Status::Mismatch, Some(EvidenceReason::DefaultPrevented)),
        (Some(false), _) => (Status::Mismatch, None),
        (None, _) if prevented && !beyond_content => {
            (Status::Mismatch, Some(EvidenceReason::DefaultPrevented))
        }
        // Focus follows any mousedown on a focusable element: a dead button shows it too.
        (None, _) if effected => (Status::Verified, None),
        (None, _) => (
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
        None if expected.is_none() && !effected && !list.is_empty() => (
            Status::Unavailable,
            Some(EvidenceReason::NoObservableEffect),
        ),
        None => by_effects,
    };
    let mut evidence = Evidence::new(Action::Click, status, kind, list);
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

/// Whether a semantic control (`kind`) reached the state a click should leave it in: `None` for
/// elements with no such state (their effects decide).
fn expected_state(
    kind: &str,
    before: Option<&ElementState>,
    after: Option<&ElementState>,
) -> Option<bool> {
    match kind {
        "checkbox" | "switch" | "menuitemcheckbox" => {
            Some(after.is_some_and(|a| before.is_some_and(|b| a.checked != b.checked)))
        }
        "radio" | "menuitemradio" => Some(after.is_some_and(|a| a.checked == Some(Checked::True))),
        // A text field's click is for the caret: it must hold focus afterwards.
        "textbox" | "searchbox" | "spinbutton" => Some(after.is_some_and(|a| a.focused)),
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
    }
}

/// What a click needs from the page before its input: the element's state, the tab's URL (from
/// the browser's history) and whether the click-truth listener of the element's document is
/// armed (a coordinate click reads only the URL).
async fn prepare(
    tab: &mut ControlledTab,
    ctx: &PageContext,
    target: Option<&RefTarget>,
    event: ClickEvent,
) -> Result<(Option<ElementState>, String, bool), ToolError> {
    let Some(target) = target else {
        return Ok((None, tab.current_url().await, false));
    };
    // Three independent reads, queued at once (the page runs its two in order).
    let calls = tab.calls().clone();
    let arm_click = ArmClick(event);
    let arm = ctx.run(&calls, &arm_click);
    let (element, url, armed) = tokio::join!(snapshot(&calls, ctx, target), tab.current_url(), arm);
    Ok((Some(element?), url, armed.is_ok_and(|armed| armed.armed)))
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct ClickParams {
    #[serde(flatten)]
    target: RefParams,
    x: Option<f64>,
    y: Option<f64>,
    /// `left`, `right` or `middle` (the schema's enum).
    button: Option<String>,
    click_count: Option<u64>,
    actionable_timeout_ms: Option<u64>,
    #[serde(flatten)]
    observe: ObserveArgument,
}

async fn click(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: ClickParams,
) -> Result<Value, ToolError> {
    let call = Call::of(&params, &params.observe);
    act::run(env, scope, call, Click { params }).await
}

/// `browser.click` in the action pipeline.
struct Click {
    params: ClickParams,
}

/// Where the click goes and whether its element's click-truth listener is armed.
struct ClickAim {
    aim: pointer::Aim,
    /// The session that takes the input (the element frame's).
    session: SessionId,
    armed: bool,
}

/// What the click read after its input: the click-truth record, and the closing Observation
/// when it was taken with that read.
struct ClickRead {
    record: Option<ClickRecord>,
    closing: Option<TakenObservation>,
}

impl ActionTool for Click {
    type Aim = ClickAim;
    type Read = ClickRead;
    const ACTION: Action = Action::Click;
    const STEPS: Steps = Steps {
        effects: true,
        late_watch: true,
    };

    async fn aim(&mut self, act: &mut Act<'_>) -> Result<Aimed<ClickAim>, ToolError> {
        let (tab, ctx, scope) = (&mut act.tab, &act.ctx, act.scope);
        let button = self.params.button.as_deref().unwrap_or("left");
        let by_ref = self.params.target.given();
        // The page scripts measure in the selected frame; the point is mapped through every
        // frame's <iframe> (transforms included) for the parents' hit tests and into the
        // viewport of the session that takes the input.
        let chain = tab.pointer_chain(ctx).await?;
        let calls = tab.calls().clone();
        let event = match button {
            "left" => ClickEvent::Click,
            _ => ClickEvent::AuxClick,
        };
        let mut file_input = false;
        let mut prepared = None;
        let aimed = match by_ref {
            true => match tab.resolve_ref(scope, &ctx.frame_id, &self.params.target) {
                Ok((target, summary)) => {
                    file_input =
                        summary.tag == "input" && summary.input_type.as_deref() == Some("file");
                    // The before state and the armed listener are read inside the stability
                    // interval; if more samples followed, they are read again after it.
                    let during = prepare(tab, ctx, Some(&target), event);
                    let timeout = self.params.actionable_timeout_ms;
                    let wait = pointer::ActionableWait::new(timeout, scope.deadline);
                    pointer::actionable_with(&calls, ctx, &chain, &target, wait, during)
                        .await
                        .map(|(aim, during)| {
                            if during.last_gap {
                                prepared = during.output;
                            }
                            (aim, Some(target), summary.role)
                        })
                }
                Err(error) => Err(error),
            },
            false => {
                let (x, y) = (self.params.x.unwrap_or(0.0), self.params.y.unwrap_or(0.0));
                pointer::map_point(&calls, ctx, &chain, (x, y))
                    .await
                    .map(|aim| (aim, None, "coordinates".to_owned()))
            }
        };
        pointer::release(&calls, &chain).await;
        let (aim, target, kind) = aimed?;
        let (element, url, armed) = match prepared {
            Some(prepared) => prepared?,
            None => prepare(tab, ctx, target.as_ref(), event).await?,
        };
        let subject = match &element {
            Some(element) => Subject::Element(element.element_key.clone()),
            None => Subject::Point { x: aim.x, y: aim.y },
        };
        Ok(Aimed {
            kind,
            subject,
            target,
            element,
            url: Some(url),
            expects_chooser: file_input,
            own: ClickAim {
                aim,
                session: chain.dispatch_session.clone(),
                armed,
            },
        })
    }

    async fn dispatch(
        &mut self,
        act: &mut Act<'_>,
        aimed: &mut Aimed<ClickAim>,
    ) -> Result<ClickRead, ToolError> {
        let button = self.params.button.as_deref().unwrap_or("left");
        let clicks = self.params.click_count.unwrap_or(1);
        let session = aimed.own.session.clone();
        let (x, y) = (aimed.own.aim.x, aimed.own.aim.y);
        let at = |kind, button, click_count| MouseStep {
            kind,
            x,
            y,
            button,
            click_count,
        };
        let mut dialog = false;
        for count in 1..=clicks {
            let pressed = MouseButton::from_name(button);
            let press = at(MouseEventType::MousePressed, pressed, count);
            let release = at(MouseEventType::MouseReleased, pressed, count);
            // The first click's move, then press and release, are queued together, in that
            // order, on the one session (as key-down and key-up are): Chromium handles them one
            // after the other either way; only the waits for the earlier acknowledgements go.
            // A dialog opened by any of them ends the wait.
            let moved = (count == 1).then(|| at(MouseEventType::MouseMoved, MouseButton::None, 0));
            let (input, session) = (act.tab.input(), session.clone());
            dialog = act
                .race(async move {
                    let moved = async {
                        match moved {
                            Some(moved) => input.mouse(&session, moved).await,
                            None => Ok(()),
                        }
                    };
                    let (press, release) =
                        (input.mouse(&session, press), input.mouse(&session, release));
                    tokio::try_join!(moved, press, release)?;
                    Ok(())
                })
                .await?;
            if dialog {
                break;
            }
        }
        let input_done = tokio::time::Instant::now();
        // `mouseReleased` is acknowledged after the page's synchronous handlers ran: the record
        // is complete now. A dialog pauses the page, so nothing can be read until it is
        // answered. The element's state and the URL are read with the record: when the control
        // already shows its expected state, the settle window is not needed. When the page is
        // cheap to observe, the record and then the state are read by the closing
        // Observation's own page call, and that Observation is kept when the click is judged
        // from these reads alone (`in_place`); its history read gives the URL. Otherwise the
        // record, the URL and the state are queued at once (run in that order).
        let read_verdict = aimed.own.armed && !dialog;
        let request = closing_request(&act.call.observe)?;
        let prefetch = !dialog && act.tab.cheap_to_observe();
        let target = &aimed.target;
        let wanted = match (target, &aimed.element, dialog) {
            (Some(target), Some(_), false) => Some(target),
            _ => None,
        };
        let (ctx, scope) = (&act.ctx, act.scope);
        let tab = &mut act.tab;
        let taken = match prefetch {
            true => {
                let along = Along {
                    click_verdict: read_verdict.then(|| ClickVerdict(target.clone())),
                    state_of: wanted,
                    ..Along::default()
                };
                tab.take_observation_reading(scope, &request, true, along)
                    .await
                    .ok()
            }
            false => None,
        };
        let (record, url_now, state_now, closing) = match taken {
            Some((taken, read)) => {
                let url = taken.result.get("url").and_then(Value::as_str);
                let url = url.unwrap_or_default().to_owned();
                (read.click, url, read.state, Some(taken))
            }
            None => {
                let calls = tab.calls().clone();
                let verdict = async {
                    match read_verdict {
                        true => ctx.run(&calls, &ClickVerdict(target.clone())).await.ok(),
                        false => None,
                    }
                };
                let state = async {
                    match wanted {
                        Some(target) => snapshot(&calls, ctx, target).await.ok(),
                        None => None,
                    }
                };
                let (record, url, state) = tokio::join!(verdict, tab.current_url(), state);
                (record, url, state, None)
            }
        };
        let kind = &aimed.kind;
        let was = aimed.element.as_ref();
        if let Some(before) = act.before_mut() {
            before.input_done = Some(input_done);
            before.shown_url = Some(url_now).filter(|url| !url.is_empty());
            before.shown = state_now.filter(|now| {
                was.is_some_and(|was| {
                    was.document_key == now.document_key
                        && expected_state(kind, Some(was), Some(now)) == Some(true)
                })
            });
        }
        Ok(ClickRead { record, closing })
    }

    fn judge(
        &self,
        aimed: &Aimed<ClickAim>,
        read: ClickRead,
        effects: &Effects,
    ) -> Result<Judged, ToolError> {
        let evidence = match &aimed.target {
            Some(_) => click_evidence(
                &aimed.kind,
                effects,
                aimed.element.as_ref(),
                read.record.as_ref(),
            ),
            None => Evidence::by_any_effect(Action::Click, "coordinates", effects.list.clone()),
        };
        Ok(Judged {
            evidence,
            observation: read.closing.filter(|_| effects.in_place),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::progress;

    fn effects(list: &[&'static str], after: Option<ElementState>) -> Effects {
        let list: Vec<Effect> = list
            .iter()
            .map(|name| *Effect::ALL.iter().find(|e| e.as_str() == *name).unwrap())
            .collect();
        Effects {
            dialog: list.contains(&Effect::DialogOpened),
            list,
            after,
            in_place: false,
        }
    }

    fn record(observed: u32, inside: u32, reached: u32, prevented: bool) -> ClickRecord {
        ClickRecord {
            mutations: 0,
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
        // Delivered, but only focus moved: a dead button, not a verified click.
        assert_eq!(
            judged("button", &focus, None, reached),
            (
                "unavailable".into(),
                Some("no_observable_effect".into()),
                "reached".into()
            )
        );
        assert_eq!(
            judged(
                "button",
                &effects(&["focus_changed", "value_changed"], None),
                None,
                reached
            )
            .0,
            "verified"
        );
        // The document changed under a click that reached the button: content_changed.
        let changed = ClickRecord {
            mutations: 2,
            ..record(1, 1, 1, false)
        };
        let evidence = click_evidence("button", &focus, None, Some(&changed)).to_json();
        assert_eq!(evidence["status"], "verified");
        assert_eq!(
            evidence["effects"],
            json!(["focus_changed", "content_changed"])
        );
        let elsewhere = ClickRecord {
            mutations: 2,
            ..record(1, 0, 0, false)
        };
        assert_eq!(
            judged("button", &focus, None, Some(elsewhere)).0,
            "mismatch"
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
            mutations: 0,
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
        let mut state = super::super::tab::TabState::default();
        let mut click = |after: bool| {
            let before = checkbox(false);
            let after = checkbox(after);
            let mut list = Vec::new();
            state_effects(&before, &after, &mut list);
            let effects = Effects {
                list,
                after: Some(after),
                dialog: false,
                in_place: false,
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
