//! Classifying one inbound line as a JSON-RPC 2.0 request or notification.
//!
//! Owns the envelope rules of the contract: UTF-8, one JSON object, `jsonrpc: "2.0"`, a string
//! `method`, an id that is a non-empty string or a safe integer, `params` an object when present;
//! a blank (or white-space-only) line and a line starting with a byte order mark are errors
//! whose `context.reason` names them.
//! A failure here is fatal for the bridge (the caller answers with `id: null` and exits). Method
//! semantics and parameter shapes are decided elsewhere.

use serde_json::{Map, Value};

use super::errors::{ErrorCode, RpcError};

/// The largest integer id a JavaScript host can represent exactly: 2^53 - 1.
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

/// The UTF-8 byte order mark; the framing is plain UTF-8 without one.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// A well-formed inbound message.
#[derive(Debug, Clone, PartialEq)]
pub enum Inbound {
    Request {
        id: Value,
        method: String,
        params: Map<String, Value>,
    },
    Notification {
        method: String,
        params: Map<String, Value>,
    },
}

impl Inbound {
    pub fn method(&self) -> &str {
        match self {
            Inbound::Request { method, .. } | Inbound::Notification { method, .. } => method,
        }
    }
}

/// Decodes and checks one line. Every error returned is an envelope error (fatal for a bridge).
pub fn classify(line: &[u8]) -> Result<Inbound, RpcError> {
    // Named causes for input that is never a message, so a host sees what it wrote wrong.
    if line.starts_with(UTF8_BOM) {
        return Err(RpcError::new(
            ErrorCode::ParseError,
            "a line starts with a byte order mark",
        )
        .with_context("reason", serde_json::json!("bom")));
    }
    if line
        .iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
    {
        return Err(RpcError::new(
            ErrorCode::ParseError,
            "a blank line is not a message (one JSON object per line)",
        )
        .with_context("reason", serde_json::json!("blank_line")));
    }
    let text = std::str::from_utf8(line)
        .map_err(|_| RpcError::new(ErrorCode::ParseError, "input is not valid UTF-8"))?;
    let value: Value = serde_json::from_str(text)
        .map_err(|e| RpcError::new(ErrorCode::ParseError, format!("invalid JSON: {e}")))?;
    let Value::Object(mut object) = value else {
        return Err(invalid("a message must be a JSON object"));
    };
    match object.get("jsonrpc") {
        Some(Value::String(version)) if version == "2.0" => {}
        Some(_) => return Err(invalid("\"jsonrpc\" must be \"2.0\"")),
        None => return Err(invalid("\"jsonrpc\" is missing")),
    }
    let method = match object.remove("method") {
        Some(Value::String(method)) if !method.is_empty() => method,
        Some(_) => return Err(invalid("\"method\" must be a non-empty string")),
        None => {
            return Err(invalid(
                "\"method\" is missing (responses are not accepted from hosts)",
            ));
        }
    };
    let params = match object.remove("params") {
        None => Map::new(),
        Some(Value::Object(params)) => params,
        Some(_) => return Err(invalid("\"params\" must be an object")),
    };
    match object.remove("id") {
        None => Ok(Inbound::Notification { method, params }),
        Some(id) => {
            check_id(&id)?;
            Ok(Inbound::Request { id, method, params })
        }
    }
}

/// Request ids are non-empty strings or integers with |n| <= 2^53 - 1, written as JSON
/// integers (no decimal point, no exponent, no negative zero). The message says which rule
/// the id broke.
pub fn check_id(id: &Value) -> Result<(), RpcError> {
    match id {
        Value::String(s) if !s.is_empty() => Ok(()),
        Value::String(_) => Err(invalid("\"id\" must not be an empty string")),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) if (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&i) => Ok(()),
            (Some(_), _, _) | (None, Some(_), _) => {
                Err(invalid("\"id\" is outside the safe integer range"))
            }
            (None, None, Some(f)) => Err(invalid(non_integer_id_message(f))),
            (None, None, None) => Err(invalid("\"id\" is not a representable number")),
        },
        _ => Err(invalid(
            "\"id\" must be a non-empty string or a safe integer",
        )),
    }
}

/// Why a JSON number that is not an integer literal cannot be an id. serde keeps such numbers
/// as floats, so `1.0` and `1e0` look alike here; both are told what to write instead.
fn non_integer_id_message(f: f64) -> &'static str {
    match () {
        _ if f == 0.0 && f.is_sign_negative() => {
            "\"id\" must not be negative zero (-0); write 0 or another integer"
        }
        _ if f.fract() != 0.0 => "\"id\" must be an integer, not a fraction",
        _ if f.abs() > MAX_SAFE_INTEGER as f64 => {
            "\"id\" is outside the safe integer range (and must be written without a decimal point or exponent)"
        }
        _ => {
            "\"id\" must be written as a plain integer, without a decimal point or exponent (1, not 1.0 or 1e0)"
        }
    }
}

