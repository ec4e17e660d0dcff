//! `browser.scroll`: by a delta, a ref into view, a selected container or to a text match,
//! with before/after positions as evidence. The page side is `page::ScrollPosition` and its
//! siblings in `page/js/document.js`.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::actions::*;
use super::context::{TargetScope, ToolEnv, decode_params};
use super::error::ToolError;
use super::evidence::{Action, Effect, Evidence};
use super::manifest::{Gate, Lane, ToolDef, object};
use super::progress::Subject;
use super::tab::ControlledTab;
use crate::page::{
    ClickPoint, ScrollContainer, ScrollPage, ScrollPosition, ScrollToText, ScrollXY,
};
use crate::protocol::errors::RpcError;

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

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ScrollParams {
    observation_id: Option<String>,
    /// `up`, `down`, `left` or `right` (the schema's enum).
    direction: Option<String>,
    amount: Option<i64>,
    selector: Option<String>,
    text: Option<String>,
}

pub async fn scroll(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    arguments: Map<String, Value>,
) -> Result<Value, ToolError> {
    let params: ScrollParams = decode_params(&arguments)?;
    let mut tab = ControlledTab::acquire(env, scope).await?;
    let ctx = tab.page_context().await?;
    // Read in the selected frame: that is the document the scroll moves.
    let before = position(tab.run(&ctx, &ScrollPosition).await?);
    let mut subject = Subject::Page;
    let (mode, container_moved) = if params.observation_id.is_some() {
        let (target, summary) = tab.resolve_ref(scope, &ctx.frame_id, &arguments)?;
        subject = Subject::RefPosition {
            element_ref: u64::from(target.element_ref),
            role: summary.role,
        };
        ctx.run(&tab.client, &ClickPoint(target)).await?;
        ("ref", None)
    } else if let Some(text) = &params.text {
        let found = ctx
            .run(
                &tab.client,
                &ScrollToText {
                    text: text.to_owned(),
                },
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
        let (dx, dy) = scroll_delta(&params);
        match &params.selector {
            Some(selector) => {
                let script = ScrollContainer {
                    selector: selector.to_owned(),
                    dx,
                    dy,
                };
                let moved = ctx.run(&tab.client, &script).await?;
                let Some(moved) = moved else {
                    return Err(ToolError::from(
                        RpcError::invalid_params("the selector matches no element")
                            .with_context("reason", json!("no_match")),
                    ));
                };
                ("container", Some(moved))
            }
            None => {
                ctx.run(&tab.client, &ScrollPage { dx, dy }).await?;
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
        observation: None,
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
