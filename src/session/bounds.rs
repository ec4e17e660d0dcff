//! Bounds of page-controlled strings that reach results and events: titles, URLs and names.
//! A page chooses them (a 1 MB `<title>`, a History API URL of megabytes), so every copy the
//! Broker sends is cut to a fixed number of characters, and a cut string ends with
//! `TRUNCATION_MARKER`, so a host can tell a cut value from a real one of that length.
//!
//! A URL also loses the credentials it carries (`protocol::redact::redact_url`) before it is cut,
//! so a cut can never leave part of a password behind: these are the choke points through which
//! every URL that Chromium reports reaches a result, an event or a network record.
//!
//! The bounds of every per-tab book are here too ("Per-tab books"): each book is bounded by a
//! count and by the bytes it holds, forgets its oldest entries first, and goes with its tab.
//!
//! Pure functions; they decide nothing else about the strings (no escaping).

use crate::protocol::redact::redact_url;

/// Longest title in a result or event, in characters (Chromium itself keeps at most 4,096). A
/// title is for a human or a model to recognise a page; a kilobyte is plenty, and 64 tabs of
/// bounded titles and URLs stay well under a 64 KiB result even when every character needs a
/// JSON escape.
pub const MAX_TITLE_CHARS: usize = 1024;

/// Longest URL in a result, in characters: the longest URL `browser.open` accepts, so a URL the
/// host opened comes back whole.
pub const MAX_URL_CHARS: usize = 8192;

/// Longest URL in an event payload, in characters: events are best-effort notifications and
/// journal rows, so they carry less.
pub const MAX_EVENT_URL_CHARS: usize = 2048;

/// Longest name (a frame's name, a dialog's message) in a result or event, in characters.
pub const MAX_NAME_CHARS: usize = 2000;

// Per-tab books. Each is bounded by count and by bytes (what its entries hold in memory: their
// own size and every string they own); the oldest entries go first, and a tab's books go with
// the tab (docs/performance.md, "Memory"). At most, one tab's books hold about 3.5 MiB.

/// Requests kept per tab (`network::NetworkBook`). A page load of a few hundred subresources
/// fits twice; older ones are forgotten first, and `browser.network.get` of one answers
/// `request_not_found`.
pub const MAX_REQUESTS_PER_TARGET: usize = 1000;

/// Bytes of the requests kept per tab: a thousand requests of ordinary headers fit; a page
/// whose requests carry kilobytes of headers keeps fewer. The newest request always stays.
pub const MAX_NETWORK_BOOK_BYTES: usize = 2 << 20;

/// Console entries kept per tab (`activity::ActivityBook`): the newest win. Enough for the
/// last screens of a noisy page.
pub const MAX_CONSOLE_ENTRIES: usize = 500;

/// Characters of one console entry's text (the joined arguments, or the exception with its
/// stack).
pub const MAX_ENTRY_CHARS: usize = 2_000;

/// Bytes of the console entries kept per tab: 500 entries of 2,000 ASCII characters fit, text
/// of wider characters keeps fewer.
pub const MAX_CONSOLE_BOOK_BYTES: usize = 1 << 20;

/// Requests tracked as in flight per tab (for network idle); a page that starts more at once
/// is not idle anyway, and the ids of finished requests leave the set.
pub const MAX_IN_FLIGHT: usize = 4_096;

/// Bytes of the request ids tracked as in flight per tab.
pub const MAX_IN_FLIGHT_BYTES: usize = 128 << 10;

/// Downloads tracked per tab (`downloads::DownloadBook`), the Broker's cancels not yet
/// confirmed included: one beyond it is cancelled before it is announced.
pub const MAX_TRACKED_DOWNLOADS_PER_TAB: usize = 64;

/// Bytes of the downloads tracked per tab (ids, bounded names): one that would pass it is
/// cancelled before it is announced, like one beyond the count.
pub const MAX_DOWNLOAD_BOOK_BYTES: usize = 256 << 10;

/// Ends a string that was cut. Counted within the bound.
pub const TRUNCATION_MARKER: char = '\u{2026}';

/// A title bounded to `MAX_TITLE_CHARS`.
pub fn bound_title(title: &str) -> String {
    bound(title, MAX_TITLE_CHARS)
}

/// A URL without its credentials, bounded to `MAX_URL_CHARS`.
pub fn bound_url(url: &str) -> String {
    bound(&redact_url(url), MAX_URL_CHARS)
}

/// A URL for an event payload, without its credentials, bounded to `MAX_EVENT_URL_CHARS`.
pub fn bound_event_url(url: &str) -> String {
    bound(&redact_url(url), MAX_EVENT_URL_CHARS)
}

/// A name or message bounded to `MAX_NAME_CHARS`.
pub fn bound_name(name: &str) -> String {
    bound(name, MAX_NAME_CHARS)
}

/// `text` when it has at most `max` characters, else its first `max - 1` characters and the
/// marker.
pub fn bound(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some(_) => {
            let keep = max.saturating_sub(1);
            let end = text
                .char_indices()
                .nth(keep)
                .map_or(text.len(), |(at, _)| at);
            let mut cut = String::with_capacity(end + TRUNCATION_MARKER.len_utf8());
            cut.push_str(&text[..end]);
            cut.push(TRUNCATION_MARKER);
            cut
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, max: usize, expect: &str) {
        assert_eq!(bound(text, max), expect, "bound({text:?}, {max})");
    }

    #[test]
    fn strings_within_the_bound_are_untouched_and_longer_ones_marked() {
        check("", 4, "");
        check("abcd", 4, "abcd");
        check("abcde", 4, "abc\u{2026}");
        // Characters, not bytes: never a cut inside a UTF-8 sequence.
        check("ééééé", 4, "ééé\u{2026}");
        check("🙂🙂🙂🙂🙂", 2, "🙂\u{2026}");
        let huge = "x".repeat(1_000_000);
        let title = bound_title(&huge);
        assert_eq!(title.chars().count(), MAX_TITLE_CHARS);
        assert!(title.ends_with(TRUNCATION_MARKER));
        assert_eq!(bound_url(&huge).chars().count(), MAX_URL_CHARS);
        assert_eq!(bound_event_url(&huge).chars().count(), MAX_EVENT_URL_CHARS);
    }
}
