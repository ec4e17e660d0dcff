//! The `bp` command line, declared once with clap: the parser, `--help` (with an example for
//! every command), `bp completions` and the man page are all generated from these definitions.
//!
//! Owns argument shapes and help text only. It never talks to the Broker and never decides
//! output; `run.rs` maps each command to tool calls. A command is declared here only when the
//! tools it needs exist in the manifest, so `bp --help` never lists one that cannot work.

use std::path::PathBuf;

use clap::builder::PossibleValuesParser;
use clap::{ArgGroup, Args, CommandFactory, Parser, Subcommand, ValueEnum};
use serde_json::Value;

use crate::protocol::negotiate::{CAPABILITIES, DEFAULT_CAPABILITIES};

/// Exit codes, also printed at the end of `bp --help` and in the man page.
pub const EXIT_CODES: &str = "Exit codes: 0 ok, 1 tool error, 2 usage, 3 no Broker running, \
4 Broker or tab in use, 5 no browser ready.";

/// Every Broker tool and the `bp` command that calls it. The coverage test checks it against
/// the tool manifest (a tool without a command fails it) and renders the table of
/// `docs/cli.md` from it; texts that name a tool name its command instead (`output::bp_text`).
pub const TOOL_COMMANDS: &[(&str, &str)] = &[
    ("browser.discover", "bp status"),
    ("browser.connect", "bp connect"),
    ("browser.open", "bp open"),
    ("browser.navigate", "bp goto"),
    ("browser.navigate", "bp back"),
    ("browser.navigate", "bp forward"),
    ("browser.navigate", "bp reload"),
    ("browser.tabs.list", "bp tabs"),
    ("browser.tabs.close", "bp close"),
    ("browser.observe", "bp observe"),
    ("browser.read", "bp read"),
    ("browser.search", "bp search"),
    ("browser.elements.find", "bp find"),
    ("browser.click", "bp click"),
    ("browser.press", "bp press"),
    ("browser.type", "bp type"),
    ("browser.keyboard", "bp keyboard"),
    ("browser.scroll", "bp scroll"),
    ("browser.dropdown.options", "bp select"),
    ("browser.dropdown.select", "bp select"),
    ("browser.dialogs.list", "bp dialogs"),
    ("browser.dialogs.respond", "bp dialog"),
    ("browser.frames.list", "bp frames"),
    ("browser.frames.select", "bp frame"),
    ("browser.capture", "bp screenshot"),
    ("browser.pdf", "bp pdf"),
    ("browser.cookies.list", "bp cookies list"),
    ("browser.cookies.set", "bp cookies set"),
    ("browser.cookies.delete", "bp cookies delete"),
    ("browser.storage.save", "bp storage save"),
    ("browser.storage.load", "bp storage load"),
    ("browser.emulate", "bp emulate"),
    ("browser.eval", "bp eval"),
    ("browser.wait", "bp wait"),
    ("browser.handoff", "bp handoff ask"),
    ("browser.recording.start", "bp record start"),
    ("browser.recording.stop", "bp record stop"),
    ("browser.hover", "bp hover"),
    ("browser.drag", "bp drag"),
    ("browser.console.list", "bp console"),
    ("browser.upload", "bp upload"),
    ("browser.network.list", "bp network list"),
    ("browser.network.get", "bp network get"),
    ("browser.network.rules.add", "bp network rules add"),
    ("browser.network.rules.list", "bp network rules list"),
    ("browser.network.rules.remove", "bp network rules remove"),
    ("browser.auth.set", "bp auth set"),
    ("browser.auth.clear", "bp auth clear"),
];

/// Tools every `bp` command calls on its own, with what it does with them: no command of
/// their own would do more.
pub const IMPLICIT_TOOLS: &[(&str, &str)] = &[(
    "browser.tabs.release",
    "every command, at exit, for the tabs it used",
)];

/// The capabilities beyond the contract's six that `bp` asks for only when told to (`--allow`,
/// `BP_ALLOW`): network data, network control and code in the page.
pub fn extra_capabilities() -> Vec<&'static str> {
    CAPABILITIES
        .iter()
        .copied()
        .filter(|c| !DEFAULT_CAPABILITIES.contains(c))
        .collect()
}

