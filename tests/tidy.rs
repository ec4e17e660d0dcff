//! Tidy: the code-shape rules of `docs/architecture.md` that a reviewer would otherwise check by
//! hand, run as a test over the source text of `src/` and `tests/integration/` (nothing is
//! compiled or executed).
//!
//! - every file under `src/` opens with a `//!` paragraph;
//! - a module imports only the modules the edge table in `docs/architecture.md` allows;
//! - CDP method and event names appear as string literals only under `src/cdp/`;
//! - JavaScript sent to a page comes only from `src/page/js/`, and only the `PageScript` runner
//!   (`src/page/run.rs`) sends `Runtime.evaluate` / `Runtime.callFunctionOn` outside `src/cdp/`;
//! - only the action pipeline (`src/tools/act.rs`) runs the dialog race and the late-effect
//!   watch, so no action tool repeats the pipeline's steps;
//! - no tool calls `page::run` itself: page scripts run through `PageContext` /
//!   `ControlledTab` (`src/tools/tab.rs`);
//! - only `src/tools/tab.rs` and `src/tools/context.rs` import `crate::session`: a tool reaches
//!   the tab's books through `ControlledTab`'s verbs and names session types through those two
//!   files' re-exports;
//! - only those two files of `src/tools/` reach the browser connection (`.live()`): a tool
//!   sends CDP calls through its Command's watched handle, never the unwatched client;
//! - every `.rs` file under `tests/integration/` is declared by its parent module (`main.rs`, or
//!   the `mod.rs` of its directory): an undeclared file would never compile, its tests never run.
//!
//! The CDP-name and JavaScript literal rules are ratchets while the tool seam moves code into
//! place: `CDP_LITERALS` and `JS_LITERALS` list the files that still hold such literals and how
//! many; a file may not gain any, a new file may not start, and a file that lost some must have
//! its allowance lowered (so the lists only shrink). `TIDY_PRINT=1 cargo test --test tidy -- --nocapture` prints the
//! current counts. Test modules (`#[cfg(test)] mod ...` at the end of a file) are exempt.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Files that still name CDP methods or events outside `src/cdp/`, and how many literals.
const CDP_LITERALS: &[(&str, usize)] = &[];

/// Files that still hold JavaScript in Rust string literals, and how many literals.
const JS_LITERALS: &[(&str, usize)] = &[];

/// Where page JavaScript may live: the library and the `PageScript` mechanism that installs it
/// and calls into it (its call stubs are a line each).
const JS_HOMES: &[&str] = &["src/page/js/", "src/page/script.rs"];

/// The CDP domains whose `Domain.method` names count as CDP literals.
const CDP_DOMAINS: &[&str] = &[
    "Accessibility",
    "Browser",
    "CSS",
    "DOM",
    "DOMSnapshot",
    "Emulation",
    "Fetch",
    "IO",
    "Input",
    "Log",
    "Network",
    "Overlay",
    "Page",
    "Runtime",
    "Security",
    "Storage",
    "Target",
];

/// The files outside `src/cdp/` that may send `Runtime.evaluate` / `Runtime.callFunctionOn`:
/// the `PageScript` runner. (The one main-world path, `CdpClient::evaluate`, lives in `src/cdp/`
/// for the later `browser.eval`.)
const SCRIPT_RUNNERS: &[&str] = &["src/page/run.rs"];

/// The action pipeline's steps that no action tool takes itself: the dialog race around an
/// input and the late-effect watch after the evidence.
const PIPELINE_STEPS: &[&str] = &["dispatch_final", "watch_late_effects"];

/// The one file that takes them.
const PIPELINE_HOME: &str = "src/tools/act.rs";

/// The one file of `src/tools/` that calls `page::run`: the page context every tool runs its
/// page scripts through.
const PAGE_SCRIPT_SEAM: &str = "src/tools/tab.rs";

/// The files of `src/tools/` that may import `crate::session` and reach the browser
/// connection (`.live()`): the tab context and the tool environment.
const SESSION_SEAM: &[&str] = &["src/tools/tab.rs", "src/tools/context.rs"];

/// Fragments that mark a string literal as JavaScript source.
const JS_MARKERS: &[&str] = &[
    "function(",
    "function (",
    "=>",
    "document.",
    "window.",
    "querySelector",
];

