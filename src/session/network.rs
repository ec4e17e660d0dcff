//! Network observation of one tab: the bounded per-target ring of recent requests
//! (`NetworkBook`, in Broker memory only, never on disk), the session setup that enables
//! `Network` before anything can load (`enable`), and the turn of `Network.*` events into
//! `network.request` / `network.response` events with bounded metadata only.
//!
//! Events carry an opaque request id, method, bounded URL, resource type, status, MIME type,
//! timing and from-cache, never headers, bodies, cookies or credentials; headers and bodies are
//! read only through `browser.network.get` (`tools/network.rs`). A main-document 403 or 429
//! puts an `access_blocked` hint on `network.response` and is remembered for the next
//! Observation of that document (`NetworkBook::blocked_main_status`). Only the Workspaces
//! that manage or control the tab when a request starts see it. Raw CDP request ids never
//! leave this module. It does no store work and sends no event itself: the pump journals what
//! `on_event` returns.

use std::collections::VecDeque;
use std::time::Duration;

use serde_json::{Value, json};

use super::bounds::{bound, bound_event_url, bound_url};
use super::fetch::NetControl;
use super::registry::Registry;
use crate::cdp::network::{
    Enable, LoadingFailed, LoadingFinished, RequestWillBeSent, Response, ResponseReceived,
};
use crate::cdp::{CdpClient, CdpError, SessionId, TargetId};
use crate::events::Emit;
use crate::page::{EventHint, Hint};
use crate::protocol::ids::{IdKind, new_id};
use crate::protocol::redact::redact_url;
use crate::store::WorkspaceId;

/// The per-tab bounds of this book (count and bytes), with the other books' in one place.
pub use super::bounds::{MAX_NETWORK_BOOK_BYTES, MAX_REQUESTS_PER_TARGET};

/// Headers kept per request and direction; the rest are dropped (`headersTruncated`).
pub const MAX_HEADERS: usize = 64;

/// Longest header name / value kept, in characters.
pub const MAX_HEADER_NAME_CHARS: usize = 256;
pub const MAX_HEADER_VALUE_CHARS: usize = 4096;

/// Longest error text of a failed request, in characters.
const MAX_ERROR_CHARS: usize = 256;

/// Main-document statuses that mean the site refused this client (contract: 403 and 429 only).
pub const ACCESS_BLOCKED_STATUSES: [u16; 2] = [403, 429];

/// Headers whose values are credentials the Broker may itself have supplied (HTTP auth); their
/// values never leave the Broker.
const REDACTED_HEADERS: [&str; 2] = ["authorization", "proxy-authorization"];

/// What the Broker says instead of a redacted header value (the one marker of every redaction).
pub use crate::protocol::redact::REDACTED;

/// One observed request.
#[derive(Debug, Clone)]
pub struct NetRecord {
    /// Opaque `request:` id.
    pub id: String,
    /// Position in the tab's ring, for cursors.
    pub seq: u64,
    session: SessionId,
    raw_id: String,
    /// The Workspaces that managed or controlled the tab when the request started.
    workspaces: Vec<String>,
    pub method: String,
    pub url: String,
    pub resource_type: String,
    pub main_document: bool,
    /// Milliseconds since the epoch.
    pub started_at: i64,
    started_monotonic: f64,
    pub status: Option<u16>,
    pub mime_type: Option<String>,
    pub from_cache: bool,
    pub response_ms: Option<u64>,
    pub finished_ms: Option<u64>,
    pub encoded_bytes: Option<u64>,
    pub error: Option<String>,
    pub request_headers: Vec<(String, String)>,
    pub response_headers: Vec<(String, String)>,
    pub headers_truncated: bool,
}

impl NetRecord {
    /// The bounded metadata every event and list entry carries.
    pub fn summary(&self) -> Value {
        json!({
            "requestId": self.id,
            "method": self.method,
            "url": bound_event_url(&self.url),
            "resourceType": self.resource_type,
            "mainDocument": self.main_document,
            "status": self.status,
            "mimeType": self.mime_type,
            "fromCache": self.from_cache,
            "failed": self.error.is_some(),
            "timing": {"startedAt": self.started_at, "responseMs": self.response_ms, "finishedMs": self.finished_ms},
        })
    }

