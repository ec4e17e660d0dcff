//! The Broker's method table: every method a peer may call, declared once with its lane, the
//! peer kind it serves, the capability it needs and its handler (which takes the method's
//! typed params, see `params.rs`). `connection.rs` routes every request through [`dispatch`];
//! the contract's method list (`protocol::methods::LIFECYCLE_METHODS`, `docs/protocol.md`) is
//! checked against this table by its tests.
//!
//! The bridge's own request (`protocol::methods::TOOL_FLAGS_METHOD`) is a row too, served only
//! to bridge peers and advertised nowhere.
//!
//! Dispatch order, for every method: the peer kind (a method the peer may not call is unknown
//! to it), the initialized session (when the handler needs one), the capability, the params'
//! schema and decode, then the handler.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::connection::{ConnectionContext, Session};
use super::params::{self, Params};
use super::{artifacts, cli, commands, events, initialize, leases, view, workspaces};
use crate::protocol::errors::{ErrorCode, RpcError};
use crate::protocol::internal::PeerRole;
use crate::protocol::methods::{Lane, TOOL_FLAGS_METHOD};
use crate::tools;

/// A method's successful answer.
pub enum Reply {
    Value(Value),
    /// JSON text already written (the kept `tools/list`, an `events/poll` page), put into the
    /// response line as it is.
    Json(String),
    /// Accepted in input order; the rest (a tool's run, an import's copy) runs beside the
    /// Connection's later calls, and its outcome is the response.
    Later(Pin<Box<dyn Future<Output = Result<Value, RpcError>> + Send + 'static>>),
}

impl From<Value> for Reply {
    fn from(value: Value) -> Reply {
        Reply::Value(value)
    }
}

pub type MethodFuture<'a> = Pin<Box<dyn Future<Output = Result<Reply, RpcError>> + Send + 'a>>;

/// A method's entry point, by whether it needs an initialized session.
#[derive(Clone, Copy)]
pub enum Handler {
    /// Runs on any Connection (`initialize`, the CLI's methods).
    Connection(for<'a> fn(&'a Arc<ConnectionContext>, Map<String, Value>) -> MethodFuture<'a>),
    /// Runs only after `initialize`; anything else is `not_initialized`.
    Session(
        for<'a> fn(&'a Arc<ConnectionContext>, &'a Session, Map<String, Value>) -> MethodFuture<'a>,
    ),
}

/// Wraps `async fn method(context, [session,] params: P) -> Result<impl Into<Reply>, RpcError>`
/// as a [`Handler`]: the params are decoded into `P` (schema first) before it runs.
macro_rules! handler {
    (Connection: $method:path) => {{
        fn boxed<'a>(
            context: &'a Arc<ConnectionContext>,
            params: Map<String, Value>,
        ) -> MethodFuture<'a> {
            Box::pin(async move {
                let params = decode(params)?;
                $method(context, params).await.map(Reply::from)
            })
        }
        Handler::Connection(boxed)
    }};
    (Session: $method:path) => {{
        fn boxed<'a>(
            context: &'a Arc<ConnectionContext>,
            session: &'a Session,
            params: Map<String, Value>,
        ) -> MethodFuture<'a> {
            Box::pin(async move {
                let params = decode(params)?;
                $method(context, session, params).await.map(Reply::from)
            })
        }
        Handler::Session(boxed)
    }};
}

/// `params::decode` with its type left to inference from the handler it feeds.
fn decode<P: Params>(params: Map<String, Value>) -> Result<P, RpcError> {
    params::decode(params)
}

/// Which peers may call a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peers {
    /// Any peer: the contract's methods.
    Any,
    /// Only a `bp` peer: the CLI's private methods (a bridge's host never reaches them).
    Cli,
    /// Only a bridge: its own requests, never advertised.
    Bridge,
}

/// How a method's requests are scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lanes {
    Fixed(Lane),
    /// `tools/call`: the called tool's lane (its `ToolDef`).
    ByTool,
}

pub struct MethodDef {
    pub name: &'static str,
    pub lanes: Lanes,
    pub peers: Peers,
    /// Checked after the session and before the params; `tools/call` checks each tool's own.
    pub capability: Option<&'static str>,
    pub handler: Handler,
}