/// One source file: its path relative to the crate root and its text.
struct Source {
    path: String,
    text: String,
}

/// What the lexer keeps of a file: the code with comments and literals blanked, and the string
/// literals with their line numbers. Test modules at the end of the file are cut off.
struct Lexed {
    code: String,
    literals: Vec<(usize, String)>,
}

fn lex(text: &str) -> Lexed {
    let text = match text.find("\n#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => text,
    };
    let bytes = text.as_bytes();
    let mut code = String::with_capacity(text.len());
    let mut literals = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            i += end;
        } else if rest.starts_with("/*") {
            let end = rest.find("*/").map_or(rest.len(), |at| at + 2);
            line += rest[..end].matches('\n').count();
            i += end;
        } else if let Some((len, value)) = raw_string(rest) {
            literals.push((line, value.to_owned()));
            line += rest[..len].matches('\n').count();
            code.push_str("\"\"");
            i += len;
        } else if bytes[i] == b'"' {
            let (len, value) = quoted_string(rest);
            literals.push((line, value));
            line += rest[..len].matches('\n').count();
            code.push_str("\"\"");
            i += len;
        } else if bytes[i] == b'\'' && char_literal_len(rest).is_some() {
            i += char_literal_len(rest).unwrap();
            code.push_str("' '");
        } else {
            let c = rest.chars().next().unwrap();
            if c == '\n' {
                line += 1;
            }
            code.push(c);
            i += c.len_utf8();
        }
    }
    Lexed { code, literals }
}

/// `r"..."`, `r#"..."#` (and `br` forms): the whole length and the contents.
fn raw_string(rest: &str) -> Option<(usize, &str)> {
    let start = match (rest.starts_with("br"), rest.starts_with('r')) {
        (true, _) => 2,
        (false, true) => 1,
        _ => return None,
    };
    let hashes = rest[start..].bytes().take_while(|b| *b == b'#').count();
    if rest.as_bytes().get(start + hashes) != Some(&b'"') {
        return None;
    }
    let open = start + hashes + 1;
    let close = format!("\"{}", "#".repeat(hashes));
    let end = rest[open..].find(&close)?;
    Some((open + end + close.len(), &rest[open..open + end]))
}

/// A `"..."` literal with escapes: the whole length and the (unescaped enough) contents.
fn quoted_string(rest: &str) -> (usize, String) {
    let mut value = String::new();
    let mut chars = rest.char_indices().skip(1);
    while let Some((at, c)) = chars.next() {
        match c {
            '\\' => {
                if let Some((_, escaped)) = chars.next() {
                    value.push(match escaped {
                        'n' => '\n',
                        other => other,
                    });
                }
            }
            '"' => return (at + 1, value),
            other => value.push(other),
        }
    }
    (rest.len(), value)
}

/// The length of a char literal (`'a'`, `'\n'`, `'\''`) at the start, or None for a lifetime.
fn char_literal_len(rest: &str) -> Option<usize> {
    let mut chars = rest.char_indices().skip(1);
    let (_, first) = chars.next()?;
    let after = match first {
        '\\' => {
            let (_, _) = chars.next()?;
            // `\u{...}` and `\x..` run to the closing quote.
            chars.find(|(_, c)| *c == '\'')?
        }
        _ => chars.next()?,
    };
    match after {
        (at, '\'') => Some(at + 1),
        _ => None,
    }
}

/// The top-level module a file belongs to (`src/store/db.rs` -> `store`), or None for the crate
/// root and the binaries.
fn module_of(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("src/")?;
    let first = rest.split('/').next()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    match name {
        "lib" | "main" | "bin" => None,
        name => Some(name),
    }
}

/// Every `crate::module` a file's code names.
fn imports(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let preceded_by_ident = code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        if preceded_by_ident {
            continue;
        }
        let name: String = code[at + "crate::".len()..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if !name.is_empty() {
            found.insert(name);
        }
    }
    found
}

