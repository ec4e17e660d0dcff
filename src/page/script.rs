//! The embedded page scripts and the one way to call them. The prelude
//! (`js/common.js`) and every script file are wrapped in one *installer*
//! function that publishes a frozen object of entry points on the isolated
//! world's global, under a symbol versioned by a hash of the sources (so a
//! newer Broker never calls an older library left in a long-lived tab).
//! Each `Script` call is then a tiny `Runtime.callFunctionOn` *stub* that
//! calls its entry point, or answers `INSTALL_MARKER` when the world has no
//! library yet (a new document): the caller installs and calls again.
//! Compiling the ~40 KB library once per document instead of once per call
//! saves about a millisecond per call. A `ScriptCall` is a script plus one
//! JSON argument; turning it into CDP params is pure, running it is `run`'s
//! job. This file also holds the shared decoder of script results.

use std::sync::LazyLock;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::actions::NATIVE_VALUE_TYPES;
use super::error::{PageError, ScriptErrorCode};
use super::observe::{DOCUMENT_REFS, KEPT_OBSERVATIONS};

const COMMON_JS: &str = include_str!("js/common.js");
const OBSERVE_JS: &str = include_str!("js/observe.js");
const READ_JS: &str = include_str!("js/read.js");
const SEARCH_JS: &str = include_str!("js/search.js");
const FIND_JS: &str = include_str!("js/find.js");
const ACTIONS_JS: &str = include_str!("js/actions.js");
const DOCUMENT_JS: &str = include_str!("js/document.js");
const INTERACT_JS: &str = include_str!("js/interact.js");
const UPLOAD_JS: &str = include_str!("js/upload.js");
const ANNOTATE_JS: &str = include_str!("js/annotate.js");
/// The click-truth listener installer (one function expression taking `early`).
pub(super) const CLICK_TRUTH_JS: &str = include_str!("js/clicktruth.js");
/// The keystroke guard installer (one function expression taking `early`).
pub(super) const KEY_GUARD_JS: &str = include_str!("js/keyguard.js");

/// How a script's stub hands back the entry's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Returns {
    /// As JSON text (`JSON.stringify` of the value).
    Json,
    /// As JSON text of the value a promise settles to; the call awaits it.
    Promise,
    /// As is: an element, for `Runtime.callFunctionOn` without `returnByValue`.
    Element,
}

/// Declares [`Script`] from its table: one row per entry point, with the entry function's name
/// in its `.js` file, how its value comes back and whether it writes to the page.
macro_rules! scripts {
    ($($variant:ident $entry:literal $returns:ident $writes:literal;)*) => {
        /// Every entry point of the page scripts.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Script {
            $($variant,)*
        }

        impl Script {
            /// Every script, in declaration order (indexes `STUBS`).
            pub const ALL: [Script; [$(Script::$variant),*].len()] = [$(Script::$variant),*];

            /// The entry function's name in its `.js` file.
            pub fn entry(self) -> &'static str {
                match self {
                    $(Script::$variant => $entry,)*
                }
            }

            fn returns(self) -> Returns {
                match self {
                    $(Script::$variant => Returns::$returns,)*
                }
            }

            /// Whether the script writes to the page (sets a value, selects options), which
            /// makes its call a browser mutation of the Command running it.
            pub fn writes_page(self) -> bool {
                match self {
                    $(Script::$variant => $writes,)*
                }
            }
        }
    };
}