const ORDINARY: Lanes = Lanes::Fixed(Lane::Ordinary);
const OUT_OF_BAND: Lanes = Lanes::Fixed(Lane::OutOfBand);
const WORKSPACE: Option<&str> = Some("workspace.manage");
const ARTIFACT: Option<&str> = Some("artifact.read");

/// The table, in the contract's order, then the CLI's methods and the bridge's own.
pub fn table() -> &'static [MethodDef] {
    use Peers::{Any, Bridge, Cli};
    static TABLE: std::sync::OnceLock<Vec<MethodDef>> = std::sync::OnceLock::new();
    let row = |name, lanes, peers, capability, handler| MethodDef {
        name,
        lanes,
        peers,
        capability,
        handler,
    };
    TABLE.get_or_init(|| {
        #[rustfmt::skip]
        let rows = vec![
            row("initialize", ORDINARY, Any, None, handler!(Connection: initialize::initialize)),
            row("tools/list", ORDINARY, Any, None, handler!(Session: commands::list)),
            row("tools/call", Lanes::ByTool, Any, None, handler!(Session: commands::call)),
            row("commands/get", OUT_OF_BAND, Any, None, handler!(Session: commands::get)),
            row("commands/cancel", OUT_OF_BAND, Any, None, handler!(Session: commands::cancel)),
            row("workspaces/create", ORDINARY, Any, WORKSPACE, handler!(Session: workspaces::create)),
            row("workspaces/get", ORDINARY, Any, WORKSPACE, handler!(Session: workspaces::get)),
            row("workspaces/release", ORDINARY, Any, WORKSPACE, handler!(Session: workspaces::release)),
            row("leases/create", ORDINARY, Any, WORKSPACE, handler!(Session: leases::create)),
            row("leases/heartbeat", ORDINARY, Any, WORKSPACE, handler!(Session: leases::heartbeat)),
            row("leases/release", ORDINARY, Any, WORKSPACE, handler!(Session: leases::release)),
            row("events/poll", ORDINARY, Any, Some("event.read"), handler!(Session: events::poll)),
            row("artifacts/get", ORDINARY, Any, ARTIFACT, handler!(Session: artifacts::get)),
            row("artifacts/export", ORDINARY, Any, ARTIFACT, handler!(Session: artifacts::export)),
            row("artifacts/import", ORDINARY, Any, ARTIFACT, handler!(Session: artifacts::import)),
            row("artifacts/retain", ORDINARY, Any, ARTIFACT, handler!(Session: artifacts::retain)),
            row("artifacts/release", ORDINARY, Any, ARTIFACT, handler!(Session: artifacts::release)),
            row("shutdown", ORDINARY, Any, None, handler!(Session: initialize::shutdown)),
            row("broker/status", ORDINARY, Cli, None, handler!(Connection: cli::status)),
            row("broker/shutdown", ORDINARY, Cli, None, handler!(Connection: cli::shutdown)),
            row("debug/sql", ORDINARY, Cli, None, handler!(Connection: cli::debug_sql)),
            row("view/register", ORDINARY, Cli, None, handler!(Connection: view::register)),
            row("view/state", ORDINARY, Cli, None, handler!(Connection: view::state)),
            row("view/events", ORDINARY, Cli, None, handler!(Connection: view::events)),
            row("view/frame", ORDINARY, Cli, None, handler!(Connection: view::frame)),
            row("view/screencast", ORDINARY, Cli, None, handler!(Connection: view::screencast)),
            row("view/takeover", ORDINARY, Cli, None, handler!(Connection: view::take_over)),
            row("view/input", ORDINARY, Cli, None, handler!(Connection: view::input)),
            row("view/handback", ORDINARY, Cli, None, handler!(Connection: view::hand_back)),
            row("recording/start", ORDINARY, Cli, None, handler!(Connection: view::recording_start)),
            row("recording/stop", ORDINARY, Cli, None, handler!(Connection: view::recording_stop)),
            row("handoff/done", ORDINARY, Cli, None, handler!(Connection: view::handoff_done)),
            row(TOOL_FLAGS_METHOD, ORDINARY, Bridge, None, handler!(Connection: commands::flags)),
        ];
        rows
    })
}

/// The method `name` as a peer of `role` sees it.
fn find(name: &str, role: PeerRole) -> Option<&'static MethodDef> {
    table().iter().find(|def| {
        def.name == name
            && match def.peers {
                Peers::Any => true,
                Peers::Cli => role == PeerRole::Cli,
                Peers::Bridge => role == PeerRole::Bridge,
            }
    })
}

