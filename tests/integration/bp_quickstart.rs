//! Process tests of `scripts/quickstart` on a machine where Chromium is not found: a `PATH` shim
//! (stand-ins for `apt-get`, which records its arguments, `id`, and `cargo`, which records its
//! arguments instead of building again inside `cargo test`) and a `BROWSER_PILOT_CHROMIUM` that
//! names a missing file. Not root: the install command is printed and nothing else happens. Root:
//! the install runs (the stand-in puts the real Chromium where `BROWSER_PILOT_CHROMIUM` points),
//! then the real session runs on the managed headless Chromium with this build's `bp`.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use support::chromium::chromium_path;
use support::{BP, TestHome};

/// A shim directory with stand-ins that log their arguments to `<name>.log` beside them.
fn shim(dir: &Path, uid: u32, chromium_target: &Path) {
    let write = |name: &str, body: String| {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    let log = |name: &str| dir.join(format!("{name}.log")).display().to_string();
    write(
        "apt-get",
        format!(
            "echo \"$*\" >> '{}'\ncase \"$*\" in *install*chromium*) ln -sf '{}' \"$BROWSER_PILOT_CHROMIUM\" ;; esac\n",
            log("apt-get"),
            chromium_target.display()
        ),
    );
    write("cargo", format!("echo \"$*\" >> '{}'\n", log("cargo")));
    write(
        "id",
        format!("if [ \"$1\" = -u ]; then echo {uid}; else exec /usr/bin/id \"$@\"; fi\n"),
    );
}

fn logged(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default()
}

fn quickstart(home: &TestHome, shim_dir: &Path, chromium: &Path) -> (i32, String, String) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    // This build's binaries: <target>/debug/bp.
    let target_dir: PathBuf = Path::new(BP)
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        shim_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = home
        .command(repo.join("scripts/quickstart").to_str().unwrap())
        .env("PATH", path)
        .env("BROWSER_PILOT_CHROMIUM", chromium)
        .env("BROWSER_PILOT_QUICKSTART_PROFILE", "dev")
        .env("CARGO_TARGET_DIR", &target_dir)
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .output()
        .expect("run scripts/quickstart");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn quickstart_without_chromium_prints_the_install_command_unless_root() {
    let home = TestHome::new();
    let shim_dir = tempfile::tempdir().unwrap();
    let missing = shim_dir.path().join("no-chromium-here");
    shim(shim_dir.path(), 1000, &chromium_path());
    let (code, stdout, stderr) = quickstart(&home, shim_dir.path(), &missing);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("Chromium is required: sudo apt-get install -y chromium"),
        "{stderr}"
    );
    assert_eq!(
        logged(shim_dir.path(), "apt-get"),
        "",
        "apt-get ran as non-root"
    );
    assert_eq!(
        logged(shim_dir.path(), "cargo"),
        "",
        "built without Chromium"
    );
    assert!(!missing.exists());
    assert!(home.broker_pid().is_none(), "no Broker started");
}

#[test]
fn quickstart_as_root_installs_chromium_then_runs_a_real_session() {
    let home = TestHome::new();
    let shim_dir = tempfile::tempdir().unwrap();
    let installed = shim_dir.path().join("chromium");
    shim(shim_dir.path(), 0, &chromium_path());
    let (code, stdout, stderr) = quickstart(&home, shim_dir.path(), &installed);
    // Going on with bp, then finishing as the last lines say; whatever happened, this leaves no
    // browser or Broker behind.
    let bp = |args: &[&str]| {
        let output = home
            .command(BP)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    };
    let (observed, observation) = bp(&["observe"]);
    let (relaunched, launch) = bp(&["launch", "--headless"]);
    let (stopped, stop) = bp(&["stop"]);
    let (disconnected, _) = bp(&["disconnect"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(
        logged(shim_dir.path(), "apt-get"),
        "update -qq\ninstall -y -qq chromium\n"
    );
    assert_eq!(
        logged(shim_dir.path(), "cargo"),
        "build --profile dev --bins -q\n"
    );
    assert!(installed.exists());
    // What the user sees: the launch, the page's elements, verified actions, the status.
    assert!(stdout.contains("launched browser:"), "{stdout}");
    assert!(
        stdout.contains("[3] checkbox \"Remember me\" unchecked"),
        "{stdout}"
    );
    assert!(stdout.contains("\nverified\n"), "{stdout}");
    assert!(stdout.contains("~[3] \"Remember me\" checked"), "{stdout}");
    assert!(stdout.contains("~[2] \"Name\" =\"Ada\""), "{stdout}");
    assert!(stdout.contains("Broker broker:"), "{stdout}");
    assert!(stdout.contains("bp:browser:chromium-managed"), "{stdout}");
    assert!(
        stderr.contains("When you are done:  bp stop && bp disconnect"),
        "{stderr}"
    );
    assert_eq!(observed, 0, "{observation}");
    assert_eq!(relaunched, 0, "{launch}");
    let launch: serde_json::Value = serde_json::from_str(launch.trim()).unwrap();
    assert_eq!(launch["browser"]["managed"], true, "{launch}");
    assert_eq!(
        launch["connection"]["reused"], true,
        "launching again changes nothing: {launch}"
    );
    assert!(
        observation.contains("\"title\":\"Quick start\""),
        "{observation}"
    );
    assert_eq!((stopped, stop.trim()), (0, "{\"stopped\":true}"));
    assert_eq!(disconnected, 0);
}
