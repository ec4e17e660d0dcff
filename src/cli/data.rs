//! `bp`'s commands over the page's data and the network: `bp console`, `bp eval`, `bp cookies`,
//! `bp network` (requests, one request, rules), `bp auth`, `bp downloads` and `bp emulate`. Each maps to tool
//! calls on the compatibility session (`compat.rs`) and prints through `output.rs`, exactly as
//! the commands of `run.rs` do.
//!
//! Owns those mappings and their text forms. The numbers it prints (`bp network list`,
//! `bp network rules`) are positions in the Broker's own lists, read again by the command that
//! takes them; nothing is written to disk but the downloads `--save` was asked for, under the
//! adapter's export rules (`crate::adapter::exports`).

use std::path::Path;

use base64::Engine;
use serde_json::{Value, json};

use super::args::{
    AuthAction, CookiePlace, CookiesAction, EmulateArgs, NetworkAction, RequestFilter, RulesAction,
};
use super::compat::Compat;
use super::output::{Output, Style, clean};
use super::run::{absolute, text_from_stdin};
use crate::adapter::exports::Downloads;
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};

/// Requests per `browser.network.list` page (the tool's maximum).
const REQUEST_PAGE: u64 = 200;
/// Pages read for every request of a tab: the Broker keeps at most 1,000 per tab.
const REQUEST_PAGES: usize = 6;
/// Requests `bp network list` prints unless `--limit` says otherwise (the newest).
const SHOWN_REQUESTS: usize = 50;
/// The journal window `bp downloads` reads its download events from.
const DOWNLOAD_EVENTS: u64 = 5_000;
/// What a refused `--save` directory tells the user.
const SAVE_REMEDIATION: &str = "Give --save a directory you own that others cannot write to (bp creates it 0700 when missing).";

/// `bp console`: the current tab's console entries.
pub async fn console(
    compat: &Compat,
    output: &Output,
    levels: &[String],
    after: Option<u64>,
    limit: Option<u32>,
) -> Result<(), RpcError> {
    let (target, _) = compat.current_target().await?;
    let mut arguments = json!({});
    if !levels.is_empty() {
        arguments["levels"] = json!(levels);
    }
    if let Some(after) = after {
        arguments["after"] = json!(after);
    }
    if let Some(limit) = limit {
        arguments["limit"] = json!(limit);
    }
    let listed = compat
        .tool("browser.console.list", arguments, Some(&target))
        .await?;
    output.print(&listed.result, |style| {
        render_console(&listed.result, style)
    });
    Ok(())
}

fn render_console(result: &Value, style: &Style) -> String {
    let mut out = String::new();
    let entries = result["entries"].as_array().cloned().unwrap_or_default();
    for entry in &entries {
        let level = entry["level"].as_str().unwrap_or("");
        let painted = match level {
            "error" | "exception" => style.red(&format!("{level:<9}")),
            "warning" => style.yellow(&format!("{level:<9}")),
            _ => style.dim(&format!("{level:<9}")),
        };
        out.push_str(&format!(
            "{:>5} {painted} {}\n",
            entry["sequence"].as_u64().unwrap_or(0),
            clean(entry["text"].as_str().unwrap_or(""))
        ));
    }
    if entries.is_empty() {
        out.push_str(&style.dim("(no console messages)\n"));
    }
    if result["dropped"].as_u64().is_some_and(|d| d > 0) {
        out.push_str(&style.dim(&format!(
            "{} older message(s) were dropped\n",
            result["dropped"]
        )));
    }
    if result["hasMore"] == true
        && let Some(last) = entries.last()
    {
        out.push_str(&style.dim(&format!("more: bp console --after {}\n", last["sequence"])));
    }
    out
}

