//! The commands on the private CLI channel: `bp status`, `bp disconnect` (after releasing the
//! compatibility Workspace through the public protocol) and `browser-pilot debug sql`. No
//! public method does their job (Broker identity, shutdown, read-only introspection).
//!
//! Each returns a process exit code and prints through `output.rs`. It never touches the
//! store, CDP or Broker internals directly.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::client::{CliClient, CliError};
use super::compat::{self, Compat, Grants};
use super::exit;
use super::output::{Output, Style, clean, render_error};
use super::table;
use crate::adapter::{BridgeSession, ClientIdentity, LaunchSpec, SessionOptions, ToolCall};
use crate::home::Home;
use crate::protocol::errors::{ErrorCode, RpcError};
use crate::version::installation_id;

/// The private-channel queries behind `bp status` (read-only, through `debug/sql`).
const WORKSPACES_SQL: &str = "SELECT w.workspace_id AS workspace, p.client_id AS client, \
    w.client_key AS clientKey, w.browser_id AS browser, \
    (SELECT count(*) FROM leases AS l WHERE l.workspace_id = w.workspace_id) AS leases \
    FROM workspaces AS w JOIN principals AS p USING (principal_id) ORDER BY w.created_at";
const CONNECTIONS_SQL: &str = "SELECT c.kind AS kind, p.client_id AS client, count(*) AS count \
    FROM connections AS c JOIN principals AS p USING (principal_id) \
    WHERE c.lost_at IS NULL GROUP BY c.kind, p.client_id ORDER BY c.kind, p.client_id";

/// How long `bp disconnect` retries `broker_in_use` right after its own bridge left: the
/// Broker may not have seen that Connection close yet. A real host stays connected longer.
const OWN_BRIDGE_GONE: Duration = Duration::from_secs(3);

/// `bp status`: the Broker, the browsers and their states, this user's Workspaces and the
/// connections. Exit 3 when no Broker runs (none is started).
pub async fn status(home: &Home, output: &Output) -> i32 {
    let mut client = match CliClient::connect(home).await {
        Ok(client) => client,
        Err(CliError::NotRunning) => {
            let value = json!({"running": false, "home": home.root()});
            output.print(&value, |_| {
                format!(
                    "no Broker is running (BROWSER_PILOT_HOME={})\n",
                    home.root().display()
                )
            });
            return exit::NO_BROKER;
        }
        Err(error) => return report(output, error),
    };
    let broker = match client.call("broker/status", Map::new()).await {
        Ok(status) => status,
        Err(error) => return report(output, error),
    };
    let workspaces = rows(&mut client, WORKSPACES_SQL).await;
    let connections = rows(&mut client, CONNECTIONS_SQL).await;
    drop(client);
    let browsers = discover(home).await;
    let value = json!({
        "running": true,
        "broker": broker,
        "browsers": browsers.as_ref().map(|b| b["browsers"].clone()).unwrap_or(Value::Null),
        "selectedBrowserId": browsers.as_ref().map(|b| b["selectedBrowserId"].clone()).unwrap_or(Value::Null),
        "workspaces": workspaces,
        "connections": connections,
        "cli": {"clientId": compat::CLIENT_ID, "instanceId": compat::instance_id(home)},
    });
    output.print(&value, |style| render_status(&value, style));
    exit::OK
}

/// `browser.discover` on a short bridge session of its own (no Workspace).
pub(super) async fn discover(home: &Home) -> Option<Value> {
    let spec = LaunchSpec::new(compat::sibling_executable().ok()?);
    let identity = ClientIdentity {
        id: compat::CLIENT_ID.to_owned(),
        name: "bp".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        instance_id: compat::instance_id(home),
    };
    let (session, _) = BridgeSession::launch(&spec, &identity, &SessionOptions::default())
        .await
        .ok()?;
    let found = session
        .call_connection_tool(&ToolCall::new("browser.discover", json!({}), "status"))
        .await;
    session.shutdown().await;
    found.ok().map(|f| f.result)
}

/// One read-only query, its rows as objects keyed by column (none when it fails).
/// The ids of this home's bp Workspaces held to a URL policy (`clientKey`
/// `bp:BROWSER:policy:DIGEST`, see `compat::Compat::open`).
async fn policy_workspaces(home: &Home) -> Vec<String> {
    let Ok(mut client) = CliClient::connect(home).await else {
        return Vec::new();
    };
    // The instance id is `cli:` and hex digits (compat::instance_id): nothing to escape.
    let sql = format!(
        "SELECT w.workspace_id AS workspace FROM workspaces AS w JOIN principals AS p USING (principal_id) \
         WHERE p.client_id = '{}' AND p.instance_id = '{}' AND w.client_key LIKE 'bp:%:policy:%'",
        compat::CLIENT_ID,
        compat::instance_id(home)
    );
    rows(&mut client, &sql)
        .await
        .iter()
        .filter_map(|row| row["workspace"].as_str().map(str::to_owned))
        .collect()
}

