//! Passive discovery and deterministic selection of browser candidates.
//! Discovery reads `DevToolsActivePort` and probes the port with a plain TCP
//! connect that is closed at once: no WebSocket and no HTTP, so it can never
//! trigger Chrome's remote-debugging approval prompt (docs/cdp.md, "approval mode"). The
//! managed profile has no port: it is found through its keeper's socket
//! (`keeper::probe`, a connect and hang-up of this user's socket). It is
//! blocking (file reads plus probes of at most `PROBE_TIMEOUT` each); async
//! callers wrap it in `spawn_blocking`. It never writes anything.

use std::ffi::OsStr;
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use super::candidate::{
    AuthorizationState, Candidate, CandidateKind, CandidateState, Endpoint, ProcessState,
    Remediation, RemoteDebuggingState,
};
use super::os;

/// Environment variable with a list (OS path-list separator) of user-data
/// directories to scan; when set it replaces the platform defaults.
pub const DISCOVERY_DIRS_ENV: &str = "BROWSER_PILOT_DISCOVERY_DIRS";

/// TCP probe timeout. A closed loopback port refuses in ~1 ms; a live one
/// accepts in well under 1 ms, so 150 ms only matters for a wedged host.
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(150);

/// `DevToolsActivePort` is two short lines; anything longer is not one.
const MAX_ACTIVE_PORT_BYTES: u64 = 4096;

/// Name of the file Chromium writes into the user-data directory root.
const ACTIVE_PORT_FILE: &str = "DevToolsActivePort";

/// The chrome://inspect page where users turn on remote debugging.
const INSPECT_URL: &str = "chrome://inspect/#remote-debugging";

/// Where discovery looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryConfig {
    /// `BROWSER_PILOT_HOME`; the managed profile lives under it.
    pub home: PathBuf,
    /// Explicit user-data directories; `Some` replaces the platform defaults.
    pub discovery_dirs: Option<Vec<PathBuf>>,
}

impl DiscoveryConfig {
    /// Reads `BROWSER_PILOT_DISCOVERY_DIRS`. Set but empty means "no
    /// platform defaults", leaving only the managed profile.
    pub fn from_env(home: PathBuf) -> DiscoveryConfig {
        let discovery_dirs =
            std::env::var_os(DISCOVERY_DIRS_ENV).map(|value| parse_dir_list(&value));
        DiscoveryConfig {
            home,
            discovery_dirs,
        }
    }
}

/// Splits an OS path list, ignoring empty entries.
fn parse_dir_list(value: &OsStr) -> Vec<PathBuf> {
    std::env::split_paths(value)
        .filter(|path| !path.as_os_str().is_empty())
        .collect()
}

/// The Broker-managed profile: `<home>/browser/managed-profile`.
pub fn managed_profile_dir(home: &Path) -> PathBuf {
    home.join("browser").join("managed-profile")
}

/// Where a candidate comes from, before inspection.
struct Source {
    product: &'static str,
    channel: &'static str,
    profile: String,
    managed: bool,
    dir: PathBuf,
}

/// Lists candidates in stable order: explicit discovery dirs as given (or
/// the platform defaults that exist), then the managed profile, which is
/// always present, then the entries of `remote-browsers.toml` in file order (read, never
/// contacted). Duplicate directories are listed once. The second value holds the diagnostics
/// of the remote file as a whole.
pub fn discover_all(cfg: &DiscoveryConfig) -> (Vec<Candidate>, Vec<super::remote::Diagnostic>) {
    let mut candidates = discover(cfg);
    let remote = super::remote::scan(&cfg.home);
    candidates.extend(remote.candidates);
    (candidates, remote.diagnostics)
}

/// The local candidates of `discover_all`.
pub fn discover(cfg: &DiscoveryConfig) -> Vec<Candidate> {
    let mut sources = Vec::new();
    match &cfg.discovery_dirs {
        Some(dirs) => {
            for dir in dirs {
                let (product, channel) = infer_product(dir);
                sources.push(Source {
                    product,
                    channel,
                    profile: display_name(dir),
                    managed: false,
                    dir: dir.clone(),
                });
            }
        }
        None => {
            for default in os::default_user_data_dirs() {
                if default.path.is_dir() {
                    sources.push(Source {
                        product: default.product,
                        channel: default.channel,
                        profile: "default".to_owned(),
                        managed: false,
                        dir: default.path,
                    });
                }
            }
        }
    }
    let managed_key = stable_path(&managed_profile_dir(&cfg.home));
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut candidates = Vec::new();
    for source in sources {
        let key = stable_path(&source.dir);
        // The managed entry below represents that directory.
        if key == managed_key || seen.contains(&key) {
            continue;
        }
        candidates.push(inspect(source, &key));
        seen.push(key);
    }
    candidates.push(inspect_managed(&cfg.home));
    candidates
}

