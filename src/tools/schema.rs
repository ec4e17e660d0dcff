//! A small validator for the JSON Schema subset the tool manifest uses.
//!
//! Supported keywords: `type` (one or a list), `properties`, `required`,
//! `additionalProperties` (boolean), `enum`, `const`, `minimum`, `maximum`, `minLength`,
//! `maxLength`, `items`, `minItems`, `maxItems`, `anyOf`. Annotations such as `description` and
//! `x-browser-pilot-sensitivity` are ignored. A general JSON Schema crate would pull a large
//! dependency tree (regex, URL, date parsing) for keywords the manifest never uses; this subset
//! is what the manifest is written in, and a unit test keeps every manifest schema inside it.

use serde_json::{Map, Value};

/// Keywords the validator understands; anything else in a schema is a manifest bug.
pub const KNOWN_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "const",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "items",
    "minItems",
    "maxItems",
    "anyOf",
    "description",
    "x-browser-pilot-sensitivity",
];

/// The first violation found: where (`arguments.url`) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub path: String,
    pub message: String,
}

pub fn validate(schema: &Value, value: &Value, root: &str) -> Result<(), Violation> {
    check(schema, value, root)
}

fn fail(path: &str, message: impl Into<String>) -> Result<(), Violation> {
    Err(Violation {
        path: path.to_owned(),
        message: message.into(),
    })
}

fn type_matches(name: &str, value: &Value) -> bool {
    match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => value.as_i64().is_some() || value.as_u64().is_some(),
        _ => false,
    }
}

fn check(schema: &Value, value: &Value, path: &str) -> Result<(), Violation> {
    let Some(schema) = schema.as_object() else {
        return Ok(());
    };
    if let Some(types) = schema.get("type") {
        let ok = match types {
            Value::String(name) => type_matches(name, value),
            Value::Array(names) => names
                .iter()
                .filter_map(Value::as_str)
                .any(|n| type_matches(n, value)),
            _ => true,
        };
        if !ok {
            return fail(path, format!("must be of type {types}"));
        }
    }
    if let Some(Value::Array(options)) = schema.get("enum")
        && !options.contains(value)
    {
        return fail(
            path,
            format!("must be one of {}", Value::Array(options.clone())),
        );
    }
    if let Some(constant) = schema.get("const")
        && constant != value
    {
        return fail(path, format!("must be {constant}"));
    }
    if let Some(number) = value.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && number < min
        {
            return fail(path, format!("must be >= {min}"));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && number > max
        {
            return fail(path, format!("must be <= {max}"));
        }
    }
    if let Some(text) = value.as_str() {
        let chars = text.chars().count() as u64;
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && chars < min
        {
            return fail(path, format!("must have at least {min} characters"));
        }
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && chars > max
        {
            return fail(path, format!("must have at most {max} characters"));
        }
    }
    if let Some(items) = value.as_array() {
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && (items.len() as u64) < min
        {
            return fail(path, format!("must have at least {min} items"));
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && (items.len() as u64) > max
        {
            return fail(path, format!("must have at most {max} items"));
        }
        if let Some(item_schema) = schema.get("items") {
            for (index, item) in items.iter().enumerate() {
                check(item_schema, item, &format!("{path}[{index}]"))?;
            }
        }
    }
    if let Some(object) = value.as_object() {
        check_object(schema, object, path)?;
    }
    if let Some(Value::Array(alternatives)) = schema.get("anyOf") {
        let mut first_error = None;
        for alternative in alternatives {
            match check(alternative, value, path) {
                Ok(()) => return Ok(()),
                Err(violation) => {
                    first_error.get_or_insert(violation);
                }
            }
        }
        if let Some(violation) = first_error {
            return fail(
                path,
                format!(
                    "matches none of the allowed forms (first: {}: {})",
                    violation.path, violation.message
                ),
            );
        }
    }
    Ok(())
}

fn check_object(
    schema: &Map<String, Value>,
    object: &Map<String, Value>,
    path: &str,
) -> Result<(), Violation> {
    let properties = schema.get("properties").and_then(Value::as_object);
    if let Some(Value::Array(required)) = schema.get("required") {
        for name in required.iter().filter_map(Value::as_str) {
            if !object.contains_key(name) {
                return fail(&format!("{path}.{name}"), "is required");
            }
        }
    }
    for (key, item) in object {
        let child = format!("{path}.{key}");
        match properties.and_then(|p| p.get(key)) {
            Some(property_schema) => check(property_schema, item, &child)?,
            None => {
                if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
                    return fail(&child, "is not an allowed property");
                }
            }
        }
    }
    Ok(())
}

