//! Shaping one Observation for the agent, after the page returned it: the diff against an
//! earlier Observation of the same document (added / changed with field names / removed refs,
//! unchanged and moved counts), the compact text form (one line per element), and the token
//! estimate with the budget that keeps the most useful elements. Pure transforms of decoded
//! page results: no I/O, no page scripts, and no choice of which Observation is the base or
//! whether it is still valid (the tools layer decides that from its records).

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::observe::{Checked, ObservedElement, Role, Sections};

/// Bytes of output counted as one token by [`estimate_tokens`], in tenths: 2.7 bytes per
/// token. Measured against two common model tokenizers on the peer harness's pages
/// (docs/observation.md, "Estimator error"): JSON Observations run 3.0-3.2 bytes per token,
/// compact lines 2.75 (refs and coordinates are digits), page text 3.2-3.6, so 2.7 keeps the
/// estimate at or above the real count for every form but tiny search results (4% under).
pub const TENTHS_OF_BYTES_PER_TOKEN: usize = 27;

/// Smallest accepted `maxTokens`: below it not even the fixed fields of a result fit.
pub const MIN_MAX_TOKENS: u32 = 100;

/// Largest accepted `maxTokens`: about 16 MiB of output, the largest `maxBytes`, in tokens.
pub const MAX_MAX_TOKENS: u32 = 6_000_000;

/// The documented token estimate of `bytes` bytes of output (UTF-8, as sent).
pub fn estimate_tokens(bytes: usize) -> u64 {
    (bytes * 10).div_ceil(TENTHS_OF_BYTES_PER_TOKEN) as u64
}

/// The output bytes a token budget allows (the most whose estimate stays within it).
pub fn budget_bytes(max_tokens: u32) -> usize {
    max_tokens as usize * TENTHS_OF_BYTES_PER_TOKEN / 10
}

/// How an Observation's elements are returned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ObservationFormat {
    /// Objects with named fields in `elements` (the contract's shape).
    #[default]
    Json,
    /// One short line per element in the string `compact`.
    Compact,
}

/// What changed between two Observations of one document, as indices into the current
/// elements (document order) and refs of the base.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diff {
    /// Current elements whose ref the base did not have.
    pub added: Vec<usize>,
    /// Current elements whose ref the base had with other field values, and those fields.
    pub changed: Vec<(usize, Vec<&'static str>)>,
    /// Refs of the base that the current Observation does not return.
    pub removed: Vec<u32>,
    /// Elements in both with the same fields (a change of `bounds` alone counts here).
    pub unchanged: u64,
    /// Of the unchanged, those whose `bounds` moved or resized.
    pub moved: u64,
}

impl Diff {
    /// The current elements the agent must be sent (added and changed), in document order.
    pub fn delta(&self) -> Vec<usize> {
        let mut indices: Vec<usize> = self
            .added
            .iter()
            .copied()
            .chain(self.changed.iter().map(|(index, _)| *index))
            .collect();
        indices.sort_unstable();
        indices
    }
}

/// The fields of `current` that differ from `base` (same ref), in wire names. `bounds` is
/// left out: layout shifts move many elements at once and are counted as `moved`.
pub fn changed_fields(base: &ObservedElement, current: &ObservedElement) -> Vec<&'static str> {
    let mut fields = Vec::new();
    let mut note = |differs: bool, name: &'static str| {
        if differs {
            fields.push(name);
        }
    };
    note(base.role != current.role, "role");
    note(base.name != current.name, "name");
    note(base.value != current.value, "value");
    note(base.value_length != current.value_length, "valueLength");
    note(base.sensitive != current.sensitive, "sensitive");
    note(base.checked != current.checked, "checked");
    note(base.selected != current.selected, "selected");
    note(base.expanded != current.expanded, "expanded");
    note(base.pressed != current.pressed, "pressed");
    note(base.disabled != current.disabled, "disabled");
    note(base.focused != current.focused, "focused");
    note(base.required != current.required, "required");
    note(base.readonly != current.readonly, "readonly");
    note(base.level != current.level, "level");
    note(base.tag != current.tag, "tag");
    note(base.input_type != current.input_type, "inputType");
    note(base.href != current.href, "href");
    note(base.in_viewport != current.in_viewport, "inViewport");
    fields
}