/// The edge table: the fenced block after the "### Module edges" heading of
/// `docs/architecture.md`, one `a, b -> c, d` line per row, `(nothing)` for none, and
/// parenthesised notes ignored.
fn allowed_edges(doc: &str) -> BTreeMap<String, BTreeSet<String>> {
    let start = doc
        .find("### Module edges")
        .expect("docs/architecture.md has a \"### Module edges\" section");
    let block = &doc[start..];
    let open = block.find("```").expect("the edge table is a fenced block") + 3;
    let close = open + block[open..].find("```").expect("the fence closes");
    let mut table = BTreeMap::new();
    for row in block[open..close].lines() {
        let Some((from, to)) = row.split_once("->") else {
            continue;
        };
        let to = match to.find('(') {
            Some(at) => &to[..at],
            None => to,
        };
        let targets: BTreeSet<String> = to
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map(str::to_owned)
            .collect();
        for module in from.split(',').map(str::trim) {
            table
                .entry(module.to_owned())
                .or_insert_with(BTreeSet::new)
                .extend(targets.iter().cloned());
        }
    }
    table
}

/// The ratchet allowances a check runs with.
struct Allowances {
    cdp: &'static [(&'static str, usize)],
    js: &'static [(&'static str, usize)],
}

const TREE: Allowances = Allowances {
    cdp: CDP_LITERALS,
    js: JS_LITERALS,
};

const NONE: Allowances = Allowances { cdp: &[], js: &[] };

/// Every broken rule, as a line a developer can act on.
fn violations(sources: &[Source], edge_doc: &str, allowances: &Allowances) -> Vec<String> {
    let table = allowed_edges(edge_doc);
    let mut problems = Vec::new();
    let mut cdp_counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut js_counts: BTreeMap<&str, usize> = BTreeMap::new();
    for source in sources {
        let first = source.text.lines().find(|line| !line.trim().is_empty());
        if !first.is_some_and(|line| line.starts_with("//!")) {
            problems.push(format!(
                "{}: the file must open with a `//!` paragraph",
                source.path
            ));
        }
        let lexed = lex(&source.text);
        if let Some(module) = module_of(&source.path) {
            let allowed = table.get(module);
            for import in imports(&lexed.code) {
                if import == module || allowed.is_some_and(|targets| targets.contains(&import)) {
                    continue;
                }
                problems.push(format!(
                    "{}: {module} -> {import} is not in the edge table of docs/architecture.md",
                    source.path
                ));
            }
        }
        let in_cdp = source.path.starts_with("src/cdp/");
        if !in_cdp && !SCRIPT_RUNNERS.contains(&source.path.as_str()) {
            for runner in ["CallFunctionOn", "Evaluate", ".evaluate("] {
                if names(&lexed.code, runner) {
                    problems.push(format!(
                        "{}: runs page JavaScript itself ({runner}): go through page::PageScript (src/page/run.rs)",
                        source.path
                    ));
                }
            }
        }
        if source.path != PIPELINE_HOME {
            for step in PIPELINE_STEPS {
                if names(&lexed.code, step) {
                    problems.push(format!(
                        "{}: takes the action pipeline's step {step}: only {PIPELINE_HOME} does (implement ActionTool)",
                        source.path
                    ));
                }
            }
        }
        if source.path.starts_with("src/tools/")
            && source.path != PAGE_SCRIPT_SEAM
            && names(&lexed.code, "page::run")
        {
            problems.push(format!(
                "{}: calls page::run itself: run page scripts through PageContext or ControlledTab ({PAGE_SCRIPT_SEAM})",
                source.path
            ));
        }
        let in_tools = source.path.starts_with("src/tools/");
        if in_tools && !SESSION_SEAM.contains(&source.path.as_str()) {
            if imports(&lexed.code).contains("session") {
                problems.push(format!(
                    "{}: imports crate::session: use ControlledTab's verbs and the re-exports of src/tools/tab.rs or src/tools/context.rs",
                    source.path
                ));
            }
            if names(&lexed.code, ".live(") {
                problems.push(format!(
                    "{}: reaches the browser connection (.live()): send CDP calls through the Command's watched handle (ControlledTab, TabCalls::watched)",
                    source.path
                ));
            }
        }
        let in_js = JS_HOMES.iter().any(|home| source.path.starts_with(home));
        for (_, literal) in &lexed.literals {
            if !in_cdp && is_cdp_name(literal) {
                *cdp_counts.entry(&source.path).or_default() += 1;
            }
            if !in_js && is_javascript(literal) {
                *js_counts.entry(&source.path).or_default() += 1;
            }
        }
    }
    ratchet(
        "CDP method or event name literals",
        allowances.cdp,
        &cdp_counts,
        &mut problems,
    );
    ratchet(
        "JavaScript string literals",
        allowances.js,
        &js_counts,
        &mut problems,
    );
    problems
}

