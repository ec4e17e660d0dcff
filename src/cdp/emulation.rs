//! The `Emulation` domain, reduced to focus emulation: a page in a window without OS focus
//! (every managed tab opens in its own unfocused window) gets no `focus`/`blur` events, `:focus`
//! does not match and `document.hasFocus()` is false. `SetFocusEmulationEnabled` makes the page
//! behave as focused without activating any window. Wire shapes only: which sessions get it is
//! `session::tab`'s.

use serde::Serialize;

use super::command::{Command, Empty};

/// `Emulation.setFocusEmulationEnabled`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetFocusEmulationEnabled {
    pub enabled: bool,
}

impl Command for SetFocusEmulationEnabled {
    const METHOD: &'static str = "Emulation.setFocusEmulationEnabled";
    type Reply = Empty;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::cdp::command::testing::params;

    #[test]
    fn focus_emulation_has_the_wire_shape() {
        assert_eq!(
            params(&SetFocusEmulationEnabled { enabled: true }),
            json!({"enabled": true})
        );
    }
}
