//! Action evidence as a type: which action, its status, its effects and why it is not
//! `verified`, as enums, plus the tool's own detail fields (lengths, positions, click
//! delivery). It serializes to the wire's `evidence` object and is what the no-progress
//! detector (`progress`) reads; nothing parses evidence back from JSON. Pure: no I/O.

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::{Map, Value};

/// The action tool the evidence belongs to (`evidence.action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Click,
    Scroll,
    Select,
    Press,
    Type,
    Keyboard,
    Hover,
    Drag,
    Upload,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Click => "click",
            Action::Scroll => "scroll",
            Action::Select => "select",
            Action::Press => "press",
            Action::Type => "type",
            Action::Keyboard => "keyboard",
            Action::Hover => "hover",
            Action::Drag => "drag",
            Action::Upload => "upload",
        }
    }
}

/// How the browser-level evidence judges the action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The page observably did what the control should do.
    Verified,
    /// The page observably did something else (or refused).
    Mismatch,
    /// Nothing conclusive could be observed.
    Unavailable,
}

/// What the page observably did after the action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    CheckedChanged,
    SelectedChanged,
    PressedChanged,
    ExpandedChanged,
    ValueChanged,
    FocusChanged,
    Navigation,
    DocumentChanged,
    DialogOpened,
    PopupOpened,
    Scrolled,
    /// Elements became visible (a hover menu, a tooltip).
    ContentAppeared,
    /// The page received an HTML5 `drop`.
    Dropped,
    /// The dragged element has another parent or place in its list, or moved in the document.
    ElementMoved,
    /// The drop target's content changed.
    TargetChanged,
    /// A file chooser opened (intercepted: no native dialog); answer it with `browser.upload`.
    FileChooserOpened,
    /// The file selection of a file input changed.
    FilesChanged,
    /// The focused text control's caret or selection moved (Home, Shift+End, ...).
    SelectionChanged,
    /// The document changed under a click that reached its element (nodes, text, attributes
    /// other than inline styles).
    ContentChanged,
}

impl Effect {
    /// Every effect, in the order of the evidence schema's enum.
    pub const ALL: [Effect; 19] = [
        Effect::CheckedChanged,
        Effect::SelectedChanged,
        Effect::PressedChanged,
        Effect::ExpandedChanged,
        Effect::ValueChanged,
        Effect::FocusChanged,
        Effect::Navigation,
        Effect::DocumentChanged,
        Effect::DialogOpened,
        Effect::PopupOpened,
        Effect::Scrolled,
        Effect::ContentAppeared,
        Effect::Dropped,
        Effect::ElementMoved,
        Effect::TargetChanged,
        Effect::FileChooserOpened,
        Effect::FilesChanged,
        Effect::SelectionChanged,
        Effect::ContentChanged,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Effect::CheckedChanged => "checked_changed",
            Effect::SelectedChanged => "selected_changed",
            Effect::PressedChanged => "pressed_changed",
            Effect::ExpandedChanged => "expanded_changed",
            Effect::ValueChanged => "value_changed",
            Effect::FocusChanged => "focus_changed",
            Effect::Navigation => "navigation",
            Effect::DocumentChanged => "document_changed",
            Effect::DialogOpened => "dialog_opened",
            Effect::PopupOpened => "popup_opened",
            Effect::Scrolled => "scrolled",
            Effect::ContentAppeared => "content_appeared",
            Effect::Dropped => "dropped",
            Effect::ElementMoved => "element_moved",
            Effect::TargetChanged => "target_changed",
            Effect::FileChooserOpened => "file_chooser_opened",
            Effect::FilesChanged => "files_changed",
            Effect::SelectionChanged => "selection_changed",
            Effect::ContentChanged => "content_changed",
        }
    }

    /// The page left the state the action started from: a navigation, a new document, a
    /// dialog or a popup.
    pub fn leaves_page(self) -> bool {
        matches!(
            self,
            Effect::Navigation
                | Effect::DocumentChanged
                | Effect::DialogOpened
                | Effect::PopupOpened
        )
    }
}

