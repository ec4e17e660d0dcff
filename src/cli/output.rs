//! How `bp` prints: aligned text on a terminal, JSON in a pipe (`--json` / `--text` force
//! either), colours only on a terminal and never with `NO_COLOR`, errors with their `data.code`
//! and the remediation's words, and a spinner on a terminal while a long call waits.
//!
//! Owns presentation only: it receives tool results and errors as JSON values and strings and
//! never calls the Broker. Page strings are printed as data (control characters replaced), never
//! interpreted as terminal escapes.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::task::JoinHandle;

use super::args::{OutputFlags, TOOL_COMMANDS};
use crate::adapter::lean::{self, Notes};
use crate::protocol::errors::RpcError;

/// How long an operation runs before its spinner appears: quick calls never flicker.
const SPINNER_DELAY: Duration = Duration::from_millis(400);
const SPINNER_FRAMES: &[char] = &['|', '/', '-', '\\'];

/// The chosen output form for this invocation.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    pub json: bool,
    pub colour: bool,
    /// Whether stderr is a terminal (the spinner's place).
    pub spinner: bool,
}

impl Output {
    pub fn choose(flags: OutputFlags) -> Output {
        let stdout_tty = std::io::stdout().is_terminal();
        let json = match (flags.json, flags.text) {
            (true, _) => true,
            (_, true) => false,
            _ => !stdout_tty,
        };
        let no_colour = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Output {
            json,
            colour: !json && stdout_tty && !no_colour,
            spinner: !json && std::io::stderr().is_terminal(),
        }
    }

    /// Prints a command's result: `value` as one JSON line, or `text` for people.
    pub fn print(&self, value: &Value, text: impl FnOnce(&Style) -> String) {
        let out = match self.json {
            true => format!("{value}\n"),
            false => text(&Style {
                colour: self.colour,
            }),
        };
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(out.as_bytes());
        let _ = stdout.flush();
    }

    /// Prints an error: the message, the code and what to do on stderr; in JSON mode also
    /// `{"error": {code, message, retryable, remediation, context}}` on stdout for scripts.
    pub fn error(&self, error: &RpcError) {
        let error = &for_bp(error);
        match self.json {
            true => {
                let mut data = error.to_json()["data"].clone();
                data["message"] = Value::from(error.message.clone());
                println!("{}", serde_json::json!({"error": data}));
                eprint!("{}", render_error(error, &Style { colour: false }));
            }
            false => {
                let colour = self.colour && std::io::stderr().is_terminal();
                eprint!("{}", render_error(error, &Style { colour }));
            }
        }
    }

    /// Starts a spinner on stderr saying what the call waits for (terminal only); it stops and
    /// clears its line when the returned guard is dropped.
    pub fn spinner(&self, waiting_for: &str) -> Spinner {
        match self.spinner {
            false => Spinner {
                task: None,
                drawn: Arc::new(AtomicBool::new(false)),
                width: 0,
            },
            true => {
                let waiting_for = clean(waiting_for);
                let drawn = Arc::new(AtomicBool::new(false));
                let drawing = drawn.clone();
                Spinner {
                    drawn,
                    width: waiting_for.chars().count() + 2,
                    task: Some(tokio::spawn(async move {
                        tokio::time::sleep(SPINNER_DELAY).await;
                        drawing.store(true, Ordering::SeqCst);
                        let mut frame = 0usize;
                        loop {
                            eprint!(
                                "\r{} {waiting_for}",
                                SPINNER_FRAMES[frame % SPINNER_FRAMES.len()]
                            );
                            let _ = std::io::stderr().flush();
                            frame += 1;
                            tokio::time::sleep(Duration::from_millis(120)).await;
                        }
                    })),
                }
            }
        }
    }
}

/// A running spinner; dropping it stops it and clears its line.
pub struct Spinner {
    task: Option<JoinHandle<()>>,
    /// Whether it drew anything (only then is its line cleared).
    drawn: Arc<AtomicBool>,
    /// The characters its line takes.
    width: usize,
}