async fn rows(client: &mut CliClient, sql: &str) -> Vec<Value> {
    let params = json!({"sql": sql}).as_object().cloned().unwrap_or_default();
    match client.call("debug/sql", params).await {
        Ok(result) => objects(&result),
        Err(_) => Vec::new(),
    }
}

fn objects(result: &Value) -> Vec<Value> {
    let columns: Vec<String> = result["columns"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    result["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|row| row.as_array())
        .map(|row| Value::Object(columns.iter().cloned().zip(row.iter().cloned()).collect()))
        .collect()
}

fn render_status(value: &Value, style: &Style) -> String {
    let broker = &value["broker"];
    let mut out = format!(
        "{} {} (pid {}, version {}), {} host connection(s)\n",
        style.bold("Broker"),
        broker["broker"]["id"].as_str().unwrap_or(""),
        broker["broker"]["pid"],
        broker["executable"]["version"].as_str().unwrap_or(""),
        broker["embeddedConnections"],
    );
    out.push_str(&style.bold("Browsers\n"));
    for browser in value["browsers"].as_array().into_iter().flatten() {
        let selected = match browser["id"] == value["selectedBrowserId"] {
            true => "*",
            false => " ",
        };
        out.push_str(&format!(
            "{selected} {}  {} {}  {}\n",
            browser["id"].as_str().unwrap_or(""),
            browser["product"].as_str().unwrap_or(""),
            browser["channel"].as_str().unwrap_or(""),
            match browser["state"].as_str().unwrap_or("") {
                "ready" | "connected" => style.green(browser["state"].as_str().unwrap_or("")),
                other => style.yellow(other),
            }
        ));
        if let Some(message) = browser["remediation"]["message"].as_str() {
            out.push_str(&format!("    {}\n", style.dim(&clean(message))));
        }
    }
    out.push_str(&style.bold("Workspaces\n"));
    for workspace in value["workspaces"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  {}  {} {}  {} lease(s)\n",
            workspace["workspace"].as_str().unwrap_or(""),
            workspace["client"].as_str().unwrap_or(""),
            workspace["clientKey"]
                .as_str()
                .map(clean)
                .unwrap_or_default(),
            workspace["leases"],
        ));
    }
    if value["workspaces"].as_array().is_none_or(Vec::is_empty) {
        out.push_str(&style.dim("  (none)\n"));
    }
    out.push_str(&style.bold("Host connections\n"));
    if value["connections"].as_array().is_none_or(Vec::is_empty) {
        out.push_str(&style.dim("  (none)\n"));
    }
    for connection in value["connections"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  {} {} x{}\n",
            connection["kind"].as_str().unwrap_or(""),
            connection["client"].as_str().unwrap_or(""),
            connection["count"],
        ));
    }
    out
}

