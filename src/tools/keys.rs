//! Keyboard and typing tools: `browser.press`, `browser.type` and `browser.keyboard`, their
//! guarded composite steps (pin, re-check, count what was dispatched) and the key encoding sent
//! with `Input.dispatchKeyEvent`.
//!
//! Shared action plumbing (ref resolution, effect collection, the dialog-aware final dispatch,
//! the closing Observation) is `actions.rs`'s and used from there, not copied. This file does
//! not click, scroll or select, and it never reads a typed value back into its output: evidence
//! carries lengths only.

use serde_json::{Map, Value, json};

use super::actions::{
    Before, Finished, INPUT_TIMEOUT, SETTLE, action_output, collect_effects, current_url,
    dispatch_final, evidence_schema, finish_with_observation, merged, ref_properties, resolve_ref,
    snapshot,
};
use super::context::{CallScope, ToolEnv, bool_arg, str_arg};
use super::manifest::{Scope, ToolDef, object};
use super::observe::{
    PageContext, SCRIPT_TIMEOUT, observe_input_properties, page_context, page_error,
};
use super::progress::Subject;
use super::tabs::{cdp_error, controlled_tab};
use crate::cdp::{CdpClient, CdpError};
use crate::page::{self, ActiveElementKey, FocusAndSelectAll, SetNativeValue};
use crate::protocol::errors::{ErrorCode, RpcError};
use crate::session::TabGuard;

/// Longest text `browser.type` / `browser.keyboard` accept.
const MAX_TYPE_CHARS: usize = 10_000;
/// Input types whose value is set through the native setter instead of keystrokes.
const NATIVE_VALUE_TYPES: &[&str] = &[
    "date",
    "time",
    "datetime-local",
    "month",
    "week",
    "color",
    "range",
];

/// The keyboard tools' definitions, in manifest order (after `browser.click`).
pub fn defs() -> Vec<ToolDef> {
    let observe = json!({"observe": object(observe_input_properties(), &[])});
    vec![
        ToolDef {
            name: "browser.press",
            description: "Press one key (e.g. Enter, Tab, Escape, ArrowDown, a, with optional `modifiers`) on the focused element, or on an Observation ref after focusing it. Returns effects, or status unavailable with reason no_observable_effect, and a fresh Observation.",
            capability: "action.input",
            scope: Scope::Target,
            mutating: true,
            input_schema: object(
                merged(
                    merged(
                        ref_properties(),
                        json!({
                            "key": {"type": "string", "minLength": 1, "maxLength": 32},
                            "modifiers": {"type": "array", "maxItems": 4, "items": {"enum": ["Alt", "Control", "Meta", "Shift"]}},
                        }),
                    ),
                    observe.clone(),
                ),
                &["key"],
            ),
            output_schema: action_output(evidence_schema("press")),
            sensitivity_input: &[],
            sensitivity_output: &["browser_data"],
        },
        ToolDef {
            name: "browser.type",
            description: "Type text into an Observation ref as a guarded composite action: focus, select-all and delete (unless clear: false), one keystroke per character, optional Enter (submit). Target, session, document and the focused element are pinned and re-checked between steps; a change before the first mutation fails with action_not_verified, after it with unknown_outcome. Date/time/color/range inputs use the native value setter. Evidence reports lengths, never a password value.",
            capability: "action.input",
            scope: Scope::Target,
            mutating: true,
            input_schema: object(
                merged(
                    merged(
                        ref_properties(),
                        json!({
                            "text": {"type": "string", "maxLength": MAX_TYPE_CHARS, "x-browser-pilot-sensitivity": ["browser_data", "credential"]},
                            "clear": {"type": "boolean"},
                            "submit": {"type": "boolean"},
                            "verification": {"enum": ["best_effort", "require_exact"]},
                        }),
                    ),
                    observe.clone(),
                ),
                &["observationId", "ref", "text"],
            ),
            output_schema: action_output(evidence_schema("type")),
            sensitivity_input: &["browser_data", "credential"],
            sensitivity_output: &["browser_data"],
        },
        ToolDef {
            name: "browser.keyboard",
            description: "Type text into the element that has focus now, one keystroke per character, guarded like browser.type (the focused element is pinned and re-checked between characters).",
            capability: "action.input",
            scope: Scope::Target,
            mutating: true,
            input_schema: object(
                merged(
                    json!({
                        "text": {"type": "string", "minLength": 1, "maxLength": MAX_TYPE_CHARS, "x-browser-pilot-sensitivity": ["browser_data", "credential"]},
                        "submit": {"type": "boolean"},
                    }),
                    observe.clone(),
                ),
                &["text"],
            ),
            output_schema: action_output(evidence_schema("keyboard")),
            sensitivity_input: &["browser_data", "credential"],
            sensitivity_output: &["browser_data"],
        },
    ]
}

