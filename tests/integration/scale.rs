//! Process test of many agents on one Broker: 32 bridges at once, each with its own Principal,
//! Workspace, Lease and tab on one headless Chromium, loop navigate, observe, click, type and
//! capture; every call completes, each Workspace's journal and its notifications hold every
//! event once, and every Lease is released at the end.

use crate::support;

use std::collections::HashSet;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::rig::{Agent, Rig, find_ref};
use support::{BIN, RESPONSE_TIMEOUT};

const AGENTS: usize = 32;
const LOOPS: usize = 2;
/// How many agents create their tab at once. A new tab's renderer start is Chromium's work
/// (hundreds of ms of CPU each); 32 at once on a small machine that also runs other tests can
/// outlast the setup of the first ones, which is not what this test is about. The loops run
/// all 32 at once, once every tab is open.
const OPENING_AT_ONCE: usize = 8;
/// How long one tool call may take to be answered: 15 s past a Command's default deadline, by
/// which the Broker answers every call, completed or not. 32 agents' calls queue on one browser,
/// and more on a loaded machine running a debug build.
const CALL_WAIT: Duration =
    Duration::from_millis(browser_pilot::broker::DEFAULT_DEADLINE_MS + 15_000);

/// A counting semaphore for the tab openings. A permit comes back however the work ends, so
/// one agent's panic does not stall the others.
struct Gate {
    free: Mutex<usize>,
    freed: Condvar,
}

/// Gives a [`Gate`] permit back when dropped.
struct Permit<'a>(&'a Gate);

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}

impl Gate {
    fn pass<T>(&self, work: impl FnOnce() -> T) -> T {
        let mut free = self
            .freed
            .wait_while(self.free.lock().unwrap(), |free| *free == 0)
            .unwrap();
        *free -= 1;
        drop(free);
        let _permit = Permit(self);
        work()
    }
}

/// Where every agent waits until all have opened their tab. An agent that fails before it
/// arrives breaks the meeting (its [`Attendance`] is dropped in the panic), and everyone
/// waiting leaves with a panic of their own instead of waiting forever; the first panic is the
/// one the test reports.
struct Meeting {
    /// Arrived so far, and whether an agent failed on the way.
    state: Mutex<(usize, bool)>,
    changed: Condvar,
}

/// One agent's promise to come to the [`Meeting`].
struct Attendance<'a> {
    meeting: &'a Meeting,
    arrived: bool,
}

impl Meeting {
    fn attend(&self) -> Attendance<'_> {
        Attendance {
            meeting: self,
            arrived: false,
        }
    }
}

impl Attendance<'_> {
    /// Arrives and waits for everyone else.
    fn arrive(mut self) {
        self.arrived = true;
        let meeting = self.meeting;
        let mut state = meeting.state.lock().unwrap();
        state.0 += 1;
        meeting.changed.notify_all();
        let (_, broken) = *meeting
            .changed
            .wait_while(state, |(arrived, broken)| *arrived < AGENTS && !*broken)
            .unwrap();
        assert!(!broken, "another agent failed before every tab was open");
    }
}

impl Drop for Attendance<'_> {
    fn drop(&mut self) {
        if !self.arrived {
            self.meeting
                .state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .1 = true;
            self.meeting.changed.notify_all();
        }
    }
}

/// What one agent saw: the ids of the Commands it ran, its journal from the Workspace's
/// creation on, and the `events/event` notifications its bridge wrote.
struct Run {
    commands: Vec<String>,
    journal: Vec<Value>,
    notified: Vec<Value>,
}

/// Runs `tool` and returns its result, keeping the Command's id.
fn run(
    agent: &mut Agent,
    commands: &mut Vec<String>,
    name: &str,
    target: Option<&Value>,
    arguments: Value,
) -> Value {
    let response = agent.call_within(name, target, arguments.clone(), CALL_WAIT);
    let outcome = response
        .get("result")
        .unwrap_or_else(|| panic!("{name} {arguments} failed: {response}"));
    assert_eq!(
        outcome["command"]["status"], "completed",
        "{name}: {response}"
    );
    commands.push(outcome["command"]["id"].as_str().unwrap().to_owned());
    outcome["result"].clone()
}