impl Drop for Spinner {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            if self.drawn.load(Ordering::SeqCst) {
                // Blanks instead of an erase sequence: NO_COLOR terminals get no escapes at all.
                eprint!("\r{}\r", " ".repeat(self.width));
                let _ = std::io::stderr().flush();
            }
        }
    }
}

/// Colours (ANSI SGR) when enabled, plain text otherwise.
pub struct Style {
    pub colour: bool,
}

impl Style {
    fn paint(&self, code: &str, text: &str) -> String {
        match self.colour {
            true => format!("\x1b[{code}m{text}\x1b[0m"),
            false => text.to_owned(),
        }
    }
    pub fn dim(&self, text: &str) -> String {
        self.paint("2", text)
    }
    pub fn bold(&self, text: &str) -> String {
        self.paint("1", text)
    }
    pub fn cyan(&self, text: &str) -> String {
        self.paint("36", text)
    }
    pub fn green(&self, text: &str) -> String {
        self.paint("32", text)
    }
    pub fn yellow(&self, text: &str) -> String {
        self.paint("33", text)
    }
    pub fn red(&self, text: &str) -> String {
        self.paint("31", text)
    }
}

/// A page string made safe for a terminal: control characters (escapes, newlines) become
/// spaces, so a page can never move the cursor or recolour the user's terminal.
pub fn clean(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// The `bp` command of a tool name in a text: the coverage table (`args::TOOL_COMMANDS`, first
/// row of a tool), or the dialogs wildcard some remediation texts use.
fn command_of(tool: &str) -> Option<&'static str> {
    match tool {
        "browser.dialogs.*" => Some("bp dialogs"),
        _ => TOOL_COMMANDS
            .iter()
            .find(|(name, _)| *name == tool)
            .map(|(_, command)| *command),
    }
}

/// `text` with each Broker tool name that a `bp` command covers spelled as that command
/// (`browser.observe` -> `` `bp observe` ``, without doubling backticks already there).
pub fn bp_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("browser.") {
        let before = rest[..at].chars().next_back();
        out.push_str(&rest[..at]);
        let word_len = rest[at..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || "._-*".contains(c)))
            .unwrap_or(rest.len() - at);
        let word = rest[at..at + word_len].trim_end_matches('.');
        let boundary = before.is_none_or(|c| !(c.is_ascii_alphanumeric() || "._".contains(c)));
        match command_of(word) {
            Some(command) if boundary && before == Some('`') => out.push_str(command),
            Some(command) if boundary => out.push_str(&format!("`{command}`")),
            _ => out.push_str(word),
        }
        rest = &rest[at + word.len()..];
    }
    out.push_str(rest);
    out
}

/// `error` with its message and remediation naming `bp` commands.
pub fn for_bp(error: &RpcError) -> RpcError {
    let mut error = error.clone();
    error.message = bp_text(&error.message);
    if let Some(Value::String(message)) = error
        .remediation
        .as_mut()
        .and_then(|remediation| remediation.get_mut("message"))
    {
        *message = bp_text(message);
    }
    error
}

/// `error: message`, then the code (and whether retrying can help), then what to do.
pub fn render_error(error: &RpcError, style: &Style) -> String {
    let error = &for_bp(error);
    let retryable = error.retryable.unwrap_or_else(|| error.code.retryable());
    let mut out = format!(
        "{} {}\n  code: {}{}\n",
        style.red("error:"),
        clean(&error.message),
        style.bold(error.code.as_str()),
        match retryable {
            true => " (retryable)",
            false => "",
        }
    );
    if let Some(remediation) = &error.remediation {
        let action = remediation["action"].as_str().unwrap_or("");
        let message = remediation["message"].as_str().unwrap_or("");
        out.push_str(&format!(
            "  what to do: {}{}\n",
            clean(message),
            match action.is_empty() {
                true => String::new(),
                false => format!(" ({action})"),
            }
        ));
    }
    out
}

/// The `bp` command of a Broker tool (`browser.observe` -> `bp observe`), else the tool.
pub fn bp_command(tool: &str) -> String {
    command_of(tool).map_or_else(|| tool.to_owned(), str::to_owned)
}

