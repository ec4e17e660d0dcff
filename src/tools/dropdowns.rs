//! `browser.dropdown.options` and `browser.dropdown.select`: native selects and exposed ARIA
//! listboxes (options only; custom listboxes are selected by clicking the option's ref).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::act::{self, Act, ActionTool, Aimed, Call, Effects, Judged, Steps};
use super::actions::*;
use super::context::{TargetScope, ToolEnv};
use super::error::ToolError;
use super::evidence::{Action, Effect, Evidence, Status};
use super::manifest::{Gate, Lane, ToolDef, object, open_object};
use super::progress::Subject;
use super::tab::{ControlledTab, RefParams};
use crate::page::{self, ListOptions, RefTarget, SelectOptions, SelectionOutcome};
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
                    json!({"limit": {"type": "integer", "minimum": 1, "maximum": page::OPTIONS_MAX_LIMIT, "description": "Most options to return."}}),
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
            description: "Select option(s) of a native select by value (or by label) and verify the value change; for custom ARIA listboxes, click the option's ref from a fresh Observation instead. The choice is checked against the options before anything is selected: invalid_params with context.reason option_not_found, option_disabled, too_many_values (a single select takes one) or not_a_select, and context.available (the options, at most 50).",
            capability: "action.input",
            mutating: true,
            input_schema: object(
                merged(
                    merged(
                        ref_properties(),
                        json!({
                            "values": {"type": "array", "minItems": 1, "maxItems": 500, "items": {"type": "string", "maxLength": 1000}, "description": "Option values to select; or give labels."},
                            "labels": {"type": "array", "minItems": 1, "maxItems": 500, "items": {"type": "string", "maxLength": 1000}, "description": "Visible option labels to select; or give values."},
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
    #[serde(flatten)]
    target: RefParams,
    limit: Option<u32>,
}

#[derive(Deserialize, Serialize)]
struct SelectParams {
    #[serde(flatten)]
    target: RefParams,
    values: Option<Vec<String>>,
    labels: Option<Vec<String>>,
    #[serde(flatten)]
    observe: ObserveArgument,
}

async fn dropdown_options(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: OptionsParams,
) -> Result<Value, ToolError> {
    let mut tab = ControlledTab::acquire(env, scope).await?;
    let ctx = tab.page_context().await?;
    let (target, _) = tab.resolve_ref(scope, &ctx.frame_id, &params.target)?;
    let limit = params.limit.unwrap_or(page::OPTIONS_DEFAULT_LIMIT);
    let list = ctx.run(tab.calls(), &ListOptions { target, limit }).await?;
    Ok(serde_json::to_value(list)?)
}

/// Options named in a refusal, at most (the rest are counted in `availableTotal`).
const AVAILABLE_IN_ERROR: usize = 50;

/// The refusal of `browser.dropdown.select` on an element that is not a native select: a custom
/// listbox is selected by clicking its option's ref; anything else takes no selection at all.
fn not_native(role: &str) -> RpcError {
    match role {
        "combobox" | "listbox" => RpcError::new(
            ErrorCode::ElementNotActionable,
            "not a native select: click the option's ref from a fresh Observation",
        )
        .with_context("reason", json!("custom_listbox")),
        _ => RpcError::invalid_params(format!(
            "the ref is a {role}, not a select; browser.dropdown.select needs a native select"
        ))
        .with_context("reason", json!("not_a_select"))
        .with_context("path", json!("arguments.ref")),
    }
}

/// A refusal that names the select's options (value, label, disabled), bounded.
fn refused_choice(list: &page::OptionList, message: String, reason: &str) -> RpcError {
    let available: Vec<Value> = list
        .options
        .iter()
        .take(AVAILABLE_IN_ERROR)
        .map(|o| json!({"value": o.value, "label": o.label, "disabled": o.disabled}))
        .collect();
    RpcError::invalid_params(message)
        .with_context("reason", json!(reason))
        .with_context("multiple", json!(list.multiple))
        .with_context("available", json!(available))
        .with_context("availableTotal", json!(list.total))
}

/// The option values to select: `values` (each an option's value, else its label, as the page
/// script matches) and the values of the options `labels` name, checked against the select's
/// options. A select whose options were not all listed leaves an unlisted value to the script.
fn chosen_values(
    list: &page::OptionList,
    mut values: Vec<String>,
    labels: &[String],
) -> Result<Vec<String>, RpcError> {
    let find = |wanted: &str, by_label: bool| {
        let by_value = (!by_label)
            .then(|| list.options.iter().find(|o| o.value == wanted))
            .flatten();
        by_value.or_else(|| {
            list.options
                .iter()
                .find(|o| o.label.trim() == wanted.trim())
        })
    };
    let asked = values.len() + labels.len();
    if !list.multiple && asked != 1 {
        return Err(refused_choice(
            list,
            format!("a single select takes exactly one option; {asked} were given"),
            "too_many_values",
        ));
    }
    let mut chosen = Vec::new();
    let named = values.drain(..).map(|v| (v, false));
    for (wanted, by_label) in named.chain(labels.iter().map(|l| (l.clone(), true))) {
        match find(&wanted, by_label) {
            Some(option) if option.disabled => {
                return Err(refused_choice(
                    list,
                    format!("the option {wanted:?} is disabled"),
                    "option_disabled",
                ));
            }
            // The option's own value (a value given by its label is verified by value).
            Some(option) if by_label || option.value != wanted => chosen.push(option.value.clone()),
            Some(_) => chosen.push(wanted),
            None if list.truncated => chosen.push(wanted),
            None => {
                let what = match by_label {
                    true => "labelled",
                    false => "with value or label",
                };
                return Err(refused_choice(
                    list,
                    format!("no option {what} {wanted:?}"),
                    "option_not_found",
                ));
            }
        }
    }
    Ok(chosen)
}

async fn dropdown_select(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: SelectParams,
) -> Result<Value, ToolError> {
    let call = Call::of(&params, &params.observe);
    act::run(env, scope, call, Select { params }).await
}

/// `browser.dropdown.select` in the action pipeline: a page script is its input, so it reads
/// no before state of the tab and collects no effects beyond the select's own.
struct Select {
    params: SelectParams,
}

/// The select and the option values to select, checked against its options.
struct SelectAim {
    target: RefTarget,
    values: Vec<String>,
}

impl ActionTool for Select {
    type Aim = SelectAim;
    type Read = SelectionOutcome;
    const ACTION: Action = Action::Select;
    const STEPS: Steps = Steps {
        effects: false,
        late_watch: false,
    };

    async fn aim(&mut self, act: &mut Act<'_>) -> Result<Aimed<SelectAim>, ToolError> {
        let (tab, ctx) = (&mut act.tab, &act.ctx);
        let (target, summary) = tab.resolve_ref(act.scope, &ctx.frame_id, &self.params.target)?;
        let subject = Subject::RefPosition {
            element_ref: u64::from(target.element_ref),
            role: summary.role.clone(),
        };
        let values = self.params.values.take().unwrap_or_default();
        let labels = self.params.labels.take().unwrap_or_default();
        if values.is_empty() && labels.is_empty() {
            return Err(ToolError::from(
                RpcError::invalid_params("give \"values\" or \"labels\"")
                    .with_context("path", json!("arguments.values")),
            ));
        }
        // Everything the select needs is checked before the page script that writes runs, so a
        // mistake is the caller's (`invalid_params`), never a mutation of unknown outcome.
        let list = ListOptions {
            target: target.clone(),
            limit: page::OPTIONS_MAX_LIMIT,
        };
        let list = ctx.run(tab.calls(), &list).await?;
        if list.kind != page::OptionsKind::Native {
            return Err(ToolError::from(not_native(&summary.role)));
        }
        let values = chosen_values(&list, values, &labels)?;
        Ok(Aimed::at(
            "native_select",
            subject,
            SelectAim { target, values },
        ))
    }

    async fn dispatch(
        &mut self,
        act: &mut Act<'_>,
        aimed: &mut Aimed<SelectAim>,
    ) -> Result<SelectionOutcome, ToolError> {
        let script = SelectOptions {
            target: aimed.own.target.clone(),
            values: aimed.own.values.clone(),
        };
        Ok(act.ctx.run(act.tab.calls(), &script).await?)
    }

    fn judge(
        &self,
        aimed: &Aimed<SelectAim>,
        outcome: SelectionOutcome,
        _effects: &Effects,
    ) -> Result<Judged, ToolError> {
        Ok(select_evidence(&aimed.own.values, &outcome).into())
    }
}

/// Select evidence: `verified` when every chosen value is selected afterwards; the options
/// selected then, and whether the selection changed.
fn select_evidence(values: &[String], outcome: &SelectionOutcome) -> Evidence {
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
    evidence
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::{ListedOption, OptionList, OptionsKind};

    fn select(multiple: bool, truncated: bool) -> OptionList {
        let option = |index, value: &str, label: &str, disabled| ListedOption {
            index,
            value: value.into(),
            label: label.into(),
            selected: false,
            disabled,
        };
        OptionList {
            kind: OptionsKind::Native,
            multiple,
            options: vec![
                option(0, "fr", "France", false),
                option(1, "de", "Germany", false),
                option(2, "xx", "Closed", true),
            ],
            total: 3,
            truncated,
            popup_visible: None,
        }
    }

    fn check(list: &OptionList, values: &[&str], labels: &[&str]) -> Result<Vec<String>, String> {
        let values = values.iter().map(|v| v.to_string()).collect();
        let labels: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
        chosen_values(list, values, &labels).map_err(|error| {
            assert_eq!(error.code, ErrorCode::InvalidParams);
            let context = error.context.unwrap();
            assert_eq!(context["availableTotal"], 3);
            context["reason"].as_str().unwrap().to_owned()
        })
    }

    #[test]
    fn a_selection_is_checked_against_the_options_before_dispatch() {
        let single = select(false, false);
        assert_eq!(check(&single, &["de"], &[]), Ok(vec!["de".into()]));
        assert_eq!(check(&single, &[], &["France"]), Ok(vec!["fr".into()]));
        // A value given as a label (the page script's fallback) is verified by value.
        assert_eq!(check(&single, &["Germany"], &[]), Ok(vec!["de".into()]));
        assert_eq!(check(&single, &["zz"], &[]), Err("option_not_found".into()));
        assert_eq!(check(&single, &[], &["fr"]), Err("option_not_found".into()));
        assert_eq!(check(&single, &["xx"], &[]), Err("option_disabled".into()));
        assert_eq!(
            check(&single, &["fr", "de"], &[]),
            Err("too_many_values".into())
        );
        assert_eq!(
            check(&single, &["fr"], &["Germany"]),
            Err("too_many_values".into())
        );
        let multiple = select(true, false);
        assert_eq!(
            check(&multiple, &["fr"], &["Germany"]),
            Ok(vec!["fr".into(), "de".into()])
        );
        // Options beyond the listed ones are the page script's to find.
        assert_eq!(
            check(&select(false, true), &["zz"], &[]),
            Ok(vec!["zz".into()])
        );
        assert_eq!(
            not_native("button").code,
            ErrorCode::InvalidParams,
            "anything but a listbox takes no selection"
        );
        assert_eq!(not_native("combobox").code, ErrorCode::ElementNotActionable);
    }

    #[test]
    fn a_selection_is_verified_when_every_chosen_value_is_selected() {
        let outcome = |changed, selected: &[&str]| SelectionOutcome {
            changed,
            selected: selected
                .iter()
                .map(|v| page::SelectedOption {
                    value: (*v).into(),
                    label: v.to_uppercase(),
                })
                .collect(),
        };
        let check = |values: &[&str], outcome: SelectionOutcome, expect: Value| {
            let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
            let evidence = select_evidence(&values, &outcome).to_json();
            let got = json!({"status": evidence["status"], "effects": evidence["effects"], "selected": evidence["selected"].as_array().map(Vec::len)});
            assert_eq!(got, expect, "{values:?}");
        };
        check(
            &["fr"],
            outcome(true, &["fr"]),
            json!({"status": "verified", "effects": ["selected_changed", "value_changed"], "selected": 1}),
        );
        // Already selected: verified, nothing changed.
        check(
            &["fr"],
            outcome(false, &["fr"]),
            json!({"status": "verified", "effects": [], "selected": 1}),
        );
        // The page put something else back.
        check(
            &["fr", "de"],
            outcome(true, &["fr"]),
            json!({"status": "mismatch", "effects": ["selected_changed", "value_changed"], "selected": 1}),
        );
    }
}
