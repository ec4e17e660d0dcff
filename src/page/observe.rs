//! `browser.observe` on the page side: the options of one observation (with
//! their bounds), the call of `js/observe.js`, and the typed result with
//! the raw signals the hints are derived from. The result is re-checked
//! here (refs unique and non-zero, no value next to a sensitive flag) because
//! it carries page data. `ObservationWire` is the agent-facing part; the
//! signals never leave the Broker. No I/O.

use serde::de::{self, Deserializer};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::cdp::dom::{BackendNodeId, EventListener};

use super::error::PageError;
use super::hints::Hint;
use super::script::{PageScript, Script, ScriptCall, decode};

/// Elements returned when the caller gives no `limit`: enough for a
/// typical page's controls, small enough (~30 KB) for a model's context.
pub const OBSERVE_DEFAULT_LIMIT: u32 = 200;

/// How many Observations per tab are kept whole (diff bases, annotations): the Broker keeps this
/// many records per tab (`session::TabState`) and the page keeps the same number of element maps
/// in the isolated world (injected into the library as `BP_MAX_OBSERVATIONS`). Refs outlive
/// them: they resolve through the document (see [`DOCUMENT_REFS`]).
pub const KEPT_OBSERVATIONS: usize = 4;

/// How many refs of one document stay resolvable, whichever of its Observations handed them
/// out: the Broker's per-document summaries (`session::RefBook`) and the page's map from ref to
/// element (injected as `BP_MAX_DOCUMENT_REFS`; the oldest go first beyond it).
pub const DOCUMENT_REFS: usize = 50_000;

/// The largest `limit` the tool schema advertises.
pub const OBSERVE_MAX_LIMIT: u32 = 5_000;

/// The largest `limit` the page script accepts: above the advertised
/// maximum so a whole 20,000-control page (with its headings, about 25,000
/// elements) can be returned, in the compact form within the default 4 MiB
/// result.
pub const OBSERVE_HARD_MAX_LIMIT: u32 = 50_000;

/// Default approximate bound on the serialized elements: a quarter of the
/// contract's default 4 MiB result limit, leaving room for the rest.
pub const OBSERVE_DEFAULT_MAX_BYTES: u32 = 1 << 20;

/// Smallest accepted `maxBytes`: below it not even a handful of elements
/// fit, which is a caller mistake rather than a bound.
pub const OBSERVE_MIN_MAX_BYTES: u32 = 1_024;

/// Largest accepted `maxBytes`: 20,000 elements take ~3 MB; 16 MiB stays
/// far below the janitor's 256 MiB message limit.
pub const OBSERVE_MAX_MAX_BYTES: u32 = 16 << 20;

/// Characters of an accessible name (the contract's bound).
const NAME_MAX_CHARS: u32 = 200;

/// Characters of a control's value in an observation; longer values also
/// report `valueLength`.
const VALUE_MAX_CHARS: u32 = 500;

/// Characters of a link's `href`.
const HREF_MAX_CHARS: u32 = 300;

/// Characters of an observation key: keys are the Broker's own ids.
const OBSERVATION_KEY_MAX_CHARS: usize = 128;

/// Characters of the page's document key (`doc:` and two short base-36 numbers in
/// `js/common.js`); a longer one is not ours.
const DOCUMENT_KEY_MAX_CHARS: usize = 64;

/// Words that make a labelled container a filter group (lowercase).
const FILTER_KEYWORDS: [&str; 5] = ["filter", "refine", "sort", "narrow", "facet"];

/// Button and link names that mark a sign-in form (lowercase).
const SIGN_IN_PHRASES: [&str; 7] = [
    "sign in", "signin", "log in", "login", "log on", "sign on", "logon",
];

/// Page text that says access was refused (lowercase).
const BLOCKED_PHRASES: [&str; 10] = [
    "access denied",
    "unusual traffic",
    "are you a robot",
    "not a robot",
    "verify you are human",
    "verify that you are human",
    "too many requests",
    "request blocked",
    "you have been blocked",
    "temporarily blocked",
];

