//! Page-side helpers of the action tools (`js/actions.js`): where to click a
//! ref and whether it can take a click now (actionability samples), the
//! click-truth record of what a click really did (`js/clicktruth.js`: its
//! document-start source, arming and the verdict), the keystroke guard's
//! arming and record (`js/keyguard.js`, registered with click truth), the
//! start of typing in one call (`PrepareTyping`), the hit test of a point
//! against a frame's `<iframe>` element in the parent document, the
//! ref's observable state before and after, focus and select-all, the
//! deep active element's identity for guarded typing and its state for
//! keyboard evidence (lengths in Unicode code points), the native value
//! setter for date/time/color/range inputs, native `<select>` selection and
//! option listing. Each helper addresses an element as a `RefTarget` (an
//! observation key and a ref); the page refuses unknown or stale refs with a
//! structured code. Password values never come back, only lengths. No I/O.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::error::PageError;
use super::observe::{Checked, validate_key};
use super::script::{CLICK_TRUTH_JS, KEY_GUARD_JS, PageScript, Script, ScriptCall, decode};

/// Characters of a value in a state snapshot: enough to compare typed text
/// exactly, bounded so a huge textarea cannot bloat evidence.
pub const SNAPSHOT_VALUE_MAX_CHARS: u32 = 100_000;

/// Input types whose value `browser.type` sets through the native setter instead of
/// keystrokes; injected into the library as `BP_NATIVE_VALUE_TYPES`.
pub const NATIVE_VALUE_TYPES: &[&str] = &[
    "date",
    "time",
    "datetime-local",
    "month",
    "week",
    "color",
    "range",
];

/// Options listed when the caller gives no `limit`.
pub const OPTIONS_DEFAULT_LIMIT: u32 = 100;

/// Largest accepted option-list `limit`.
pub const OPTIONS_MAX_LIMIT: u32 = 1_000;

/// Bytes of a value for the native setter (dates, times, colors, numbers).
const NATIVE_VALUE_MAX_BYTES: usize = 256;

/// Values one `selectOptions` call may pick.
const SELECT_VALUES_MAX: usize = 500;

/// Bytes of one value or label to select.
const SELECT_VALUE_MAX_BYTES: usize = 1_000;

/// An element of an earlier observation of this world: the Observation's key and the ref, and
/// the page's key of the document the Broker recorded the Observation for. With it the page
/// resolves the ref through the document once the Observation's own element map was evicted
/// (refs are stable per document); without it only through the kept map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefTarget {
    pub observation_key: String,
    pub element_ref: u32,
    pub document_key: Option<String>,
}

impl RefTarget {
    pub fn new(observation_key: impl Into<String>, element_ref: u32) -> RefTarget {
        RefTarget {
            observation_key: observation_key.into(),
            element_ref,
            document_key: None,
        }
    }

    /// The same target, resolvable through its document (`document_key` as the page answered it).
    pub fn in_document(mut self, document_key: impl Into<String>) -> RefTarget {
        self.document_key = Some(document_key.into());
        self
    }

    /// The JSON argument the page helpers take, after checking the keys.
    pub(super) fn argument(&self) -> Result<Value, PageError> {
        validate_key(&self.observation_key)?;
        if self.element_ref == 0 {
            return Err(PageError::InvalidOption {
                name: "ref",
                detail: "refs start at 1".to_owned(),
            });
        }
        let mut argument =
            json!({ "observationKey": self.observation_key, "ref": self.element_ref });
        if let Some(document_key) = &self.document_key {
            validate_key(document_key)?;
            argument["documentKey"] = json!(document_key);
        }
        Ok(argument)
    }
}

fn with(target: &RefTarget, extra: Value) -> Result<Value, PageError> {
    let mut argument = target.argument()?;
    if let (Some(into), Value::Object(from)) = (argument.as_object_mut(), extra) {
        into.extend(from);
    }
    Ok(argument)
}

/// Scroll the ref's element to the viewport centre and report where to
/// click it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClickPoint(pub RefTarget);