/// The `docs/cli.md` table of every tool, its capability and its `bp` command, from the
/// manifest's `(tool, capability)` rows and [`TOOL_COMMANDS`] / [`IMPLICIT_TOOLS`].
pub fn tool_coverage_markdown(tools: &[(&str, &str)]) -> String {
    let mut out = String::from("| tool | capability | `bp` command |\n| --- | --- | --- |\n");
    for (tool, capability) in tools {
        let grant = match DEFAULT_CAPABILITIES.contains(capability) {
            true => format!("`{capability}`"),
            false => format!("`{capability}` (`--allow {capability}`)"),
        };
        let commands: Vec<String> = TOOL_COMMANDS
            .iter()
            .filter(|(name, _)| name == tool)
            .map(|(_, command)| format!("`{command}`"))
            .chain(
                IMPLICIT_TOOLS
                    .iter()
                    .filter(|(name, _)| name == tool)
                    .map(|(_, how)| (*how).to_owned()),
            )
            .collect();
        let commands = match commands.is_empty() {
            true => "**none**".to_owned(),
            false => commands.join(", "),
        };
        out.push_str(&format!("| `{tool}` | {grant} | {commands} |\n"));
    }
    out
}

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
    /// Also ask for these capabilities, which bp does not request by default (comma-separated
    /// or repeated; BP_ALLOW sets the same): network.read for cookies and network requests,
    /// network.control for network rules, HTTP auth and cookie writes, page.eval for eval,
    /// profile.write for cookie writes into the shared browser profile, page.emulate for emulate.
    #[arg(
        long,
        global = true,
        value_name = "CAPABILITY",
        value_delimiter = ',',
        value_parser = PossibleValuesParser::new(extra_capabilities())
    )]
    pub allow: Vec<String>,
    /// Hold bp's Workspace to these origins only (comma-separated or repeated; BP_URL_ALLOW
    /// sets the same): `https://example.com`, `https://*.example.com`, `http://127.0.0.1:*`.
    /// Navigations elsewhere answer url_blocked and the pages' requests elsewhere fail.
    #[arg(long, global = true, value_name = "PATTERN", value_delimiter = ',')]
    pub url_allow: Vec<String>,
    /// Never let bp's Workspace load these origins (comma-separated or repeated; BP_URL_BLOCK
    /// sets the same); wins over --url-allow. Patterns as for --url-allow.
    #[arg(long, global = true, value_name = "PATTERN", value_delimiter = ',')]
    pub url_block: Vec<String>,
    #[command(subcommand)]
    pub command: Command,
}