/// `Input.dispatchKeyEvent` parameters for a named key or a single character.
fn key_params(key: &str, modifiers: u64) -> (Value, Option<String>) {
    let named: Option<(&str, i64, Option<&str>)> = match key {
        "Enter" => Some(("Enter", 13, Some("\r"))),
        "Tab" => Some(("Tab", 9, None)),
        "Escape" => Some(("Escape", 27, None)),
        "Backspace" => Some(("Backspace", 8, None)),
        "Delete" => Some(("Delete", 46, None)),
        "ArrowUp" => Some(("ArrowUp", 38, None)),
        "ArrowDown" => Some(("ArrowDown", 40, None)),
        "ArrowLeft" => Some(("ArrowLeft", 37, None)),
        "ArrowRight" => Some(("ArrowRight", 39, None)),
        "Home" => Some(("Home", 36, None)),
        "End" => Some(("End", 35, None)),
        "PageUp" => Some(("PageUp", 33, None)),
        "PageDown" => Some(("PageDown", 34, None)),
        " " | "Space" => Some((" ", 32, Some(" "))),
        _ => None,
    };
    match named {
        Some((name, code, text)) => {
            let mut params = json!({"key": name, "code": if name == " " { "Space" } else { name }, "windowsVirtualKeyCode": code, "nativeVirtualKeyCode": code, "modifiers": modifiers});
            if let Some(text) = text
                && modifiers == 0
            {
                params["text"] = json!(text);
            }
            (params, text.map(str::to_owned))
        }
        // Other named keys (Shift, Control, F5, ...): no text.
        None if key.chars().count() > 1 => (
            json!({"key": key, "code": key, "modifiers": modifiers}),
            None,
        ),
        None => {
            let ch = key.chars().next().unwrap_or(' ');
            let upper = ch.to_ascii_uppercase();
            let code = if ch.is_ascii_alphanumeric() {
                upper as i64
            } else {
                0
            };
            let mut params = json!({"key": key, "modifiers": modifiers});
            if code != 0 {
                params["windowsVirtualKeyCode"] = json!(code);
                params["code"] = json!(if ch.is_ascii_digit() {
                    format!("Digit{ch}")
                } else {
                    format!("Key{upper}")
                });
            }
            let text = (modifiers & !8 == 0).then(|| key.to_owned());
            if let Some(text) = &text {
                params["text"] = json!(text);
                params["unmodifiedText"] = json!(text);
            }
            (params, text)
        }
    }
}

async fn key_press(
    client: &CdpClient,
    session: &crate::cdp::SessionId,
    key: &str,
    modifiers: u64,
) -> Result<(), CdpError> {
    let (params, text) = key_params(key, modifiers);
    let mut down = params.clone();
    down["type"] = json!(if text.is_some() {
        "keyDown"
    } else {
        "rawKeyDown"
    });
    let mut up = params;
    up["type"] = json!("keyUp");
    if let Some(map) = up.as_object_mut() {
        map.remove("text");
        map.remove("unmodifiedText");
    }
    // Both events go out at once; the session handles them in order, so the key-up still
    // follows the key-down, and the round trip is paid once.
    let (down, up) = tokio::join!(
        client.call(Some(session), "Input.dispatchKeyEvent", down, INPUT_TIMEOUT),
        client.call(Some(session), "Input.dispatchKeyEvent", up, INPUT_TIMEOUT),
    );
    down?;
    up.map(|_| ())
}