/// A click point in viewport CSS px of the element's frame, with the hit
/// test at that point. `hit` is also true when the point lands on a
/// `<label>` of the element (`viaLabel`); otherwise `occludedBy` describes
/// what covers it (`div#overlay.backdrop`). `box` is the client rect the
/// point was taken from (`[left, top, width, height]`, compared across
/// samples to tell a still element from a moving one), `scrolled` whether
/// the call's own scrolling moved it, `frame` the frame's
/// viewport size (`innerWidth`, `innerHeight`: what its `<iframe>`'s content
/// box shows), `disabled` a `:disabled` or `aria-disabled="true"` element.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClickTarget {
    pub x: f64,
    pub y: f64,
    pub hit: bool,
    pub in_viewport: bool,
    #[serde(default)]
    pub via_label: bool,
    #[serde(default)]
    pub occluded_by: Option<String>,
    #[serde(default, rename = "box")]
    pub rect: Option<[f64; 4]>,
    #[serde(default)]
    pub frame: Option<[f64; 2]>,
    #[serde(default)]
    pub disabled: bool,
    /// Whether this call's scrolling moved the element.
    #[serde(default)]
    pub scrolled: bool,
    /// Rendering updates of the document the world has seen (`bpFramesSeen`): more in a later
    /// sample means a frame lies between the two.
    #[serde(default)]
    pub frames: u64,
    /// `document.timeline.currentTime` (ms): the animation clock, advanced once per rendered
    /// frame; `None` without an active timeline.
    #[serde(default)]
    pub timeline: Option<f64>,
}

/// One actionability sample of a ref's element: like `ClickPoint`, with a
/// choice of scrolling, so that a later sample measures the element where
/// the first left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClickProbe {
    pub target: RefTarget,
    pub scroll: ProbeScroll,
}

/// A `ClickProbe`, then, when the element can take a click where it is, the
/// same again in the page's first frame callback whose animation clock
/// stepped `min_step_ms` past the first sample's (waited for in the page),
/// or no second sample when no such frame came within `max_wait`.
#[derive(Debug, Clone, PartialEq)]
pub struct ClickSettle {
    pub probe: ClickProbe,
    pub min_step_ms: f64,
    pub max_wait: Duration,
}

/// The two samples of a `ClickSettle`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Settled {
    pub first: ClickTarget,
    pub second: Option<ClickTarget>,
}

impl PageScript for ClickSettle {
    type Output = Settled;

    fn call(&self) -> Result<ScriptCall, PageError> {
        let mut argument = self.probe.call()?.argument;
        if let Some(object) = argument.as_object_mut() {
            object.insert("minStep".into(), json!(self.min_step_ms));
            object.insert("maxWait".into(), json!(self.max_wait.as_millis() as u64));
        }
        Ok(ScriptCall {
            script: Script::ClickSettle,
            argument,
        })
    }

    fn parse(&self, json: &str) -> Result<Settled, PageError> {
        decode(Script::ClickSettle, json)
    }
}

/// How a `ClickProbe` scrolls before measuring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeScroll {
    /// Never.
    None,
    /// Only when the element is not entirely in the viewport.
    IfNeeded,
    /// Always to the viewport centre (e.g. away from a sticky header).
    Center,
}

impl ProbeScroll {
    fn as_str(self) -> &'static str {
        match self {
            ProbeScroll::None => "none",
            ProbeScroll::IfNeeded => "if_needed",
            ProbeScroll::Center => "center",
        }
    }
}

impl PageScript for ClickProbe {
    type Output = ClickTarget;

    fn call(&self) -> Result<ScriptCall, PageError> {
        Ok(ScriptCall {
            script: Script::ClickPoint,
            argument: with(&self.target, json!({ "scroll": self.scroll.as_str() }))?,
        })
    }

    fn parse(&self, json: &str) -> Result<ClickTarget, PageError> {
        decode(Script::ClickPoint, json)
    }
}

/// The document-start source of the click-truth listener
/// (`js/clicktruth.js`) and the keystroke guard (`js/keyguard.js`), for
/// `Page.addScriptToEvaluateOnNewDocument` in the Broker's isolated world:
/// it runs before any page script of every new document, so their window
/// capture listeners are the first to see a click or a key.
pub fn document_start_script() -> String {
    format!(
        "({})(true);\n({})(true);",
        CLICK_TRUTH_JS.trim_end(),
        KEY_GUARD_JS.trim_end()
    )
}

