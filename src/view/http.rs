//! The view's HTTP server on 127.0.0.1 (hyper, HTTP/1.1): the static page, which carries no
//! data, and the JSON API behind the token.
//!
//! Every request is checked first: its `Host` must be the server's own `127.0.0.1:PORT` (a
//! rebound name is another site) and its `Origin`, when present, the view's own origin;
//! otherwise it is answered 403 with nothing read from the Broker. `POST /api/session` spends a
//! one-time secret (header `X-BP-Secret`) for a token; every other `/api/` request needs that
//! token in `X-BP-Token` (never a cookie); the POSTs (Done of a hand-off, take-over, input,
//! hand-back) pass their JSON body on to the Broker's matching method. `GET /api/live` becomes
//! the live channel's WebSocket (`live.rs`), whose first message carries the token. Answers are `no-store`,
//! and the page runs under a Content-Security-Policy that allows only its own scripts and
//! connections.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;

use super::auth::Gate;
use super::link::{self, LinkError};
use crate::home::Home;

/// HTTP connections served at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 32;

/// Largest request body the API reads (a person's note to a hand-off, an input step).
const MAX_BODY_BYTES: usize = 16 * 1024;

const INDEX_HTML: &str = include_str!("page/index.html");
const BOOT_JS: &str = include_str!("page/boot.js");
const APP_JS: &str = include_str!("page/app.js");
const APP_CSS: &str = include_str!("page/app.css");

/// The page may run its own scripts and styles and talk to its own origin, nothing else.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// What every request handler shares.
pub struct Server {
    pub gate: Arc<Gate>,
    pub home: Home,
}

/// Serves `listener` until `stop` is set.
pub async fn serve(listener: TcpListener, server: Arc<Server>, stop: watch::Sender<bool>) {
    let mut stopped = stop.subscribe();
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped.wait_for(|s| *s) => return,
        };
        let Ok((stream, _)) = accepted else {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            continue;
        };
        let server = server.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let server = server.clone();
                async move { Ok::<_, Infallible>(handle(&server, request).await) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .with_upgrades()
                .await;
            drop(permit);
        });
    }
}

type Answer = Response<Full<Bytes>>;

fn respond(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Answer {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert("content-security-policy", HeaderValue::from_static(CSP));
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    response
}

fn json_answer(status: StatusCode, value: &Value) -> Answer {
    respond(status, "application/json", value.to_string())
}

fn refused(why: &str) -> Answer {
    json_answer(StatusCode::FORBIDDEN, &json!({"error": why}))
}

fn header_text<'a>(request: &'a Request<Incoming>, name: &str) -> Option<&'a str> {
    request.headers().get(name).and_then(|v| v.to_str().ok())
}

/// The query's `name`, decoded.
fn query_param(request: &Request<Incoming>, name: &str) -> Option<String> {
    let query = request.uri().query()?;
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
}

