//! Process tests of the local-user and file-system boundaries (docs/security.md): each test
//! performs an attack against the built executable and shows it refused or contained, with
//! other bridges and Workspaces unaffected.
//!
//! - Export never writes through a link it did not make: a planted file or symlink at the old
//!   predictable temporary name, and a symlink, dangling symlink, FIFO, socket, device or
//!   directory at the final name, with and without `overwrite`, in a shared sticky directory.
//! - Imports cannot hang: a FIFO or device as the source, and a FIFO swapped in while imports
//!   run, each fail that one call while the same Connection keeps answering.
//! - The bridge and `bp` authenticate their Broker: a listener of a second uid (nobody, 65534,
//!   through `setpriv`) behind an endpoint file of that uid, and behind one of our own uid.
//! - The home: another uid's directory, a symlink of another uid, a shared sticky directory
//!   and `/tmp` itself are refused and left unchanged; our own 0775 directory is tightened.
//! - Client path mistakes (NUL, overlong, symlink loops) are `invalid_params`, special files
//!   `path_not_allowed`; id errors say what was wrong; the unresponsive-Broker remediation
//!   names a pid only when it is verifiably this user's Broker.
//! - A full disk under the home is named as such (`disk_full`, free space), never blamed on a
//!   Broker.
//!
//! The tests run as root (the second uid needs it); a non-root run fails loudly.

use crate::support;

use std::ffi::CString;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use support::rig::{Agent, Rig};
use support::*;

/// The second local user the attacks run as.
const NOBODY: u32 = 65534;

/// A generous bound for anything a helper process must get done.
const WAIT: Duration = Duration::from_secs(20);

fn require_root() {
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "these tests impersonate a second uid and must run as root"
    );
}

fn mkfifo(path: &Path) {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(
        unsafe { libc::mkfifo(c.as_ptr(), 0o644) },
        0,
        "mkfifo {path:?}"
    );
}

/// A character device with the numbers of /dev/null, in a test directory.
fn mknod_null(path: &Path) {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let rc = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    assert_eq!(rc, 0, "mknod {path:?}");
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn full_mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().mode() & 0o7777
}

/// A directory like `/tmp`: world-writable with the sticky bit.
fn sticky_dir(parent: &Path, name: &str) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir(&dir).unwrap();
    set_mode(&dir, 0o1777);
    dir
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A bridge on an arbitrary `BROWSER_PILOT_HOME`.
fn bridge_at(home: &Path) -> Bridge {
    let mut command = Command::new(BIN);
    command
        .args(["bridge", "--stdio"])
        .env("BROWSER_PILOT_HOME", home)
        .env_remove("BROWSER_PILOT_DISCOVERY_DIRS");
    Bridge::spawn(command)
}