/// What a pointer command aims at: a ref of the last observation, or viewport coordinates.
#[derive(Args, Debug, Clone, Copy)]
pub struct Aim {
    /// The ref printed by the last `bp observe` (or open, tab, click ...).
    #[arg(
        value_name = "REF",
        required_unless_present = "xy",
        conflicts_with = "xy"
    )]
    pub reference: Option<u32>,
    /// Viewport coordinates in CSS pixels, `X,Y`, instead of a ref.
    #[arg(long, value_name = "X,Y", value_parser = parse_xy)]
    pub xy: Option<(f64, f64)>,
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
        #[command(flatten)]
        aim: Aim,
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
    /// Load URL in the current tab (`bp open` makes a new tab) and wait for it.
    #[command(after_help = "Example: bp goto https://example.com/pricing")]
    Goto { url: String },
    /// Close tab N (default: the current tab). Only tabs bp opened close, never your own.
    #[command(after_help = "Examples: bp close\n          bp close 2")]
    Close {
        /// The number `bp tabs` printed.
        #[arg(value_name = "N")]
        number: Option<usize>,
    },
    /// Type TEXT into the element that has focus now (`-` reads it from stdin).
    #[command(
        after_help = "Examples: bp keyboard \"hello\"\n          printf %s \"$CODE\" | bp keyboard - --submit"
    )]
    Keyboard {
        /// The text, or `-` to read it from stdin.
        text: String,
        /// Press Enter afterwards.
        #[arg(long)]
        submit: bool,
    },
    /// Move the mouse over a ref from the last observation, or viewport coordinates, without
    /// clicking (menus and tooltips open).
    #[command(after_help = "Examples: bp hover 4\n          bp hover --xy 120,48")]
    Hover {
        #[command(flatten)]
        aim: Aim,
    },
    /// Drag a ref (or the point --xy) and drop it on another ref of the same observation or at
    /// viewport coordinates.
    #[command(after_help = "Examples: bp drag 3 --to 7\n          bp drag 3 --to 400,220")]
    Drag {
        #[command(flatten)]
        aim: Aim,
        /// Where to drop: a ref of the same observation, or viewport coordinates `X,Y`.
        #[arg(long, value_name = "REF|X,Y", value_parser = parse_drop)]
        to: DropPoint,
        /// Mouse moves between the two ends (default 10).
        #[arg(long)]
        steps: Option<u32>,
    },
    /// Wait until TEXT shows (or --gone: goes), a selector matches visibly (or --hidden: none
    /// does), the URL matches a glob, or the network is quiet.
    #[command(
        after_help = "Examples: bp wait \"Saved\"\n          bp wait --selector \".spinner\" --hidden --timeout 60000\n          bp wait --url \"*/dashboard*\"\n          bp wait --network-idle",
        group(ArgGroup::new("condition").required(true).args(["text", "gone", "selector", "url", "network_idle"]))
    )]
    Wait {
        /// Wait until this text is shown (case-insensitive).
        text: Option<String>,
        /// This text is no longer shown.
        #[arg(long)]
        gone: Option<String>,
        /// A CSS selector has a visible match.
        #[arg(long)]
        selector: Option<String>,
        /// With --selector: wait until nothing matches visibly.
        #[arg(long, requires = "selector")]
        hidden: bool,
        /// The tab's whole URL matches this glob (`*` is any run of characters).
        #[arg(long)]
        url: Option<String>,
        /// No request in flight for --idle-ms (default 500).
        #[arg(long)]
        network_idle: bool,
        /// With --network-idle: the quiet milliseconds required.
        #[arg(long, value_name = "MS", requires = "network_idle")]
        idle_ms: Option<u32>,
        /// Give up after this many milliseconds (default: the Broker's 30 s).
        #[arg(long, value_name = "MS")]
        timeout: Option<u64>,
    },
    /// Print the current tab's console messages and uncaught errors, oldest first.
    #[command(after_help = "Examples: bp console\n          bp console --level error,exception")]
    Console {
        /// Only these levels (comma-separated or repeated).
        #[arg(long, value_delimiter = ',', value_parser = CONSOLE_LEVELS)]
        level: Vec<String>,
        /// Only entries after this sequence number (the last one you read).
        #[arg(long, value_name = "SEQUENCE")]
        after: Option<u64>,
        /// At most this many entries (default 100).
        #[arg(long)]
        limit: Option<u32>,
    },
    /// Run JavaScript in the page's own world and print the result (`-` reads it from stdin).
    #[command(
        after_help = "Examples: bp --allow page.eval eval \"location.href\"\n          bp --allow page.eval eval --function \"function add(a, b) { return a + b }\" --arg 2 --arg 3\n          cat check.js | bp --allow page.eval eval -\n\nNeeds the page.eval capability, which bp does not ask for by default: pass --allow page.eval, or set BP_ALLOW=page.eval."
    )]
    Eval {
        /// An expression (top-level await allowed), a function's source with --function, or
        /// `-` to read it from stdin.
        #[arg(value_name = "JS")]
        source: String,
        /// JS is a function, called with the --arg values.
        #[arg(long)]
        function: bool,
        /// A JSON argument for --function (repeatable, in order).
        #[arg(long = "arg", value_name = "JSON", value_parser = parse_json, requires = "function")]
        args: Vec<Value>,
        /// Most characters of the serialized result.
        #[arg(long)]
        max_chars: Option<u32>,
    },
    /// Select FILE in a file input: the ref's, the --index-th of the page, or the one a click
    /// just opened a file chooser for.
    #[command(
        after_help = "Examples: bp upload 6 ~/cv.pdf\n          bp upload --index 0 report.csv\n          bp click 9 && bp upload cv.pdf"
    )]
    Upload {
        /// `REF FILE`, or only `FILE` (with --index, or for the input a click opened a chooser for).
        #[arg(value_name = "REF FILE", num_args = 1..=2, required = true)]
        items: Vec<String>,
        /// The 0-based index of the page's file input instead of a ref.
        #[arg(long)]
        index: Option<u32>,
    },
    /// List the downloads of bp's tabs; --save DIR saves the completed ones there.
    #[command(
        after_help = "Examples: bp downloads\n          bp downloads --save ~/Downloads/bp\n\nSaved files are named download-<id>-<the page's name> (so no page can name them conftest.py\nor Makefile), at most 20 files and 256 MiB per run, into a directory of yours that others\ncannot write to (created 0700 when missing)."
    )]
    Downloads {
        /// Save every completed download that is still kept into this directory.
        #[arg(long, value_name = "DIR")]
        save: Option<PathBuf>,
    },
    /// The cookies the current tab's browser would send (HttpOnly included); set or delete one.
    #[command(
        after_help = "Examples: bp --allow network.read cookies\n          bp --allow network.read cookies list --domain example.com\n          printf %s \"$TOKEN\" | bp --allow network.control,profile.write cookies set sid - --http-only\n\nListing needs network.read and writing network.control (plus profile.write, since bp's\nWorkspace shares the browser profile), which bp does not ask for by default: pass --allow, or\nset BP_ALLOW."
    )]
    Cookies {
        #[command(subcommand)]
        action: Option<CookiesAction>,
    },
    /// Save bp's storage state (cookies, web storage) to a file, or load one from a file.
    #[command(
        after_help = "Examples: bp --allow network.control,profile.write storage load state.json\n          bp --allow network.read storage save state.json\n\nThe file is a credential (docs/artifacts.md, \"Storage state\"). bp's Workspace shares the browser\nprofile, so save is refused there (it reads only an isolated Workspace) and load needs\nnetwork.control and profile.write: pass --allow, or set BP_ALLOW."
    )]
    Storage {
        #[command(subcommand)]
        action: StorageAction,
    },
    /// The current tab's recent requests, one request in full, and this Workspace's network rules.
    #[command(
        after_help = "Examples: bp --allow network.read network\n          bp --allow network.read network get 3 --body\n          bp --allow network.control network rules add \"*/ads/*\" block\n\nThe request commands need network.read and the rules network.control, which bp does not ask\nfor by default: pass --allow network.read,network.control, or set BP_ALLOW to them."
    )]
    Network {
        #[command(subcommand)]
        action: Option<NetworkAction>,
    },
    /// Answer HTTP Basic/Digest logins of an origin on bp's tabs, or stop answering them.
    #[command(
        after_help = "Examples: printf %s \"$PASSWORD\" | bp --allow network.control auth set https://intranet.example ada -\n          bp --allow network.control auth clear\n\nNeeds the network.control capability, which bp does not ask for by default: pass --allow network.control, or set BP_ALLOW=network.control."
    )]
    Auth {
        #[command(subcommand)]
        action: AuthAction,
    },
    /// Emulate a device, place or network on the current tab (only the fields given change).
    #[command(
        after_help = "Examples: bp --allow page.emulate emulate --device phone --color-scheme dark\n          bp --allow page.emulate emulate --locale fr-FR --timezone Europe/Paris --geo 48.8566,2.3522\n          bp --allow page.emulate emulate --offline true\n          bp --allow page.emulate emulate --reset\n\nNeeds the page.emulate capability, which bp does not ask for by default: pass --allow page.emulate,\nor set BP_ALLOW=page.emulate. A user tab bp controlled is handed back unemulated when the\ncommand ends; bp's own tabs keep the emulation until --reset."
    )]
    Emulate(EmulateArgs),
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
    #[command(
        after_help = "Examples: bp screenshot page.png --full\n          bp screenshot --annotate\n          bp screenshot boxes.png --annotate --refs 3,7"
    )]
    Screenshot {
        /// Where to save it (default: a new file in the current directory).
        file: Option<PathBuf>,
        /// The whole page, not only the viewport.
        #[arg(long, conflicts_with = "annotate")]
        full: bool,
        /// Outline the last observation's elements with their ref numbers (viewport only).
        #[arg(long)]
        annotate: bool,
        /// With --annotate: only these refs (comma-separated).
        #[arg(long, value_delimiter = ',', requires = "annotate")]
        refs: Vec<u32>,
    },
    /// Save the current tab as PDF (headless browsers only).
    #[command(after_help = "Example: bp pdf page.pdf")]
    Pdf { file: PathBuf },
    /// Record the current tab (frames and the timeline of Commands and events), then save the
    /// recording as one HTML file that plays offline.
    #[command(after_help = "Examples: bp record start\n          bp record stop run.html")]
    Record {
        #[command(subcommand)]
        action: RecordAction,
    },
    /// Print this Workspace's events (recent ones; --follow keeps waiting for new ones).
    #[command(after_help = "Example: bp events --follow")]
    Events {
        #[arg(long)]
        follow: bool,
    },
    /// Ask the person at the live view to act on the current tab (a captcha, a second factor),
    /// or tell a waiting hand-off that you are done.
    #[command(
        after_help = "Examples: bp handoff ask \"Solve the captcha\" --timeout 300000\n          bp handoff done --note \"logged in\""
    )]
    Handoff {
        #[command(subcommand)]
        action: HandoffAction,
    },
    /// Print the URL of your live view of every Workspace (starting the view when none runs):
    /// watch agents' tabs and answer their hand-offs (docs/view.md).
    #[command(after_help = "Example: bp view --open")]
    View {
        /// Also hand the URL to the desktop's browser, where there is a desktop.
        #[arg(long)]
        open: bool,
        /// Stop the running view instead.
        #[arg(long, conflicts_with = "open")]
        stop: bool,
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

/// `bp storage` subcommands.
#[derive(Debug, Subcommand)]
pub enum StorageAction {
    /// Save the Workspace's storage state into FILE (created 0600 by the Broker's export).
    #[command(
        after_help = "Example: bp --allow network.read storage save state.json\n\nNeeds network.read, which bp does not ask for by default: pass --allow network.read, or set\nBP_ALLOW. Save reads only an isolated Workspace, and bp's shares the browser profile."
    )]
    Save { file: PathBuf },
    /// Load the storage state of FILE into the Workspace.
    #[command(
        after_help = "Example: bp --allow network.control,profile.write storage load state.json\n\nNeeds network.control, and profile.write because bp's Workspace shares the browser profile\nwith your own tabs: pass --allow network.control,profile.write, or set BP_ALLOW to them."
    )]
    Load { file: PathBuf },
}

