//! The action tools' shared parts outside the pipeline (`act.rs`): ref, point and `observe`
//! properties and the evidence schemas, the reads every aim and judge use (an element's state,
//! the tab's URL, the state effects between two element states, network quiet) and the options
//! of the closing Observation.
//!
//! Evidence is browser-level: what the page observably did after the action (states of the
//! acted-on element, navigation, a new document, popups, dialogs). Every action returns a fresh
//! Observation; hosts decide from it whether the task succeeded. Nothing is retried, accepted or
//! dismissed automatically.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::error::ToolError;
use super::evidence::Effect;
use super::manifest::{described, object, open_object};
use super::observe::{
    ObserveParams, observation_schema, observe_input_properties, observe_request,
};
use super::tab::{PageContext, TabCalls};
use crate::page::{ElementState, RefTarget, StateSnapshot};

/// How long an action waits for effects that follow input (docs/cdp.md, "effect timing": 2-10 ms
/// typically; a little more covers microtask-scheduled handlers).
pub(super) const SETTLE: Duration = Duration::from_millis(15);
/// Timeout of one input event.
pub(super) const INPUT_TIMEOUT: Duration = Duration::from_secs(10);
/// The `observe` argument every action accepts (options of the closing Observation).
pub(super) fn observe_property() -> Value {
    json!({"observe": described(object(observe_input_properties(), &[]), "Options of the fresh Observation this action returns.")})
}

pub(super) fn ref_properties() -> Value {
    json!({
        "observationId": {"type": "string", "minLength": 1, "maxLength": 128, "description": "Observation the ref belongs to; give with ref."},
        "ref": {"type": "integer", "minimum": 1, "description": "Element ref from that Observation; valid while its element and document last."},
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

/// The acted-on element's state (`page::StateSnapshot`).
pub(super) async fn snapshot(
    calls: &TabCalls,
    ctx: &PageContext,
    target: &RefTarget,
) -> Result<ElementState, ToolError> {
    ctx.run(calls, &StateSnapshot(target.clone()))
        .await
        .map_err(ToolError::from)
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

/// The `observe` argument every action takes (flattened into its params): the options of its
/// closing Observation. Never part of the action's no-progress signature.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub(super) struct ObserveArgument {
    #[serde(skip_serializing)]
    pub(super) observe: Option<ObserveParams>,
}

/// The options of an action's closing Observation (its `observe` argument).
pub(super) fn closing_request(
    observe: &ObserveArgument,
) -> Result<super::observation::ObservationRequest, ToolError> {
    match &observe.observe {
        Some(observe) => observe_request(observe.clone()),
        None => Ok(Default::default()),
    }
}