scripts! {
    // variant         entry                returns   writes the page
    Observe            "observe"            Json      false;
    Read               "read"               Json      false;
    Search             "search"             Json      false;
    Find               "find"               Json      false;
    Resolve            "resolve"            Element   false;
    ClickPoint         "clickPoint"         Json      false;
    ClickSettle        "clickSettle"        Promise   false;
    StateSnapshot      "stateSnapshot"      Json      false;
    FocusAndSelectAll  "focusAndSelectAll"  Json      false;
    ActiveElementKey   "activeElementKey"   Json      false;
    SetNativeValue     "setNativeValue"     Json      true;
    SelectOptions      "selectOptions"      Json      true;
    ListOptions        "listOptions"        Json      false;
    ActiveElementState "activeElementState" Json      false;
    ArmClick           "armClick"           Json      false;
    ClickVerdict       "clickVerdict"       Json      false;
    ArmKeys            "armKeys"            Json      false;
    KeyRecord          "keyRecord"          Json      false;
    PrepareTyping      "prepareTyping"      Json      false;
    ScrollPosition     "scrollPosition"     Json      false;
    ScrollPage         "scrollPage"         Json      false;
    ScrollContainer    "scrollContainer"    Json      false;
    ScrollToText       "scrollToText"       Json      false;
    DocumentInfo       "documentInfo"       Json      false;
    ViewportSize       "viewportSize"       Json      false;
    WaitProbe          "waitProbe"          Json      false;
    HoverMark          "hoverMark"          Json      false;
    HoverReport        "hoverReport"        Json      false;
    DragArm            "dragArm"            Json      false;
    DragVerdict        "dragVerdict"        Json      false;
    PickFileInput      "pickFileInput"      Json      false;
    PickedFileInput    "pickedFileInput"    Element   false;
    UploadReadback     "uploadReadback"     Json      false;
    UploadChunk        "uploadChunk"        Json      false;
    UploadSetFiles     "uploadSetFiles"     Json      true;
    DownloadOpen       "downloadOpen"       Promise   false;
    DownloadChunk      "downloadChunk"      Promise   false;
    AnnotationBoxes    "annotationBoxes"    Json      false;
    ListingRoot        "listingRoot"        Element   false;
}

impl Script {
    /// Whether the script answers with a promise (the call awaits it).
    pub fn awaits(self) -> bool {
        self.returns() == Returns::Promise
    }

    /// The stub declaration for `Runtime.callFunctionOn`: calls the entry
    /// point of the installed library, or returns `INSTALL_MARKER`.
    pub fn declaration(self) -> &'static str {
        let index = Script::ALL
            .iter()
            .position(|script| *script == self)
            .unwrap_or_default();
        &STUBS[index]
    }
}

/// What a stub returns when its world has no (current) library installed.
pub const INSTALL_MARKER: &str = "browser-pilot:install-library";

/// The constants Rust and the scripts share, written from the Rust values into the library
/// (never copied into a `.js` file): how many Observations keep their element maps, and the
/// input types set through the native value setter.
static INJECTED_CONSTANTS: LazyLock<String> = LazyLock::new(|| {
    let native_types = NATIVE_VALUE_TYPES
        .iter()
        .map(|name| format!("{name:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "const BP_MAX_OBSERVATIONS = {KEPT_OBSERVATIONS};\n\
         const BP_MAX_DOCUMENT_REFS = {DOCUMENT_REFS};\n\
         const BP_NATIVE_VALUE_TYPES = new Set([{native_types}]);"
    )
});

/// The injected constants, the prelude and every script, in one text.
static LIBRARY_SOURCE: LazyLock<String> = LazyLock::new(|| {
    [
        INJECTED_CONSTANTS.as_str(),
        COMMON_JS,
        OBSERVE_JS,
        READ_JS,
        SEARCH_JS,
        FIND_JS,
        ACTIONS_JS,
        DOCUMENT_JS,
        INTERACT_JS,
        UPLOAD_JS,
        ANNOTATE_JS,
    ]
    .join("\n")
});

/// `browser-pilot.lib.<FNV-1a hash of the library>`: the symbol key the
/// library is published under, different for every library text.
static LIBRARY_KEY: LazyLock<String> = LazyLock::new(|| {
    let hash = LIBRARY_SOURCE
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
    format!("browser-pilot.lib.{hash:016x}")
});

/// The installer declaration: defines the library inside one function and
/// publishes its entry points; idempotent (an installed library stays).
static INSTALLER: LazyLock<String> = LazyLock::new(|| {
    let key = LIBRARY_KEY.as_str();
    let entries = Script::ALL
        .iter()
        .map(|script| script.entry())
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "function () {{\n\"use strict\";\nconst BP_VERSION = {key:?};\n{}\n\
         if (globalThis[Symbol.for(BP_VERSION)] === undefined) {{\n\
         Object.defineProperty(globalThis, Symbol.for(BP_VERSION), \
         {{ value: Object.freeze({{ {entries} }}), enumerable: false, configurable: false, writable: false }});\n\
         }}\n({})(false);\n({})(false);\nreturn true;\n}}",
        LIBRARY_SOURCE.as_str(),
        CLICK_TRUTH_JS.trim_end(),
        KEY_GUARD_JS.trim_end()
    )
});

