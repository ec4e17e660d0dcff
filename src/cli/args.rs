//! The `bp` command line, declared once with clap: the parser, `--help` (with an example for
//! every command), `bp completions` and the man page are all generated from these definitions.
//!
//! Owns argument shapes and help text only. It never talks to the Broker and never decides
//! output; `run.rs` maps each command to tool calls. A command is declared here only when the
//! tools it needs exist in the manifest, so `bp --help` never lists one that cannot work.

use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

/// Exit codes, also printed at the end of `bp --help` and in the man page.
pub const EXIT_CODES: &str = "Exit codes: 0 ok, 1 tool error, 2 usage, 3 no Broker running, \
4 Broker or tab in use, 5 no browser ready.";

#[derive(Parser, Debug)]
#[command(
    name = "bp",
    version,
    about = "Browser Pilot for people at a terminal: drive the shared browser with short commands",
    long_about = "Browser Pilot for people at a terminal. Every command is one short session on \
the shared per-user Broker (client browser-pilot-cli): it reuses one compatibility Workspace, \
so the refs a `bp observe` printed are still valid for the next `bp click`. Output is aligned \
text on a terminal and JSON in a pipe.",
    after_help = EXIT_CODES,
    after_long_help = EXIT_CODES
)]
pub struct Cli {
    #[command(flatten)]
    pub output: OutputFlags,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Debug, Clone, Copy, Default)]