fn modifier_bits(arguments: &Map<String, Value>) -> u64 {
    arguments
        .get("modifiers")
        .and_then(Value::as_array)
        .map_or(0, |mods| {
            mods.iter().filter_map(Value::as_str).fold(0, |bits, m| {
                bits | match m {
                    "Alt" => 1,
                    "Control" => 2,
                    "Meta" => 4,
                    "Shift" => 8,
                    _ => 0,
                }
            })
        })
}

pub async fn press(
    env: &ToolEnv,
    scope: &CallScope,
    arguments: Map<String, Value>,
) -> Result<Value, RpcError> {
    let (client, mut guard) = controlled_tab(env, scope).await?;
    let ctx = page_context(&client, &mut guard).await?;
    let key = str_arg(&arguments, "key").unwrap_or_default().to_owned();
    let modifiers = modifier_bits(&arguments);
    let target = match arguments.contains_key("observationId") {
        true => {
            let (target, _) = resolve_ref(&mut guard, scope, &ctx.frame_id, &arguments)?;
            page::run(
                &client,
                &ctx.session,
                ctx.context,
                &FocusAndSelectAll(target.clone()),
                SCRIPT_TIMEOUT,
            )
            .await
            .map_err(page_error)?;
            Some(target)
        }
        false => None,
    };
    let element = match &target {
        Some(target) => Some(snapshot(&client, &ctx, target).await?),
        None => None,
    };
    let active_before = page::run(
        &client,
        &ctx.session,
        ctx.context,
        &ActiveElementKey,
        SCRIPT_TIMEOUT,
    )
    .await
    .map_err(page_error)?;
    let subject = match &element {
        Some(element) => Subject::Element(element.element_key.clone()),
        None => Subject::Focused(active_before.key.clone()),
    };
    let before = Before {
        url: current_url(&client, &mut guard).await,
        popups: env.browser.popups_of(&guard.target),
        element,
    };
    let mut dialogs = env.browser.dialog_signals();
    let (client2, session) = (client.clone(), ctx.session.clone());
    let dialog = dispatch_final(env, &guard.target, &mut dialogs, async move {
        key_press(&client2, &session, &key, modifiers).await
    })
    .await?;
    if !dialog {
        tokio::time::sleep(SETTLE).await;
    }
    let mut effects = collect_effects(
        env,
        &client,
        &mut guard,
        &before,
        target.as_ref(),
        &mut dialogs,
        dialog,
    )
    .await;
    let settled_in_place = !effects.dialog
        && !effects.list.contains(&"navigation")
        && !effects.list.contains(&"focus_changed");
    if settled_in_place
        && let Ok(ctx) = page_context(&client, &mut guard).await
        && let Ok(active_after) = page::run(
            &client,
            &ctx.session,
            ctx.context,
            &ActiveElementKey,
            SCRIPT_TIMEOUT,
        )
        .await
        && active_after.key != active_before.key
    {
        effects.list.push("focus_changed");
    }
    let status = if effects.list.is_empty() {
        "unavailable"
    } else {
        "verified"
    };
    let mut evidence =
        json!({"action": "press", "status": status, "kind": "key", "effects": effects.list});
    if status == "unavailable" {
        evidence["reason"] = json!("no_observable_effect");
    }
    let finished = Finished {
        arguments: &arguments,
        evidence,
        dialog_open: effects.dialog,
        subject,
        frame_id: ctx.frame_id.clone(),
    };
    finish_with_observation(env, &client, &mut guard, scope, finished).await
}

