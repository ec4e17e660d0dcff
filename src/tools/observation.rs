//! The agent-facing shape of one fresh Observation: the shaping options every tool that returns
//! an Observation accepts beside the page options (`sinceObservationId`, `format`, `maxTokens`),
//! and the result fields built from the page's observation, its hints and the diff base:
//! `elements` or the `compact` text, the `diff` summary or `diffUnavailable`, the token budget,
//! and what the new record resolves and shows (the base of the next diff). It neither runs page
//! scripts nor writes `session::TabState`: `tools/tab.rs` finds the base, runs the page and
//! records what this returns.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};

use super::error::ToolError;
use super::tab::ElementSummary;
use crate::page::{
    self, Hint, ObservationFormat, ObserveOptions, ObservedElement, PageError, PageObservation,
    TruncationReason,
};

/// What a caller asked of one Observation: the page's options and how the result is shaped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObservationRequest {
    pub options: ObserveOptions,
    /// Return a diff against this earlier Observation of the same document.
    pub since: Option<String>,
    pub format: ObservationFormat,
    /// Bound the result by the token estimate (`page::estimate_tokens`).
    pub max_tokens: Option<u32>,
}

impl ObservationRequest {
    /// Checks the shaping bounds (the page checks its own options).
    pub fn validate(&self) -> Result<(), ToolError> {
        if let Some(max) = self.max_tokens
            && !(page::MIN_MAX_TOKENS..=page::MAX_MAX_TOKENS).contains(&max)
        {
            return Err(ToolError::from(PageError::InvalidOption {
                name: "maxTokens",
                detail: format!(
                    "must be {}..={}",
                    page::MIN_MAX_TOKENS,
                    page::MAX_MAX_TOKENS
                ),
            }));
        }
        if let Some(since) = &self.since
            && (since.is_empty() || since.len() > 128)
        {
            return Err(ToolError::from(PageError::InvalidOption {
                name: "sinceObservationId",
                detail: "must be 1..=128 bytes".to_owned(),
            }));
        }
        Ok(())
    }
}

/// Why a requested diff came back as a full Observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffUnavailable {
    /// No such Observation of this Workspace on this tab any more (evicted, unknown, or the
    /// page no longer holds its refs).
    Expired,
    /// The base was taken in another frame than the one selected now.
    OtherFrame,
    /// The base's document was replaced (navigation, reload, `document.open`).
    OtherDocument,
}

impl DiffUnavailable {
    pub fn as_str(self) -> &'static str {
        match self {
            DiffUnavailable::Expired => "expired",
            DiffUnavailable::OtherFrame => "other_frame",
            DiffUnavailable::OtherDocument => "other_document",
        }
    }
}

/// The recorded Observation a diff is taken against.
pub struct DiffBase<'a> {
    pub id: &'a str,
    pub elements: &'a HashMap<u32, ElementSummary>,
    pub view: &'a [ObservedElement],
}

/// The shaped result fields and what the new record keeps.
pub struct Shaped {
    pub fields: Map<String, Value>,
    /// Every ref the new Observation resolves.
    pub elements: HashMap<u32, ElementSummary>,
    /// The elements as the agent has now been shown them, document order; `None` when that is
    /// every element of the walk (the caller moves them into the record instead of a copy).
    pub view: Option<Vec<ObservedElement>>,
}

/// What an action expects of the element behind a ref.
pub fn summary(element: &ObservedElement) -> ElementSummary {
    ElementSummary {
        role: page::role_word(element.role).to_owned(),
        tag: element.tag.clone(),
        input_type: element.input_type.clone(),
    }
}

/// The full page state as `progress::fingerprint` reads it, whatever shape the agent gets:
/// the no-progress detector compares pages, not diffs or budgets.
pub fn fingerprint_fields(url: &str, observation: &PageObservation) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("url".into(), json!(url));
    fields.insert("candidateCount".into(), json!(observation.candidate_count));
    fields.insert("truncated".into(), json!(observation.truncated));
    fields.insert("page".into(), json!({"scroll": observation.page.scroll}));
    fields.insert(
        "elements".into(),
        serde_json::to_value(&observation.elements).unwrap_or(Value::Null),
    );
    fields
}

/// Bytes the closing fields add beside the measured skeleton (`elements` or `compact` key,
/// `estimatedTokens`, separators).
const SKELETON_SLACK: usize = 64;