fn agent_loop(rig: &Rig, gate: &Gate, meeting: &Meeting, index: usize) -> Run {
    let attendance = meeting.attend();
    let mut agent = Agent::new(rig, &format!("com.example.scale{index}"));
    let mut commands = Vec::new();
    run(
        &mut agent,
        &mut commands,
        "browser.connect",
        None,
        json!({}),
    );
    let page = rig.fixtures.url("/gen?n=12");
    let opened = gate.pass(|| {
        run(
            &mut agent,
            &mut commands,
            "browser.open",
            None,
            json!({"url": page}),
        )
    });
    let target = opened["targetId"].clone();
    // Every tab is open before any loop starts: the loops then meet each other, not the
    // renderer starts of the last tabs.
    attendance.arrive();
    for _ in 0..LOOPS {
        run(
            &mut agent,
            &mut commands,
            "browser.navigate",
            Some(&target),
            json!({"action": "goto", "url": page}),
        );
        let observation = run(
            &mut agent,
            &mut commands,
            "browser.observe",
            Some(&target),
            json!({"limit": 100}),
        );
        let clicked = run(
            &mut agent,
            &mut commands,
            "browser.click",
            Some(&target),
            json!({"observationId": observation["observationId"],
                   "ref": find_ref(&observation, "checkbox", "Option 1")}),
        );
        assert_eq!(clicked["evidence"]["status"], "verified", "{clicked}");
        let typed = run(
            &mut agent,
            &mut commands,
            "browser.type",
            Some(&target),
            json!({"observationId": observation["observationId"],
                   "ref": find_ref(&observation, "textbox", "Field 0"), "text": format!("agent {index}")}),
        );
        assert_eq!(typed["evidence"]["status"], "verified", "{typed}");
        let shot = run(
            &mut agent,
            &mut commands,
            "browser.capture",
            Some(&target),
            json!({}),
        );
        assert_eq!(shot["artifact"]["kind"], "screenshot", "{shot}");
    }
    // Notifications may trail the responses: read the journal and the notifications until
    // one notification per journaled event arrived and the journal stopped growing (or the
    // response timeout passed, which the caller's comparison then reports).
    let mut journal = Vec::new();
    let mut notified = Vec::new();
    let deadline = Instant::now() + RESPONSE_TIMEOUT;
    loop {
        let fresh = agent.events();
        let grew = !fresh.is_empty();
        journal.extend(fresh);
        notified.extend(
            agent
                .bridge
                .drain_notifications(Duration::from_millis(50))
                .into_iter()
                .filter(|n| n["method"] == "events/event")
                .map(|n| n["params"]["event"].clone()),
        );
        if (!grew && notified.len() >= journal.len()) || Instant::now() >= deadline {
            break;
        }
    }
    let released = agent.bridge.ok(
        "leases/release",
        json!({"workspaceId": agent.workspace_id, "leaseId": agent.lease_id}),
    );
    assert_eq!(released["released"], true, "{released}");
    Run {
        commands,
        journal,
        notified,
    }
}

#[test]
fn thirty_two_agents_loop_on_one_broker_without_errors_lost_events_or_held_leases() {
    let _alone = support::many_agents();
    let rig = Rig::start();
    let gate = Gate {
        free: Mutex::new(OPENING_AT_ONCE),
        freed: Condvar::new(),
    };
    let meeting = Meeting {
        state: Mutex::new((0, false)),
        changed: Condvar::new(),
    };
    let runs: Vec<Run> = std::thread::scope(|scope| {
        let agents: Vec<_> = (0..AGENTS)
            .map(|index| {
                let (rig, gate, meeting) = (&rig, &gate, &meeting);
                scope.spawn(move || agent_loop(rig, gate, meeting, index))
            })
            .collect();
        agents.into_iter().map(|a| a.join().unwrap()).collect()
    });
    for (index, run) in runs.iter().enumerate() {
        // The journal: strictly increasing sequences, each event once.
        let sequences: Vec<u64> = run
            .journal
            .iter()
            .map(|e| e["sequence"].as_u64().unwrap())
            .collect();
        assert!(
            sequences.windows(2).all(|w| w[0] < w[1]),
            "agent {index}: sequences out of order or repeated: {sequences:?}"
        );
        let ids: HashSet<&str> = run
            .journal
            .iter()
            .map(|e| e["id"].as_str().unwrap())
            .collect();
        assert_eq!(
            ids.len(),
            run.journal.len(),
            "agent {index}: an event twice"
        );
        // Every Command reached the journal exactly once, as completed.
        for command in &run.commands {
            let statuses: Vec<&Value> = run
                .journal
                .iter()
                .filter(|e| e["type"] == "command.status" && e["payload"]["commandId"] == *command)
                .collect();
            assert_eq!(
                statuses.len(),
                1,
                "agent {index}: {command} journaled {} times",
                statuses.len()
            );
            assert_eq!(statuses[0]["payload"]["status"], "completed");
        }
        // The bridge delivered every journaled event once, in order, and nothing else.
        assert_eq!(
            run.notified, run.journal,
            "agent {index}: notifications differ from the journal"
        );
    }
    // No Lease outlives its release.
    let (code, out, err) = rig
        .home
        .run(BIN, &["debug", "sql", "SELECT count(*) AS n FROM leases"]);
    assert_eq!(code, 0, "debug sql: {err}");
    assert_eq!(out.trim(), r#"{"n":0}"#, "Leases left");
}
