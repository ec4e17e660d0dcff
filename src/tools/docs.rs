//! `docs/tools.md`, rendered from the manifest so it cannot drift (a test compares the file).

use super::manifest::manifest;

/// Example calls recorded from a real run by `tests/integration/tool_examples.rs`.
const EXAMPLES: &str = include_str!("../../docs/tool-examples.json");

pub fn render_tools_markdown() -> String {
    let examples: serde_json::Value = serde_json::from_str(EXAMPLES).unwrap_or_default();
    let mut out = String::from(
        "# Tools\n\nGenerated from the tool manifest (`src/tools/manifest.rs`) by \
         `cargo test --lib tools::docs`; set `BROWSER_PILOT_UPDATE_DOCS=1` to rewrite it. \
         `tools/list` returns exactly these entries, filtered by the Connection's granted \
         capabilities. Call them with `tools/call` (see `docs/protocol.md`).\n\n\
         Sensitivity classes: `browser_data` (page content, values, URLs), `credential` \
         (passwords, auth), `user_file` (local file content).\n\n",
    );
    out.push_str("| tool | capability | scope | mutating | sensitivity in | sensitivity out |\n| --- | --- | --- | --- | --- | --- |\n");
    for tool in manifest() {
        out.push_str(&format!(
            "| `{}` | `{}` | {} | {} | {} | {} |\n",
            tool.name,
            tool.capability,
            tool.scope().as_str(),
            if tool.mutating { "yes" } else { "no" },
            list(tool.sensitivity_input),
            list(tool.sensitivity_output),
        ));
    }
    for tool in manifest() {
        out.push_str(&format!("\n## `{}`\n\n{}\n\n", tool.name, tool.description));
        out.push_str(&format!(
            "Input schema:\n\n```json\n{}\n```\n\nOutput schema (`result`):\n\n```json\n{}\n```\n",
            serde_json::to_string_pretty(&tool.input_schema).unwrap_or_default(),
            serde_json::to_string_pretty(&tool.output_schema).unwrap_or_default(),
        ));
        if let Some(example) = examples.get(tool.name) {
            out.push_str(&format!(
                "\nExample `tools/call` params (recorded from a real run; ids shortened, long arrays cut):\n\n```json\n{}\n```\n\nExample outcome:\n\n```json\n{}\n```\n",
                serde_json::to_string_pretty(&example["request"]).unwrap_or_default(),
                serde_json::to_string_pretty(&example["result"]).unwrap_or_default(),
            ));
        }
    }
    out
}

fn list(items: &[&str]) -> String {
    match items.is_empty() {
        true => "-".to_owned(),
        false => items
            .iter()
            .map(|i| format!("`{i}`"))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_an_example() {
        let examples: serde_json::Value =
            serde_json::from_str(EXAMPLES).expect("docs/tool-examples.json is JSON");
        for tool in manifest() {
            assert!(
                examples.get(tool.name).is_some(),
                "no example for {}: run BROWSER_PILOT_UPDATE_DOCS=1 cargo test --test integration -- tool_examples::",
                tool.name
            );
        }
    }

    #[test]
    fn docs_tools_md_matches_the_manifest() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/tools.md");
        let rendered = render_tools_markdown();
        if std::env::var_os("BROWSER_PILOT_UPDATE_DOCS").is_some() {
            std::fs::write(path, &rendered).expect("write docs/tools.md");
        }
        let on_disk = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            on_disk == rendered,
            "docs/tools.md is stale: run BROWSER_PILOT_UPDATE_DOCS=1 cargo test --lib tools::docs"
        );
    }
}
