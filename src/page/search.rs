//! `browser.search` on the page side: options with their bounds, the call
//! of `js/search.js`, and its typed matches. No I/O.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::error::PageError;
use super::observe::Bounds;
use super::script::{PageScript, Script, ScriptCall, decode};

/// Matches returned when the caller gives no `limit`.
pub const SEARCH_DEFAULT_LIMIT: u32 = 50;

/// The contract's bound: at most 200 results.
pub const SEARCH_MAX_LIMIT: u32 = 200;

/// Characters of context on each side of a match (the contract's "nearby
/// context").
const CONTEXT_CHARS: u32 = 80;

/// Characters of the matched text itself (a regex can match a lot).
const MATCH_MAX_CHARS: u32 = 200;

/// Matches counted for `total` at most, so a one-letter query on a huge
/// page stays cheap; `totalCapped` says when it stopped.
const COUNT_MAX: u32 = 10_000;

/// Bytes of a query.
const QUERY_MAX_BYTES: usize = 1_000;

/// Case-insensitive search of the visible text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Search {
    pub query: String,
    /// Treat `query` as a JavaScript regular expression.
    pub regex: bool,
    pub limit: u32,
}

/// One visible match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextMatch {
    pub text: String,
    pub context: String,
    pub bounds: Bounds,
    pub in_viewport: bool,
}

/// What `search.js` returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchResult {
    pub matches: Vec<TextMatch>,
    pub total: u64,
    pub truncated: bool,
    pub total_capped: bool,
}

impl PageScript for Search {
    type Output = SearchResult;

    fn call(&self) -> Result<ScriptCall, PageError> {
        if self.query.trim().is_empty() || self.query.len() > QUERY_MAX_BYTES {
            return Err(PageError::InvalidOption {
                name: "query",
                detail: format!("must be non-empty and at most {QUERY_MAX_BYTES} bytes"),
            });
        }
        if self.limit == 0 || self.limit > SEARCH_MAX_LIMIT {
            return Err(PageError::InvalidOption {
                name: "limit",
                detail: format!("must be 1..={SEARCH_MAX_LIMIT}"),
            });
        }
        Ok(ScriptCall {
            script: Script::Search,
            argument: json!({
                "query": self.query,
                "regex": self.regex,
                "limit": self.limit,
                "contextChars": CONTEXT_CHARS,
                "matchMax": MATCH_MAX_CHARS,
                "countMax": COUNT_MAX,
            }),
        })
    }

    fn parse(&self, json: &str) -> Result<SearchResult, PageError> {
        let result: SearchResult = decode(Script::Search, json)?;
        if result.matches.len() > self.limit as usize {
            return Err(PageError::UnexpectedShape {
                script: Script::Search.entry(),
                detail: format!("{} matches for limit {}", result.matches.len(), self.limit),
            });
        }
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(query: &str, limit: u32) -> Search {
        Search {
            query: query.to_owned(),
            regex: false,
            limit,
        }
    }

    #[test]
    fn bounds_are_checked() {
        assert!(search("x", SEARCH_MAX_LIMIT).call().is_ok());
        assert!(search("x", SEARCH_MAX_LIMIT + 1).call().is_err());
        assert!(search("x", 0).call().is_err());
        assert!(search(" ", 5).call().is_err());
        let call = search("add to cart", 3).call().unwrap();
        assert_eq!(call.argument["contextChars"], json!(80));
        assert_eq!(call.argument["regex"], json!(false));
    }

    #[test]
    fn more_matches_than_asked_is_a_shape_error() {
        let one = json!({"text": "a", "context": "a", "inViewport": true,
            "bounds": {"x": 0, "y": 0, "width": 1, "height": 1}});
        let value = json!({"matches": [one.clone(), one], "total": 2, "truncated": false, "totalCapped": false});
        assert!(search("a", 1).parse(&value.to_string()).is_err());
        assert_eq!(search("a", 2).parse(&value.to_string()).unwrap().total, 2);
    }
}
