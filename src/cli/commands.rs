//! The CLI commands themselves. Each returns a process exit code and prints for humans.

use std::io::IsTerminal;

use serde_json::{Map, Value, json};

use super::client::{CliClient, CliError};
use super::table;
use crate::home::Home;
use crate::version::installation_id;

/// `bp status`: whether a Broker runs here, and who is connected.
pub async fn status(home: &Home) -> i32 {
    let mut client = match CliClient::connect(home).await {
        Ok(client) => client,
        Err(CliError::NotRunning) => {
            println!(
                "no Broker is running (BROWSER_PILOT_HOME={})",
                home.root().display()
            );
            return 3;
        }
        Err(error) => return report(error),
    };
    match client.call("broker/status", Map::new()).await {
        Ok(status) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&status).unwrap_or_default()
            );
            0
        }
        Err(error) => report(error),
    }
}

/// `bp disconnect`: ask the Broker to exit. It refuses while an embedded host is connected
/// (`broker_in_use`, exit 4) or when another installation started it (`protocol_incompatible`).
pub async fn disconnect(home: &Home) -> i32 {
    let mut client = match CliClient::connect(home).await {
        Ok(client) => client,
        Err(CliError::NotRunning) => {
            println!("no Broker is running");
            return 0;
        }
        Err(error) => return report(error),
    };
    let params = json!({"brokerId": client.welcome.broker_id, "installationId": installation_id()});
    match client
        .call(
            "broker/shutdown",
            params.as_object().cloned().unwrap_or_default(),
        )
        .await
    {
        Ok(_) => {
            println!("Broker {} is shutting down", client.welcome.broker_id);
            0
        }
        Err(CliError::Rpc { code, message, .. }) if code == "broker_in_use" => {
            eprintln!(
                "not stopped: {message} (broker_in_use); retry when the hosts have disconnected"
            );
            4
        }
        Err(error) => report(error),
    }
}

/// `browser-pilot debug sql "SELECT ..."`: one read-only query against the live Broker.
pub async fn debug_sql(home: &Home, sql: &str) -> i32 {
    let mut client = match CliClient::connect(home).await {
        Ok(client) => client,
        Err(error) => return report(error),
    };
    let params = json!({"sql": sql});
    let result = match client
        .call("debug/sql", params.as_object().cloned().unwrap_or_default())
        .await
    {
        Ok(result) => result,
        Err(error) => return report(error),
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

fn report(error: CliError) -> i32 {
    eprintln!("error: {error}");
    match error {
        CliError::NotRunning => 3,
        _ => 1,
    }
}
