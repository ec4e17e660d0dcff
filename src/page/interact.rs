//! Page-side helpers of `browser.wait`, `browser.hover` and `browser.drag` (`js/interact.js`):
//! one look at a wait condition (is a text shown, how many elements match a selector and how
//! many of them are visible), the visible-element marks before and after a hover (what
//! appeared), and the drag record (HTML5 drag events seen in the Broker's isolated world, where
//! the source element sits before and after, whether the target's content changed). Typed calls
//! and results only; no I/O, and no decision about what they prove (that is the tools').

use serde::Deserialize;
use serde_json::{Value, json};

use super::actions::RefTarget;
use super::error::PageError;
use super::script::{PageScript, Script, ScriptCall, decode};

/// Bytes of a wait text or selector sent to the page.
const PROBE_MAX_BYTES: usize = 1_024;

/// One look at `browser.wait`'s page conditions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WaitProbe {
    pub text: Option<String>,
    pub selector: Option<String>,
}

/// What one look saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitSeen {
    #[serde(default)]
    pub text_found: Option<bool>,
    #[serde(default)]
    pub matched: Option<u64>,
    #[serde(default)]
    pub visible: Option<u64>,
}

impl PageScript for WaitProbe {
    type Output = WaitSeen;

    fn call(&self) -> Result<ScriptCall, PageError> {
        let mut argument = json!({});
        for (name, value) in [("text", &self.text), ("selector", &self.selector)] {
            if let Some(value) = value {
                if value.is_empty() || value.len() > PROBE_MAX_BYTES {
                    return Err(PageError::InvalidOption {
                        name,
                        detail: format!("must be 1 to {PROBE_MAX_BYTES} bytes"),
                    });
                }
                argument[name] = json!(value);
            }
        }
        Ok(ScriptCall {
            script: Script::WaitProbe,
            argument,
        })
    }

    fn parse(&self, json: &str) -> Result<WaitSeen, PageError> {
        decode(Script::WaitProbe, json)
    }
}

/// Before a hover: marks the elements visible now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoverMark;

#[derive(Deserialize)]
struct Marked {
    #[expect(
        dead_code,
        reason = "the script's acknowledgement; only its shape is checked"
    )]
    visible: u64,
}

impl PageScript for HoverMark {
    type Output = ();

    fn call(&self) -> Result<ScriptCall, PageError> {
        Ok(ScriptCall {
            script: Script::HoverMark,
            argument: json!({}),
        })
    }

    fn parse(&self, json: &str) -> Result<(), PageError> {
        decode::<Marked>(Script::HoverMark, json).map(|_| ())
    }
}

/// After a hover: whether the ref's element is hovered, and what became visible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoverReport(pub Option<RefTarget>);

/// An element described for evidence (page data, bounded by the script).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct Described {
    pub tag: String,
    pub role: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hovered {
    /// `:hover` matches the ref's element (`None` for a coordinate hover).
    pub hovered: Option<bool>,
    /// Outermost elements that became visible.
    pub appeared_count: u64,
    pub appeared: Vec<Described>,
    /// Whether the mark before the hover was still there (the document stayed).
    pub marked: bool,
}

impl PageScript for HoverReport {
    type Output = Hovered;

    fn call(&self) -> Result<ScriptCall, PageError> {
        let argument = match &self.0 {
            Some(target) => target.argument()?,
            None => json!({}),
        };
        Ok(ScriptCall {
            script: Script::HoverReport,
            argument,
        })
    }

    fn parse(&self, json: &str) -> Result<Hovered, PageError> {
        decode(Script::HoverReport, json)
    }
}

/// Before a drag: the source (a ref, or the element at `start` in the frame's viewport), the
/// target ref if any, and the drag-event listeners.
#[derive(Debug, Clone, PartialEq)]
pub struct DragArm {
    pub source: Option<RefTarget>,
    pub start: Option<(f64, f64)>,
    pub target: Option<RefTarget>,
}

#[derive(Deserialize)]
struct DragArmed {
    #[expect(
        dead_code,
        reason = "the script's acknowledgement; only its shape is checked"
    )]
    armed: bool,
}

impl PageScript for DragArm {
    type Output = ();

    fn call(&self) -> Result<ScriptCall, PageError> {
        let mut argument = json!({});
        if let Some(source) = &self.source {
            argument["source"] = source.argument()?;
        }
        if let Some((x, y)) = self.start {
            argument["start"] = json!([x, y]);
        }
        if let Some(target) = &self.target {
            argument["target"] = target.argument()?;
        }
        Ok(ScriptCall {
            script: Script::DragArm,
            argument,
        })
    }

    fn parse(&self, json: &str) -> Result<(), PageError> {
        decode::<DragArmed>(Script::DragArm, json).map(|_| ())
    }
}

/// After a drag: what the drag record saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DragVerdict;

/// A `drop` event seen in the document.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct DropSeen {
    /// Whether it hit the target ref's element (`None` without a target ref).
    pub inside: Option<bool>,
    /// `dataTransfer.types` of the drop (page data, bounded).
    pub types: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct DragRecord {
    pub armed: bool,
    #[serde(default)]
    pub drag_started: bool,
    #[serde(default)]
    pub drop: Option<DropSeen>,
    /// `dataTransfer.dropEffect` at `dragend` (`none` when the drop was refused).
    #[serde(default)]
    pub drop_effect: Option<String>,
    #[serde(default)]
    pub source_connected: bool,
    /// The source has another parent or index, or its box moved in the document.
    #[serde(default)]
    pub moved: bool,
    /// Another parent or index.
    #[serde(default)]
    pub reordered: bool,
    #[serde(default)]
    pub target_changed: bool,
}

impl PageScript for DragVerdict {
    type Output = DragRecord;

    fn call(&self) -> Result<ScriptCall, PageError> {
        Ok(ScriptCall {
            script: Script::DragVerdict,
            argument: Value::Object(Default::default()),
        })
    }

    fn parse(&self, json: &str) -> Result<DragRecord, PageError> {
        decode(Script::DragVerdict, json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_carry_their_arguments_and_answers_decode() {
        let probe = WaitProbe {
            text: Some("Loaded".into()),
            selector: None,
        };
        assert_eq!(probe.call().unwrap().argument, json!({"text": "Loaded"}));
        assert!(
            WaitProbe {
                text: Some(String::new()),
                selector: None
            }
            .call()
            .is_err()
        );
        let seen = probe.parse(r#"{"textFound":true}"#).unwrap();
        assert_eq!(seen.text_found, Some(true));
        let refused = WaitProbe::default()
            .parse(r#"{"error":{"code":"invalid_selector","message":"bad"}}"#)
            .unwrap_err();
        assert!(refused.refusal().is_some());
        let arm = DragArm {
            source: None,
            start: Some((3.0, 4.5)),
            target: None,
        };
        assert_eq!(arm.call().unwrap().argument, json!({"start": [3.0, 4.5]}));
        let record = DragVerdict
            .parse(r#"{"armed":true,"dragStarted":true,"drop":{"inside":true,"types":["text/plain"]},"dropEffect":"move","sourceConnected":true,"moved":false,"targetChanged":true}"#)
            .unwrap();
        assert_eq!(record.drop.unwrap().inside, Some(true));
        let hovered = HoverReport(None)
            .parse(r#"{"hovered":null,"appearedCount":1,"appeared":[{"tag":"ul","role":"menu","name":"Docs"}],"marked":true}"#)
            .unwrap();
        assert_eq!(hovered.appeared[0].role, "menu");
    }
}