/// Argument groups of which a call must give at least one in full (`observationId` and `ref`,
/// or `x` and `y`): what a root `anyOf` of `required` lists would say, checked in code because
/// strict hosts refuse combinators at the root of an input schema.
pub fn require_one_of(groups: &[&[&str]], value: &Value, path: &str) -> Result<(), Violation> {
    let Some(object) = value.as_object() else {
        return Ok(());
    };
    if groups.is_empty()
        || groups
            .iter()
            .any(|group| group.iter().all(|name| object.contains_key(*name)))
    {
        return Ok(());
    }
    let forms: Vec<String> = groups.iter().map(|group| group.join(" + ")).collect();
    fail(path, format!("must give one of: {}", forms.join(", or ")))
}

/// Root keywords strict tool hosts refuse in an input schema.
pub const ROOT_COMBINATORS: &[&str] = &["anyOf", "oneOf", "allOf", "not"];

/// Why a tool host with a strict schema policy would refuse or misread `schema`: a combinator at
/// the root, a root that is not an object, or a property (at any depth, through `properties`
/// and `items`) without a non-empty `description`. Empty when the schema is host-safe.
pub fn host_problems(schema: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    if schema.get("type") != Some(&Value::String("object".into())) {
        problems.push("the root is not an object schema".to_owned());
    }
    for keyword in ROOT_COMBINATORS {
        if schema.get(*keyword).is_some() {
            problems.push(format!("`{keyword}` at the root"));
        }
    }
    undescribed(schema, "", &mut problems);
    problems
}

fn undescribed(schema: &Value, path: &str, problems: &mut Vec<String>) {
    if let Some(Value::Object(properties)) = schema.get("properties") {
        for (name, property) in properties {
            let child = format!("{path}.{name}");
            let described = property
                .get("description")
                .and_then(Value::as_str)
                .is_some_and(|text| !text.trim().is_empty());
            if !described {
                problems.push(format!("{child} has no description"));
            }
            undescribed(property, &child, problems);
        }
    }
    if let Some(items) = schema.get("items") {
        undescribed(items, &format!("{path}[]"), problems);
    }
}

/// Every keyword used anywhere in `schema` that the validator does not know.
pub fn unknown_keywords(schema: &Value) -> Vec<String> {
    let mut unknown = Vec::new();
    walk(schema, &mut unknown);
    unknown
}