#[derive(Subcommand, Debug)]
pub enum RecordAction {
    /// Start recording the current tab (`browser.recording.start`).
    #[command(after_help = "Example: bp record start")]
    Start,
    /// Stop recording the current tab and write the recording to FILE (an existing file is
    /// kept; `browser.recording.stop`).
    #[command(after_help = "Example: bp record stop run.html")]
    Stop { file: PathBuf },
}

#[derive(Subcommand, Debug)]
pub enum HandoffAction {
    /// Wait until the person at the live view presses Done (`browser.handoff`).
    #[command(
        after_help = "Example: bp handoff ask \"Solve the captcha, then press Done\" --timeout 300000"
    )]
    Ask {
        /// What the person should do.
        reason: String,
        /// Give up after this many milliseconds (default: the Broker's 30 s).
        #[arg(long, value_name = "MS")]
        timeout: Option<u64>,
    },
    /// The person is done: the waiting hand-off completes (the only one when no id is given).
    #[command(after_help = "Example: bp handoff done --note \"logged in\"")]
    Done {
        /// The hand-off's id (`handoff:...`, from the `handoff.requested` event or the view).
        id: Option<String>,
        /// A note for the agent.
        #[arg(long)]
        note: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum CookiesAction {
    /// List cookies (default: those of the current tab's URL).
    #[command(
        after_help = "Examples: bp --allow network.read cookies list\n          bp --allow network.read cookies list --url https://example.com/account\n\nNeeds the network.read capability, which bp does not ask for by default: pass --allow network.read, or set BP_ALLOW=network.read."
    )]
    List {
        /// Only cookies whose domain is this one or under it.
        #[arg(long)]
        domain: Option<String>,
        /// Only cookies the browser would send to this URL (repeatable).
        #[arg(long = "url", value_name = "URL")]
        urls: Vec<String>,
        /// At most this many cookies.
        #[arg(long)]
        limit: Option<u32>,
    },
    /// Set cookie NAME to VALUE (`-` reads it from stdin) for the current tab's URL, another
    /// --url, or a --domain; the browser's copy is read back.
    #[command(
        after_help = "Examples: bp --allow network.control,profile.write cookies set theme dark\n          printf %s \"$TOKEN\" | bp --allow network.control,profile.write cookies set sid - --http-only --domain example.com\n\nNeeds the network.control capability, and profile.write because bp's Workspace shares the\nbrowser profile with your own tabs (they see the cookie too); bp asks for neither by default:\npass --allow network.control,profile.write, or set BP_ALLOW to them."
    )]
    Set {
        name: String,
        /// The value, or `-` to read it from stdin.
        value: String,
        #[command(flatten)]
        place: CookiePlace,
        /// Sent over https only.
        #[arg(long)]
        secure: bool,
        /// Hidden from the page's scripts.
        #[arg(long)]
        http_only: bool,
        /// Strict, Lax or None.
        #[arg(long, value_name = "POLICY", value_parser = ["Strict", "Lax", "None"])]
        same_site: Option<String>,
        /// Expiry in seconds since the epoch (default: a session cookie).
        #[arg(long, value_name = "EPOCH_SECONDS")]
        expires: Option<f64>,
    },
    /// Delete the cookies named NAME of the current tab's URL, another --url, or a --domain.
    #[command(
        after_help = "Example: bp --allow network.control,profile.write cookies delete sid\n\nNeeds the network.control capability, and profile.write because bp's Workspace shares the\nbrowser profile with your own tabs; bp asks for neither by default: pass\n--allow network.control,profile.write, or set BP_ALLOW to them."
    )]
    Delete {
        name: String,
        #[command(flatten)]
        place: CookiePlace,
    },
}