/// What a guarded composite action pins and re-checks between steps.
struct Pin {
    context: crate::page::ExecutionContextId,
    document_key: String,
    active_key: Option<String>,
    session: crate::cdp::SessionId,
    frame_id: String,
}

/// Step-failure bookkeeping for guarded typing.
struct Guarded<'a> {
    action: &'static str,
    dispatched: u64,
    pin: &'a Pin,
}

impl Guarded<'_> {
    async fn check(
        &self,
        client: &CdpClient,
        guard: &mut TabGuard,
        step: &str,
    ) -> Result<PageContext, RpcError> {
        // The pinned isolated-world context dies with its document, so a call into it is the
        // document check; a different session means the tab was re-attached.
        let session = guard
            .session(client)
            .await
            .map_err(|_| self.fail(step, "target_changed"))?;
        // The pinned session is the tab's, or that of the out-of-process frame selected.
        let session_root =
            super::frames::repin(guard, &session, &self.pin.session, &self.pin.frame_id)
                .map_err(|reason| self.fail(step, reason))?;
        let ctx = PageContext {
            session: self.pin.session.clone(),
            frame_id: self.pin.frame_id.clone(),
            context: self.pin.context,
            session_root,
        };
        let active = page::run(
            client,
            &ctx.session,
            ctx.context,
            &ActiveElementKey,
            SCRIPT_TIMEOUT,
        )
        .await
        .map_err(|_| self.fail(step, "document_changed"))?;
        if active.document_key != self.pin.document_key {
            return Err(self.fail(step, "document_changed"));
        }
        if active.key != self.pin.active_key {
            return Err(self.fail(step, "focus_changed"));
        }
        Ok(ctx)
    }

    fn fail(&self, step: &str, reason: &str) -> RpcError {
        match self.dispatched {
            0 => RpcError::new(ErrorCode::ActionNotVerified, format!("{reason} before {step}; nothing was changed"))
                .with_context("action", json!(self.action))
                .with_context("step", json!(step))
                .with_context("reason", json!(reason))
                .with_remediation("observe", "Observe the page and decide whether to try again."),
            dispatched => RpcError::new(ErrorCode::UnknownOutcome, format!("{reason} before {step}; {dispatched} step(s) had already run"))
                .with_context("action", json!(self.action))
                .with_context("step", json!(step))
                .with_context("reason", json!(reason))
                .with_context("dispatchedSteps", json!(dispatched))
                .with_context("remainingStepsStopped", json!(true))
                .with_remediation("inspect_state", "Observe the page and decide from its current state; never replay the whole input automatically."),
        }
    }
}

async fn type_characters(
    client: &CdpClient,
    guard: &mut TabGuard,
    guarded: &mut Guarded<'_>,
    text: &str,
    submit: bool,
) -> Result<(), RpcError> {
    for (index, ch) in text.chars().enumerate() {
        let step = format!("type_character:{index}");
        let ctx = guarded.check(client, guard, &step).await?;
        let key = ch.to_string();
        let result = match ch {
            '\n' => key_press(client, &ctx.session, "Enter", 0).await,
            _ => key_press(client, &ctx.session, &key, 0).await,
        };
        result.map_err(cdp_error)?;
        guarded.dispatched += 1;
    }
    if submit {
        let ctx = guarded.check(client, guard, "submit").await?;
        key_press(client, &ctx.session, "Enter", 0)
            .await
            .map_err(cdp_error)?;
        guarded.dispatched += 1;
    }
    Ok(())
}