/// `bp disconnect`: releases the compatibility Workspace first, then asks the Broker to exit.
/// It refuses while any other live Connection exists (`broker_in_use`, exit 4) or when another
/// installation started it (`protocol_incompatible`), and says which happened.
pub async fn disconnect(home: &Home, output: &Output, allowed: &Grants) -> i32 {
    match CliClient::connect(home).await {
        Ok(_) => {}
        Err(CliError::NotRunning) => {
            output.print(&json!({"running": false}), |_| {
                "no Broker is running\n".to_owned()
            });
            return exit::OK;
        }
        Err(error) => return report(output, error),
    }
    let held = policy_workspaces(home).await;
    let released = match Compat::open(home, None, allowed).await {
        Ok(compat) => {
            // The Workspaces of invocations with a URL policy, one per policy, go too.
            for workspace_id in held {
                let params = json!({"workspaceId": workspace_id});
                if let Err(error) = compat.session.request("workspaces/release", params).await {
                    tracing::debug!(%error, "a URL-policy Workspace was not released");
                }
            }
            compat.release_workspace().await
        }
        Err(error) => Err(error),
    };
    let workspace = match &released {
        Ok(_) => json!({"released": true}),
        Err(error) => json!({"released": false, "error": error.to_json()["data"]}),
    };
    let started = Instant::now();
    let shutdown = loop {
        let mut client = match CliClient::connect(home).await {
            Ok(client) => client,
            Err(CliError::NotRunning) => break Ok(Value::Null),
            Err(error) => return report(output, error),
        };
        let params =
            json!({"brokerId": client.welcome.broker_id, "installationId": installation_id()});
        match client
            .call(
                "broker/shutdown",
                params.as_object().cloned().unwrap_or_default(),
            )
            .await
        {
            Err(CliError::Rpc { code, .. })
                if code == "broker_in_use" && started.elapsed() < OWN_BRIDGE_GONE =>
            {
                drop(client);
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
            other => break other.map(|_| json!(client.welcome.broker_id)),
        }
    };
    let released_text = match &released {
        Ok(_) => "released the compatibility Workspace".to_owned(),
        Err(error) => format!(
            "could not release the compatibility Workspace ({})",
            error.code.as_str()
        ),
    };
    match shutdown {
        Ok(broker_id) => {
            let value = json!({"workspace": workspace, "stopped": true, "brokerId": broker_id});
            output.print(&value, |style| {
                format!(
                    "{released_text}\n{}\n",
                    style.green("the Broker is shutting down")
                )
            });
            exit::OK
        }
        Err(CliError::Rpc {
            code,
            message,
            data,
        }) => {
            let error = RpcError::from_json(&json!({"message": message, "data": data}));
            let value =
                json!({"workspace": workspace, "stopped": false, "error": error.to_json()["data"]});
            let kept = RpcError {
                message: format!("the Broker keeps running: {message}"),
                ..error.clone()
            };
            match output.json {
                true => {
                    output.print(&value, |_| String::new());
                    eprint!("{}", render_error(&kept, &Style { colour: false }));
                }
                false => {
                    println!("{released_text}");
                    output.error(&kept);
                }
            }
            match code.as_str() {
                "broker_in_use" => exit::IN_USE,
                _ => exit::TOOL_ERROR,
            }
        }
        Err(error) => report(output, error),
    }
}

/// `browser-pilot debug sql "SELECT ..."`: one read-only query against the live Broker.
pub async fn debug_sql(home: &Home, sql: &str) -> i32 {
    let mut client = match CliClient::connect(home).await {
        Ok(client) => client,
        Err(error) => return report_plain(error),
    };
    let params = json!({"sql": sql});
    let result = match client
        .call("debug/sql", params.as_object().cloned().unwrap_or_default())
        .await
    {
        Ok(result) => result,
        Err(error) => return report_plain(error),
    };
    let columns: Vec<String> = result["columns"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let rows: Vec<Vec<Value>> = result["rows"]
        .as_array()
        .map(|r| r.iter().filter_map(|row| row.as_array().cloned()).collect())
        .unwrap_or_default();
    let text = match std::io::stdout().is_terminal() {
        true => table::aligned(&columns, &rows),
        false => table::json_lines(&columns, &rows),
    };
    print!("{text}");
    0
}

/// `bp handoff done [ID] [--note TEXT]`: tells a waiting `browser.handoff` the person is done
/// (the only one waiting when no id is given), like Done in the live view.
pub async fn handoff_done(
    home: &Home,
    output: &Output,
    handoff_id: Option<String>,
    note: Option<String>,
) -> i32 {
    let mut client = match CliClient::connect(home).await {
        Ok(client) => client,
        Err(error) => return report(output, error),
    };
    let mut params = Map::new();
    params.insert("handoffId".into(), json!(handoff_id));
    params.insert("note".into(), json!(note));
    match client.call("handoff/done", params).await {
        Ok(done) => {
            output.print(&done, |style| {
                format!(
                    "{} {}\n",
                    style.green("done"),
                    done["handoffId"].as_str().unwrap_or("")
                )
            });
            exit::OK
        }
        Err(error) => report(output, error),
    }
}

fn report(output: &Output, error: CliError) -> i32 {
    let text = error.to_string();
    let (exit_code, rpc) = match error {
        CliError::NotRunning => (
            exit::NO_BROKER,
            RpcError::new(ErrorCode::BrokerUnavailable, text),
        ),
        CliError::Untrusted(_) => (
            exit::TOOL_ERROR,
            RpcError::new(ErrorCode::BrokerUntrusted, text),
        ),
        CliError::Rpc { message, data, .. } => {
            let rpc = RpcError::from_json(&json!({"message": message, "data": data}));
            (exit::for_code(rpc.code), rpc)
        }
        CliError::Refused(_) | CliError::Link(_) => (
            exit::TOOL_ERROR,
            RpcError::new(ErrorCode::BrokerUnavailable, text),
        ),
    };
    output.error(&rpc);
    exit_code
}

/// `debug sql`'s error report: one line on stderr (its output is for developers).
fn report_plain(error: CliError) -> i32 {
    eprintln!("error: {error}");
    match error {
        CliError::NotRunning => exit::NO_BROKER,
        _ => exit::TOOL_ERROR,
    }
}
