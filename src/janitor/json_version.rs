//! The WebSocket URL of a remote browser listed by its `http(s)://host:port` form: one
//! `GET <path>/json/version` (the endpoint's query and headers kept, so a token travels as it
//! would on the upgrade) over the endpoint's own transport, TLS included, and the answer's
//! `webSocketDebuggerUrl` put back on the endpoint's host. Errors never quote the URL or the
//! answer (either may carry a token).

use std::io::{self, Read, Write};

use tokio::net::TcpStream;

use super::endpoint::WsEndpoint;
use super::socket::{JanitorError, Transport, open_transport, wait_ready};

/// Largest `/json/version` answer read (Chromium's is about 500 bytes).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// Asks the engine behind `endpoint` (an `http(s)://` base) for its browser WebSocket URL.
pub(super) async fn resolve(endpoint: &WsEndpoint) -> Result<String, JanitorError> {
    let base = url::Url::parse(&endpoint.url)
        .map_err(|_| JanitorError::InvalidUrl("the remote browser's endpoint".to_owned()))?;
    let (stream, mut transport) = open_transport(endpoint).await?;
    let request = request(&base, &endpoint.headers);
    write_all(&stream, &mut transport, request.as_bytes()).await?;
    let mut answer = Vec::new();
    let mut buffer = [0u8; 8192];
    let (status, body) = loop {
        let eof = match transport.read(&mut buffer) {
            Ok(0) => true,
            Ok(read) => {
                answer.extend_from_slice(&buffer[..read]);
                false
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                wait_ready(&stream, &mut transport).await?;
                continue;
            }
            // TLS ended without close_notify: what arrived is judged as a whole.
            Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => true,
            Err(error) => return Err(JanitorError::from_io(error)),
        };
        if answer.len() > MAX_ANSWER_BYTES {
            return Err(not_an_answer());
        }
        if let Some(parsed) = parse_answer(&answer, eof)? {
            break parsed;
        }
    };
    if status != 200 {
        return Err(JanitorError::Http(status));
    }
    websocket_url(&base, endpoint.tls.is_some(), &body)
}

/// The request line and headers: `Connection: close`, the entry's headers.
fn request(base: &url::Url, headers: &[(String, String)]) -> String {
    let mut target = format!("{}/json/version", base.path().trim_end_matches('/'));
    if let Some(query) = base.query() {
        target.push('?');
        target.push_str(query);
    }
    let host = &base[url::Position::BeforeHost..url::Position::AfterPort];
    let mut request = format!(
        "GET {target} HTTP/1.1\r\nHost: {host}\r\nAccept: application/json\r\nConnection: close\r\n"
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request
}

async fn write_all(
    stream: &TcpStream,
    transport: &mut Transport,
    bytes: &[u8],
) -> Result<(), JanitorError> {
    let mut written = 0;
    while written < bytes.len() {
        match transport.write(&bytes[written..]) {
            Ok(0) => return Err(JanitorError::Closed),
            Ok(count) => written += count,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                wait_ready(stream, transport).await?
            }
            Err(error) => return Err(JanitorError::from_io(error)),
        }
    }
    loop {
        match transport.flush() {
            Ok(()) => return Ok(()),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                wait_ready(stream, transport).await?
            }
            Err(error) => return Err(JanitorError::from_io(error)),
        }
    }
}

fn not_an_answer() -> JanitorError {
    JanitorError::Protocol("the engine's /json/version answer is not a usable HTTP response".into())
}

/// The status and body of a complete HTTP response, `None` while more may come (`eof`: nothing
/// more will). A status other than 200 is returned as soon as the head is complete.
fn parse_answer(bytes: &[u8], eof: bool) -> Result<Option<(u16, Vec<u8>)>, JanitorError> {
    let Some(end) = find(bytes, b"\r\n\r\n") else {
        return if eof { Err(not_an_answer()) } else { Ok(None) };
    };
    let head = std::str::from_utf8(&bytes[..end]).map_err(|_| not_an_answer())?;
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .filter(|line| line.starts_with("HTTP/1."))
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(not_an_answer)?;
    if status != 200 {
        return Ok(Some((status, Vec::new())));
    }
    let (mut length, mut chunked) = (None, false);
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim(), value.trim());
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(value.parse::<usize>().map_err(|_| not_an_answer())?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().contains("chunked");
        }
    }
    let body = &bytes[end + 4..];
    let complete = match (chunked, length) {
        (true, _) => dechunk(body),
        (false, Some(length)) => (body.len() >= length).then(|| body[..length].to_vec()),
        (false, None) => eof.then(|| body.to_vec()),
    };
    match complete {
        Some(body) => Ok(Some((status, body))),
        None if eof => Err(not_an_answer()),
        None => Ok(None),
    }
}