/// Inspects the managed profile alone (used by `browser launch`).
pub(super) fn inspect_managed(home: &Path) -> Candidate {
    let dir = managed_profile_dir(home);
    let key = stable_path(&dir);
    inspect(
        Source {
            product: "chromium",
            channel: "managed",
            profile: "managed".to_owned(),
            managed: true,
            dir,
        },
        &key,
    )
}

/// Picks a candidate. With a preference, candidates matching it by `id`,
/// else by `product`, else by `channel` are considered; without one, all
/// are. Among those, the first ready one wins, else the first.
pub fn select<'a>(cands: &'a [Candidate], preference: Option<&str>) -> Option<&'a Candidate> {
    let pool: Vec<&Candidate> = match preference {
        None => cands.iter().collect(),
        Some(preference) => {
            let by = |field: fn(&Candidate) -> &str| -> Vec<&Candidate> {
                cands.iter().filter(|c| field(c) == preference).collect()
            };
            let by_id = by(|c| &c.id);
            let by_product = by(|c| &c.product);
            let by_channel = by(|c| &c.channel);
            match (by_id.is_empty(), by_product.is_empty()) {
                (false, _) => by_id,
                (true, false) => by_product,
                (true, true) => by_channel,
            }
        }
    };
    pool.iter()
        .find(|c| c.state == CandidateState::Ready)
        .or_else(|| pool.first())
        .copied()
}

fn inspect(source: Source, key: &Path) -> Candidate {
    let (remote_debugging_state, endpoint) = match source.managed {
        true => keeper_state(&source.dir),
        false => match read_active_port(&source.dir) {
            ActivePort::Missing => (RemoteDebuggingState::Disabled, None),
            ActivePort::Malformed => (RemoteDebuggingState::Stale, None),
            ActivePort::Found(endpoint @ Endpoint::Port { port, .. }) => match probe(port) {
                true => (RemoteDebuggingState::Enabled, Some(endpoint)),
                false => (RemoteDebuggingState::Stale, None),
            },
            ActivePort::Found(_) => (RemoteDebuggingState::Stale, None),
        },
    };
    let process_state = match remote_debugging_state {
        RemoteDebuggingState::Enabled => ProcessState::Running,
        _ => os::profile_process_state(&source.dir),
    };
    let (state, remediation) = assess(
        source.product,
        source.managed,
        process_state,
        remote_debugging_state,
    );
    Candidate {
        id: candidate_id(source.product, source.channel, key),
        product: source.product.to_owned(),
        channel: source.channel.to_owned(),
        profile: source.profile,
        managed: source.managed,
        kind: CandidateKind::Local,
        state,
        process_state,
        remote_debugging_state,
        authorization_state: AuthorizationState::Unknown,
        remediation,
        diagnostics: Vec::new(),
        endpoint,
        user_data_dir: source.dir,
        pool: Vec::new(),
    }
}

fn assess(
    product: &str,
    managed: bool,
    process_state: ProcessState,
    remote_debugging_state: RemoteDebuggingState,
) -> (CandidateState, Option<Remediation>) {
    if remote_debugging_state == RemoteDebuggingState::Enabled {
        return (CandidateState::Ready, None);
    }
    if managed {
        let remediation = Remediation {
            action: "launch_managed_browser".to_owned(),
            message: "run: browser-pilot browser launch --headless".to_owned(),
            url: None,
        };
        return (CandidateState::NeedsSetup, Some(remediation));
    }
    let name = product_display_name(product);
    match process_state {
        ProcessState::Running => (
            CandidateState::NeedsSetup,
            Some(Remediation {
                action: "enable_remote_debugging".to_owned(),
                message: format!(
                    "open {INSPECT_URL} in {name} and allow remote debugging for this browser"
                ),
                url: Some(INSPECT_URL.to_owned()),
            }),
        ),
        ProcessState::NotRunning | ProcessState::Unknown => {
            let remediation = match remote_debugging_state {
                RemoteDebuggingState::Disabled => Remediation {
                    action: "start_browser".to_owned(),
                    message: format!("start {name}, then enable remote debugging at {INSPECT_URL}"),
                    url: Some(INSPECT_URL.to_owned()),
                },
                _ => Remediation {
                    action: "start_browser".to_owned(),
                    message: format!("start {name}"),
                    url: None,
                },
            };
            (CandidateState::Unavailable, Some(remediation))
        }
    }
}

