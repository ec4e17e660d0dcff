//! The US keyboard layout as data: which physical key (`code`, Windows virtual key code) and
//! whether Shift produces each printable ASCII character, the named keys `browser.press`
//! accepts, and the four modifiers with their CDP bitmask bits.
//!
//! Pure data and lookups, no I/O and no CDP: turning a key into `Input.dispatchKeyEvent`
//! parameters is `cdp/input.rs`'s job. A character this table does not know has no US key and is
//! inserted as text instead (see docs/keyboard.md).

/// One printable key of the US layout: its `code`, its Windows virtual key code, the character
/// it types alone and the one it types with Shift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrintableKey {
    pub code: &'static str,
    pub key_code: u16,
    pub plain: char,
    pub shifted: char,
}

const fn printable(code: &'static str, key_code: u16, plain: char, shifted: char) -> PrintableKey {
    PrintableKey {
        code,
        key_code,
        plain,
        shifted,
    }
}

/// Every printable key of a US (ANSI) keyboard, row by row. Space has no shifted character of
/// its own: Shift+Space types a space.
pub const PRINTABLE: [PrintableKey; 48] = [
    printable("Backquote", 192, '`', '~'),
    printable("Digit1", 49, '1', '!'),
    printable("Digit2", 50, '2', '@'),
    printable("Digit3", 51, '3', '#'),
    printable("Digit4", 52, '4', '$'),
    printable("Digit5", 53, '5', '%'),
    printable("Digit6", 54, '6', '^'),
    printable("Digit7", 55, '7', '&'),
    printable("Digit8", 56, '8', '*'),
    printable("Digit9", 57, '9', '('),
    printable("Digit0", 48, '0', ')'),
    printable("Minus", 189, '-', '_'),
    printable("Equal", 187, '=', '+'),
    printable("KeyQ", 81, 'q', 'Q'),
    printable("KeyW", 87, 'w', 'W'),
    printable("KeyE", 69, 'e', 'E'),
    printable("KeyR", 82, 'r', 'R'),
    printable("KeyT", 84, 't', 'T'),
    printable("KeyY", 89, 'y', 'Y'),
    printable("KeyU", 85, 'u', 'U'),
    printable("KeyI", 73, 'i', 'I'),
    printable("KeyO", 79, 'o', 'O'),
    printable("KeyP", 80, 'p', 'P'),
    printable("BracketLeft", 219, '[', '{'),
    printable("BracketRight", 221, ']', '}'),
    printable("Backslash", 220, '\\', '|'),
    printable("KeyA", 65, 'a', 'A'),
    printable("KeyS", 83, 's', 'S'),
    printable("KeyD", 68, 'd', 'D'),
    printable("KeyF", 70, 'f', 'F'),
    printable("KeyG", 71, 'g', 'G'),
    printable("KeyH", 72, 'h', 'H'),
    printable("KeyJ", 74, 'j', 'J'),
    printable("KeyK", 75, 'k', 'K'),
    printable("KeyL", 76, 'l', 'L'),
    printable("Semicolon", 186, ';', ':'),
    printable("Quote", 222, '\'', '"'),
    printable("KeyZ", 90, 'z', 'Z'),
    printable("KeyX", 88, 'x', 'X'),
    printable("KeyC", 67, 'c', 'C'),
    printable("KeyV", 86, 'v', 'V'),
    printable("KeyB", 66, 'b', 'B'),
    printable("KeyN", 78, 'n', 'N'),
    printable("KeyM", 77, 'm', 'M'),
    printable("Comma", 188, ',', '<'),
    printable("Period", 190, '.', '>'),
    printable("Slash", 191, '/', '?'),
    printable("Space", 32, ' ', ' '),
];

/// The key that types `ch` on a US layout, and whether Shift must be held for it.
pub fn printable_key(ch: char) -> Option<(PrintableKey, bool)> {
    PRINTABLE.iter().find_map(|key| {
        if key.plain == ch {
            Some((*key, false))
        } else if key.shifted == ch {
            Some((*key, true))
        } else {
            None
        }
    })
}