/// `bp emulate`'s fields, each an argument of `browser.emulate`.
#[derive(Args, Debug, Default, Clone)]
pub struct EmulateArgs {
    /// Drop every override first.
    #[arg(long)]
    pub reset: bool,
    /// A device preset.
    #[arg(long, value_parser = ["phone", "tablet", "desktop"])]
    pub device: Option<String>,
    /// Viewport width in CSS pixels.
    #[arg(long)]
    pub width: Option<u32>,
    /// Viewport height in CSS pixels.
    #[arg(long)]
    pub height: Option<u32>,
    /// Device pixel ratio.
    #[arg(long, value_name = "RATIO")]
    pub scale: Option<f64>,
    /// Touch screen on or off.
    #[arg(long, value_name = "BOOL")]
    pub touch: Option<bool>,
    /// User-Agent string.
    #[arg(long, value_name = "UA")]
    pub user_agent: Option<String>,
    /// BCP 47 locale, such as fr-FR.
    #[arg(long)]
    pub locale: Option<String>,
    /// IANA timezone, such as Asia/Tokyo.
    #[arg(long)]
    pub timezone: Option<String>,
    /// Position as LATITUDE,LONGITUDE (granted to the tab's origin).
    #[arg(
        long,
        value_name = "LAT,LON",
        value_delimiter = ',',
        num_args = 2,
        allow_negative_numbers = true
    )]
    pub geo: Vec<f64>,
    /// light or dark.
    #[arg(long, value_parser = ["light", "dark"])]
    pub color_scheme: Option<String>,
    /// prefers-reduced-motion: reduce on or off.
    #[arg(long, value_name = "BOOL")]
    pub reduced_motion: Option<bool>,
    /// Every request of the tab fails (true) or not (false).
    #[arg(long, value_name = "BOOL")]
    pub offline: Option<bool>,
    /// Added round-trip latency in ms (a throttle).
    #[arg(long, value_name = "MS")]
    pub latency: Option<u64>,
    /// Download cap in kilobits per second (a throttle).
    #[arg(long, value_name = "KBPS")]
    pub download_kbps: Option<u64>,
    /// Upload cap in kilobits per second (a throttle).
    #[arg(long, value_name = "KBPS")]
    pub upload_kbps: Option<u64>,
}