/// Compares the current elements with the base's (both as the agent saw them, refs unique).
pub fn diff(base: &[ObservedElement], current: &[ObservedElement]) -> Diff {
    let by_ref: HashMap<u32, &ObservedElement> = base
        .iter()
        .map(|element| (element.element_ref, element))
        .collect();
    let mut result = Diff::default();
    let mut present = std::collections::HashSet::with_capacity(current.len());
    for (index, element) in current.iter().enumerate() {
        present.insert(element.element_ref);
        match by_ref.get(&element.element_ref) {
            None => result.added.push(index),
            Some(before) => {
                let fields = changed_fields(before, element);
                if fields.is_empty() {
                    result.unchanged += 1;
                    if before.bounds != element.bounds {
                        result.moved += 1;
                    }
                } else {
                    result.changed.push((index, fields));
                }
            }
        }
    }
    result.removed = base
        .iter()
        .map(|element| element.element_ref)
        .filter(|element_ref| !present.contains(element_ref))
        .collect();
    result
}

/// Whether a role is something to act on (the budget keeps these before headings, images,
/// dialogs and alerts outside the viewport).
pub fn is_interactive(role: Role) -> bool {
    !matches!(
        role,
        Role::Heading | Role::Img | Role::Dialog | Role::AlertDialog | Role::Alert
    )
}

/// Which of `candidates` (indices, document order) fit in `budget` bytes when each costs
/// `size(index)`: elements in the viewport first, then interactive ones, then the rest, each
/// group in document order, stopping at the first that does not fit. Returns the kept
/// indices in document order and whether any was left out.
pub fn select_within(
    elements: &[ObservedElement],
    candidates: &[usize],
    budget: usize,
    size: impl FnMut(usize) -> usize,
) -> (Vec<usize>, bool) {
    let tier = |index: usize| {
        let element = &elements[index];
        if element.in_viewport {
            0
        } else if is_interactive(element.role) {
            1
        } else {
            2
        }
    };
    select_by_tier(candidates, budget, tier, size)
}

/// The budget selection behind [`select_within`] for any items: lower `tier` first, document
/// order within a tier, stopping at the first item that does not fit; kept indices in document
/// order and whether any was left out.
pub fn select_by_tier(
    candidates: &[usize],
    budget: usize,
    tier: impl Fn(usize) -> u8,
    mut size: impl FnMut(usize) -> usize,
) -> (Vec<usize>, bool) {
    let mut ordered: Vec<usize> = candidates.to_vec();
    ordered.sort_by_key(|index| (tier(*index), *index));
    let mut used = 0usize;
    let mut kept = Vec::with_capacity(ordered.len());
    for index in ordered {
        let cost = size(index);
        if used + cost > budget {
            break;
        }
        used += cost;
        kept.push(index);
    }
    let cut = kept.len() < candidates.len();
    kept.sort_unstable();
    (kept, cut)
}

/// The bytes of `text` once written as a JSON string's contents (escapes counted).
pub fn json_escaped_len(text: &str) -> usize {
    text.chars().map(json_char_len).sum()
}

fn json_char_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// The longest prefix of `text` whose JSON-escaped form fits in `budget` bytes.
pub fn cut_to_json_bytes(text: &str, budget: usize) -> &str {
    let mut used = 0usize;
    for (index, c) in text.char_indices() {
        used += json_char_len(c);
        if used > budget {
            return &text[..index];
        }
    }
    text
}

/// Rounds a coordinate to the compact form's 10 px grid.
fn coarse(value: i64) -> i64 {
    (value as f64 / 10.0).round() as i64 * 10
}

/// The wire name of a role (as serde writes it), without serializing.
pub fn role_word(role: Role) -> &'static str {
    match role {
        Role::Button => "button",
        Role::Link => "link",
        Role::Checkbox => "checkbox",
        Role::Radio => "radio",
        Role::Switch => "switch",
        Role::Tab => "tab",
        Role::MenuItem => "menuitem",
        Role::MenuItemCheckbox => "menuitemcheckbox",
        Role::MenuItemRadio => "menuitemradio",
        Role::Option => "option",
        Role::Combobox => "combobox",
        Role::Listbox => "listbox",
        Role::Textbox => "textbox",
        Role::Searchbox => "searchbox",
        Role::Slider => "slider",
        Role::Spinbutton => "spinbutton",
        Role::Dialog => "dialog",
        Role::AlertDialog => "alertdialog",
        Role::Alert => "alert",
        Role::Heading => "heading",
        Role::TreeItem => "treeitem",
        Role::Img => "img",
        Role::Clickable => "clickable",
    }
}

