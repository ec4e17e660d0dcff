//! Page-side logic of the agent's core loop: the JavaScript the Broker runs
//! inside a tab (`js/*.js`, embedded with `include_str!` and evaluated in
//! the Broker's isolated world) and the pure transforms of what it returns
//! into typed Observations, hints, text, search matches, element metadata
//! and action state, and the shaping of an Observation (diff, compact form, token budget).
//! The only I/O is in `run`, a thin async bridge over `cdp::CdpClient` that builds one
//! `Runtime.callFunctionOn` per script, and that also holds `browser.eval`'s one deliberate
//! main-world path (`eval_in_main_world`; its wrappers and bounded serializer are `eval`'s);
//! all other files are pure and never touch CDP, the store, the agent protocol
//! or a socket. No logic lives in this file; it declares the submodules and
//! re-exports their public API. The wire shapes are described in
//! `docs/observation.md`.

mod actions;
mod annotate;
mod document;
mod error;
mod eval;
mod find;
mod hints;
mod interact;
mod observe;
mod quad;
mod read;
mod run;
mod script;
mod search;
mod shape;
mod upload;

pub use actions::{
    ActiveElement, ActiveElementKey, ActiveElementState, ActiveState, ArmClick, ArmKeys, Armed,
    ClickEvent, ClickPoint, ClickProbe, ClickRecord, ClickSettle, ClickTarget, ClickVerdict,
    Delivery, ElementState, FRAME_POINT_HIT, FocusAndSelectAll, FocusOutcome, FrameHit, KeyRecord,
    KeysArmed, KeysRecorded, ListOptions, ListedOption, NATIVE_VALUE_TYPES, OPTIONS_DEFAULT_LIMIT,
    OPTIONS_MAX_LIMIT, OptionList, OptionsKind, PrepareTyping, ProbeScroll, RefTarget,
    SNAPSHOT_VALUE_MAX_CHARS, SelectOptions, SelectedOption, SelectionOutcome, SetNativeValue,
    Settled, StateSnapshot, TypingPrepared, ValueOutcome, document_start_script,
};
pub use annotate::{
    ANNOTATION_MAX_REFS, AnnotationBoxes, Annotations, CssBox, ImageBox, SkipReason, Skipped,
    image_boxes,
};
pub use document::{
    ContainerScroll, DocumentInfo, ScrollContainer, ScrollPage, ScrollPosition, ScrollToText,
    ScrollXY, UrlAndTitle, Viewport, ViewportSize,
};
pub use error::{PageError, ScriptErrorCode};
pub use eval::{
    EVAL_DEFAULT_MAX_CHARS, EVAL_DEFAULT_MAX_DEPTH, EVAL_MAX_MAX_CHARS, EVAL_MAX_MAX_DEPTH,
    EVAL_MIN_MAX_CHARS, EvalOutcome, EvalRequest, EvalSource, EvalTruncation, EvalType, EvalValue,
    MAX_EXCEPTION_CHARS,
};
pub use find::{FIND_DEFAULT_LIMIT, FIND_MAX_LIMIT, Find, FindResult, FoundElement};
pub use hints::{
    AuthState, Confidence, DownloadPhase, EventHint, Hint, HintCode, HintContext, HintSource,
    MAX_HINTS, MAX_REFS_PER_HINT, RecommendedAction, auth_transition, has_auth_surface,
    observation_hints,
};
pub use interact::{
    Described, DragArm, DragRecord, DragVerdict, DropSeen, HoverMark, HoverReport, Hovered,
    WaitProbe, WaitSeen,
};
pub use observe::{
    AuthSignal, BlockedSignal, Bounds, Checked, ComboboxSignal, DOCUMENT_REFS, FilterGroupSignal,
    KEPT_OBSERVATIONS, OBSERVE_DEFAULT_LIMIT, OBSERVE_DEFAULT_MAX_BYTES, OBSERVE_HARD_MAX_LIMIT,
    OBSERVE_MAX_LIMIT, OBSERVE_MAX_MAX_BYTES, OBSERVE_MIN_MAX_BYTES, ObservationWire, Observe,
    ObserveOptions, ObservedElement, Offset, OverlayKind, OverlaySignal, PageMetrics,
    PageObservation, Remaining, Role, Sections, Signals, Size, TruncationReason,
};
pub use quad::{Point, Quad, QuadMap};
pub use read::{READ_DEFAULT_MAX_CHARS, READ_MAX_MAX_CHARS, Read, ReadText};
pub use run::{
    ExecutionContextId, REF_OBJECT_GROUP, RemoteObjectId, WORLD_NAME, create_isolated_world,
    draw_annotations, eval_in_main_world, file_input_index, frame_point_hit, install_library,
    main_frame_id, picked_file_input, resolve_object, run, run_observe,
};
pub use script::{INSTALL_MARKER, PageScript, Script, ScriptCall, library_installer};
pub use search::{SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT, Search, SearchResult, TextMatch};
pub use shape::{
    Diff, MAX_MAX_TOKENS, MIN_MAX_TOKENS, ObservationFormat, TENTHS_OF_BYTES_PER_TOKEN,
    budget_bytes, compact_line, compact_text, compact_text_sectioned, cut_to_json_bytes, diff,
    estimate_tokens, json_escaped_len, role_word, sections_bytes, select_by_tier, select_within,
};
pub use upload::{
    ChunkReceived, DownloadChunk, DownloadOpen, DownloadPiece, FileInputChoice, FilesSet,
    InputState, OpenedDownload, PickFileInput, PickedInput, Readback, UploadChunk, UploadReadback,
    UploadSetFiles,
};
