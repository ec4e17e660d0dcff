//! MCP tool results: the lean text, image and resource-link blocks, structured content when the
//! server was started with `--structured`, errors as `isError` results, and sensitivity in
//! `_meta` (left out with the success's `isError: false` when there is none to state).
//!
//! Owns the shapes only: pure functions from a Broker outcome (or error) plus already-read
//! image bytes and already-exported files to one `CallToolResult`. It never calls the bridge and
//! never touches a file.

use serde_json::{Map, Value, json};

use super::files::EXPORT_TOOL;
use crate::adapter::{ExportedFile, ImageData, ToolInfo};
use crate::protocol::errors::RpcError;

/// The `_meta` key prefix of this server (MCP reserves unprefixed and `modelcontextprotocol`
/// keys).
pub const META_SENSITIVITY: &str = "browser-pilot/sensitivity";
pub const META_ERROR: &str = "browser-pilot/error";
pub const META_COMMAND: &str = "browser-pilot/command";
pub const META_DOWNLOADS: &str = "browser-pilot/downloads";

/// What a successful call produced besides its result.
#[derive(Debug, Default)]
pub struct Extras {
    pub images: Vec<ImageData>,
    pub files: Vec<ExportedFile>,
    /// Descriptors' own runtime sensitivity (images, files, downloads).
    pub artifact_sensitivity: Vec<String>,
    /// Completed downloads seen since the last call (`{artifactId, fileName, mimeType,
    /// byteLength}`), kept as Artifacts until the host exports one.
    pub downloads: Vec<Value>,
}

/// A successful `tools/call` result: `text` (the lean form, `lean.rs`) as text content, images
/// and exported files beside it; with `structured`, the Command's result also as
/// `structuredContent` and the sensitive fields of its schema in `_meta`.
pub fn success(
    tool: Option<&ToolInfo>,
    command: &Value,
    result: &Value,
    extras: Extras,
    text: String,
    structured: bool,
) -> Value {
    let mut content = Vec::new();
    if !text.is_empty() {
        content.push(json!({"type": "text", "text": text}));
    }
    let mut sensitivity: Vec<String> = tool
        .map(|tool| tool.sensitivity_output.clone())
        .unwrap_or_default();
    for image in &extras.images {
        content.push(
            json!({"type": "image", "data": base64(&image.bytes), "mimeType": image.mime_type}),
        );
    }
    for file in &extras.files {
        let name = file
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        content.push(json!({
            "type": "resource_link",
            "uri": file_uri(&file.path),
            "name": name,
            "mimeType": file.mime_type,
            "size": file.byte_length,
        }));
    }
    for download in &extras.downloads {
        content.push(json!({"type": "text", "text": format!(
            "download completed: {} ({} bytes, artifactId {}). It is kept in protected storage, not written to disk; call {EXPORT_TOOL} with this artifactId to save it to the output directory.",
            download["fileName"].as_str().unwrap_or("unnamed"),
            download["byteLength"],
            download["artifactId"].as_str().unwrap_or(""),
        )}));
    }
    for class in extras.artifact_sensitivity {
        if !sensitivity.contains(&class) {
            sensitivity.push(class);
        }
    }
    let mut meta = Map::new();
    if !sensitivity.is_empty() || structured {
        let mut classes = json!({"output": sensitivity});
        if structured {
            let fields = tool
                .map(|tool| sensitive_fields(&tool.output_schema))
                .unwrap_or_default();
            classes["fields"] = Value::Object(fields);
        }
        meta.insert(META_SENSITIVITY.into(), classes);
    }
    if !extras.downloads.is_empty() {
        meta.insert(META_DOWNLOADS.into(), Value::Array(extras.downloads));
    }
    if structured && command.is_object() {
        meta.insert(
            META_COMMAND.into(),
            json!({"id": command["id"], "status": command["status"], "mutating": command["mutating"]}),
        );
    }
    // `isError` is absent rather than false (MCP's default), and `_meta` only when it says
    // something: a tool result's envelope is most of a small action's bytes.
    let mut answer = json!({"content": content});
    if !meta.is_empty() {
        answer["_meta"] = Value::Object(meta);
    }
    if structured {
        answer["structuredContent"] = match result {
            Value::Object(_) => result.clone(),
            other => json!({"value": other}),
        };
    }
    answer
}

/// Where a schema carries `x-browser-pilot-sensitivity`: a JSON-pointer-like path (`*` for
/// every array item) to its classes, so a host keeps the annotation attached to the derived
/// content instead of guessing from field names.
pub fn sensitive_fields(schema: &Value) -> Map<String, Value> {
    fn walk(schema: &Value, path: &str, out: &mut Map<String, Value>) {
        if let Some(classes) = schema.get("x-browser-pilot-sensitivity") {
            out.insert(
                match path.is_empty() {
                    true => "/".to_owned(),
                    false => path.to_owned(),
                },
                classes.clone(),
            );
        }
        if let Some(Value::Object(properties)) = schema.get("properties") {
            for (name, property) in properties {
                walk(property, &format!("{path}/{name}"), out);
            }
        }
        if let Some(items) = schema.get("items") {
            walk(items, &format!("{path}/*"), out);
        }
        if let Some(Value::Array(alternatives)) = schema.get("anyOf") {
            for alternative in alternatives {
                walk(alternative, path, out);
            }
        }
    }
    let mut out = Map::new();
    walk(schema, "", &mut out);
    out
}