fn tristate_word(value: Checked, on: &'static str, off: &'static str) -> &'static str {
    match value {
        Checked::True => on,
        Checked::False => off,
        Checked::Mixed => "mixed",
    }
}

/// Writes one element as a compact line (without the newline):
/// `ref role[:level] "name" [="value"] [states…] [type=…] @x,y`, see docs/observation.md.
/// Names and values are JSON string literals, so a line never breaks inside one. A sensitive
/// field shows `sensitive len=N` and never a value; a cut value shows its full length and that
/// reading the ref with an offset returns the rest.
pub fn compact_line(element: &ObservedElement, out: &mut String) {
    let _ = write!(out, "{} {}", element.element_ref, role_word(element.role));
    if let Some(level) = element.level {
        let _ = write!(out, ":{level}");
    }
    out.push(' ');
    push_json_string(out, &element.name);
    if element.sensitive {
        out.push_str(" sensitive");
    } else if let Some(value) = &element.value {
        out.push_str(" =");
        push_json_string(out, value);
    }
    if let Some(length) = element.value_length {
        let _ = write!(out, " len={length}");
        if !element.sensitive {
            // A cut value: the rest is one read of the ref away.
            out.push_str(" cut: read the ref with offset for the rest");
        }
    }
    if let Some(checked) = element.checked {
        out.push(' ');
        out.push_str(tristate_word(checked, "checked", "unchecked"));
    }
    if let Some(pressed) = element.pressed {
        out.push(' ');
        out.push_str(tristate_word(pressed, "pressed", "unpressed"));
    }
    if element.selected == Some(true) {
        out.push_str(" selected");
    }
    match element.expanded {
        Some(true) => out.push_str(" expanded"),
        Some(false) => out.push_str(" collapsed"),
        None => {}
    }
    for (flag, word) in [
        (element.disabled, " disabled"),
        (element.focused, " focused"),
        (element.required, " required"),
        (element.readonly, " readonly"),
    ] {
        if flag {
            out.push_str(word);
        }
    }
    if let Some(input_type) = &element.input_type {
        let implied = matches!(
            input_type.as_str(),
            "text" | "checkbox" | "radio" | "number" | "range" | "search" | "submit" | "button"
        );
        if !implied {
            out.push_str(" type=");
            out.push_str(input_type);
        }
    }
    let _ = write!(
        out,
        " @{},{}",
        coarse(element.bounds.x),
        coarse(element.bounds.y)
    );
}

fn push_json_string(out: &mut String, text: &str) {
    match serde_json::to_string(text) {
        Ok(quoted) => out.push_str(&quoted),
        Err(_) => out.push_str("\"\""),
    }
}

/// The compact text of `elements[indices]`, one line each.
pub fn compact_text(elements: &[ObservedElement], indices: &[usize]) -> String {
    let mut out = String::with_capacity(indices.len() * 48);
    for (position, index) in indices.iter().enumerate() {
        if position > 0 {
            out.push('\n');
        }
        compact_line(&elements[*index], &mut out);
    }
    out
}

/// The compact text of `elements[indices]` with grouping lines: before an element whose
/// sections differ from the previous one's, `## ` and its chain of sections, outer first
/// (`## banner > navigation "Main"`; `## page` when it is in none); a frame as `## frame
/// "name"` where it stands. See docs/observation.md ("Compact form").
pub fn compact_text_sectioned(
    elements: &[ObservedElement],
    indices: &[usize],
    sections: &Sections,
) -> String {
    let mut out = String::with_capacity(indices.len() * 48);
    let mut frames = sections.frames.iter().peekable();
    let mut previous: Vec<usize> = Vec::new();
    let push = |out: &mut String, line: &dyn Fn(&mut String)| {
        if !out.is_empty() {
            out.push('\n');
        }
        line(out);
    };
    for index in indices {
        while let Some((_, name)) = frames.next_if(|(at, _)| at <= index) {
            push(&mut out, &|out| frame_line(name, out));
        }
        let chain = section_chain(sections, sections.of.get(*index).copied().unwrap_or(-1));
        if chain != previous {
            push(&mut out, &|out| chain_line(sections, &chain, out));
            previous = chain;
        }
        push(&mut out, &|out| compact_line(&elements[*index], out));
    }
    for (_, name) in frames {
        push(&mut out, &|out| frame_line(name, out));
    }
    out
}