fn invalid(message: &str) -> RpcError {
    RpcError::new(ErrorCode::InvalidRequest, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(line: &str, expect: Result<&str, &str>) {
        let got = classify(line.as_bytes());
        match (got, expect) {
            (Ok(Inbound::Request { .. }), Ok("request")) => {}
            (Ok(Inbound::Notification { .. }), Ok("notification")) => {}
            (Err(e), Err(code)) => assert_eq!(e.code.as_str(), code, "{line}"),
            (got, expect) => panic!("{line}: got {got:?}, want {expect:?}"),
        }
    }

    #[test]
    fn envelope_matrix() {
        check(r#"{"jsonrpc":"2.0","id":1,"method":"x"}"#, Ok("request"));
        check(
            r#"{"jsonrpc":"2.0","id":"a","method":"x","params":{}}"#,
            Ok("request"),
        );
        check(r#"{"jsonrpc":"2.0","method":"x"}"#, Ok("notification"));
        check(
            r#"{"jsonrpc":"2.0","id":9007199254740991,"method":"x"}"#,
            Ok("request"),
        );
        check(
            r#"{"jsonrpc":"2.0","id":-9007199254740991,"method":"x"}"#,
            Ok("request"),
        );
        check(
            r#"{"jsonrpc":"2.0","id":9007199254740992,"method":"x"}"#,
            Err("invalid_request"),
        );
        check(
            r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"x"}"#,
            Err("invalid_request"),
        );
        check(
            r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#,
            Err("invalid_request"),
        );
        check(
            r#"{"jsonrpc":"2.0","id":"","method":"x"}"#,
            Err("invalid_request"),
        );
        check(
            r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#,
            Err("invalid_request"),
        );
        check(
            r#"{"jsonrpc":"2.0","id":[1],"method":"x"}"#,
            Err("invalid_request"),
        );
        check(
            r#"{"jsonrpc":"2.0","id":true,"method":"x"}"#,
            Err("invalid_request"),
        );
        check(r#"{"id":1,"method":"x"}"#, Err("invalid_request"));
        check(
            r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#,
            Err("invalid_request"),
        );
        check(r#"{"jsonrpc":"2.0","id":1}"#, Err("invalid_request"));
        check(
            r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            Err("invalid_request"),
        );
        check(
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}"#,
            Err("invalid_request"),
        );
        check(
            r#"[{"jsonrpc":"2.0","id":1,"method":"x"}]"#,
            Err("invalid_request"),
        );
        check("42", Err("invalid_request"));
        check("{not json", Err("parse_error"));
        check("", Err("parse_error"));
    }

    #[test]
    fn id_errors_say_what_was_wrong() {
        let message = |id: &str| {
            classify(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"x"}}"#).as_bytes())
                .unwrap_err()
                .message
        };
        let plain = "\"id\" must be written as a plain integer, without a decimal point or exponent (1, not 1.0 or 1e0)";
        assert_eq!(message("1.0"), plain);
        assert_eq!(message("1e2"), plain);
        assert_eq!(message("-5.0"), plain);
        assert_eq!(
            message("-0"),
            "\"id\" must not be negative zero (-0); write 0 or another integer"
        );
        assert_eq!(message("-0.0"), message("-0"));
        assert_eq!(message("1.5"), "\"id\" must be an integer, not a fraction");
        assert!(message("1e300").contains("outside the safe integer range"));
        assert!(message("9007199254740992").contains("outside the safe integer range"));
        for valid in ["0", "7", "-7"] {
            assert!(
                classify(format!(r#"{{"jsonrpc":"2.0","id":{valid},"method":"x"}}"#).as_bytes())
                    .is_ok(),
                "{valid}"
            );
        }
    }

    #[test]
    fn blank_lines_and_a_bom_are_named() {
        let reason = |line: &[u8]| {
            let error = classify(line).unwrap_err();
            assert_eq!(error.code, ErrorCode::ParseError);
            error.context.unwrap()["reason"].clone()
        };
        for blank in [&b""[..], b" ", b" \t\r"] {
            assert_eq!(reason(blank), "blank_line");
        }
        assert_eq!(
            reason(b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"method\":\"x\"}"),
            "bom"
        );
        assert_eq!(reason(b"\xEF\xBB\xBF"), "bom");
    }

    #[test]
    fn invalid_utf8_is_a_parse_error() {
        let err = classify(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}").unwrap_err();
        assert_eq!(err.code, ErrorCode::ParseError);
    }
}