/// A chunked body's bytes once its last chunk arrived.
fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = find(body, b"\r\n")?;
        let size = std::str::from_utf8(&body[..line_end]).ok()?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        if body.len() < size + 2 {
            return None;
        }
        out.extend_from_slice(&body[..size]);
        body = &body[size + 2..];
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// The WebSocket URL: the endpoint's host and port with `ws`/`wss` as its scheme, and the path
/// of the answer's `webSocketDebuggerUrl` with that URL's query, else the endpoint's (an engine
/// may answer with its internal address, or without the token it was asked with).
fn websocket_url(base: &url::Url, tls: bool, body: &[u8]) -> Result<String, JanitorError> {
    let missing = || {
        JanitorError::Protocol("the engine's /json/version names no webSocketDebuggerUrl".into())
    };
    let answer: serde_json::Value = serde_json::from_slice(body).map_err(|_| missing())?;
    let named = answer
        .get("webSocketDebuggerUrl")
        .and_then(|url| url.as_str())
        .and_then(|url| url::Url::parse(url).ok())
        .filter(|url| matches!(url.scheme(), "ws" | "wss"))
        .ok_or_else(missing)?;
    let mut url = base.clone();
    url.set_scheme(if tls { "wss" } else { "ws" })
        .map_err(|()| missing())?;
    url.set_path(named.path());
    if named.query().is_some() {
        url.set_query(named.query());
    }
    url.set_fragment(None);
    Ok(url.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_keeps_the_endpoint_path_query_and_headers() {
        let base = url::Url::parse("http://127.0.0.1:3000/chromium/?token=T").unwrap();
        let headers = [("Authorization".to_owned(), "Bearer K".to_owned())];
        assert_eq!(
            request(&base, &headers),
            "GET /chromium/json/version?token=T HTTP/1.1\r\nHost: 127.0.0.1:3000\r\nAccept: application/json\r\nConnection: close\r\nAuthorization: Bearer K\r\n\r\n"
        );
        let bare = url::Url::parse("https://farm.example").unwrap();
        assert!(
            request(&bare, &[]).starts_with("GET /json/version HTTP/1.1\r\nHost: farm.example\r\n")
        );
    }

    #[test]
    fn answers_are_complete_by_length_by_chunks_or_at_the_end() {
        let body = br#"{"webSocketDebuggerUrl":"ws://127.0.0.1:9222/devtools/browser/x"}"#;
        let sized = [
            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).as_bytes(),
            body,
        ]
        .concat();
        assert_eq!(
            parse_answer(&sized[..sized.len() - 1], false).unwrap(),
            None
        );
        assert_eq!(
            parse_answer(&sized, false).unwrap(),
            Some((200, body.to_vec()))
        );
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n world\r\n0\r\n\r\n";
        assert_eq!(
            parse_answer(chunked, false).unwrap(),
            Some((200, b"hello world".to_vec()))
        );
        assert_eq!(parse_answer(&chunked[..60], false).unwrap(), None);
        let open = b"HTTP/1.0 200 OK\r\n\r\n{}";
        assert_eq!(parse_answer(open, false).unwrap(), None);
        assert_eq!(
            parse_answer(open, true).unwrap(),
            Some((200, b"{}".to_vec()))
        );
        assert_eq!(
            parse_answer(b"HTTP/1.1 401 Unauthorized\r\n\r\n", false).unwrap(),
            Some((401, Vec::new()))
        );
        assert!(parse_answer(b"SSH-2.0-x\r\n\r\n", false).is_err());
        assert!(parse_answer(b"HTTP/1.1 200", true).is_err());
    }

    #[test]
    fn the_websocket_url_keeps_the_endpoint_host_and_its_token() {
        let base = url::Url::parse("https://farm.example:8443/?token=T").unwrap();
        let answer = br#"{"Browser":"Chrome","webSocketDebuggerUrl":"ws://10.1.2.3:9222/devtools/browser/abc"}"#;
        assert_eq!(
            websocket_url(&base, true, answer).unwrap(),
            "wss://farm.example:8443/devtools/browser/abc?token=T"
        );
        // browserless names its root without the token.
        let local = url::Url::parse("http://127.0.0.1:3000?token=T").unwrap();
        assert_eq!(
            websocket_url(
                &local,
                false,
                br#"{"webSocketDebuggerUrl":"ws://127.0.0.1:3000"}"#
            )
            .unwrap(),
            "ws://127.0.0.1:3000/?token=T"
        );
        let own_query = br#"{"webSocketDebuggerUrl":"ws://h/session?id=9"}"#;
        assert_eq!(
            websocket_url(&local, false, own_query).unwrap(),
            "ws://127.0.0.1:3000/session?id=9"
        );
        for bad in [
            &b"{}"[..],
            b"not json",
            br#"{"webSocketDebuggerUrl":"http://h/x"}"#,
        ] {
            let error = websocket_url(&base, true, bad).unwrap_err();
            assert!(!error.to_string().contains("token"), "{error}");
        }
    }
}