/// Which trusted event an armed click waits for: `click` for the left
/// button, `auxclick` for the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClickEvent {
    Click,
    AuxClick,
}

/// Starts recording the trusted clicks of one action in this world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArmClick(pub ClickEvent);

/// Whether the world has the listener, and whether it was installed at
/// document start (before any page script) or into a loaded document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Armed {
    pub armed: bool,
    pub early: bool,
}

impl PageScript for ArmClick {
    type Output = Armed;

    fn call(&self) -> Result<ScriptCall, PageError> {
        let kind = match self.0 {
            ClickEvent::Click => "click",
            ClickEvent::AuxClick => "auxclick",
        };
        Ok(ScriptCall {
            script: Script::ArmClick,
            argument: json!({ "type": kind }),
        })
    }

    fn parse(&self, json: &str) -> Result<Armed, PageError> {
        decode(Script::ArmClick, json)
    }
}

/// Reads and disarms the click record, judged against a ref's element
/// (`None`: a coordinate click, only the count matters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClickVerdict(pub Option<RefTarget>);

/// What the armed clicks did: trusted clicks `observed` in the document,
/// `inside` the element (or its label), `reached` their target (not stopped
/// on the way), whether the first that reached it was `prevented`, and how many
/// DOM `mutations` the document made from arming to the verdict (inline style
/// writes not counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClickRecord {
    pub armed: bool,
    pub early: bool,
    pub observed: u32,
    pub inside: u32,
    pub reached: u32,
    pub prevented: bool,
    #[serde(default)]
    pub mutations: u32,
}

/// How a click met its element, from the click-truth record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// A trusted click aimed inside the element reached it.
    Reached,
    /// Trusted clicks happened, none aimed inside the element (an overlay
    /// or a moved element took it).
    Intercepted,
    /// A click aimed inside the element was stopped before reaching it.
    Stopped,
    /// No trusted click was seen in the element's document.
    NotObserved,
}

impl Delivery {
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::Reached => "reached",
            Delivery::Intercepted => "intercepted",
            Delivery::Stopped => "stopped",
            Delivery::NotObserved => "not_observed",
        }
    }
}

impl ClickRecord {
    /// `None` when the record cannot tell (the world had no armed listener).
    pub fn delivery(&self) -> Option<Delivery> {
        if !self.armed {
            return None;
        }
        Some(match (self.reached, self.inside, self.observed) {
            (1.., _, _) => Delivery::Reached,
            (0, 1.., _) => Delivery::Stopped,
            (0, 0, 1..) => Delivery::Intercepted,
            (0, 0, 0) => Delivery::NotObserved,
        })
    }
}

impl PageScript for ClickVerdict {
    type Output = ClickRecord;

    fn call(&self) -> Result<ScriptCall, PageError> {
        let argument = match &self.0 {
            Some(target) => target.argument()?,
            None => json!({}),
        };
        Ok(ScriptCall {
            script: Script::ClickVerdict,
            argument,
        })
    }

    fn parse(&self, json: &str) -> Result<ClickRecord, PageError> {
        decode(Script::ClickVerdict, json)
    }
}

/// `Runtime.callFunctionOn` declaration run on a frame owner (`<iframe>`)
/// element resolved in its document's isolated world: whether the point
/// `(x, y)` of that document's viewport lands on the owner (so nothing in
/// the parent covers the child frame there), a short description of what
/// covers it otherwise, and the document's viewport size. Returns JSON text.
pub const FRAME_POINT_HIT: &str = include_str!("js/framehit.js");

/// What `FRAME_POINT_HIT` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FrameHit {
    pub hit: bool,
    #[serde(default)]
    pub occluded_by: Option<String>,
    pub frame: [f64; 2],
}

impl PageScript for ClickPoint {
    type Output = ClickTarget;

    fn call(&self) -> Result<ScriptCall, PageError> {
        Ok(ScriptCall {
            script: Script::ClickPoint,
            argument: self.0.argument()?,
        })
    }

    fn parse(&self, json: &str) -> Result<ClickTarget, PageError> {
        decode(Script::ClickPoint, json)
    }
}

/// The observable state of a ref's element, for before/after evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateSnapshot(pub RefTarget);

