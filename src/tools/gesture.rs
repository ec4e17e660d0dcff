//! `browser.hover` and `browser.drag`: pointer gestures without a click. Both aim like
//! `browser.click` (`pointer.rs`: the frame chain, the actionability wait for refs, coordinates
//! mapped through frames) and send their mouse events on the Command's watched client, so a
//! drag follows the never-replay rule like every input. Hover evidence: whether the element is
//! `:hover` afterwards and which elements became visible (`page::HoverMark` / `HoverReport`).
//! Drag evidence: what the HTML5 drag events showed in the Broker's isolated world and whether
//! the dragged element moved or the target's content changed (`page::DragArm` / `DragVerdict`).
//! The pipeline around them is `act.rs`'s; this file holds their aims, dispatches and evidence
//! rules.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::act::{self, Act, ActionTool, Aimed, Call, Effects, Judged, Steps};
use super::actions::*;
use super::context::{TargetScope, ToolEnv};
use super::error::ToolError;
use super::evidence::{Action, Effect, Evidence, EvidenceReason, Status};
use super::manifest::{Gate, Lane, ToolDef, object};
use super::pointer::{self, Aim, Chain};
use super::progress::Subject;
use super::tab::{ControlledTab, ElementSummary, MouseStep, PageContext, RefParams};
use crate::cdp::SessionId;
use crate::cdp::input::{MouseButton, MouseEventType};
use crate::page::{
    DragArm, DragRecord, DragVerdict, HoverMark, HoverReport, Hovered, ProbeScroll, RefTarget,
};
use crate::protocol::errors::{ErrorCode, RpcError};

/// How long a hover waits for what it shows (menus opened by `mouseenter` handlers or CSS
/// `:hover` appear at once; a little more covers handlers scheduled on a microtask or a short
/// timer).
const HOVER_SETTLE: Duration = Duration::from_millis(60);
/// Moves of a drag between its two ends when the call gives no `steps`.
const DEFAULT_STEPS: u64 = 10;
/// Time between two moves of a drag: about one frame, so pages that follow the pointer per
/// animation frame or on a timer see each step.
const STEP_INTERVAL: Duration = Duration::from_millis(16);
/// Rounds of aiming at both ends of a drag before giving up on one viewport showing both.
const MAX_AIM_ROUNDS: usize = 3;

