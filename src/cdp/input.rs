//! The `Input` domain: the typed `Input.dispatchKeyEvent`, `Input.insertText` and
//! `Input.dispatchMouseEvent` commands, and the encoding of keys and mouse buttons into them.
//! The US keyboard layout is data in `input/table.rs`; here a key becomes the events a real
//! keyboard sends (modifier keydowns, the key, keyups in reverse), a typed character becomes a
//! keystroke or an editing insertion, and a mouse step gets its `buttons` mask.
//!
//! Pure encoding plus the senders that put strokes on a session; no tool logic, no
//! argument parsing and no evidence (those are `tools/keys.rs`'s and `tools/actions.rs`'s). The
//! rules are written down in docs/keyboard.md.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::Duration;

use serde::Serialize;

use super::client::{CdpClient, CdpError};
use super::command::{Command, Empty};
use super::ids::SessionId;

pub mod table;

use table::{Modifier, NamedKey, PrintableKey};

/// The `type` of a key event. `keyDown` types its `text`; `rawKeyDown` is a keydown that
/// types nothing (a modifier, a shortcut, a non-printing key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum KeyEventType {
    KeyDown,
    RawKeyDown,
    KeyUp,
}

/// `Input.dispatchKeyEvent`: one key event, with the modifiers bitmask as it is at that moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DispatchKeyEvent {
    #[serde(rename = "type")]
    pub kind: KeyEventType,
    pub key: String,
    pub code: String,
    pub windows_virtual_key_code: u16,
    pub native_virtual_key_code: u16,
    /// Alt 1, Control 2, Meta 4, Shift 8.
    pub modifiers: u8,
    /// 1 (left) for the modifier keys, which are the left-hand ones; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unmodified_text: Option<String>,
}

impl Command for DispatchKeyEvent {
    const METHOD: &'static str = "Input.dispatchKeyEvent";
    type Reply = Empty;
}

/// `Input.insertText`: one editing insertion, as an IME commits it (no key events).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InsertText {
    pub text: String,
}

impl Command for InsertText {
    const METHOD: &'static str = "Input.insertText";
    type Reply = Empty;
}

/// The `type` of a mouse event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum MouseEventType {
    MouseMoved,
    MousePressed,
    MouseReleased,
}

/// A mouse button as CDP names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum MouseButton {
    None,
    Left,
    Middle,
    Right,
}

impl MouseButton {
    /// The button named by a `browser.click` `button` argument; unknown names are `None`.
    pub fn from_name(name: &str) -> MouseButton {
        match name {
            "left" => MouseButton::Left,
            "middle" => MouseButton::Middle,
            "right" => MouseButton::Right,
            _ => MouseButton::None,
        }
    }

    /// The button's bit in the `buttons` mask (left 1, right 2, middle 4).
    fn bit(self) -> u8 {
        match self {
            MouseButton::None => 0,
            MouseButton::Left => 1,
            MouseButton::Right => 2,
            MouseButton::Middle => 4,
        }
    }
}

/// `Input.dispatchMouseEvent` at viewport CSS pixel `(x, y)` of the receiving session's frame.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DispatchMouseEvent {
    #[serde(rename = "type")]
    pub kind: MouseEventType,
    pub x: f64,
    pub y: f64,
    pub button: MouseButton,
    /// The buttons held after this event (a bitmask, see [`MouseButton`]).
    pub buttons: u8,
    pub click_count: u64,
}

impl DispatchMouseEvent {
    /// One step of a click: a move carries no button; a press holds `button` down (its bit in
    /// `buttons`); a release leaves no button held.
    pub fn step(
        kind: MouseEventType,
        x: f64,
        y: f64,
        button: MouseButton,
        click_count: u64,
    ) -> DispatchMouseEvent {
        let button = match kind {
            MouseEventType::MouseMoved => MouseButton::None,
            _ => button,
        };
        let buttons = match kind {
            MouseEventType::MousePressed => button.bit(),
            _ => 0,
        };
        DispatchMouseEvent {
            kind,
            x,
            y,
            button,
            buttons,
            click_count,
        }
    }
}

impl DispatchMouseEvent {
    /// A move with `button` held down (a drag): `buttons` carries its bit, as a real mouse
    /// reports it while a button is pressed.
    pub fn held_move(x: f64, y: f64, button: MouseButton) -> DispatchMouseEvent {
        DispatchMouseEvent {
            kind: MouseEventType::MouseMoved,
            x,
            y,
            button,
            buttons: button.bit(),
            click_count: 0,
        }
    }
}

impl Command for DispatchMouseEvent {
    const METHOD: &'static str = "Input.dispatchMouseEvent";
    type Reply = Empty;
}