pub struct OutputFlags {
    /// Print JSON (the default when stdout is not a terminal).
    #[arg(
        long = "json",
        id = "json_output",
        global = true,
        conflicts_with = "text_output"
    )]
    pub json: bool,
    /// Print aligned text (the default on a terminal).
    #[arg(long = "text", id = "text_output", global = true)]
    pub text: bool,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Show the Broker, the browsers and their states, this user's Workspaces and connections.
    #[command(after_help = "Example: bp status")]
    Status,
    /// Connect the Broker to a browser (Chrome may ask you to approve remote debugging).
    #[command(after_help = "Example: bp connect --browser chrome")]
    Connect {
        /// A candidate id, product or channel (see `bp status`).
        #[arg(long)]
        browser: Option<String>,
    },
    /// Start the Broker-managed Chromium and connect to it.
    #[command(after_help = "Example: bp launch --headless")]
    Launch {
        /// Run it without a window (servers, CI).
        #[arg(long)]
        headless: bool,
        /// The Chromium-family executable (else BROWSER_PILOT_CHROMIUM, else the usual paths).
        #[arg(long)]
        executable: Option<PathBuf>,
    },
    /// Close the Broker-managed Chromium (never any other browser).
    #[command(after_help = "Example: bp stop")]
    Stop,
    /// Open URL in a new tab, make it the current tab and observe it.
    #[command(after_help = "Example: bp open https://example.com")]
    Open { url: String },
    /// List the tabs (`*` marks the current one).
    #[command(after_help = "Example: bp tabs")]
    Tabs,
    /// Make tab N (from `bp tabs`) the current tab and observe it.
    #[command(after_help = "Example: bp tab 2")]
    Tab {
        /// The number `bp tabs` printed.
        #[arg(value_name = "N")]
        number: usize,
    },
    /// Go back in the current tab's history.
    #[command(after_help = "Example: bp back")]
    Back,
    /// Go forward in the current tab's history.
    #[command(after_help = "Example: bp forward")]
    Forward,
    /// Reload the current tab.
    #[command(after_help = "Example: bp reload")]
    Reload,
    /// List the current tab's elements as `[ref] role "name" value/state`.
    #[command(after_help = "Example: bp observe --limit 20")]
    Observe {
        /// At most this many elements.
        #[arg(long)]
        limit: Option<u32>,
    },
    /// Print the page's readable text, or one CSS region's.
    #[command(after_help = "Example: bp read main")]
    Read { selector: Option<String> },
    /// Find visible text on the page.
    #[command(after_help = "Example: bp search \"Sign in\"")]
    Search { text: String },
    /// List the elements matching a CSS selector (not action refs).
    #[command(after_help = "Example: bp find \"form input\"")]
    Find { css: String },
    /// Click a ref from the last observation, or viewport coordinates.
    #[command(after_help = "Examples: bp click 3\n          bp click --xy 120,48")]
    Click {
        /// The ref printed by the last `bp observe` (or open, tab, click ...).
        #[arg(
            value_name = "REF",
            required_unless_present = "xy",
            conflicts_with = "xy"
        )]
        reference: Option<u32>,
        /// Viewport coordinates in CSS pixels, `X,Y`.
        #[arg(long, value_name = "X,Y", value_parser = parse_xy)]
        xy: Option<(f64, f64)>,
    },
    /// Type TEXT into a ref (`-` reads it from stdin, keeping a password out of the shell's
    /// history and the process list).
    #[command(
        after_help = "Examples: bp type 4 \"ada@example.com\" --submit\n          printf %s \"$PASSWORD\" | bp type 5 -"
    )]
    Type {
        /// The ref of the field, from the last observation.
        #[arg(value_name = "REF")]
        reference: u32,
        /// The text, or `-` to read it from stdin.
        text: String,
        /// Press Enter afterwards.
        #[arg(long)]
        submit: bool,
        /// Clear the field first.
        #[arg(long)]
        clear: bool,
    },
    /// Press keys on the focused element, e.g. Enter, Tab, Control+A.
    #[command(after_help = "Example: bp press Enter")]
    Press { keys: String },
    /// Scroll the page, a ref into view, to a visible text, or by PX pixels.
    #[command(
        after_help = "Examples: bp scroll\n          bp scroll 12\n          bp scroll --to \"Pricing\"\n          bp scroll --by -400"
    )]
    Scroll {
        /// Scroll this ref (from the last observation) into view.
        #[arg(value_name = "REF", conflicts_with_all = ["to", "by"])]
        reference: Option<u32>,
        /// Scroll until this visible text is in view.
        #[arg(long, conflicts_with = "by")]
        to: Option<String>,
        /// Scroll by this many pixels (negative: up).
        #[arg(long, allow_hyphen_values = true)]
        by: Option<i64>,
    },
    /// Select VALUE (value or label) in a dropdown ref.
    #[command(after_help = "Example: bp select 5 \"Germany\"")]
    Select {
        /// The ref of a native select, from the last observation.
        #[arg(value_name = "REF")]
        reference: u32,
        /// An option's value, or else its label.
        value: String,
    },
    /// List the current tab's frames.
    #[command(after_help = "Example: bp frames")]
    Frames,
    /// Select frame N (from `bp frames`; 0 is the main frame) for the next commands.
    #[command(after_help = "Example: bp frame 1")]
    Frame {
        /// The number `bp frames` printed (0: the main frame).
        #[arg(value_name = "N")]
        number: usize,
    },
    /// List the open JavaScript dialogs.
    #[command(after_help = "Example: bp dialogs")]
    Dialogs,
    /// Accept or dismiss the open dialog (TEXT answers a prompt).
    #[command(after_help = "Example: bp dialog accept")]
    Dialog {
        action: DialogAction,
        text: Option<String>,
    },
    /// Save a screenshot of the current tab (PNG).
    #[command(after_help = "Example: bp screenshot page.png --full")]
    Screenshot {
        /// Where to save it (default: a new file in the current directory).
        file: Option<PathBuf>,
        /// The whole page, not only the viewport.
        #[arg(long)]
        full: bool,
    },
    /// Save the current tab as PDF (headless browsers only).
    #[command(after_help = "Example: bp pdf page.pdf")]
    Pdf { file: PathBuf },
    /// Print this Workspace's events (recent ones; --follow keeps waiting for new ones).
    #[command(after_help = "Example: bp events --follow")]
    Events {
        #[arg(long)]
        follow: bool,
    },
    /// Release the compatibility Workspace, then stop the Broker unless another host is
    /// connected.
    #[command(after_help = "Example: bp disconnect")]
    Disconnect,
    /// Print a shell completion script.
    #[command(after_help = "Example: bp completions bash > /etc/bash_completion.d/bp")]
    Completions { shell: Shell },
    /// Print the man page (roff), or write it and one page per command (bp-open.1 ...) into DIR.
    #[command(
        after_help = "Examples: bp man > bp.1 && man ./bp.1\n          bp man ~/.local/share/man/man1"
    )]
    Man {
        /// Write bp.1 and every bp-COMMAND.1 it links to here (created when missing).
        dir: Option<PathBuf>,
    },
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DialogAction {
    Accept,
    Dismiss,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

fn parse_xy(text: &str) -> Result<(f64, f64), String> {
    let (x, y) = text
        .split_once(',')
        .ok_or_else(|| "expected X,Y (for example 120,48)".to_owned())?;
    let number = |part: &str| {
        part.trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && *n >= 0.0)
            .ok_or_else(|| format!("{part:?} is not a non-negative number"))
    };
    Ok((number(x)?, number(y)?))
}

