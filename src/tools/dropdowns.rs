//! `browser.dropdown.options` and `browser.dropdown.select`: native selects and exposed ARIA
//! listboxes (options only; custom listboxes are selected by clicking the option's ref).

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::actions::*;
use super::context::{TargetScope, ToolEnv, decode_params};
use super::error::ToolError;
use super::evidence::{Action, Effect, Evidence, Status};
use super::manifest::{Gate, Lane, ToolDef, object, open_object};
use super::progress::Subject;
use super::tab::ControlledTab;
use crate::page::{self, ListOptions, SelectOptions};
use crate::protocol::errors::{ErrorCode, RpcError};

pub fn defs() -> Vec<ToolDef> {
    let observe = observe_property();
    vec![
        ToolDef {
            name: "browser.dropdown.options",
            description: "List the options of a native select or of a currently exposed ARIA listbox/combobox (an Observation ref), bounded.",
            capability: "observation.read",
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
            handler: handler!(Target: dropdown_options),
        },
        ToolDef {
            name: "browser.dropdown.select",
            description: "Select option(s) of a native select by value (or by label) and verify the value change; for custom ARIA listboxes, click the option's ref from a fresh Observation instead.",
            capability: "action.input",
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
            handler: handler!(Target: dropdown_select),
        },
    ]
}

#[derive(Deserialize)]
struct OptionsParams {
    limit: Option<u32>,
}

#[derive(Deserialize)]
struct SelectParams {
    values: Option<Vec<String>>,
    labels: Option<Vec<String>>,
}

pub async fn dropdown_options(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    arguments: Map<String, Value>,
) -> Result<Value, ToolError> {
    let mut tab = ControlledTab::acquire(env, scope).await?;
    let ctx = tab.page_context().await?;
    let (target, _) = tab.resolve_ref(scope, &ctx.frame_id, &arguments)?;
    let params: OptionsParams = decode_params(&arguments)?;
    let limit = params.limit.unwrap_or(page::OPTIONS_DEFAULT_LIMIT);
    let list = ctx.run(&tab.client, &ListOptions { target, limit }).await?;
    Ok(serde_json::to_value(list)?)
}

pub async fn dropdown_select(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    arguments: Map<String, Value>,
) -> Result<Value, ToolError> {
    let mut tab = ControlledTab::acquire(env, scope).await?;
    let ctx = tab.page_context().await?;
    let (target, summary) = tab.resolve_ref(scope, &ctx.frame_id, &arguments)?;
    let subject = Subject::RefPosition {
        element_ref: u64::from(target.element_ref),
        role: summary.role,
    };
    let params: SelectParams = decode_params(&arguments)?;
    let mut values = params.values.unwrap_or_default();
    let labels = params.labels.unwrap_or_default();
    if values.is_empty() && labels.is_empty() {
        return Err(ToolError::from(
            RpcError::invalid_params("give \"values\" or \"labels\"")
                .with_context("path", json!("arguments.values")),
        ));
    }
    if !labels.is_empty() {
        let list = ctx
            .run(
                &tab.client,
                &ListOptions {
                    target: target.clone(),
                    limit: page::OPTIONS_MAX_LIMIT,
                },
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
    let outcome = ctx
        .run(
            &tab.client,
            &SelectOptions {
                target,
                values: values.clone(),
            },
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
        observation: None,
    };
    finish_with_observation(env, &mut tab, scope, finished).await
}
