//! What a tab's page does on its own, collected per tab from its session's events: the console
//! messages and uncaught exceptions (`Runtime.consoleAPICalled` / `Runtime.exceptionThrown`)
//! since the Broker first controlled the tab, in a bounded ring, and the requests in flight
//! (`Network.requestWillBeSent` / `loadingFinished` / `loadingFailed`) with the time of the
//! last change, for `browser.wait`'s network-idle condition.
//!
//! `enable` is the per-session setup (`Runtime.enable`; requests are counted once `session::network`
//! has enabled `Network`), called once when a tab session attaches; `on_event` is the pump's one entry. The book is plain data among the tab's
//! books (`TabHandle::activity`); nothing here emits an event (console output is read only
//! through `browser.console.list`), evaluates script, or keeps a URL, header or body. Every text
//! kept is page data, bounded here.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use crate::cdp::runtime::{ConsoleApiCalled, ExceptionThrown, RemoteObject};
use crate::cdp::{CdpClient, Event, SessionId};

/// The per-tab bounds of this book (count and bytes), with the other books' in one place.
pub use super::bounds::{
    MAX_CONSOLE_BOOK_BYTES, MAX_CONSOLE_ENTRIES, MAX_ENTRY_CHARS, MAX_IN_FLIGHT,
    MAX_IN_FLIGHT_BYTES,
};
/// Arguments of one console call rendered into its text.
const MAX_ARGS: usize = 16;

/// The kind of a console entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsoleLevel {
    Log,
    Debug,
    Info,
    Warning,
    Error,
    /// An uncaught exception or an unhandled promise rejection.
    Exception,
}

impl ConsoleLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            ConsoleLevel::Log => "log",
            ConsoleLevel::Debug => "debug",
            ConsoleLevel::Info => "info",
            ConsoleLevel::Warning => "warning",
            ConsoleLevel::Error => "error",
            ConsoleLevel::Exception => "exception",
        }
    }

    /// Every level, in `as_str` order (the tool's filter enum).
    pub const ALL: [ConsoleLevel; 6] = [
        ConsoleLevel::Log,
        ConsoleLevel::Debug,
        ConsoleLevel::Info,
        ConsoleLevel::Warning,
        ConsoleLevel::Error,
        ConsoleLevel::Exception,
    ];

    /// The level of a `console.*` call type (`console.table`, `dir`, `trace`, ... are logs).
    fn of_call(call_type: &str) -> ConsoleLevel {
        match call_type {
            "debug" => ConsoleLevel::Debug,
            "info" => ConsoleLevel::Info,
            "warning" => ConsoleLevel::Warning,
            "error" | "assert" => ConsoleLevel::Error,
            _ => ConsoleLevel::Log,
        }
    }
}

/// One console message or exception.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsoleEntry {
    /// Per tab, from 1, in arrival order (a cursor for the next `browser.console.list`).
    pub sequence: u64,
    pub level: ConsoleLevel,
    /// Bounded page text.
    pub text: String,
    pub truncated: bool,
    /// Epoch milliseconds, as the page's clock reported it.
    pub timestamp_ms: i64,
}

impl ConsoleEntry {
    /// What the entry holds in memory, in bytes: what `MAX_CONSOLE_BOOK_BYTES` counts.
    fn weight(&self) -> usize {
        std::mem::size_of::<ConsoleEntry>() + self.text.len()
    }
}

/// A tab's collected activity.
#[derive(Debug)]
pub struct ActivityBook {
    /// Entries earlier than this (epoch ms) are replays of what the page logged before the
    /// Broker controlled the tab (`Runtime.enable` replays them) and are not kept.
    since_ms: Option<i64>,
    entries: VecDeque<ConsoleEntry>,
    /// The summed `ConsoleEntry::weight` of `entries`.
    entry_bytes: usize,
    next_sequence: u64,
    /// Entries that left the ring since collection started.
    dropped: u64,
    in_flight: HashSet<String>,
    /// The summed lengths of the ids in `in_flight`.
    in_flight_bytes: usize,
    /// When a request last started or ended (or collection began).
    last_network_change: Instant,
    /// `Network.enable` succeeded on the current session: `in_flight` means something.
    counting: bool,
}

impl Default for ActivityBook {
    fn default() -> ActivityBook {
        ActivityBook {
            since_ms: None,
            entries: VecDeque::new(),
            entry_bytes: 0,
            next_sequence: 1,
            dropped: 0,
            in_flight: HashSet::new(),
            in_flight_bytes: 0,
            last_network_change: Instant::now(),
            counting: false,
        }
    }
}

/// What `browser.wait` reads of the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetworkState {
    /// Whether requests are counted at all (`Network.enable` succeeded on this session).
    pub counting: bool,
    pub in_flight: usize,
    /// Since when nothing started or ended.
    pub quiet_since: Instant,
}

