//! Redaction of credentials carried inside URLs: the one function every place that reports a
//! URL (tool results, `browser.tabs.list`, events and the journal, network records, logs) runs a
//! URL through before it leaves the Broker, so `http://user:PASS@host/` is reported as
//! `http://user:[redacted]@host/`. It lives in `protocol` because every reporting module may
//! import it; later reporters of URLs (a remote browser's endpoint with its token, a live view's
//! URL) reuse it rather than growing their own.
//!
//! Pure text: no URL parsing library and no normalisation, so a URL that needs no redaction comes
//! back byte for byte (borrowed), and any text that merely contains a URL (an error message, a
//! `blob:` or `view-source:` URL wrapping another) is redacted too.

use std::borrow::Cow;

/// What the Broker reports in place of a secret: a URL's password, an `Authorization` header.
pub const REDACTED: &str = "[redacted]";

/// What precedes the live view's one-time secret in the fragment of its URL
/// (`http://127.0.0.1:PORT/#bpview=SECRET`, docs/view.md). Whatever reports such a URL reports
/// the secret as `REDACTED`, wherever the URL appears.
pub const VIEW_SECRET_MARKER: &str = "bpview=";

/// `text` with every live-view secret (the characters after [`VIEW_SECRET_MARKER`] that a
/// secret may hold) replaced by `REDACTED`. Borrowed when there is none.
fn redact_view_secret(text: Cow<'_, str>) -> Cow<'_, str> {
    if !text.contains(VIEW_SECRET_MARKER) {
        return text;
    }
    let mut out = String::with_capacity(text.len());
    let mut rest: &str = &text;
    while let Some(found) = rest.find(VIEW_SECRET_MARKER) {
        let start = found + VIEW_SECRET_MARKER.len();
        out.push_str(&rest[..start]);
        let after = &rest[start..];
        let secret_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .unwrap_or(after.len());
        if secret_len > 0 {
            out.push_str(REDACTED);
        }
        rest = &after[secret_len..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// `text` with the credentials of every `scheme://userinfo@host` in it replaced: the password
/// after `user:` becomes `REDACTED`, and a userinfo without a password (a bare access token more
/// often than a name) becomes `REDACTED` whole, and a live view's secret
/// ([`VIEW_SECRET_MARKER`]) becomes `REDACTED`. Borrowed when nothing needed redacting.
pub fn redact_url(text: &str) -> Cow<'_, str> {
    redact_view_secret(redact_userinfo(text))
}

fn redact_userinfo(text: &str) -> Cow<'_, str> {
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut search = 0;
    while let Some(found) = text[search..].find("://") {
        let authority_start = search + found + 3;
        let authority_len = text[authority_start..]
            .find([
                '/', '?', '#', '\\', ' ', '\t', '\n', '\r', '"', '\'', '<', '>',
            ])
            .unwrap_or(text.len() - authority_start);
        let authority = &text[authority_start..authority_start + authority_len];
        search = authority_start;
        let Some(at) = authority.rfind('@') else {
            continue;
        };
        let userinfo = &authority[..at];
        let secret_start = match userinfo.find(':') {
            Some(colon) => authority_start + colon + 1,
            None => authority_start,
        };
        let secret_end = authority_start + at;
        if &text[secret_start..secret_end] == REDACTED {
            search = secret_end;
            continue;
        }
        let buffer = out.get_or_insert_with(|| String::with_capacity(text.len()));
        buffer.push_str(&text[copied..secret_start]);
        buffer.push_str(REDACTED);
        copied = secret_end;
        search = secret_end;
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut buffer) => {
            buffer.push_str(&text[copied..]);
            Cow::Owned(buffer)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expect: &str) {
        assert_eq!(redact_url(text), expect, "redact_url({text:?})");
    }

    #[test]
    fn passwords_and_bare_tokens_are_redacted_and_nothing_else_changes() {
        check("http://user:PASS@host/", "http://user:[redacted]@host/");
        check(
            "https://user:p%40ss:w@host:8080/a?b#c",
            "https://user:[redacted]@host:8080/a?b#c",
        );
        check("https://TOKEN@host/x", "https://[redacted]@host/x");
        check("http://a@b@host/", "http://[redacted]@host/");
        check("http://user:@host/", "http://user:[redacted]@host/");
        // No userinfo: an `@` after the authority is a path or query.
        check(
            "http://host/path@x?q=a@b#f@g",
            "http://host/path@x?q=a@b#f@g",
        );
        check("http://host", "http://host");
        check("about:blank", "about:blank");
        check("mailto:user@host", "mailto:user@host");
        check("", "");
        check("://", "://");
        check("x://@", "x://[redacted]@");
    }

    #[test]
    fn view_secrets_are_redacted_wherever_they_appear() {
        check(
            "http://127.0.0.1:4000/#bpview=0a1B-c_9",
            "http://127.0.0.1:4000/#bpview=[redacted]",
        );
        check(
            "go to http://u:p@127.0.0.1:4000/#bpview=abc and #bpview=def.",
            "go to http://u:[redacted]@127.0.0.1:4000/#bpview=[redacted] and #bpview=[redacted].",
        );
        check("#bpview=", "#bpview=");
        check(
            "http://127.0.0.1:4000/#bpview=[redacted]",
            "http://127.0.0.1:4000/#bpview=[redacted]",
        );
    }

    #[test]
    fn urls_inside_other_urls_and_text_are_redacted() {
        check(
            "blob:http://u:secret@host/uuid",
            "blob:http://u:[redacted]@host/uuid",
        );
        check(
            "view-source:http://u:secret@host/",
            "view-source:http://u:[redacted]@host/",
        );
        check(
            "http://host/?next=http://u:secret@other/",
            "http://host/?next=http://u:[redacted]@other/",
        );
        check(
            "failed to load \"http://u:secret@host/\" and ws://t@h",
            "failed to load \"http://u:[redacted]@host/\" and ws://[redacted]@h",
        );
    }

    #[test]
    fn redaction_is_idempotent_and_borrows_when_clean() {
        let once = redact_url("http://user:PASS@host/").into_owned();
        assert_eq!(redact_url(&once), once);
        assert!(matches!(redact_url(&once), Cow::Borrowed(_)));
        assert!(matches!(redact_url("http://host/a@b"), Cow::Borrowed(_)));
    }
}