    /// Where `Network.getResponseBody` must be asked, and with which raw id.
    pub fn body_source(&self) -> (SessionId, String) {
        (self.session.clone(), self.raw_id.clone())
    }

    /// What the record holds in memory, in bytes (its own size and every string it owns): what
    /// `MAX_NETWORK_BOOK_BYTES` counts.
    fn weight(&self) -> usize {
        let headers = |list: &[(String, String)]| {
            list.iter()
                .map(|(name, value)| {
                    std::mem::size_of::<(String, String)>() + name.len() + value.len()
                })
                .sum::<usize>()
        };
        std::mem::size_of::<NetRecord>()
            + self.id.len()
            + self.session.as_str().len()
            + self.raw_id.len()
            + self
                .workspaces
                .iter()
                .map(|w| std::mem::size_of::<String>() + w.len())
                .sum::<usize>()
            + self.method.len()
            + self.url.len()
            + self.resource_type.len()
            + self.mime_type.as_ref().map_or(0, String::len)
            + self.error.as_ref().map_or(0, String::len)
            + headers(&self.request_headers)
            + headers(&self.response_headers)
    }

    fn elapsed_ms(&self, timestamp: f64) -> Option<u64> {
        let ms = (timestamp - self.started_monotonic) * 1000.0;
        (timestamp > 0.0 && ms >= 0.0).then_some(ms.round() as u64)
    }
}

/// A filter of `browser.network.list`.
#[derive(Debug, Clone, Default)]
pub struct NetFilter {
    pub url_contains: Option<String>,
    pub resource_type: Option<String>,
    pub status: Option<u16>,
    /// Only records after this position.
    pub after: Option<u64>,
}

impl NetFilter {
    fn matches(&self, record: &NetRecord) -> bool {
        self.after.is_none_or(|after| record.seq > after)
            && self
                .url_contains
                .as_deref()
                .is_none_or(|part| record.url.contains(part))
            && self
                .resource_type
                .as_deref()
                .is_none_or(|kind| record.resource_type.eq_ignore_ascii_case(kind))
            && self
                .status
                .is_none_or(|status| record.status == Some(status))
    }
}

/// The tab's recent requests, its main document's status, and the interception state of its
/// sessions (read and written by `session::fetch`).
#[derive(Default)]
pub struct NetworkBook {
    records: VecDeque<NetRecord>,
    /// The summed `NetRecord::weight` of `records`.
    bytes: usize,
    next_seq: u64,
    /// Status of the current main document's response, once it arrived.
    main_status: Option<u16>,
    pub(super) fetch: super::fetch::FetchBook,
}

impl NetworkBook {
    /// The current main document's status when it is one that blocks access (403, 429): the
    /// next Observation of the document carries the network's `access_blocked` hint.
    pub fn blocked_main_status(&self) -> Option<u16> {
        self.main_status
            .filter(|status| ACCESS_BLOCKED_STATUSES.contains(status))
    }

    /// Matching records visible to `workspace_id`, oldest first, at most `limit`; the bool says
    /// whether more matched.
    pub fn list(
        &self,
        workspace_id: &str,
        filter: &NetFilter,
        limit: usize,
    ) -> (Vec<&NetRecord>, bool) {
        let mut matching = self
            .records
            .iter()
            .filter(|r| r.workspaces.iter().any(|w| w == workspace_id) && filter.matches(r));
        let page: Vec<&NetRecord> = matching.by_ref().take(limit).collect();
        let more = matching.next().is_some();
        (page, more)
    }

    /// One record by its opaque id, when `workspace_id` may see it.
    pub fn get(&self, workspace_id: &WorkspaceId, id: &str) -> Option<&NetRecord> {
        self.records
            .iter()
            .find(|r| r.id == id && r.workspaces.iter().any(|w| w == workspace_id))
    }

    /// The oldest position still kept (cursors before it point at forgotten records).
    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// What the kept records hold in memory, in bytes (at most `MAX_NETWORK_BOOK_BYTES`, or
    /// the newest record alone when it is larger).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Forgets every record (the tab's last controller let it go); positions keep counting up.
    pub fn forget_records(&mut self) {
        self.records.clear();
        self.bytes = 0;
        self.main_status = None;
    }