impl ActivityBook {
    /// Collection starts (the first session of the tab attaches); later sessions keep the
    /// entries and the start.
    pub fn start(&mut self, now_ms: i64) {
        self.since_ms.get_or_insert(now_ms);
        self.clear_in_flight();
        self.counting = false;
        self.last_network_change = Instant::now();
    }

    /// A user tab passed to another Workspace's control: what the page logged before belongs
    /// to the previous controller, so it goes, and replays of it (a later `Runtime.enable`) are
    /// not kept either. Sequences keep counting up.
    pub fn hand_over(&mut self, now_ms: i64) {
        self.entries.clear();
        self.entry_bytes = 0;
        self.since_ms = Some(now_ms);
    }

    /// What the entries and the requests in flight hold in memory, in bytes (within
    /// `MAX_CONSOLE_BOOK_BYTES` and `MAX_IN_FLIGHT_BYTES`).
    pub fn bytes(&self) -> (usize, usize) {
        (self.entry_bytes, self.in_flight_bytes)
    }

    /// Entries kept now.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn clear_in_flight(&mut self) {
        self.in_flight.clear();
        self.in_flight_bytes = 0;
    }

    /// `Network.enable` succeeded: requests are counted from now on.
    pub fn counting_started(&mut self) {
        self.counting = true;
        self.last_network_change = Instant::now();
    }

    /// The session ended: its requests can no longer finish, and none are counted.
    pub fn session_ended(&mut self) {
        self.clear_in_flight();
        self.counting = false;
        self.last_network_change = Instant::now();
    }

    pub fn network(&self) -> NetworkState {
        NetworkState {
            counting: self.counting,
            in_flight: self.in_flight.len(),
            quiet_since: self.last_network_change,
        }
    }

    /// Entries after `after` (a sequence), oldest first, at most `limit`, of the given levels
    /// (all when empty); plus whether more matched beyond the limit.
    pub fn entries(
        &self,
        after: u64,
        levels: &[ConsoleLevel],
        limit: usize,
    ) -> (Vec<ConsoleEntry>, bool) {
        let mut matching = self
            .entries
            .iter()
            .filter(|e| e.sequence > after && (levels.is_empty() || levels.contains(&e.level)));
        let list: Vec<ConsoleEntry> = matching.by_ref().take(limit).cloned().collect();
        let more = matching.next().is_some();
        (list, more)
    }

    /// Entries that were pushed out of the ring, and the newest sequence so far.
    pub fn dropped_and_latest(&self) -> (u64, u64) {
        (self.dropped, self.next_sequence - 1)
    }

    fn push(&mut self, level: ConsoleLevel, text: String, timestamp: f64) {
        let timestamp_ms = timestamp as i64;
        if self.since_ms.is_none_or(|since| timestamp_ms < since) {
            return;
        }
        let (text, truncated) = bounded(&text);
        let entry = ConsoleEntry {
            sequence: self.next_sequence,
            level,
            text,
            truncated,
            timestamp_ms,
        };
        self.entry_bytes += entry.weight();
        self.entries.push_back(entry);
        self.next_sequence += 1;
        while self.entries.len() > MAX_CONSOLE_ENTRIES || self.entry_bytes > MAX_CONSOLE_BOOK_BYTES
        {
            let Some(old) = self.entries.pop_front() else {
                break;
            };
            self.entry_bytes -= old.weight();
            self.dropped += 1;
        }
    }

    fn on_console(&mut self, called: &ConsoleApiCalled) {
        let text = called
            .args
            .iter()
            .take(MAX_ARGS)
            .map(render)
            .collect::<Vec<_>>()
            .join(" ");
        self.push(
            ConsoleLevel::of_call(&called.call_type),
            text,
            called.timestamp,
        );
    }

    fn on_exception(&mut self, thrown: &ExceptionThrown) {
        let details = &thrown.exception_details;
        let message = details.message();
        // "Uncaught (in promise)" says what kind; the description says what was thrown.
        let text = match details.text.as_str() {
            "" => message.to_owned(),
            summary if summary == message || message.starts_with(summary) => message.to_owned(),
            summary => format!("{summary} {message}"),
        };
        self.push(ConsoleLevel::Exception, text, thrown.timestamp);
    }

    fn on_request(&mut self, request_id: &str, started: bool) {
        let fits = self.in_flight.len() < MAX_IN_FLIGHT
            && self.in_flight_bytes + request_id.len() <= MAX_IN_FLIGHT_BYTES;
        let changed = match started {
            true if fits => self.in_flight.insert(request_id.to_owned()),
            true => false,
            false => self.in_flight.remove(request_id),
        };
        match (started, changed) {
            (true, true) => self.in_flight_bytes += request_id.len(),
            (false, true) => self.in_flight_bytes -= request_id.len(),
            _ => {}
        }
        // A redirect re-announces a request; a finish of a request we never saw start (it
        // began before collection) changes nothing in flight but is still activity.
        if changed || !started {
            self.last_network_change = Instant::now();
        }
    }
}

