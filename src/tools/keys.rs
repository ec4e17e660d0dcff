//! `browser.press`: one key, with modifiers held around it, on the focused element or on an
//! Observation ref after focusing it. Its aim (the chord from the US layout, the ref focused,
//! the focused element and its field state before), its dispatch (the chord's key events behind
//! the dialog race) and its evidence (any effect, with what the key did to the field it left
//! focused) run in the action pipeline (`act.rs`). The key encoding and the US layout are
//! `cdp/input.rs`'s; typing text is `typing.rs`'s. The rules are written down in
//! docs/keyboard.md.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::act::{self, Act, ActionTool, Aimed, Call, Effects, Judged, Steps};
use super::actions::{
    ObserveArgument, action_output, evidence_schema, merged, ref_properties, snapshot,
};
use super::context::{TargetScope, ToolEnv};
use super::error::ToolError;
use super::evidence::{Action, Effect, Evidence};
use super::manifest::{Gate, Lane, ToolDef, object};
use super::progress::Subject;
use super::tab::RefParams;
use crate::cdp::input::table::{self, Modifier};
use crate::cdp::input::{Key, chord_events};
use crate::page::{ActiveElementKey, ActiveElementState, ActiveState, FocusAndSelectAll};
use crate::protocol::errors::{RemediationAction, RpcError};

/// `browser.press`'s definition (after `browser.click` in the manifest; `typing.rs` follows).
pub fn defs() -> Vec<ToolDef> {
    let observe = super::actions::observe_property();
    vec![ToolDef {
        name: "browser.press",
        description: "Press one key (a named key such as Enter, Tab, Escape, ArrowDown, F5, or one US-layout character), with optional `modifiers` held around it (Shift+Tab, Control+Shift+A), on the focused element, or on an Observation ref after focusing it. An unknown key fails with invalid_params (reason unknown_key). Returns effects, or status unavailable with reason no_observable_effect, and a fresh Observation.",
        capability: "action.input",
        mutating: true,
        input_schema: object(
            merged(
                merged(
                    ref_properties(),
                    json!({
                        "key": {"type": "string", "minLength": 1, "maxLength": 32, "description": "Key name such as Enter, Tab, ArrowDown, or one character."},
                        "modifiers": {"type": "array", "maxItems": 4, "items": {"enum": ["Alt", "Control", "Meta", "Shift"]}, "description": "Modifier keys held while the key is pressed."},
                    }),
                ),
                observe.clone(),
            ),
            &["key"],
        ),
        output_schema: action_output(evidence_schema("press")),
        sensitivity_input: &[],
        sensitivity_output: &["browser_data"],
        lane: Lane::Ordinary,
        gate: Gate::InTool,
        handler: handler!(Target: press),
    }]
}

/// What `browser.press` was asked for: the key and the modifiers to hold, in order (Shift added
/// when the US layout needs it for the character; the key itself never held twice).
fn press_chord(name: &str, requested: &[Modifier]) -> Result<(Key, Vec<Modifier>), ToolError> {
    let name = if name == "Space" { " " } else { name };
    let shift_held = requested.contains(&table::SHIFT);
    // In a shortcut (Control, Alt or Meta held) a letter names its key, whatever its case:
    // Control+A is Control and the A key, never Control+Shift+A.
    let shortcut = requested.iter().any(|m| *m != table::SHIFT);
    let mut chars = name.chars();
    let key = match (table::named_key(name), chars.next(), chars.next()) {
        (Some(named), _, _) => Some((Key::named(named), false)),
        (None, Some(ch), None) if shortcut && ch.is_ascii_alphabetic() => {
            table::printable_key(ch.to_ascii_lowercase())
                .map(|(key, _)| (Key::printable(key, shift_held), shift_held))
        }
        (None, Some(ch), None) => table::printable_key(ch).map(|(key, shifted)| {
            // With Shift held a key types its shifted character, as on a real keyboard.
            let shifted = shifted || (shift_held && key.plain != key.shifted);
            (Key::printable(key, shifted), shifted)
        }),
        _ => None,
    };
    let Some((key, needs_shift)) = key else {
        return Err(ToolError::from(RpcError::invalid_params(format!(
            "{name:?} is neither a named key nor a character of the US keyboard layout"
        ))
        .with_context("path", json!("arguments.key"))
        .with_context("reason", json!("unknown_key"))
        .with_remediation(
            RemediationAction::ChangeKey,
            "Use a named key (Enter, Tab, Escape, Backspace, Delete, ArrowUp, Home, F5, Shift, ...) or one US-layout character; type other text with browser.keyboard.",
        )));
    };
    let mut held: Vec<Modifier> = Vec::with_capacity(4);
    for modifier in requested {
        if modifier.bit != key.own_bit && !held.contains(modifier) {
            held.push(*modifier);
        }
    }
    if needs_shift && !held.contains(&table::SHIFT) {
        held.push(table::SHIFT);
    }
    Ok((key, held))
}