/// Whether a literal looks like page JavaScript: a marker, and more than a dotted event name
/// such as `document.changed`.
fn is_javascript(literal: &str) -> bool {
    let event_name = literal
        .chars()
        .all(|c| c.is_ascii_lowercase() || c == '.' || c == '_');
    !event_name && JS_MARKERS.iter().any(|marker| literal.contains(marker))
}

/// Whether code names `word` as a whole identifier (or, for `.evaluate(`, as that call).
fn names(code: &str, word: &str) -> bool {
    code.match_indices(word).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + word.len()..].chars().next();
        let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        word.starts_with('.') || (!ident(before) && !ident(after))
    })
}

fn is_cdp_name(literal: &str) -> bool {
    let Some((domain, member)) = literal.split_once('.') else {
        return false;
    };
    CDP_DOMAINS.contains(&domain)
        && member
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase())
        && member.chars().all(|c| c.is_ascii_alphanumeric())
}

fn ratchet(
    what: &str,
    allowance: &[(&str, usize)],
    counts: &BTreeMap<&str, usize>,
    problems: &mut Vec<String>,
) {
    let allowed: BTreeMap<&str, usize> = allowance.iter().copied().collect();
    let files: BTreeSet<&str> = allowed.keys().chain(counts.keys()).copied().collect();
    for file in files {
        let found = counts.get(file).copied().unwrap_or(0);
        let limit = allowed.get(file).copied().unwrap_or(0);
        if found > limit {
            problems.push(format!(
                "{file}: {found} {what}, {limit} allowed: move them to their module"
            ));
        } else if found < limit {
            problems.push(format!(
                "{file}: {found} {what}, the ratchet still allows {limit}: lower it in tests/tidy.rs"
            ));
        }
    }
}

fn read_sources(root: &Path) -> Vec<Source> {
    read_rust_files(root, "src")
}

/// Every `.rs` file under `root/dir`, in path order, with paths relative to `root`.
fn read_rust_files(root: &Path, dir: &str) -> Vec<Source> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<Source>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                out.push(Source {
                    path: path
                        .strip_prefix(root)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                    text: std::fs::read_to_string(&path).unwrap(),
                });
            }
        }
    }
    let mut sources = Vec::new();
    walk(&root.join(dir), root, &mut sources);
    sources
}

/// The process tests' one binary: its crate root and module tree.
const TEST_BINARY: &str = "tests/integration";

/// The file that declares the modules of directory `dir` of the test binary.
fn module_owner(dir: &str) -> String {
    if dir == TEST_BINARY {
        format!("{dir}/main.rs")
    } else {
        format!("{dir}/mod.rs")
    }
}

/// Every file of the test binary that its parent module does not declare with `mod NAME;`.
fn undeclared_test_modules(files: &[Source]) -> Vec<String> {
    let codes: BTreeMap<&str, String> = files
        .iter()
        .map(|file| (file.path.as_str(), lex(&file.text).code))
        .collect();
    let mut problems = Vec::new();
    for file in files {
        let (dir, name) = file.path.rsplit_once('/').unwrap_or(("", &file.path));
        let (owner, module) = match name {
            "main.rs" if dir == TEST_BINARY => continue,
            "mod.rs" => {
                let (up, module) = dir.rsplit_once('/').unwrap_or(("", dir));
                (module_owner(up), module)
            }
            other => (module_owner(dir), other.trim_end_matches(".rs")),
        };
        let declaration = format!("{module};");
        let declared = codes.get(owner.as_str()).is_some_and(|code| {
            let words: Vec<&str> = code.split_whitespace().collect();
            words
                .windows(2)
                .any(|pair| pair[0] == "mod" && pair[1] == declaration)
        });
        if !declared {
            problems.push(format!(
                "{}: not declared in {owner}: add `mod {module};` (an undeclared file never runs)",
                file.path
            ));
        }
    }
    problems
}

#[test]
fn every_file_of_the_test_binary_is_a_declared_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = read_rust_files(root, TEST_BINARY);
    assert!(files.len() > 20, "read the test binary's files");
    let problems = undeclared_test_modules(&files);
    assert!(problems.is_empty(), "tidy:\n{}", problems.join("\n"));
}