/// Whose cookie `bp cookies set|delete` writes (default: the current tab's URL).
#[derive(Args, Debug, Default, Clone)]
pub struct CookiePlace {
    /// The cookie of this http(s) URL's host.
    #[arg(long, value_name = "URL", conflicts_with = "domain")]
    pub url: Option<String>,
    /// A domain cookie (sent to its subdomains too).
    #[arg(long, value_name = "DOMAIN")]
    pub domain: Option<String>,
    /// The cookie's path (default /).
    #[arg(long, value_name = "PATH")]
    pub path: Option<String>,
}

#[derive(Args, Debug, Default, Clone)]
pub struct RequestFilter {
    /// Only requests whose URL contains this text.
    #[arg(long, value_name = "TEXT")]
    pub url_contains: Option<String>,
    /// Only this resource type (Document, Script, Image, XHR, Fetch, ...).
    #[arg(long = "type", value_name = "TYPE")]
    pub resource_type: Option<String>,
    /// Only responses with this HTTP status.
    #[arg(long)]
    pub status: Option<u16>,
    /// Only the newest this many (default 50).
    #[arg(long)]
    pub limit: Option<usize>,
}

#[derive(Subcommand, Debug)]
pub enum NetworkAction {
    /// List the current tab's recent requests, numbered for `bp network get N`.
    #[command(
        after_help = "Examples: bp --allow network.read network list\n          bp --allow network.read network list --type XHR --status 500\n\nNeeds the network.read capability, which bp does not ask for by default: pass --allow network.read, or set BP_ALLOW=network.read."
    )]
    List(RequestFilter),
    /// One request in full: headers (Authorization redacted) and, with --body, the response body.
    #[command(
        after_help = "Examples: bp --allow network.read network get 3 --body\n          bp --allow network.read network get request:4bcc...\n\nNeeds the network.read capability, which bp does not ask for by default: pass --allow network.read, or set BP_ALLOW=network.read."
    )]
    Get {
        /// The number `bp network list` printed, or a requestId.
        #[arg(value_name = "N|ID")]
        request: String,
        /// Also print the response body.
        #[arg(long)]
        body: bool,
        /// Most bytes of the body (default 256 KiB).
        #[arg(long, requires = "body")]
        max_body_bytes: Option<u32>,
    },
    /// This Workspace's network rules: list (default), add, remove.
    #[command(
        after_help = "Example: bp --allow network.control network rules\n\nNeeds the network.control capability, which bp does not ask for by default: pass --allow network.control, or set BP_ALLOW=network.control."
    )]
    Rules {
        #[command(subcommand)]
        action: Option<RulesAction>,
    },
}

