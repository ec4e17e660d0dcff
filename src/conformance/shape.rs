//! Typed reads of JSON results by dotted path, with errors that name the path
//! and the expected JSON type but never the value found there.
//!
//! It must not know any method or check: callers pass the paths. Keeping
//! values out of errors is what lets shape failures go into the report
//! without leaking ids or browser content.

use std::fmt;

use serde_json::{Map, Value};

/// A value at `path` did not have the expected JSON type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeError {
    /// Dotted path from the labelled root, e.g. `initialize.limits.service`.
    pub path: String,
    /// The expected type, e.g. `non-empty string`.
    pub expected: &'static str,
    /// The JSON type actually found, or `missing`.
    pub found: &'static str,
}

impl fmt::Display for ShapeError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "{}: expected {}, found {}",
            self.path, self.expected, self.found
        )
    }
}

impl std::error::Error for ShapeError {}

/// A JSON value with the label its paths are reported under.
#[derive(Debug, Clone, Copy)]
pub struct Doc<'a> {
    root: &'a Value,
    label: &'a str,
}

fn type_name(value: Option<&Value>) -> &'static str {
    match value {
        None => "missing",
        Some(Value::Null) => "null",
        Some(Value::Bool(_)) => "boolean",
        Some(Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Array(_)) => "array",
        Some(Value::Object(_)) => "object",
    }
}

impl<'a> Doc<'a> {
    /// Labels `root`; every error path starts with `label`.
    pub fn new(label: &'a str, root: &'a Value) -> Doc<'a> {
        Doc { root, label }
    }

    fn full_path(&self, path: &str) -> String {
        match path.is_empty() {
            true => self.label.to_owned(),
            false => format!("{}.{path}", self.label),
        }
    }

    fn lookup(&self, path: &str) -> Option<&'a Value> {
        match path.is_empty() {
            true => Some(self.root),
            false => path
                .split('.')
                .try_fold(self.root, |value, key| value.get(key)),
        }
    }

    fn typed<T>(
        &self,
        path: &str,
        expected: &'static str,
        convert: impl FnOnce(&'a Value) -> Option<T>,
    ) -> Result<T, ShapeError> {
        let value = self.lookup(path);
        match value.and_then(convert) {
            Some(typed) => Ok(typed),
            None => Err(ShapeError {
                path: self.full_path(path),
                expected,
                found: type_name(value),
            }),
        }
    }

    /// Any value at `path`.
    pub fn value(&self, path: &str) -> Result<&'a Value, ShapeError> {
        self.typed(path, "a value", Some)
    }

    /// A string (possibly empty).
    pub fn str(&self, path: &str) -> Result<&'a str, ShapeError> {
        self.typed(path, "string", Value::as_str)
    }

    /// A non-empty string, as every opaque id and version is.
    pub fn id(&self, path: &str) -> Result<&'a str, ShapeError> {
        self.typed(path, "non-empty string", |value| {
            value.as_str().filter(|text| !text.is_empty())
        })
    }

    /// A non-negative integer.
    pub fn u64(&self, path: &str) -> Result<u64, ShapeError> {
        self.typed(path, "non-negative integer", Value::as_u64)
    }

    /// A boolean.
    pub fn bool(&self, path: &str) -> Result<bool, ShapeError> {
        self.typed(path, "boolean", Value::as_bool)
    }

    /// An array.
    pub fn array(&self, path: &str) -> Result<&'a Vec<Value>, ShapeError> {
        self.typed(path, "array", Value::as_array)
    }

    /// An object.
    pub fn object(&self, path: &str) -> Result<&'a Map<String, Value>, ShapeError> {
        self.typed(path, "object", Value::as_object)
    }

    /// An array whose every element is a string.
    pub fn strings(&self, path: &str) -> Result<Vec<&'a str>, ShapeError> {
        self.typed(path, "array of strings", |value| {
            value
                .as_array()?
                .iter()
                .map(Value::as_str)
                .collect::<Option<Vec<_>>>()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Doc;
    use serde_json::json;

    #[test]
    fn reads_nested_values() {
        let value = json!({"a": {"b": 3, "c": "x", "d": [], "e": ["p", "q"]}});
        let doc = Doc::new("r", &value);
        assert_eq!(doc.u64("a.b"), Ok(3));
        assert_eq!(doc.id("a.c"), Ok("x"));
        assert_eq!(doc.array("a.d").map(Vec::len), Ok(0));
        assert_eq!(doc.strings("a.e"), Ok(vec!["p", "q"]));
        assert!(doc.object("").is_ok());
    }

    #[test]
    fn errors_name_path_and_types_but_not_values() {
        let value = json!({"a": {"secret": "workspace:123", "n": -1, "s": ["x", 1]}});
        let doc = Doc::new("init", &value);
        let check = |error: super::ShapeError, expect: &str| {
            assert_eq!(error.to_string(), expect);
        };
        check(
            doc.u64("a.secret").expect_err("string is not u64"),
            "init.a.secret: expected non-negative integer, found string",
        );
        check(
            doc.u64("a.n").expect_err("negative"),
            "init.a.n: expected non-negative integer, found number",
        );
        check(
            doc.id("a.missing").expect_err("missing"),
            "init.a.missing: expected non-empty string, found missing",
        );
        check(
            doc.strings("a.s").expect_err("mixed array"),
            "init.a.s: expected array of strings, found array",
        );
        check(
            doc.id("a.secret.deeper").expect_err("through a string"),
            "init.a.secret.deeper: expected non-empty string, found missing",
        );
    }
}