    /// Changes the newest record of `raw_id` on `session`, keeping the byte count and bounds.
    fn update<T>(
        &mut self,
        session: &SessionId,
        raw_id: &str,
        f: impl FnOnce(&mut NetRecord) -> T,
    ) -> Option<T> {
        let record = self
            .records
            .iter_mut()
            .rev()
            .find(|r| r.raw_id == raw_id && r.session == *session)?;
        let before = record.weight();
        let value = f(record);
        self.bytes = self.bytes - before + record.weight();
        self.trim();
        Some(value)
    }

    fn push(&mut self, mut record: NetRecord) -> &NetRecord {
        self.next_seq += 1;
        record.seq = self.next_seq;
        self.bytes += record.weight();
        self.records.push_back(record);
        self.trim();
        self.records.back().expect("the newest record is kept")
    }

    /// Forgets the oldest records until the book is within its count and byte bounds; the
    /// newest one always stays.
    fn trim(&mut self) {
        while self.records.len() > 1
            && (self.records.len() > MAX_REQUESTS_PER_TARGET || self.bytes > MAX_NETWORK_BOOK_BYTES)
        {
            if let Some(old) = self.records.pop_front() {
                self.bytes -= old.weight();
            }
        }
    }
}

/// Enables `Network` on a fresh tab or OOPIF session (before it is resumed or navigated, so
/// its first request is seen), then the tab's current interception (`session::fetch`).
pub async fn enable(
    client: &CdpClient,
    session: &SessionId,
    handle: &super::TabHandle,
    timeout: Duration,
) -> Result<(), CdpError> {
    client.execute(session, &Enable {}, timeout).await?;
    super::fetch::on_session(client, session, handle).await;
    Ok(())
}

/// Bounded header pairs from a CDP header map; the bool says whether any were dropped.
fn headers(map: &serde_json::Map<String, Value>) -> (Vec<(String, String)>, bool) {
    let mut kept = Vec::new();
    for (name, value) in map.iter().take(MAX_HEADERS) {
        let value = match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        let value = match REDACTED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            true => REDACTED.to_owned(),
            // A `Location` or `Referer` may carry a URL with its credentials.
            false => bound(&redact_url(&value), MAX_HEADER_VALUE_CHARS),
        };
        kept.push((bound(name, MAX_HEADER_NAME_CHARS), value));
    }
    (kept, map.len() > MAX_HEADERS)
}

fn emits_for(
    registry: &Registry,
    tab: &TargetId,
    workspaces: &[String],
    event_type: &'static str,
    payload: &Value,
) -> Vec<Emit> {
    workspaces
        .iter()
        .filter_map(|workspace_id| {
            let opaque = registry.known_opaque(workspace_id, tab)?;
            let mut payload = payload.clone();
            payload["targetId"] = json!(opaque);
            let mut emit = Emit::new(workspace_id, event_type, payload);
            emit.target_id = Some(opaque.into());
            emit.sensitivity = "browser_data";
            Some(emit)
        })
        .collect()
}

fn with_book<T>(
    registry: &Registry,
    tab: &TargetId,
    f: impl FnOnce(&mut NetworkBook) -> T,
) -> Option<T> {
    let handle = registry.handle(tab)?;
    let mut book = handle.network();
    Some(f(&mut book))
}

/// `Network.requestWillBeSent` on a session of `tab` (`tab_session`: the tab's own session,
/// where the main frame's id is the tab's target id).
pub(super) fn on_request(
    registry: &mut Registry,
    tab: &TargetId,
    session: &SessionId,
    tab_session: bool,
    sent: RequestWillBeSent,
) -> Vec<Emit> {
    let interested: Vec<String> = registry
        .interested_workspaces(tab)
        .into_iter()
        .map(|(workspace_id, _)| workspace_id)
        .collect();
    if interested.is_empty() {
        return Vec::new();
    }
    let mut emits = Vec::new();
    // A redirect continues under the same raw id: the hop before it got its response.
    if let Some(redirect) = &sent.redirect_response {
        emits.extend(on_response_of(
            registry,
            tab,
            session,
            &sent.request_id,
            sent.timestamp,
            redirect,
        ));
    }
    let resource_type = sent.resource_type.clone().unwrap_or_else(|| "Other".into());
    let main_document = tab_session
        && resource_type == "Document"
        && sent.frame_id.as_deref() == Some(tab.as_str());
    let (request_headers, truncated) = headers(&sent.request.headers);
    let record = NetRecord {
        id: new_id(IdKind::Request),
        seq: 0,
        session: session.clone(),
        raw_id: sent.request_id,
        workspaces: interested.clone(),
        method: bound(&sent.request.method, 32),
        url: bound_url(&sent.request.url),
        resource_type,
        main_document,
        started_at: match sent.wall_time > 0.0 {
            true => (sent.wall_time * 1000.0) as i64,
            false => crate::version::now_ms(),
        },
        started_monotonic: sent.timestamp,
        status: None,
        mime_type: None,
        from_cache: false,
        response_ms: None,
        finished_ms: None,
        encoded_bytes: None,
        error: None,
        request_headers,
        response_headers: Vec::new(),
        headers_truncated: truncated,
    };
    let payload = with_book(registry, tab, |book| {
        if main_document {
            book.main_status = None;
        }
        let record = book.push(record);
        request_payload(record)
    });
    if let Some(payload) = payload {
        emits.extend(emits_for(
            registry,
            tab,
            &interested,
            "network.request",
            &payload,
        ));
    }
    emits
}