async fn handle(server: &Arc<Server>, mut request: Request<Incoming>) -> Answer {
    let gate = &server.gate;
    if !gate.host_ok(header_text(&request, "host")) {
        return refused("wrong Host");
    }
    if !gate.origin_ok(header_text(&request, "origin")) {
        return refused("wrong Origin");
    }
    let path = request.uri().path().to_owned();
    let method = request.method().clone();
    if !path.starts_with("/api/") {
        return match (method, path.as_str()) {
            (Method::GET, "/") => respond(StatusCode::OK, "text/html; charset=utf-8", INDEX_HTML),
            (Method::GET, "/boot.js") => respond(StatusCode::OK, "text/javascript", BOOT_JS),
            (Method::GET, "/app.js") => respond(StatusCode::OK, "text/javascript", APP_JS),
            (Method::GET, "/app.css") => respond(StatusCode::OK, "text/css", APP_CSS),
            _ => json_answer(StatusCode::NOT_FOUND, &json!({"error": "not found"})),
        };
    }
    if (&method, path.as_str()) == (&Method::POST, "/api/session") {
        let token = header_text(&request, "x-bp-secret").and_then(|secret| gate.exchange(secret));
        return match token {
            Some(token) => json_answer(StatusCode::OK, &json!({"token": token})),
            None => refused(
                "the secret is wrong, spent or expired: run `browser-pilot view` for a new URL",
            ),
        };
    }
    if (&method, path.as_str()) == (&Method::GET, "/api/live") {
        return upgrade(server, &mut request);
    }
    if !header_text(&request, "x-bp-token").is_some_and(|token| gate.token_ok(token)) {
        return refused("no valid token");
    }
    let origin = gate.origin();
    let broker = |method: &'static str, params: Value| {
        let home = &server.home;
        let origin = origin.clone();
        async move { answer_of(link::call(home, &origin, method, params).await) }
    };
    match (method, path.as_str()) {
        (Method::GET, "/api/state") => broker("view/state", json!({})).await,
        (Method::GET, "/api/events") => {
            let Some(workspace_id) = query_param(&request, "workspaceId") else {
                return json_answer(
                    StatusCode::BAD_REQUEST,
                    &json!({"error": "workspaceId is required"}),
                );
            };
            let target_id = query_param(&request, "targetId");
            broker(
                "view/events",
                json!({"workspaceId": workspace_id, "targetId": target_id}),
            )
            .await
        }
        (Method::GET, "/api/frame") => {
            let (Some(workspace_id), Some(target_id)) = (
                query_param(&request, "workspaceId"),
                query_param(&request, "targetId"),
            ) else {
                return json_answer(
                    StatusCode::BAD_REQUEST,
                    &json!({"error": "workspaceId and targetId are required"}),
                );
            };
            broker(
                "view/frame",
                json!({"workspaceId": workspace_id, "targetId": target_id}),
            )
            .await
        }
        (Method::POST, path) => {
            let method = match path {
                "/api/handoff/done" => "handoff/done",
                "/api/takeover" => "view/takeover",
                "/api/input" => "view/input",
                "/api/handback" => "view/handback",
                "/api/recording/start" => "recording/start",
                "/api/recording/stop" => "recording/stop",
                _ => return json_answer(StatusCode::NOT_FOUND, &json!({"error": "not found"})),
            };
            let body = match Limited::new(request.into_body(), MAX_BODY_BYTES)
                .collect()
                .await
            {
                Ok(body) => body.to_bytes(),
                Err(_) => {
                    return json_answer(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        &json!({"error": "body too large"}),
                    );
                }
            };
            let params: Value = serde_json::from_slice(&body).unwrap_or(json!({}));
            broker(method, params).await
        }
        _ => json_answer(StatusCode::NOT_FOUND, &json!({"error": "not found"})),
    }
}

/// `GET /api/live`: switches to the WebSocket of the live channel (`live.rs`), which reads the
/// token from the page's first message.
fn upgrade(server: &Arc<Server>, request: &mut Request<Incoming>) -> Answer {
    let is_websocket = header_text(request, "upgrade")
        .is_some_and(|value| value.eq_ignore_ascii_case("websocket"))
        && header_text(request, "sec-websocket-version") == Some("13");
    let Some(key) = header_text(request, "sec-websocket-key").filter(|_| is_websocket) else {
        return json_answer(
            StatusCode::BAD_REQUEST,
            &json!({"error": "a WebSocket upgrade is required"}),
        );
    };
    let Ok(place) = super::live::CHANNELS.try_acquire() else {
        return json_answer(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({"error": "too many live channels are open: close a view page"}),
        );
    };
    let accept = derive_accept_key(key.as_bytes());
    let upgrading = hyper::upgrade::on(request);
    let server = server.clone();
    tokio::spawn(async move {
        if let Ok(upgraded) = upgrading.await {
            super::live::serve(server, upgraded).await;
        }
        drop(place);
    });
    let mut response = respond(StatusCode::SWITCHING_PROTOCOLS, "text/plain", "");
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(accept) = HeaderValue::from_str(&accept) {
        headers.insert("sec-websocket-accept", accept);
    }
    response
}

fn answer_of(outcome: Result<Value, LinkError>) -> Answer {
    match outcome {
        Ok(value) => json_answer(StatusCode::OK, &value),
        Err(LinkError::NoBroker) => json_answer(
            StatusCode::OK,
            &json!({"broker": null, "workspaces": [], "note": "no Broker is running"}),
        ),
        Err(LinkError::Rpc(error)) => json_answer(StatusCode::CONFLICT, &json!({"error": error})),
        Err(error @ LinkError::Failed(_)) => json_answer(
            StatusCode::BAD_GATEWAY,
            &json!({"error": error.to_string()}),
        ),
    }
}