/// A non-printing key `browser.press` can send: its `key` value, `code`, virtual key code, the
/// text it produces (Enter produces a carriage return, which is what submits a form).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamedKey {
    pub key: &'static str,
    pub code: &'static str,
    pub key_code: u16,
    pub text: Option<&'static str>,
}

const fn named(
    key: &'static str,
    code: &'static str,
    key_code: u16,
    text: Option<&'static str>,
) -> NamedKey {
    NamedKey {
        key,
        code,
        key_code,
        text,
    }
}

/// Named keys: editing and navigation keys, the modifiers themselves (left-hand keys) and the
/// function keys.
pub const NAMED: [NamedKey; 36] = [
    named("Enter", "Enter", 13, Some("\r")),
    named("Tab", "Tab", 9, None),
    named("Escape", "Escape", 27, None),
    named("Backspace", "Backspace", 8, None),
    named("Delete", "Delete", 46, None),
    named("Insert", "Insert", 45, None),
    named("ArrowUp", "ArrowUp", 38, None),
    named("ArrowDown", "ArrowDown", 40, None),
    named("ArrowLeft", "ArrowLeft", 37, None),
    named("ArrowRight", "ArrowRight", 39, None),
    named("Home", "Home", 36, None),
    named("End", "End", 35, None),
    named("PageUp", "PageUp", 33, None),
    named("PageDown", "PageDown", 34, None),
    named("CapsLock", "CapsLock", 20, None),
    named("ContextMenu", "ContextMenu", 93, None),
    named("Shift", "ShiftLeft", 16, None),
    named("Control", "ControlLeft", 17, None),
    named("Alt", "AltLeft", 18, None),
    named("Meta", "MetaLeft", 91, None),
    named("F1", "F1", 112, None),
    named("F2", "F2", 113, None),
    named("F3", "F3", 114, None),
    named("F4", "F4", 115, None),
    named("F5", "F5", 116, None),
    named("F6", "F6", 117, None),
    named("F7", "F7", 118, None),
    named("F8", "F8", 119, None),
    named("F9", "F9", 120, None),
    named("F10", "F10", 121, None),
    named("F11", "F11", 122, None),
    named("F12", "F12", 123, None),
    named("PrintScreen", "PrintScreen", 44, None),
    named("ScrollLock", "ScrollLock", 145, None),
    named("Pause", "Pause", 19, None),
    named("NumLock", "NumLock", 144, None),
];

/// A named key by its `key` value; `Space` is accepted for the space bar.
pub fn named_key(name: &str) -> Option<NamedKey> {
    NAMED.iter().find(|key| key.key == name).copied()
}

/// A modifier key: its name in `browser.press`'s `modifiers` (and as a named key), its bit in
/// the CDP `modifiers` bitmask (Alt 1, Control 2, Meta 4, Shift 8), and the left-hand key that
/// holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Modifier {
    pub name: &'static str,
    pub bit: u8,
    pub code: &'static str,
    pub key_code: u16,
}

const fn modifier_key(name: &'static str, bit: u8, code: &'static str, key_code: u16) -> Modifier {
    Modifier {
        name,
        bit,
        code,
        key_code,
    }
}

pub const MODIFIERS: [Modifier; 4] = [
    modifier_key("Alt", 1, "AltLeft", 18),
    modifier_key("Control", 2, "ControlLeft", 17),
    modifier_key("Meta", 4, "MetaLeft", 91),
    modifier_key("Shift", 8, "ShiftLeft", 16),
];

pub fn modifier(name: &str) -> Option<Modifier> {
    MODIFIERS.iter().find(|m| m.name == name).copied()
}

pub const SHIFT: Modifier = MODIFIERS[3];

/// Enter, which types a line break (or submits a form) and ends `browser.type` with `submit`.
pub const ENTER: NamedKey = NAMED[0];

/// Delete, which clears a selected value.
pub const DELETE: NamedKey = NAMED[4];