/// A failed call as a tool result the model can read: `isError`, the `data.code`, the message
/// and the remediation's words; the structured error in `_meta`. No `structuredContent`, so a
/// client never validates an error against the tool's output schema.
pub fn error(tool: Option<&ToolInfo>, error: &RpcError) -> Value {
    let mut text = format!("{}: {}", error.code.as_str(), error.message);
    if let Some(remediation) = &error.remediation {
        let action = remediation["action"].as_str().unwrap_or("");
        let message = remediation["message"].as_str().unwrap_or("");
        text.push_str(&format!("\nremediation ({action}): {message}"));
    }
    if !error.code.retryable() {
        text.push_str("\nnot retryable: change the call or inspect the page first");
    }
    let data = error.to_json()["data"].clone();
    let sensitivity: Vec<String> = tool
        .map(|tool| tool.sensitivity_output.clone())
        .unwrap_or_default();
    json!({
        "content": [{"type": "text", "text": text}],
        "isError": true,
        "_meta": {META_ERROR: data, META_SENSITIVITY: {"output": sensitivity}},
    })
}

/// `file://` URI of an absolute path, percent-encoding everything outside the unreserved set.
pub fn file_uri(path: &std::path::Path) -> String {
    let mut uri = String::from("file://");
    for byte in path.to_string_lossy().bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                uri.push(byte as char)
            }
            other => uri.push_str(&format!("%{other:02X}")),
        }
    }
    uri
}

/// Standard base64 with padding (RFC 4648), for image content.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(ALPHABET[(n >> 18) as usize & 63] as char);
        out.push(ALPHABET[(n >> 12) as usize & 63] as char);
        out.push(match chunk.len() > 1 {
            true => ALPHABET[(n >> 6) as usize & 63] as char,
            false => '=',
        });
        out.push(match chunk.len() > 2 {
            true => ALPHABET[n as usize & 63] as char,
            false => '=',
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::errors::ErrorCode;

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        let check = |input: &str, expect: &str| assert_eq!(base64(input.as_bytes()), expect);
        check("", "");
        check("f", "Zg==");
        check("fo", "Zm8=");
        check("foo", "Zm9v");
        check("foob", "Zm9vYg==");
        check("fooba", "Zm9vYmE=");
        check("foobar", "Zm9vYmFy");
        assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
    }

    #[test]
    fn errors_carry_code_remediation_and_no_structured_content() {
        let failure = RpcError::new(ErrorCode::StaleRef, "ref 3 is gone").with_remediation(
            crate::protocol::errors::RemediationAction::ObserveAgain,
            "Observe the page again.",
        );
        let result = error(None, &failure);
        assert_eq!(result["isError"], true);
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("stale_ref: ref 3 is gone"), "{text}");
        assert!(text.contains("Observe the page again."), "{text}");
        assert_eq!(result["_meta"][META_ERROR]["code"], "stale_ref");
        assert!(result.get("structuredContent").is_none());
    }

    #[test]
    fn sensitive_fields_are_found_through_properties_items_and_alternatives() {
        let schema = json!({"type": "object", "properties": {
            "url": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data"]},
            "elements": {"type": "array", "items": {"type": "object", "properties": {
                "value": {"type": "string", "x-browser-pilot-sensitivity": ["browser_data", "credential"]},
                "ref": {"type": "integer"},
            }}},
            "either": {"anyOf": [{"type": "null"}, {"type": "string", "x-browser-pilot-sensitivity": ["user_file"]}]},
        }});
        assert_eq!(
            Value::Object(sensitive_fields(&schema)),
            json!({"/url": ["browser_data"], "/elements/*/value": ["browser_data", "credential"], "/either": ["user_file"]})
        );
        assert!(sensitive_fields(&json!({"type": "object"})).is_empty());
    }

    #[test]
    fn a_success_is_its_content_with_sensitivity_only_when_there_is_some() {
        let plain = success(
            None,
            &Value::Null,
            &json!({}),
            Extras::default(),
            "done".into(),
            false,
        );
        assert_eq!(
            plain,
            json!({"content": [{"type": "text", "text": "done"}]})
        );
        let page = Extras {
            artifact_sensitivity: vec!["browser_data".into()],
            ..Extras::default()
        };
        let marked = success(None, &Value::Null, &json!({}), page, "x".into(), false);
        assert_eq!(
            marked["_meta"][META_SENSITIVITY],
            json!({"output": ["browser_data"]})
        );
        assert!(marked.get("isError").is_none() && marked.get("structuredContent").is_none());
    }

    #[test]
    fn file_uris_are_percent_encoded() {
        assert_eq!(
            file_uri(std::path::Path::new("/tmp/a b/ü.pdf")),
            "file:///tmp/a%20b/%C3%BC.pdf"
        );
    }
}