/// The most bytes `sections`' grouping lines can add to a compact text, what a token budget
/// sets aside for them: elements come in document order, so a section's chain line is stated
/// when it is entered and its parent's (or `## page`) again at most once when it is left, plus
/// each frame.
pub fn sections_bytes(sections: &Sections) -> usize {
    let line_len = |innermost: i64| {
        let mut line = String::from("\n");
        chain_line(sections, &section_chain(sections, innermost), &mut line);
        line.len()
    };
    let mut total = line_len(-1);
    for (start, (_, _, parent)) in sections.list.iter().enumerate() {
        total += line_len(start as i64) + line_len(*parent);
    }
    for (_, name) in &sections.frames {
        let mut line = String::from("\n");
        frame_line(name, &mut line);
        total += line.len();
    }
    total
}

/// Section indices from the outermost to `innermost` (empty for -1 or a bad index).
fn section_chain(sections: &Sections, innermost: i64) -> Vec<usize> {
    let mut chain = Vec::new();
    let mut at = innermost;
    while let Ok(index) = usize::try_from(at) {
        if index >= sections.list.len() || chain.contains(&index) || chain.len() >= 8 {
            break;
        }
        chain.push(index);
        at = sections.list[index].2;
    }
    chain.reverse();
    chain
}

fn chain_line(sections: &Sections, chain: &[usize], out: &mut String) {
    out.push_str("##");
    if chain.is_empty() {
        out.push_str(" page");
    }
    for (position, index) in chain.iter().enumerate() {
        let (kind, name, _) = &sections.list[*index];
        out.push_str(match position {
            0 => " ",
            _ => " > ",
        });
        out.push_str(kind);
        if !name.is_empty() {
            out.push(' ');
            push_json_string(out, name);
        }
    }
}