/// State of one element. `value` is absent for a sensitive (password)
/// field; `valueLength` is always the full length when there is a value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElementState {
    /// Identity of the document (changes with every new document).
    pub document_key: String,
    /// Identity of the element within that document.
    pub element_key: String,
    pub connected: bool,
    #[serde(default)]
    pub checked: Option<Checked>,
    #[serde(default)]
    pub selected: Option<bool>,
    #[serde(default)]
    pub expanded: Option<bool>,
    #[serde(default)]
    pub pressed: Option<Checked>,
    #[serde(default)]
    pub value: Option<String>,
    #[serde(default)]
    pub value_length: Option<u64>,
    #[serde(default)]
    pub sensitive: bool,
    /// Values of the selected options of a native `<select>`.
    #[serde(default)]
    pub selected_values: Option<Vec<String>>,
    pub focused: bool,
}

impl PageScript for StateSnapshot {
    type Output = ElementState;

    fn call(&self) -> Result<ScriptCall, PageError> {
        Ok(ScriptCall {
            script: Script::StateSnapshot,
            argument: with(&self.0, json!({ "valueMax": SNAPSHOT_VALUE_MAX_CHARS }))?,
        })
    }

    fn parse(&self, json: &str) -> Result<ElementState, PageError> {
        let mut state: ElementState = decode(Script::StateSnapshot, json)?;
        if state.sensitive {
            state.value = None;
        }
        Ok(state)
    }
}

/// Focus the ref's element and select all its editable content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FocusAndSelectAll(pub RefTarget);

/// Whether focus landed on the element, and the deep active element then.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FocusOutcome {
    pub focused: bool,
    pub selected_all: bool,
    /// With the caret put after the content (`PrepareTyping` to append): it is there.
    #[serde(default)]
    pub caret_at_end: bool,
    pub active_element_key: Option<String>,
}

impl PageScript for FocusAndSelectAll {
    type Output = FocusOutcome;

    fn call(&self) -> Result<ScriptCall, PageError> {
        Ok(ScriptCall {
            script: Script::FocusAndSelectAll,
            argument: self.0.argument()?,
        })
    }

    fn parse(&self, json: &str) -> Result<FocusOutcome, PageError> {
        decode(Script::FocusAndSelectAll, json)
    }
}

/// The identity of the deep active element (through open shadow roots),
/// pinned and re-checked between the steps of a guarded composite action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ActiveElementKey;

/// The deep active element: a key stable for the element's lifetime in its
/// document, the document's key, and whether it takes text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActiveElement {
    pub key: Option<String>,
    pub document_key: String,
    pub tag: Option<String>,
    pub editable: bool,
}

impl PageScript for ActiveElementKey {
    type Output = ActiveElement;

    fn call(&self) -> Result<ScriptCall, PageError> {
        Ok(ScriptCall {
            script: Script::ActiveElementKey,
            argument: json!({}),
        })
    }

    fn parse(&self, json: &str) -> Result<ActiveElement, PageError> {
        decode(Script::ActiveElementKey, json)
    }
}

/// Arms the keystroke guard (`js/keyguard.js`) for one burst of key strokes
/// on the deep active element, if the guard was installed at document start and the
/// document has no frames. `budget`: how long the burst may take; `gap`: the
/// longest a key may be held on its way (a dialog holds the keys behind it);
/// `linger`: after the deadline, how long a key still counts as the burst's
/// (a later one disarms the guard).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArmKeys {
    pub budget: Duration,
    pub gap: Duration,
    pub linger: Duration,
}

/// The deep active element when the guard was asked to arm (what
/// `ActiveElementKey` reads), and whether it is armed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeysArmed {
    #[serde(flatten)]
    pub active: ActiveElement,
    /// Absent when nothing was asked to arm.
    #[serde(default)]
    pub armed: bool,
}

impl PageScript for ArmKeys {
    type Output = KeysArmed;

    fn call(&self) -> Result<ScriptCall, PageError> {
        Ok(ScriptCall {
            script: Script::ArmKeys,
            argument: json!({
                "budget": self.budget.as_millis() as u64,
                "gap": self.gap.as_millis() as u64,
                "linger": self.linger.as_millis() as u64,
            }),
        })
    }

    fn parse(&self, json: &str) -> Result<KeysArmed, PageError> {
        decode(Script::ArmKeys, json)
    }
}