/// `bp status` on an arbitrary home: (exit code, stderr).
fn bp_status_at(home: &Path) -> (i32, String) {
    let output = Command::new(BP)
        .arg("status")
        .env("BROWSER_PILOT_HOME", home)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// One host on a bridge: a Workspace and a Lease, and the `artifacts/*` calls.
struct Host {
    bridge: Bridge,
    workspace_id: Value,
    lease_id: Value,
}

impl Host {
    fn new(home: &TestHome, client: &str) -> Host {
        let mut bridge = home.spawn_bridge();
        bridge.initialize(client, "i1");
        Host::on(bridge)
    }

    fn on(mut bridge: Bridge) -> Host {
        let ws = bridge.ok("workspaces/create", json!({}));
        let workspace_id = ws["workspace"]["id"].clone();
        let lease = bridge.ok(
            "leases/create",
            json!({"workspaceId": workspace_id, "ttlMs": TEST_LEASE_TTL_MS}),
        );
        Host {
            bridge,
            workspace_id,
            lease_id: lease["lease"]["id"].clone(),
        }
    }

    fn from_agent(agent: Agent) -> Host {
        Host {
            bridge: agent.bridge,
            workspace_id: agent.workspace_id,
            lease_id: agent.lease_id,
        }
    }

    fn result(response: Value) -> Result<Value, (String, Value)> {
        match (response.get("result"), response.get("error")) {
            (Some(result), _) => Ok(result.clone()),
            (None, Some(error)) => Err((
                error["data"]["code"].as_str().unwrap_or("").to_owned(),
                error.clone(),
            )),
            _ => panic!("neither result nor error: {response}"),
        }
    }

    fn import(&mut self, path: &str) -> Result<Value, (String, Value)> {
        let params =
            json!({"workspaceId": self.workspace_id, "leaseId": self.lease_id, "path": path});
        Host::result(self.bridge.call("artifacts/import", params))
    }

    fn import_file(&mut self, path: &Path) -> Value {
        self.import(path.to_str().unwrap())
            .unwrap_or_else(|e| panic!("import {path:?}: {e:?}"))["artifact"]
            .clone()
    }

    fn export(
        &mut self,
        artifact_id: &Value,
        path: &str,
        overwrite: bool,
    ) -> Result<Value, (String, Value)> {
        let params = json!({"workspaceId": self.workspace_id, "leaseId": self.lease_id,
            "artifactId": artifact_id, "path": path, "overwrite": overwrite});
        Host::result(self.bridge.call("artifacts/export", params))
    }

    fn export_to(&mut self, artifact_id: &Value, path: &Path, overwrite: bool) -> Value {
        self.export(artifact_id, path.to_str().unwrap(), overwrite)
            .unwrap_or_else(|e| panic!("export to {path:?}: {e:?}"))
    }

    fn export_err(&mut self, artifact_id: &Value, path: &Path, overwrite: bool) -> (String, Value) {
        match self.export(artifact_id, path.to_str().unwrap(), overwrite) {
            Ok(result) => panic!("export to {path:?} succeeded: {result}"),
            Err(error) => error,
        }
    }

    /// The same Connection still answers an ordinary call.
    fn assert_alive(&mut self) {
        let got = self
            .bridge
            .ok("workspaces/get", json!({"workspaceId": self.workspace_id}));
        assert_eq!(got["workspace"]["id"], self.workspace_id);
    }
}

/// Asserts a refusal: the code, not retryable, and `context.reason` when given.
fn assert_refused(error: &(String, Value), code: &str, reason: Option<&str>) {
    assert_eq!(error.0, code, "{}", error.1);
    assert_eq!(error.1["data"]["retryable"], false, "{}", error.1);
    if let Some(reason) = reason {
        assert_eq!(error.1["data"]["context"]["reason"], reason, "{}", error.1);
    }
}

#[test]
fn export_never_writes_through_a_planted_temp_name() {
    require_root();
    let rig = Rig::start();
    let mut agent = Agent::new(&rig, "com.example.exporter");
    agent.connect();
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/fixture/plain")}),
    );
    let target = opened["targetId"].clone();
    let shot = agent.tool("browser.capture", Some(&target), json!({}));
    let screenshot = shot["artifact"].clone();
    let mut host = Host::from_agent(agent);
    let broker_pid = rig.home.broker_pid().expect("a running Broker");

    let outside = tempfile::tempdir().unwrap();
    set_mode(outside.path(), 0o755);
    let shared = sticky_dir(outside.path(), "shared");
    let victim = outside.path().join("victim.txt");
    std::fs::write(&victim, b"precious").unwrap();

    // The old temporary names were `.NAME.tmp-<broker pid>`: plant a symlink to the victim
    // there for one export, and a file of another user for a second one.
    let planted_link = shared.join(format!(".shot.png.tmp-{broker_pid}"));
    std::os::unix::fs::symlink(&victim, &planted_link).unwrap();
    std::os::unix::fs::lchown(&planted_link, Some(NOBODY), Some(NOBODY)).unwrap();
    let planted_file = shared.join(format!(".other.png.tmp-{broker_pid}"));
    std::fs::write(&planted_file, b"planted").unwrap();
    std::os::unix::fs::chown(&planted_file, Some(NOBODY), Some(NOBODY)).unwrap();

    let exported = host.export_to(&screenshot["id"], &shared.join("shot.png"), false);
    assert_eq!(exported["byteLength"], screenshot["byteLength"]);
    host.export_to(&screenshot["id"], &shared.join("other.png"), false);
    // And with overwrite, over our own regular file, with the link still planted.
    host.export_to(&screenshot["id"], &shared.join("shot.png"), true);

    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert!(
        std::fs::symlink_metadata(&planted_link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "a planted link is never followed, replaced or removed"
    );
    assert_eq!(std::fs::read(&planted_file).unwrap(), b"planted");
    for name in ["shot.png", "other.png"] {
        let path = shared.join(name);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{name}");
        assert_eq!(
            bytes.len() as u64,
            screenshot["byteLength"].as_u64().unwrap()
        );
        assert_eq!(file_mode(&path), 0o600, "{name}");
    }
    assert_eq!(
        names(&shared),
        vec![
            format!(".other.png.tmp-{broker_pid}"),
            format!(".shot.png.tmp-{broker_pid}"),
            "other.png".to_owned(),
            "shot.png".to_owned(),
        ],
        "no temporary file of ours stays behind"
    );

    // The browser side of the same Workspace is untouched by all of this.
    let again = host.bridge.call(
        "tools/call",
        json!({"name": "browser.capture", "arguments": {}, "workspaceId": host.workspace_id,
            "leaseId": host.lease_id, "targetId": target}),
    );
    assert_eq!(again["result"]["command"]["status"], "completed", "{again}");
}

#[test]
fn export_replaces_only_a_regular_file_at_the_final_name() {
    require_root();
    let home = TestHome::new();
    let mut host = Host::new(&home, "com.example.a");
    let mut other = Host::new(&home, "com.example.b");
    let outside = tempfile::tempdir().unwrap();
    set_mode(outside.path(), 0o755);
    let shared = sticky_dir(outside.path(), "shared");
    let source = outside.path().join("source.txt");
    std::fs::write(&source, b"artifact bytes").unwrap();
    let artifact = host.import_file(&source)["id"].clone();
    let victim = outside.path().join("victim.txt");
    std::fs::write(&victim, b"precious").unwrap();

    // A symlink of another user at the final name, to a file of ours.
    let link = shared.join("link.txt");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(NOBODY), Some(NOBODY)).unwrap();
    assert_refused(
        &host.export_err(&artifact, &link, false),
        "export_exists",
        None,
    );
    assert_refused(
        &host.export_err(&artifact, &link, true),
        "path_not_allowed",
        Some("the destination is not a regular file"),
    );
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );

    // A dangling symlink: following it would create a file wherever it points.
    let would_be = outside.path().join("created-through-link.txt");
    let dangling = shared.join("dangling.txt");
    std::os::unix::fs::symlink(&would_be, &dangling).unwrap();
    assert_refused(
        &host.export_err(&artifact, &dangling, false),
        "export_exists",
        None,
    );
    assert_refused(
        &host.export_err(&artifact, &dangling, true),
        "path_not_allowed",
        Some("the destination is not a regular file"),
    );
    assert!(!would_be.exists(), "nothing was created through the link");

    // A FIFO: opening it for writing would block the export forever.
    let fifo = shared.join("fifo.txt");
    mkfifo(&fifo);
    assert_refused(
        &host.export_err(&artifact, &fifo, false),
        "export_exists",
        None,
    );
    assert_refused(
        &host.export_err(&artifact, &fifo, true),
        "path_not_allowed",
        Some("the destination is not a regular file"),
    );
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );

    // A socket and a device.
    let socket = shared.join("socket.txt");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let device = shared.join("null.txt");
    mknod_null(&device);
    for special in [&socket, &device] {
        assert_refused(
            &host.export_err(&artifact, special, true),
            "path_not_allowed",
            Some("the destination is not a regular file"),
        );
    }
    assert!(
        std::fs::symlink_metadata(&socket)
            .unwrap()
            .file_type()
            .is_socket()
    );
    assert!(
        std::fs::symlink_metadata(&device)
            .unwrap()
            .file_type()
            .is_char_device()
    );

    // A directory, with and without overwrite.
    let dir = shared.join("dir.txt");
    std::fs::create_dir(&dir).unwrap();
    for overwrite in [false, true] {
        assert_refused(
            &host.export_err(&artifact, &dir, overwrite),
            "path_not_allowed",
            Some("the path is a directory"),
        );
    }

    // A regular file of another user is replaced (as a name: its inode is left alone).
    let theirs = shared.join("theirs.txt");
    std::fs::write(&theirs, b"old").unwrap();
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    let held = std::fs::File::open(&theirs).unwrap();
    assert_refused(
        &host.export_err(&artifact, &theirs, false),
        "export_exists",
        None,
    );
    host.export_to(&artifact, &theirs, true);
    assert_eq!(std::fs::read(&theirs).unwrap(), b"artifact bytes");
    assert_eq!(std::fs::metadata(&theirs).unwrap().uid(), 0);
    let mut old = String::new();
    std::io::Read::read_to_string(&mut &held, &mut old).unwrap();
    assert_eq!(old, "old", "the replaced file was not written into");

    // Nothing of ours is left in the shared directory, and both hosts carry on.
    assert_eq!(
        names(&shared),
        [
            "dangling.txt",
            "dir.txt",
            "fifo.txt",
            "link.txt",
            "null.txt",
            "socket.txt",
            "theirs.txt"
        ]
    );
    host.assert_alive();
    let mine = other.import_file(&source)["id"].clone();
    other.export_to(&mine, &shared.join("b.txt"), false);
    assert_eq!(
        std::fs::read(shared.join("b.txt")).unwrap(),
        b"artifact bytes"
    );
}