/// `bp eval`: an expression, or a function with JSON arguments, in the page's own world.
pub async fn eval(
    compat: &Compat,
    output: &Output,
    source: String,
    function: bool,
    args: Vec<Value>,
    max_chars: Option<u32>,
) -> Result<(), RpcError> {
    let source = match source.as_str() {
        "-" => text_from_stdin()?,
        _ => source,
    };
    let (target, _) = compat.current_target().await?;
    let mut arguments = match function {
        true => json!({"function": source}),
        false => json!({"expression": source}),
    };
    if !args.is_empty() {
        arguments["args"] = json!(args);
    }
    if let Some(max_chars) = max_chars {
        arguments["maxChars"] = json!(max_chars);
    }
    let evaluated = compat
        .tool("browser.eval", arguments, Some(&target))
        .await?;
    let result = &evaluated.result;
    output.print(result, |style| {
        let mut out = match &result["value"] {
            Value::String(text) => page_text(text),
            other => serde_json::to_string_pretty(other).unwrap_or_default(),
        };
        out.push('\n');
        if result["truncated"] == true {
            out.push_str(&style.dim(&format!(
                "(cut: {})\n",
                clean(&result["truncationReasons"].to_string())
            )));
        }
        out
    });
    Ok(())
}

/// Page text kept on its lines, every other control character replaced.
fn page_text(text: &str) -> String {
    text.chars()
        .map(|c| match c == '\n' || !c.is_control() {
            true => c,
            false => ' ',
        })
        .collect::<String>()
        .trim_end()
        .to_owned()
}

/// `bp cookies [list]`.
pub async fn cookies(
    compat: &Compat,
    output: &Output,
    action: Option<CookiesAction>,
) -> Result<(), RpcError> {
    let (domain, urls, limit) = match action {
        None => (None, Vec::new(), None),
        Some(CookiesAction::List {
            domain,
            urls,
            limit,
        }) => (domain, urls, limit),
        Some(CookiesAction::Set {
            name,
            value,
            place,
            secure,
            http_only,
            same_site,
            expires,
        }) => {
            let value = match value.as_str() {
                "-" => text_from_stdin()?,
                _ => value,
            };
            let mut arguments = json!({"name": name, "value": value});
            place.add_to(&mut arguments);
            for (key, flag) in [("secure", secure), ("httpOnly", http_only)] {
                if flag {
                    arguments[key] = json!(true);
                }
            }
            if let Some(same_site) = same_site {
                arguments["sameSite"] = json!(same_site);
            }
            if let Some(expires) = expires {
                arguments["expires"] = json!(expires);
            }
            return cookie_write(compat, output, "browser.cookies.set", arguments).await;
        }
        Some(CookiesAction::Delete { name, place }) => {
            let mut arguments = json!({"name": name});
            place.add_to(&mut arguments);
            return cookie_write(compat, output, "browser.cookies.delete", arguments).await;
        }
    };
    let (target, _) = compat.current_target().await?;
    let mut arguments = json!({});
    if let Some(domain) = domain {
        arguments["domain"] = json!(domain);
    }
    if !urls.is_empty() {
        arguments["urls"] = json!(urls);
    }
    if let Some(limit) = limit {
        arguments["limit"] = json!(limit);
    }
    let listed = compat
        .tool("browser.cookies.list", arguments, Some(&target))
        .await?;
    output.print(&listed.result, |style| {
        let mut out = String::new();
        for cookie in listed.result["cookies"].as_array().into_iter().flatten() {
            let mut flags = Vec::new();
            for (key, word) in [("httpOnly", "HttpOnly"), ("secure", "Secure")] {
                if cookie[key] == true {
                    flags.push(word.to_owned());
                }
            }
            if let Some(same_site) = cookie["sameSite"].as_str() {
                flags.push(format!("SameSite={same_site}"));
            }
            if cookie["session"] == true {
                flags.push("session".to_owned());
            }
            out.push_str(&format!(
                "{}={}  {}{}  {}\n",
                style.bold(&clean(cookie["name"].as_str().unwrap_or(""))),
                clean(cookie["value"].as_str().unwrap_or("")),
                clean(cookie["domain"].as_str().unwrap_or("")),
                clean(cookie["path"].as_str().unwrap_or("")),
                style.dim(&flags.join(" "))
            ));
        }
        out.push_str(&style.dim(&format!("{} cookie(s)\n", listed.result["total"])));
        out
    });
    Ok(())
}