/// The rule itself: a file nobody declares is reported, a declared one (also `pub mod`, also
/// in a directory's `mod.rs`) is not, and a declaration in a comment does not count.
#[test]
fn an_undeclared_test_file_is_reported() {
    let file = |path: &str, text: &str| Source {
        path: format!("{TEST_BINARY}/{path}"),
        text: text.to_owned(),
    };
    let tree = [
        file(
            "main.rs",
            "//! root\nmod support;\nmod network;\n// mod planted;\n",
        ),
        file("network.rs", "//! x\n"),
        file("planted.rs", "//! x\n"),
        file("support/mod.rs", "//! h\npub mod chromium;\n"),
        file("support/chromium.rs", "//! x\n"),
        file("support/stray.rs", "//! x\n"),
        file("orphan/mod.rs", "//! x\n"),
    ];
    assert_eq!(
        undeclared_test_modules(&tree),
        [
            "tests/integration/planted.rs: not declared in tests/integration/main.rs: add `mod planted;` (an undeclared file never runs)",
            "tests/integration/support/stray.rs: not declared in tests/integration/support/mod.rs: add `mod stray;` (an undeclared file never runs)",
            "tests/integration/orphan/mod.rs: not declared in tests/integration/main.rs: add `mod orphan;` (an undeclared file never runs)",
        ]
    );
}

#[test]
fn the_source_tree_keeps_the_architecture_rules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sources = read_sources(root);
    assert!(sources.len() > 50, "read the source tree");
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    if std::env::var_os("TIDY_PRINT").is_some() {
        for source in &sources {
            let lexed = lex(&source.text);
            let cdp = lexed
                .literals
                .iter()
                .filter(|(_, l)| is_cdp_name(l))
                .count();
            let js = lexed
                .literals
                .iter()
                .filter(|(_, l)| is_javascript(l))
                .count();
            if cdp + js > 0 {
                println!("{}: cdp {cdp}, js {js}", source.path);
            }
        }
    }
    let problems = violations(&sources, &doc, &TREE);
    assert!(problems.is_empty(), "tidy:\n{}", problems.join("\n"));
}