/// The completion script for `shell`, generated from [`Cli`].
pub fn completions(shell: Shell) -> Vec<u8> {
    let generator = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut out = Vec::new();
    clap_complete::generate(generator, &mut Cli::command(), "bp", &mut out);
    out
}

/// The man page (roff), generated from [`Cli`].
pub fn man_page() -> Vec<u8> {
    let mut out = Vec::new();
    let page = clap_mangen::Man::new(Cli::command());
    page.render(&mut out).expect("rendering into memory");
    out
}

/// `bp.1` and the `bp-COMMAND.1` page of every command it links to, as (file name, roff).
pub fn man_pages() -> Vec<(String, Vec<u8>)> {
    let mut pages = vec![("bp.1".to_owned(), man_page())];
    let mut root = Cli::command();
    // Built, so clap's own `help` command (which bp.1 links too) is among them.
    root.build();
    for sub in root.get_subcommands() {
        let name = format!("bp-{}", sub.get_name());
        // The page's NAME is the linked name; clap names take a static string.
        let named: &'static str = Box::leak(name.clone().into_boxed_str());
        let mut out = Vec::new();
        clap_mangen::Man::new(sub.clone().name(named).version(env!("CARGO_PKG_VERSION")))
            .render(&mut out)
            .expect("rendering into memory");
        pages.push((format!("{name}.1"), out));
    }
    pages
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_command_has_an_example() {
        for sub in Cli::command().get_subcommands() {
            let help = sub
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            assert!(
                help.starts_with("Example"),
                "bp {} has no example",
                sub.get_name()
            );
        }
    }

    #[test]
    fn output_flags_do_not_clash_with_arguments() {
        let cli = Cli::try_parse_from(["bp", "--text", "type", "2", "hello"]).unwrap();
        assert!(cli.output.text && !cli.output.json);
        let cli = Cli::try_parse_from(["bp", "search", "x", "--json"]).unwrap();
        assert!(cli.output.json);
        assert!(Cli::try_parse_from(["bp", "--json", "--text", "tabs"]).is_err());
    }

    #[test]
    fn xy_parses() {
        assert_eq!(parse_xy("120,48.5"), Ok((120.0, 48.5)));
        assert!(parse_xy("120").is_err());
        assert!(parse_xy("-1,2").is_err());
    }

    #[test]
    fn generated_docs_name_the_commands() {
        let bash = String::from_utf8(completions(Shell::Bash)).unwrap();
        assert!(bash.contains("observe") && bash.contains("disconnect"));
        let man = String::from_utf8(man_page()).unwrap();
        assert!(man.contains(".TH") && man.contains("observe"), "{man}");
    }
}