/// The lane a request is admitted on: its method's, or for `tools/call` its tool's (an unknown
/// method or tool is ordinary).
pub fn lane(method: &str, params: &Map<String, Value>) -> Lane {
    match table()
        .iter()
        .find(|def| def.name == method)
        .map(|def| def.lanes)
    {
        Some(Lanes::Fixed(lane)) => lane,
        Some(Lanes::ByTool) => params
            .get("name")
            .and_then(Value::as_str)
            .and_then(tools::find)
            .map_or(Lane::Ordinary, |tool| tool.lane),
        None => Lane::Ordinary,
    }
}

/// Runs one request's in-order part: to its answer, or (`Reply::Later`) to its acceptance.
pub async fn dispatch(
    context: &Arc<ConnectionContext>,
    method: &str,
    params: Map<String, Value>,
) -> Result<Reply, RpcError> {
    let Some(def) = find(method, context.role) else {
        context.session()?;
        return Err(RpcError::new(
            ErrorCode::MethodNotFound,
            format!("unknown method {method:?}"),
        ));
    };
    match def.handler {
        Handler::Connection(handler) => handler(context, params).await,
        Handler::Session(handler) => {
            let session = context.session()?;
            if let Some(capability) = def.capability {
                session.require(capability)?;
            }
            handler(context, session, params).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::methods::{self, LIFECYCLE_METHODS};

    fn contract_rows() -> Vec<&'static str> {
        table()
            .iter()
            .filter(|def| def.peers == Peers::Any)
            .map(|def| def.name)
            .collect()
    }

    #[test]
    fn the_table_serves_exactly_the_contracts_methods() {
        assert_eq!(contract_rows(), LIFECYCLE_METHODS);
        let mut names: Vec<&str> = table().iter().map(|def| def.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), table().len(), "a method is declared twice");
    }

    /// `docs/protocol.md` gives each lifecycle method a `### \`name\`` section (several names
    /// may share one); together they name exactly the table's contract methods.
    #[test]
    fn the_protocol_page_documents_exactly_the_tables_methods() {
        let page = include_str!("../../docs/protocol.md");
        let section = page
            .split("\n## Lifecycle methods")
            .nth(1)
            .expect("docs/protocol.md has a Lifecycle methods section");
        let section = section.split("\n## ").next().unwrap_or(section);
        let mut documented: Vec<&str> = section
            .lines()
            .filter_map(|line| line.strip_prefix("### "))
            .flat_map(|heading| heading.split(", "))
            .filter_map(|name| name.strip_prefix('`')?.strip_suffix('`'))
            .collect();
        documented.sort_unstable();
        let mut served = contract_rows();
        served.sort_unstable();
        assert_eq!(documented, served);
    }

    /// The bridge schedules by `protocol::methods::lane` (it has no table); the Broker by this
    /// table. They agree for every method and every tool.
    #[test]
    fn the_tables_lanes_are_the_bridges() {
        let none = Map::new();
        for def in table() {
            assert_eq!(
                lane(def.name, &none),
                methods::lane(def.name, &none),
                "{}",
                def.name
            );
        }
        for tool in tools::manifest() {
            let mut params = Map::new();
            params.insert("name".to_owned(), Value::from(tool.name));
            assert_eq!(
                lane("tools/call", &params),
                methods::lane("tools/call", &params),
                "{}",
                tool.name
            );
        }
    }

    #[test]
    fn only_the_cli_reaches_its_private_methods() {
        for name in [
            "broker/status",
            "broker/shutdown",
            "debug/sql",
            "view/register",
            "view/state",
            "view/events",
            "view/frame",
            "view/screencast",
            "view/takeover",
            "view/input",
            "view/handback",
            "recording/start",
            "recording/stop",
            "handoff/done",
        ] {
            assert!(find(name, PeerRole::Bridge).is_none(), "{name}");
            assert!(find(name, PeerRole::Cli).is_some(), "{name}");
        }
        assert!(find("tools/call", PeerRole::Bridge).is_some());
        assert!(find(TOOL_FLAGS_METHOD, PeerRole::Bridge).is_some());
        assert!(find(TOOL_FLAGS_METHOD, PeerRole::Cli).is_none());
    }
}