/// Everything typing needs before its first key, in one page call
/// (`prepareTyping`): the element's state, the focus (whole content selected
/// to be replaced, or the caret after it), then the deep active element,
/// arming the keystroke guard on it when `arm` is given. A stale ref fails
/// before anything is focused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrepareTyping {
    pub target: RefTarget,
    pub replace: bool,
    pub arm: Option<ArmKeys>,
}

/// What `PrepareTyping` found and did.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TypingPrepared {
    pub before: ElementState,
    pub focus: FocusOutcome,
    pub active: KeysArmed,
}

impl PageScript for PrepareTyping {
    type Output = TypingPrepared;

    fn call(&self) -> Result<ScriptCall, PageError> {
        let arm = match &self.arm {
            Some(arm) => arm.call()?.argument,
            None => Value::Null,
        };
        Ok(ScriptCall {
            script: Script::PrepareTyping,
            argument: with(
                &self.target,
                json!({ "valueMax": SNAPSHOT_VALUE_MAX_CHARS, "atEnd": !self.replace, "arm": arm }),
            )?,
        })
    }

    fn parse(&self, json: &str) -> Result<TypingPrepared, PageError> {
        let mut prepared: TypingPrepared = decode(Script::PrepareTyping, json)?;
        if prepared.before.sensitive {
            prepared.before.value = None;
        }
        Ok(prepared)
    }
}

/// Reads and disarms the keystroke guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeyRecord;

/// What an armed burst did: characters (key-downs other than modifiers) the
/// document `seen` at all (fewer than were sent: some went elsewhere) and
/// those the guard `stopped` (the rest went through), the editing insertions
/// (`beforeinput`) it `blocked`, and why the guard began refusing
/// (`focus_changed`, `expired`, `held`). Unarmed, `lapsed` says a key made
/// after the burst's deadline and linger disarmed the guard and went through
/// unguarded: `clean` when no key of the burst had been refused (every key
/// went through, in order), `cut` when some had (keys went through after
/// stopped ones).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeysRecorded {
    pub armed: bool,
    #[serde(default)]
    pub lapsed: Option<String>,
    pub stopped: u64,
    pub seen: u64,
    pub blocked: u64,
    pub refused: Option<String>,
}

impl PageScript for KeyRecord {
    type Output = KeysRecorded;

    fn call(&self) -> Result<ScriptCall, PageError> {
        Ok(ScriptCall {
            script: Script::KeyRecord,
            argument: json!({}),
        })
    }

    fn parse(&self, json: &str) -> Result<KeysRecorded, PageError> {
        decode(Script::KeyRecord, json)
    }
}

/// The deep active element's state and where its caret or selection is,
/// for `browser.keyboard`'s before/after comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ActiveElementState;

/// The focused element's snapshot (absent when nothing has focus).
/// `selection_start`/`selection_end` are code-point offsets into the value
/// of an input or textarea that exposes a selection; `selected_length` the
/// code points a contenteditable selection spans.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActiveState {
    #[serde(default)]
    pub state: Option<ElementState>,
    #[serde(default)]
    pub selection_start: Option<u64>,
    #[serde(default)]
    pub selection_end: Option<u64>,
    #[serde(default)]
    pub selected_length: Option<u64>,
}

impl PageScript for ActiveElementState {
    type Output = ActiveState;

    fn call(&self) -> Result<ScriptCall, PageError> {
        Ok(ScriptCall {
            script: Script::ActiveElementState,
            argument: json!({ "valueMax": SNAPSHOT_VALUE_MAX_CHARS }),
        })
    }

    fn parse(&self, json: &str) -> Result<ActiveState, PageError> {
        let mut active: ActiveState = decode(Script::ActiveElementState, json)?;
        if let Some(state) = active.state.as_mut()
            && state.sensitive
        {
            state.value = None;
        }
        Ok(active)
    }
}

/// Set a date/time/color/range input through the native value setter:
/// `beforeinput` (cancelable), the setter, then `input`; `change` follows
/// when the edit is committed (the element loses focus or its form is
/// submitted), never before `input`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetNativeValue {
    pub target: RefTarget,
    pub value: String,
}