#[test]
fn imports_of_fifos_and_devices_fail_fast_and_the_connection_answers() {
    require_root();
    let home = TestHome::new();
    let mut host = Host::new(&home, "com.example.a");
    let mut other = Host::new(&home, "com.example.b");
    let outside = tempfile::tempdir().unwrap();
    let file = outside.path().join("real.txt");
    std::fs::write(&file, b"real bytes").unwrap();

    // A FIFO without a writer: a blocking open would never return.
    let fifo = outside.path().join("pipe.txt");
    mkfifo(&fifo);
    let refused = host.import(fifo.to_str().unwrap()).unwrap_err();
    assert_refused(
        &refused,
        "path_not_allowed",
        Some("the path is not a regular file"),
    );
    host.assert_alive();
    // Devices: one that never ends, one that is empty.
    for device in ["/dev/zero", "/dev/null"] {
        let refused = host.import(device).unwrap_err();
        assert_refused(
            &refused,
            "path_not_allowed",
            Some("the path is not a regular file"),
        );
    }
    host.assert_alive();

    // A FIFO swapped in and out while imports run: whichever the Broker meets, the call
    // answers (a copy of the file, or a refusal) and the Connection keeps answering.
    let source = outside.path().join("source.txt");
    std::fs::write(&source, b"real bytes").unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (dir, source, stop) = (outside.path().to_owned(), source.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let (staged_file, staged_fifo) = (dir.join("staged-file"), dir.join("staged-fifo"));
                std::fs::write(&staged_file, b"real bytes").unwrap();
                std::fs::rename(&staged_file, &source).unwrap();
                mkfifo(&staged_fifo);
                std::fs::rename(&staged_fifo, &source).unwrap();
                swaps += 1;
            }
            swaps
        })
    };
    let (mut copied, mut refused) = (0, 0);
    for _ in 0..60 {
        match host.import(source.to_str().unwrap()) {
            Ok(result) => {
                assert_eq!(result["artifact"]["byteLength"], 10, "{result}");
                copied += 1;
            }
            Err(error) => {
                assert_refused(&error, "path_not_allowed", None);
                refused += 1;
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 0 && copied + refused == 60, "{swaps} swaps");
    host.assert_alive();
    let fine = host.import_file(&file);
    assert_eq!(fine["byteLength"], 10);
    other.import_file(&file);
    other.assert_alive();

    // The Broker still exits promptly on SIGTERM: no import holds it.
    drop(host);
    drop(other);
    let pid = home.broker_pid().unwrap();
    unsafe_kill(pid, "TERM");
    assert!(wait_until(WAIT, || !pid_alive(pid)), "the Broker exits");
}

#[test]
fn client_path_mistakes_are_invalid_params_not_internal_errors() {
    require_root();
    let home = TestHome::new();
    let mut host = Host::new(&home, "com.example.a");
    let outside = tempfile::tempdir().unwrap();
    let file = outside.path().join("real.txt");
    std::fs::write(&file, b"real bytes").unwrap();
    let artifact = host.import_file(&file)["id"].clone();
    let base = outside.path().to_str().unwrap().to_owned();

    let nul = format!("{base}/a\u{0}b.txt");
    let long_name = format!("{base}/{}", "n".repeat(300));
    let long_path = format!("{base}/{}", "d/".repeat(2100));
    let (loop_a, loop_b) = (outside.path().join("loop-a"), outside.path().join("loop-b"));
    std::os::unix::fs::symlink(&loop_b, &loop_a).unwrap();
    std::os::unix::fs::symlink(&loop_a, &loop_b).unwrap();
    let looped = format!("{}/inside.txt", loop_a.display());
    let cases = [
        (nul.as_str(), "the path contains a NUL character"),
        (
            long_name.as_str(),
            "a path component is longer than 255 bytes",
        ),
        (long_path.as_str(), "the path is longer than 4095 bytes"),
        (
            looped.as_str(),
            "the path has too many levels of symbolic links",
        ),
    ];
    for (path, reason) in cases {
        let import = host.import(path).unwrap_err();
        assert_refused(&import, "invalid_params", Some(reason));
        assert_eq!(import.1["data"]["context"]["path"], "path");
        let export = host.export(&artifact, path, true).unwrap_err();
        assert_refused(&export, "invalid_params", Some(reason));
    }
    // The longest legal name is no mistake: it imports and exports like any other.
    let longest = outside.path().join("n".repeat(255));
    std::fs::write(&longest, b"long name").unwrap();
    let imported = host.import_file(&longest);
    assert_eq!(imported["fileName"].as_str().unwrap().len(), 255);
    let exported = outside.path().join("e".repeat(255));
    host.export_to(&imported["id"], &exported, false);
    assert_eq!(std::fs::read(&exported).unwrap(), b"long name");

    // Special files and impossible parents are refusals, not retryable failures.
    let parent_is_file = file.join("child.txt");
    let export = host
        .export(&artifact, parent_is_file.to_str().unwrap(), false)
        .unwrap_err();
    assert_refused(
        &export,
        "path_not_allowed",
        Some("the parent is not a directory"),
    );
    let import = host.import(parent_is_file.to_str().unwrap()).unwrap_err();
    assert_refused(
        &import,
        "path_not_allowed",
        Some("a component of the path is not a directory"),
    );
    // A pseudo-file that is "regular" by type but fails every read: refused for what it is.
    let import = host.import("/proc/self/mem").unwrap_err();
    assert_refused(
        &import,
        "path_not_allowed",
        Some("the path is a kernel pseudo-file (/proc, /sys, ...), not stored data"),
    );
    let import = host.import(&format!("{}/", file.display())).unwrap_err();
    assert_eq!(import.1["data"]["retryable"], false, "{}", import.1);
    host.assert_alive();
}

/// A listener of the second uid on a Unix socket: it accepts, counts the bytes each peer sends
/// until the peer closes, and appends the count to a log.
const FOREIGN_LISTENER: &str = r#"
import os, socket, sys
path, log = sys.argv[1], sys.argv[2]
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(path)
server.listen(16)
open(log + ".ready", "w").close()
while True:
    peer, _ = server.accept()
    peer.settimeout(60)
    received = 0
    try:
        while True:
            data = peer.recv(65536)
            if not data:
                break
            received += len(data)
    except OSError:
        pass
    with open(log, "a") as out:
        out.write(f"{received}\n")
    peer.close()
"#;

/// The fake listener, run as uid/gid 65534 in a directory of its own.
struct ForeignListener {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
}

impl ForeignListener {
    /// Creates `dir` for the second uid and listens on `dir/socket_name`.
    fn start(dir: &Path, socket_name: &str) -> ForeignListener {
        std::fs::create_dir(dir).unwrap();
        set_mode(dir, 0o755);
        std::os::unix::fs::chown(dir, Some(NOBODY), Some(NOBODY)).unwrap();
        let (socket, log) = (dir.join(socket_name), dir.join("received.log"));
        let child = Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "/usr/bin/python3",
                "-c",
                FOREIGN_LISTENER,
            ])
            .arg(&socket)
            .arg(&log)
            .stdin(Stdio::null())
            .spawn()
            .expect("setpriv and /usr/bin/python3 run the second uid's listener");
        let ready = dir.join("received.log.ready");
        assert!(wait_until(WAIT, || ready.exists()), "the listener is ready");
        assert_eq!(std::fs::metadata(&socket).unwrap().uid(), NOBODY);
        ForeignListener { child, socket, log }
    }

    /// Connects and closes at once, as a marker: once its `0` is logged, every connection
    /// made before it has been logged too (the listener serves one at a time).
    fn probe(&self, socket: &Path) {
        let before = self.counts().len();
        drop(std::os::unix::net::UnixStream::connect(socket).unwrap());
        assert!(
            wait_until(WAIT, || self.counts().len() > before),
            "the probe was logged"
        );
    }

    fn counts(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for ForeignListener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn bridge_and_bp_refuse_a_broker_of_another_uid() {
    require_root();
    // A host of ours, on its own home, before and after: never disturbed.
    let ours = TestHome::new();
    let mut bystander = Host::new(&ours, "com.example.bystander");

    let staging = tempfile::tempdir().unwrap();
    set_mode(staging.path(), 0o755);

    // 0. The other uid pre-created the home and listens on its endpoint: the home is refused
    //    before the endpoint is even looked at.
    let planted = staging.path().join("pre-created-home");
    let squatter = ForeignListener::start(&planted, "broker.sock");
    let mut bridge = bridge_at(&planted);
    let (code, error) = bridge.err(
        "initialize",
        initialize_params("com.example.a", "i1", (1, 1)),
    );
    assert_eq!(code, "home_not_allowed", "{error}");
    assert_eq!(error["data"]["context"]["reason"], "foreign_owner");
    drop(bridge);
    let (exit, stderr) = bp_status_at(&planted);
    assert_eq!(exit, 1, "{stderr}");
    squatter.probe(&planted.join("broker.sock"));
    assert_eq!(squatter.counts(), ["0"], "only the probe ever connected");
    drop(squatter);

    let home = TestHome::new();
    let listener = ForeignListener::start(&staging.path().join("nobody"), "fake.sock");
    let endpoint = home.path().join("broker.sock");
    std::fs::rename(&listener.socket, &endpoint).unwrap();

    // 1. The endpoint file is the other uid's: refused before connecting.
    let mut bridge = home.spawn_bridge();
    let (code, error) = bridge.err(
        "initialize",
        initialize_params("com.example.a", "i1", (1, 1)),
    );
    assert_eq!(code, "broker_untrusted", "{error}");
    assert_eq!(error["data"]["retryable"], false);
    assert_eq!(error["data"]["context"]["reason"], "endpoint_owner");
    assert_eq!(
        error["data"]["remediation"]["action"],
        "remove_foreign_endpoint"
    );
    assert!(!error.to_string().contains(home.path().to_str().unwrap()));
    drop(bridge);
    let (exit, stderr) = bp_status_at(home.path());
    assert_eq!(exit, 1, "{stderr}");
    assert!(stderr.contains("refusing"), "{stderr}");

    // 2. The endpoint file is ours, the listening process is not: refused after reading its
    //    credentials, before sending a byte.
    std::os::unix::fs::chown(&endpoint, Some(0), Some(0)).unwrap();
    let mut bridge = home.spawn_bridge();
    let (code, error) = bridge.err(
        "initialize",
        initialize_params("com.example.a", "i1", (1, 1)),
    );
    assert_eq!(code, "broker_untrusted", "{error}");
    assert_eq!(error["data"]["context"]["reason"], "peer_uid");
    let (exit, stderr) = bp_status_at(home.path());
    assert_eq!(exit, 1, "{stderr}");
    assert!(stderr.contains("uid 65534"), "{stderr}");
    drop(bridge);
    // Exactly the two peer-checked connections reached the listener, each with zero bytes:
    // nothing was ever sent to it, and case 1 never even connected.
    assert!(
        wait_until(WAIT, || listener.counts().len() >= 2),
        "{:?}",
        listener.counts()
    );
    assert_eq!(listener.counts(), ["0", "0"]);
    // The foreign endpoint was neither removed nor replaced, and no Broker was started.
    assert!(
        std::fs::symlink_metadata(&endpoint)
            .unwrap()
            .file_type()
            .is_socket()
    );
    assert!(home.locator().is_none());

    bystander.assert_alive();
    let mut later = Host::new(&ours, "com.example.later");
    later.assert_alive();
}

#[test]
fn homes_of_other_users_and_shared_directories_are_refused_untouched() {
    require_root();
    let outside = tempfile::tempdir().unwrap();

    // `bp` only reads: it refuses what it must not talk to, and reports "not running" (3) for
    // a directory it would merely not tighten.
    let refused_with_bp = |home: &Path, reason: &str, bp_exit: i32| {
        let mut bridge = bridge_at(home);
        let (code, error) = bridge.err(
            "initialize",
            initialize_params("com.example.a", "i1", (1, 1)),
        );
        assert_eq!(code, "home_not_allowed", "{home:?}: {error}");
        assert_eq!(error["data"]["retryable"], false);
        assert_eq!(error["data"]["context"]["reason"], reason, "{home:?}");
        assert_eq!(
            error["data"]["remediation"]["action"],
            "choose_private_home"
        );
        let (exit, stderr) = bp_status_at(home);
        assert_eq!(exit, bp_exit, "{home:?}: {stderr}");
    };
    let refused = |home: &Path, reason: &str| refused_with_bp(home, reason, 1);

    // Another uid's directory.
    let foreign = outside.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    set_mode(&foreign, 0o755);
    std::os::unix::fs::chown(&foreign, Some(NOBODY), Some(NOBODY)).unwrap();
    refused(&foreign, "foreign_owner");
    assert_eq!(full_mode(&foreign), 0o755);
    assert_eq!(std::fs::metadata(&foreign).unwrap().uid(), NOBODY);
    assert!(names(&foreign).is_empty(), "nothing was created inside");

    // A symlink of another uid pointing at a directory of ours.
    let mine = outside.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    set_mode(&mine, 0o755);
    let link = outside.path().join("link-home");
    std::os::unix::fs::symlink(&mine, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(NOBODY), Some(NOBODY)).unwrap();
    refused(&link, "foreign_owner");
    assert_eq!(
        full_mode(&mine),
        0o755,
        "the link's target was not chmod'ed"
    );
    assert!(names(&mine).is_empty());

    // A shared sticky directory of our own uid.
    let shared = sticky_dir(outside.path(), "shared");
    refused(&shared, "shared_directory");
    // The managed browser's profile would live there too: refused as well.
    let launch = Command::new(BIN)
        .args(["browser", "launch", "--headless"])
        .env("BROWSER_PILOT_HOME", &shared)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(launch.status.code(), Some(2), "{launch:?}");
    assert_eq!(full_mode(&shared), 0o1777);
    assert!(names(&shared).is_empty());

    // And /tmp itself.
    let tmp = Path::new("/tmp");
    let before = full_mode(tmp);
    assert_eq!(before & 0o1000, 0o1000, "/tmp is a sticky directory here");
    let lock_existed = tmp.join("startup.lock").exists();
    let socket_existed = tmp.join("broker.sock").exists();
    refused(tmp, "shared_directory");
    assert_eq!(full_mode(tmp), before, "/tmp's mode is unchanged");
    assert_eq!(tmp.join("startup.lock").exists(), lock_existed);
    assert_eq!(tmp.join("broker.sock").exists(), socket_existed);

    // Our own directory, open to others and full of other files (think `$HOME` or `/`):
    // tightening it would change far more than a Broker home.
    let personal = outside.path().join("personal");
    std::fs::create_dir(&personal).unwrap();
    std::fs::write(personal.join("notes.txt"), b"mine").unwrap();
    set_mode(&personal, 0o755);
    refused_with_bp(&personal, "not_dedicated", 3);
    assert_eq!(full_mode(&personal), 0o755);
    assert_eq!(names(&personal), ["notes.txt"]);

    // A file is no home either.
    let file = outside.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    refused(&file, "not_a_directory");

    // Our own directory created 0775 (a host under umask 002) is tightened and used.
    let loose = TestHome::new();
    set_mode(loose.path(), 0o775);
    let mut host = Host::new(&loose, "com.example.a");
    host.assert_alive();
    assert_eq!(full_mode(loose.path()), 0o700);
}

#[test]
fn unresponsive_broker_remediation_names_only_a_verified_pid() {
    require_root();
    // A locator naming a live process of ours that is no Broker, and an endpoint that accepts
    // and never answers.
    let home = TestHome::new();
    let mut stranger = Command::new("sleep").arg("60").spawn().unwrap();
    let locator = json!({"brokerId": "broker:stuck", "pid": stranger.id(), "ipc": 1,
        "executable": {"version": "0", "installationId": "x"}, "protocol": {}, "startedAt": 0});
    std::fs::write(home.path().join("broker-locator.json"), locator.to_string()).unwrap();
    let listener = std::os::unix::net::UnixListener::bind(home.path().join("broker.sock")).unwrap();
    let mut bridge = home.spawn_bridge();
    let (code, error) = bridge.err(
        "initialize",
        initialize_params("com.example.a", "i1", (1, 1)),
    );
    assert_eq!(code, "browser_disconnected", "{error}");
    assert_eq!(
        error["data"]["remediation"]["action"],
        "restart_unresponsive_broker"
    );
    assert!(error["data"]["context"].get("pid").is_none(), "{error}");
    assert!(
        !error.to_string().contains(&stranger.id().to_string()),
        "{error}"
    );
    drop(bridge);
    drop(listener);
    let _ = stranger.kill();
    let _ = stranger.wait();

    // A real Broker of this home, stopped: verified, so its pid is named.
    let home = TestHome::new();
    let mut first = Host::new(&home, "com.example.a");
    let pid = home.broker_pid().unwrap();
    stop_process(pid);
    let mut bridge = home.spawn_bridge();
    let (code, error) = bridge.err(
        "initialize",
        initialize_params("com.example.b", "i1", (1, 1)),
    );
    unsafe_kill(pid, "CONT");
    assert_eq!(code, "browser_disconnected", "{error}");
    assert_eq!(error["data"]["context"]["pid"], pid, "{error}");
    assert!(
        error["data"]["remediation"]["message"]
            .as_str()
            .unwrap()
            .contains(&pid.to_string())
    );
    first.assert_alive();
}

#[test]
fn id_errors_say_what_was_wrong() {
    let home = TestHome::new();
    let cases = [
        ("1.0", "without a decimal point or exponent"),
        ("1e2", "without a decimal point or exponent"),
        ("-0", "negative zero"),
        ("1.5", "not a fraction"),
    ];
    for (id, says) in cases {
        let mut bridge = home.spawn_bridge();
        bridge.send_raw(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/list\"}}\n").as_bytes(),
        );
        let response = bridge.next_message(RESPONSE_TIMEOUT).expect("an answer");
        assert_eq!(response["id"], Value::Null, "{response}");
        assert_eq!(response["error"]["data"]["code"], "invalid_request");
        let message = response["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{id}: {message}");
        if id != "1.5" {
            assert!(!message.contains("fraction"), "{id}: {message}");
        }
        assert_eq!(bridge.wait_exit(RESPONSE_TIMEOUT), Some(2), "{id}");
    }
}