/// Why evidence is not `verified` (`evidence.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceReason {
    NoObservableEffect,
    ClickIntercepted,
    PropagationStopped,
    ClickNotObserved,
    DefaultPrevented,
    DocumentChanged,
    FocusChanged,
    /// A drag's `drop` landed outside the target element.
    DroppedElsewhere,
    /// The pointer did not end over the element (`browser.hover`).
    NotHovered,
    /// The page emptied the file input after the files were set.
    FilesCleared,
    /// The file input holds other files than the ones set.
    FilesReplaced,
    /// The page replaced the file input with another element.
    InputReplaced,
    /// The file input left the document (or its document was replaced).
    InputRemoved,
}

/// One action's evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    pub action: Action,
    pub status: Status,
    /// What was acted on (`button`, `checkbox`, `coordinates`, `input:date`, `page`, ...).
    pub kind: String,
    pub effects: Vec<Effect>,
    pub reason: Option<EvidenceReason>,
    /// The tool's own fields (`delivery`, `before`/`after`, lengths, ...), in wire form.
    pub detail: Map<String, Value>,
}

impl Evidence {
    pub fn new(
        action: Action,
        status: Status,
        kind: impl Into<String>,
        effects: Vec<Effect>,
    ) -> Evidence {
        Evidence {
            action,
            status,
            kind: kind.into(),
            effects,
            reason: None,
            detail: Map::new(),
        }
    }

    /// `verified` when the action had any effect, else `unavailable` with
    /// `no_observable_effect` (coordinate clicks, key presses).
    pub fn by_any_effect(
        action: Action,
        kind: impl Into<String>,
        effects: Vec<Effect>,
    ) -> Evidence {
        let mut evidence = Evidence::new(action, Status::Verified, kind, effects);
        if evidence.effects.is_empty() {
            evidence.status = Status::Unavailable;
            evidence.reason = Some(EvidenceReason::NoObservableEffect);
        }
        evidence
    }

    /// Adds a detail field.
    pub fn set(&mut self, key: &str, value: impl Serialize) {
        let value = serde_json::to_value(value).unwrap_or(Value::Null);
        self.detail.insert(key.to_owned(), value);
    }

    /// An effect other than focus moving (a value, a state, a popup, a navigation, ...).
    pub fn changed(&self) -> bool {
        self.effects.iter().any(|e| *e != Effect::FocusChanged)
    }

    /// The evidence reports a navigation or a new document.
    pub fn navigated(&self) -> bool {
        self.effects
            .iter()
            .any(|e| matches!(e, Effect::Navigation | Effect::DocumentChanged))
    }

    /// The wire form.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Serialize for Evidence {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("action", self.action.as_str())?;
        map.serialize_entry("status", &self.status)?;
        map.serialize_entry("kind", &self.kind)?;
        map.serialize_entry("effects", &self.effects)?;
        if let Some(reason) = &self.reason {
            map.serialize_entry("reason", reason)?;
        }
        for (key, value) in &self.detail {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn evidence_serializes_to_the_wire_shape() {
        let mut evidence = Evidence::new(
            Action::Scroll,
            Status::Verified,
            "page",
            vec![Effect::Scrolled],
        );
        evidence.set("before", json!({"x": 0, "y": 0}));
        evidence.set("after", json!({"x": 0, "y": 600}));
        assert_eq!(
            evidence.to_json(),
            json!({"action": "scroll", "status": "verified", "kind": "page", "effects": ["scrolled"],
                "before": {"x": 0, "y": 0}, "after": {"x": 0, "y": 600}})
        );
        let none = Evidence::by_any_effect(Action::Press, "key", vec![]);
        assert_eq!(
            none.to_json(),
            json!({"action": "press", "status": "unavailable", "kind": "key", "effects": [],
                "reason": "no_observable_effect"})
        );
        assert_eq!(
            Evidence::by_any_effect(Action::Click, "coordinates", vec![Effect::FocusChanged])
                .status,
            Status::Verified
        );
    }

    #[test]
    fn effect_words_match_the_schema_and_classify() {
        for effect in Effect::ALL {
            assert_eq!(json!(effect), json!(effect.as_str()));
        }
        let focus = Evidence::new(
            Action::Click,
            Status::Verified,
            "button",
            vec![Effect::FocusChanged],
        );
        assert!(!focus.changed() && !focus.navigated());
        let moved = Evidence::new(
            Action::Click,
            Status::Verified,
            "link",
            vec![Effect::FocusChanged, Effect::Navigation],
        );
        assert!(moved.changed() && moved.navigated());
        assert!(Effect::PopupOpened.leaves_page() && !Effect::ValueChanged.leaves_page());
    }
}