/// The value before and the effective value after the page's handlers ran
/// (browser sanitization or a framework may have changed it); `canceled`
/// when the page canceled `beforeinput` and nothing was set. `normalized`
/// is the requested value as this browser spells it for the input's type
/// (`#AbCd00` is `#abcd00`), `valid` whether it is a value of that type at
/// all (an invalid one is sanitized to a default, never "landed").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ValueOutcome {
    pub before: String,
    pub after: String,
    pub canceled: bool,
    #[serde(default)]
    pub normalized: String,
    #[serde(default)]
    pub valid: bool,
}

impl PageScript for SetNativeValue {
    type Output = ValueOutcome;

    fn call(&self) -> Result<ScriptCall, PageError> {
        if self.value.len() > NATIVE_VALUE_MAX_BYTES {
            return Err(PageError::InvalidOption {
                name: "value",
                detail: format!("at most {NATIVE_VALUE_MAX_BYTES} bytes"),
            });
        }
        Ok(ScriptCall {
            script: Script::SetNativeValue,
            argument: with(&self.target, json!({ "value": self.value }))?,
        })
    }

    fn parse(&self, json: &str) -> Result<ValueOutcome, PageError> {
        decode(Script::SetNativeValue, json)
    }
}

/// Select options of a native `<select>` by value (or label); fires `input`
/// and `change`. A missing or disabled option changes nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectOptions {
    pub target: RefTarget,
    pub values: Vec<String>,
}

/// One selected option.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectedOption {
    pub value: String,
    pub label: String,
}

/// The selection after the call and whether it differs from before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectionOutcome {
    pub changed: bool,
    pub selected: Vec<SelectedOption>,
}

impl PageScript for SelectOptions {
    type Output = SelectionOutcome;

    fn call(&self) -> Result<ScriptCall, PageError> {
        let too_long = self.values.iter().any(|v| v.len() > SELECT_VALUE_MAX_BYTES);
        if self.values.is_empty() || self.values.len() > SELECT_VALUES_MAX || too_long {
            return Err(PageError::InvalidOption {
                name: "values",
                detail: format!(
                    "1..={SELECT_VALUES_MAX} values of at most {SELECT_VALUE_MAX_BYTES} bytes"
                ),
            });
        }
        Ok(ScriptCall {
            script: Script::SelectOptions,
            argument: with(&self.target, json!({ "values": self.values }))?,
        })
    }

    fn parse(&self, json: &str) -> Result<SelectionOutcome, PageError> {
        decode(Script::SelectOptions, json)
    }
}

/// List the options of a native select, or the currently exposed options
/// of an ARIA combobox/listbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListOptions {
    pub target: RefTarget,
    pub limit: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptionsKind {
    Native,
    Aria,
}

/// One listed option. For ARIA options `value` is `data-value` or the id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListedOption {
    pub index: u32,
    pub value: String,
    pub label: String,
    pub selected: bool,
    pub disabled: bool,
}

/// Options of one control; `popupVisible` only for ARIA controls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OptionList {
    pub kind: OptionsKind,
    pub multiple: bool,
    pub options: Vec<ListedOption>,
    pub total: u64,
    pub truncated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub popup_visible: Option<bool>,
}

impl PageScript for ListOptions {
    type Output = OptionList;

    fn call(&self) -> Result<ScriptCall, PageError> {
        if self.limit == 0 || self.limit > OPTIONS_MAX_LIMIT {
            return Err(PageError::InvalidOption {
                name: "limit",
                detail: format!("must be 1..={OPTIONS_MAX_LIMIT}"),
            });
        }
        Ok(ScriptCall {
            script: Script::ListOptions,
            argument: with(&self.target, json!({ "limit": self.limit }))?,
        })
    }