pub async fn type_text(
    env: &ToolEnv,
    scope: &CallScope,
    arguments: Map<String, Value>,
) -> Result<Value, RpcError> {
    let (client, mut guard) = controlled_tab(env, scope).await?;
    let ctx = page_context(&client, &mut guard).await?;
    let (target, summary) = resolve_ref(&mut guard, scope, &ctx.frame_id, &arguments)?;
    let text = str_arg(&arguments, "text").unwrap_or_default().to_owned();
    let clear = bool_arg(&arguments, "clear", true);
    let submit = bool_arg(&arguments, "submit", false);
    let verification = str_arg(&arguments, "verification")
        .unwrap_or("best_effort")
        .to_owned();
    let before = snapshot(&client, &ctx, &target).await?;
    let before_length = before
        .value_length
        .or(before.value.as_ref().map(|v| v.chars().count() as u64))
        .unwrap_or(0);
    let text_length = text.chars().count() as u64;
    let native = summary
        .input_type
        .as_deref()
        .is_some_and(|t| NATIVE_VALUE_TYPES.contains(&t));
    let kind = match (&summary.input_type, summary.tag.as_str()) {
        (Some(input_type), _) => format!("input:{input_type}"),
        (None, "textarea") => "textarea".to_owned(),
        (None, "input") => "input".to_owned(),
        (None, _) => "contenteditable".to_owned(),
    };
    if native {
        let outcome = page::run(
            &client,
            &ctx.session,
            ctx.context,
            &SetNativeValue {
                target: target.clone(),
                value: text.clone(),
            },
            SCRIPT_TIMEOUT,
        )
        .await
        .map_err(page_error)?;
        let after_length = outcome.after.chars().count() as u64;
        let matches = outcome.after == text;
        let evidence = json!({
            "action": "type", "status": if matches { "verified" } else { "mismatch" }, "kind": kind, "sensitive": false,
            "effects": if outcome.before != outcome.after { vec!["value_changed"] } else { vec![] },
            "beforeLength": before_length, "expectedLength": text_length, "afterLength": after_length,
            "verification": verification, "method": "native_setter", "canceled": outcome.canceled,
        });
        let finished = Finished {
            arguments: &arguments,
            evidence,
            dialog_open: false,
            subject: Subject::Element(before.element_key.clone()),
            frame_id: ctx.frame_id.clone(),
        };
        return finish_type(
            env,
            &client,
            &mut guard,
            scope,
            finished,
            &verification,
            matches,
        )
        .await;
    }
    let focus = page::run(
        &client,
        &ctx.session,
        ctx.context,
        &FocusAndSelectAll(target.clone()),
        SCRIPT_TIMEOUT,
    )
    .await
    .map_err(page_error)?;
    if !focus.focused {
        return Err(RpcError::new(
            ErrorCode::ElementNotActionable,
            "the element did not take focus",
        )
        .with_context("reason", json!("not_focusable")));
    }
    let pin = Pin {
        context: ctx.context,
        document_key: before.document_key.clone(),
        active_key: focus.active_element_key.clone(),
        session: ctx.session.clone(),
        frame_id: ctx.frame_id.clone(),
    };
    let mut guarded = Guarded {
        action: "type",
        dispatched: 0,
        pin: &pin,
    };
    if clear && before_length > 0 {
        let ctx = guarded.check(&client, &mut guard, "delete").await?;
        key_press(&client, &ctx.session, "Delete", 0)
            .await
            .map_err(cdp_error)?;
        guarded.dispatched += 1;
    }
    type_characters(&client, &mut guard, &mut guarded, &text, submit).await?;
    tokio::time::sleep(SETTLE).await;
    let expected_length = if clear {
        text_length
    } else {
        before_length + text_length
    };
    let ctx = page_context(&client, &mut guard).await?;
    let after = match snapshot(&client, &ctx, &target).await {
        Ok(after) => Some(after),
        Err(_) if submit => None,
        Err(error) => return Err(error),
    };
    let after_length = after.as_ref().map(|a| {
        a.value_length
            .or(a.value.as_ref().map(|v| v.chars().count() as u64))
            .unwrap_or(0)
    });
    let sensitive = before.sensitive || after.as_ref().is_some_and(|a| a.sensitive);
    let exact = match (&after, sensitive) {
        (Some(after), false) if !clear => {
            after.value.as_deref().is_some_and(|v| v.ends_with(&text))
                && after_length == Some(expected_length)
        }
        (Some(after), false) => {
            after.value.as_deref() == Some(text.as_str())
                || (after.value.is_none() && after_length == Some(expected_length))
        }
        (Some(_), true) => after_length == Some(expected_length),
        (None, _) => true,
    };
    let mut effects = Vec::new();
    if after
        .as_ref()
        .is_some_and(|a| a.value != before.value || a.value_length != before.value_length)
    {
        effects.push("value_changed");
    }
    if after.is_none() {
        effects.push("document_changed");
    }
    let mut evidence = json!({
        "action": "type", "status": if exact { "verified" } else { "mismatch" }, "kind": kind, "sensitive": sensitive,
        "effects": effects, "beforeLength": before_length, "expectedLength": expected_length,
        "verification": verification,
    });
    if let Some(after_length) = after_length {
        evidence["afterLength"] = json!(after_length);
    }
    let finished = Finished {
        arguments: &arguments,
        evidence,
        dialog_open: false,
        subject: Subject::Element(before.element_key.clone()),
        frame_id: ctx.frame_id.clone(),
    };
    finish_type(
        env,
        &client,
        &mut guard,
        scope,
        finished,
        &verification,
        exact,
    )
    .await
}