/// The lean text of a result (`crate::adapter::lean`, the form MCP hosts read): an
/// Observation's page header and element lines, an action's evidence and what changed, with
/// `bp` commands named. Each line is page data printed as data (control characters replaced);
/// refs are cyan on a colour terminal.
pub fn render_lean(tool: &str, result: &Value, notes: Vec<String>, style: &Style) -> String {
    let notes = Notes {
        lines: notes,
        tool_name: bp_command,
    };
    let mut out = String::new();
    for line in lean::text(tool, result, &notes).lines() {
        let line = clean(line);
        let marked = line.strip_prefix(['+', '~']).map(|rest| (&line[..1], rest));
        let (mark, body) = marked.unwrap_or(("", &line));
        match body
            .strip_prefix('[')
            .and_then(|rest| rest.split_once(']'))
            .filter(|(number, _)| number.parse::<u64>().is_ok())
        {
            Some((number, rest)) => {
                out.push_str(mark);
                out.push_str(&style.cyan(&format!("[{number}]")));
                out.push_str(rest);
            }
            None => out.push_str(&line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::errors::ErrorCode;
    use serde_json::json;

    #[test]
    fn results_render_lean_with_bp_commands_and_no_terminal_escapes() {
        let observation = json!({"title": "x\u{1b}[2Jy", "url": "http://127.0.0.1/form", "observationId": "observation:1",
            "compact": "1 textbox \"Email\" =\"a@b\" @10,20\n3 textbox \"Password\" sensitive len=6 type=password @10,40",
            "page": {"viewport": {"height": 100}, "document": {"height": 100}, "scroll": {"y": 0}},
            "hints": [], "truncated": true, "candidateCount": 5});
        let text = render_lean(
            "browser.observe",
            &observation,
            Vec::new(),
            &Style { colour: false },
        );
        assert_eq!(
            text,
            "\"x\\u001b[2Jy\" http://127.0.0.1/form | 2 of 5 shown: bp scroll, then bp observe for the rest\n\
             [1] textbox \"Email\" =\"a@b\" @10,20\n\
             [3] textbox \"Password\" sensitive len=6 type=password @10,40\n"
        );
        let clicked = json!({"observationId": "observation:2", "evidence": {"status": "verified", "effects": ["checked_changed"]},
            "compact": "4 checkbox \"Agree\" checked @10,60",
            "diff": {"added": [], "changed": [{"ref": 4, "fields": ["checked"]}], "removed": []}});
        let text = render_lean(
            "browser.click",
            &clicked,
            vec!["note: x\u{7}".into()],
            &Style { colour: true },
        );
        assert_eq!(
            text,
            "verified\nnote: x \n~\u{1b}[36m[4]\u{1b}[0m \"Agree\" checked\n"
        );
    }

    #[test]
    fn errors_name_bp_commands() {
        assert_eq!(
            bp_text(
                "Call browser.observe, then `browser.dialogs.list`; browser.control and browser.tabs stay; browser.upload."
            ),
            "Call `bp observe`, then `bp dialogs`; browser.control and browser.tabs stay; `bp upload`."
        );
        let error = RpcError::new(ErrorCode::StaleRef, "ref 3 of browser.observe is gone")
            .with_remediation(
                crate::protocol::errors::RemediationAction::ObserveAgain,
                "Call browser.observe on this target.",
            );
        let text = render_error(&error, &Style { colour: false });
        assert!(text.contains("ref 3 of `bp observe` is gone"), "{text}");
        assert!(text.contains("Call `bp observe` on this target."), "{text}");
    }

    #[test]
    fn errors_name_code_and_remediation() {
        let error = RpcError::new(ErrorCode::BrowserNotReady, "no browser").with_remediation(
            crate::protocol::errors::RemediationAction::LaunchManagedBrowser,
            "Run bp launch --headless.",
        );
        assert_eq!(
            render_error(&error, &Style { colour: false }),
            "error: no browser\n  code: browser_not_ready (retryable)\n  what to do: Run bp launch --headless. (launch_managed_browser)\n"
        );
    }
}
