//! How far a tab's main-frame document has loaded, learnt only from CDP events of the tab's
//! session (`Page.lifecycleEvent`, `Page.frameStartedNavigating`, `Page.navigatedWithinDocument`,
//! `Page.frameStoppedLoading`, `Page.frameNavigated`), never from script in the page: a page can replace
//! `JSON.stringify`, `document.readyState` or `location` in its own world, but not what the
//! browser reports about its loader.
//!
//! Plain data fed by the event pump and read by load waits (`TabGuard::wait_for_load`); no I/O.
//! It must not decide what a tool answers: it only says which document is current and how far
//! it got.

/// How far one document got, in the order a load goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LoadPhase {
    /// Committed, `DOMContentLoaded` not yet fired (`document.readyState` `loading`).
    Loading,
    /// `DOMContentLoaded` fired (`interactive`).
    Interactive,
    /// `load` fired (`complete`).
    Complete,
}

impl LoadPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            LoadPhase::Loading => "loading",
            LoadPhase::Interactive => "interactive",
            LoadPhase::Complete => "complete",
        }
    }
}

/// What a load wait waits for, fixed before the navigation is dispatched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Awaited {
    /// The document of this loader (`Page.navigate` answered it).
    Loader(String),
    /// A new document committed after this mark (reload).
    NewDocument(LoadMark),
    /// Any main-frame navigation after this mark, new document or same-document (history
    /// navigation, or a `Page.navigate` that stayed in the document).
    AnyNavigation(LoadMark),
}

/// A point in a tab's load history, taken before dispatching a navigation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadMark {
    epoch: u64,
    loader: Option<String>,
}

impl LoadMark {
    /// Whether the mark names a document (the session reported one).
    pub fn has_document(&self) -> bool {
        self.loader.is_some()
    }

    /// Whether both marks name the same main-frame document (loader): a same-document
    /// navigation keeps it, a committed new document does not.
    pub fn same_loader(&self, other: &LoadMark) -> bool {
        self.loader == other.loader
    }
}

/// The main frame's current document and its phase, plus a counter of navigations.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LoadBook {
    /// The current document's loader id (`None` before the session reported one).
    loader: Option<String>,
    phase: Option<LoadPhase>,
    /// Bumped on every main-frame commit of a new document and every same-document navigation.
    epoch: u64,
    /// A cross-document navigation that started and has not committed (or stopped) yet.
    pending: Option<String>,
    /// The loaders of the last documents a newer one replaced, newest last (at most
    /// [`REPLACED_KEPT`]): a wait for one of them follows the page to its current document.
    replaced: Vec<String>,
}

/// How many replaced documents a [`LoadBook`] remembers.
const REPLACED_KEPT: usize = 4;

impl LoadBook {
    /// `Page.lifecycleEvent` of the main frame. `init` starts a new document; `commit` is what
    /// Chromium replays for the current document when lifecycle events are enabled, so it
    /// identifies the document without counting as a navigation.
    pub fn on_lifecycle(&mut self, loader: &str, name: &str) {
        let phase = match name {
            "init" | "commit" => LoadPhase::Loading,
            "DOMContentLoaded" => LoadPhase::Interactive,
            "load" => LoadPhase::Complete,
            _ => return,
        };
        let same_document = self.loader.as_deref() == Some(loader);
        if name == "init" && !same_document {
            self.epoch += 1;
        }
        if self.pending.as_deref() == Some(loader) {
            self.pending = None;
        }
        match same_document {
            true => self.phase = self.phase.max(Some(phase)),
            false => {
                self.replace_document(loader);
                self.phase = Some(phase);
            }
        }
    }

    /// A new document with `loader` became the current one.
    fn replace_document(&mut self, loader: &str) {
        if let Some(old) = self.loader.replace(loader.to_owned()) {
            if self.replaced.len() == REPLACED_KEPT {
                self.replaced.remove(0);
            }
            self.replaced.push(old);
        }
    }

    /// `Page.frameStartedNavigating` of the main frame: a cross-document navigation is under
    /// way until its loader commits or loading stops.
    pub fn on_started_navigating(&mut self, loader: Option<&str>, same_document: bool) {
        if let (Some(loader), false) = (loader, same_document)
            && self.loader.as_deref() != Some(loader)
        {
            self.pending = Some(loader.to_owned());
        }
    }