/// A console argument as text: strings as they are, other primitives by value, objects by
/// their description (`Object`, `Array(3)`, `Error: boom ...`); never expanded.
fn render(arg: &RemoteObject) -> String {
    match (&arg.value, arg.object_type.as_str()) {
        (Some(serde_json::Value::String(text)), _) => text.clone(),
        (_, "undefined") => "undefined".to_owned(),
        (None, "object") if arg.subtype.as_deref() == Some("null") => "null".to_owned(),
        (Some(value), _) if !value.is_object() && !value.is_array() => value.to_string(),
        _ => arg
            .description
            .clone()
            .unwrap_or_else(|| arg.object_type.clone()),
    }
}

fn bounded(text: &str) -> (String, bool) {
    match text.char_indices().nth(MAX_ENTRY_CHARS) {
        Some((end, _)) => (text[..end].to_owned(), true),
        None => (text.to_owned(), false),
    }
}

/// The per-session setup of a tab session: `Runtime.enable` (console and exception events;
/// docs/cdp.md, "Runtime.enable"). Request events come from the one `Network.enable` of
/// `session::network::enable`, after which `TabGuard::session` calls `counting_started`.
/// Collection is best effort: a failure is logged, and the tools that read it say what they
/// could not see.
pub async fn enable(
    client: &CdpClient,
    session: &SessionId,
    tab: &super::TabHandle,
    timeout: Duration,
) {
    tab.activity().start(crate::version::now_ms());
    if let Err(error) = client
        .execute(session, &crate::cdp::runtime::Enable {}, timeout)
        .await
    {
        tracing::warn!(%error, "enabling Runtime (console collection) failed");
    }
}

/// Whether the pump routes `event` here.
pub fn is_activity(event: &Event) -> bool {
    matches!(
        event,
        Event::ConsoleApiCalled(_)
            | Event::ExceptionThrown(_)
            | Event::RequestWillBeSent(_)
            | Event::LoadingFinished(_)
            | Event::LoadingFailed(_)
    )
}