#[derive(Deserialize, Serialize)]
struct PressParams {
    #[serde(flatten)]
    target: RefParams,
    key: String,
    #[serde(default)]
    modifiers: Vec<String>,
    #[serde(flatten)]
    observe: ObserveArgument,
}

async fn press(
    env: &ToolEnv,
    scope: &TargetScope<'_>,
    params: PressParams,
) -> Result<Value, ToolError> {
    let modifiers: Vec<Modifier> = params
        .modifiers
        .iter()
        .filter_map(|name| table::modifier(name))
        .collect();
    let (key, held) = press_chord(&params.key, &modifiers)?;
    let call = Call::of(&params, &params.observe);
    let target = params.target;
    act::run(env, scope, call, Press { key, held, target }).await
}

/// `browser.press` in the action pipeline: the chord, checked before the tab is taken.
struct Press {
    key: Key,
    held: Vec<Modifier>,
    target: RefParams,
}

/// The focused element before the key: its key, and its field state (value, selection).
struct PressAim {
    active_key: Option<String>,
    field: Option<ActiveState>,
}

impl ActionTool for Press {
    type Aim = PressAim;
    type Read = ();
    const ACTION: Action = Action::Press;
    const STEPS: Steps = Steps {
        effects: true,
        late_watch: false,
    };

    async fn aim(&mut self, act: &mut Act<'_>) -> Result<Aimed<PressAim>, ToolError> {
        let (tab, ctx) = (&mut act.tab, &act.ctx);
        let target = match self.target.observation_id.is_some() {
            true => {
                let (target, _) = tab.resolve_ref(act.scope, &ctx.frame_id, &self.target)?;
                ctx.run(tab.calls(), &FocusAndSelectAll(target.clone()))
                    .await?;
                Some(target)
            }
            false => None,
        };
        let element = match &target {
            Some(target) => Some(snapshot(tab.calls(), ctx, target).await?),
            None => None,
        };
        let (active_before, field_before) = tokio::join!(
            ctx.run(tab.calls(), &ActiveElementKey),
            ctx.run(tab.calls(), &ActiveElementState)
        );
        let active_before = active_before?;
        let subject = match &element {
            Some(element) => Subject::Element(element.element_key.clone()),
            None => Subject::Focused(active_before.key.clone()),
        };
        let own = PressAim {
            active_key: active_before.key,
            field: field_before.ok(),
        };
        let mut aimed = Aimed::at("key", subject, own);
        (aimed.target, aimed.element) = (target, element);
        Ok(aimed)
    }

    async fn dispatch(
        &mut self,
        act: &mut Act<'_>,
        _aimed: &mut Aimed<PressAim>,
    ) -> Result<(), ToolError> {
        let (input, session) = (act.tab.input(), act.ctx.session.clone());
        let events = chord_events(&self.key, &self.held);
        act.race(async move { input.keys(&session, events).await })
            .await?;
        Ok(())
    }

    async fn after_effects(
        &mut self,
        act: &mut Act<'_>,
        aimed: &Aimed<PressAim>,
        effects: &mut Effects,
    ) {
        let settled_in_place = !effects.dialog
            && !effects.list.contains(&Effect::Navigation)
            && !effects.list.contains(&Effect::FocusChanged);
        let tab = &mut act.tab;
        if settled_in_place && let Ok(ctx) = tab.page_context().await {
            let (active_after, field_after) = tokio::join!(
                ctx.run(tab.calls(), &ActiveElementKey),
                ctx.run(tab.calls(), &ActiveElementState)
            );
            match active_after {
                Ok(after) if after.key != aimed.own.active_key => {
                    effects.list.push(Effect::FocusChanged)
                }
                // Still the same focused control: what the key did to its value or caret.
                Ok(_) => {
                    if let (Some(before), Ok(after)) = (&aimed.own.field, &field_after) {
                        field_effects(before, after, &mut effects.list);
                    }
                }
                Err(_) => {}
            }
        }
    }

    fn judge(
        &self,
        _aimed: &Aimed<PressAim>,
        _read: (),
        effects: &Effects,
    ) -> Result<Judged, ToolError> {
        Ok(Evidence::by_any_effect(Action::Press, "key", effects.list.clone()).into())
    }
}