    /// `Page.frameNavigated` of the main frame. A new document normally announced itself with
    /// `init` already; one restored from the back/forward cache commits without any lifecycle
    /// event and comes back as it was when stored: loaded.
    pub fn on_navigated(&mut self, loader: &str, restored: bool) {
        if restored || self.pending.as_deref() == Some(loader) {
            self.pending = None;
        }
        if self.loader.as_deref() == Some(loader) {
            return;
        }
        self.epoch += 1;
        self.replace_document(loader);
        self.phase = Some(match restored {
            true => LoadPhase::Complete,
            false => LoadPhase::Loading,
        });
    }

    /// `Page.navigatedWithinDocument` of the main frame (fragment, History API).
    pub fn on_within_document(&mut self) {
        self.epoch += 1;
    }

    /// `Page.frameStoppedLoading` of the main frame: a navigation that never committed
    /// (a download, a 204, a cancelled load) is no longer under way.
    pub fn on_stopped_loading(&mut self) {
        self.pending = None;
    }

    pub fn mark(&self) -> LoadMark {
        LoadMark {
            epoch: self.epoch,
            loader: self.loader.clone(),
        }
    }

    /// Whether the main frame navigated after `mark` (a new document or a same-document
    /// navigation) or has a cross-document navigation under way now.
    pub fn moved_since(&self, mark: &LoadMark) -> bool {
        self.epoch > mark.epoch || self.pending.is_some()
    }

    /// The phase of the awaited document, once it is the current one. A document the page
    /// already replaced by a newer one (a script redirect, a reload loop) will load no further:
    /// the wait follows the page to its current document.
    pub fn phase_of(&self, awaited: &Awaited) -> Option<LoadPhase> {
        let reached = match awaited {
            Awaited::Loader(loader) => {
                self.loader.as_deref() == Some(loader.as_str()) || self.replaced.contains(loader)
            }
            Awaited::NewDocument(mark) => self.epoch > mark.epoch && self.loader != mark.loader,
            Awaited::AnyNavigation(mark) => self.epoch > mark.epoch,
        };
        match reached {
            true => self.phase,
            false => None,
        }
    }