fn product_display_name(product: &str) -> &'static str {
    match product {
        "chrome" => "Google Chrome",
        "edge" => "Microsoft Edge",
        "brave" => "Brave",
        _ => "Chromium",
    }
}

enum ActivePort {
    Missing,
    Malformed,
    Found(Endpoint),
}

/// Reads `<dir>/DevToolsActivePort`: `"<port>\n/devtools/browser/<id>"`
/// without a trailing newline (docs/cdp.md, "discovery file").
fn read_active_port(dir: &Path) -> ActivePort {
    let file = match std::fs::File::open(dir.join(ACTIVE_PORT_FILE)) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return ActivePort::Missing,
        Err(_) => return ActivePort::Malformed,
    };
    let mut text = String::new();
    match file.take(MAX_ACTIVE_PORT_BYTES).read_to_string(&mut text) {
        Ok(_) => match parse_active_port(&text) {
            Some(endpoint) => ActivePort::Found(endpoint),
            None => ActivePort::Malformed,
        },
        Err(_) => ActivePort::Malformed,
    }
}

/// The keeper's socket of the managed profile at `profile_dir`
/// (`<home>/browser/managed-profile` -> `<home>/browser/keeper.sock`).
pub(super) fn keeper_socket(profile_dir: &Path) -> PathBuf {
    crate::keeper::socket_path(profile_dir.parent().unwrap_or(profile_dir))
}

/// The managed profile's state: enabled when its keeper answers.
fn keeper_state(profile_dir: &Path) -> (RemoteDebuggingState, Option<Endpoint>) {
    let socket = keeper_socket(profile_dir);
    if crate::keeper::probe(&socket) {
        return (
            RemoteDebuggingState::Enabled,
            Some(Endpoint::Keeper { socket }),
        );
    }
    match socket.exists() {
        true => (RemoteDebuggingState::Stale, None),
        false => (RemoteDebuggingState::Disabled, None),
    }
}

/// A live port of the managed profile: only a browser an older version launched with one
/// (`browser stop` still closes it).
pub(super) fn managed_port(home: &Path) -> Option<Endpoint> {
    match read_active_port(&managed_profile_dir(home)) {
        ActivePort::Found(endpoint @ Endpoint::Port { port, .. }) if probe(port) => Some(endpoint),
        _ => None,
    }
}

/// Removes `<dir>/DevToolsActivePort` if present.
pub(super) fn remove_active_port(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(dir.join(ACTIVE_PORT_FILE)) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

fn parse_active_port(text: &str) -> Option<Endpoint> {
    let mut lines = text.lines().map(str::trim).filter(|line| !line.is_empty());
    let port: u16 = lines.next()?.parse().ok()?;
    let path = lines.next()?;
    if port == 0 || !path.starts_with("/devtools/browser") || lines.next().is_some() {
        return None;
    }
    Some(Endpoint::Port {
        port,
        path: path.to_owned(),
    })
}

/// A plain TCP connect to 127.0.0.1:port, closed at once.
pub(super) fn probe(port: u16) -> bool {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpStream::connect_timeout(&address, PROBE_TIMEOUT).is_ok()
}

/// `browser:<slug>-<8 hex>`; the hash is over the stable path so the id
/// survives restarts and does not reveal the path.
fn candidate_id(product: &str, channel: &str, key: &Path) -> String {
    let hex = &crate::hex::sha256(key.as_os_str().as_encoded_bytes())[..8];
    match channel {
        "stable" => format!("browser:{product}-{hex}"),
        _ => format!("browser:{product}-{channel}-{hex}"),
    }
}

/// The canonical form of `path` even if it does not exist yet: the deepest
/// existing ancestor is canonicalized and the rest appended, so the id of a
/// profile does not change when its directory is created.
fn stable_path(path: &Path) -> PathBuf {
    let absolute = match path.is_absolute() {
        true => path.to_path_buf(),
        false => std::env::current_dir()
            .map(|cwd| cwd.join(path))
            .unwrap_or_else(|_| path.to_path_buf()),
    };
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(canonical) = existing.canonicalize() {
            let mut result = canonical;
            for part in rest.iter().rev() {
                result.push(part);
            }
            return result;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return absolute,
        }
    }
}

