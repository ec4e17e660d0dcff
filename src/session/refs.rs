//! The refs a tab has handed out, so a ref lives as long as its document: which Observation ids
//! were issued to which Workspace, in which frame and document, and per Workspace and frame the
//! element summaries of every ref the current document's Observations handed out. A ref of any
//! Observation of that document resolves through it, however many Observations came since; the
//! summaries go with the document (a later Observation of the frame saw another one), never
//! with the kept Observation records. Plain bookkeeping, touched only by the tab's turn holder.

use std::collections::{HashMap, VecDeque};

use super::tab::ElementSummary;
use crate::page::DOCUMENT_REFS;
use crate::store::WorkspaceId;

/// How many Observation ids a tab remembers (oldest forgotten first): an id older than that
/// answers as never issued.
pub const ISSUED_OBSERVATIONS: usize = 4_096;

/// Where an Observation id was issued.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Issued {
    workspace_id: String,
    frame_id: String,
    document_key: String,
}

/// The refs one Workspace was handed in the current document of one frame.
#[derive(Debug, Default)]
struct DocumentRefs {
    workspace_id: String,
    frame_id: String,
    document_key: String,
    elements: HashMap<u32, ElementSummary>,
}

/// What a ref of an Observation id resolves to on this tab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefLookup {
    /// The element as last observed, and the page's key of its document.
    Found {
        summary: ElementSummary,
        document_key: String,
    },
    /// The id was never issued to this Workspace on this tab (or is older than
    /// [`ISSUED_OBSERVATIONS`], or its frame went away, or the session was lost).
    NotIssued,
    /// The Observation was taken in another frame than the one asked about.
    OtherFrame,
    /// A later Observation of the frame saw another document.
    DocumentReplaced,
    /// The document handed out no such ref (or it was dropped beyond [`DOCUMENT_REFS`]);
    /// `highest` is the highest ref it did hand out.
    NotInDocument { handed_out: usize, highest: u32 },
}

/// The tab's book of issued Observation ids and per-document ref summaries.
#[derive(Debug, Default)]
pub struct RefBook {
    issued: HashMap<String, Issued>,
    order: VecDeque<String>,
    documents: Vec<DocumentRefs>,
}