    /// The current document's phase, unless a cross-document navigation is still under way.
    pub fn settled_phase(&self) -> Option<LoadPhase> {
        match self.pending {
            Some(_) => None,
            None => self.phase,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_for_a_replaced_document_follows_the_page_to_its_current_one() {
        let mut book = LoadBook::default();
        let awaited = Awaited::Loader("L1".into());
        assert_eq!(book.phase_of(&awaited), None, "not committed yet");
        book.on_lifecycle("L1", "init");
        book.on_lifecycle("L1", "DOMContentLoaded");
        // The page reloads itself before its load event: L1 never completes.
        book.on_lifecycle("L2", "init");
        assert_eq!(book.phase_of(&awaited), Some(LoadPhase::Loading));
        book.on_lifecycle("L2", "load");
        assert_eq!(book.phase_of(&awaited), Some(LoadPhase::Complete));
        // A loader never seen is still not reached, and only the last few replaced are kept.
        assert_eq!(book.phase_of(&Awaited::Loader("L9".into())), None);
        for n in 3..=(3 + REPLACED_KEPT) {
            book.on_navigated(&format!("L{n}"), false);
        }
        assert_eq!(book.phase_of(&awaited), None);
    }

    #[test]
    fn replay_identifies_the_document_without_counting_a_navigation() {
        let mut book = LoadBook::default();
        let before = book.mark();
        book.on_lifecycle("L1", "commit");
        book.on_lifecycle("L1", "DOMContentLoaded");
        book.on_lifecycle("L1", "load");
        assert_eq!(
            book.phase_of(&Awaited::Loader("L1".into())),
            Some(LoadPhase::Complete)
        );
        assert_eq!(book.phase_of(&Awaited::AnyNavigation(before.clone())), None);
        assert_eq!(book.phase_of(&Awaited::NewDocument(before)), None);
        assert_eq!(book.settled_phase(), Some(LoadPhase::Complete));
    }

    /// What the settle window and the late watch of an action wait for: a navigation started,
    /// committed or made within the document after the mark; the replayed `commit` of the
    /// current document and its own later lifecycle events are none.
    #[test]
    fn moved_since_sees_navigations_after_the_mark_only() {
        let mut book = LoadBook::default();
        book.on_lifecycle("L1", "commit");
        let mark = book.mark();
        book.on_lifecycle("L1", "load");
        book.on_lifecycle("L1", "commit");
        assert!(!book.moved_since(&mark));
        book.on_started_navigating(Some("L2"), false);
        assert!(book.moved_since(&mark), "a navigation under way");
        book.on_stopped_loading();
        assert!(
            !book.moved_since(&mark),
            "a 204 or a download never committed"
        );
        book.on_within_document();
        assert!(book.moved_since(&mark), "a same-document navigation");
        let mark = book.mark();
        book.on_navigated("L3", false);
        assert!(book.moved_since(&mark), "a commit without a started event");
    }

    #[test]
    fn a_navigation_is_followed_through_its_phases() {
        let mut book = LoadBook::default();
        book.on_lifecycle("L1", "commit");
        book.on_lifecycle("L1", "load");
        let mark = book.mark();
        let reload = Awaited::NewDocument(mark.clone());
        book.on_started_navigating(Some("L2"), false);
        assert_eq!(book.settled_phase(), None, "a navigation is under way");
        assert_eq!(book.phase_of(&reload), None);
        // The old document's late events do not complete the new one.
        book.on_lifecycle("L1", "networkIdle");
        assert_eq!(book.phase_of(&reload), None);
        book.on_lifecycle("L2", "init");
        assert_eq!(book.phase_of(&reload), Some(LoadPhase::Loading));
        book.on_lifecycle("L2", "DOMContentLoaded");
        assert_eq!(book.phase_of(&reload), Some(LoadPhase::Interactive));
        book.on_lifecycle("L2", "load");
        assert_eq!(book.phase_of(&reload), Some(LoadPhase::Complete));
        assert_eq!(
            book.phase_of(&Awaited::AnyNavigation(mark)),
            Some(LoadPhase::Complete)
        );
        assert_eq!(book.settled_phase(), Some(LoadPhase::Complete));
    }

    #[test]
    fn a_back_forward_cache_restore_is_a_loaded_new_document() {
        let mut book = LoadBook::default();
        book.on_lifecycle("L2", "commit");
        book.on_lifecycle("L2", "load");
        let mark = book.mark();
        book.on_started_navigating(Some("L3"), false);
        book.on_stopped_loading();
        // Chromium 156: the restored document keeps its old loader and fires no lifecycle.
        book.on_navigated("L1", true);
        assert_eq!(
            book.phase_of(&Awaited::AnyNavigation(mark)),
            Some(LoadPhase::Complete)
        );
        assert_eq!(book.settled_phase(), Some(LoadPhase::Complete));
        // The ordinary order (init, then frameNavigated of the same loader) changes nothing.
        book.on_lifecycle("L4", "init");
        let epoch = book.mark();
        book.on_navigated("L4", false);
        assert_eq!(book.mark(), epoch);
        assert_eq!(book.settled_phase(), Some(LoadPhase::Loading));
    }

    #[test]
    fn same_document_navigation_and_aborted_loads() {
        let mut book = LoadBook::default();
        book.on_lifecycle("L1", "commit");
        book.on_lifecycle("L1", "load");
        let mark = book.mark();
        book.on_within_document();
        assert_eq!(
            book.phase_of(&Awaited::AnyNavigation(mark.clone())),
            Some(LoadPhase::Complete)
        );
        assert_eq!(book.phase_of(&Awaited::NewDocument(mark)), None);
        // A download: the navigation starts, never commits, loading stops.
        book.on_started_navigating(Some("L9"), false);
        assert_eq!(book.settled_phase(), None);
        book.on_stopped_loading();
        assert_eq!(book.settled_phase(), Some(LoadPhase::Complete));
        // Same-document starts are not pending navigations.
        book.on_started_navigating(Some("L8"), true);
        assert_eq!(book.settled_phase(), Some(LoadPhase::Complete));
    }
}