impl CookiePlace {
    fn add_to(self, arguments: &mut Value) {
        for (key, value) in [
            ("url", self.url),
            ("domain", self.domain),
            ("path", self.path),
        ] {
            if let Some(value) = value {
                arguments[key] = json!(value);
            }
        }
    }
}

/// `bp cookies set|delete`: the write, then what reading the jar back showed (`verified`, or
/// why not), as every action command prints its evidence.
async fn cookie_write(
    compat: &Compat,
    output: &Output,
    tool: &str,
    arguments: Value,
) -> Result<(), RpcError> {
    let (target, _) = compat.current_target().await?;
    let written = compat.tool(tool, arguments, Some(&target)).await?;
    let result = &written.result;
    let evidence = &result["evidence"];
    output.print(result, |style| {
        let what = match tool {
            "browser.cookies.set" => match result["cookie"].as_object() {
                Some(cookie) => format!(
                    "set {}  {}{}",
                    style.bold(&clean(cookie["name"].as_str().unwrap_or(""))),
                    clean(cookie["domain"].as_str().unwrap_or("")),
                    clean(cookie["path"].as_str().unwrap_or(""))
                ),
                None => "set".to_owned(),
            },
            _ => format!("deleted {} cookie(s)", result["deleted"]),
        };
        let status = clean(evidence["status"].as_str().unwrap_or("unavailable"));
        let mut out = format!("{what}  {}\n", style.dim(&status));
        if let Some(reason) = evidence["reason"].as_str() {
            out.push_str(&style.dim(&format!(
                "  {}: {}\n",
                clean(reason),
                clean(&evidence["differs"].to_string())
            )));
        }
        out
    });
    Ok(())
}

/// `bp emulate`: `browser.emulate` with the fields given, then the overrides in force.
pub async fn emulate(compat: &Compat, output: &Output, args: EmulateArgs) -> Result<(), RpcError> {
    let (target, _) = compat.current_target().await?;
    let mut arguments = json!({});
    if args.reset {
        arguments["reset"] = json!(true);
    }
    let text = [
        ("device", args.device),
        ("userAgent", args.user_agent),
        ("locale", args.locale),
        ("timezone", args.timezone),
        ("colorScheme", args.color_scheme),
    ];
    for (key, value) in text {
        if let Some(value) = value {
            arguments[key] = json!(value);
        }
    }
    for (key, value) in [("width", args.width), ("height", args.height)] {
        if let Some(value) = value {
            arguments[key] = json!(value);
        }
    }
    if let Some(scale) = args.scale {
        arguments["deviceScaleFactor"] = json!(scale);
    }
    let flags = [
        ("touch", args.touch),
        ("reducedMotion", args.reduced_motion),
        ("offline", args.offline),
    ];
    for (key, value) in flags {
        if let Some(value) = value {
            arguments[key] = json!(value);
        }
    }
    if let [latitude, longitude] = args.geo[..] {
        arguments["geolocation"] = json!({"latitude": latitude, "longitude": longitude});
    }
    let mut throttle = json!({});
    let caps = [
        ("latencyMs", args.latency),
        ("downloadKbps", args.download_kbps),
        ("uploadKbps", args.upload_kbps),
    ];
    for (key, value) in caps {
        if let Some(value) = value {
            throttle[key] = json!(value);
        }
    }
    if throttle.as_object().is_some_and(|t| !t.is_empty()) {
        arguments["throttle"] = throttle;
    }
    let emulated = compat
        .tool("browser.emulate", arguments, Some(&target))
        .await?;
    output.print(&emulated.result, |_| {
        let emulation = &emulated.result["emulation"];
        match emulation.as_object() {
            None => "no emulation: the tab's own device, place and network\n".to_owned(),
            Some(fields) => fields
                .iter()
                .filter(|(_, v)| !v.is_null() && **v != json!(false))
                .map(|(k, v)| format!("{k}: {}\n", clean(&v.to_string())))
                .collect(),
        }
    });
    Ok(())
}