fn frame_line(name: &str, out: &mut String) {
    out.push_str("## frame");
    if !name.is_empty() {
        out.push(' ');
        push_json_string(out, name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::Bounds;

    fn element(element_ref: u32, role: Role, name: &str) -> ObservedElement {
        ObservedElement {
            element_ref,
            role,
            name: name.to_owned(),
            value: None,
            value_length: None,
            sensitive: false,
            checked: None,
            selected: None,
            expanded: None,
            pressed: None,
            disabled: false,
            focused: false,
            required: false,
            readonly: false,
            level: None,
            tag: "button".to_owned(),
            input_type: None,
            href: None,
            bounds: Bounds {
                x: 14,
                y: 206,
                width: 80,
                height: 20,
            },
            in_viewport: true,
        }
    }

    #[test]
    fn role_words_match_the_wire() {
        for role in [
            Role::Button,
            Role::MenuItemCheckbox,
            Role::AlertDialog,
            Role::TreeItem,
            Role::Clickable,
        ] {
            assert_eq!(
                serde_json::to_value(role).unwrap(),
                serde_json::json!(role_word(role))
            );
        }
    }

    #[test]
    fn diff_names_added_changed_removed_and_counts_the_rest() {
        let base = vec![
            element(1, Role::Button, "A"),
            element(2, Role::Checkbox, "B"),
            element(3, Role::Link, "C"),
            element(4, Role::Link, "D"),
        ];
        let mut current = vec![
            element(1, Role::Button, "A"),
            element(9, Role::Button, "New"),
            element(2, Role::Checkbox, "B"),
            element(4, Role::Link, "D"),
        ];
        current[2].checked = Some(Checked::True);
        current[2].focused = true;
        current[3].bounds.y += 30;
        let found = diff(&base, &current);
        assert_eq!(found.added, vec![1]);
        assert_eq!(found.changed, vec![(2, vec!["checked", "focused"])]);
        assert_eq!(found.removed, vec![3]);
        assert_eq!((found.unchanged, found.moved), (2, 1));
        assert_eq!(found.delta(), vec![1, 2]);
    }

    #[test]
    fn compact_lines_carry_states_and_never_a_sensitive_value() {
        let mut password = element(7, Role::Textbox, "Password");
        password.sensitive = true;
        password.value_length = Some(7);
        password.input_type = Some("password".to_owned());
        password.required = true;
        let mut line = String::new();
        compact_line(&password, &mut line);
        assert_eq!(
            line,
            r#"7 textbox "Password" sensitive len=7 required type=password @10,210"#
        );
        let mut check = element(3, Role::Checkbox, "Say \"hi\"\nnow");
        check.checked = Some(Checked::False);
        check.disabled = true;
        let mut heading = element(4, Role::Heading, "Title");
        heading.level = Some(2);
        let mut field = element(5, Role::Textbox, "Email");
        field.value = Some("a@b.c".to_owned());
        field.input_type = Some("email".to_owned());
        let all = vec![check, heading, field];
        let text = compact_text(&all, &[0, 1, 2]);
        assert_eq!(
            text,
            "3 checkbox \"Say \\\"hi\\\"\\nnow\" unchecked disabled @10,210\n\
             4 heading:2 \"Title\" @10,210\n\
             5 textbox \"Email\" =\"a@b.c\" type=email @10,210"
        );
    }

    #[test]
    fn a_cut_value_says_how_to_read_the_rest() {
        let mut notes = element(9, Role::Textbox, "Notes");
        notes.value = Some("abc\u{2026}".to_owned());
        notes.value_length = Some(2_000);
        let mut line = String::new();
        compact_line(&notes, &mut line);
        assert_eq!(
            line,
            "9 textbox \"Notes\" =\"abc\u{2026}\" len=2000 cut: read the ref with offset for the rest @10,210"
        );
    }

    #[test]
    fn grouping_lines_state_each_change_of_sections_and_the_frames() {
        let all = vec![
            element(1, Role::Link, "Home"),
            element(2, Role::Heading, "Checkout"),
            element(3, Role::Textbox, "Email"),
            element(4, Role::Link, "Terms"),
            element(5, Role::Button, "Loose"),
        ];
        let sections = Sections {
            list: vec![
                ("banner".into(), String::new(), -1),
                ("navigation".into(), "Main".into(), 0),
                ("main".into(), String::new(), -1),
                ("contentinfo".into(), String::new(), -1),
            ],
            of: vec![1, 0, 2, 3, -1],
            frames: vec![(3, "Pay".into()), (9, String::new())],
        };
        let text = compact_text_sectioned(&all, &[0, 1, 2, 3, 4], &sections);
        assert_eq!(
            text,
            "## banner > navigation \"Main\"\n\
             1 link \"Home\" @10,210\n\
             ## banner\n\
             2 heading \"Checkout\" @10,210\n\
             ## main\n\
             3 textbox \"Email\" @10,210\n\
             ## frame \"Pay\"\n\
             ## contentinfo\n\
             4 link \"Terms\" @10,210\n\
             ## page\n\
             5 button \"Loose\" @10,210\n\
             ## frame"
        );
        let shown: usize = text
            .lines()
            .filter(|l| l.starts_with("##") && *l != "## page")
            .map(|l| l.len() + 1)
            .sum();
        assert!(sections_bytes(&sections) >= shown);
        // A cycle or a bad index in what the page sent ends the chain.
        let looped = Sections {
            list: vec![("list".into(), String::new(), 0)],
            of: vec![7],
            frames: Vec::new(),
        };
        assert_eq!(section_chain(&looped, 0), vec![0]);
        assert!(section_chain(&looped, 7).is_empty());
    }

    #[test]
    fn the_budget_keeps_viewport_then_interactive_then_the_rest() {
        let mut elements = vec![
            element(1, Role::Heading, "far heading"),
            element(2, Role::Button, "far button"),
            element(3, Role::Button, "near"),
            element(4, Role::Heading, "far heading 2"),
        ];
        for index in [0, 1, 3] {
            elements[index].in_viewport = false;
        }
        let all = [0, 1, 2, 3];
        let (kept, cut) = select_within(&elements, &all, 20, |_| 10);
        assert_eq!((kept, cut), (vec![1, 2], true));
        let (kept, cut) = select_within(&elements, &all, 1_000, |_| 10);
        assert_eq!((kept, cut), (vec![0, 1, 2, 3], false));
        let (kept, cut) = select_within(&elements, &all, 5, |_| 10);
        assert_eq!((kept, cut), (vec![], true));
    }

    #[test]
    fn text_cuts_count_json_escapes_and_keep_characters_whole() {
        assert_eq!(json_escaped_len("a\"b\n"), 6);
        assert_eq!(cut_to_json_bytes("ab\"cd", 3), "ab");
        assert_eq!(cut_to_json_bytes("ééé", 5), "éé");
        assert_eq!(cut_to_json_bytes("short", 100), "short");
        assert_eq!(estimate_tokens(0), 0);
        assert_eq!(estimate_tokens(27), 10);
        assert_eq!(estimate_tokens(28), 11);
        assert_eq!(budget_bytes(100), 270);
        for tokens in [100, 101, 1_234, MAX_MAX_TOKENS] {
            assert!(estimate_tokens(budget_bytes(tokens)) <= u64::from(tokens));
        }
    }
}