/// What a key did to the focused text control it left focused: its value (Backspace, Delete)
/// and its caret or selection (Home, Shift+End), added to `list` unless already there.
fn field_effects(before: &ActiveState, after: &ActiveState, list: &mut Vec<Effect>) {
    let (Some(was), Some(now)) = (&before.state, &after.state) else {
        return;
    };
    if was.element_key != now.element_key || was.document_key != now.document_key {
        return;
    }
    let mut add = |effect| {
        if !list.contains(&effect) {
            list.push(effect);
        }
    };
    if was.value != now.value || was.value_length != now.value_length {
        add(Effect::ValueChanged);
    }
    let selection = |s: &ActiveState| (s.selection_start, s.selection_end, s.selected_length);
    if selection(before) != selection(after) {
        add(Effect::SelectionChanged);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdp::input::DispatchKeyEvent;
    use crate::page::ElementState;
    use crate::protocol::errors::ErrorCode;

    fn kinds_and_keys(events: &[DispatchKeyEvent]) -> Vec<(String, String, u64)> {
        events
            .iter()
            .map(|e| {
                let e = serde_json::to_value(e).unwrap();
                (
                    e["type"].as_str().unwrap().to_owned(),
                    e["key"].as_str().unwrap().to_owned(),
                    e["modifiers"].as_u64().unwrap(),
                )
            })
            .collect()
    }

    fn owned(list: &[(&str, &str, u64)]) -> Vec<(String, String, u64)> {
        list.iter()
            .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), *c))
            .collect()
    }

    #[test]
    fn chords_hold_their_modifiers_around_the_key() {
        let (key, held) = press_chord("Tab", &[table::SHIFT]).unwrap();
        assert_eq!(
            kinds_and_keys(&chord_events(&key, &held)),
            owned(&[
                ("rawKeyDown", "Shift", 8),
                ("rawKeyDown", "Tab", 8),
                ("keyUp", "Tab", 8),
                ("keyUp", "Shift", 0),
            ])
        );
        let control = table::modifier("Control").unwrap();
        let (key, held) = press_chord("a", &[control, table::SHIFT]).unwrap();
        let events = chord_events(&key, &held);
        assert_eq!(
            kinds_and_keys(&events),
            owned(&[
                ("rawKeyDown", "Control", 2),
                ("rawKeyDown", "Shift", 10),
                ("rawKeyDown", "A", 10),
                ("keyUp", "A", 10),
                ("keyUp", "Shift", 2),
                ("keyUp", "Control", 0),
            ])
        );
        assert_eq!(events[2].code, "KeyA");
        assert!(events[2].text.is_none(), "a shortcut types nothing");
        // In a shortcut a letter is its key, whatever its case: Control+A holds no Shift.
        for name in ["a", "A"] {
            let (key, held) = press_chord(name, &[control]).unwrap();
            assert_eq!(
                kinds_and_keys(&chord_events(&key, &held)),
                owned(&[
                    ("rawKeyDown", "Control", 2),
                    ("rawKeyDown", "a", 2),
                    ("keyUp", "a", 2),
                    ("keyUp", "Control", 0),
                ]),
                "Control+{name}"
            );
        }
        let (key, held) = press_chord("A", &[control, table::SHIFT]).unwrap();
        assert_eq!((key.key.as_str(), held.len()), ("A", 2));
        // An uppercase letter alone is Shift and its key; a modifier alone is itself.
        let (key, held) = press_chord("A", &[]).unwrap();
        assert_eq!((key.key.as_str(), held), ("A", vec![table::SHIFT]));
        let (key, held) = press_chord("Shift", &[table::SHIFT]).unwrap();
        assert_eq!(
            kinds_and_keys(&chord_events(&key, &held)),
            owned(&[("rawKeyDown", "Shift", 8), ("keyUp", "Shift", 0)])
        );
        let (key, held) = press_chord("Space", &[]).unwrap();
        assert_eq!(
            (key.code, key.text.as_deref(), held.len()),
            ("Space", Some(" "), 0)
        );
    }

    #[test]
    fn unknown_keys_are_refused() {
        for name in ["Enterr", "é", "👋", "ab", "F13"] {
            let error = RpcError::from(press_chord(name, &[]).unwrap_err());
            assert_eq!(error.code, ErrorCode::InvalidParams, "{name}");
            assert_eq!(
                error.to_json()["data"]["context"]["reason"],
                "unknown_key",
                "{name}"
            );
        }
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
    fn a_key_that_edits_or_moves_the_caret_has_an_effect() {
        let field = |value: &str, start: u64, end: u64| ActiveState {
            state: Some(state(Some(value), value.chars().count() as u64, false)),
            selection_start: Some(start),
            selection_end: Some(end),
            selected_length: None,
        };
        let effects_of = |before: &ActiveState, after: &ActiveState| {
            let mut list = Vec::new();
            field_effects(before, after, &mut list);
            list
        };
        let typed = field("abc", 3, 3);
        // Backspace: value and caret; Home: caret; Shift+End: selection; a dead key: nothing.
        assert_eq!(
            effects_of(&typed, &field("ab", 2, 2)),
            [Effect::ValueChanged, Effect::SelectionChanged]
        );
        assert_eq!(
            effects_of(&typed, &field("abc", 0, 0)),
            [Effect::SelectionChanged]
        );
        assert_eq!(
            effects_of(&field("abc", 0, 0), &field("abc", 0, 3)),
            [Effect::SelectionChanged]
        );
        assert!(effects_of(&typed, &typed).is_empty());
        // Another element (focus moved), or none: judged elsewhere.
        let mut other = field("ab", 2, 2);
        other.state.as_mut().unwrap().element_key = "d:e2".into();
        assert!(effects_of(&typed, &other).is_empty());
        let nothing = ActiveState {
            state: None,
            selection_start: None,
            selection_end: None,
            selected_length: None,
        };
        assert!(effects_of(&typed, &nothing).is_empty());
    }
}