fn request_payload(record: &NetRecord) -> Value {
    json!({
        "requestId": record.id,
        "method": record.method,
        "url": bound_event_url(&record.url),
        "resourceType": record.resource_type,
        "mainDocument": record.main_document,
        "timing": {"startedAt": record.started_at},
    })
}

/// The `access_blocked` hint of a main document's response, if it has one. The same hint the
/// next Observation of the document carries (`page::observation_hints` with that status).
pub fn access_blocked_hint(main_document: bool, status: u16) -> Option<Hint> {
    (main_document && ACCESS_BLOCKED_STATUSES.contains(&status))
        .then(|| Hint::access_blocked_by_status(status))
}

pub(super) fn on_response(
    registry: &mut Registry,
    tab: &TargetId,
    session: &SessionId,
    received: ResponseReceived,
) -> Vec<Emit> {
    on_response_of(
        registry,
        tab,
        session,
        &received.request_id,
        received.timestamp,
        &received.response,
    )
}

fn on_response_of(
    registry: &mut Registry,
    tab: &TargetId,
    session: &SessionId,
    raw_id: &str,
    timestamp: f64,
    response: &Response,
) -> Vec<Emit> {
    let found = with_book(registry, tab, |book| {
        let (main_document, payload, workspaces) = book.update(session, raw_id, |record| {
            record.status = Some(response.status);
            record.mime_type = Some(bound(&response.mime_type, 128));
            record.from_cache = response.from_disk_cache || response.from_prefetch_cache;
            record.response_ms = record.elapsed_ms(timestamp);
            let (response_headers, truncated) = headers(&response.headers);
            record.response_headers = response_headers;
            record.headers_truncated |= truncated;
            let payload = response_payload(record);
            (record.main_document, payload, record.workspaces.clone())
        })?;
        if main_document {
            book.main_status = Some(response.status);
        }
        Some((payload, workspaces))
    })
    .flatten();
    let Some((payload, workspaces)) = found else {
        return Vec::new();
    };
    emits_for(registry, tab, &workspaces, "network.response", &payload)
}

fn response_payload(record: &NetRecord) -> Value {
    let hints: Vec<EventHint> = record
        .status
        .and_then(|status| access_blocked_hint(record.main_document, status))
        .into_iter()
        .map(EventHint::from)
        .collect();
    let mut payload = json!({
        "requestId": record.id,
        "method": record.method,
        "url": bound_event_url(&record.url),
        "resourceType": record.resource_type,
        "mainDocument": record.main_document,
        "status": record.status,
        "mimeType": record.mime_type,
        "fromCache": record.from_cache,
        "timing": {"startedAt": record.started_at, "responseMs": record.response_ms},
    });
    if !hints.is_empty() {
        payload["hints"] = json!(hints);
    }
    payload
}

pub(super) fn on_finished(
    registry: &mut Registry,
    tab: &TargetId,
    session: &SessionId,
    finished: LoadingFinished,
) {
    with_book(registry, tab, |book| {
        book.update(session, &finished.request_id, |record| {
            record.finished_ms = record.elapsed_ms(finished.timestamp);
            record.encoded_bytes = Some(finished.encoded_data_length.max(0.0) as u64);
        })
    });
}

