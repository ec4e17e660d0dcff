//! `browser.read` on the page side: options with their bounds, the call of
//! `js/read.js`, and its typed result. No I/O.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::actions::RefTarget;
use super::error::PageError;
use super::script::{PageScript, Script, ScriptCall, decode};

/// Characters of text returned when the caller gives no `maxChars`.
pub const READ_DEFAULT_MAX_CHARS: u32 = 20_000;

/// Largest accepted `maxChars`; the tool schema's `maxLength` for `text`.
pub const READ_MAX_MAX_CHARS: u32 = 1_000_000;

/// Bytes of a CSS selector: far above any hand-written one.
pub(super) const SELECTOR_MAX_BYTES: usize = 4_096;

/// Readable text of the document, of the first element matching `selector`, or of the element
/// of an Observation ref (`target`; the tool gives one or the other, never both).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    pub selector: Option<String>,
    pub target: Option<RefTarget>,
    pub max_chars: u32,
    /// Where a form control's value starts being returned (UTF-16 units, as `valueLength`).
    pub offset: u32,
}

impl Default for Read {
    fn default() -> Read {
        Read {
            selector: None,
            target: None,
            max_chars: READ_DEFAULT_MAX_CHARS,
            offset: 0,
        }
    }
}

/// What `read.js` returned: visible text with block-level line breaks,
/// `truncated` when it stopped at `maxChars`; `charCount` counts the UTF-16
/// units of `text`, as the page measures. For a form control, `text` is its value from
/// `offset` and `valueLength` its whole length; a sensitive field has no text, only
/// `valueLength` and `sensitive`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadText {
    pub text: String,
    pub truncated: bool,
    pub char_count: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_length: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sensitive: bool,
}

/// Checks a selector before it goes to the page (the page reports syntax).
pub(super) fn validate_selector(selector: &str) -> Result<(), PageError> {
    if selector.trim().is_empty() || selector.len() > SELECTOR_MAX_BYTES {
        return Err(PageError::InvalidOption {
            name: "selector",
            detail: format!("must be non-empty and at most {SELECTOR_MAX_BYTES} bytes"),
        });
    }
    Ok(())
}

impl PageScript for Read {
    type Output = ReadText;

    fn call(&self) -> Result<ScriptCall, PageError> {
        if self.max_chars == 0 || self.max_chars > READ_MAX_MAX_CHARS {
            return Err(PageError::InvalidOption {
                name: "maxChars",
                detail: format!("must be 1..={READ_MAX_MAX_CHARS}"),
            });
        }
        if let Some(selector) = &self.selector {
            validate_selector(selector)?;
        }
        let mut argument = json!({
            "selector": self.selector,
            "maxChars": self.max_chars,
            "offset": self.offset,
        });
        if let Some(target) = &self.target {
            argument["target"] = target.argument()?;
        }
        Ok(ScriptCall {
            script: Script::Read,
            argument,
        })
    }

    fn parse(&self, json: &str) -> Result<ReadText, PageError> {
        let mut text: ReadText = decode(Script::Read, json)?;
        // Whatever the page said, a sensitive field's value never leaves the Broker.
        if text.sensitive {
            text.text.clear();
            text.char_count = 0;
            text.truncated = false;
        }
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_checked() {
        assert!(Read::default().call().is_ok());
        let zero = Read {
            max_chars: 0,
            ..Read::default()
        };
        assert!(zero.call().is_err());
        let blank = Read {
            selector: Some("  ".to_owned()),
            ..Read::default()
        };
        assert!(blank.call().is_err());
        let call = Read {
            selector: Some("main".to_owned()),
            target: None,
            max_chars: 5,
            offset: 7,
        }
        .call()
        .unwrap();
        assert_eq!(
            call.argument,
            json!({"selector": "main", "maxChars": 5, "offset": 7})
        );
        let secret = r#"{"text":"hunter2","truncated":false,"charCount":7,"valueLength":7,"sensitive":true}"#;
        let parsed = Read::default().parse(secret).unwrap();
        assert_eq!(parsed.text, "");
        assert_eq!(parsed.value_length, Some(7));
    }
}