/// `Input.dispatchMouseEvent` of type `mouseWheel` at viewport CSS pixel `(x, y)`, scrolling by
/// `(delta_x, delta_y)` CSS pixels (the live view's take-over forwards the person's wheel).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MouseWheel {
    #[serde(rename = "type")]
    kind: &'static str,
    pub x: f64,
    pub y: f64,
    pub delta_x: f64,
    pub delta_y: f64,
}

impl MouseWheel {
    pub fn at(x: f64, y: f64, delta_x: f64, delta_y: f64) -> MouseWheel {
        MouseWheel {
            kind: "mouseWheel",
            x,
            y,
            delta_x,
            delta_y,
        }
    }
}

impl Command for MouseWheel {
    const METHOD: &'static str = "Input.dispatchMouseEvent";
    type Reply = Empty;
}

/// One key as the page sees it in `KeyboardEvent.key` / `code` / `keyCode`, and the text it
/// types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub key: String,
    pub code: &'static str,
    pub key_code: u16,
    pub text: Option<String>,
    /// The key's own bit when it is itself a modifier (Shift, Control, Alt, Meta).
    pub own_bit: u8,
}

impl Key {
    /// A printable key, typing its shifted or plain character.
    pub fn printable(key: PrintableKey, shifted: bool) -> Key {
        let ch = if shifted { key.shifted } else { key.plain };
        Key {
            key: ch.to_string(),
            code: key.code,
            key_code: key.key_code,
            text: Some(ch.to_string()),
            own_bit: 0,
        }
    }

    /// A named key (Enter, Tab, F5, a modifier, ...).
    pub fn named(key: NamedKey) -> Key {
        Key {
            key: key.key.to_owned(),
            code: key.code,
            key_code: key.key_code,
            text: key.text.map(str::to_owned),
            own_bit: table::modifier(key.key).map_or(0, |m| m.bit),
        }
    }

    /// The left-hand key of a modifier.
    pub fn modifier(modifier: Modifier) -> Key {
        Key {
            key: modifier.name.to_owned(),
            code: modifier.code,
            key_code: modifier.key_code,
            text: None,
            own_bit: modifier.bit,
        }
    }
}

/// How one typed character reaches the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stroke {
    /// A key of the US layout, with Shift held around it when that layout needs Shift.
    Key { key: Key, shift: bool },
    /// One editing insertion (`Input.insertText`): the character has no US key.
    Insert(char),
    /// One editing insertion of a whole text (`browser.type` in fill mode), as an IME or a
    /// paste commits it: no key events.
    InsertText(String),
}

/// The stroke that types `ch`: `\n` is Enter, a character of the US layout is its key,
/// anything else (emoji, other scripts, accented letters, tab and other control characters)
/// is inserted as text.
pub fn stroke_for(ch: char) -> Stroke {
    if ch == '\n' {
        return Stroke::Key {
            key: Key::named(table::ENTER),
            shift: false,
        };
    }
    match table::printable_key(ch) {
        Some((key, shift)) => Stroke::Key {
            key: Key::printable(key, shift),
            shift,
        },
        None => Stroke::Insert(ch),
    }
}

/// One key event of `key`, with the modifiers bitmask as it is at that moment.
fn key_event(kind: KeyEventType, key: &Key, modifiers: u8, text: Option<&str>) -> DispatchKeyEvent {
    DispatchKeyEvent {
        kind,
        key: key.key.clone(),
        code: key.code.to_owned(),
        windows_virtual_key_code: key.key_code,
        native_virtual_key_code: key.key_code,
        modifiers,
        location: (key.own_bit != 0).then_some(1),
        text: text.map(str::to_owned),
        unmodified_text: text.map(str::to_owned),
    }
}

/// The events of pressing `key` while `held` is held: each modifier's keydown in the given
/// order, the key's down and up, then the modifiers' keyups in reverse order. Control, Alt and
/// Meta turn the key into a shortcut that types nothing; Shift does not.
pub fn chord_events(key: &Key, held: &[Modifier]) -> Vec<DispatchKeyEvent> {
    let mut events = Vec::with_capacity(2 + 2 * held.len());
    let mut bits = 0u8;
    for modifier in held {
        bits |= modifier.bit;
        events.push(key_event(
            KeyEventType::RawKeyDown,
            &Key::modifier(*modifier),
            bits,
            None,
        ));
    }
    let down_bits = bits | key.own_bit;
    let types_text = down_bits & !table::SHIFT.bit == 0;
    let text = key.text.as_deref().filter(|_| types_text);
    let kind = match text {
        Some(_) => KeyEventType::KeyDown,
        None => KeyEventType::RawKeyDown,
    };
    events.push(key_event(kind, key, down_bits, text));
    events.push(key_event(KeyEventType::KeyUp, key, bits, None));
    for modifier in held.iter().rev() {
        bits &= !modifier.bit;
        events.push(key_event(
            KeyEventType::KeyUp,
            &Key::modifier(*modifier),
            bits,
            None,
        ));
    }
    events
}