/// `iframe` src/title fragments of challenge widgets (lowercase).
const CAPTCHA_PATTERNS: [&str; 6] = [
    "recaptcha",
    "hcaptcha",
    "turnstile",
    "challenges.cloudflare.com",
    "arkoselabs",
    "captcha",
];

/// Listener types that make an element a control a person clicks, drags or taps (what
/// `DOMSnapshot`'s `isClickable` counts, plus the pointer and touch events it leaves out).
const CLICK_LISTENER_TYPES: [&str; 8] = [
    "click",
    "mousedown",
    "mouseup",
    "dblclick",
    "pointerdown",
    "pointerup",
    "touchstart",
    "touchend",
];

/// At most this many listener targets are passed to observe.js (in the listing's order).
const MAX_LISTENER_NODES: usize = 2_000;

/// The nodes among `listeners` with a click-like listener, each once, at most
/// `MAX_LISTENER_NODES`.
pub(super) fn listener_nodes(listeners: &[EventListener]) -> Vec<BackendNodeId> {
    let mut seen = std::collections::HashSet::new();
    let mut nodes = Vec::new();
    for listener in listeners {
        let Some(node) = listener.backend_node_id else {
            continue;
        };
        if !CLICK_LISTENER_TYPES.contains(&listener.event_type.as_str()) || !seen.insert(node) {
            continue;
        }
        nodes.push(node);
        if nodes.len() == MAX_LISTENER_NODES {
            break;
        }
    }
    nodes
}

/// Options of one observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObserveOptions {
    pub limit: u32,
    pub max_bytes: u32,
    pub viewport_only: bool,
}

impl Default for ObserveOptions {
    fn default() -> ObserveOptions {
        ObserveOptions {
            limit: OBSERVE_DEFAULT_LIMIT,
            max_bytes: OBSERVE_DEFAULT_MAX_BYTES,
            viewport_only: false,
        }
    }
}

impl ObserveOptions {
    /// Checks every bound; the page script trusts what passes.
    pub fn validate(&self) -> Result<(), PageError> {
        if self.limit == 0 || self.limit > OBSERVE_HARD_MAX_LIMIT {
            return Err(PageError::InvalidOption {
                name: "limit",
                detail: format!("must be 1..={OBSERVE_HARD_MAX_LIMIT}"),
            });
        }
        if !(OBSERVE_MIN_MAX_BYTES..=OBSERVE_MAX_MAX_BYTES).contains(&self.max_bytes) {
            return Err(PageError::InvalidOption {
                name: "maxBytes",
                detail: format!("must be {OBSERVE_MIN_MAX_BYTES}..={OBSERVE_MAX_MAX_BYTES}"),
            });
        }
        Ok(())
    }
}

/// Checks an observation key (the Broker's own id for the observation).
pub(super) fn validate_key(key: &str) -> Result<(), PageError> {
    if key.is_empty() || key.len() > OBSERVATION_KEY_MAX_CHARS {
        return Err(PageError::InvalidOption {
            name: "observationKey",
            detail: format!("must be 1..={OBSERVATION_KEY_MAX_CHARS} bytes"),
        });
    }
    Ok(())
}

/// One observation of the world's document; the element handles stay in
/// the page under `key` for `resolve`.
#[derive(Debug, Clone, PartialEq)]
pub struct Observe {
    pub key: String,
    pub options: ObserveOptions,
    /// An earlier observation of the same document whose refs also resolve through `key`
    /// (a diff Observation); the page answers whether it still had it (`base_merged`).
    pub base_key: Option<String>,
    /// `maxBytes` bounds the compact text form rather than the JSON objects.
    pub compact: bool,
    /// What an action reads in the same call before the walk, in this order: the keystroke
    /// guard's record (`KeyRecord`), the click-truth verdict (`ClickVerdict`), its element's
    /// state (`StateSnapshot`). Each disarms or reads as its own script does.
    pub key_record: bool,
    pub click_verdict: Option<super::actions::ClickVerdict>,
    pub state_of: Option<super::actions::RefTarget>,
}

