//! Redaction and bounding of every free text that reaches the report or the
//! human summary: opaque resource ids, URLs and absolute paths are replaced by
//! placeholders, control characters by spaces, and the length is capped.
//!
//! It must not decide what text is reported; callers pass whatever they would
//! print, and this module only makes it safe to print.

/// Longest error message, reason or remediation text in the report, in
/// characters: enough for a sentence plus an executable's short message, too
/// little to carry a page of browser content.
pub const MAX_MESSAGE_CHARS: usize = 300;

/// Longest version string kept from the executable; real versions are short.
pub const MAX_VERSION_CHARS: usize = 64;

/// Opaque id prefixes of the stdio protocol and their placeholders. `cursor:`
/// is absent on purpose: cursors are positions, not resource identities.
const ID_PREFIXES: [(&str, &str); 15] = [
    ("workspace:", "<workspace-id>"),
    ("lease:", "<lease-id>"),
    ("target:", "<target-id>"),
    ("command:", "<command-id>"),
    ("observation:", "<observation-id>"),
    ("artifact:", "<artifact-id>"),
    ("event:", "<event-id>"),
    ("dialog:", "<dialog-id>"),
    ("frame:", "<frame-id>"),
    ("download:", "<download-id>"),
    ("connection:", "<connection-id>"),
    ("broker:", "<broker-id>"),
    ("data:", "<url>"),
    ("blob:", "<url>"),
    ("javascript:", "<url>"),
];

/// How much of an input is scanned, as a multiple of the output bound: the
/// rest would be cut anyway, and scanning is quadratic in token length.
const SCAN_FACTOR: usize = 4;

/// Characters that end an id, URL or path token.
fn ends_token(character: char) -> bool {
    character.is_whitespace() || "\"'`,;)]}>".contains(character)
}

/// Characters after which a path may start.
fn starts_path_after(previous: Option<char>) -> bool {
    match previous {
        None => true,
        Some(character) => character.is_whitespace() || "\"'`(=[{<,;:".contains(character),
    }
}

/// Byte length of the token starting at the beginning of `rest`.
fn token_len(rest: &str) -> usize {
    rest.find(ends_token).unwrap_or(rest.len())
}

/// Byte length of a URL starting at the beginning of `rest`: URLs may hold
/// commas and brackets, so only whitespace and quotes end them.
fn url_len(rest: &str) -> usize {
    rest.find(|character: char| character.is_whitespace() || "\"'`<>".contains(character))
        .unwrap_or(rest.len())
}

/// Which placeholder replaces the token at the start of `rest`, given the
/// character before it, and how many bytes it covers.
fn redaction(rest: &str, previous: Option<char>) -> Option<(&'static str, usize)> {
    let after_letter = previous.is_some_and(|character| character.is_ascii_alphabetic());
    if !after_letter {
        for (prefix, placeholder) in ID_PREFIXES {
            let matches = rest
                .get(..prefix.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(prefix));
            let len = match placeholder {
                "<url>" => url_len(rest),
                _ => token_len(rest),
            };
            if matches && len > prefix.len() {
                return Some((placeholder, len));
            }
        }
        if let Some(scheme_end) = rest[..token_len(rest)].find("://") {
            let scheme = &rest[..scheme_end];
            let is_scheme = !scheme.is_empty()
                && scheme.chars().all(|character| {
                    character.is_ascii_alphanumeric() || "+.-".contains(character)
                });
            if is_scheme {
                return Some(("<url>", url_len(rest)));
            }
        }
    }
    if starts_path_after(previous) && looks_like_absolute_path(rest) {
        return Some(("<path>", token_len(rest)));
    }
    None
}

fn looks_like_absolute_path(rest: &str) -> bool {
    let bytes = rest.as_bytes();
    let path_char = |index: usize| {
        bytes
            .get(index)
            .is_some_and(|&byte| !byte.is_ascii_whitespace())
    };
    match bytes {
        [b'/', b'/', ..] | [b'\\', b'\\', ..] => path_char(2),
        [b'~', b'/', ..] => path_char(2),
        [b'/', ..] => path_char(1),
        [drive, b':', b'\\' | b'/', ..] => drive.is_ascii_alphabetic(),
        _ => false,
    }
}

/// Redacts ids, URLs and absolute paths, flattens control characters and
/// caps the result at `max_chars` characters.
pub fn scrub(text: &str, max_chars: usize) -> String {
    let scan_end = text
        .char_indices()
        .nth(max_chars.saturating_mul(SCAN_FACTOR))
        .map_or(text.len(), |(cut, _)| cut);
    let text = &text[..scan_end];
    let mut out = String::with_capacity(text.len().min(max_chars * 2));
    let mut previous: Option<char> = None;
    let mut index = 0;
    while index < text.len() {
        let rest = &text[index..];
        match redaction(rest, previous) {
            Some((placeholder, len)) => {
                out.push_str(placeholder);
                index += len;
                previous = Some('>');
            }
            None => {
                let character = rest.chars().next().unwrap_or(' ');
                out.push(match character.is_control() {
                    true => ' ',
                    false => character,
                });
                index += character.len_utf8();
                previous = Some(character);
            }
        }
    }
    bound(&out, max_chars)
}

/// Caps `text` at `max_chars` characters, marking a cut with an ellipsis.
fn bound(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_owned(),
        Some((cut, _)) => {
            let kept: String = text[..cut]
                .chars()
                .take(max_chars.saturating_sub(1))
                .collect();
            kept + "…"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_MESSAGE_CHARS, scrub};

    fn check(input: &str, expect: &str) {
        assert_eq!(scrub(input, MAX_MESSAGE_CHARS), expect, "input: {input}");
    }

    #[test]
    fn redacts_opaque_ids() {
        check(
            "lease lease:01J9 expired in workspace:abc-1",
            "lease <lease-id> expired in <workspace-id>",
        );
        check(
            "unknown target \"target:7\", command:9; observation:x artifact:y",
            "unknown target \"<target-id>\", <command-id>; <observation-id> <artifact-id>",
        );
        check("id=WORKSPACE:Q", "id=<workspace-id>");
        check("bad_target:1", "bad_<target-id>");
    }

    #[test]
    fn keeps_prose_and_cursors() {
        check("unknown workspace: gone", "unknown workspace: gone");
        check("cursor:12 is behind", "cursor:12 is behind");
        check("pretarget:1", "pretarget:1");
        check("5/10 done", "5/10 done");
        check("a / b", "a / b");
    }

    #[test]
    fn redacts_paths_and_urls() {
        check(
            "cannot open /home/me/.x/artifact.png: denied",
            "cannot open <path> denied",
        );
        check("path=C:\\Users\\me\\a.png", "path=<path>");
        check("see ~/secret and \\\\host\\share", "see <path> and <path>");
        check(
            "navigated to https://bank.example/a?b=c then about:blank",
            "navigated to <url> then about:blank",
        );
        check("src data:text/html,hi", "src <url>");
        check("open https://a.example/x,(y) now", "open <url> now");
    }

    #[test]
    fn flattens_control_characters() {
        check("line one\nline\ttwo", "line one line two");
    }

    #[test]
    fn bounds_length_on_char_boundaries() {
        let long = "é".repeat(400);
        let scrubbed = scrub(&long, MAX_MESSAGE_CHARS);
        assert_eq!(scrubbed.chars().count(), MAX_MESSAGE_CHARS);
        assert!(scrubbed.ends_with('…'));
        assert_eq!(scrub("short", 10), "short");
    }
}