/// Builds the agent-facing fields (after the target fields and `observationId`, which
/// `head_bytes` counts) of `observation`, shaped by `request` against `base`.
pub fn shape(
    observation: &PageObservation,
    mut hints: Vec<Hint>,
    base: Option<DiffBase<'_>>,
    unavailable: Option<DiffUnavailable>,
    request: &ObservationRequest,
    head_bytes: usize,
) -> Result<Shaped, ToolError> {
    let elements = &observation.elements;
    let diff = base.as_ref().map(|b| page::diff(b.view, elements));
    let candidates: Vec<usize> = match &diff {
        Some(found) => found.delta(),
        None => (0..elements.len()).collect(),
    };
    let compact = request.format == ObservationFormat::Compact;
    // A full compact Observation has grouping lines; a diff lists only what changed.
    let sectioned = match diff {
        None => observation.sections.as_ref(),
        Some(_) => None,
    };
    let size_of = |index: usize| -> usize {
        if compact {
            let mut line = String::new();
            page::compact_line(&elements[index], &mut line);
            line.len() + 1
        } else {
            serde_json::to_vec(&elements[index]).map_or(0, |v| v.len()) + 1
        }
    };

    let mut fields = Map::new();
    fields.insert("page".into(), serde_json::to_value(observation.page)?);
    fields.insert("hints".into(), serde_json::to_value(&hints)?);
    fields.insert("truncated".into(), json!(observation.truncated));
    fields.insert(
        "truncationReasons".into(),
        serde_json::to_value(&observation.truncation_reasons)?,
    );
    fields.insert("candidateCount".into(), json!(observation.candidate_count));
    if let (Some(found), Some(b)) = (&diff, &base) {
        fields.insert("diff".into(), diff_summary(b.id, found, elements, None));
    }
    if let Some(reason) = unavailable {
        fields.insert("diffUnavailable".into(), json!(reason.as_str()));
    }

    // The token budget: what is left after everything but the elements.
    let (kept, tokens_cut, skeleton_bytes) = match request.max_tokens {
        None => (candidates.clone(), false, 0),
        Some(max) => {
            let skeleton = head_bytes + serde_json::to_vec(&fields)?.len() + SKELETON_SLACK;
            let grouping = match (&sectioned, compact) {
                (Some(sections), true) => page::sections_bytes(sections),
                _ => 0,
            };
            let budget = page::budget_bytes(max).saturating_sub(skeleton + grouping);
            let (kept, cut) = page::select_within(elements, &candidates, budget, size_of);
            (kept, cut, skeleton)
        }
    };
    let kept_set: HashSet<usize> = kept.iter().copied().collect();

    // What the new record resolves and shows.
    let (resolvable, view) = match (&diff, &base) {
        (Some(_), Some(b)) => {
            let delta: HashSet<usize> = candidates.iter().copied().collect();
            let before: HashMap<u32, &ObservedElement> =
                b.view.iter().map(|e| (e.element_ref, e)).collect();
            let mut resolvable = b.elements.clone();
            let mut view = Vec::with_capacity(elements.len());
            for (index, element) in elements.iter().enumerate() {
                if !delta.contains(&index) || kept_set.contains(&index) {
                    resolvable.insert(element.element_ref, summary(element));
                    view.push(element.clone());
                } else if let Some(old) = before.get(&element.element_ref) {
                    // A change left out by the budget: the agent still has the old version,
                    // and the next diff reports the change again.
                    view.push((*old).clone());
                }
            }
            (resolvable, Some(view))
        }
        _ => {
            let resolvable = kept
                .iter()
                .map(|i| (elements[*i].element_ref, summary(&elements[*i])))
                .collect();
            let view = tokens_cut.then(|| kept.iter().map(|i| elements[*i].clone()).collect());
            (resolvable, view)
        }
    };

    if tokens_cut {
        for hint in &mut hints {
            hint.refs.retain(|r| resolvable.contains_key(r));
        }
        fields.insert("hints".into(), serde_json::to_value(&hints)?);
        fields.insert("truncated".into(), json!(true));
        let mut reasons = observation.truncation_reasons.clone();
        reasons.push(TruncationReason::Tokens);
        fields.insert("truncationReasons".into(), serde_json::to_value(&reasons)?);
        if let (Some(found), Some(b)) = (&diff, &base) {
            fields.insert(
                "diff".into(),
                diff_summary(b.id, found, elements, Some(&kept_set)),
            );
        }
    }

    let mut element_bytes = 0usize;
    if compact {
        let text = match sectioned {
            Some(sections) => page::compact_text_sectioned(elements, &kept, sections),
            None => page::compact_text(elements, &kept),
        };
        element_bytes += text.len();
        fields.insert("compact".into(), json!(text));
    } else {
        let shown: Vec<&ObservedElement> = kept.iter().map(|i| &elements[*i]).collect();
        let value = serde_json::to_value(&shown)?;
        if request.max_tokens.is_some() {
            element_bytes += serde_json::to_vec(&value)?.len();
        }
        fields.insert("elements".into(), value);
    }
    if request.max_tokens.is_some() {
        fields.insert(
            "estimatedTokens".into(),
            json!(page::estimate_tokens(skeleton_bytes + element_bytes)),
        );
    }
    Ok(Shaped {
        fields,
        elements: resolvable,
        view,
    })
}