impl PageScript for Observe {
    type Output = PageObservation;

    fn call(&self) -> Result<ScriptCall, PageError> {
        validate_key(&self.key)?;
        if let Some(base) = &self.base_key {
            validate_key(base)?;
        }
        self.options.validate()?;
        Ok(ScriptCall {
            script: Script::Observe,
            argument: json!({
                "observationKey": self.key,
                "baseKey": self.base_key,
                "compact": self.compact,
                "limit": self.options.limit,
                "maxBytes": self.options.max_bytes,
                "viewportOnly": self.options.viewport_only,
                "nameMax": NAME_MAX_CHARS,
                "valueMax": VALUE_MAX_CHARS,
                "hrefMax": HREF_MAX_CHARS,
                "filterKeywords": FILTER_KEYWORDS,
                "signInPhrases": SIGN_IN_PHRASES,
                "blockedPhrases": BLOCKED_PHRASES,
                "captchaPatterns": CAPTCHA_PATTERNS,
                "keyRecord": self.key_record,
                "clickVerdict": match &self.click_verdict {
                    Some(verdict) => verdict.call()?.argument,
                    None => Value::Null,
                },
                "stateOf": match &self.state_of {
                    Some(target) => super::actions::StateSnapshot(target.clone()).call()?.argument,
                    None => Value::Null,
                },
            }),
        })
    }

    fn parse(&self, json: &str) -> Result<PageObservation, PageError> {
        let mut observation: PageObservation = decode(Script::Observe, json)?;
        observation.check(self.options.limit)?;
        Ok(observation)
    }
}

/// The role of an observed element: ARIA roles, plus `clickable` for an
/// element with an onclick handler or a tabindex that shows a pointer cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Button,
    Link,
    Checkbox,
    Radio,
    Switch,
    Tab,
    MenuItem,
    MenuItemCheckbox,
    MenuItemRadio,
    Option,
    Combobox,
    Listbox,
    Textbox,
    Searchbox,
    Slider,
    Spinbutton,
    Dialog,
    AlertDialog,
    Alert,
    Heading,
    TreeItem,
    Img,
    Clickable,
}

/// `checked` / `pressed`: `true`, `false` or `"mixed"` on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    True,
    False,
    Mixed,
}

impl Serialize for Checked {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Checked::True => serializer.serialize_bool(true),
            Checked::False => serializer.serialize_bool(false),
            Checked::Mixed => serializer.serialize_str("mixed"),
        }
    }
}

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Checked, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Bool(true) => Ok(Checked::True),
            Value::Bool(false) => Ok(Checked::False),
            Value::String(text) if text == "mixed" => Ok(Checked::Mixed),
            other => Err(de::Error::custom(format!(
                "expected true, false or \"mixed\", got {other}"
            ))),
        }
    }
}

/// Viewport geometry in CSS px of the observed frame, rounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bounds {
    pub x: i64,
    pub y: i64,
    pub width: i64,
    pub height: i64,
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// One element of an observation, as the agent sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObservedElement {
    #[serde(rename = "ref")]
    pub element_ref: u32,
    pub role: Role,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The full length of a value that was cut, or of a sensitive value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_length: Option<u64>,
    #[serde(skip_serializing_if = "is_false")]
    pub sensitive: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checked: Option<Checked>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selected: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expanded: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pressed: Option<Checked>,
    #[serde(skip_serializing_if = "is_false")]
    pub disabled: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub focused: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub required: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub readonly: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<u8>,
    pub tag: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub href: Option<String>,
    pub bounds: Bounds,
    pub in_viewport: bool,
}