/// One stub per script. All but the element-returning ones (`resolve`, `pickedFileInput`,
/// `listingRoot`) return their result as one JSON
/// string: CDP's `returnByValue` conversion of a large object tree costs
/// several times more than `JSON.stringify` plus one string transfer, and
/// the string decodes straight into typed structs. The entry point also gets the stub's
/// `arguments`: after the options, remote objects of the same world (`run::run_observe`'s
/// listener targets).
static STUBS: LazyLock<Vec<String>> = LazyLock::new(|| {
    let key = LIBRARY_KEY.as_str();
    Script::ALL
        .iter()
        .map(|script| {
            let call = match script.returns() {
                Returns::Element => format!("lib.{}(options, arguments)", script.entry()),
                Returns::Promise => format!(
                    "Promise.resolve(lib.{}(options, arguments)).then(JSON.stringify)",
                    script.entry()
                ),
                Returns::Json => format!("JSON.stringify(lib.{}(options, arguments))", script.entry()),
            };
            format!(
                "function (options) {{ \"use strict\"; const lib = globalThis[Symbol.for({key:?})]; \
                 if (lib === undefined) return {INSTALL_MARKER:?}; return {call}; }}"
            )
        })
        .collect()
});

/// The installer's function declaration (run it with no arguments in the
/// world, then call the stub again).
pub fn library_installer() -> &'static str {
    &INSTALLER
}

/// One script invocation: which script and its single JSON argument.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptCall {
    pub script: Script,
    pub argument: Value,
}

impl ScriptCall {
    /// `Runtime.callFunctionOn` params for running this call with the
    /// global object of `execution_context_id` as `this`. With
    /// `return_by_value` the result comes back as JSON; otherwise as a
    /// remote object in `object_group`.
    pub fn call_function_on_params(
        &self,
        execution_context_id: i64,
        return_by_value: bool,
        object_group: Option<&str>,
    ) -> Value {
        let mut params = json!({
            "functionDeclaration": self.script.declaration(),
            "executionContextId": execution_context_id,
            "arguments": [{ "value": self.argument }],
            "returnByValue": return_by_value,
            "awaitPromise": self.script.awaits(),
            "silent": true,
        });
        if let Some(group) = object_group {
            params["objectGroup"] = Value::String(group.to_owned());
        }
        params
    }
}

/// A typed page operation: how to call it and how to read its answer.
pub trait PageScript {
    type Output;

    /// The script invocation (options already validated).
    fn call(&self) -> Result<ScriptCall, PageError>;

    /// Decodes the JSON text the script returned.
    fn parse(&self, json: &str) -> Result<Self::Output, PageError>;
}

/// The shape of a structured refusal: `{"error": {"code", "message"}}`.
#[derive(Deserialize)]
struct Refusal {
    error: RefusalBody,
}

#[derive(Deserialize)]
struct RefusalBody {
    code: String,
    #[serde(default)]
    message: String,
}

