//! A real remote-browser engine for process tests: browserless (`@browserless.io/browserless`,
//! installed pinned by scripts/test into `BROWSER_PILOT_BROWSERLESS_DIR`), listening on
//! 127.0.0.1 with a token and a small concurrency limit. It runs as uid `nobody` (through
//! `setpriv`, as the local-security tests impersonate a second uid) with its own private HOME and
//! TMPDIR, so the engine can read nothing of the Broker's and the Broker nothing of the engine's,
//! and each of its sessions launches Debian's chromium (through a private
//! `PLAYWRIGHT_BROWSERS_PATH` whose Chromium is a symlink to it; only the Chromium routes are
//! loaded, the engine refuses to start while any route's browser is missing). One instance
//! serves the whole test binary: started at first use, ended by its parent-death signal when the
//! binary exits; a test that kills and restarts engines starts its own (`OwnBrowserless`, ended
//! when dropped). A missing install is a loud failure naming the install command, never a skip.

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::chromium::chromium_path;

/// The pinned version scripts/test installs.
pub const BROWSERLESS_VERSION: &str = "2.42.0";

/// The engine's token; tests check it never shows up anywhere.
pub const BROWSERLESS_TOKEN: &str = "bl-Engine-9d2f41c7e0Token";

/// Sessions (browsers) the engine runs at once; more connections wait in its queue.
const CONCURRENT: u32 = 4;

/// uid and gid `nobody`.
const NOBODY: u32 = 65534;

/// How long the engine may take to listen (node loads a few hundred modules).
const START_WAIT: Duration = Duration::from_secs(60);

/// A running browserless instance.
pub struct Browserless {
    pub port: u16,
    /// The engine's stdout and stderr (its debug log), for failure messages.
    log: PathBuf,
    /// The engine's private HOME and TMPDIR (0700, uid nobody): where its browsers' files,
    /// downloads included, would be.
    pub private_dirs: [PathBuf; 2],
}

impl Browserless {
    /// The test binary's one instance, started at the first call.
    pub fn shared() -> &'static Browserless {
        static SHARED: OnceLock<Browserless> = OnceLock::new();
        SHARED.get_or_init(Browserless::start)
    }

    /// The CDP WebSocket URL of a new Chromium session, without the token query.
    pub fn ws_url(&self) -> String {
        format!("ws://127.0.0.1:{}/chromium", self.port)
    }

    /// The engine's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn start() -> Browserless {
        let scratch = prepare(scratch_dir(""));
        spawn(&scratch, free_port()).0
    }
}

/// An engine of one test's own, which it may kill and start again on the same port (with the
/// same private HOME and TMPDIR); killed when dropped.
pub struct OwnBrowserless {
    pub engine: Browserless,
    scratch: PathBuf,
    /// The engine's process (node, the parent of the browsers it launches) while it runs.
    pub pid: Option<u32>,
}

impl OwnBrowserless {
    pub fn start() -> OwnBrowserless {
        static NEXT: AtomicU32 = AtomicU32::new(1);
        let number = NEXT.fetch_add(1, Ordering::SeqCst);
        let scratch = prepare(scratch_dir(&format!("-{number}")));
        let (engine, pid) = spawn(&scratch, free_port());
        OwnBrowserless {
            engine,
            scratch,
            pid: Some(pid),
        }
    }