/// How observe.js sends an element: `[ref, role, name, tag, x, y, width,
/// height, inViewport (0|1), optional fields or null]`. Arrays halve the
/// JSON text that crosses CDP and the janitor pipe on big pages; the agent
/// never sees this form.
#[derive(Deserialize)]
struct PackedElement(
    u32,
    Role,
    String,
    String,
    i64,
    i64,
    i64,
    i64,
    u8,
    Option<PackedExtras>,
);

/// The optional fields of a packed element, named as on the agent wire.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PackedExtras {
    value: Option<String>,
    value_length: Option<u64>,
    #[serde(default)]
    sensitive: bool,
    checked: Option<Checked>,
    selected: Option<bool>,
    expanded: Option<bool>,
    pressed: Option<Checked>,
    #[serde(default)]
    disabled: bool,
    #[serde(default)]
    focused: bool,
    #[serde(default)]
    required: bool,
    #[serde(default)]
    readonly: bool,
    level: Option<u8>,
    input_type: Option<String>,
    href: Option<String>,
}

impl From<PackedElement> for ObservedElement {
    fn from(packed: PackedElement) -> ObservedElement {
        let PackedElement(element_ref, role, name, tag, x, y, width, height, in_viewport, extras) =
            packed;
        let extras = extras.unwrap_or_default();
        ObservedElement {
            element_ref,
            role,
            name,
            value: extras.value,
            value_length: extras.value_length,
            sensitive: extras.sensitive,
            checked: extras.checked,
            selected: extras.selected,
            expanded: extras.expanded,
            pressed: extras.pressed,
            disabled: extras.disabled,
            focused: extras.focused,
            required: extras.required,
            readonly: extras.readonly,
            level: extras.level,
            tag,
            input_type: extras.input_type,
            href: extras.href,
            bounds: Bounds {
                x,
                y,
                width,
                height,
            },
            in_viewport: in_viewport != 0,
        }
    }
}

fn packed_elements<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<ObservedElement>, D::Error> {
    let packed = Vec::<PackedElement>::deserialize(deserializer)?;
    Ok(packed.into_iter().map(ObservedElement::from).collect())
}

/// Why an observation returned fewer elements than the page has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TruncationReason {
    Limit,
    Bytes,
    /// The Broker's token budget (`maxTokens`, `page::shape`); never sent by the page.
    Tokens,
}

/// Width and height in CSS px.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Size {
    pub width: i64,
    pub height: i64,
}

/// A point or offset in CSS px.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offset {
    pub x: i64,
    pub y: i64,
}

/// Pixels left to scroll in each direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remaining {
    pub up: i64,
    pub down: i64,
    pub left: i64,
    pub right: i64,
}

/// The additive `page` object: viewport, document size, scroll position,
/// pixels remaining each way and scroll percentages (0 when the document
/// does not scroll that way).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageMetrics {
    pub viewport: Size,
    pub document: Size,
    pub scroll: Offset,
    pub remaining: Remaining,
    pub percent: Offset,
}

/// What kind of thing an overlay signal is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverlayKind {
    /// An open `<dialog>`.
    Dialog,
    /// An element with role `dialog` or `alertdialog`.
    AriaDialog,
    /// A fixed element covering at least half the viewport at its centre.
    Covering,
}

/// A dialog or viewport-covering element seen by the observation.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OverlaySignal {
    pub kind: OverlayKind,
    /// The overlay's own ref when it was returned.
    #[serde(rename = "ref")]
    pub overlay_ref: Option<u32>,
    /// `dialog:modal` or `aria-modal="true"`.
    pub modal: bool,
    /// Fraction of the viewport covered, 0..=1.
    pub coverage: f64,
    pub z_index: Option<i64>,
    /// Returned elements inside the overlay.
    pub control_refs: Vec<u32>,
}

