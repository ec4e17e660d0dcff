//! The flags of `browser-pilot mcp` as one value, with the rules between them.
//!
//! Owns parsing and checking only (capability names, an absolute output directory); it starts
//! nothing and reads no file.

use std::path::{Path, PathBuf};

use crate::protocol::negotiate::{CAPABILITIES, DEFAULT_CAPABILITIES};

/// What one MCP server process was started with.
#[derive(Debug, Clone, PartialEq)]
pub struct McpOptions {
    /// `--browser`: the initial browser preference passed to the bridge.
    pub browser: Option<String>,
    /// `--headless`: start the Broker-managed headless Chromium when no candidate is ready.
    pub headless: bool,
    /// `--output-dir`: where PDFs and downloads are exported (absolute).
    pub output_dir: PathBuf,
    /// `--capabilities`: what to request in `initialize`. Default: the contract's six, so an MCP
    /// host sees no network-data, network-control or eval tool unless its user names them.
    pub capabilities: Vec<String>,
}

impl McpOptions {
    /// From the raw flag values. A relative output directory is taken relative to `cwd`; the
    /// default is a fresh, unpredictably named directory under the system temporary directory,
    /// created owner-only when the first file is exported.
    pub fn new(
        browser: Option<String>,
        headless: bool,
        output_dir: Option<PathBuf>,
        capabilities: Option<&str>,
        cwd: &Path,
    ) -> Result<McpOptions, String> {
        let output_dir = match output_dir {
            Some(dir) if dir.is_absolute() => dir,
            Some(dir) => cwd.join(dir),
            // Unpredictable, so nobody can plant a directory or symlink there in advance.
            None => std::env::temp_dir().join(format!(
                "browser-pilot-mcp-{}",
                crate::adapter::random_hex(8)
            )),
        };
        let capabilities = match capabilities {
            None => DEFAULT_CAPABILITIES
                .iter()
                .map(|c| (*c).to_owned())
                .collect(),
            Some(list) => parse_capabilities(list)?,
        };
        Ok(McpOptions {
            browser,
            headless,
            output_dir,
            capabilities,
        })
    }
}

/// A comma-separated list of capability names, each known to this executable: exactly these
/// (`a,b`), or the six defaults plus these when every name starts with `+` (`+page.eval`).
fn parse_capabilities(list: &str) -> Result<Vec<String>, String> {
    let names: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let added = names.iter().filter(|n| n.starts_with('+')).count();
    let mut out: Vec<String> = Vec::new();
    if added > 0 {
        if added != names.len() {
            return Err(
                "--capabilities: either list every capability, or add to the defaults with +name each"
                    .to_owned(),
            );
        }
        out.extend(DEFAULT_CAPABILITIES.iter().map(|c| (*c).to_owned()));
    }
    for name in names.iter().map(|n| n.trim_start_matches('+')) {
        if !CAPABILITIES.contains(&name) {
            return Err(format!(
                "unknown capability {name:?}; known: {}",
                CAPABILITIES.join(", ")
            ));
        }
        if !out.iter().any(|c| c == name) {
            out.push(name.to_owned());
        }
    }
    if out.is_empty() {
        return Err("--capabilities needs at least one capability".to_owned());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags() {
        let cwd = Path::new("/work/here");
        let options = McpOptions::new(None, false, Some("out".into()), None, cwd).unwrap();
        assert_eq!(options.output_dir, Path::new("/work/here/out"));
        assert_eq!(options.capabilities, DEFAULT_CAPABILITIES);
        let options = McpOptions::new(
            None,
            true,
            Some("/abs".into()),
            Some("observation.read, browser.control,observation.read"),
            cwd,
        )
        .unwrap();
        assert_eq!(options.output_dir, Path::new("/abs"));
        assert_eq!(
            options.capabilities,
            vec!["observation.read", "browser.control"]
        );
        assert!(McpOptions::new(None, false, None, Some("eval.everything"), cwd).is_err());
        assert!(McpOptions::new(None, false, None, Some(" , "), cwd).is_err());
        // `+name` adds an extra to the six defaults; mixing the two forms is refused.
        let options =
            McpOptions::new(None, false, None, Some("+page.eval, +network.read"), cwd).unwrap();
        let mut want: Vec<&str> = DEFAULT_CAPABILITIES.to_vec();
        want.extend(["page.eval", "network.read"]);
        assert_eq!(options.capabilities, want);
        assert!(McpOptions::new(None, false, None, Some("+page.eval,event.read"), cwd).is_err());
        assert!(McpOptions::new(None, false, None, Some("+made.up"), cwd).is_err());
    }
}