/// Decodes a script result: a `{"error": {code, message}}` object becomes
/// `PageError::Refused`, anything else is deserialized into `T`. Scripts
/// build refusals with `bpError`, whose first key is `error`.
pub(super) fn decode<T: DeserializeOwned>(script: Script, json: &str) -> Result<T, PageError> {
    let script_name = script.entry();
    let shape_error = |error: serde_json::Error| PageError::UnexpectedShape {
        script: script_name,
        detail: error.to_string(),
    };
    match json.starts_with(r#"{"error":"#) {
        true => {
            let refusal: Refusal = serde_json::from_str(json).map_err(shape_error)?;
            match ScriptErrorCode::parse(&refusal.error.code) {
                Some(code) => Err(PageError::Refused {
                    script: script_name,
                    code,
                    message: refusal.error.message,
                }),
                None => Err(PageError::UnexpectedShape {
                    script: script_name,
                    detail: format!("unknown error code {:?}", refusal.error.code),
                }),
            }
        }
        false => serde_json::from_str(json).map_err(shape_error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stubs_call_their_entry_of_the_versioned_library() {
        let key = LIBRARY_KEY.as_str();
        assert!(key.starts_with("browser-pilot.lib.") && key.len() == 18 + 16);
        for script in Script::ALL {
            let stub = script.declaration();
            assert!(stub.contains(&format!("Symbol.for({key:?})")), "{script:?}");
            assert!(stub.contains(INSTALL_MARKER), "{script:?}");
            assert!(
                stub.contains(&format!("lib.{}(options, arguments)", script.entry())),
                "{script:?}"
            );
            assert!(stub.len() < 300, "stubs stay tiny: {}", stub.len());
        }
        assert!(Script::Observe.declaration().contains("JSON.stringify"));
        assert!(!Script::Resolve.declaration().contains("JSON.stringify"));
        // A script answering with a promise is awaited, and only that one.
        assert!(
            Script::ClickSettle
                .declaration()
                .contains(".then(JSON.stringify)")
        );
        let call = |script| ScriptCall {
            script,
            argument: json!({}),
        };
        assert_eq!(
            call(Script::ClickSettle).call_function_on_params(1, true, None)["awaitPromise"],
            json!(true)
        );
        assert_eq!(
            call(Script::ClickPoint).call_function_on_params(1, true, None)["awaitPromise"],
            json!(false)
        );
    }

    #[test]
    fn installer_defines_every_entry_and_publishes_them_once() {
        let installer = library_installer();
        let version = format!("const BP_VERSION = {:?};", LIBRARY_KEY.as_str());
        assert!(installer.contains(&version));
        assert!(installer.contains("function bpState()"));
        for script in Script::ALL {
            assert!(
                installer.contains(&format!("function {}(options", script.entry())),
                "{script:?} has no entry function"
            );
        }
        assert!(installer.contains("Object.freeze({ observe, read, search, find, resolve,"));
    }

    #[test]
    fn shared_constants_come_from_rust_only() {
        let installer = library_installer();
        assert!(installer.contains(&format!("const BP_MAX_OBSERVATIONS = {KEPT_OBSERVATIONS};")));
        assert!(installer.contains(
            "const BP_NATIVE_VALUE_TYPES = new Set([\"date\", \"time\", \"datetime-local\", \"month\", \"week\", \"color\", \"range\"]);"
        ));
        for source in [
            COMMON_JS,
            OBSERVE_JS,
            READ_JS,
            SEARCH_JS,
            FIND_JS,
            ACTIONS_JS,
            DOCUMENT_JS,
            INTERACT_JS,
            UPLOAD_JS,
            ANNOTATE_JS,
            CLICK_TRUTH_JS,
            KEY_GUARD_JS,
        ] {
            for name in [
                "BP_MAX_OBSERVATIONS",
                "BP_MAX_DOCUMENT_REFS",
                "BP_NATIVE_VALUE_TYPES",
            ] {
                assert!(
                    !source.contains(&format!("const {name}")),
                    "{name} is defined in a .js file; it is injected from Rust"
                );
            }
        }
    }

    /// Every file is concatenated into one function scope, where a later declaration of the
    /// same name silently replaces an earlier one.
    #[test]
    fn no_two_scripts_declare_the_same_name() {
        let mut seen = std::collections::HashMap::new();
        for (file, source) in [
            ("common.js", COMMON_JS),
            ("observe.js", OBSERVE_JS),
            ("read.js", READ_JS),
            ("search.js", SEARCH_JS),
            ("find.js", FIND_JS),
            ("actions.js", ACTIONS_JS),
            ("document.js", DOCUMENT_JS),
            ("interact.js", INTERACT_JS),
        ] {
            for line in source.lines() {
                let Some(rest) = line
                    .strip_prefix("function ")
                    .or_else(|| line.strip_prefix("const "))
                else {
                    continue;
                };
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if let Some(first) = seen.insert(name.clone(), file) {
                    panic!("{name} is declared in {first} and again in {file}");
                }
            }
        }
        assert!(seen.len() > 50, "found {} declarations", seen.len());
    }

    #[test]
    fn params_carry_context_argument_and_group() {
        let call = ScriptCall {
            script: Script::Read,
            argument: json!({"maxChars": 10}),
        };
        let params = call.call_function_on_params(7, true, None);
        assert_eq!(params["executionContextId"], json!(7));
        assert_eq!(params["arguments"], json!([{"value": {"maxChars": 10}}]));
        assert_eq!(params["returnByValue"], json!(true));
        assert!(params.get("objectGroup").is_none());
        let by_object = call.call_function_on_params(7, false, Some("g"));
        assert_eq!(by_object["objectGroup"], json!("g"));
        assert_eq!(by_object["returnByValue"], json!(false));
    }

    #[test]
    fn decode_maps_refusals_and_shapes() {
        #[derive(serde::Deserialize, Debug)]
        struct Shape {
            n: u32,
        }
        let ok: Shape = decode(Script::Read, r#"{"n":3}"#).unwrap();
        assert_eq!(ok.n, 3);
        let refused = decode::<Shape>(
            Script::Find,
            r#"{"error":{"code":"invalid_selector","message":"bad"}}"#,
        )
        .unwrap_err();
        assert_eq!(refused.refusal(), Some(ScriptErrorCode::InvalidSelector));
        let unknown = decode::<Shape>(Script::Find, r#"{"error":{"code":"what"}}"#).unwrap_err();
        assert!(matches!(unknown, PageError::UnexpectedShape { .. }));
        let wrong = decode::<Shape>(Script::Find, r#"{"n":"x"}"#).unwrap_err();
        assert!(matches!(wrong, PageError::UnexpectedShape { .. }));
        let not_json = decode::<Shape>(Script::Find, "undefined").unwrap_err();
        assert!(matches!(not_json, PageError::UnexpectedShape { .. }));
    }

    #[test]
    fn every_error_code_round_trips() {
        for code in [
            "observation_unknown",
            "ref_unknown",
            "ref_stale",
            "document_replaced",
            "not_visible",
            "invalid_selector",
            "invalid_regex",
            "no_match",
            "unsupported_element",
            "not_editable",
            "invalid_argument",
            "option_not_found",
            "option_disabled",
        ] {
            assert_eq!(ScriptErrorCode::parse(code).map(|c| c.as_str()), Some(code));
        }
        assert_eq!(ScriptErrorCode::parse("nope"), None);
    }

    #[test]
    fn every_role_the_scripts_report_decodes() {
        let start = COMMON_JS.find("const BP_WIDGET_ROLES = new Set([").unwrap();
        let list = &COMMON_JS[start..];
        let list = &list[..list.find("]);").unwrap()];
        let mut roles: Vec<&str> = list.split('\'').skip(1).step_by(2).collect();
        roles.extend(["img", "clickable"]);
        assert!(roles.len() > 20, "{roles:?}");
        for role in roles {
            let decoded: Result<crate::page::Role, _> = serde_json::from_value(json!(role));
            assert!(decoded.is_ok(), "role {role} does not decode");
        }
    }

    #[test]
    fn every_code_the_scripts_return_is_known() {
        let sources = [
            COMMON_JS,
            OBSERVE_JS,
            READ_JS,
            SEARCH_JS,
            FIND_JS,
            ACTIONS_JS,
            DOCUMENT_JS,
            INTERACT_JS,
            UPLOAD_JS,
            ANNOTATE_JS,
        ];
        let mut n_codes = 0;
        for source in sources {
            for piece in source.split("bpError('").skip(1) {
                let code = piece.split('\'').next().unwrap_or_default();
                if code == "code" || code.is_empty() {
                    continue;
                }
                assert!(
                    ScriptErrorCode::parse(code).is_some(),
                    "unknown code {code}"
                );
                n_codes += 1;
            }
        }
        assert!(n_codes >= 12, "found {n_codes} refusals");
    }
}