#[derive(Subcommand, Debug)]
pub enum RulesAction {
    /// List the rules, oldest first, numbered for `bp network rules remove N`.
    #[command(
        after_help = "Example: bp --allow network.control network rules list\n\nNeeds the network.control capability, which bp does not ask for by default: pass --allow network.control, or set BP_ALLOW=network.control."
    )]
    List,
    /// Block, mock or add headers to the requests whose whole URL matches PATTERN (`*` any run).
    #[command(
        after_help = "Examples: bp --allow network.control network rules add \"*/ads/*\" block\n          bp --allow network.control network rules add \"*/api/me\" mock --status 200 --body '{\"name\":\"Ada\"}' --header \"Content-Type: application/json\"\n          bp --allow network.control network rules add \"*/api/*\" headers --header \"X-Debug: 1\"\n\nNeeds the network.control capability, which bp does not ask for by default: pass --allow network.control, or set BP_ALLOW=network.control."
    )]
    Add {
        /// A glob over the whole URL.
        pattern: String,
        /// What to do with a matching request.
        action: RuleAction,
        /// The mock response's HTTP status.
        #[arg(long)]
        status: Option<u16>,
        /// The mock response's body, as text.
        #[arg(long, conflicts_with = "body_file")]
        body: Option<String>,
        /// The mock response's body, the bytes of this file.
        #[arg(long, value_name = "FILE")]
        body_file: Option<PathBuf>,
        /// `Name: value`: a mock response header, or a header added to the request (repeatable).
        #[arg(long = "header", value_name = "NAME: VALUE", value_parser = parse_header)]
        headers: Vec<(String, String)>,
    },
    /// Remove rule N (from `bp network rules`) or the rule with this ruleId.
    #[command(
        after_help = "Example: bp --allow network.control network rules remove 1\n\nNeeds the network.control capability, which bp does not ask for by default: pass --allow network.control, or set BP_ALLOW=network.control."
    )]
    Remove {
        #[arg(value_name = "N|ID")]
        rule: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum AuthAction {
    /// Answer ORIGIN's HTTP logins with USER and PASSWORD (`-` reads it from stdin, keeping it
    /// out of the shell's history and the process list).
    #[command(
        after_help = "Example: printf %s \"$PASSWORD\" | bp --allow network.control auth set https://intranet.example ada -\n\nNeeds the network.control capability, which bp does not ask for by default: pass --allow network.control, or set BP_ALLOW=network.control."
    )]
    Set {
        /// scheme://host[:port]
        origin: String,
        username: String,
        /// The password, or `-` to read it from stdin.
        password: String,
    },
    /// Stop answering ORIGIN's logins (every origin's when omitted).
    #[command(
        after_help = "Example: bp --allow network.control auth clear https://intranet.example\n\nNeeds the network.control capability, which bp does not ask for by default: pass --allow network.control, or set BP_ALLOW=network.control."
    )]
    Clear { origin: Option<String> },
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleAction {
    Block,
    Mock,
    Headers,
}

impl RuleAction {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleAction::Block => "block",
            RuleAction::Mock => "mock",
            RuleAction::Headers => "headers",
        }
    }
}

/// The levels `browser.console.list` filters by (its `levels` schema).
const CONSOLE_LEVELS: [&str; 6] = ["log", "debug", "info", "warning", "error", "exception"];

/// Where `bp drag --to` drops: a ref of the same observation, or viewport coordinates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DropPoint {
    Ref(u32),
    At(f64, f64),
}

fn parse_drop(text: &str) -> Result<DropPoint, String> {
    match text.contains(',') {
        true => parse_xy(text).map(|(x, y)| DropPoint::At(x, y)),
        false => text
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|r| *r > 0)
            .map(DropPoint::Ref)
            .ok_or_else(|| format!("{text:?} is neither a ref nor X,Y")),
    }
}

fn parse_json(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON ({e}); quote strings: '\"text\"'"))
}