/// The events of one typing stroke with a key.
pub fn stroke_events(key: &Key, shift: bool) -> Vec<DispatchKeyEvent> {
    match shift {
        true => chord_events(key, &[table::SHIFT]),
        false => chord_events(key, &[]),
    }
}

/// Sends key events on `session`. All of them are queued at once and in order; the session
/// handles them in that order, so a keyup still follows its keydown and one step costs one
/// round trip however many events it has.
pub async fn send_key_events(
    client: &CdpClient,
    session: &SessionId,
    events: Vec<DispatchKeyEvent>,
    timeout: Duration,
) -> Result<(), CdpError> {
    send_key_strokes(client, session, vec![events], timeout, &AtomicU64::new(0)).await
}

/// Sends several strokes' key events on `session`, all queued at once and in order (a burst:
/// one round trip for all of them). `answered` counts the strokes, from the first, whose every
/// event Chromium has answered so far (it answers a key event once the page handled it, so a
/// dialog the page opens holds the count where it is). Every call is awaited before the first
/// error is returned.
pub async fn send_key_strokes(
    client: &CdpClient,
    session: &SessionId,
    strokes: Vec<Vec<DispatchKeyEvent>>,
    timeout: Duration,
    answered: &AtomicU64,
) -> Result<(), CdpError> {
    let mut calls: Vec<(usize, _)> = strokes
        .iter()
        .enumerate()
        .flat_map(|(stroke, events)| {
            events
                .iter()
                .map(move |event| (stroke, Box::pin(client.execute(session, event, timeout))))
        })
        .collect();
    let mut results: Vec<Option<Result<Empty, CdpError>>> = calls.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for ((_, call), result) in calls.iter_mut().zip(results.iter_mut()) {
            if result.is_none() {
                match call.as_mut().poll(cx) {
                    Poll::Ready(outcome) => *result = Some(outcome),
                    Poll::Pending => pending = true,
                }
            }
        }
        // The strokes before the first call still unanswered are answered whole.
        let done = calls
            .iter()
            .zip(results.iter())
            .find(|(_, result)| result.is_none())
            .map_or(strokes.len(), |((stroke, _), _)| *stroke);
        answered.store(done as u64, Ordering::Release);
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    for result in results.into_iter().flatten() {
        result?;
    }
    Ok(())
}