/// A request that failed (blocked, refused, cancelled) gets its `network.response` with
/// `failed: true` and no status. One the Broker failed as blocked (`blockedReason: "inspector"`)
/// because a Workspace's URL policy refuses its URL says so in `urlPolicy` (`reason`, and the
/// `block` pattern it matched); one a `block` rule failed says `blockedByRule`.
pub(super) fn on_failed(
    registry: &mut Registry,
    net: &NetControl,
    tab: &TargetId,
    session: &SessionId,
    failed: LoadingFailed,
) -> Vec<Emit> {
    let by_broker = failed.blocked_reason.as_deref() == Some("inspector");
    let found = with_book(registry, tab, |book| {
        book.update(session, &failed.request_id, |record| {
            record.error = Some(bound(&failed.error_text, MAX_ERROR_CHARS));
            record.finished_ms = record.elapsed_ms(failed.timestamp);
            let payload = json!({
                "requestId": record.id,
                "method": record.method,
                "url": bound_event_url(&record.url),
                "resourceType": record.resource_type,
                "mainDocument": record.main_document,
                "status": Value::Null,
                "failed": true,
                "errorText": record.error,
                "blockedByRule": by_broker,
                "timing": {"startedAt": record.started_at, "finishedMs": record.finished_ms},
            });
            (payload, record.workspaces.clone(), record.url.clone())
        })
    })
    .flatten();
    let Some((mut payload, workspaces, url)) = found else {
        return Vec::new();
    };
    // The policy is fixed for a Workspace's lifetime, so asking it again gives the reason the
    // request was failed for (the policy is asked before any rule).
    if let Some(refusal) = by_broker
        .then(|| net.policy_refusal(&workspaces, &url))
        .flatten()
    {
        payload["blockedByRule"] = json!(false);
        payload["urlPolicy"] = refusal.to_json();
    }
    emits_for(registry, tab, &workspaces, "network.response", &payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: u64, url: &str, kind: &str, status: Option<u16>, workspace: &str) -> NetRecord {
        NetRecord {
            id: format!("request:{url}"),
            seq,
            session: SessionId::new("S"),
            raw_id: seq.to_string(),
            workspaces: vec![workspace.to_owned()],
            method: "GET".into(),
            url: url.into(),
            resource_type: kind.into(),
            main_document: kind == "Document",
            started_at: 1,
            started_monotonic: 1.0,
            status,
            mime_type: None,
            from_cache: false,
            response_ms: None,
            finished_ms: None,
            encoded_bytes: None,
            error: None,
            request_headers: Vec::new(),
            response_headers: Vec::new(),
            headers_truncated: false,
        }
    }

    #[test]
    fn list_filters_pages_and_hides_other_workspaces() {
        let mut book = NetworkBook::default();
        book.push(record(0, "http://a/", "Document", Some(200), "workspace:a"));
        book.push(record(
            0,
            "http://a/x.png",
            "Image",
            Some(403),
            "workspace:a",
        ));
        book.push(record(0, "http://a/api/1", "XHR", Some(200), "workspace:a"));
        book.push(record(0, "http://a/api/2", "XHR", Some(500), "workspace:b"));
        let all = NetFilter::default();
        let (page, more) = book.list("workspace:a", &all, 2);
        assert_eq!(page.len(), 2);
        assert!(more);
        let after = NetFilter {
            after: Some(page[1].seq),
            ..NetFilter::default()
        };
        let (rest, more) = book.list("workspace:a", &after, 10);
        assert_eq!(rest.len(), 1);
        assert!(!more);
        let api = NetFilter {
            url_contains: Some("/api/".into()),
            resource_type: Some("xhr".into()),
            ..NetFilter::default()
        };
        assert_eq!(book.list("workspace:a", &api, 10).0.len(), 1);
        let forbidden = NetFilter {
            status: Some(403),
            ..NetFilter::default()
        };
        assert_eq!(
            book.list("workspace:a", &forbidden, 10).0[0].url,
            "http://a/x.png"
        );
        assert!(book.get(&"workspace:b".into(), &page[0].id).is_none());
    }

    #[test]
    fn the_ring_is_bounded() {
        let mut book = NetworkBook::default();
        for n in 0..MAX_REQUESTS_PER_TARGET + 5 {
            book.push(record(
                0,
                &format!("http://a/{n}"),
                "Image",
                None,
                "workspace:a",
            ));
        }
        assert_eq!(book.len(), MAX_REQUESTS_PER_TARGET);
        let (first, _) = book.list("workspace:a", &NetFilter::default(), 1);
        assert_eq!(first[0].url, "http://a/5");
    }

    /// A flood of requests with the largest headers the book keeps: the book never holds more
    /// than its count and byte bounds, its byte count is what its records hold, and a
    /// response that grows a record is counted too.
    #[test]
    fn a_flood_stays_within_the_count_and_byte_bounds() {
        let mut book = NetworkBook::default();
        let big = |n: usize| {
            let mut heavy = record(0, &format!("http://a/{n}"), "XHR", None, "workspace:a");
            heavy.raw_id = n.to_string();
            heavy.request_headers = (0..MAX_HEADERS)
                .map(|h| (format!("h{h}"), "v".repeat(MAX_HEADER_VALUE_CHARS)))
                .collect();
            heavy
        };
        let recount =
            |book: &NetworkBook| book.records.iter().map(NetRecord::weight).sum::<usize>();
        for n in 0..50 {
            book.push(big(n));
            assert!(
                book.bytes() <= MAX_NETWORK_BOOK_BYTES,
                "{} bytes",
                book.bytes()
            );
            assert_eq!(book.bytes(), recount(&book));
        }
        assert!(book.len() < 10, "{} records of 256 KiB", book.len());
        let (newest, _) = book.list(
            "workspace:a",
            &NetFilter {
                after: Some(49),
                ..NetFilter::default()
            },
            10,
        );
        assert_eq!(newest[0].url, "http://a/49", "the newest stays");
        // A response adds headers to a kept record: still within the bound.
        let response_headers: Vec<(String, String)> = (0..MAX_HEADERS)
            .map(|h| (format!("r{h}"), "w".repeat(MAX_HEADER_VALUE_CHARS)))
            .collect();
        book.update(&SessionId::new("S"), "49", |record| {
            record.response_headers = response_headers;
        });
        assert!(book.bytes() <= MAX_NETWORK_BOOK_BYTES || book.len() == 1);
        assert_eq!(book.bytes(), recount(&book));
        // Many small ones: the count bound holds, and the bytes stay far below theirs.
        for n in 0..3 * MAX_REQUESTS_PER_TARGET {
            book.push(record(
                0,
                &format!("http://a/s{n}"),
                "Image",
                None,
                "workspace:a",
            ));
        }
        assert_eq!(book.len(), MAX_REQUESTS_PER_TARGET);
        assert_eq!(book.bytes(), recount(&book));
        assert!(book.bytes() <= MAX_NETWORK_BOOK_BYTES);
        book.forget_records();
        assert_eq!((book.len(), book.bytes()), (0, 0));
    }

    #[test]
    fn headers_are_bounded_and_credentials_redacted() {
        let mut map = serde_json::Map::new();
        map.insert("Authorization".into(), json!("Basic dTpwYXNzd29yZA=="));
        map.insert(
            "X-Long".into(),
            json!("v".repeat(MAX_HEADER_VALUE_CHARS + 10)),
        );
        let (kept, truncated) = headers(&map);
        assert!(!truncated);
        let auth = kept.iter().find(|(n, _)| n == "Authorization").unwrap();
        assert_eq!(auth.1, REDACTED);
        let long = kept.iter().find(|(n, _)| n == "X-Long").unwrap();
        assert_eq!(long.1.chars().count(), MAX_HEADER_VALUE_CHARS);
        for n in 0..MAX_HEADERS + 1 {
            map.insert(format!("h{n}"), json!("x"));
        }
        assert!(headers(&map).1);
    }

    #[test]
    fn access_blocked_only_for_main_document_403_and_429() {
        assert!(access_blocked_hint(true, 403).is_some());
        assert!(access_blocked_hint(true, 429).is_some());
        assert!(access_blocked_hint(true, 404).is_none());
        assert!(access_blocked_hint(false, 403).is_none());
        let hint =
            serde_json::to_value(EventHint::from(access_blocked_hint(true, 429).unwrap())).unwrap();
        assert_eq!(hint["code"], "access_blocked");
        assert_eq!(hint["source"], "network");
        assert_eq!(hint["status"], 429);
    }
}