/// A returned combobox (or autocomplete textbox) and its popup.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComboboxSignal {
    #[serde(rename = "ref")]
    pub combobox_ref: u32,
    /// `aria-expanded`, when present.
    pub expanded: Option<bool>,
    /// `aria-autocomplete`, when present.
    pub autocomplete: Option<String>,
    pub popup_visible: bool,
    /// Returned options inside the visible popup.
    pub option_refs: Vec<u32>,
}

/// Returned checkboxes, radios, switches or selects inside a container
/// whose label mentions one of the filter keywords.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FilterGroupSignal {
    pub label: String,
    /// `aria`, `legend`, `heading` or `attribute` (id/class).
    pub label_source: String,
    pub refs: Vec<u32>,
}

/// Password fields and sign-in forms.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthSignal {
    /// Visible password fields, returned or not.
    pub password_count: u32,
    pub password_refs: Vec<u32>,
    /// Username fields and sign-in buttons that share a form with each
    /// other or with a password field.
    pub form_refs: Vec<u32>,
}

/// Facts that suggest the site refused access.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockedSignal {
    /// Challenge iframes and widgets.
    pub captcha_frames: u32,
    /// Blocked phrases found in the title and the first text of the page.
    pub phrases: Vec<String>,
    /// Whether that text sample covered the whole page (a short page).
    pub text_sample_complete: bool,
}

/// Raw facts for hints; never sent to the agent.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Signals {
    pub overlays: Vec<OverlaySignal>,
    pub comboboxes: Vec<ComboboxSignal>,
    pub filter_groups: Vec<FilterGroupSignal>,
    pub auth: AuthSignal,
    pub blocked: BlockedSignal,
}

/// The landmarks, lists, tables and dialogs around an Observation's elements and the frames
/// between them, as `observe.js` reports them with `compact`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Sections {
    /// `(kind, name, index of the enclosing section or -1)`, outer sections first.
    pub list: Vec<(String, String, i64)>,
    /// The innermost section of each returned element (same order), -1 for none.
    pub of: Vec<i64>,
    /// Visible frames: `(index of the element after it, name)`, in document order.
    pub frames: Vec<(usize, String)>,
}

/// The decoded result of `observe.js`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PageObservation {
    /// The page's random key of its document (a new document, a new key); never sent.
    pub document_key: String,
    /// Whether the base observation's refs were merged into this one's (`Observe::base_key`).
    #[serde(default)]
    pub base_merged: bool,
    /// Refs are stable per document: unique, in document order, not dense.
    #[serde(deserialize_with = "packed_elements")]
    pub elements: Vec<ObservedElement>,
    pub page: PageMetrics,
    pub truncated: bool,
    pub truncation_reasons: Vec<TruncationReason>,
    /// Visible candidates on the page (in the viewport with `viewportOnly`),
    /// returned or not.
    pub candidate_count: u64,
    /// With `compact`: what groups the returned elements (for the compact form's grouping
    /// lines); never sent as a field.
    #[serde(default)]
    pub sections: Option<Sections>,
    pub signals: Signals,
    /// `Observe::state_of`'s answer as the page gave it (a state or a refusal); never sent.
    #[serde(default)]
    pub state: Option<Value>,
    /// `Observe::key_record`'s and `Observe::click_verdict`'s answers; never sent.
    #[serde(default)]
    pub keys: Option<Value>,
    #[serde(default)]
    pub click: Option<Value>,
}

/// The agent-facing fields of an observation; the Broker adds its ids, url
/// and title around them (`#[serde(flatten)]`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObservationWire<'a> {
    pub elements: &'a [ObservedElement],
    pub page: &'a PageMetrics,
    pub hints: &'a [Hint],
    pub truncated: bool,
    pub truncation_reasons: &'a [TruncationReason],
    pub candidate_count: u64,
}

impl PageObservation {
    /// The agent-facing view with the given hints.
    pub fn wire<'a>(&'a self, hints: &'a [Hint]) -> ObservationWire<'a> {
        ObservationWire {
            elements: &self.elements,
            page: &self.page,
            hints,
            truncated: self.truncated,
            truncation_reasons: &self.truncation_reasons,
            candidate_count: self.candidate_count,
        }
    }