/// The `diff` object; with `kept`, only the delta the budget kept is listed as added/changed.
fn diff_summary(
    base_id: &str,
    found: &page::Diff,
    elements: &[ObservedElement],
    kept: Option<&HashSet<usize>>,
) -> Value {
    let shown = |index: &usize| kept.is_none_or(|k| k.contains(index));
    let added: Vec<u32> = found
        .added
        .iter()
        .filter(|i| shown(i))
        .map(|i| elements[*i].element_ref)
        .collect();
    let changed: Vec<Value> = found
        .changed
        .iter()
        .filter(|(i, _)| shown(i))
        .map(|(i, fields)| json!({"ref": elements[*i].element_ref, "fields": fields}))
        .collect();
    json!({
        "baseObservationId": base_id,
        "added": added,
        "changed": changed,
        "removed": found.removed,
        "unchanged": found.unchanged,
        "moved": found.moved,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::progress;

    fn observation() -> PageObservation {
        serde_json::from_value(json!({
            "documentKey": "doc:t",
            "elements": [
                [1, "button", "Go", "button", 0, 0, 10, 10, 1, null],
                [7, "textbox", "Email", "input", 0, 20, 10, 10, 0, {"value": "a@b.c", "inputType": "email"}],
            ],
            "page": {
                "viewport": {"width": 800, "height": 600},
                "document": {"width": 800, "height": 900},
                "scroll": {"x": 0, "y": 40},
                "remaining": {"up": 40, "down": 260, "left": 0, "right": 0},
                "percent": {"x": 0, "y": 13}
            },
            "truncated": false, "truncationReasons": [], "candidateCount": 2,
            "signals": {
                "overlays": [], "comboboxes": [], "filterGroups": [],
                "auth": {"passwordCount": 0, "passwordRefs": [], "formRefs": []},
                "blocked": {"captchaFrames": 0, "phrases": [], "textSampleComplete": true}
            }
        }))
        .unwrap()
    }

    #[test]
    fn a_plain_result_and_the_walk_give_the_same_fingerprint() {
        let observed = observation();
        let request = ObservationRequest::default();
        let shaped = shape(&observed, Vec::new(), None, None, &request, 0).unwrap();
        let mut result = Map::new();
        result.insert("url".into(), json!("http://127.0.0.1/x"));
        result.extend(shaped.fields);
        assert_eq!(
            progress::fingerprint(&result),
            progress::fingerprint(&fingerprint_fields("http://127.0.0.1/x", &observed))
        );
        assert!(shaped.view.is_none(), "the walk's elements are the view");
        assert!(shaped.elements.contains_key(&7));
    }

    #[test]
    fn compact_and_budget_shape_the_same_refs() {
        let observed = observation();
        let compact = ObservationRequest {
            format: ObservationFormat::Compact,
            ..ObservationRequest::default()
        };
        let shaped = shape(&observed, Vec::new(), None, None, &compact, 0).unwrap();
        assert!(shaped.fields.get("elements").is_none());
        let text = shaped.fields["compact"].as_str().unwrap();
        assert_eq!(
            text,
            "1 button \"Go\" @0,0\n7 textbox \"Email\" =\"a@b.c\" type=email @0,20"
        );
        // The fixed fields are always sent; a budget they already exceed gets no elements,
        // and the estimate says so.
        let tight = ObservationRequest {
            max_tokens: Some(page::MIN_MAX_TOKENS),
            ..ObservationRequest::default()
        };
        let shaped = shape(&observed, Vec::new(), None, None, &tight, 200).unwrap();
        assert_eq!(shaped.fields["elements"], json!([]));
        assert_eq!(shaped.fields["truncated"], json!(true));
        assert_eq!(shaped.fields["truncationReasons"], json!(["tokens"]));
        assert!(shaped.elements.is_empty());
        assert!(
            shaped.fields["estimatedTokens"].as_u64().unwrap() > u64::from(page::MIN_MAX_TOKENS)
        );
        let roomy = ObservationRequest {
            max_tokens: Some(10_000),
            ..ObservationRequest::default()
        };
        let shaped = shape(&observed, Vec::new(), None, None, &roomy, 200).unwrap();
        assert_eq!(shaped.fields["truncated"], json!(false));
        assert_eq!(shaped.fields["elements"].as_array().unwrap().len(), 2);
        let bytes = 200 + serde_json::to_vec(&shaped.fields).unwrap().len();
        assert!(
            shaped.fields["estimatedTokens"].as_u64().unwrap() >= page::estimate_tokens(bytes) - 30
        );
    }

    #[test]
    fn max_tokens_is_bounded() {
        let request = |max| ObservationRequest {
            max_tokens: Some(max),
            ..ObservationRequest::default()
        };
        assert!(request(page::MIN_MAX_TOKENS).validate().is_ok());
        assert!(request(page::MIN_MAX_TOKENS - 1).validate().is_err());
        assert!(request(page::MAX_MAX_TOKENS + 1).validate().is_err());
    }
}