/// Unmounts a test's file system when dropped (lazily, so a process still inside cannot stop it).
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_is_named_and_no_broker_is_blamed() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("small");
    std::fs::create_dir(&mount).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs"])
        .arg(&mount)
        .status()
        .expect("mount runs");
    assert!(mounted.success(), "mounting a small tmpfs failed");
    let _mounted = Mounted(mount.clone());
    let mut fill = std::fs::File::create(mount.join("fill")).unwrap();
    while std::io::Write::write_all(&mut fill, &[0; 4096]).is_ok() {}
    drop(fill);

    // The bridge starts a Broker in a home on the full file system; the Broker dies there.
    let home = mount.join("home");
    let mut bridge = bridge_at(&home);
    let (code, error) = bridge.err(
        "initialize",
        initialize_params("com.example.full", "i1", (1, 1)),
    );
    assert_eq!(code, "broker_unavailable", "{error}");
    let data = &error["data"];
    assert_eq!(data["context"]["reason"], "disk_full", "{error}");
    assert_eq!(data["remediation"]["action"], "free_resources", "{error}");
    let remedy = data["remediation"]["message"].as_str().unwrap();
    assert!(remedy.contains("Free disk space"), "{error}");
    assert!(
        !remedy.contains("Stop"),
        "a full disk is never blamed on a Broker: {error}"
    );

    // With room again, the same home starts its Broker and serves.
    std::fs::remove_file(mount.join("fill")).unwrap();
    let mut bridge = bridge_at(&home);
    bridge.initialize("com.example.full", "i2");
    bridge.ok("workspaces/create", json!({}));
}
