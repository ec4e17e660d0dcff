//! A Broker wired to one test-owned Chromium, and an agent (bridge + Workspace + Lease) that
//! calls tools and follows its event journal.

use std::time::Duration;

use serde_json::{Value, json};

use super::chromium::{Chromium, Fixtures};
use super::{Bridge, RESPONSE_TIMEOUT, TEST_LEASE_TTL_MS, TestHome, wait_until};

/// A Broker home that discovers exactly one test-owned Chromium profile.
pub struct Rig {
    pub home: TestHome,
    pub profile: tempfile::TempDir,
    pub chromium: Chromium,
    pub fixtures: Fixtures,
}

impl Rig {
    pub fn start() -> Rig {
        Rig::start_with(|home| home)
    }

    /// [`Rig::start`] with the Broker logging at trace level to `log`, for tests that search
    /// the log for secrets.
    pub fn start_logging(log: &std::path::Path) -> Rig {
        Rig::start_with(|home| {
            home.with_env("BROWSER_PILOT_BROKER_LOG", log.to_str().unwrap())
                .with_env("BROWSER_PILOT_LOG", "trace")
        })
    }

    fn start_with(env: impl FnOnce(TestHome) -> TestHome) -> Rig {
        let profile = tempfile::tempdir().unwrap();
        let chromium = Chromium::start(profile.path());
        let home = env(TestHome::new().with_env(
            "BROWSER_PILOT_DISCOVERY_DIRS",
            profile.path().to_str().unwrap(),
        ));
        Rig {
            home,
            profile,
            chromium,
            fixtures: Fixtures::start(),
        }
    }
}

/// One agent: a bridge, a Workspace and a Lease.
pub struct Agent {
    pub bridge: Bridge,
    pub workspace_id: Value,
    pub lease_id: Value,
    pub cursor: String,
}

impl Agent {
    pub fn new(rig: &Rig, client: &str) -> Agent {
        Agent::with_home(&rig.home, client)
    }

    /// An agent of a home without a test-owned Chromium (the Broker-managed one, say).
    pub fn with_home(home: &TestHome, client: &str) -> Agent {
        Agent::bound(home, client, None)
    }

    /// An agent whose Workspace is created bound to the candidate `browser_id` (`None`: the
    /// contract's default binding); leased, not connected yet.
    pub fn bound(home: &TestHome, client: &str, browser_id: Option<&str>) -> Agent {
        let mut bridge = home.spawn_bridge();
        bridge.initialize(client, "i1");
        let params = match browser_id {
            Some(id) => json!({"browserId": id}),
            None => json!({}),
        };
        let ws = bridge.ok("workspaces/create", params);
        let workspace_id = ws["workspace"]["id"].clone();
        let lease = bridge.ok(
            "leases/create",
            json!({"workspaceId": workspace_id, "ttlMs": TEST_LEASE_TTL_MS}),
        );
        Agent {
            bridge,
            workspace_id,
            lease_id: lease["lease"]["id"].clone(),
            cursor: ws["eventCursor"].as_str().unwrap().to_owned(),
        }
    }

    pub fn call(&mut self, name: &str, target: Option<&Value>, arguments: Value) -> Value {
        self.call_within(name, target, arguments, RESPONSE_TIMEOUT)
    }

    /// [`Agent::call`] waiting at most `timeout` for the response.
    pub fn call_within(
        &mut self,
        name: &str,
        target: Option<&Value>,
        arguments: Value,
        timeout: Duration,
    ) -> Value {
        let mut params = json!({"name": name, "arguments": arguments, "workspaceId": self.workspace_id, "leaseId": self.lease_id});
        if let Some(target) = target {
            params["targetId"] = target.clone();
        }
        let id = self.bridge.request("tools/call", params);
        self.bridge.response_within(&id, timeout)
    }

    pub fn tool(&mut self, name: &str, target: Option<&Value>, arguments: Value) -> Value {
        let response = self.call(name, target, arguments.clone());
        match response.get("result") {
            Some(outcome) => {
                assert_eq!(
                    outcome["command"]["status"], "completed",
                    "{name}: {response}"
                );
                outcome["result"].clone()
            }
            None => panic!("{name} {arguments} failed: {response}"),
        }
    }

    pub fn tool_err(
        &mut self,
        name: &str,
        target: Option<&Value>,
        arguments: Value,
    ) -> (String, Value) {
        let response = self.call(name, target, arguments);
        match response.get("error") {
            Some(error) => (
                error["data"]["code"].as_str().unwrap_or("").to_owned(),
                error.clone(),
            ),
            None => panic!("{name} unexpectedly succeeded: {response}"),
        }
    }

    pub fn connect(&mut self) -> Value {
        self.tool("browser.connect", None, json!({}))
    }

    pub fn tabs(&mut self) -> Vec<Value> {
        self.tool("browser.tabs.list", None, json!({}))["tabs"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// New events since the last call.
    pub fn events(&mut self) -> Vec<Value> {
        let mut all = Vec::new();
        loop {
            let page = self.bridge.ok(
                "events/poll",
                json!({"workspaceId": self.workspace_id, "cursor": self.cursor, "limit": 100}),
            );
            all.extend(page["events"].as_array().unwrap().iter().cloned());
            self.cursor = page["nextCursor"].as_str().unwrap().to_owned();
            if page["hasMore"] == false {
                return all;
            }
        }
    }

    pub fn wait_event(&mut self, event_type: &str) -> Value {
        let mut found = None;
        assert!(
            wait_until(Duration::from_secs(15), || {
                found = self.events().into_iter().find(|e| e["type"] == event_type);
                found.is_some()
            }),
            "no {event_type} event"
        );
        found.unwrap()
    }
}

/// The ref of the first element whose name contains `name` and whose role is `role`.
pub fn find_ref(observation: &Value, role: &str, name: &str) -> u64 {
    observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["role"] == role && e["name"].as_str().unwrap_or("").contains(name))
        .unwrap_or_else(|| panic!("no {role} {name:?} in {}", observation["elements"]))["ref"]
        .as_u64()
        .unwrap()
}
