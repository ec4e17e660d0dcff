//! `browser.scroll`: by a delta, a ref into view, a selected container or to a text match,
//! with before/after positions as evidence. The page side is `page::ScrollPosition` and its
//! siblings in `page/js/document.js`.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::act::{self, Act, ActionTool, Aimed, Call, Effects, Judged, Steps};
use super::actions::*;
use super::context::{TargetScope, ToolEnv};
use super::error::ToolError;
use super::evidence::{Action, Effect, Evidence};
use super::manifest::{Gate, Lane, ToolDef, object};
use super::progress::Subject;
use super::tab::RefParams;
use crate::page::{
    ClickPoint, ContainerScroll, RefTarget, ScrollContainer, ScrollPage, ScrollPosition,
    ScrollToText, ScrollXY,
};
use crate::protocol::errors::RpcError;

/// How long a scroll waits before reading the position after (smooth scrolling and scroll
/// handlers move it a little later).
const SCROLL_SETTLE: Duration = Duration::from_millis(30);

pub fn defs() -> Vec<ToolDef> {
    let observe = observe_property();
    vec![ToolDef {
        name: "browser.scroll",
        description: "Scroll the page (`direction` and `amount` in pixels, or `page`), an Observation ref into view, a CSS-selected container, or to the first visible text match (`text`). Returns typed evidence (before/after scroll position) and a fresh Observation.",
        capability: "action.input",
        mutating: false,
        input_schema: object(
            merged(
                merged(
                    ref_properties(),
                    json!({
                        "direction": {"enum": ["up", "down", "left", "right"], "description": "Direction to scroll the page or container."},
                        "amount": {"type": "integer", "minimum": 1, "maximum": 100000, "description": "Pixels to scroll; default 600."},
                        "selector": {"type": "string", "minLength": 1, "maxLength": 1024, "description": "CSS selector of the container to scroll."},
                        "text": {"type": "string", "minLength": 1, "maxLength": 1024, "x-browser-pilot-sensitivity": ["browser_data"], "description": "Scroll to the first visible match of this text."},
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
        handler: handler!(Target: scroll),
    }]
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct ScrollParams {
    #[serde(flatten)]
    target: RefParams,
    /// `up`, `down`, `left` or `right` (the schema's enum).
    direction: Option<String>,
    amount: Option<i64>,
    selector: Option<String>,
    text: Option<String>,
    #[serde(flatten)]
    observe: ObserveArgument,
}

async fn scroll(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: ScrollParams,
) -> Result<Value, ToolError> {
    let call = Call::of(&params, &params.observe);
    act::run(env, scope, call, Scroll { params }).await
}

/// `browser.scroll` in the action pipeline: a page script is its input, so it reads no before
/// state of the tab and collects no effects beyond its positions.
struct Scroll {
    params: ScrollParams,
}

/// The position before, and the ref to scroll into view (ref mode).
struct ScrollAim {
    before: (i64, i64),
    target: Option<RefTarget>,
}

/// The positions after: the document's, and the container's when one was scrolled.
struct ScrollRead {
    after: (i64, i64),
    container: Option<ContainerScroll>,
}

impl ActionTool for Scroll {
    type Aim = ScrollAim;
    type Read = ScrollRead;
    const ACTION: Action = Action::Scroll;
    const STEPS: Steps = Steps {
        effects: false,
        late_watch: false,
    };

    async fn aim(&mut self, act: &mut Act<'_>) -> Result<Aimed<ScrollAim>, ToolError> {
        let (tab, ctx) = (&mut act.tab, &act.ctx);
        // Read in the selected frame: that is the document the scroll moves.
        let before = position(tab.run(ctx, &ScrollPosition).await?);
        let params = &self.params;
        if params.target.observation_id.is_some() {
            let (target, summary) = tab.resolve_ref(act.scope, &ctx.frame_id, &params.target)?;
            let subject = Subject::RefPosition {
                element_ref: u64::from(target.element_ref),
                role: summary.role,
            };
            let own = ScrollAim {
                before,
                target: Some(target),
            };
            return Ok(Aimed::at("ref", subject, own));
        }
        let mode = match (&params.text, &params.selector) {
            (Some(_), _) => "text",
            (None, Some(_)) => "container",
            (None, None) => "page",
        };
        let own = ScrollAim {
            before,
            target: None,
        };
        Ok(Aimed::at(mode, Subject::Page, own))
    }

    async fn dispatch(
        &mut self,
        act: &mut Act<'_>,
        aimed: &mut Aimed<ScrollAim>,
    ) -> Result<ScrollRead, ToolError> {
        let (tab, ctx, params) = (&act.tab, &act.ctx, &self.params);
        let mut container = None;
        match (&aimed.own.target, &params.text, &params.selector) {
            (Some(target), _, _) => {
                ctx.run(tab.calls(), &ClickPoint(target.clone())).await?;
            }
            (None, Some(text), _) => {
                let script = ScrollToText {
                    text: text.to_owned(),
                };
                if !ctx.run(tab.calls(), &script).await? {
                    return Err(ToolError::from(
                        RpcError::invalid_params("no visible text matches")
                            .with_context("reason", json!("no_match")),
                    ));
                }
            }
            (None, None, Some(selector)) => {
                let (dx, dy) = scroll_delta(params);
                let script = ScrollContainer {
                    selector: selector.to_owned(),
                    dx,
                    dy,
                };
                let Some(moved) = ctx.run(tab.calls(), &script).await? else {
                    return Err(ToolError::from(
                        RpcError::invalid_params("the selector matches no element")
                            .with_context("reason", json!("no_match")),
                    ));
                };
                container = Some(moved);
            }
            (None, None, None) => {
                let (dx, dy) = scroll_delta(params);
                ctx.run(tab.calls(), &ScrollPage { dx, dy }).await?;
            }
        }
        tokio::time::sleep(SCROLL_SETTLE).await;
        let after = position(tab.run(ctx, &ScrollPosition).await?);
        Ok(ScrollRead { after, container })
    }

    fn judge(
        &self,
        aimed: &Aimed<ScrollAim>,
        read: ScrollRead,
        _effects: &Effects,
    ) -> Result<Judged, ToolError> {
        Ok(scroll_evidence(&aimed.kind, aimed.own.before, read).into())
    }
}

/// Scroll evidence: `verified` when the scrolled container (or else the document) moved, with
/// the positions before and after.
fn scroll_evidence(mode: &str, before: (i64, i64), read: ScrollRead) -> Evidence {
    let after = read.after;
    let moved = match &read.container {
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
    if let Some(container) = read.container {
        evidence.set(
            "container",
            json!({
                "moved": container.moved,
                "before": scroll_json(container.before),
                "after": scroll_json(container.after),
            }),
        );
    }
    evidence
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

fn scroll_delta(params: &ScrollParams) -> (i64, i64) {
    let amount = params.amount.unwrap_or(0);
    let page = if amount == 0 { 600 } else { amount };
    match params.direction.as_deref().unwrap_or("down") {
        "up" => (0, -page),
        "left" => (-page, 0),
        "right" => (page, 0),
        _ => (0, page),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(before: (i64, i64), after: (i64, i64), container: Option<bool>, expect: Value) {
        let xy = |y| ScrollXY { x: 0.0, y };
        let container = container.map(|moved| ContainerScroll {
            moved,
            before: xy(0.0),
            after: xy(if moved { 40.0 } else { 0.0 }),
        });
        let mode = match container {
            Some(_) => "container",
            None => "page",
        };
        let evidence = scroll_evidence(mode, before, ScrollRead { after, container }).to_json();
        let got = json!({"status": evidence["status"], "effects": evidence["effects"], "container": evidence.get("container").map(|c| c["after"].clone())});
        assert_eq!(got, expect, "{before:?} -> {after:?}");
    }

    #[test]
    fn a_scroll_is_verified_when_what_it_scrolled_moved() {
        let none = Value::Null;
        check(
            (0, 0),
            (0, 600),
            None,
            json!({"status": "verified", "effects": ["scrolled"], "container": none}),
        );
        check(
            (0, 0),
            (0, 0),
            None,
            json!({"status": "unavailable", "effects": [], "container": none}),
        );
        // A container judges by its own position, whatever the document did.
        check(
            (0, 0),
            (0, 0),
            Some(true),
            json!({"status": "verified", "effects": ["scrolled"], "container": {"x": 0, "y": 40}}),
        );
        check(
            (0, 0),
            (0, 10),
            Some(false),
            json!({"status": "unavailable", "effects": [], "container": {"x": 0, "y": 0}}),
        );
    }
}
