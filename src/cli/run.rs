//! `bp`'s commands: each maps to tool calls on the compatibility session (`compat.rs`) and
//! prints through `output.rs`; `bp status` and `bp disconnect` also use the private CLI channel
//! (`commands.rs`) for what no public method does.
//!
//! Owns the mapping command -> tools -> printed result and exit code. It never touches the
//! store, CDP or Broker internals, and never writes state to disk: the only files it creates
//! are the screenshot and PDF a user asked for.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::args::{
    Aim, Cli, Command, DialogAction, DropPoint, HandoffAction, RecordAction, extra_capabilities,
};
use super::commands;
use super::compat::{Compat, Grants};
use super::data;
use super::exit;
use super::output::{Output, Style, clean, render_lean};
use crate::adapter::ToolOutcome;
use crate::adapter::lean;
use crate::home::Home;
use crate::protocol::errors::{ErrorCode, RemediationAction, RpcError};

/// How long `bp events --follow` sleeps between polls of the journal.
const FOLLOW_EVERY: Duration = Duration::from_millis(500);
/// How many recent events `bp events` prints.
const RECENT_EVENTS: u64 = 50;

/// Runs one parsed command line and returns the exit code.
pub fn run(cli: Cli) -> i32 {
    let output = Output::choose(cli.output);
    if let Err(message) = exit::log_level(tracing::Level::WARN) {
        output.error(&RpcError::invalid_params(message));
        return exit::USAGE;
    }
    match &cli.command {
        Command::Completions { shell } => {
            use std::io::Write;
            let _ = std::io::stdout().write_all(&super::args::completions(*shell));
            return exit::OK;
        }
        Command::Man { dir: None } => {
            use std::io::Write;
            let _ = std::io::stdout().write_all(&super::args::man_page());
            return exit::OK;
        }
        Command::Man { dir: Some(dir) } => return write_man_pages(dir, &output),
        _ => {}
    }
    let allowed = match allowed_capabilities(&cli.allow) {
        Ok(extras) => Grants {
            extras,
            url_policy: url_policy(&cli.url_allow, &cli.url_block),
        },
        Err(error) => {
            output.error(&error);
            return exit::USAGE;
        }
    };
    let home = match Home::from_env() {
        Ok(home) => home,
        Err(error) => {
            output.error(
                &RpcError::new(ErrorCode::HomeNotAllowed, error.to_string()).with_remediation(
                    RemediationAction::SetHome,
                    "Set BROWSER_PILOT_HOME to an absolute directory of your own.",
                ),
            );
            return exit::USAGE;
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime starts");
    runtime.block_on(async move {
        match cli.command {
            Command::Status => commands::status(&home, &output).await,
            Command::Disconnect => commands::disconnect(&home, &output, &allowed).await,
            Command::Launch {
                headless,
                executable,
            } => launch(&home, &output, &allowed, headless, executable).await,
            Command::Stop => stop(&home, &output).await,
            Command::View { open, stop } => crate::view::cli(home.clone(), open, stop).await,
            Command::Handoff {
                action: HandoffAction::Done { id, note },
            } => commands::handoff_done(&home, &output, id, note).await,
            command => match tool_command(&home, &output, &allowed, command).await {
                Ok(()) => exit::OK,
                Err(error) => {
                    let error = with_launch_hint(with_grant_hint(error));
                    output.error(&error);
                    exit::for_code(error.code)
                }
            },
        }
    })
}

/// The extra capabilities to ask for: `--allow`, then `BP_ALLOW` (comma-separated), each one of
/// the extras; anything else is a usage error naming them.
fn allowed_capabilities(flag: &[String]) -> Result<Vec<String>, RpcError> {
    let from_env = std::env::var("BP_ALLOW").unwrap_or_default();
    let mut allowed: Vec<String> = Vec::new();
    let extras = extra_capabilities();
    for name in flag
        .iter()
        .map(String::as_str)
        .chain(from_env.split(',').map(str::trim))
        .filter(|name| !name.is_empty())
    {
        if !extras.contains(&name) {
            return Err(RpcError::invalid_params(format!(
                "BP_ALLOW names {name:?}, which is not one of {}",
                extras.join(", ")
            )));
        }
        if !allowed.iter().any(|a| a == name) {
            allowed.push(name.to_owned());
        }
    }
    Ok(allowed)
}

/// The Workspace's URL policy from the flags and `BP_URL_ALLOW` / `BP_URL_BLOCK`
/// (comma-separated), each list sorted without duplicates; `None` when both are empty. The
/// Broker checks the patterns (a bad one is `invalid_params` naming it).
fn url_policy(allow: &[String], block: &[String]) -> Option<Value> {
    let list = |flag: &[String], variable: &str| -> Vec<String> {
        let from_env = std::env::var(variable).unwrap_or_default();
        let mut list: Vec<String> = flag
            .iter()
            .map(|p| p.trim().to_owned())
            .chain(from_env.split(',').map(|p| p.trim().to_owned()))
            .filter(|p| !p.is_empty())
            .collect();
        list.sort();
        list.dedup();
        list
    };
    let (allow, block) = (list(allow, "BP_URL_ALLOW"), list(block, "BP_URL_BLOCK"));
    (!allow.is_empty() || !block.is_empty()).then(|| json!({"allow": allow, "block": block}))
}

/// A capability bp did not ask for: say how to let it.
fn with_grant_hint(mut error: RpcError) -> RpcError {
    if error.code == ErrorCode::CapabilityDenied {
        let capability = error
            .context
            .as_ref()
            .and_then(|c| c.get("capability"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        error = error.with_remediation(
            RemediationAction::RequestCapability,
            format!(
                "bp does not ask for {capability} unless allowed: run `bp --allow {capability} ...`, or set BP_ALLOW={capability} for every bp command."
            ),
        );
    }
    error
}

/// A browser that is not ready can also be replaced by the managed Chromium: say so.
fn with_launch_hint(mut error: RpcError) -> RpcError {
    if error.code == ErrorCode::BrowserNotReady {
        let message = error
            .remediation
            .as_ref()
            .and_then(|r| r["message"].as_str())
            .unwrap_or("Start the browser with remote debugging enabled.")
            .trim_end_matches('.')
            .to_owned();
        let action = error
            .remediation
            .as_ref()
            .and_then(|r| r["action"].as_str())
            .unwrap_or("start_browser")
            .to_owned();
        error.remediation = Some(
            json!({"action": action, "message": format!("{message}; or run `bp launch --headless` for a managed Chromium.")}),
        );
    }
    error
}

/// Opens the compatibility session, connects to the browser, runs `command`, and always closes
/// the session (the Lease is released; the Workspace stays for the next invocation).
async fn tool_command(
    home: &Home,
    output: &Output,
    allowed: &Grants,
    command: Command,
) -> Result<(), RpcError> {
    let preference = match &command {
        Command::Connect { browser } => browser.clone(),
        _ => None,
    };
    let compat = {
        let _spinner = output.spinner("starting the Broker session");
        Compat::open(home, preference.as_deref(), allowed).await?
    };
    let connected = {
        let _spinner =
            output.spinner("waiting for the browser (approve remote debugging if it asks)");
        compat.connect(compat.workspace.browser_id()).await
    };
    let result = match connected {
        Ok(connected) => run_tool_command(&compat, output, command, connected).await,
        Err(error) => Err(error),
    };
    compat.close().await;
    result
}

async fn run_tool_command(
    compat: &Compat,
    output: &Output,
    command: Command,
    connected: ToolOutcome,
) -> Result<(), RpcError> {
    match command {
        Command::Connect { .. } => {
            output.print(&connected.result, |style| {
                format!(
                    "{} {} (generation {}{})\n",
                    style.green("connected to"),
                    connected.result["browserId"].as_str().unwrap_or(""),
                    connected.result["browserConnectionGeneration"],
                    match connected.result["reused"] == true {
                        true => ", already connected",
                        false => "",
                    }
                )
            });
        }
        Command::Open { url } => {
            let opened = {
                let _spinner = output.spinner(&format!("loading {url}"));
                compat
                    .tool("browser.open", json!({"url": url}), None)
                    .await?
            };
            let target = opened.result["targetId"].as_str().map(str::to_owned);
            let observed = compat
                .tool(
                    "browser.observe",
                    observe_arguments(output, None),
                    target.as_deref(),
                )
                .await?;
            output.print(
                &json!({"tab": opened.result, "observation": observed.result}),
                |style| {
                    format!(
                        "{} ({})\n{}",
                        style.dim("opened"),
                        opened.result["loadState"].as_str().unwrap_or(""),
                        render_lean("browser.observe", &observed.result, Vec::new(), style)
                    )
                },
            );
        }
        Command::Tabs => {
            let current = compat.current().await?;
            let tabs = compat.tool("browser.tabs.list", json!({}), None).await?;
            let mut value = tabs.result.clone();
            let list = value["tabs"].as_array_mut().cloned().unwrap_or_default();
            let marked: Vec<Value> = list
                .into_iter()
                .enumerate()
                .map(|(i, mut tab)| {
                    tab["number"] = json!(i + 1);
                    tab["current"] =
                        json!(tab["targetId"].as_str() == current.target_id.as_deref());
                    tab
                })
                .collect();
            value["tabs"] = json!(marked);
            output.print(&value, |style| render_tabs(&marked, style));
        }
        Command::Tab { number } => {
            let target = tab_target(compat, number).await?;
            let observed = compat
                .tool(
                    "browser.observe",
                    observe_arguments(output, None),
                    Some(&target),
                )
                .await?;
            output.print(&observed.result, |style| {
                render_lean("browser.observe", &observed.result, Vec::new(), style)
            });
        }
        Command::Back | Command::Forward | Command::Reload => {
            let action = match command {
                Command::Back => "back",
                Command::Forward => "forward",
                _ => "reload",
            };
            let (target, _) = compat.current_target().await?;
            let navigated = {
                let _spinner = output.spinner(&format!("waiting for the page ({action})"));
                compat
                    .tool("browser.navigate", json!({"action": action}), Some(&target))
                    .await?
            };
            print_navigated(output, &navigated.result);
        }
        Command::Goto { url } => {
            let (target, _) = compat.current_target().await?;
            let navigated = {
                let _spinner = output.spinner(&format!("loading {url}"));
                compat
                    .tool(
                        "browser.navigate",
                        json!({"action": "goto", "url": url}),
                        Some(&target),
                    )
                    .await?
            };
            print_navigated(output, &navigated.result);
        }
        Command::Close { number } => {
            let target = match number {
                Some(number) => tab_target(compat, number).await?,
                None => compat.current_target().await?.0,
            };
            let closed = compat
                .tool("browser.tabs.close", json!({}), Some(&target))
                .await?;
            output.print(&closed.result, |style| {
                format!("{}\n", style.green("closed the tab"))
            });
        }
        Command::Keyboard { text, submit } => {
            let text = match text.as_str() {
                "-" => text_from_stdin()?,
                _ => text,
            };
            let (target, current) = compat.current_target().await?;
            let arguments = json!({"text": text, "submit": submit});
            let since = current.observation_id;
            action(
                compat,
                output,
                "browser.keyboard",
                arguments,
                &target,
                since,
            )
            .await?;
        }
        Command::Hover {
            aim: Aim { reference, xy },
        } => {
            let (target, arguments, since) = pointer_target(compat, reference, xy).await?;
            action(compat, output, "browser.hover", arguments, &target, since).await?;
        }
        Command::Drag {
            aim: Aim { reference, xy },
            to,
            steps,
        } => {
            let by_ref = reference.is_some() || matches!(to, DropPoint::Ref(_));
            let (target, observation) = match by_ref {
                true => {
                    let (target, observation) = compat.current_observation().await?;
                    (target, Some(observation))
                }
                false => {
                    let (target, current) = compat.current_target().await?;
                    (target, current.observation_id)
                }
            };
            let mut arguments = match (reference, xy) {
                (Some(reference), _) => json!({"ref": reference}),
                (None, Some((x, y))) => json!({"x": x, "y": y}),
                (None, None) => return Err(RpcError::invalid_params("give a ref or --xy X,Y")),
            };
            match to {
                DropPoint::Ref(to) => arguments["toRef"] = json!(to),
                DropPoint::At(x, y) => {
                    arguments["toX"] = json!(x);
                    arguments["toY"] = json!(y);
                }
            }
            if by_ref {
                arguments["observationId"] = json!(observation);
            }
            if let Some(steps) = steps {
                arguments["steps"] = json!(steps);
            }
            action(
                compat,
                output,
                "browser.drag",
                arguments,
                &target,
                observation,
            )
            .await?;
        }
        Command::Wait {
            text,
            gone,
            selector,
            hidden,
            url,
            network_idle,
            idle_ms,
            timeout,
        } => {
            let (target, _) = compat.current_target().await?;
            let mut arguments = json!({});
            if let Some(text) = text {
                arguments["text"] = json!(text);
            }
            if let Some(gone) = gone {
                arguments["textGone"] = json!(gone);
            }
            if let Some(selector) = selector {
                arguments["selector"] = json!(selector);
                arguments["state"] = json!(if hidden { "hidden" } else { "visible" });
            }
            if let Some(url) = url {
                arguments["url"] = json!(url);
            }
            if network_idle {
                arguments["networkIdle"] = json!(true);
            }
            if let Some(idle_ms) = idle_ms {
                arguments["idleMs"] = json!(idle_ms);
            }
            let waited = {
                let _spinner = output.spinner("waiting for the condition");
                compat
                    .tool_within("browser.wait", arguments, Some(&target), timeout)
                    .await?
            };
            output.print(&waited.result, |style| {
                format!(
                    "{} {} {}\n",
                    style.green("ok"),
                    waited.result["condition"].as_str().unwrap_or(""),
                    style.dim(&format!("after {} ms", waited.result["waitedMs"]))
                )
            });
        }
        Command::Handoff {
            action: HandoffAction::Ask { reason, timeout },
        } => {
            let (target, _) = compat.current_target().await?;
            let mut arguments = json!({"reason": reason});
            if let Some(timeout) = timeout {
                arguments["timeoutMs"] = json!(timeout);
            }
            eprintln!(
                "waiting for you: run `bp view`, act on the tab, then press Done (or run `bp handoff done`)"
            );
            let done = compat
                .tool_within("browser.handoff", arguments, Some(&target), timeout)
                .await?;
            output.print(&done.result, |style| {
                format!(
                    "{} {} {}\n",
                    style.green("done"),
                    done.result["url"].as_str().unwrap_or(""),
                    style.dim(&done.result["evidence"].to_string())
                )
            });
        }
        Command::Console {
            level,
            after,
            limit,
        } => data::console(compat, output, &level, after, limit).await?,
        Command::Eval {
            source,
            function,
            args,
            max_chars,
        } => data::eval(compat, output, source, function, args, max_chars).await?,
        Command::Upload { items, index } => {
            let (reference, file) = match items.as_slice() {
                [file] => (None, file.clone()),
                [reference, file] => {
                    let reference = reference.parse::<u32>().ok().filter(|r| *r > 0);
                    let reference = reference.ok_or_else(|| {
                        RpcError::invalid_params(format!(
                            "{:?} is not a ref: give `REF FILE` or `FILE`",
                            items[0]
                        ))
                    })?;
                    (Some(reference), file.clone())
                }
                _ => return Err(RpcError::invalid_params("give `REF FILE` or `FILE`")),
            };
            if reference.is_some() && index.is_some() {
                return Err(RpcError::invalid_params("give a ref or --index, not both"));
            }
            let (target, since) = match reference {
                Some(_) => {
                    let (target, observation) = compat.current_observation().await?;
                    (target, Some(observation))
                }
                None => {
                    let (target, current) = compat.current_target().await?;
                    (target, current.observation_id)
                }
            };
            let path = absolute(Path::new(&file))?;
            let imported = compat
                .session
                .request(
                    "artifacts/import",
                    json!({"workspaceId": compat.workspace.id(), "leaseId": compat.lease.id(), "path": path}),
                )
                .await?;
            let mut arguments = json!({"artifactId": imported["artifact"]["id"]});
            if let Some(reference) = reference {
                arguments["observationId"] = json!(since);
                arguments["ref"] = json!(reference);
            }
            if let Some(index) = index {
                arguments["inputIndex"] = json!(index);
            }
            action(compat, output, "browser.upload", arguments, &target, since).await?;
        }
        Command::Downloads { save } => data::downloads(compat, output, save.as_deref()).await?,
        Command::Cookies { action } => data::cookies(compat, output, action).await?,
        Command::Storage { action } => storage(compat, output, action).await?,
        Command::Emulate(args) => data::emulate(compat, output, args).await?,
        Command::Network { action } => data::network(compat, output, action).await?,
        Command::Auth { action } => data::auth(compat, output, action).await?,
        Command::Observe { limit } => {
            let (target, _) = compat.current_target().await?;
            let observed = compat
                .tool(
                    "browser.observe",
                    observe_arguments(output, limit),
                    Some(&target),
                )
                .await?;
            output.print(&observed.result, |style| {
                render_lean("browser.observe", &observed.result, Vec::new(), style)
            });
        }
        Command::Read { selector } => {
            let (target, _) = compat.current_target().await?;
            let arguments = match selector {
                Some(selector) => json!({"selector": selector}),
                None => json!({}),
            };
            let read = compat
                .tool("browser.read", arguments, Some(&target))
                .await?;
            output.print(&read.result, |_| {
                let text = read.result["text"].as_str().unwrap_or("");
                let safe: String = text
                    .chars()
                    .map(|c| match c == '\n' || !c.is_control() {
                        true => c,
                        false => ' ',
                    })
                    .collect();
                safe.trim_end().to_owned() + "\n"
            });
        }
        Command::Search { text } => {
            let (target, _) = compat.current_target().await?;
            let found = compat
                .tool("browser.search", json!({"query": text}), Some(&target))
                .await?;
            output.print(&found.result, |style| render_matches(&found.result, style));
        }
        Command::Find { css } => {
            let (target, _) = compat.current_target().await?;
            let found = compat
                .tool(
                    "browser.elements.find",
                    json!({"selector": css}),
                    Some(&target),
                )
                .await?;
            output.print(&found.result, |style| render_found(&found.result, style));
        }
        Command::Click {
            aim: Aim { reference, xy },
        } => {
            let (target, arguments, since) = pointer_target(compat, reference, xy).await?;
            action(compat, output, "browser.click", arguments, &target, since).await?;
        }
        Command::Type {
            reference,
            text,
            submit,
            clear,
        } => {
            let text = match text.as_str() {
                "-" => text_from_stdin()?,
                _ => text,
            };
            let (target, observation) = compat.current_observation().await?;
            let arguments = json!({"observationId": observation, "ref": reference, "text": text, "submit": submit, "clear": clear});
            let since = Some(observation);
            action(compat, output, "browser.type", arguments, &target, since).await?;
        }
        Command::Press { keys } => {
            let (target, current) = compat.current_target().await?;
            let mut parts: Vec<&str> = keys.split('+').collect();
            let key = parts.pop().unwrap_or_default().to_owned();
            let arguments = match parts.is_empty() {
                true => json!({"key": key}),
                false => json!({"key": key, "modifiers": parts}),
            };
            let since = current.observation_id;
            action(compat, output, "browser.press", arguments, &target, since).await?;
        }
        Command::Scroll { reference, to, by } => {
            let (target, current) = compat.current_target().await?;
            let since = current.observation_id.clone();
            let arguments = match (reference, to, by) {
                (Some(reference), _, _) => {
                    let observation = current.observation_id.ok_or_else(|| {
                        RpcError::new(
                            ErrorCode::ObservationNotFound,
                            "no observation to take the ref from",
                        )
                        .with_remediation(RemediationAction::Observe, "Run `bp observe` first.")
                    })?;
                    json!({"observationId": observation, "ref": reference})
                }
                (None, Some(text), _) => json!({"text": text}),
                (None, None, Some(by)) => json!({
                    "direction": if by < 0 { "up" } else { "down" },
                    "amount": by.unsigned_abs().max(1),
                }),
                (None, None, None) => json!({"direction": "down"}),
            };
            action(compat, output, "browser.scroll", arguments, &target, since).await?;
        }
        Command::Select { reference, value } => {
            let (target, observation) = compat.current_observation().await?;
            // A value when an option has it, else a label: the tool checks its evidence against
            // what it was asked for, so the right key matters.
            let options = compat
                .tool(
                    "browser.dropdown.options",
                    json!({"observationId": observation, "ref": reference}),
                    Some(&target),
                )
                .await?;
            let listed = options.result["options"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let is_value = listed.iter().any(|o| o["value"] == value.as_str());
            let is_label = listed
                .iter()
                .any(|o| o["label"].as_str().map(str::trim) == Some(value.trim()));
            let key = match (is_value, is_label) {
                (false, true) => "labels",
                _ => "values",
            };
            let arguments = json!({"observationId": observation, "ref": reference, key: [value]});
            let since = Some(observation);
            action(
                compat,
                output,
                "browser.dropdown.select",
                arguments,
                &target,
                since,
            )
            .await?;
        }
        Command::Frames => {
            let (target, _) = compat.current_target().await?;
            let frames = compat
                .tool("browser.frames.list", json!({}), Some(&target))
                .await?;
            output.print(&frames.result, |style| render_frames(&frames.result, style));
        }
        Command::Frame { number } => {
            let (target, _) = compat.current_target().await?;
            let arguments = match number {
                0 => json!({"main": true}),
                n => {
                    let frames = compat
                        .tool("browser.frames.list", json!({}), Some(&target))
                        .await?;
                    let children: Vec<&Value> = frames.result["frames"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|f| f["main"] != true)
                        .collect();
                    let frame = children.get(n - 1).ok_or_else(|| {
                        RpcError::invalid_params(format!("there is no frame {n}")).with_remediation(
                            RemediationAction::ListFrames,
                            "Run `bp frames` for the numbers.",
                        )
                    })?;
                    json!({"frameId": frame["frameId"]})
                }
            };
            let selected = compat
                .tool("browser.frames.select", arguments, Some(&target))
                .await?;
            output.print(&selected.result, |style| {
                format!(
                    "{} {}\n",
                    style.green("selected frame"),
                    clean(selected.result["frame"]["url"].as_str().unwrap_or(""))
                )
            });
        }
        Command::Dialogs => {
            let dialogs = compat.tool("browser.dialogs.list", json!({}), None).await?;
            output.print(&dialogs.result, |style| {
                render_dialogs(&dialogs.result, style)
            });
        }
        Command::Dialog { action, text } => {
            let dialogs = compat.tool("browser.dialogs.list", json!({}), None).await?;
            let dialog = dialogs.result["dialogs"]
                .as_array()
                .and_then(|d| d.last())
                .cloned()
                .ok_or_else(|| RpcError::invalid_params("no dialog is open")
                    .with_remediation(RemediationAction::ListDialogs, "Run `bp dialogs`; a dialog opens when the page calls alert, confirm or prompt."))?;
            let mut arguments = json!({
                "dialogId": dialog["dialogId"],
                "action": match action { DialogAction::Accept => "accept", DialogAction::Dismiss => "dismiss" },
            });
            if let Some(text) = text {
                arguments["promptText"] = json!(text);
            }
            let answered = compat
                .tool("browser.dialogs.respond", arguments, None)
                .await?;
            output.print(&answered.result, |style| {
                format!(
                    "{} {}\n",
                    style.green("dialog"),
                    answered.result["action"].as_str().unwrap_or("")
                )
            });
        }
        Command::Screenshot {
            file,
            full,
            annotate,
            refs,
        } => {
            // The full-size image is saved, never the 1600 px preview a tall page gets.
            let mut arguments = json!({"fullPage": full, "includeOriginal": true});
            let target = match annotate {
                true => {
                    let (target, observation) = compat.current_observation().await?;
                    let mut annotations = json!({"observationId": observation});
                    if !refs.is_empty() {
                        annotations["refs"] = json!(refs);
                    }
                    arguments["annotations"] = annotations;
                    target
                }
                false => compat.current_target().await?.0,
            };
            let captured = compat
                .tool("browser.capture", arguments, Some(&target))
                .await?;
            let mut result = captured.result;
            if let Some(original) = result.get("original").filter(|o| o.is_object()).cloned() {
                if let Some(preview) = result["artifact"]["id"].as_str() {
                    let _ = compat
                        .workspace
                        .release_artifact(&compat.lease, preview)
                        .await;
                }
                result["width"] = original["width"].clone();
                result["height"] = original["height"].clone();
                result["artifact"] = original;
            }
            let saved = save_artifact(compat, &result["artifact"], file.as_deref()).await?;
            print_saved(output, &saved, &result);
        }
        Command::Pdf { file } => {
            let (target, _) = compat.current_target().await?;
            let printed = compat.tool("browser.pdf", json!({}), Some(&target)).await?;
            let saved = save_artifact(compat, &printed.result["artifact"], Some(&file)).await?;
            print_saved(output, &saved, &printed.result);
        }
        Command::Record {
            action: RecordAction::Start,
        } => {
            let (target, _) = compat.current_target().await?;
            let started = compat
                .tool("browser.recording.start", json!({}), Some(&target))
                .await?;
            output.print(&started.result, |style| {
                format!(
                    "{} the current tab ({} frames a second at most): bp record stop FILE\n",
                    style.green("recording"),
                    started.result["framesPerSecond"]
                )
            });
        }
        Command::Record {
            action: RecordAction::Stop { file },
        } => {
            let (target, _) = compat.current_target().await?;
            let stopped = compat
                .tool("browser.recording.stop", json!({}), Some(&target))
                .await?;
            let saved = save_artifact(compat, &stopped.result["artifact"], Some(&file)).await?;
            let value = json!({"path": saved, "artifact": {
                "kind": stopped.result["artifact"]["kind"],
                "mimeType": stopped.result["artifact"]["mimeType"],
                "byteLength": stopped.result["artifact"]["byteLength"]},
                "frames": stopped.result["frames"], "timeline": stopped.result["timeline"],
                "truncated": stopped.result["truncated"]});
            output.print(&value, |style| {
                format!(
                    "{} {} ({} frames, {} timeline entries)\n",
                    style.green("saved"),
                    saved.display(),
                    value["frames"],
                    value["timeline"]
                )
            });
        }
        Command::Events { follow } => events(compat, output, follow).await?,
        Command::Status
        | Command::Disconnect
        | Command::Launch { .. }
        | Command::Stop
        | Command::View { .. }
        | Command::Handoff {
            action: HandoffAction::Done { .. },
        }
        | Command::Completions { .. }
        | Command::Man { .. } => unreachable!("handled before a session is opened"),
    }
    Ok(())
}

/// The target of tab N as `bp tabs` numbers them.
async fn tab_target(compat: &Compat, number: usize) -> Result<String, RpcError> {
    let tabs = compat.tab_ids().await?;
    number
        .checked_sub(1)
        .and_then(|i| tabs.get(i))
        .cloned()
        .ok_or_else(|| {
            RpcError::invalid_params(format!("there is no tab {number}"))
                .with_context("tabs", json!(tabs.len()))
                .with_remediation(
                    RemediationAction::ListTabs,
                    "Run `bp tabs` for the numbers.",
                )
        })
}

/// A pointer action's target, arguments and the Observation to diff against: a ref of the
/// latest Observation, or viewport coordinates.
async fn pointer_target(
    compat: &Compat,
    reference: Option<u32>,
    xy: Option<(f64, f64)>,
) -> Result<(String, Value, Option<String>), RpcError> {
    match (reference, xy) {
        (_, Some((x, y))) => {
            let (target, current) = compat.current_target().await?;
            Ok((target, json!({"x": x, "y": y}), current.observation_id))
        }
        (Some(reference), None) => {
            let (target, observation) = compat.current_observation().await?;
            Ok((
                target,
                json!({"observationId": observation, "ref": reference}),
                Some(observation),
            ))
        }
        (None, None) => Err(RpcError::invalid_params("give a ref or --xy X,Y")),
    }
}

/// `path` made absolute against the working directory (the Broker takes absolute paths only).
pub(super) fn absolute(path: &Path) -> Result<PathBuf, RpcError> {
    match path.is_absolute() {
        true => Ok(path.to_path_buf()),
        false => std::env::current_dir()
            .map(|cwd| cwd.join(path))
            .map_err(|e| RpcError::invalid_params(format!("no working directory: {e}"))),
    }
}

fn print_navigated(output: &Output, result: &Value) {
    output.print(result, |style| {
        format!(
            "{} {} {}\n",
            style.bold(&clean(result["title"].as_str().unwrap_or(""))),
            style.dim(&clean(result["url"].as_str().unwrap_or(""))),
            style.dim(&format!("({})", result["loadState"].as_str().unwrap_or("")))
        )
    });
}

/// `bp type REF -`: the text from stdin, without one trailing newline (never echoed).
pub(super) fn text_from_stdin() -> Result<String, RpcError> {
    use std::io::Read;
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| RpcError::invalid_params(format!("cannot read the text from stdin: {e}")))?;
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    Ok(text)
}

/// `browser.observe`'s arguments: the contract's defaults for JSON output, the lean compact
/// form for text (`crate::adapter::lean`), with the user's `--limit`.
fn observe_arguments(output: &Output, limit: Option<u32>) -> Value {
    let mut arguments = match output.json {
        true => json!({}),
        false => lean::observe_arguments(),
    };
    if let Some(limit) = limit {
        arguments["limit"] = json!(limit);
    }
    arguments
}

/// An action with evidence and a fresh Observation: for text output, the lean form (what
/// changed since `since`, the tab's latest Observation, or the whole new document).
pub(super) async fn action(
    compat: &Compat,
    output: &Output,
    name: &str,
    mut arguments: Value,
    target: &str,
    since: Option<String>,
) -> Result<(), RpcError> {
    if !output.json {
        let mut observe = json!({"format": "compact", "limit": lean::OBSERVE_LIMIT, "maxTokens": lean::ACTION_MAX_TOKENS});
        if let Some(since) = since {
            observe["sinceObservationId"] = json!(since);
        }
        arguments["observe"] = observe;
    }
    let acted = {
        let _spinner = output.spinner("waiting for the page to settle");
        compat.tool(name, arguments, Some(target)).await?
    };
    output.print(&acted.result, |style| {
        let mut notes = Vec::new();
        if acted.result["dialogOpen"] == true {
            notes.push("a dialog is open: bp dialogs".to_owned());
        }
        render_lean(name, &acted.result, notes, style)
    });
    Ok(())
}

/// Exports an Artifact to the user's file (absolute; an existing file is never overwritten),
/// or to a new file in the working directory, then releases the protected copy.
async fn save_artifact(
    compat: &Compat,
    descriptor: &Value,
    file: Option<&Path>,
) -> Result<PathBuf, RpcError> {
    let cwd = std::env::current_dir()
        .map_err(|e| RpcError::invalid_params(format!("no working directory: {e}")))?;
    match file {
        None => {
            let exported = compat
                .workspace
                .export_file(&compat.lease, descriptor, &cwd)
                .await?;
            Ok(exported.path)
        }
        Some(file) => {
            let path = match file.is_absolute() {
                true => file.to_path_buf(),
                false => cwd.join(file),
            };
            let artifact_id = descriptor["id"].as_str().unwrap_or_default().to_owned();
            let exported = compat
                .session
                .request(
                    "artifacts/export",
                    json!({"workspaceId": compat.workspace.id(), "leaseId": compat.lease.id(), "artifactId": artifact_id, "path": path}),
                )
                .await;
            let _ = compat
                .workspace
                .release_artifact(&compat.lease, &artifact_id)
                .await;
            exported.map(|_| path)
        }
    }
}

fn print_saved(output: &Output, path: &Path, result: &Value) {
    let mut value = json!({"path": path, "artifact": {
        "kind": result["artifact"]["kind"], "mimeType": result["artifact"]["mimeType"],
        "byteLength": result["artifact"]["byteLength"]},
        "width": result["width"], "height": result["height"]});
    for key in ["annotationCount", "skippedRefs"] {
        if let Some(found) = result.get(key) {
            value[key] = found.clone();
        }
    }
    output.print(&value, |style| {
        let mut line = format!("{} {}", style.green("saved"), path.display());
        if let Some(count) = result["annotationCount"].as_u64() {
            line.push_str(&format!(" ({count} refs outlined"));
            let skipped: Vec<String> = result["skippedRefs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| format!("{} {}", s["ref"], s["reason"].as_str().unwrap_or("")))
                .collect();
            if !skipped.is_empty() {
                line.push_str(&format!("; skipped: {}", skipped.join(", ")));
            }
            line.push(')');
        }
        line + "\n"
    });
}

/// `bp events`: the recent events, then (with `--follow`) new ones as they are journaled.
async fn events(compat: &Compat, output: &Output, follow: bool) -> Result<(), RpcError> {
    // The newest RECENT_EVENTS this Connection may see: events it is not granted (network
    // events without `network.read`) still take journal sequence numbers, so widen the window
    // until enough are visible, within a bound.
    let mut window = RECENT_EVENTS;
    let mut recent = compat.recent_events(window).await?;
    while (recent.len() as u64) < RECENT_EVENTS && window < RECENT_EVENTS * 64 {
        window *= 4;
        recent = compat.recent_events(window).await?;
    }
    let skip = recent.len().saturating_sub(RECENT_EVENTS as usize);
    let recent = recent.split_off(skip);
    for event in &recent {
        print_event(output, event);
    }
    if !follow {
        return Ok(());
    }
    let mut cursor = compat.workspace.event_cursor();
    if let Some(last) = recent.last().and_then(|e| e["sequence"].as_u64()) {
        cursor = crate::protocol::ids::format_cursor(last);
    }
    loop {
        let page = compat
            .session
            .request(
                "events/poll",
                json!({"workspaceId": compat.workspace.id(), "cursor": cursor, "limit": 100}),
            )
            .await;
        let page = match page {
            Ok(page) => page,
            // The journal overtook this follower: say so and go on from the live baseline.
            Err(error) if error.code == ErrorCode::CursorExpired => {
                eprintln!("bp: some events were dropped from the journal before they were shown");
                cursor = compat.workspace.reset_event_cursor().await?;
                continue;
            }
            Err(error) => return Err(error),
        };
        for event in page["events"].as_array().into_iter().flatten() {
            print_event(output, event);
        }
        cursor = page["nextCursor"].as_str().unwrap_or(&cursor).to_owned();
        if page["hasMore"] != true {
            tokio::select! {
                _ = tokio::time::sleep(FOLLOW_EVERY) => {}
                _ = tokio::signal::ctrl_c() => return Ok(()),
            }
        }
    }
}

fn print_event(output: &Output, event: &Value) {
    output.print(event, |style| {
        let payload = &event["payload"];
        let detail = match event["type"].as_str() {
            Some("command.status") => format!(
                "{} {}",
                payload["method"].as_str().unwrap_or(""),
                payload["status"].as_str().unwrap_or("")
            ),
            _ => clean(&payload.to_string()),
        };
        format!(
            "{:>6} {} {}\n",
            event["sequence"].as_u64().unwrap_or(0),
            style.cyan(event["type"].as_str().unwrap_or("")),
            detail
        )
    });
}

fn render_tabs(tabs: &[Value], style: &Style) -> String {
    let mut out = String::new();
    for tab in tabs {
        let mark = match tab["current"] == true {
            true => style.green("*"),
            false => " ".to_owned(),
        };
        let mut flags = Vec::new();
        if tab["managed"] == true {
            flags.push("managed");
        }
        if tab["controlledElsewhere"] == true {
            flags.push("in use by another host");
        }
        out.push_str(&format!(
            "{mark} {:>2}  {}  {}{}\n",
            tab["number"].as_u64().unwrap_or(0),
            style.bold(&clean(tab["title"].as_str().unwrap_or(""))),
            style.dim(&clean(tab["url"].as_str().unwrap_or(""))),
            match flags.is_empty() {
                true => String::new(),
                false => format!("  ({})", flags.join(", ")),
            }
        ));
    }
    if tabs.is_empty() {
        out.push_str(&style.dim("(no tabs)\n"));
    }
    out
}

fn render_matches(result: &Value, style: &Style) -> String {
    let mut out = String::new();
    for (i, found) in result["matches"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let text = found["text"]
            .as_str()
            .or(found["match"].as_str())
            .unwrap_or("");
        let context = found["context"].as_str().unwrap_or("");
        out.push_str(&format!(
            "{:>3}  {}  {}\n",
            i + 1,
            style.bold(&clean(text)),
            style.dim(&clean(context))
        ));
    }
    out.push_str(&style.dim(&format!("{} match(es)\n", result["total"])));
    out
}

fn render_found(result: &Value, style: &Style) -> String {
    let mut out = String::new();
    for (i, element) in result["elements"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let tag = element["tag"].as_str().unwrap_or("");
        let text = element["text"].as_str().unwrap_or("");
        let attrs = element["attributes"].as_object().map(|a| {
            a.iter()
                .map(|(k, v)| {
                    format!(
                        "{k}={}",
                        v.as_str().map(clean).unwrap_or_else(|| v.to_string())
                    )
                })
                .collect::<Vec<_>>()
                .join(" ")
        });
        out.push_str(&format!(
            "{:>3}  {} {} {}\n",
            i + 1,
            style.cyan(tag),
            clean(text),
            style.dim(&attrs.unwrap_or_default())
        ));
    }
    out.push_str(&style.dim(&format!("{} element(s)\n", result["total"])));
    out
}

fn render_frames(result: &Value, style: &Style) -> String {
    let mut out = String::new();
    let mut child = 0;
    for frame in result["frames"].as_array().into_iter().flatten() {
        let number = match frame["main"] == true {
            true => 0,
            false => {
                child += 1;
                child
            }
        };
        let selected = match frame["selected"] == true {
            true => style.green("*"),
            false => " ".to_owned(),
        };
        out.push_str(&format!(
            "{selected} {number:>2}  {} {}\n",
            clean(frame["name"].as_str().unwrap_or("")),
            style.dim(&clean(frame["url"].as_str().unwrap_or("")))
        ));
    }
    out
}

fn render_dialogs(result: &Value, style: &Style) -> String {
    let dialogs = result["dialogs"].as_array().cloned().unwrap_or_default();
    let mut out = String::new();
    for dialog in &dialogs {
        out.push_str(&format!(
            "{} {}\n",
            style.yellow(dialog["type"].as_str().unwrap_or("dialog")),
            clean(dialog["message"].as_str().unwrap_or(""))
        ));
    }
    if dialogs.is_empty() {
        out.push_str(&style.dim("(no open dialogs)\n"));
    }
    out
}

/// `bp launch`: `browser-pilot browser launch` beside this `bp`, then `browser.connect` to it.
async fn launch(
    home: &Home,
    output: &Output,
    allowed: &Grants,
    headless: bool,
    executable: Option<PathBuf>,
) -> i32 {
    let mut args = vec!["browser".to_owned(), "launch".to_owned()];
    if headless {
        args.push("--headless".into());
    }
    if let Some(executable) = executable {
        args.push("--executable".into());
        args.push(executable.display().to_string());
    }
    // Launching is idempotent; say so when the managed Chromium was already up.
    let already_running = commands::discover(home).await.is_some_and(|found| {
        found["browsers"].as_array().is_some_and(|browsers| {
            browsers
                .iter()
                .any(|b| b["managed"] == true && b["processState"] == "running")
        })
    });
    let launched = {
        let _spinner = output.spinner("starting Chromium");
        run_sibling(&args).await
    };
    let candidate = match launched {
        Ok(stdout) => serde_json::from_str::<Value>(stdout.trim()).unwrap_or(Value::Null),
        Err(error) => {
            output.error(&without_display_hint(error, headless));
            return exit::NO_BROWSER;
        }
    };
    let browser_id = candidate["id"].as_str().unwrap_or_default().to_owned();
    let connected = async {
        let compat = Compat::open(home, Some(&browser_id), allowed).await?;
        let connected = {
            let _spinner = output.spinner("connecting to Chromium");
            compat.connect(Some(&browser_id)).await
        };
        compat.close().await;
        connected
    }
    .await;
    match connected {
        Ok(connected) => {
            output.print(
                &json!({"browser": candidate, "connection": connected.result, "alreadyRunning": already_running}),
                |style| match already_running {
                    true => format!(
                        "the managed Chromium is already running ({browser_id}); connected\n"
                    ),
                    false => format!("{} {browser_id} and connected\n", style.green("launched")),
                },
            );
            exit::OK
        }
        Err(error) => {
            output.error(&error);
            exit::for_code(error.code)
        }
    }
}

/// A windowed launch that failed where there is no display to open a window on: the way out
/// is `--headless` (Chromium's own words stay in the message).
fn without_display_hint(error: RpcError, headless: bool) -> RpcError {
    let no_display = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .all(|name| std::env::var_os(name).is_none_or(|v| v.is_empty()));
    match !headless && no_display && cfg!(target_os = "linux") {
        true => error.with_remediation(
            RemediationAction::UseHeadlessBrowser,
            "There is no display (DISPLAY and WAYLAND_DISPLAY are unset): run `bp launch --headless`.",
        ),
        false => error,
    }
}

/// `bp man DIR`: bp.1 and every page it links to, each a new or replaced regular file.
fn write_man_pages(dir: &Path, output: &Output) -> i32 {
    let written = std::fs::create_dir_all(dir).and_then(|()| {
        super::args::man_pages()
            .into_iter()
            .map(|(name, roff)| {
                let path = dir.join(name);
                std::fs::write(&path, roff).map(|()| path)
            })
            .collect::<std::io::Result<Vec<PathBuf>>>()
    });
    match written {
        Ok(paths) => {
            let value = json!({"dir": dir, "pages": paths});
            output.print(&value, |_| {
                format!("wrote {} man pages into {}\n", paths.len(), dir.display())
            });
            exit::OK
        }
        Err(error) => {
            output.error(&RpcError::invalid_params(format!(
                "cannot write the man pages into {}: {error}",
                dir.display()
            )));
            exit::USAGE
        }
    }
}

/// `bp stop`: `browser-pilot browser stop` beside this `bp`.
async fn stop(_home: &Home, output: &Output) -> i32 {
    match run_sibling(&["browser".to_owned(), "stop".to_owned()]).await {
        Ok(stdout) => {
            let value = serde_json::from_str::<Value>(stdout.trim()).unwrap_or(Value::Null);
            output.print(&value, |style| match value["stopped"] == true {
                true => format!("{}\n", style.green("stopped the managed Chromium")),
                false => "the managed Chromium was not running\n".to_owned(),
            });
            exit::OK
        }
        Err(error) => {
            output.error(&error);
            exit::TOOL_ERROR
        }
    }
}

/// Runs the sibling `browser-pilot` with `args` (no shell) and returns its stdout.
async fn run_sibling(args: &[String]) -> Result<String, RpcError> {
    let executable = super::compat::sibling_executable()?;
    let ran = tokio::process::Command::new(&executable)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|e| {
            RpcError::new(
                ErrorCode::BrokerUnavailable,
                format!("cannot run {}: {e}", executable.display()),
            )
        })?;
    match ran.status.success() {
        true => Ok(String::from_utf8_lossy(&ran.stdout).into_owned()),
        false => {
            let stderr = String::from_utf8_lossy(&ran.stderr);
            let message = stderr.trim().trim_start_matches("error: ").to_owned();
            Err(RpcError::new(ErrorCode::BrowserNotReady, format!("browser-pilot {}: {message}", args.join(" ")))
                .with_remediation(RemediationAction::InstallChromium, "Install Chromium (Debian: sudo apt-get install -y chromium) or pass --executable PATH."))
        }
    }
}

/// `bp storage save FILE` (the state exported to FILE, then released) and `bp storage load FILE`
/// (FILE imported, then loaded).
async fn storage(
    compat: &Compat,
    output: &Output,
    action: super::args::StorageAction,
) -> Result<(), RpcError> {
    let ids = json!({"workspaceId": compat.workspace.id(), "leaseId": compat.lease.id()});
    let result = match action {
        super::args::StorageAction::Save { file } => {
            let path = absolute(&file)?;
            let saved = compat.tool("browser.storage.save", json!({}), None).await?;
            let artifact_id = saved.result["artifact"]["id"].clone();
            let mut params = ids.clone();
            params["artifactId"] = artifact_id.clone();
            params["path"] = json!(path);
            let exported = compat.session.request("artifacts/export", params).await;
            let mut release = ids.clone();
            release["artifactId"] = artifact_id;
            let _ = compat.session.request("artifacts/release", release).await;
            exported?;
            json!({"path": path, "cookies": saved.result["cookies"], "origins": saved.result["origins"]})
        }
        super::args::StorageAction::Load { file } => {
            let mut params = ids.clone();
            params["path"] = json!(absolute(&file)?);
            let imported = compat.session.request("artifacts/import", params).await?;
            let arguments = json!({"artifactId": imported["artifact"]["id"]});
            compat
                .tool("browser.storage.load", arguments, None)
                .await?
                .result
        }
    };
    output.print(&result, |_| {
        format!(
            "{} cookie(s), {} origin(s)\n",
            result["cookies"],
            result["origins"].as_array().map_or(0, Vec::len)
        )
    });
    Ok(())
}
