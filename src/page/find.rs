//! `browser.elements.find` on the page side: options with their bounds, the
//! call of `js/find.js`, and its typed, bounded element metadata. Results
//! carry no handles and are not refs. No I/O.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::error::PageError;
use super::observe::{Bounds, Role};
use super::read::validate_selector;
use super::script::{PageScript, Script, ScriptCall, decode};

/// Elements returned when the caller gives no `limit`.
pub const FIND_DEFAULT_LIMIT: u32 = 50;

/// Largest accepted `limit`: metadata is ~300 bytes an element.
pub const FIND_MAX_LIMIT: u32 = 1_000;

/// Characters of an element's name and text.
const TEXT_MAX_CHARS: u32 = 200;

/// `querySelectorAll` over the document (and open shadow roots with
/// `pierce`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Find {
    pub selector: String,
    pub pierce: bool,
    pub limit: u32,
}

/// Safe metadata of one matching element. `attributes` holds only `type`,
/// `name`, `href`, `placeholder` and `aria-*`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FoundElement {
    pub tag: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub classes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub text: String,
    pub visible: bool,
    pub bounds: Bounds,
    pub in_shadow_root: bool,
    pub attributes: BTreeMap<String, String>,
}

/// What `find.js` returned; `total` counts every match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FindResult {
    pub elements: Vec<FoundElement>,
    pub total: u64,
    pub truncated: bool,
}

impl PageScript for Find {
    type Output = FindResult;

    fn call(&self) -> Result<ScriptCall, PageError> {
        validate_selector(&self.selector)?;
        if self.limit == 0 || self.limit > FIND_MAX_LIMIT {
            return Err(PageError::InvalidOption {
                name: "limit",
                detail: format!("must be 1..={FIND_MAX_LIMIT}"),
            });
        }
        Ok(ScriptCall {
            script: Script::Find,
            argument: json!({
                "selector": self.selector,
                "pierce": self.pierce,
                "limit": self.limit,
                "textMax": TEXT_MAX_CHARS,
            }),
        })
    }

    fn parse(&self, json: &str) -> Result<FindResult, PageError> {
        let result: FindResult = decode(Script::Find, json)?;
        let unsafe_attribute = result
            .elements
            .iter()
            .flat_map(|e| e.attributes.keys())
            .find(|name| {
                !matches!(name.as_str(), "type" | "name" | "href" | "placeholder")
                    && !name.starts_with("aria-")
            });
        match unsafe_attribute {
            Some(name) => Err(PageError::UnexpectedShape {
                script: Script::Find.entry(),
                detail: format!("attribute {name} is not on the safe list"),
            }),
            None => Ok(result),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    fn find(selector: &str) -> Find {
        Find {
            selector: selector.to_owned(),
            pierce: true,
            limit: FIND_DEFAULT_LIMIT,
        }
    }

    #[test]
    fn bounds_are_checked() {
        assert!(find("button").call().is_ok());
        assert!(find("").call().is_err());
        let too_many = Find {
            limit: FIND_MAX_LIMIT + 1,
            ..find("a")
        };
        assert!(too_many.call().is_err());
    }

    #[test]
    fn only_safe_attributes_pass() {
        let element = |attributes: Value| {
            json!({"elements": [{"tag": "input", "classes": [], "text": "", "visible": true,
                "bounds": {"x": 0, "y": 0, "width": 1, "height": 1}, "inShadowRoot": false,
                "attributes": attributes}], "total": 1, "truncated": false})
        };
        assert!(
            find("input")
                .parse(&element(json!({"type": "text", "aria-label": "Q"})).to_string())
                .is_ok()
        );
        assert!(
            find("input")
                .parse(&element(json!({"value": "secret"})).to_string())
                .is_err()
        );
    }
}