fn walk(schema: &Value, unknown: &mut Vec<String>) {
    let Some(object) = schema.as_object() else {
        return;
    };
    for (key, value) in object {
        if !KNOWN_KEYWORDS.contains(&key.as_str()) {
            unknown.push(key.clone());
        }
        match key.as_str() {
            "properties" => {
                if let Some(properties) = value.as_object() {
                    properties.values().for_each(|p| walk(p, unknown));
                }
            }
            "items" => walk(value, unknown),
            "anyOf" => {
                if let Some(alternatives) = value.as_array() {
                    alternatives.iter().for_each(|a| walk(a, unknown));
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check_case(schema: &Value, value: Value, expect: Result<(), &str>) {
        let got = validate(schema, &value, "arguments").map_err(|v| v.path);
        assert_eq!(
            got.as_ref().map(|_| ()).map_err(String::as_str),
            expect,
            "{value}"
        );
    }

    #[test]
    fn validates_the_subset() {
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["url"],
            "properties": {
                "url": {"type": "string", "minLength": 1, "maxLength": 10},
                "limit": {"type": "integer", "minimum": 1, "maximum": 5},
                "mode": {"enum": ["a", "b"]},
                "refs": {"type": "array", "maxItems": 2, "items": {"type": "integer"}},
                "target": {"anyOf": [
                    {"type": "object", "required": ["ref"], "properties": {"ref": {"type": "integer"}}},
                    {"type": "object", "required": ["x", "y"], "properties": {"x": {"type": "number"}, "y": {"type": "number"}}}
                ]}
            }
        });
        check_case(&schema, json!({"url": "a"}), Ok(()));
        check_case(&schema, json!({}), Err("arguments.url"));
        check_case(&schema, json!({"url": ""}), Err("arguments.url"));
        check_case(&schema, json!({"url": "01234567890"}), Err("arguments.url"));
        check_case(
            &schema,
            json!({"url": "a", "extra": 1}),
            Err("arguments.extra"),
        );
        check_case(
            &schema,
            json!({"url": "a", "limit": 0}),
            Err("arguments.limit"),
        );
        check_case(
            &schema,
            json!({"url": "a", "limit": 2.5}),
            Err("arguments.limit"),
        );
        check_case(
            &schema,
            json!({"url": "a", "mode": "c"}),
            Err("arguments.mode"),
        );
        check_case(
            &schema,
            json!({"url": "a", "refs": [1, "x"]}),
            Err("arguments.refs[1]"),
        );
        check_case(
            &schema,
            json!({"url": "a", "refs": [1, 2, 3]}),
            Err("arguments.refs"),
        );
        check_case(&schema, json!({"url": "a", "target": {"ref": 3}}), Ok(()));
        check_case(
            &schema,
            json!({"url": "a", "target": {"x": 1, "y": 2.5}}),
            Ok(()),
        );
        check_case(
            &schema,
            json!({"url": "a", "target": {"x": 1}}),
            Err("arguments.target"),
        );
        check_case(&schema, json!("a"), Err("arguments"));
    }

    #[test]
    fn one_of_the_groups_must_be_given_in_full() {
        let groups: &[&[&str]] = &[&["observationId", "ref"], &["x", "y"]];
        let check =
            |value: Value| require_one_of(groups, &value, "arguments").map_err(|v| v.message);
        assert!(check(json!({"observationId": "o", "ref": 1})).is_ok());
        assert!(check(json!({"x": 1, "y": 2, "button": "left"})).is_ok());
        let missing = check(json!({"ref": 1, "x": 3})).unwrap_err();
        assert_eq!(missing, "must give one of: observationId + ref, or x + y");
        assert!(check(json!({})).is_err());
        assert!(require_one_of(&[], &json!({}), "arguments").is_ok());
    }

    #[test]
    fn host_problems_name_root_combinators_and_undescribed_properties() {
        let safe = json!({"type": "object", "properties": {
            "a": {"type": "array", "description": "A list.", "items": {"type": "object", "properties": {"b": {"type": "string", "description": "B."}}}},
        }});
        assert!(
            host_problems(&safe).is_empty(),
            "{:?}",
            host_problems(&safe)
        );
        let unsafe_schema = json!({"type": "object", "anyOf": [{"required": ["a"]}], "properties": {
            "a": {"type": "array", "description": " ", "items": {"type": "object", "properties": {"b": {"type": "string"}}}},
        }});
        assert_eq!(
            host_problems(&unsafe_schema),
            vec![
                "`anyOf` at the root".to_owned(),
                ".a has no description".to_owned(),
                ".a[].b has no description".to_owned()
            ]
        );
    }

    #[test]
    fn finds_unknown_keywords() {
        let schema =
            json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}});
        assert_eq!(unknown_keywords(&schema), vec!["pattern".to_owned()]);
    }
}