async fn finish_type(
    env: &ToolEnv,
    client: &CdpClient,
    guard: &mut TabGuard,
    scope: &CallScope,
    finished: Finished<'_>,
    verification: &str,
    exact: bool,
) -> Result<Value, RpcError> {
    if verification == "require_exact" && !exact {
        return Err(RpcError::new(
            ErrorCode::VerificationFailed,
            "the field's value after typing is not the expected one",
        )
        .with_context("evidence", finished.evidence)
        .with_remediation(
            "observe",
            "Observe the field: the page may have rewritten, sanitized or rejected the input.",
        ));
    }
    finish_with_observation(env, client, guard, scope, finished).await
}

pub async fn keyboard(
    env: &ToolEnv,
    scope: &CallScope,
    arguments: Map<String, Value>,
) -> Result<Value, RpcError> {
    let (client, mut guard) = controlled_tab(env, scope).await?;
    let ctx = page_context(&client, &mut guard).await?;
    let text = str_arg(&arguments, "text").unwrap_or_default().to_owned();
    let submit = bool_arg(&arguments, "submit", false);
    let active = page::run(
        &client,
        &ctx.session,
        ctx.context,
        &ActiveElementKey,
        SCRIPT_TIMEOUT,
    )
    .await
    .map_err(page_error)?;
    if active.key.is_none() || !active.editable {
        return Err(RpcError::new(
            ErrorCode::ElementNotActionable,
            "no editable element has focus",
        )
        .with_context("reason", json!("no_focus")));
    }
    let pin = Pin {
        context: ctx.context,
        document_key: active.document_key.clone(),
        active_key: active.key.clone(),
        session: ctx.session.clone(),
        frame_id: ctx.frame_id.clone(),
    };
    let mut guarded = Guarded {
        action: "keyboard",
        dispatched: 0,
        pin: &pin,
    };
    type_characters(&client, &mut guard, &mut guarded, &text, submit).await?;
    tokio::time::sleep(SETTLE).await;
    let evidence = json!({"action": "keyboard", "status": "verified", "kind": active.tag.unwrap_or_default(), "effects": ["value_changed"], "typedLength": text.chars().count(), "dispatchedSteps": guarded.dispatched});
    let finished = Finished {
        arguments: &arguments,
        evidence,
        dialog_open: false,
        subject: Subject::Focused(active.key),
        frame_id: ctx.frame_id.clone(),
    };
    finish_with_observation(env, &client, &mut guard, scope, finished).await
}
