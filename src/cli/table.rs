//! Rendering query rows as JSON lines (pipes) or an aligned table (terminals).

use serde_json::Value;

fn cell(value: &Value) -> String {
    match value {
        Value::Null => "NULL".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// One JSON object per row, keyed by column name.
pub fn json_lines(columns: &[String], rows: &[Vec<Value>]) -> String {
    let mut out = String::new();
    for row in rows {
        let object: serde_json::Map<String, Value> =
            columns.iter().cloned().zip(row.iter().cloned()).collect();
        out.push_str(&Value::Object(object).to_string());
        out.push('\n');
    }
    out
}

/// Columns padded to their widest cell, a rule under the header.
pub fn aligned(columns: &[String], rows: &[Vec<Value>]) -> String {
    let cells: Vec<Vec<String>> = rows.iter().map(|r| r.iter().map(cell).collect()).collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            cells
                .iter()
                .map(|r| r.get(i).map_or(0, |s| s.chars().count()))
                .max()
                .unwrap_or(0)
                .max(c.chars().count())
        })
        .collect();
    let line = |values: Vec<&str>| -> String {
        let padded: Vec<String> = values
            .iter()
            .zip(&widths)
            .map(|(v, w)| format!("{v:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_owned() + "\n"
    };
    let mut out = line(columns.iter().map(String::as_str).collect());
    out.push_str(&line(
        widths
            .iter()
            .map(|w| "-".repeat(*w))
            .collect::<Vec<_>>()
            .iter()
            .map(String::as_str)
            .collect(),
    ));
    for row in &cells {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_both_forms() {
        let columns = vec!["id".to_owned(), "n".to_owned()];
        let rows = vec![
            vec![json!("workspace:a"), json!(3)],
            vec![json!("w"), Value::Null],
        ];
        assert_eq!(
            json_lines(&columns, &rows),
            "{\"id\":\"workspace:a\",\"n\":3}\n{\"id\":\"w\",\"n\":null}\n"
        );
        assert_eq!(
            aligned(&columns, &rows),
            "id           n\n-----------  ----\nworkspace:a  3\nw            NULL\n"
        );
    }
}