/// The checker itself: each rule fires on a tree that breaks it, and only there.
#[test]
fn each_rule_reports_a_tree_that_breaks_it() {
    let doc = "### Module edges\n\n```\nstore -> (nothing)\ntools, page -> cdp, store   (note)\ncdp -> (nothing)\n```\n";
    let file = |path: &str, text: &str| Source {
        path: path.to_owned(),
        text: text.to_owned(),
    };
    let clean = [
        file(
            "src/tools/a.rs",
            "//! ok\nuse crate::cdp::X;\nuse crate::store::Y; // crate::page in a comment\n",
        ),
        file(
            "src/cdp/page.rs",
            "//! ok\nconst NAVIGATE: &str = \"Page.navigate\";\n",
        ),
        file(
            "src/store/b.rs",
            "//! ok\nfn f() -> &'static str { \"SELECT 1\" }\n\n#[cfg(test)]\nmod tests {\n    use crate::tools::T;\n    const E: &str = \"Input.dispatchKeyEvent\";\n}\n",
        ),
    ];
    assert_eq!(violations(&clean, doc, &NONE), Vec::<String>::new());

    let runs_scripts = [file(
        "src/tools/g.rs",
        "//! x\nuse crate::cdp::runtime::CallFunctionOn;\nfn f(c: &C) { c.evaluate(e); }\n",
    )];
    assert_eq!(
        violations(&runs_scripts, doc, &NONE),
        [
            "src/tools/g.rs: runs page JavaScript itself (CallFunctionOn): go through page::PageScript (src/page/run.rs)",
            "src/tools/g.rs: runs page JavaScript itself (.evaluate(): go through page::PageScript (src/page/run.rs)",
        ]
    );
    let runner_may = [file(
        "src/page/run.rs",
        "//! x\nfn f() { let c = CallFunctionOn { x: 1 }; let e = EvaluateLater; }\n",
    )];
    assert_eq!(violations(&runner_may, doc, &NONE), Vec::<String>::new());

    let pipeline_step = [
        file(
            "src/tools/h.rs",
            "//! x\nasync fn f() { let d = dispatch_final(e, t, s, f).await; watch_late_effects(e, s, g, l, a); }\n",
        ),
        file(
            "src/tools/act.rs",
            "//! x\nasync fn dispatch_final() {}\nfn watch_late_effects() {}\nfn g() { dispatch_final(); }\n",
        ),
    ];
    assert_eq!(
        violations(&pipeline_step, doc, &NONE),
        [
            "src/tools/h.rs: takes the action pipeline's step dispatch_final: only src/tools/act.rs does (implement ActionTool)",
            "src/tools/h.rs: takes the action pipeline's step watch_late_effects: only src/tools/act.rs does (implement ActionTool)",
        ]
    );

    let page_run = [
        file(
            "src/tools/i.rs",
            "//! x\nasync fn f() { page::run(c, s, x, &S, t).await; page::run_later(); }\n",
        ),
        file(
            "src/tools/tab.rs",
            "//! x\nasync fn g() { page::run(c, s, x, &S, t).await; }\n",
        ),
        file(
            "src/page/run.rs",
            "//! x\nasync fn h() { page::run(c, s, x, &S, t).await; }\n",
        ),
    ];
    assert_eq!(
        violations(&page_run, doc, &NONE),
        [
            "src/tools/i.rs: calls page::run itself: run page scripts through PageContext or ControlledTab (src/tools/tab.rs)"
        ]
    );

    let doc_with_session = "### Module edges\n\n```\ntools -> session\nsession -> (nothing)\n```\n";
    let session_seam = [
        file(
            "src/tools/j.rs",
            "//! x\nuse crate::session::TabGuard;\nfn f(e: &E) { let c = e.browser.live(); let l = e.lively(); }\n",
        ),
        file(
            "src/tools/k.rs",
            "//! x\nfn f() { let t = crate::session::TabState::default(); }\n",
        ),
        file(
            "src/tools/tab.rs",
            "//! x\nuse crate::session::TabGuard;\nfn g(e: &E) { e.browser.live(); }\n",
        ),
        file(
            "src/tools/context.rs",
            "//! x\nuse crate::session::BrowserService;\nfn h(b: &B) { b.live(); }\n",
        ),
        file(
            "src/tools/l.rs",
            "//! x\nuse super::tab::TabState; // crate::session in a comment\n\n#[cfg(test)]\nmod tests {\n    fn t() { crate::session::TabState::default(); }\n}\n",
        ),
        file("src/session/m.rs", "//! x\nfn m(s: &S) { s.live(); }\n"),
    ];
    assert_eq!(
        violations(&session_seam, doc_with_session, &NONE),
        [
            "src/tools/j.rs: imports crate::session: use ControlledTab's verbs and the re-exports of src/tools/tab.rs or src/tools/context.rs",
            "src/tools/j.rs: reaches the browser connection (.live()): send CDP calls through the Command's watched handle (ControlledTab, TabCalls::watched)",
            "src/tools/k.rs: imports crate::session: use ControlledTab's verbs and the re-exports of src/tools/tab.rs or src/tools/context.rs",
        ]
    );

    let forbidden_edge = [file("src/store/c.rs", "//! x\nuse crate::tools::Thing;\n")];
    assert_eq!(
        violations(&forbidden_edge, doc, &NONE),
        ["src/store/c.rs: store -> tools is not in the edge table of docs/architecture.md"]
    );

    let no_header = [file("src/cdp/d.rs", "// not a module doc\nfn f() {}\n")];
    assert_eq!(
        violations(&no_header, doc, &NONE),
        ["src/cdp/d.rs: the file must open with a `//!` paragraph"]
    );

    let cdp_outside = [file(
        "src/tools/e.rs",
        "//! x\nfn f() { call(\"Input.dispatchKeyEvent\", r#\"Page.navigate\"#); }\n",
    )];
    assert_eq!(
        violations(&cdp_outside, doc, &NONE),
        [
            "src/tools/e.rs: 2 CDP method or event name literals, 0 allowed: move them to their module"
        ]
    );

    let js_outside = [file(
        "src/tools/f.rs",
        "//! x\nconst S: &str = \"() => document.title\";\n",
    )];
    assert_eq!(
        violations(&js_outside, doc, &NONE),
        ["src/tools/f.rs: 1 JavaScript string literals, 0 allowed: move them to their module"]
    );
}