/// Sends one typing stroke.
pub async fn send_stroke(
    client: &CdpClient,
    session: &SessionId,
    stroke: &Stroke,
    timeout: Duration,
) -> Result<(), CdpError> {
    match stroke {
        Stroke::Key { key, shift } => {
            send_key_events(client, session, stroke_events(key, *shift), timeout).await
        }
        Stroke::Insert(ch) => client
            .execute(
                session,
                &InsertText {
                    text: ch.to_string(),
                },
                timeout,
            )
            .await
            .map(|_| ()),
        Stroke::InsertText(text) => client
            .execute(session, &InsertText { text: text.clone() }, timeout)
            .await
            .map(|_| ()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::command::testing::{params, reply};
    use super::*;

    fn kinds_and_keys(events: &[DispatchKeyEvent]) -> Vec<(KeyEventType, String, u8)> {
        events
            .iter()
            .map(|e| (e.kind, e.key.clone(), e.modifiers))
            .collect()
    }

    fn owned(list: &[(KeyEventType, &str, u8)]) -> Vec<(KeyEventType, String, u8)> {
        list.iter()
            .map(|(a, b, c)| (*a, (*b).to_owned(), *c))
            .collect()
    }

    use KeyEventType::{KeyDown, KeyUp, RawKeyDown};

    #[test]
    fn a_shifted_character_is_its_key_with_shift_around_it() {
        let Stroke::Key { key, shift } = stroke_for('!') else {
            panic!("! has a US key");
        };
        assert!(shift);
        let events = stroke_events(&key, shift);
        assert_eq!(
            kinds_and_keys(&events),
            owned(&[
                (RawKeyDown, "Shift", 8),
                (KeyDown, "!", 8),
                (KeyUp, "!", 8),
                (KeyUp, "Shift", 0),
            ])
        );
        assert_eq!(events[1].code, "Digit1");
        assert_eq!(events[1].windows_virtual_key_code, 49);
        assert_eq!(events[1].text.as_deref(), Some("!"));
        assert_eq!(events[0].code, "ShiftLeft");
        assert_eq!(events[0].windows_virtual_key_code, 16);
        assert_eq!(events[0].location, Some(1));
        assert!(events[2].text.is_none());
        let Stroke::Key { key, shift } = stroke_for('^') else {
            panic!("^ has a US key");
        };
        assert!(shift);
        assert_eq!((key.code, key.key_code), ("Digit6", 54));
    }

    #[test]
    fn a_plain_character_is_one_keydown_and_keyup() {
        let Stroke::Key { key, shift } = stroke_for('a') else {
            panic!("a has a US key");
        };
        assert!(!shift);
        let events = stroke_events(&key, shift);
        assert_eq!(
            kinds_and_keys(&events),
            owned(&[(KeyDown, "a", 0), (KeyUp, "a", 0)])
        );
        assert_eq!(events[0].code, "KeyA");
        assert_eq!(events[0].windows_virtual_key_code, 65);
        let Stroke::Key { key, .. } = stroke_for('\n') else {
            panic!("a line break is Enter");
        };
        assert_eq!(stroke_events(&key, false)[0].text.as_deref(), Some("\r"));
    }

    #[test]
    fn characters_without_a_us_key_are_inserted() {
        for ch in ['👋', '🌍', 'é', '中', '\t'] {
            assert_eq!(stroke_for(ch), Stroke::Insert(ch));
        }
        let strokes: Vec<Stroke> = "👋 hello 🌍".chars().map(stroke_for).collect();
        assert_eq!(strokes.len(), 9);
        let inserted = strokes
            .iter()
            .filter(|s| matches!(s, Stroke::Insert(_)))
            .count();
        assert_eq!(inserted, 2);
    }

    #[test]
    fn chords_hold_their_modifiers_around_the_key() {
        let control = table::modifier("Control").unwrap();
        let key = Key::printable(table::printable_key('a').unwrap().0, true);
        let events = chord_events(&key, &[control, table::SHIFT]);
        assert_eq!(
            kinds_and_keys(&events),
            owned(&[
                (RawKeyDown, "Control", 2),
                (RawKeyDown, "Shift", 10),
                (RawKeyDown, "A", 10),
                (KeyUp, "A", 10),
                (KeyUp, "Shift", 2),
                (KeyUp, "Control", 0),
            ])
        );
        assert!(events[2].text.is_none(), "a shortcut types nothing");
        let shift = Key::named(table::named_key("Shift").unwrap());
        assert_eq!(
            kinds_and_keys(&chord_events(&shift, &[])),
            owned(&[(RawKeyDown, "Shift", 8), (KeyUp, "Shift", 0)])
        );
    }

    #[test]
    fn key_events_have_the_wire_shape() {
        let Stroke::Key { key, shift } = stroke_for('!') else {
            panic!("! has a US key");
        };
        let events = stroke_events(&key, shift);
        assert_eq!(
            params(&events[0]),
            json!({"type": "rawKeyDown", "key": "Shift", "code": "ShiftLeft",
                "windowsVirtualKeyCode": 16, "nativeVirtualKeyCode": 16, "modifiers": 8,
                "location": 1})
        );
        assert_eq!(
            params(&events[1]),
            json!({"type": "keyDown", "key": "!", "code": "Digit1",
                "windowsVirtualKeyCode": 49, "nativeVirtualKeyCode": 49, "modifiers": 8,
                "text": "!", "unmodifiedText": "!"})
        );
        assert_eq!(params(&events[2])["type"], "keyUp");
        assert_eq!(
            params(&InsertText {
                text: "👋".to_owned()
            }),
            json!({"text": "👋"})
        );
        // Chromium 156 answers every input command with an empty result.
        reply::<DispatchKeyEvent>(json!({}));
        reply::<InsertText>(json!({}));
        reply::<DispatchMouseEvent>(json!({}));
    }

    #[test]
    fn mouse_steps_carry_their_buttons() {
        let at = |kind, button| DispatchMouseEvent::step(kind, 10.5, 20.0, button, 1);
        assert_eq!(
            params(&at(MouseEventType::MouseMoved, MouseButton::Left)),
            json!({"type": "mouseMoved", "x": 10.5, "y": 20.0, "button": "none", "buttons": 0,
                "clickCount": 1})
        );
        assert_eq!(
            params(&at(MouseEventType::MousePressed, MouseButton::Left)),
            json!({"type": "mousePressed", "x": 10.5, "y": 20.0, "button": "left", "buttons": 1,
                "clickCount": 1})
        );
        assert_eq!(
            at(MouseEventType::MousePressed, MouseButton::Right).buttons,
            2
        );
        assert_eq!(
            at(MouseEventType::MousePressed, MouseButton::Middle).buttons,
            4
        );
        let released = at(
            MouseEventType::MouseReleased,
            MouseButton::from_name("middle"),
        );
        assert_eq!(
            (released.button, released.buttons),
            (MouseButton::Middle, 0)
        );
        assert_eq!(MouseButton::from_name("other"), MouseButton::None);
    }
}