fn parse_header(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once(':')
        .ok_or_else(|| "expected `Name: value`".to_owned())?;
    let name = name.trim();
    match name.is_empty() {
        true => Err("the header name is empty".to_owned()),
        false => Ok((name.to_owned(), value.trim_start().to_owned())),
    }
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

    /// Every command and subcommand, as `bp a b`, with its clap definition.
    fn every_command() -> Vec<(String, clap::Command)> {
        fn walk(prefix: &str, command: &clap::Command, out: &mut Vec<(String, clap::Command)>) {
            for sub in command.get_subcommands() {
                let name = format!("{prefix} {}", sub.get_name());
                out.push((name.clone(), sub.clone()));
                walk(&name, sub, out);
            }
        }
        let mut out = Vec::new();
        walk("bp", &Cli::command(), &mut out);
        out
    }

    #[test]
    fn every_command_has_an_example() {
        for (name, sub) in every_command() {
            let help = sub
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            assert!(help.starts_with("Example"), "{name} has no example");
        }
    }

    /// The tool coverage: every tool of the manifest (all of which the Broker advertises to a
    /// `bp` that was allowed the extras) has a `bp` command that exists, and a command whose
    /// tool needs a capability bp does not ask for by default says how to grant it.
    #[test]
    fn every_tool_has_a_bp_command() {
        let commands = every_command();
        for tool in crate::tools::manifest() {
            let mapped: Vec<&str> = TOOL_COMMANDS
                .iter()
                .filter(|(name, _)| *name == tool.name)
                .map(|(_, command)| *command)
                .collect();
            let implicit = IMPLICIT_TOOLS.iter().any(|(name, _)| *name == tool.name);
            assert!(
                !mapped.is_empty() || implicit,
                "{} has no bp command: add one (src/cli/args.rs, run.rs) and its TOOL_COMMANDS row",
                tool.name
            );
            for command in mapped {
                let (_, definition) = commands
                    .iter()
                    .find(|(name, _)| name == command)
                    .unwrap_or_else(|| panic!("{command} (for {}) is not a command", tool.name));
                if DEFAULT_CAPABILITIES.contains(&tool.capability) {
                    continue;
                }
                let help = definition
                    .get_after_help()
                    .map(|h| h.to_string())
                    .unwrap_or_default();
                assert!(
                    help.contains(&format!("--allow {}", tool.capability)),
                    "{command} must say how to grant {}",
                    tool.capability
                );
            }
        }
        for (name, _) in TOOL_COMMANDS.iter().chain(IMPLICIT_TOOLS) {
            assert!(
                crate::tools::find(name).is_some(),
                "{name} is no tool of the manifest"
            );
        }
    }

    #[test]
    fn docs_cli_md_lists_every_tool() {
        const START: &str = "<!-- tool coverage: generated -->\n";
        const END: &str = "<!-- end of tool coverage -->";
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli.md");
        let rows: Vec<(&str, &str)> = crate::tools::manifest()
            .iter()
            .map(|tool| (tool.name, tool.capability))
            .collect();
        let table = tool_coverage_markdown(&rows);
        assert!(!table.contains("**none**"), "{table}");
        let on_disk = std::fs::read_to_string(path).unwrap_or_default();
        let (Some(start), Some(end)) = (on_disk.find(START), on_disk.find(END)) else {
            panic!("docs/cli.md lacks the {START:?} ... {END:?} section");
        };
        let rendered = format!("{}{START}{table}{}", &on_disk[..start], &on_disk[end..]);
        if std::env::var_os("BROWSER_PILOT_UPDATE_DOCS").is_some() {
            std::fs::write(path, &rendered).expect("write docs/cli.md");
        }
        let on_disk = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            on_disk == rendered,
            "docs/cli.md's tool table is stale: run BROWSER_PILOT_UPDATE_DOCS=1 cargo test --lib cli::args"
        );
    }

    #[test]
    fn parsers() {
        assert_eq!(parse_drop("7"), Ok(DropPoint::Ref(7)));
        assert_eq!(parse_drop("400,220"), Ok(DropPoint::At(400.0, 220.0)));
        assert!(parse_drop("0").is_err() && parse_drop("x").is_err());
        assert_eq!(
            parse_header("X-Debug:  1"),
            Ok(("X-Debug".to_owned(), "1".to_owned()))
        );
        assert!(parse_header("nothing").is_err() && parse_header(": v").is_err());
        assert_eq!(parse_json("[1,2]"), Ok(serde_json::json!([1, 2])));
        assert!(parse_json("bare").is_err());
        let cli = Cli::try_parse_from(["bp", "--allow", "page.eval,network.read", "tabs"]).unwrap();
        assert_eq!(cli.allow, ["page.eval", "network.read"]);
        assert!(Cli::try_parse_from(["bp", "--allow", "browser.control", "tabs"]).is_err());
        assert!(Cli::try_parse_from(["bp", "wait"]).is_err());
        let cli = Cli::try_parse_from(["bp", "upload", "--index", "0", "cv.pdf"]).unwrap();
        assert!(
            matches!(cli.command, Command::Upload { ref items, index: Some(0) } if items == &["cv.pdf"])
        );
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
