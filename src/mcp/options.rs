//! The flags of `browser-pilot mcp` as one value, with the rules between them.
//!
//! Owns parsing and checking only (capability names; the URL policy's lists, whose patterns the
//! Broker checks; the output and upload directories: absolute,
//! owned by this user, not writable by others, not a symlink); it starts nothing and writes no
//! file.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

pub use crate::adapter::exports::{DirProblem, check_private_dir};
use crate::protocol::negotiate::{CAPABILITIES, DEFAULT_CAPABILITIES};

/// What one MCP server process was started with.
#[derive(Debug, Clone, PartialEq)]
pub struct McpOptions {
    /// `--browser`: the initial browser preference passed to the bridge.
    pub browser: Option<String>,
    /// `--headless`: start the Broker-managed headless Chromium when no candidate is ready.
    pub headless: bool,
    /// `--output-dir`: where PDFs, full-size originals and the downloads the host asks for are
    /// exported (absolute).
    pub output_dir: PathBuf,
    /// `--upload-dir` (repeatable): directories whose regular files the import tool may copy
    /// into protected storage for `browser_upload`, symlinks resolved. Empty: no import tool.
    pub upload_dirs: Vec<PathBuf>,
    /// `--capabilities`: what to request in `initialize`. Default: the contract's six, so an MCP
    /// host sees no network-data, network-control or eval tool unless its user names them.
    pub capabilities: Vec<String>,
    /// `--structured`: results also carry `structuredContent` (the Command's result) and
    /// `tools/list` the output schemas. Off: text content only, the lean form.
    pub structured: bool,
    /// `--url-allow` / `--url-block`: the `urlPolicy` of the session's Workspace
    /// ([`url_policy`]), checked by the Broker when the Workspace is created.
    pub url_policy: Option<Value>,
}

/// The `urlPolicy` `{allow, block}` of the flags' patterns (each list trimmed, sorted, without
/// duplicates); `None` when both are empty.
pub fn url_policy(allow: &[String], block: &[String]) -> Option<Value> {
    let list = |patterns: &[String]| -> Vec<String> {
        let mut list: Vec<String> = patterns
            .iter()
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty())
            .collect();
        list.sort();
        list.dedup();
        list
    };
    let (allow, block) = (list(allow), list(block));
    (!allow.is_empty() || !block.is_empty()).then(|| json!({"allow": allow, "block": block}))
}

impl McpOptions {
    /// From the raw flag values. A relative output directory is taken relative to `cwd`; the
    /// default is a fresh, unpredictably named directory under the system temporary directory,
    /// created owner-only when the first file is exported. An existing output directory and
    /// every upload directory must pass [`check_private_dir`]; upload directories must be
    /// absolute and are kept with their symlinks resolved.
    pub fn new(
        browser: Option<String>,
        headless: bool,
        output_dir: Option<PathBuf>,
        upload_dirs: &[PathBuf],
        capabilities: Option<&str>,
        cwd: &Path,
    ) -> Result<McpOptions, String> {
        let output_dir = match output_dir {
            Some(dir) => {
                let dir = match dir.is_absolute() {
                    true => dir,
                    false => cwd.join(dir),
                };
                match check_private_dir(&dir) {
                    Ok(()) | Err(DirProblem::Missing) => dir,
                    Err(problem) => {
                        return Err(format!("--output-dir {}: {problem}", dir.display()));
                    }
                }
            }
            // Unpredictable, so nobody can plant a directory or symlink there in advance.
            None => std::env::temp_dir().join(format!(
                "browser-pilot-mcp-{}",
                crate::adapter::random_hex(8)
            )),
        };
        let mut uploads = Vec::new();
        for dir in upload_dirs {
            if !dir.is_absolute() {
                return Err(format!(
                    "--upload-dir {}: the directory must be an absolute path",
                    dir.display()
                ));
            }
            check_private_dir(dir)
                .and_then(|()| dir.canonicalize().map_err(DirProblem::Unreadable))
                .map(|resolved| uploads.push(resolved))
                .map_err(|problem| format!("--upload-dir {}: {problem}", dir.display()))?;
        }
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
            upload_dirs: uploads,
            capabilities,
            structured: false,
            url_policy: None,
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
        let options = McpOptions::new(None, false, Some("out".into()), &[], None, cwd).unwrap();
        assert_eq!(options.output_dir, Path::new("/work/here/out"));
        assert_eq!(options.capabilities, DEFAULT_CAPABILITIES);
        let options = McpOptions::new(
            None,
            true,
            Some("/abs".into()),
            &[],
            Some("observation.read, browser.control,observation.read"),
            cwd,
        )
        .unwrap();
        assert_eq!(options.output_dir, Path::new("/abs"));
        assert_eq!(
            options.capabilities,
            vec!["observation.read", "browser.control"]
        );
        assert!(McpOptions::new(None, false, None, &[], Some("eval.everything"), cwd).is_err());
        assert!(McpOptions::new(None, false, None, &[], Some(" , "), cwd).is_err());
        // `+name` adds an extra to the six defaults; mixing the two forms is refused.
        let options = McpOptions::new(
            None,
            false,
            None,
            &[],
            Some("+page.eval, +network.read"),
            cwd,
        )
        .unwrap();
        let mut want: Vec<&str> = DEFAULT_CAPABILITIES.to_vec();
        want.extend(["page.eval", "network.read"]);
        assert_eq!(options.capabilities, want);
        assert!(
            McpOptions::new(None, false, None, &[], Some("+page.eval,event.read"), cwd).is_err()
        );
        assert!(McpOptions::new(None, false, None, &[], Some("+made.up"), cwd).is_err());
    }

    #[test]
    fn url_policy_flags_make_one_policy() {
        let patterns = |list: &[&str]| list.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>();
        assert_eq!(url_policy(&[], &patterns(&[" ", ""])), None);
        assert_eq!(
            url_policy(
                &patterns(&["https://b.test", "https://a.test", "https://b.test"]),
                &patterns(&[" http://127.0.0.1:9 "])
            ),
            Some(
                json!({"allow": ["https://a.test", "https://b.test"], "block": ["http://127.0.0.1:9"]})
            )
        );
    }

    #[cfg(unix)]
    #[test]
    fn host_directories_are_private_real_directories() {
        use std::os::unix::fs::PermissionsExt;
        let scratch = tempfile::tempdir().unwrap();
        let cwd = scratch.path();
        let own = cwd.join("own");
        std::fs::create_dir(&own).unwrap();
        std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o700)).unwrap();
        let options = McpOptions::new(
            None,
            false,
            Some(own.clone()),
            std::slice::from_ref(&own),
            None,
            cwd,
        )
        .unwrap();
        assert_eq!(options.upload_dirs, vec![own.canonicalize().unwrap()]);
        let link = cwd.join("link");
        std::os::unix::fs::symlink(&own, &link).unwrap();
        let open = cwd.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        for refused in [&link, &open] {
            let as_output = McpOptions::new(None, false, Some(refused.clone()), &[], None, cwd);
            assert!(as_output.is_err(), "{}", refused.display());
            let as_upload =
                McpOptions::new(None, false, None, std::slice::from_ref(refused), None, cwd);
            assert!(as_upload.is_err(), "{}", refused.display());
        }
        // A missing output directory is created later; a missing or relative upload one is not.
        assert!(McpOptions::new(None, false, Some(cwd.join("later")), &[], None, cwd).is_ok());
        assert!(McpOptions::new(None, false, None, &[cwd.join("none")], None, cwd).is_err());
        assert!(McpOptions::new(None, false, None, &["own".into()], None, cwd).is_err());
    }
}