/// End, which puts the caret after a single-line value.
pub const END: NamedKey = NAMED[11];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_printable_ascii_character_has_exactly_one_us_key() {
        for byte in 0x20u8..0x7f {
            let ch = char::from(byte);
            let owners = PRINTABLE
                .iter()
                .filter(|k| k.plain == ch || (k.shifted == ch && k.code != "Space"))
                .count();
            assert_eq!(owners, 1, "{ch:?}");
            assert!(printable_key(ch).is_some(), "{ch:?}");
        }
        assert_eq!(PRINTABLE.len(), 48);
    }

    #[test]
    fn shifted_characters_are_the_us_ones() {
        let expect = |ch: char, code: &str, key_code: u16, shift: bool| {
            let (key, shifted) = printable_key(ch).unwrap();
            assert_eq!(
                (key.code, key.key_code, shifted),
                (code, key_code, shift),
                "{ch:?}"
            );
        };
        expect('!', "Digit1", 49, true);
        expect('^', "Digit6", 54, true);
        expect('@', "Digit2", 50, true);
        expect(')', "Digit0", 48, true);
        expect('1', "Digit1", 49, false);
        expect('a', "KeyA", 65, false);
        expect('A', "KeyA", 65, true);
        expect('Z', "KeyZ", 90, true);
        expect('?', "Slash", 191, true);
        expect('"', "Quote", 222, true);
        expect('\'', "Quote", 222, false);
        expect('~', "Backquote", 192, true);
        expect('|', "Backslash", 220, true);
        expect(' ', "Space", 32, false);
    }

    #[test]
    fn letters_carry_their_ascii_virtual_key_codes() {
        for key in PRINTABLE.iter().filter(|k| k.code.starts_with("Key")) {
            let letter = key.code.strip_prefix("Key").unwrap();
            assert_eq!(letter.len(), 1);
            assert_eq!(key.shifted.to_string(), letter);
            assert_eq!(key.plain, key.shifted.to_ascii_lowercase());
            assert_eq!(u32::from(key.key_code), u32::from(key.shifted));
        }
        for key in PRINTABLE.iter().filter(|k| k.code.starts_with("Digit")) {
            assert_eq!(u32::from(key.key_code), u32::from(key.plain));
        }
    }

    #[test]
    fn characters_without_a_us_key_are_not_in_the_table() {
        for ch in ['👋', '🌍', 'é', 'ß', '中', '€', '\t', '\n', '\u{301}'] {
            assert_eq!(printable_key(ch), None, "{ch:?}");
        }
    }

    #[test]
    fn named_keys_and_modifiers() {
        let enter = named_key("Enter").unwrap();
        assert_eq!(
            (enter.code, enter.key_code, enter.text),
            ("Enter", 13, Some("\r"))
        );
        assert_eq!(named_key("Tab").unwrap().key_code, 9);
        assert_eq!(named_key("Shift").unwrap().code, "ShiftLeft");
        assert_eq!(named_key("Control").unwrap().key_code, 17);
        assert_eq!(named_key("F12").unwrap().key_code, 123);
        assert_eq!(named_key("enter"), None);
        let mut names = std::collections::HashSet::new();
        for key in NAMED {
            assert!(names.insert(key.key), "duplicate {}", key.key);
            assert!(printable_key(key.key.chars().next().unwrap()).is_none() || key.key.len() > 1);
        }
        for m in MODIFIERS {
            let key = named_key(m.name).expect("a modifier is a named key");
            assert_eq!((key.code, key.key_code), (m.code, m.key_code), "{}", m.name);
        }
        assert_eq!(ENTER.key, "Enter");
        assert_eq!(DELETE.key, "Delete");
        assert_eq!(END.key, "End");
        assert_eq!(modifier("Shift").unwrap().bit, 8);
        assert_eq!(modifier("Alt").unwrap().bit, 1);
        assert_eq!(modifier("Control").unwrap().bit, 2);
        assert_eq!(modifier("Meta").unwrap().bit, 4);
        assert_eq!(SHIFT.name, "Shift");
    }
}