    /// The element with this ref, if returned.
    pub fn element(&self, element_ref: u32) -> Option<&ObservedElement> {
        self.elements.iter().find(|e| e.element_ref == element_ref)
    }

    /// Re-checks what the page returned: at most `limit` elements, refs
    /// unique and non-zero (stable refs are not dense), a document key of our
    /// shape, names within bounds, and no value beside a sensitive flag or on
    /// a password input (dropped, whatever the script did).
    fn check(&mut self, limit: u32) -> Result<(), PageError> {
        let shape = |detail: String| PageError::UnexpectedShape {
            script: Script::Observe.entry(),
            detail,
        };
        if self.elements.len() > limit as usize {
            return Err(shape(format!(
                "{} elements for limit {limit}",
                self.elements.len()
            )));
        }
        if self.document_key.is_empty() || self.document_key.len() > DOCUMENT_KEY_MAX_CHARS {
            return Err(shape("document key out of bounds".to_owned()));
        }
        let mut seen = std::collections::HashSet::with_capacity(self.elements.len());
        for (index, element) in self.elements.iter_mut().enumerate() {
            if element.element_ref == 0 || !seen.insert(element.element_ref) {
                return Err(shape(format!(
                    "ref {} at position {} is zero or repeated",
                    element.element_ref,
                    index + 1
                )));
            }
            if element.input_type.as_deref() == Some("password") {
                element.sensitive = true;
            }
            if element.sensitive {
                element.value = None;
            }
            truncate_chars(&mut element.name, NAME_MAX_CHARS as usize);
        }
        Ok(())
    }
}