    /// SIGKILL to the engine and the browsers it launched, as a crashed engine host: its
    /// connections drop. Returns once nothing listens on its port.
    pub fn kill(&mut self) {
        let Some(pid) = self.pid.take() else { return };
        unsafe {
            libc::kill(-(pid as i32), libc::SIGKILL);
        }
        kill_browsers_of(&self.scratch);
        let started = Instant::now();
        while super::pid_alive(pid) || TcpStream::connect(("127.0.0.1", self.engine.port)).is_ok() {
            assert!(
                started.elapsed() < START_WAIT,
                "the killed engine still listens"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts the killed engine again on its port.
    pub fn restart(&mut self) {
        self.kill();
        let (engine, pid) = spawn(&self.scratch, self.engine.port);
        self.engine = engine;
        self.pid = Some(pid);
    }
}

impl Drop for OwnBrowserless {
    fn drop(&mut self) {
        if let Some(pid) = self.pid.take() {
            unsafe {
                libc::kill(-(pid as i32), libc::SIGKILL);
            }
        }
        kill_browsers_of(&self.scratch);
    }
}

/// SIGKILL to every process whose command line names `scratch`: the browsers an engine
/// launched there (each in a session of its own, so killing the engine's group misses them)
/// and their crash handlers. The rest of a browser's processes exit with it.
fn kill_browsers_of(scratch: &Path) {
    let needle = format!("{}/", scratch.display());
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmdline).contains(&needle) {
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// Makes an engine's scratch directory ready: private HOME and TMPDIR owned by nobody, the
/// Chromium symlink where its Playwright looks, and the routes it loads.
fn prepare(scratch: PathBuf) -> PathBuf {
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "the browserless engine runs as uid nobody through setpriv: run the tests as root"
    );
    let install = install_dir();
    let (home, tmp) = (scratch.join("home"), scratch.join("tmp"));
    for dir in [&home, &tmp] {
        std::fs::create_dir(dir).unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(dir, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    let browsers = scratch.join("browsers");
    let chrome = expected_chromium(&install, &browsers);
    std::fs::create_dir_all(chrome.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(chromium_path(), &chrome).unwrap();
    let routes = scratch.join("routes");
    std::fs::create_dir(&routes).unwrap();
    let built = install.join("node_modules/@browserless.io/browserless/build");
    for route in ["chromium", "management"] {
        std::os::unix::fs::symlink(built.join("routes").join(route), routes.join(route)).unwrap();
    }
    scratch
}

/// Starts the engine of `scratch` on `port` as uid nobody and waits until it listens; its pid.
fn spawn(scratch: &Path, port: u16) -> (Browserless, u32) {
    let install = install_dir();
    let built = install.join("node_modules/@browserless.io/browserless/build");
    let (home, tmp) = (scratch.join("home"), scratch.join("tmp"));
    let (browsers, routes) = (scratch.join("browsers"), scratch.join("routes"));
    let log = scratch.join("engine.log");
    let output = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .unwrap();
    let node = which("node");
    let mut command = Command::new("setpriv");
    command
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--pdeathsig=SIGTERM",
        ])
        .arg(node)
        .arg(built.join("index.js"))
        .current_dir(&install)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &home)
        .env("TMPDIR", &tmp)
        .env("PLAYWRIGHT_BROWSERS_PATH", &browsers)
        .env("ROUTES", &routes)
        .env("HOST", "127.0.0.1")
        .env("PORT", port.to_string())
        .env("TOKEN", BROWSERLESS_TOKEN)
        .env("CONCURRENT", CONCURRENT.to_string())
        .env("QUEUED", "4")
        // A session's longest life: the engine ends longer ones (its default is 30 s).
        .env("TIMEOUT", "600000")
        .env("DEBUG", "browserless*")
        .stdin(Stdio::null())
        .stdout(output.try_clone().unwrap())
        .stderr(output)
        // A group of its own, so that killing it reaches the browsers it launched too.
        .process_group(0);
    // The parent-death signal follows the thread that spawned the engine: a thread that
    // lives as long as the engine (it waits for it) rather than the test that came first.
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || match command.spawn() {
        Ok(mut child) => {
            let _ = sender.send(Ok(child.id()));
            let _ = child.wait();
        }
        Err(error) => {
            let _ = sender.send(Err(error));
        }
    });
    let pid = receiver
        .recv()
        .unwrap()
        .expect("setpriv (util-linux) starts the browserless engine");
    let engine = Browserless {
        port,
        log,
        private_dirs: [home, tmp],
    };
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            super::pid_alive(pid),
            "the browserless engine exited before listening:\n{}",
            engine.log()
        );
        assert!(
            started.elapsed() < START_WAIT,
            "the browserless engine did not listen within {START_WAIT:?}:\n{}",
            engine.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    (engine, pid)
}

/// `BROWSER_PILOT_BROWSERLESS_DIR`, holding the pinned install.
fn install_dir() -> PathBuf {
    let command = format!(
        "npm install --ignore-scripts --prefix DIR @browserless.io/browserless@{BROWSERLESS_VERSION} (DIR readable by uid nobody), then set BROWSER_PILOT_BROWSERLESS_DIR=DIR; scripts/test does both"
    );
    let dir = std::env::var_os("BROWSER_PILOT_BROWSERLESS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("the remote-browser tests need browserless: {command}"));
    let package = dir.join("node_modules/@browserless.io/browserless/package.json");
    let mut text = String::new();
    std::fs::File::open(&package)
        .and_then(|mut file| file.read_to_string(&mut text))
        .unwrap_or_else(|_| panic!("{} has no browserless: {command}", dir.display()));
    let version: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        version["version"],
        BROWSERLESS_VERSION,
        "{} holds another browserless: {command}",
        dir.display()
    );
    let readable = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "test",
            "-r",
        ])
        .arg(&package)
        .status()
        .expect("setpriv (util-linux)");
    assert!(
        readable.success(),
        "uid nobody cannot read {}: {command}",
        package.display()
    );
    dir
}

/// A fresh directory for one engine (mode 755: nobody enters it), under the system's temporary
/// directory, named by the test binary's pid and `suffix`; those of engines whose test binary
/// is gone are removed first.
fn scratch_dir(suffix: &str) -> PathBuf {
    const PREFIX: &str = "browser-pilot-browserless-";
    let base = std::env::temp_dir();
    if let Ok(entries) = std::fs::read_dir(&base) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(pid) = name
                .strip_prefix(PREFIX)
                .and_then(|p| p.split('-').next())
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            if !super::pid_alive(pid) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    let dir = base.join(format!("{PREFIX}{}{suffix}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// Where the engine's Playwright looks for its Chromium under `browsers`.
fn expected_chromium(install: &Path, browsers: &Path) -> PathBuf {
    let output = Command::new(which("node"))
        .args(["-p", "require('playwright-core').chromium.executablePath()"])
        .current_dir(install)
        .env("PLAYWRIGHT_BROWSERS_PATH", browsers)
        .output()
        .expect("node runs");
    assert!(
        output.status.success(),
        "the browserless install has no playwright-core: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let path = PathBuf::from(String::from_utf8(output.stdout).unwrap().trim());
    assert!(path.starts_with(browsers), "{}", path.display());
    path
}

/// An absolute path of `program` from PATH.
fn which(program: &str) -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("{program} is required: sudo apt-get install -y nodejs npm"))
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