/// `bp network [list | get | rules ...]`.
pub async fn network(
    compat: &Compat,
    output: &Output,
    action: Option<NetworkAction>,
) -> Result<(), RpcError> {
    match action.unwrap_or(NetworkAction::List(RequestFilter::default())) {
        NetworkAction::List(filter) => network_list(compat, output, filter).await,
        NetworkAction::Get {
            request,
            body,
            max_body_bytes,
        } => network_get(compat, output, &request, body, max_body_bytes).await,
        NetworkAction::Rules { action } => {
            rules(compat, output, action.unwrap_or(RulesAction::List)).await
        }
    }
}

/// Every request the Broker keeps for `target` that passes `filter` (the tool's filter
/// arguments), oldest first, read page by page.
async fn requests(compat: &Compat, target: &str, filter: &Value) -> Result<Vec<Value>, RpcError> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..REQUEST_PAGES {
        let mut arguments = filter.clone();
        arguments["limit"] = json!(REQUEST_PAGE);
        if let Some(cursor) = &cursor {
            arguments["cursor"] = json!(cursor);
        }
        let page = compat
            .tool("browser.network.list", arguments, Some(target))
            .await?;
        out.extend(
            page.result["requests"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
        match (
            page.result["hasMore"] == true,
            page.result["nextCursor"].as_str(),
        ) {
            (true, Some(next)) => cursor = Some(next.to_owned()),
            _ => break,
        }
    }
    Ok(out)
}

/// `bp network list`: each request numbered by its place among all the tab's requests the
/// Broker keeps (oldest is 1), so the number means the same with or without filters.
async fn network_list(
    compat: &Compat,
    output: &Output,
    filter: RequestFilter,
) -> Result<(), RpcError> {
    let (target, _) = compat.current_target().await?;
    let all = requests(compat, &target, &json!({})).await?;
    let mut arguments = json!({});
    if let Some(text) = &filter.url_contains {
        arguments["urlContains"] = json!(text);
    }
    if let Some(kind) = &filter.resource_type {
        arguments["resourceType"] = json!(kind);
    }
    if let Some(status) = filter.status {
        arguments["status"] = json!(status);
    }
    let matching = match arguments.as_object().is_some_and(|a| a.is_empty()) {
        true => all.clone(),
        false => requests(compat, &target, &arguments).await?,
    };
    let number_of = |request: &Value| {
        all.iter()
            .position(|r| r["requestId"] == request["requestId"])
            .map(|i| i + 1)
    };
    let total = matching.len();
    let shown = filter.limit.unwrap_or(SHOWN_REQUESTS);
    let numbered: Vec<Value> = matching
        .into_iter()
        .skip(total.saturating_sub(shown))
        .map(|mut request| {
            request["number"] = json!(number_of(&request));
            request
        })
        .collect();
    let value = json!({"requests": numbered, "total": total});
    output.print(&value, |style| {
        let mut out = String::new();
        for request in &numbered {
            let status = match (&request["status"], request["failed"] == true) {
                (_, true) => style.red("failed"),
                (Value::Number(n), _) if n.as_u64().is_some_and(|n| n >= 400) => {
                    style.red(&n.to_string())
                }
                (Value::Number(n), _) => n.to_string(),
                _ => style.dim("..."),
            };
            out.push_str(&format!(
                "{:>4}  {status:>3} {} {} {}\n",
                request["number"].as_u64().unwrap_or(0),
                request["method"].as_str().unwrap_or(""),
                style.dim(request["resourceType"].as_str().unwrap_or("")),
                clean(request["url"].as_str().unwrap_or(""))
            ));
        }
        out.push_str(&style.dim(&format!(
            "{} of {total} request(s) shown; bp network get N for one\n",
            numbered.len()
        )));
        out
    });
    Ok(())
}

/// `bp network get N|ID`.
async fn network_get(
    compat: &Compat,
    output: &Output,
    request: &str,
    body: bool,
    max_body_bytes: Option<u32>,
) -> Result<(), RpcError> {
    let (target, _) = compat.current_target().await?;
    let request_id = match request.parse::<usize>() {
        Ok(number) => {
            let all = requests(compat, &target, &json!({})).await?;
            number
                .checked_sub(1)
                .and_then(|i| all.get(i))
                .and_then(|r| r["requestId"].as_str())
                .map(str::to_owned)
                .ok_or_else(|| {
                    RpcError::invalid_params(format!("there is no request {number}"))
                        .with_context("requests", json!(all.len()))
                        .with_remediation(
                            RemediationAction::InspectState,
                            "Run `bp network list` for the numbers.",
                        )
                })?
        }
        Err(_) => request.to_owned(),
    };
    let mut arguments = json!({"requestId": request_id, "includeBody": body});
    if let Some(max) = max_body_bytes {
        arguments["maxBodyBytes"] = json!(max);
    }
    let got = compat
        .tool("browser.network.get", arguments, Some(&target))
        .await?;
    output.print(&got.result, |style| {
        let request = &got.result["request"];
        let mut out = format!(
            "{} {}\n{} {}\n",
            style.bold(request["method"].as_str().unwrap_or("")),
            clean(request["url"].as_str().unwrap_or("")),
            request["status"],
            style.dim(request["mimeType"].as_str().unwrap_or(""))
        );
        for (key, mark) in [("requestHeaders", "> "), ("responseHeaders", "< ")] {
            for header in request[key].as_array().into_iter().flatten() {
                match header.as_str() {
                    Some(cut) => out.push_str(&format!("{mark}{}\n", style.dim(&clean(cut)))),
                    None => out.push_str(&format!(
                        "{mark}{}: {}\n",
                        clean(header["name"].as_str().unwrap_or("")),
                        clean(header["value"].as_str().unwrap_or(""))
                    )),
                }
            }
        }
        let body = &got.result["body"];
        match (body["encoding"].as_str(), body["data"].as_str()) {
            (Some("utf8"), Some(data)) => {
                out.push('\n');
                out.push_str(&page_text(data));
                out.push('\n');
            }
            (Some(_), Some(_)) => out.push_str(&style.dim(&format!(
                "\n({} bytes of binary body; --json prints it as base64)\n",
                body["bytes"]
            ))),
            _ => {}
        }
        if body["truncated"] == true {
            out.push_str(&style.dim("(body cut: --max-body-bytes for more)\n"));
        }
        out
    });
    Ok(())
}

/// `bp network rules [list | add | remove]`.
async fn rules(compat: &Compat, output: &Output, action: RulesAction) -> Result<(), RpcError> {
    match action {
        RulesAction::List => {
            let listed = compat
                .tool("browser.network.rules.list", json!({}), None)
                .await?;
            let rules: Vec<Value> = listed.result["rules"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, rule)| {
                    let mut rule = rule.clone();
                    rule["number"] = json!(i + 1);
                    rule
                })
                .collect();
            let value = json!({"rules": rules});
            output.print(&value, |style| {
                let mut out = String::new();
                for rule in &rules {
                    out.push_str(&format!(
                        "{:>3}  {}\n",
                        rule["number"].as_u64().unwrap_or(0),
                        rule_line(rule, style)
                    ));
                }
                if rules.is_empty() {
                    out.push_str(&style.dim("(no network rules)\n"));
                }
                out
            });
        }
        RulesAction::Add {
            pattern,
            action,
            status,
            body,
            body_file,
            headers,
        } => {
            let mut arguments = json!({"urlPattern": pattern, "action": action.as_str()});
            if let Some(status) = status {
                arguments["status"] = json!(status);
            }
            if let Some(body) = body {
                arguments["body"] = json!(body);
            }
            if let Some(file) = body_file {
                let bytes = std::fs::read(&file).map_err(|e| {
                    RpcError::new(
                        ErrorCode::FileNotFound,
                        format!("cannot read {}: {e}", file.display()),
                    )
                })?;
                arguments["bodyBase64"] =
                    json!(base64::engine::general_purpose::STANDARD.encode(bytes));
            }
            if !headers.is_empty() {
                let headers: Vec<Value> = headers
                    .into_iter()
                    .map(|(name, value)| json!({"name": name, "value": value}))
                    .collect();
                arguments["headers"] = json!(headers);
            }
            let added = compat
                .tool("browser.network.rules.add", arguments, None)
                .await?;
            output.print(&added.result, |style| {
                format!(
                    "{} {}\n",
                    style.green("added"),
                    rule_line(&added.result["rule"], style)
                )
            });
        }
        RulesAction::Remove { rule } => {
            let rule_id = match rule.parse::<usize>() {
                Ok(number) => {
                    let listed = compat
                        .tool("browser.network.rules.list", json!({}), None)
                        .await?;
                    let rules = listed.result["rules"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                    number
                        .checked_sub(1)
                        .and_then(|i| rules.get(i))
                        .and_then(|r| r["ruleId"].as_str())
                        .map(str::to_owned)
                        .ok_or_else(|| {
                            RpcError::invalid_params(format!("there is no rule {number}"))
                                .with_context("rules", json!(rules.len()))
                                .with_remediation(
                                    RemediationAction::InspectState,
                                    "Run `bp network rules` for the numbers.",
                                )
                        })?
                }
                Err(_) => rule,
            };
            let removed = compat
                .tool(
                    "browser.network.rules.remove",
                    json!({"ruleId": rule_id}),
                    None,
                )
                .await?;
            output.print(&removed.result, |style| {
                format!("{} {}\n", style.green("removed"), rule_id)
            });
        }
    }
    Ok(())
}

fn rule_line(rule: &Value, style: &Style) -> String {
    let headers: Vec<String> = rule["headerNames"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|h| h.as_str().map(clean))
        .collect();
    format!(
        "{} {} {}{}",
        style.cyan(rule["action"].as_str().unwrap_or("")),
        clean(rule["urlPattern"].as_str().unwrap_or("")),
        style.dim(rule["ruleId"].as_str().unwrap_or("")),
        match headers.is_empty() {
            true => String::new(),
            false => format!("  headers: {}", headers.join(", ")),
        }
    )
}

/// `bp auth set|clear`.
pub async fn auth(compat: &Compat, output: &Output, action: AuthAction) -> Result<(), RpcError> {
    let (name, arguments) = match action {
        AuthAction::Set {
            origin,
            username,
            password,
        } => {
            let password = match password.as_str() {
                "-" => text_from_stdin()?,
                _ => password,
            };
            (
                "browser.auth.set",
                json!({"origin": origin, "username": username, "password": password}),
            )
        }
        AuthAction::Clear { origin } => (
            "browser.auth.clear",
            match origin {
                Some(origin) => json!({"origin": origin}),
                None => json!({}),
            },
        ),
    };
    let done = compat.tool(name, arguments, None).await?;
    output.print(&done.result, |style| match name {
        "browser.auth.set" => format!(
            "{} {}{}\n",
            style.green("answering HTTP logins of"),
            clean(done.result["origin"].as_str().unwrap_or("")),
            match done.result["replaced"] == true {
                true => " (replaced the earlier credentials)",
                false => "",
            }
        ),
        _ => format!("{}\n", style.green("cleared")),
    });
    Ok(())
}

/// `bp downloads [--save DIR]`: the downloads of bp's tabs from the Workspace's journal, each
/// with its last state; with `--save`, every completed one still kept is exported into DIR
/// under the adapter's export rules (checked directory, safe name, budget), which releases it.
pub async fn downloads(
    compat: &Compat,
    output: &Output,
    save: Option<&Path>,
) -> Result<(), RpcError> {
    let events = compat.recent_events(DOWNLOAD_EVENTS).await?;
    let mut downloads: Vec<Value> = Vec::new();
    for event in events.iter().filter(|e| e["type"] == "download") {
        let payload = &event["payload"];
        let Some(id) = payload["downloadId"].as_str() else {
            continue;
        };
        let at = match downloads.iter().position(|d| d["downloadId"] == id) {
            Some(at) => at,
            None => {
                downloads.push(json!({"downloadId": id}));
                downloads.len() - 1
            }
        };
        if let (Some(entry), Some(fields)) = (downloads[at].as_object_mut(), payload.as_object()) {
            for (key, value) in fields {
                entry.insert(key.clone(), value.clone());
            }
        }
    }
    let mut value = json!({"downloads": downloads});
    if let Some(dir) = save {
        let dir = absolute(dir)?;
        let book = std::sync::Mutex::new(Downloads::default());
        let mut saved = Vec::new();
        let mut not_saved = Vec::new();
        for download in downloads.iter().filter(|d| d["state"] == "completed") {
            let artifact = &download["artifact"];
            let Some(artifact_id) = artifact["id"].as_str() else {
                continue;
            };
            book.lock().expect("downloads lock").record(artifact);
            let exported = compat
                .workspace
                .export_download(&compat.lease, &book, artifact_id, &dir, SAVE_REMEDIATION)
                .await;
            match exported {
                Ok(file) => saved.push(json!({
                    "downloadId": download["downloadId"], "artifactId": artifact_id,
                    "path": file.path, "byteLength": file.byte_length})),
                // The directory itself is refused: nothing can be saved there.
                Err(error) if error.code == ErrorCode::PathNotAllowed => return Err(error),
                Err(error) => not_saved.push(json!({
                    "downloadId": download["downloadId"], "artifactId": artifact_id,
                    "code": error.code.as_str(), "message": error.message})),
            }
        }
        value["saved"] = json!(saved);
        value["notSaved"] = json!(not_saved);
    }
    output.print(&value, |style| render_downloads(&value, style));
    Ok(())
}

fn render_downloads(value: &Value, style: &Style) -> String {
    let mut out = String::new();
    let downloads = value["downloads"].as_array().cloned().unwrap_or_default();
    for download in &downloads {
        let state = download["state"].as_str().unwrap_or("");
        let painted = match state {
            "completed" => style.green(state),
            "started" => style.yellow("in progress"),
            other => style.red(other),
        };
        let name = download["artifact"]["fileName"]
            .as_str()
            .or(download["suggestedFilename"].as_str())
            .unwrap_or("");
        let detail = match (
            download["artifact"]["byteLength"].as_u64(),
            download["reason"].as_str(),
        ) {
            (Some(bytes), _) => format!("{bytes} bytes"),
            (None, Some(reason)) => reason.to_owned(),
            _ => String::new(),
        };
        out.push_str(&format!(
            "{painted}  {}  {}  {}\n",
            style.bold(&clean(name)),
            style.dim(&detail),
            style.dim(&clean(download["url"].as_str().unwrap_or("")))
        ));
    }
    if downloads.is_empty() {
        out.push_str(&style.dim("(no downloads)\n"));
    }
    for saved in value["saved"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "{} {}\n",
            style.green("saved"),
            clean(saved["path"].as_str().unwrap_or(""))
        ));
    }
    for missed in value["notSaved"].as_array().into_iter().flatten() {
        let why = match missed["code"].as_str() {
            Some("artifact_not_found") => "no longer kept (saved before, or expired)".to_owned(),
            _ => clean(missed["message"].as_str().unwrap_or("")),
        };
        out.push_str(&format!(
            "{} {}: {why}\n",
            style.yellow("not saved"),
            missed["artifactId"].as_str().unwrap_or("")
        ));
    }
    out
}
