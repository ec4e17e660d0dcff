//! The page module's error type: invalid options caught before anything runs,
//! a script that threw or answered with an unexpected shape, a structured
//! refusal the script itself returned (`{error: {code, message}}`), and CDP
//! transport failures. Mapping these to agent-visible codes is the caller's
//! job (the one error table at the edge); this file maps nothing.

use crate::cdp::CdpError;

/// Declares [`ScriptErrorCode`] from its table: one row per code, with the snake_case word the
/// scripts spell it as.
macro_rules! script_error_codes {
    ($($(#[doc = $doc:literal])* $variant:ident $name:literal;)*) => {
        /// A structured refusal from a page script. Every code a script in `js/`
        /// can return is listed here; an unknown one is an `UnexpectedShape`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum ScriptErrorCode {
            $($(#[doc = $doc])* $variant,)*
        }

        impl ScriptErrorCode {
            /// The snake_case code as the scripts spell it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ScriptErrorCode::$variant => $name,)*
                }
            }

            /// Parses a script's code; `None` for a code this crate does not know.
            pub fn parse(code: &str) -> Option<ScriptErrorCode> {
                match code {
                    $($name => Some(ScriptErrorCode::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

script_error_codes! {
    /// No observation with that key in this world: evicted (only the last
    /// few are kept) or the document, and with it the world, was replaced.
    ObservationUnknown "observation_unknown";
    /// The ref was never handed out in this document (or dropped beyond its bound).
    RefUnknown "ref_unknown";
    /// The element of the ref was removed or belongs to another document.
    RefStale "ref_stale";
    /// The Observation's document (the Broker's key for it, or its kept map's) is not the
    /// world's document any more: a navigation, reload or `document.open` since.
    DocumentReplaced "document_replaced";
    /// The element is not rendered, hidden, or has an empty box.
    NotVisible "not_visible";
    InvalidSelector "invalid_selector";
    InvalidRegex "invalid_regex";
    /// The selector of `read` matched nothing.
    NoMatch "no_match";
    /// The helper does not apply to this kind of element.
    UnsupportedElement "unsupported_element";
    /// The control is disabled or read-only.
    NotEditable "not_editable";
    InvalidArgument "invalid_argument";
    OptionNotFound "option_not_found";
    OptionDisabled "option_disabled";
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