fn truncate_chars(text: &mut String, max_chars: usize) {
    if let Some((index, _)) = text.char_indices().nth(max_chars) {
        text.truncate(index);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packed element: a textbox named Email unless `role`/`name` say
    /// otherwise, with `extra` as its optional fields.
    fn element(element_ref: u32, role: &str, name: &str, extra: Value) -> Value {
        let mut extras = json!({"inputType": "text"});
        for (key, value) in extra.as_object().unwrap() {
            extras[key] = value.clone();
        }
        json!([element_ref, role, name, "input", 1, 2, 3, 4, 1, extras])
    }

    fn observation(elements: Vec<Value>) -> Value {
        json!({
            "documentKey": "doc:abc",
            "elements": elements,
            "page": {
                "viewport": {"width": 780, "height": 493},
                "document": {"width": 780, "height": 2000},
                "scroll": {"x": 0, "y": 100},
                "remaining": {"up": 100, "down": 1407, "left": 0, "right": 0},
                "percent": {"x": 0, "y": 7}
            },
            "truncated": false, "truncationReasons": [], "candidateCount": 2,
            "signals": {
                "overlays": [], "comboboxes": [], "filterGroups": [],
                "auth": {"passwordCount": 0, "passwordRefs": [], "formRefs": []},
                "blocked": {"captchaFrames": 0, "phrases": [], "textSampleComplete": true}
            }
        })
    }

    fn observe() -> Observe {
        Observe {
            key: "observation:1".to_owned(),
            options: ObserveOptions::default(),
            base_key: None,
            compact: false,
            key_record: false,
            click_verdict: None,
            state_of: None,
        }
    }

    #[test]
    fn options_are_bounded() {
        let check = |limit, max_bytes| {
            ObserveOptions {
                limit,
                max_bytes,
                viewport_only: false,
            }
            .validate()
            .is_ok()
        };
        assert!(check(1, OBSERVE_MIN_MAX_BYTES));
        assert!(check(OBSERVE_HARD_MAX_LIMIT, OBSERVE_MAX_MAX_BYTES));
        assert!(!check(0, OBSERVE_DEFAULT_MAX_BYTES));
        assert!(!check(
            OBSERVE_HARD_MAX_LIMIT + 1,
            OBSERVE_DEFAULT_MAX_BYTES
        ));
        assert!(!check(10, OBSERVE_MIN_MAX_BYTES - 1));
        assert!(!check(10, OBSERVE_MAX_MAX_BYTES + 1));
        let empty_key = Observe {
            key: String::new(),
            options: ObserveOptions::default(),
            base_key: None,
            compact: false,
            key_record: false,
            click_verdict: None,
            state_of: None,
        };
        assert!(matches!(
            empty_key.call(),
            Err(PageError::InvalidOption {
                name: "observationKey",
                ..
            })
        ));
    }

    #[test]
    fn call_carries_options_and_policy_lists() {
        let call = observe().call().unwrap();
        assert_eq!(call.script, Script::Observe);
        assert_eq!(call.argument["observationKey"], json!("observation:1"));
        assert_eq!(call.argument["limit"], json!(OBSERVE_DEFAULT_LIMIT));
        assert_eq!(call.argument["viewportOnly"], json!(false));
        assert_eq!(call.argument["nameMax"], json!(200));
        assert!(
            call.argument["blockedPhrases"]
                .as_array()
                .unwrap()
                .contains(&json!("unusual traffic"))
        );
    }

    #[test]
    fn parse_decodes_states_and_wire_omits_absent_fields() {
        let value = observation(vec![
            element(
                1,
                "textbox",
                "Email",
                json!({"value": "a@b.c", "focused": true, "required": true}),
            ),
            element(
                2,
                "checkbox",
                "All",
                json!({"inputType": "checkbox", "checked": "mixed"}),
            ),
            json!([3, "button", "Go", "button", 0, 0, 10, 10, 0, null]),
        ]);
        let parsed = observe().parse(&value.to_string()).unwrap();
        assert_eq!(parsed.elements[1].checked, Some(Checked::Mixed));
        assert_eq!(parsed.element(2).unwrap().name, "All");
        assert_eq!(parsed.element(0), None);
        assert_eq!(parsed.element(4), None);
        let wire = serde_json::to_value(parsed.wire(&[])).unwrap();
        assert_eq!(wire["elements"][0]["value"], json!("a@b.c"));
        assert_eq!(wire["elements"][0]["focused"], json!(true));
        assert!(wire["elements"][0].get("disabled").is_none());
        assert!(wire["elements"][0].get("sensitive").is_none());
        assert_eq!(wire["elements"][1]["checked"], json!("mixed"));
        assert_eq!(wire["page"]["remaining"]["down"], json!(1407));
        assert_eq!(wire["hints"], json!([]));
        assert_eq!(wire["candidateCount"], json!(2));
        assert_eq!(
            wire["elements"][2],
            json!({"ref": 3, "role": "button", "name": "Go", "tag": "button",
                "bounds": {"x": 0, "y": 0, "width": 10, "height": 10}, "inViewport": false})
        );
        assert!(wire.get("signals").is_none());
    }

    #[test]
    fn password_values_are_dropped_whatever_the_page_said() {
        let value = observation(vec![element(
            1,
            "textbox",
            "Password",
            json!({"inputType": "password", "value": "hunter2", "valueLength": 7}),
        )]);
        let parsed = observe().parse(&value.to_string()).unwrap();
        let first = &parsed.elements[0];
        assert!(first.sensitive);
        assert_eq!(first.value, None);
        assert_eq!(first.value_length, Some(7));
        let wire = serde_json::to_string(&parsed.wire(&[])).unwrap();
        assert!(!wire.contains("hunter2"));
        assert!(wire.contains(r#""sensitive":true"#));
    }

    #[test]
    fn refs_must_be_unique_and_within_limit() {
        let plain = |element_ref| element(element_ref, "textbox", "Email", json!({}));
        // Stable refs leave gaps and need not ascend in document order.
        let gap = observation(vec![plain(7), plain(3)]);
        let parsed = observe().parse(&gap.to_string()).unwrap();
        assert_eq!(parsed.element(3).map(|e| e.element_ref), Some(3));
        for bad in [vec![plain(2), plain(2)], vec![plain(0)]] {
            assert!(matches!(
                observe().parse(&observation(bad).to_string()),
                Err(PageError::UnexpectedShape { .. })
            ));
        }
        let mut no_key = observation(vec![plain(1)]);
        no_key["documentKey"] = json!("");
        assert!(observe().parse(&no_key.to_string()).is_err());
        let small = Observe {
            key: "k".to_owned(),
            options: ObserveOptions {
                limit: 1,
                ..ObserveOptions::default()
            },
            base_key: None,
            compact: false,
            key_record: false,
            click_verdict: None,
            state_of: None,
        };
        let two = observation(vec![plain(1), plain(2)]);
        assert!(matches!(
            small.parse(&two.to_string()),
            Err(PageError::UnexpectedShape { .. })
        ));
        // An action's element state rides along, read by the same call; absent unless asked.
        let reading = Observe {
            state_of: Some(super::super::actions::RefTarget::new("observation:1", 3)),
            ..observe()
        };
        let argument = reading.call().unwrap().argument;
        assert_eq!(argument["stateOf"]["ref"], json!(3), "{argument}");
        assert_eq!(observe().call().unwrap().argument["stateOf"], Value::Null);
        // So do the keystroke guard's record and the click verdict, each only when asked.
        let plain_call = observe().call().unwrap().argument;
        assert_eq!(plain_call["keyRecord"], json!(false));
        assert_eq!(plain_call["clickVerdict"], Value::Null);
        let records = Observe {
            key_record: true,
            click_verdict: Some(super::super::actions::ClickVerdict(Some(
                super::super::actions::RefTarget::new("observation:1", 4),
            ))),
            ..observe()
        };
        let argument = records.call().unwrap().argument;
        assert_eq!(argument["keyRecord"], json!(true));
        assert_eq!(argument["clickVerdict"]["ref"], json!(4), "{argument}");
        let coordinates = Observe {
            click_verdict: Some(super::super::actions::ClickVerdict(None)),
            ..observe()
        };
        assert_eq!(
            coordinates.call().unwrap().argument["clickVerdict"],
            json!({})
        );
        let mut with_state = observation(vec![plain(1)]);
        with_state["state"] =
            json!({"documentKey": "d", "elementKey": "d:e1", "connected": true, "focused": true});
        assert!(
            reading
                .parse(&with_state.to_string())
                .unwrap()
                .state
                .is_some()
        );
        let bad_role = observation(vec![element(1, "banner", "x", json!({}))]);
        assert!(observe().parse(&bad_role.to_string()).is_err());
        let unknown_field = observation(vec![element(1, "textbox", "x", json!({"secret": 1}))]);
        assert!(observe().parse(&unknown_field.to_string()).is_err());
    }

    #[test]
    fn listener_nodes_are_click_like_and_once_each() {
        let listener = |event_type: &str, node: Option<i64>| EventListener {
            event_type: event_type.to_owned(),
            backend_node_id: node.map(BackendNodeId),
        };
        let listeners = [
            listener("click", Some(3)),
            listener("mousedown", Some(3)),
            listener("keydown", Some(4)),
            listener("pointerdown", Some(5)),
            listener("click", None),
            listener("mouseup", Some(2)),
        ];
        assert_eq!(
            listener_nodes(&listeners),
            vec![BackendNodeId(3), BackendNodeId(5), BackendNodeId(2)]
        );
    }

    #[test]
    fn long_names_are_cut_on_char_boundaries() {
        let long = "é".repeat(300);
        let value = observation(vec![element(1, "textbox", &long, json!({}))]);
        let parsed = observe().parse(&value.to_string()).unwrap();
        assert_eq!(parsed.elements[0].name.chars().count(), 200);
    }
}