/// Product and channel from a known directory name anywhere in the path,
/// nearest to the leaf first; unknown layouts count as stable Chromium.
fn infer_product(dir: &Path) -> (&'static str, &'static str) {
    let names: Vec<String> = dir
        .components()
        .filter_map(|component| match component {
            Component::Normal(name) => Some(name.to_string_lossy().to_lowercase()),
            _ => None,
        })
        .collect();
    for name in names.iter().rev() {
        let known = match name.as_str() {
            "google-chrome" | "chrome" => Some(("chrome", "stable")),
            "google-chrome-beta" | "chrome beta" => Some(("chrome", "beta")),
            "google-chrome-unstable" | "chrome dev" => Some(("chrome", "dev")),
            "chrome canary" | "chrome sxs" => Some(("chrome", "canary")),
            "chromium" => Some(("chromium", "stable")),
            "microsoft-edge" | "microsoft edge" | "edge" => Some(("edge", "stable")),
            "microsoft-edge-beta" | "microsoft edge beta" | "edge beta" => Some(("edge", "beta")),
            "microsoft-edge-dev" | "microsoft edge dev" | "edge dev" => Some(("edge", "dev")),
            "microsoft edge canary" | "edge sxs" => Some(("edge", "canary")),
            "brave-browser" => Some(("brave", "stable")),
            _ => None,
        };
        if let Some(known) = known {
            return known;
        }
    }
    ("chromium", "stable")
}