pub fn defs() -> Vec<ToolDef> {
    let observe = observe_property();
    let hover_schema = object(
        merged(
            merged(
                ref_properties(),
                json!({
                    "x": point_property("Viewport x in CSS pixels; give with y."),
                    "y": point_property("Viewport y in CSS pixels; give with x."),
                }),
            ),
            merged(observe.clone(), pointer::actionable_property()),
        ),
        &[],
    );
    let drag_schema = object(
        merged(
            merged(
                ref_properties(),
                json!({
                    "x": point_property("Start viewport x in CSS pixels; give with y."),
                    "y": point_property("Start viewport y in CSS pixels; give with x."),
                    "toRef": {"type": "integer", "minimum": 1, "description": "Drop target ref of the same Observation."},
                    "toX": point_property("Drop viewport x in CSS pixels; give with toY."),
                    "toY": point_property("Drop viewport y in CSS pixels; give with toX."),
                    "steps": {"type": "integer", "minimum": 1, "maximum": 100, "description": "Mouse moves between the two ends; default 10."},
                }),
            ),
            merged(observe, pointer::actionable_property()),
        ),
        &[],
    );
    vec![
        ToolDef {
            name: "browser.hover",
            description: "Move the mouse over an Observation ref (after the same actionability wait as browser.click) or viewport coordinates of the selected frame, without clicking. Returns evidence {action: hover, status, hovered (the element matches :hover), appearedCount, appeared: [{tag, role, name}] (elements that became visible, outermost first, at most 10)} and a fresh Observation; verified only when the ref's element is hovered afterwards.",
            capability: "action.input",
            // Input events are mutations: a failure after the first one is unknown_outcome.
            mutating: true,
            input_schema: hover_schema,
            output_schema: action_output(evidence_schema("hover")),
            sensitivity_input: &[],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(Target: hover),
        },
        ToolDef {
            name: "browser.drag",
            description: "Drag with the left button from an Observation ref (or viewport coordinates `x`,`y`) to another ref of the same Observation (`toRef`) or coordinates (`toX`,`toY`), in `steps` moves (default 10): press, move, release, as a real mouse does, so both HTML5 drag-and-drop (dragstart/dragover/drop with dataTransfer) and pointer-event sortable lists see it. Both ends must be visible in one viewport. Returns evidence {action: drag, status, dragStarted, drop: {inside, types}, dropEffect, moved, reordered, targetChanged} and a fresh Observation; verified when a drop landed in the target, the dragged element moved, or the target's content changed. Mutating: after the first mouse event a failure is unknown_outcome.",
            capability: "action.input",
            mutating: true,
            input_schema: drag_schema,
            output_schema: action_output(evidence_schema("drag")),
            sensitivity_input: &[],
            sensitivity_output: &["browser_data"],
            lane: Lane::Ordinary,
            gate: Gate::InTool,
            handler: handler!(Target: drag),
        },
    ]
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct HoverParams {
    #[serde(flatten)]
    target: RefParams,
    x: Option<f64>,
    y: Option<f64>,
    actionable_timeout_ms: Option<u64>,
    #[serde(flatten)]
    observe: ObserveArgument,
}

/// Where a gesture end is: a ref's element (resolved) or a point of the selected frame.
enum End {
    Ref(RefTarget, ElementSummary),
    Point(f64, f64),
}

/// Aims at one end: the actionability wait for a ref (scrolling it into view first when
/// `scroll` is set, else only when its click point is out of view), the frame mapping for a
/// point.
async fn aim(
    tab: &ControlledTab,
    ctx: &PageContext,
    chain: &Chain,
    end: &End,
    wait: pointer::ActionableWait,
    scroll: bool,
) -> Result<Aim, ToolError> {
    let first = match scroll {
        true => ProbeScroll::IfNeeded,
        false => ProbeScroll::None,
    };
    match end {
        End::Ref(target, _) => {
            pointer::actionable_from(tab.calls(), ctx, chain, target, wait, first).await
        }
        End::Point(x, y) => pointer::map_point(tab.calls(), ctx, chain, (*x, *y)).await,
    }
}

/// Aims at both ends of a drag so that one viewport shows both: the source scrolled into view,
/// the target only if its point is out of view, then the source looked at again; when that
/// moved it, again (a page taller than both ends together cannot settle).
async fn aim_both(
    tab: &ControlledTab,
    ctx: &PageContext,
    chain: &Chain,
    (from, to): (&End, &End),
    wait: pointer::ActionableWait,
) -> Result<(Aim, Aim), ToolError> {
    let mut from_aim = aim(tab, ctx, chain, from, wait, true).await?;
    for _ in 0..MAX_AIM_ROUNDS {
        let to_aim = aim(tab, ctx, chain, to, wait, false).await?;
        let again = aim(tab, ctx, chain, from, wait, false).await?;
        if (again.x - from_aim.x).abs() < 0.5 && (again.y - from_aim.y).abs() < 0.5 {
            return Ok((again, to_aim));
        }
        from_aim = again;
    }
    Err(ToolError::from(
        RpcError::new(
            ErrorCode::ElementNotActionable,
            "both ends of the drag must be visible in one viewport",
        )
        .with_context("reason", json!("hidden")),
    ))
}

fn resolve(
    tab: &mut ControlledTab,
    scope: &TargetScope<'_>,
    ctx: &PageContext,
    params: &RefParams,
    by_ref: bool,
    point: (Option<f64>, Option<f64>),
) -> Result<End, ToolError> {
    match by_ref {
        true => {
            let (target, summary) = tab.resolve_ref(scope, &ctx.frame_id, params)?;
            Ok(End::Ref(target, summary))
        }
        false => Ok(End::Point(point.0.unwrap_or(0.0), point.1.unwrap_or(0.0))),
    }
}

/// Hover evidence: a ref hover is `verified` when its element matches `:hover` afterwards, a
/// `mismatch` (`not_hovered`) when it does not (something else is under the pointer); a
/// coordinate hover is `verified` by any effect, else `unavailable`.
fn hover_evidence(kind: &str, effects: &Effects, report: Option<&Hovered>) -> Evidence {
    let mut list = effects.list.clone();
    if report.is_some_and(|r| r.appeared_count > 0) {
        list.push(Effect::ContentAppeared);
    }
    let mut evidence = match report.and_then(|r| r.hovered) {
        Some(true) => Evidence::new(Action::Hover, Status::Verified, kind, list),
        Some(false) => {
            let mut evidence = Evidence::new(Action::Hover, Status::Mismatch, kind, list);
            evidence.reason = Some(EvidenceReason::NotHovered);
            evidence
        }
        None => Evidence::by_any_effect(Action::Hover, kind, list),
    };
    if let Some(report) = report {
        if let Some(hovered) = report.hovered {
            evidence.set("hovered", hovered);
        }
        evidence.set("appearedCount", report.appeared_count);
        evidence.set("appeared", &report.appeared);
    }
    evidence
}

async fn hover(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: HoverParams,
) -> Result<Value, ToolError> {
    let call = Call::of(&params, &params.observe);
    act::run(env, scope, call, Hover { params }).await
}

/// `browser.hover` in the action pipeline.
struct Hover {
    params: HoverParams,
}

/// Where the pointer goes, and whether the page marked what is visible before it moves.
struct HoverAim {
    aim: Aim,
    session: SessionId,
    marked: bool,
}

impl ActionTool for Hover {
    type Aim = HoverAim;
    /// The page's report of what the hover showed.
    type Read = Option<Hovered>;
    const ACTION: Action = Action::Hover;
    const STEPS: Steps = Steps {
        effects: true,
        late_watch: false,
    };

    async fn aim(&mut self, act: &mut Act<'_>) -> Result<Aimed<HoverAim>, ToolError> {
        let (ctx, scope) = (&act.ctx, act.scope);
        let tab = &mut act.tab;
        let by_ref = self.params.target.given();
        let chain = tab.pointer_chain(ctx).await?;
        let point = (self.params.x, self.params.y);
        let aimed = match resolve(tab, scope, ctx, &self.params.target, by_ref, point) {
            Ok(end) => aim(
                tab,
                ctx,
                &chain,
                &end,
                pointer::ActionableWait::new(self.params.actionable_timeout_ms, scope.deadline),
                true,
            )
            .await
            .map(|aim| (aim, end)),
            Err(error) => Err(error),
        };
        pointer::release(tab.calls(), &chain).await;
        let (aim, end) = aimed?;
        let (target, kind) = match end {
            End::Ref(target, summary) => (Some(target), summary.role),
            End::Point(..) => (None, "coordinates".to_owned()),
        };
        let element = match &target {
            Some(target) => Some(snapshot(tab.calls(), ctx, target).await?),
            None => None,
        };
        let subject = match &element {
            Some(element) => Subject::Element(element.element_key.clone()),
            None => Subject::Point { x: aim.x, y: aim.y },
        };
        let session = chain.dispatch_session.clone();
        let own = HoverAim {
            aim,
            session,
            marked: false,
        };
        let mut aimed = Aimed::at(kind, subject, own);
        (aimed.target, aimed.element) = (target, element);
        Ok(aimed)
    }

    async fn arm(&mut self, act: &mut Act<'_>, aimed: &mut Aimed<HoverAim>) {
        // Best effort: without the mark the evidence still says whether the element is hovered.
        aimed.own.marked = act.tab.run(&act.ctx, &HoverMark).await.is_ok();
    }

    async fn dispatch(
        &mut self,
        act: &mut Act<'_>,
        aimed: &mut Aimed<HoverAim>,
    ) -> Result<Option<Hovered>, ToolError> {
        let (input, session) = (act.tab.input(), aimed.own.session.clone());
        let step = MouseStep {
            kind: MouseEventType::MouseMoved,
            x: aimed.own.aim.x,
            y: aimed.own.aim.y,
            button: MouseButton::None,
            click_count: 0,
        };
        let dialog = act
            .race(async move { input.mouse(&session, step).await })
            .await?;
        if !dialog {
            tokio::time::sleep(HOVER_SETTLE).await;
        }
        let target = &aimed.target;
        Ok(match (aimed.own.marked || target.is_some(), dialog) {
            (true, false) => act
                .tab
                .run(&act.ctx, &HoverReport(target.clone()))
                .await
                .ok(),
            _ => None,
        })
    }

    fn judge(
        &self,
        aimed: &Aimed<HoverAim>,
        report: Option<Hovered>,
        effects: &Effects,
    ) -> Result<Judged, ToolError> {
        Ok(hover_evidence(&aimed.kind, effects, report.as_ref()).into())
    }
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct DragParams {
    #[serde(flatten)]
    target: RefParams,
    x: Option<f64>,
    y: Option<f64>,
    to_ref: Option<u64>,
    to_x: Option<f64>,
    to_y: Option<f64>,
    steps: Option<u64>,
    actionable_timeout_ms: Option<u64>,
    #[serde(flatten)]
    observe: ObserveArgument,
}

/// Drag evidence. `verified` when a `drop` landed inside the target ref's element (or anywhere,
/// for a coordinate target), when the dragged element moved (another parent or index, or its
/// box moved in the document: a pointer-driven sortable list), when the target's content
/// changed, or when the page left (navigation, popup, dialog). A drop outside the target with
/// nothing else is a `mismatch` (`dropped_elsewhere`); no observable effect is `unavailable`.
fn drag_evidence(kind: &str, effects: &Effects, record: Option<&DragRecord>) -> Evidence {
    let mut list = effects.list.clone();
    let Some(record) = record else {
        return Evidence::by_any_effect(Action::Drag, kind, list);
    };
    let drop_inside = record.drop.as_ref().map(|d| d.inside != Some(false));
    if record.drop.is_some() {
        list.push(Effect::Dropped);
    }
    if record.moved {
        list.push(Effect::ElementMoved);
    }
    if record.target_changed {
        list.push(Effect::TargetChanged);
    }
    let left_page = list.iter().any(|e| e.leaves_page());
    let (status, reason) = match (
        drop_inside,
        record.moved || record.target_changed || left_page,
    ) {
        (Some(true), _) | (_, true) => (Status::Verified, None),
        (Some(false), false) => (Status::Mismatch, Some(EvidenceReason::DroppedElsewhere)),
        (None, false) => (
            Status::Unavailable,
            Some(EvidenceReason::NoObservableEffect),
        ),
    };
    let mut evidence = Evidence::new(Action::Drag, status, kind, list);
    evidence.reason = reason;
    evidence.set("dragStarted", record.drag_started);
    if let Some(drop) = &record.drop {
        evidence.set("drop", json!({"inside": drop.inside, "types": drop.types}));
    }
    if let Some(effect) = &record.drop_effect {
        evidence.set("dropEffect", effect);
    }
    evidence.set("moved", record.moved);
    evidence.set("reordered", record.reordered);
    evidence.set("targetChanged", record.target_changed);
    evidence
}

fn missing_target() -> ToolError {
    ToolError::from(
        RpcError::invalid_params("give the drop target: \"toRef\", or \"toX\" and \"toY\"")
            .with_context("path", json!("arguments.toRef")),
    )
}

async fn drag(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: DragParams,
) -> Result<Value, ToolError> {
    let to_point = match (params.to_ref, params.to_x, params.to_y) {
        (Some(_), None, None) => None,
        (None, Some(x), Some(y)) => Some((x, y)),
        _ => return Err(missing_target()),
    };
    if params.to_ref.is_some() && params.target.observation_id.is_none() {
        return Err(ToolError::from(
            RpcError::invalid_params("\"toRef\" needs the \"observationId\" it belongs to")
                .with_context("path", json!("arguments.observationId")),
        ));
    }
    let call = Call::of(&params, &params.observe);
    act::run(env, scope, call, Drag { params, to_point }).await
}

/// `browser.drag` in the action pipeline.
struct Drag {
    params: DragParams,
    to_point: Option<(f64, f64)>,
}

/// Both ends of a drag, where they are in the dispatch session's viewport, and whether the
/// page-side drag record is armed.
struct DragAim {
    from: End,
    from_aim: Aim,
    to: End,
    to_aim: Aim,
    session: SessionId,
    armed: bool,
}

impl ActionTool for Drag {
    type Aim = DragAim;
    /// The page's drag record.
    type Read = Option<DragRecord>;
    const ACTION: Action = Action::Drag;
    const STEPS: Steps = Steps {
        effects: true,
        late_watch: false,
    };

    async fn aim(&mut self, act: &mut Act<'_>) -> Result<Aimed<DragAim>, ToolError> {
        let (ctx, scope) = (&act.ctx, act.scope);
        let tab = &mut act.tab;
        let params = &self.params;
        let by_ref = params.target.element_ref.is_some();
        let chain = tab.pointer_chain(ctx).await?;
        let aimed = async {
            let from = resolve(
                tab,
                scope,
                ctx,
                &params.target,
                by_ref,
                (params.x, params.y),
            )?;
            let to = match (params.to_ref, self.to_point) {
                (Some(to_ref), _) => {
                    let to_target = RefParams {
                        element_ref: Some(to_ref),
                        ..params.target.clone()
                    };
                    resolve(tab, scope, ctx, &to_target, true, (None, None))?
                }
                (None, Some((x, y))) => End::Point(x, y),
                (None, None) => return Err(missing_target()),
            };
            let wait = pointer::ActionableWait::new(params.actionable_timeout_ms, scope.deadline);
            let (from_aim, to_aim) = aim_both(tab, ctx, &chain, (&from, &to), wait).await?;
            Ok::<_, ToolError>((from, from_aim, to, to_aim))
        }
        .await;
        pointer::release(tab.calls(), &chain).await;
        let (from, from_aim, to, to_aim) = aimed?;
        let (source, kind) = match &from {
            End::Ref(target, summary) => (Some(target.clone()), summary.role.clone()),
            End::Point(..) => (None, "coordinates".to_owned()),
        };
        let element = match &source {
            Some(source) => Some(snapshot(tab.calls(), ctx, source).await?),
            None => None,
        };
        let subject = match &element {
            Some(element) => Subject::Element(element.element_key.clone()),
            None => Subject::Point {
                x: from_aim.x,
                y: from_aim.y,
            },
        };
        let own = DragAim {
            from,
            from_aim,
            to,
            to_aim,
            session: chain.dispatch_session.clone(),
            armed: false,
        };
        // The effects compare no element: the drag's record judges the source and target.
        let mut aimed = Aimed::at(kind, subject, own);
        aimed.element = element;
        Ok(aimed)
    }

    async fn arm(&mut self, act: &mut Act<'_>, aimed: &mut Aimed<DragAim>) {
        let own = &aimed.own;
        let arm = DragArm {
            source: match &own.from {
                End::Ref(target, _) => Some(target.clone()),
                End::Point(..) => None,
            },
            start: match &own.from {
                End::Point(x, y) => Some((*x, *y)),
                End::Ref(..) => None,
            },
            target: match &own.to {
                End::Ref(target, _) => Some(target.clone()),
                End::Point(..) => None,
            },
        };
        // Best effort: without the record only navigation, popups and dialogs can be judged.
        aimed.own.armed = act.tab.run(&act.ctx, &arm).await.is_ok();
    }

    async fn dispatch(
        &mut self,
        act: &mut Act<'_>,
        aimed: &mut Aimed<DragAim>,
    ) -> Result<Option<DragRecord>, ToolError> {
        let own = &aimed.own;
        let session = own.session.clone();
        let at = |kind, (x, y): (f64, f64), button, click_count| MouseStep {
            kind,
            x,
            y,
            button,
            click_count,
        };
        let (start, end) = (
            (own.from_aim.x, own.from_aim.y),
            (own.to_aim.x, own.to_aim.y),
        );
        let tab = &act.tab;
        tab.mouse(
            &session,
            at(MouseEventType::MouseMoved, start, MouseButton::None, 0),
        )
        .await?;
        tab.mouse(
            &session,
            at(MouseEventType::MousePressed, start, MouseButton::Left, 1),
        )
        .await?;
        let steps = self.params.steps.unwrap_or(DEFAULT_STEPS).max(1);
        let input = tab.input();
        for step in 1..=steps {
            let t = step as f64 / steps as f64;
            let point = (
                start.0 + (end.0 - start.0) * t,
                start.1 + (end.1 - start.1) * t,
            );
            tokio::time::sleep(STEP_INTERVAL).await;
            input.held_move(&session, point, MouseButton::Left).await?;
        }
        let release = at(MouseEventType::MouseReleased, end, MouseButton::Left, 1);
        let input = tab.input();
        let dialog = act
            .race(async move { input.mouse(&session, release).await })
            .await?;
        // HTML5 drop and dragend are dispatched from the browser's drag session after the
        // release is acknowledged: give them the settle window before reading the record.
        if !dialog {
            tokio::time::sleep(SETTLE).await;
        }
        Ok(match (aimed.own.armed, dialog) {
            (true, false) => act.tab.run(&act.ctx, &DragVerdict).await.ok(),
            _ => None,
        })
    }

    fn judge(
        &self,
        aimed: &Aimed<DragAim>,
        record: Option<DragRecord>,
        effects: &Effects,
    ) -> Result<Judged, ToolError> {
        let record = record.as_ref().filter(|r| r.armed);
        Ok(drag_evidence(&aimed.kind, effects, record).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::DropSeen;

    fn no_effects() -> Effects {
        Effects {
            list: Vec::new(),
            after: None,
            dialog: false,
            in_place: false,
        }
    }

    fn record(drop: Option<Option<bool>>, moved: bool, target_changed: bool) -> DragRecord {
        DragRecord {
            armed: true,
            drag_started: drop.is_some(),
            drop: drop.map(|inside| DropSeen {
                inside,
                types: vec!["text/plain".into()],
            }),
            drop_effect: None,
            source_connected: true,
            moved,
            reordered: moved,
            target_changed,
        }
    }

    fn judged(record: &DragRecord) -> (Status, Option<EvidenceReason>, Vec<Effect>) {
        let evidence = drag_evidence("listitem", &no_effects(), Some(record));
        (evidence.status, evidence.reason, evidence.effects)
    }

    #[test]
    fn a_drag_is_verified_by_a_drop_in_the_target_or_a_move() {
        assert_eq!(
            judged(&record(Some(Some(true)), false, false)),
            (Status::Verified, None, vec![Effect::Dropped])
        );
        assert_eq!(
            judged(&record(Some(None), false, false)).0,
            Status::Verified,
            "a coordinate target takes any drop"
        );
        assert_eq!(
            judged(&record(Some(Some(false)), false, false)),
            (
                Status::Mismatch,
                Some(EvidenceReason::DroppedElsewhere),
                vec![Effect::Dropped]
            )
        );
        assert_eq!(
            judged(&record(None, true, false)),
            (Status::Verified, None, vec![Effect::ElementMoved])
        );
        assert_eq!(
            judged(&record(None, false, true)).2,
            vec![Effect::TargetChanged]
        );
        assert_eq!(
            judged(&record(None, false, false)),
            (
                Status::Unavailable,
                Some(EvidenceReason::NoObservableEffect),
                vec![]
            )
        );
        let unread = drag_evidence("coordinates", &no_effects(), None);
        assert_eq!(unread.status, Status::Unavailable);
    }

    #[test]
    fn a_hover_is_verified_only_when_its_element_is_hovered() {
        let report = |hovered, appeared_count| Hovered {
            hovered,
            appeared_count,
            appeared: Vec::new(),
            marked: true,
        };
        let shown = hover_evidence("link", &no_effects(), Some(&report(Some(true), 2)));
        assert_eq!(shown.status, Status::Verified);
        assert_eq!(shown.effects, vec![Effect::ContentAppeared]);
        assert_eq!(shown.to_json()["appearedCount"], 2);
        let elsewhere = hover_evidence("link", &no_effects(), Some(&report(Some(false), 0)));
        assert_eq!(
            (elsewhere.status, elsewhere.reason),
            (Status::Mismatch, Some(EvidenceReason::NotHovered))
        );
        let point = hover_evidence("coordinates", &no_effects(), Some(&report(None, 0)));
        assert_eq!(point.status, Status::Unavailable);
        let point = hover_evidence("coordinates", &no_effects(), Some(&report(None, 1)));
        assert_eq!(point.status, Status::Verified);
    }
}
