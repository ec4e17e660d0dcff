//! The live view (docs/view.md): a local web page through which the OS user watches every
//! Workspace of this home and answers an agent's hand-off.
//!
//! `browser-pilot view` (and `bp view`) asks the running view for a fresh one-time URL over the
//! owner-only control socket (`control.rs`), starting the private role
//! `--browser-pilot-internal=view` first when none runs, and prints it. The role serves
//! 127.0.0.1 on an ephemeral port (`http.rs`, the page in `page/`, the live channel's WebSocket
//! in `live.rs`), lets in only pages that spent a secret for a token (`auth.rs`), and reads the
//! Broker through short CLI-peer calls (`link.rs`). It writes nothing to disk but its socket, and runs until `browser-pilot view
//! --stop`, SIGTERM, or its socket file is removed (its home deleted).

mod auth;
mod control;
mod http;
mod link;
mod live;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::home::Home;

/// How long `browser-pilot view` waits for a view it started to listen.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the role checks that its socket file is still its own.
const SOCKET_CHECK: Duration = Duration::from_secs(1);

/// `browser-pilot view [--open] [--stop]`: prints the URL of this home's view (starting it
/// when none runs) and returns the exit code.
pub fn run_cli(home: Home, open: bool, stop: bool) -> i32 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime starts");
    runtime.block_on(cli(home, open, stop))
}

/// [`run_cli`] on the caller's runtime (`bp view`).
pub async fn cli(home: Home, open: bool, stop: bool) -> i32 {
    if let Err(error) = home.ensure() {
        eprintln!("error: BROWSER_PILOT_HOME is not usable: {error}");
        return 2;
    }
    let socket = home.view_socket_path();
    if stop {
        return match control::ask(&socket, "stop").await {
            Ok(_) => {
                println!("{}", serde_json::json!({"stopped": true}));
                0
            }
            Err(control::AskError::NotRunning) => {
                println!("{}", serde_json::json!({"stopped": false}));
                0
            }
            Err(error) => {
                eprintln!("error: {error}");
                1
            }
        };
    }
    let mut answer = control::ask(&socket, "url").await;
    if matches!(answer, Err(control::AskError::NotRunning)) {
        if let Err(error) = spawn_role(&home) {
            eprintln!("error: cannot start the view: {error}");
            return 1;
        }
        let deadline = tokio::time::Instant::now() + START_TIMEOUT;
        loop {
            answer = control::ask(&socket, "url").await;
            if !matches!(answer, Err(control::AskError::NotRunning))
                || tokio::time::Instant::now() >= deadline
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let url = match answer {
        Ok(value) => match value["url"].as_str() {
            Some(url) => url.to_owned(),
            None => {
                eprintln!("error: the view gave no URL");
                return 1;
            }
        },
        Err(error) => {
            eprintln!("error: {error}");
            return 1;
        }
    };
    println!("{url}");
    if open {
        open_in_desktop(&url);
    }
    0
}

/// Hands `url` to the desktop's browser where there is a desktop; says so otherwise.
fn open_in_desktop(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        Some("open")
    } else if std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some()
    {
        Some("xdg-open")
    } else {
        None
    };
    let Some(opener) = opener else {
        eprintln!("no desktop to open it in: open the URL above in a browser of this machine");
        return;
    };
    let started = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(error) = started {
        eprintln!("could not run {opener} ({error}): open the URL above in a browser");
    }
}

fn spawn_role(home: &Home) -> std::io::Result<()> {
    let executable = std::env::current_exe()?;
    let mut command = std::process::Command::new(executable);
    command
        .arg("--browser-pilot-internal=view")
        .env("BROWSER_PILOT_HOME", home.root())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    crate::os::detach(&mut command);
    let mut child = command.spawn()?;
    // Reap it when it eventually exits, so it never lingers as a zombie of this process.
    std::thread::spawn(move || child.wait());
    Ok(())
}

/// The private role: serves the view until stopped. Exit 0 also when another view already
/// serves this home.
pub async fn run_role(home: Home) -> i32 {
    if let Err(error) = home.verify() {
        eprintln!("error: BROWSER_PILOT_HOME is not usable: {error}");
        return 2;
    }
    let socket = home.view_socket_path();
    if control::ask(&socket, "ping").await.is_ok() {
        return 0;
    }
    let _ = std::fs::remove_file(&socket);
    let listener = match tokio::net::TcpListener::bind(("127.0.0.1", 0)).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("error: cannot listen on 127.0.0.1: {error}");
            return 1;
        }
    };
    let port = match listener.local_addr() {
        Ok(address) => address.port(),
        Err(error) => {
            eprintln!("error: {error}");
            return 1;
        }
    };
    let gate = Arc::new(auth::Gate::new(port));
    let control_listener = match crate::ipc::listen(&socket) {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("error: cannot bind {}: {error}", socket.display());
            return 1;
        }
    };
    let identity = crate::os::file_identity(&socket);
    let (stop, mut stopped) = watch::channel(false);
    let server = Arc::new(http::Server {
        gate: gate.clone(),
        home: home.clone(),
    });
    // Each URL handed out registers the view's origin with a running Broker at once, so the tab
    // the person opens it in is never an eligible tab, not even before its first call.
    let register: Arc<dyn Fn() + Send + Sync> = {
        let (home, origin) = (home.clone(), gate.origin());
        Arc::new(move || {
            let (home, origin) = (home.clone(), origin.clone());
            tokio::spawn(async move {
                let params = serde_json::json!({"origin": origin});
                let _ = link::call(&home, &origin, "view/register", params).await;
            });
        })
    };
    tokio::spawn(control::serve(
        control_listener,
        gate,
        stop.clone(),
        register,
    ));
    tokio::spawn(http::serve(listener, server, stop.clone()));
    let mut signals = crate::os::termination_signals();
    loop {
        tokio::select! {
            _ = stopped.wait_for(|s| *s) => break,
            _ = signals.recv() => break,
            () = tokio::time::sleep(SOCKET_CHECK) => {
                if crate::os::file_identity(&socket) != identity {
                    break;
                }
            }
        }
    }
    let _ = stop.send(true);
    if crate::os::file_identity(&socket) == identity {
        let _ = std::fs::remove_file(&socket);
    }
    0
}
