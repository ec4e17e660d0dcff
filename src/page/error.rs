//! The page module's error type: invalid options caught before anything runs,
//! a script that threw or answered with an unexpected shape, a structured
//! refusal the script itself returned (`{error: {code, message}}`), and CDP
//! transport failures. Mapping these to agent-visible codes is the caller's
//! job (the one error table at the edge); this file maps nothing.

use crate::cdp::CdpError;

/// A structured refusal from a page script. Every code a script in `js/`
/// can return is listed here; an unknown one is an `UnexpectedShape`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptErrorCode {
    /// No observation with that key in this world: evicted (only the last
    /// few are kept) or the document, and with it the world, was replaced.
    ObservationUnknown,
    /// The ref is outside the observation's range.
    RefUnknown,
    /// The element of the ref was removed or belongs to another document.
    RefStale,
    /// The element is not rendered, hidden, or has an empty box.
    NotVisible,
    InvalidSelector,
    InvalidRegex,
    /// The selector of `read` matched nothing.
    NoMatch,
    /// The helper does not apply to this kind of element.
    UnsupportedElement,
    /// The control is disabled or read-only.
    NotEditable,
    InvalidArgument,
    OptionNotFound,
    OptionDisabled,
}

impl ScriptErrorCode {
    /// The snake_case code as the scripts spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            ScriptErrorCode::ObservationUnknown => "observation_unknown",
            ScriptErrorCode::RefUnknown => "ref_unknown",
            ScriptErrorCode::RefStale => "ref_stale",
            ScriptErrorCode::NotVisible => "not_visible",
            ScriptErrorCode::InvalidSelector => "invalid_selector",
            ScriptErrorCode::InvalidRegex => "invalid_regex",
            ScriptErrorCode::NoMatch => "no_match",
            ScriptErrorCode::UnsupportedElement => "unsupported_element",
            ScriptErrorCode::NotEditable => "not_editable",
            ScriptErrorCode::InvalidArgument => "invalid_argument",
            ScriptErrorCode::OptionNotFound => "option_not_found",
            ScriptErrorCode::OptionDisabled => "option_disabled",
        }
    }

    /// Parses a script's code; `None` for a code this crate does not know.
    pub fn parse(code: &str) -> Option<ScriptErrorCode> {
        const ALL: [ScriptErrorCode; 12] = [
            ScriptErrorCode::ObservationUnknown,
            ScriptErrorCode::RefUnknown,
            ScriptErrorCode::RefStale,
            ScriptErrorCode::NotVisible,
            ScriptErrorCode::InvalidSelector,
            ScriptErrorCode::InvalidRegex,
            ScriptErrorCode::NoMatch,
            ScriptErrorCode::UnsupportedElement,
            ScriptErrorCode::NotEditable,
            ScriptErrorCode::InvalidArgument,
            ScriptErrorCode::OptionNotFound,
            ScriptErrorCode::OptionDisabled,
        ];
        ALL.into_iter().find(|known| known.as_str() == code)
    }
}

/// Errors of building, running or decoding a page script.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PageError {
    #[error("invalid {name}: {detail}")]
    InvalidOption { name: &'static str, detail: String },
    #[error("page script {script} threw: {text}")]
    ScriptThrew { script: &'static str, text: String },
    #[error("page script {script} returned an unexpected shape: {detail}")]
    UnexpectedShape {
        script: &'static str,
        detail: String,
    },
    #[error("page script {script} refused ({}): {message}", code.as_str())]
    Refused {
        script: &'static str,
        code: ScriptErrorCode,
        message: String,
    },
    #[error(transparent)]
    Cdp(#[from] CdpError),
}

impl PageError {
    /// Whether the call named an execution context that no longer exists (its document went
    /// away): the script never ran.
    pub fn context_gone(&self) -> bool {
        matches!(self, PageError::Cdp(CdpError::Remote { message, .. })
            if message.contains("Cannot find context with specified id"))
    }

    /// The script's refusal code, if this is a refusal.
    pub fn refusal(&self) -> Option<ScriptErrorCode> {
        match self {
            PageError::Refused { code, .. } => Some(*code),
            _ => None,
        }
    }
}