impl RefBook {
    /// Records a fresh Observation and the refs it hands out (a diff's include its base's). An
    /// Observation of another document than the frame's recorded one replaces that document's
    /// refs.
    pub fn record<'a>(
        &mut self,
        observation_id: &str,
        workspace_id: &WorkspaceId,
        frame_id: &str,
        document_key: &str,
        elements: impl IntoIterator<Item = (&'a u32, &'a ElementSummary)>,
    ) {
        self.issued.insert(
            observation_id.to_owned(),
            Issued {
                workspace_id: workspace_id.to_string(),
                frame_id: frame_id.to_owned(),
                document_key: document_key.to_owned(),
            },
        );
        self.order.push_back(observation_id.to_owned());
        while self.order.len() > ISSUED_OBSERVATIONS {
            if let Some(old) = self.order.pop_front() {
                self.issued.remove(&old);
            }
        }
        let position = self
            .documents
            .iter()
            .position(|d| d.workspace_id == workspace_id && d.frame_id == frame_id);
        let document = match position {
            Some(at) => &mut self.documents[at],
            None => {
                self.documents.push(DocumentRefs {
                    workspace_id: workspace_id.to_string(),
                    frame_id: frame_id.to_owned(),
                    ..DocumentRefs::default()
                });
                self.documents.last_mut().expect("just pushed")
            }
        };
        if document.document_key != document_key {
            document.document_key = document_key.to_owned();
            document.elements = HashMap::new();
        }
        for (element_ref, summary) in elements {
            if document.elements.get(element_ref) != Some(summary) {
                document.elements.insert(*element_ref, summary.clone());
            }
        }
        if document.elements.len() > DOCUMENT_REFS {
            // Refs are handed out in ascending order: the lowest are the oldest.
            let mut refs: Vec<u32> = document.elements.keys().copied().collect();
            refs.sort_unstable();
            let excess = document.elements.len() - DOCUMENT_REFS * 9 / 10;
            for element_ref in &refs[..excess] {
                document.elements.remove(element_ref);
            }
        }
    }

    /// Resolves `element_ref` of Observation `observation_id` for `workspace_id`, whose frame
    /// selection is `frame_id`.
    pub fn resolve(
        &self,
        workspace_id: &WorkspaceId,
        frame_id: &str,
        observation_id: &str,
        element_ref: u64,
    ) -> RefLookup {
        let Some(issued) = self
            .issued
            .get(observation_id)
            .filter(|issued| issued.workspace_id == workspace_id)
        else {
            return RefLookup::NotIssued;
        };
        if issued.frame_id != frame_id {
            return RefLookup::OtherFrame;
        }
        let document = self
            .documents
            .iter()
            .find(|d| d.workspace_id == workspace_id && d.frame_id == frame_id)
            .filter(|d| d.document_key == issued.document_key);
        let Some(document) = document else {
            return RefLookup::DocumentReplaced;
        };
        let summary = u32::try_from(element_ref)
            .ok()
            .and_then(|r| document.elements.get(&r));
        match summary {
            Some(summary) => RefLookup::Found {
                summary: summary.clone(),
                document_key: document.document_key.clone(),
            },
            None => RefLookup::NotInDocument {
                handed_out: document.elements.len(),
                highest: document.elements.keys().max().copied().unwrap_or(0),
            },
        }
    }

    /// Forgets this Workspace's Observations of frames that went away: their ids answer as
    /// never issued.
    pub fn forget_frames(&mut self, workspace_id: &str, gone: &[String]) {
        let of_gone = |w: &str, f: &String| w == workspace_id && gone.contains(f);
        self.issued
            .retain(|_, issued| !of_gone(&issued.workspace_id, &issued.frame_id));
        let issued = &self.issued;
        self.order.retain(|id| issued.contains_key(id));
        self.documents
            .retain(|d| !of_gone(&d.workspace_id, &d.frame_id));
    }

    /// Forgets everything (the session went away: its worlds and their refs with it).
    pub fn clear(&mut self) {
        *self = RefBook::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(role: &str) -> ElementSummary {
        ElementSummary {
            role: role.to_owned(),
            tag: "button".to_owned(),
            input_type: None,
        }
    }

    fn elements(refs: &[(u32, &str)]) -> HashMap<u32, ElementSummary> {
        refs.iter().map(|(r, role)| (*r, summary(role))).collect()
    }

    #[test]
    fn a_ref_of_an_early_observation_resolves_for_its_document() {
        let mut book = RefBook::default();
        book.record(
            "o1",
            &"w".into(),
            "f",
            "doc:a",
            &elements(&[(1, "button"), (2, "link")]),
        );
        for n in 2..20 {
            book.record(
                &format!("o{n}"),
                &"w".into(),
                "f",
                "doc:a",
                &elements(&[(1, "button")]),
            );
        }
        assert_eq!(
            book.resolve(&"w".into(), "f", "o1", 2),
            RefLookup::Found {
                summary: summary("link"),
                document_key: "doc:a".to_owned()
            }
        );
        // A ref of any Observation of the document: o19 never showed ref 2.
        assert!(matches!(
            book.resolve(&"w".into(), "f", "o19", 2),
            RefLookup::Found { .. }
        ));
        assert_eq!(
            book.resolve(&"w".into(), "f", "o1", 7),
            RefLookup::NotInDocument {
                handed_out: 2,
                highest: 2
            }
        );
    }

    #[test]
    fn another_document_workspace_or_frame_is_told_apart() {
        let mut book = RefBook::default();
        book.record("o1", &"w".into(), "f", "doc:a", &elements(&[(1, "button")]));
        book.record("o2", &"w".into(), "f", "doc:b", &elements(&[(1, "link")]));
        assert_eq!(
            book.resolve(&"w".into(), "f", "o1", 1),
            RefLookup::DocumentReplaced
        );
        assert!(
            matches!(book.resolve(&"w".into(), "f", "o2", 1), RefLookup::Found { summary, .. } if summary.role == "link")
        );
        assert_eq!(
            book.resolve(&"other".into(), "f", "o2", 1),
            RefLookup::NotIssued
        );
        assert_eq!(
            book.resolve(&"w".into(), "g", "o2", 1),
            RefLookup::OtherFrame
        );
        assert_eq!(
            book.resolve(&"w".into(), "f", "o9", 1),
            RefLookup::NotIssued
        );
        book.forget_frames("w", &["f".to_owned()]);
        assert_eq!(
            book.resolve(&"w".into(), "f", "o2", 1),
            RefLookup::NotIssued
        );
    }

    #[test]
    fn the_book_is_bounded() {
        let mut book = RefBook::default();
        for n in 0..ISSUED_OBSERVATIONS + 10 {
            book.record(&format!("o{n}"), &"w".into(), "f", "doc:a", &HashMap::new());
        }
        assert_eq!(book.issued.len(), ISSUED_OBSERVATIONS);
        assert_eq!(
            book.resolve(&"w".into(), "f", "o0", 1),
            RefLookup::NotIssued
        );
        let many: HashMap<u32, ElementSummary> = (1..=DOCUMENT_REFS as u32 + 1)
            .map(|r| (r, summary("button")))
            .collect();
        book.record("big", &"w".into(), "f", "doc:a", &many);
        assert!(book.documents[0].elements.len() <= DOCUMENT_REFS);
        assert!(matches!(
            book.resolve(&"w".into(), "f", "big", 1),
            RefLookup::NotInDocument { .. }
        ));
        assert!(matches!(
            book.resolve(&"w".into(), "f", "big", DOCUMENT_REFS as u64 + 1),
            RefLookup::Found { .. }
        ));
    }
}