/// One activity event of a tab session, into the tab's book.
pub fn on_event(book: &mut ActivityBook, event: &Event) {
    match event {
        Event::ConsoleApiCalled(called) => book.on_console(called),
        Event::ExceptionThrown(thrown) => book.on_exception(thrown),
        Event::RequestWillBeSent(sent) => book.on_request(&sent.request_id, true),
        Event::LoadingFinished(done) => book.on_request(&done.request_id, false),
        Event::LoadingFailed(failed) => book.on_request(&failed.request_id, false),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn console(call_type: &str, args: serde_json::Value, timestamp: f64) -> Event {
        Event::decode(
            "Runtime.consoleAPICalled",
            json!({"type": call_type, "args": args, "timestamp": timestamp}),
        )
        .unwrap()
    }

    #[test]
    fn entries_are_rendered_bounded_and_replays_skipped() {
        let mut book = ActivityBook::default();
        // Before collection started nothing is kept.
        on_event(
            &mut book,
            &console("log", json!([{"type": "string", "value": "x"}]), 5.0),
        );
        book.start(1_000);
        on_event(
            &mut book,
            &console("log", json!([{"type": "string", "value": "old"}]), 999.0),
        );
        on_event(
            &mut book,
            &console(
                "log",
                json!([{"type": "string", "value": "n"}, {"type": "number", "value": 3, "description": "3"},
                    {"type": "object", "description": "Object", "objectId": "1"}, {"type": "undefined"},
                    {"type": "object", "subtype": "null", "value": null}]),
                1_001.5,
            ),
        );
        on_event(
            &mut book,
            &console(
                "warning",
                json!([{"type": "string", "value": "w"}]),
                1_002.0,
            ),
        );
        let thrown = Event::decode(
            "Runtime.exceptionThrown",
            json!({"timestamp": 1_003.0, "exceptionDetails": {"text": "Uncaught (in promise)", "exception": {"type": "string", "value": "nope", "description": "nope"}}}),
        )
        .unwrap();
        on_event(&mut book, &thrown);
        let (all, more) = book.entries(0, &[], 10);
        assert!(!more);
        let texts: Vec<(&str, &str)> = all
            .iter()
            .map(|e| (e.level.as_str(), e.text.as_str()))
            .collect();
        assert_eq!(
            texts,
            vec![
                ("log", "n 3 Object undefined null"),
                ("warning", "w"),
                ("exception", "Uncaught (in promise) nope")
            ]
        );
        assert_eq!(all[0].timestamp_ms, 1_001);
        let (errors, _) = book.entries(0, &[ConsoleLevel::Exception], 10);
        assert_eq!(errors.len(), 1);
        let (after, _) = book.entries(all[1].sequence, &[], 10);
        assert_eq!(after.len(), 1);
        let long = "y".repeat(MAX_ENTRY_CHARS + 10);
        on_event(
            &mut book,
            &console("error", json!([{"type": "string", "value": long}]), 1_004.0),
        );
        let (last, _) = book.entries(3, &[], 10);
        assert!(last[0].truncated && last[0].text.chars().count() == MAX_ENTRY_CHARS);
    }

    #[test]
    fn the_ring_keeps_the_newest_and_counts_the_dropped() {
        let mut book = ActivityBook::default();
        book.start(0);
        for i in 0..(MAX_CONSOLE_ENTRIES + 7) {
            on_event(
                &mut book,
                &console("log", json!([{"type": "number", "value": i}]), 1.0),
            );
        }
        let (dropped, latest) = book.dropped_and_latest();
        assert_eq!((dropped, latest), (7, MAX_CONSOLE_ENTRIES as u64 + 7));
        let (page, more) = book.entries(0, &[], 2);
        assert!(more);
        assert_eq!(page[0].text, "7");
    }

    /// A flood of the widest console text and of requests that never finish: the book stays
    /// within its count and byte bounds, and its byte counts are what it holds.
    #[test]
    fn a_flood_stays_within_the_count_and_byte_bounds() {
        let mut book = ActivityBook::default();
        book.start(0);
        book.counting_started();
        // Four-byte characters: 2,000 of them are 8,000 bytes, so the byte bound binds first.
        let wide = "\u{1F600}".repeat(MAX_ENTRY_CHARS);
        for _ in 0..(2 * MAX_CONSOLE_ENTRIES) {
            on_event(
                &mut book,
                &console("log", json!([{"type": "string", "value": wide}]), 1.0),
            );
            let (bytes, _) = book.bytes();
            assert!(bytes <= MAX_CONSOLE_BOOK_BYTES, "{bytes} bytes");
        }
        let held: usize = book.entries.iter().map(ConsoleEntry::weight).sum();
        assert_eq!(book.bytes().0, held);
        assert!(book.len() < MAX_CONSOLE_ENTRIES, "{} entries", book.len());
        let (dropped, latest) = book.dropped_and_latest();
        assert_eq!(
            dropped + book.len() as u64,
            latest,
            "every entry is kept or counted"
        );
        for n in 0..(2 * MAX_IN_FLIGHT) {
            let id = format!("{n:0>40}");
            let sent = Event::decode(
                "Network.requestWillBeSent",
                json!({"requestId": id, "loaderId": "L", "type": "Fetch",
                       "request": {"url": "http://127.0.0.1/x", "method": "GET"}}),
            )
            .unwrap();
            on_event(&mut book, &sent);
        }
        let (_, in_flight_bytes) = book.bytes();
        assert!(
            in_flight_bytes <= MAX_IN_FLIGHT_BYTES,
            "{in_flight_bytes} bytes"
        );
        assert!(book.network().in_flight <= MAX_IN_FLIGHT);
        assert_eq!(
            in_flight_bytes,
            book.in_flight.iter().map(String::len).sum::<usize>()
        );
        book.session_ended();
        book.hand_over(2);
        assert_eq!(book.bytes(), (0, 0));
        assert!(book.is_empty());
    }

    #[test]
    fn requests_in_flight_follow_start_and_end() {
        let mut book = ActivityBook::default();
        book.start(0);
        assert!(!book.network().counting);
        book.counting_started();
        let sent = |id: &str| {
            Event::decode(
                "Network.requestWillBeSent",
                json!({"requestId": id, "loaderId": "L", "type": "Fetch",
                       "request": {"url": "http://127.0.0.1/x", "method": "GET"}}),
            )
            .unwrap()
        };
        on_event(&mut book, &sent("a"));
        on_event(&mut book, &sent("b"));
        on_event(&mut book, &sent("a")); // a redirect
        assert_eq!(book.network().in_flight, 2);
        on_event(
            &mut book,
            &Event::decode("Network.loadingFinished", json!({"requestId": "a"})).unwrap(),
        );
        on_event(
            &mut book,
            &Event::decode("Network.loadingFailed", json!({"requestId": "zz"})).unwrap(),
        );
        assert_eq!(book.network().in_flight, 1);
        on_event(
            &mut book,
            &Event::decode("Network.loadingFailed", json!({"requestId": "b"})).unwrap(),
        );
        assert_eq!(book.network().in_flight, 0);
        on_event(&mut book, &sent("c"));
        book.session_ended();
        assert_eq!(book.network().in_flight, 0);
        assert!(!book.network().counting);
    }
}