/// The last path component, as a display name (never the full path).
fn display_name(dir: &Path) -> String {
    dir.file_name()
        .map(OsStr::to_string_lossy)
        .map(|name| name.into_owned())
        .unwrap_or_else(|| "profile".to_owned())
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    fn check_port(text: &str, expect: Option<(u16, &str)>) {
        let got = parse_active_port(text).map(|endpoint| match endpoint {
            Endpoint::Port { port, path } => (port, path),
            _ => unreachable!("a port file names a port"),
        });
        let expect = expect.map(|(port, path)| (port, path.to_owned()));
        assert_eq!(got, expect, "input {text:?}");
    }

    #[test]
    fn active_port_parsing() {
        check_port(
            "45517\n/devtools/browser/aa3e",
            Some((45517, "/devtools/browser/aa3e")),
        );
        check_port(
            "45517\n/devtools/browser/aa3e\n",
            Some((45517, "/devtools/browser/aa3e")),
        );
        check_port(
            "\r\n 9222 \r\n/devtools/browser\r\n",
            Some((9222, "/devtools/browser")),
        );
        check_port("45517", None);
        check_port("0\n/devtools/browser/x", None);
        check_port("70000\n/devtools/browser/x", None);
        check_port("abc\n/devtools/browser/x", None);
        check_port("45517\n/devtools/page/x", None);
        check_port("45517\n/devtools/browser/x\nextra", None);
        check_port("", None);
    }

    #[test]
    fn dir_list_ignores_empty_entries() {
        let joined = std::env::join_paths(["/a", "", "/b c"]).unwrap();
        assert_eq!(
            parse_dir_list(&joined),
            vec![PathBuf::from("/a"), PathBuf::from("/b c")]
        );
        assert_eq!(parse_dir_list(OsStr::new("")), Vec::<PathBuf>::new());
    }

    fn write_port(dir: &Path, port: u16) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join(ACTIVE_PORT_FILE),
            format!("{port}\n/devtools/browser/abc"),
        )
        .unwrap();
    }

    fn closed_port() -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    }

    #[test]
    fn discovery_reports_states_in_stable_order() {
        let root = tempfile::tempdir().unwrap();
        let live_dir = root.path().join("live");
        let stale_dir = root.path().join("stale");
        let never_dir = root.path().join("google-chrome-beta");
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let live_port = listener.local_addr().unwrap().port();
        write_port(&live_dir, live_port);
        write_port(&stale_dir, closed_port());
        let cfg = DiscoveryConfig {
            home: root.path().join("home"),
            discovery_dirs: Some(vec![stale_dir.clone(), live_dir.clone(), never_dir.clone()]),
        };
        let cands = discover(&cfg);
        let profiles: Vec<&str> = cands.iter().map(|c| c.profile.as_str()).collect();
        assert_eq!(profiles, ["stale", "live", "google-chrome-beta", "managed"]);

        let stale = &cands[0];
        assert_eq!(stale.remote_debugging_state, RemoteDebuggingState::Stale);
        assert_eq!(stale.process_state, ProcessState::NotRunning);
        assert_eq!(stale.state, CandidateState::Unavailable);
        assert_eq!(stale.remediation.as_ref().unwrap().action, "start_browser");
        assert_eq!(stale.endpoint(), None);

        let live = &cands[1];
        assert_eq!(live.state, CandidateState::Ready);
        assert_eq!(live.process_state, ProcessState::Running);
        assert_eq!(live.remote_debugging_state, RemoteDebuggingState::Enabled);
        assert_eq!(live.remediation, None);
        assert_eq!(
            live.endpoint().unwrap().janitor_arg(),
            format!("ws://127.0.0.1:{live_port}/devtools/browser/abc")
        );
        assert_eq!(live.user_data_dir.as_path(), live_dir.as_path());
        assert_eq!(
            (live.product.as_str(), live.channel.as_str()),
            ("chromium", "stable")
        );

        let never = &cands[2];
        assert_eq!(never.remote_debugging_state, RemoteDebuggingState::Disabled);
        assert_eq!(
            (never.product.as_str(), never.channel.as_str()),
            ("chrome", "beta")
        );
        assert!(never.id.starts_with("browser:chrome-beta-"), "{}", never.id);
        assert_eq!(
            never.remediation.as_ref().unwrap().url.as_deref(),
            Some(INSPECT_URL)
        );

        let managed = &cands[3];
        assert!(managed.managed);
        assert_eq!(managed.channel, "managed");
        assert_eq!(managed.state, CandidateState::NeedsSetup);
        let remediation = managed.remediation.as_ref().unwrap();
        assert_eq!(remediation.action, "launch_managed_browser");
        assert_eq!(
            remediation.message,
            "run: browser-pilot browser launch --headless"
        );

        for cand in &cands {
            assert_eq!(cand.authorization_state, AuthorizationState::Unknown);
        }
        drop(listener);
    }

    #[test]
    fn json_form_has_no_port_and_no_path() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("profile-dir");
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        write_port(&dir, port);
        let cfg = DiscoveryConfig {
            home: root.path().join("home"),
            discovery_dirs: Some(vec![dir]),
        };
        for cand in discover(&cfg) {
            let json = cand.to_json();
            let text = json.to_string();
            assert!(!text.contains(&port.to_string()), "{text}");
            assert!(!text.contains("devtools"), "{text}");
            assert!(!text.contains(&*root.path().to_string_lossy()), "{text}");
            let mut keys: Vec<&str> = json
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            keys.sort_unstable();
            let mut expected = vec![
                "authorizationState",
                "channel",
                "id",
                "kind",
                "managed",
                "processState",
                "product",
                "profile",
                "remoteDebuggingState",
                "state",
            ];
            if cand.remediation.is_some() {
                expected.push("remediation");
            }
            expected.sort_unstable();
            assert_eq!(keys, expected);
        }
    }

    #[test]
    fn ids_are_stable_and_distinct() {
        let root = tempfile::tempdir().unwrap();
        let a = root.path().join("a");
        let b = root.path().join("b");
        let cfg = DiscoveryConfig {
            home: root.path().join("home"),
            discovery_dirs: Some(vec![a.clone(), b.clone(), a.clone()]),
        };
        let first: Vec<String> = discover(&cfg).into_iter().map(|c| c.id).collect();
        assert_eq!(first.len(), 3, "duplicate dir listed once: {first:?}");
        // Creating the directories (and the managed profile) keeps the ids.
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::create_dir_all(managed_profile_dir(&cfg.home)).unwrap();
        let second: Vec<String> = discover(&cfg).into_iter().map(|c| c.id).collect();
        assert_eq!(first, second);
        assert_ne!(first[0], first[1]);
        assert!(
            first[2].starts_with("browser:chromium-managed-"),
            "{}",
            first[2]
        );
    }

    #[test]
    fn explicit_dir_equal_to_managed_profile_is_listed_once_as_managed() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        let cfg = DiscoveryConfig {
            discovery_dirs: Some(vec![managed_profile_dir(&home)]),
            home,
        };
        let cands = discover(&cfg);
        assert_eq!(cands.len(), 1);
        assert!(cands[0].managed);
    }

    #[cfg(unix)]
    #[test]
    fn singleton_lock_tells_whether_the_profile_runs() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("p");
        std::fs::create_dir_all(&dir).unwrap();
        let host = std::process::Command::new("hostname").output().unwrap();
        let host = String::from_utf8(host.stdout).unwrap().trim().to_owned();
        let lock = dir.join("SingletonLock");
        std::os::unix::fs::symlink(format!("{host}-{}", std::process::id()), &lock).unwrap();
        let cfg = DiscoveryConfig {
            home: root.path().join("home"),
            discovery_dirs: Some(vec![dir.clone()]),
        };
        let cand = &discover(&cfg)[0];
        assert_eq!(cand.process_state, ProcessState::Running);
        assert_eq!(cand.state, CandidateState::NeedsSetup);
        assert_eq!(
            cand.remediation.as_ref().unwrap().action,
            "enable_remote_debugging"
        );

        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = child.id();
        child.wait().unwrap();
        std::fs::remove_file(&lock).unwrap();
        std::os::unix::fs::symlink(format!("{host}-{dead_pid}"), &lock).unwrap();
        assert_eq!(discover(&cfg)[0].process_state, ProcessState::NotRunning);

        std::fs::remove_file(&lock).unwrap();
        std::os::unix::fs::symlink("some-other-host-1", &lock).unwrap();
        assert_eq!(discover(&cfg)[0].process_state, ProcessState::Unknown);
    }

    fn cand(id: &str, product: &str, channel: &str, state: CandidateState) -> Candidate {
        Candidate {
            id: id.to_owned(),
            product: product.to_owned(),
            channel: channel.to_owned(),
            profile: "default".to_owned(),
            managed: channel == "managed",
            kind: CandidateKind::Local,
            state,
            process_state: ProcessState::Unknown,
            remote_debugging_state: RemoteDebuggingState::Disabled,
            authorization_state: AuthorizationState::Unknown,
            remediation: None,
            diagnostics: Vec::new(),
            endpoint: None,
            user_data_dir: PathBuf::new(),
            pool: Vec::new(),
        }
    }

    #[test]
    fn selection_rules() {
        use CandidateState::{NeedsSetup, Ready, Unavailable};
        let cands = [
            cand("browser:chrome-1", "chrome", "stable", Unavailable),
            cand("browser:chrome-beta-2", "chrome", "beta", Ready),
            cand("browser:chromium-3", "chromium", "stable", Ready),
            cand(
                "browser:chromium-managed-4",
                "chromium",
                "managed",
                NeedsSetup,
            ),
        ];
        let pick = |preference: Option<&str>| select(&cands, preference).map(|c| c.id.as_str());
        assert_eq!(pick(None), Some("browser:chrome-beta-2"));
        assert_eq!(pick(Some("browser:chrome-1")), Some("browser:chrome-1"));
        assert_eq!(pick(Some("chrome")), Some("browser:chrome-beta-2"));
        assert_eq!(pick(Some("chromium")), Some("browser:chromium-3"));
        assert_eq!(pick(Some("managed")), Some("browser:chromium-managed-4"));
        assert_eq!(pick(Some("stable")), Some("browser:chromium-3"));
        assert_eq!(pick(Some("edge")), None);
        let none_ready = [
            cand("browser:chrome-1", "chrome", "stable", Unavailable),
            cand(
                "browser:chromium-managed-4",
                "chromium",
                "managed",
                NeedsSetup,
            ),
        ];
        assert_eq!(
            select(&none_ready, None).map(|c| c.id.as_str()),
            Some("browser:chrome-1")
        );
        assert_eq!(select(&[], None), None);
    }

    #[test]
    fn product_inference_from_known_dir_names() {
        let check = |path: &str, expect: (&str, &str)| {
            assert_eq!(infer_product(Path::new(path)), expect, "{path}")
        };
        check("/home/u/.config/google-chrome", ("chrome", "stable"));
        check("/home/u/.config/google-chrome-beta", ("chrome", "beta"));
        check("/home/u/.config/chromium", ("chromium", "stable"));
        check("/home/u/.config/microsoft-edge", ("edge", "stable"));
        check(
            "/home/u/.config/BraveSoftware/Brave-Browser",
            ("brave", "stable"),
        );
        check(
            "/Users/u/Library/Application Support/Google/Chrome Canary",
            ("chrome", "canary"),
        );
        check("/tmp/chrome-profile-x", ("chromium", "stable"));
    }
}