    fn parse(&self, json: &str) -> Result<OptionList, PageError> {
        decode(Script::ListOptions, json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> RefTarget {
        RefTarget::new("observation:1", 3)
    }

    #[test]
    fn ref_targets_are_checked() {
        assert_eq!(
            target().argument().unwrap(),
            json!({"observationKey": "observation:1", "ref": 3})
        );
        assert!(RefTarget::new("k", 0).argument().is_err());
        assert!(RefTarget::new("", 1).argument().is_err());
        assert_eq!(
            target().in_document("doc:ab12").argument().unwrap(),
            json!({"observationKey": "observation:1", "ref": 3, "documentKey": "doc:ab12"})
        );
        assert!(target().in_document("").argument().is_err());
        let call = SetNativeValue {
            target: target(),
            value: "2024-05-06".to_owned(),
        }
        .call()
        .unwrap();
        assert_eq!(call.argument["value"], json!("2024-05-06"));
        assert_eq!(call.argument["ref"], json!(3));
    }

    #[test]
    fn select_values_are_bounded() {
        let select = |values: Vec<String>| {
            SelectOptions {
                target: target(),
                values,
            }
            .call()
        };
        assert!(select(vec!["a".to_owned()]).is_ok());
        assert!(select(Vec::new()).is_err());
        assert!(select(vec!["x".repeat(SELECT_VALUE_MAX_BYTES + 1)]).is_err());
    }

    #[test]
    fn click_records_tell_how_a_click_met_its_element() {
        let record = |observed, inside, reached| ClickRecord {
            mutations: 0,
            armed: true,
            early: true,
            observed,
            inside,
            reached,
            prevented: false,
        };
        assert_eq!(record(2, 2, 1).delivery(), Some(Delivery::Reached));
        assert_eq!(record(1, 1, 0).delivery(), Some(Delivery::Stopped));
        assert_eq!(record(1, 0, 0).delivery(), Some(Delivery::Intercepted));
        assert_eq!(record(0, 0, 0).delivery(), Some(Delivery::NotObserved));
        let unarmed = ClickRecord {
            mutations: 0,
            armed: false,
            ..record(0, 0, 0)
        };
        assert_eq!(unarmed.delivery(), None);
        let probe = ClickProbe {
            target: target(),
            scroll: ProbeScroll::IfNeeded,
        }
        .call()
        .unwrap();
        assert_eq!(probe.argument["scroll"], json!("if_needed"));
        assert_eq!(
            ArmClick(ClickEvent::AuxClick).call().unwrap().argument["type"],
            "auxclick"
        );
        let source = document_start_script();
        assert!(source.starts_with("(function (early)") && source.ends_with(")(true);"));
        assert!(
            source.contains("browser-pilot.click-truth.v1")
                && source.contains("browser-pilot.key-guard.v1")
        );
        let arm = ArmKeys {
            budget: Duration::from_millis(140),
            gap: Duration::from_millis(50),
            linger: Duration::from_secs(1),
        };
        let argument = arm.call().unwrap().argument;
        assert_eq!(argument, json!({"budget": 140, "gap": 50, "linger": 1000}));
        let armed = arm
            .parse(r#"{"key":"d:e1","documentKey":"d","tag":"input","editable":true,"armed":true}"#)
            .unwrap();
        assert!(armed.armed && armed.active.key.as_deref() == Some("d:e1"));
        let prepare = PrepareTyping {
            target: target(),
            replace: false,
            arm: Some(arm),
        };
        let argument = prepare.call().unwrap().argument;
        assert_eq!(argument["atEnd"], json!(true));
        assert_eq!(argument["arm"]["budget"], json!(140));
        let unarmed = PrepareTyping {
            target: target(),
            replace: true,
            arm: None,
        };
        let argument = unarmed.call().unwrap().argument;
        assert_eq!(
            (&argument["atEnd"], &argument["arm"]),
            (&json!(false), &Value::Null)
        );
        let prepared = unarmed
            .parse(r#"{"before":{"documentKey":"d","elementKey":"d:e1","connected":true,"value":"secret","valueLength":6,"sensitive":true,"focused":false},"focus":{"focused":true,"selectedAll":true,"activeElementKey":"d:e1"},"active":{"key":"d:e1","documentKey":"d","tag":"input","editable":true}}"#)
            .unwrap();
        assert_eq!(
            prepared.before.value, None,
            "a sensitive value is never kept"
        );
        assert!(!prepared.active.armed);
    }

    #[test]
    fn sensitive_snapshot_never_keeps_a_value() {
        let state = StateSnapshot(target())
            .parse(
                &json!({"documentKey": "doc:1", "elementKey": "doc:1:e1", "connected": true,
                "value": "leak", "valueLength": 4, "sensitive": true, "focused": false})
                .to_string(),
            )
            .unwrap();
        assert_eq!(state.value, None);
        assert_eq!(state.value_length, Some(4));
    }
}
