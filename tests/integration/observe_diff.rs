//! Process tests of steadier, smaller Observations against a real headless Chromium: stable refs
//! within a document, diff Observations (`sinceObservationId`, also on an action's `observe`),
//! the compact form, and token budgets on observe, read and search. One Chromium and one Broker
//! for the whole module: the scenarios run in order in one test.

use crate::support;

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};
use support::rig::{Agent, Rig};

/// Observes every element of the rows fixture (2,000 rows and a toolbar).
const ALL: u64 = 5_000;

fn observe(agent: &mut Agent, target: &Value, arguments: Value) -> Value {
    agent.tool("browser.observe", Some(target), arguments)
}

fn elements(observation: &Value) -> &Vec<Value> {
    observation["elements"].as_array().unwrap()
}

/// name -> ref of every returned element (names on the fixture are unique).
fn refs_by_name(observation: &Value) -> HashMap<String, u64> {
    elements(observation)
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_owned(),
                e["ref"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn ref_named(observation: &Value, name: &str) -> u64 {
    *refs_by_name(observation)
        .get(name)
        .unwrap_or_else(|| panic!("no element named {name:?}"))
}

fn bytes(value: &Value) -> usize {
    serde_json::to_vec(value).unwrap().len()
}

fn int_list(value: &Value) -> Vec<u64> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {value}"))
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect()
}

/// Every ref a hint names.
fn hint_refs(observation: &Value) -> Vec<u64> {
    observation["hints"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|h| h.get("refs").map(int_list).unwrap_or_default())
        .collect()
}

/// Acts on `element_ref` through `observation_id` with an `observe` option for the result.
fn act(
    agent: &mut Agent,
    target: &Value,
    tool: &str,
    observation_id: &Value,
    element_ref: u64,
    extra: Value,
) -> Value {
    let mut arguments = json!({"observationId": observation_id, "ref": element_ref});
    if let (Some(arguments), Some(extra)) = (arguments.as_object_mut(), extra.as_object()) {
        arguments.extend(extra.clone());
    }
    agent.tool(tool, Some(target), arguments)
}

#[test]
fn stable_refs_diffs_compact_form_and_token_budgets() {
    let rig = Rig::start();
    let mut agent = Agent::new(&rig, "com.example.observe-diff");
    agent.connect();
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url("/fixture/rows")}),
    );
    let target = opened["targetId"].clone();

    let full = one_inserted_row_is_a_small_diff_and_rows_keep_their_refs(&mut agent, &target);
    the_diff_id_resolves_base_and_delta_refs(&mut agent, &target, &full);
    the_compact_form_keeps_refs_and_no_password(&mut agent, &target);
    token_budgets_keep_the_viewport_first(&mut agent, &target);
    repeated_no_op_actions_with_diffs_still_count_as_no_progress(&mut agent, &target);
    a_base_that_is_gone_gives_a_full_observation(&mut agent, &target, &rig);
    a_20000_element_page_is_complete_in_compact_form(&mut agent, &target, &rig);
    the_compact_form_groups_elements_by_section(&mut agent, &target, &rig);
}

/// A full compact Observation states the landmarks, lists, tables, dialogs and frames around
/// its elements as `## ` lines (the chain of sections, outer first) where they change; a diff
/// lists only what changed.
fn the_compact_form_groups_elements_by_section(agent: &mut Agent, target: &Value, rig: &Rig) {
    agent.tool(
        "browser.navigate",
        Some(target),
        json!({"action": "goto", "url": rig.fixtures.url("/fixture/sections")}),
    );
    let compact = observe(agent, target, json!({"format": "compact"}));
    let text = compact["compact"].as_str().unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // Each wanted line after the previous one.
    let mut from = 0;
    let mut position = |wanted: &str| {
        let at = from
            + lines[from..]
                .iter()
                .position(|l| *l == wanted || l.contains(&format!(" \"{wanted}\" ")))
                .unwrap_or_else(|| panic!("{wanted:?} not in order in:\n{text}"));
        from = at + 1;
        at
    };
    let order = [
        "## banner > navigation \"Site\" > list",
        "Alpha",
        "Beta",
        "## main",
        "Orders",
        "## main > region \"Filters\"",
        "Search",
        "## main > table \"Open orders\"",
        "Cancel 1",
        "Cancel 2",
        "## frame \"Payment\"",
        "## main",
        "Unnamed section",
        "## main > dialog \"Confirm\"",
        "Yes",
        "## contentinfo",
        "Privacy",
    ];
    for wanted in order {
        position(wanted);
    }
    // Every element line still starts with its ref; the JSON form has no grouping.
    let json_form = observe(agent, target, json!({}));
    assert_eq!(
        lines.iter().filter(|l| !l.starts_with("##")).count(),
        elements(&json_form).len(),
        "{text}"
    );
    assert!(!json_form.to_string().contains("##"));
    // A diff lists what changed, without grouping lines.
    let since = observe(
        agent,
        target,
        json!({"format": "compact", "sinceObservationId": compact["observationId"]}),
    );
    assert_eq!(since["compact"], "", "{since}");
}

/// Item 1 and 2 on the 2,000-row table: a click that inserts one row returns (with `observe:
/// {sinceObservationId}`) a diff under 5% of the full Observation; unchanged rows keep their
/// ref numbers in a later full Observation of the same document.
fn one_inserted_row_is_a_small_diff_and_rows_keep_their_refs(
    agent: &mut Agent,
    target: &Value,
) -> Value {
    let full = observe(agent, target, json!({"limit": ALL}));
    assert_eq!(full["truncated"], false, "{}", full["truncationReasons"]);
    let before = refs_by_name(&full);
    assert!(before.len() > 2_000, "{} elements", before.len());
    let unique: HashSet<u64> = before.values().copied().collect();
    assert_eq!(unique.len(), before.len(), "refs are unique");

    let insert = ref_named(&full, "Insert row");
    let clicked = act(
        agent,
        target,
        "browser.click",
        &full["observationId"],
        insert,
        json!({"observe": {"limit": ALL, "sinceObservationId": full["observationId"]}}),
    );
    assert_eq!(
        clicked["evidence"]["action"], "click",
        "{}",
        clicked["evidence"]
    );
    let diff = &clicked["diff"];
    assert_eq!(
        diff["baseObservationId"], full["observationId"],
        "{clicked}"
    );
    assert!(clicked.get("diffUnavailable").is_none());
    let added = int_list(&diff["added"]);
    assert_eq!(added.len(), 1, "{diff}");
    assert!(!unique.contains(&added[0]), "a new element gets a new ref");
    let delta = elements(&clicked);
    let new_row = delta
        .iter()
        .find(|e| e["ref"] == added[0])
        .unwrap_or_else(|| panic!("the added row is sent: {clicked}"));
    assert_eq!(new_row["name"], "Order new");
    assert_eq!(new_row["role"], "link");
    // Only the clicked button can have changed (it took focus); the rows below the new one
    // moved, which is counted, not sent.
    for change in diff["changed"].as_array().unwrap() {
        assert_eq!(change["ref"], insert, "{change}");
    }
    assert_eq!(int_list(&diff["removed"]), Vec::<u64>::new());
    let unchanged = diff["unchanged"].as_u64().unwrap() as usize;
    assert_eq!(
        unchanged + diff["changed"].as_array().unwrap().len(),
        before.len()
    );
    assert!(diff["moved"].as_u64().unwrap() >= 999, "{diff}");
    assert_eq!(delta.len(), 1 + diff["changed"].as_array().unwrap().len());
    let (diff_bytes, full_bytes) = (bytes(&clicked), bytes(&full));
    eprintln!(
        "rows: full {full_bytes} bytes, diff {diff_bytes} bytes ({:.2}%)",
        100.0 * diff_bytes as f64 / full_bytes as f64
    );
    assert!(
        diff_bytes * 20 < full_bytes,
        "diff {diff_bytes} bytes vs full {full_bytes}"
    );

    let again = observe(agent, target, json!({"limit": ALL}));
    let after = refs_by_name(&again);
    for (name, element_ref) in &before {
        assert_eq!(after.get(name), Some(element_ref), "{name} kept its ref");
    }
    assert_eq!(after["Order new"], added[0]);
    // Document order, not ref order: the new row sits between rows 999 and 1000.
    let names: Vec<&str> = elements(&again)
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    let at = names.iter().position(|n| *n == "Order new").unwrap();
    assert_eq!((names[at - 1], names[at + 1]), ("Order 999", "Order 1000"));
    again
}

/// The diff's own id resolves refs of its base (unchanged elements it did not send) and of its
/// delta; hints name only such refs; a removed row is listed; a typed value is a changed field.
fn the_diff_id_resolves_base_and_delta_refs(agent: &mut Agent, target: &Value, full: &Value) {
    let diff = observe(
        agent,
        target,
        json!({"limit": ALL, "sinceObservationId": full["observationId"]}),
    );
    assert_eq!(
        int_list(&diff["diff"]["added"]),
        Vec::<u64>::new(),
        "{diff}"
    );
    assert!(elements(&diff).len() <= 1, "{diff}");
    let resolvable: HashSet<u64> = refs_by_name(full).values().copied().collect();
    for hint_ref in hint_refs(&diff) {
        assert!(resolvable.contains(&hint_ref), "hint ref {hint_ref}");
    }

    // A base ref (never sent by the diff) acted on through the diff's id.
    let row_5 = ref_named(full, "Order 5");
    let drop = ref_named(full, "Remove row 5");
    let dropped = act(
        agent,
        target,
        "browser.click",
        &diff["observationId"],
        drop,
        json!({"observe": {"limit": ALL, "sinceObservationId": diff["observationId"]}}),
    );
    assert_eq!(
        int_list(&dropped["diff"]["removed"]),
        vec![row_5],
        "{}",
        dropped["diff"]
    );
    assert_eq!(dropped["diff"]["baseObservationId"], diff["observationId"]);

    // A typed value is a changed field of the same ref.
    let filter = ref_named(full, "Filter");
    let typed = act(
        agent,
        target,
        "browser.type",
        &dropped["observationId"],
        filter,
        json!({"text": "abc", "observe": {"limit": ALL, "sinceObservationId": dropped["observationId"]}}),
    );
    let changes = typed["diff"]["changed"].as_array().unwrap();
    let change = changes
        .iter()
        .find(|c| c["ref"] == filter)
        .unwrap_or_else(|| panic!("filter changed: {}", typed["diff"]));
    let fields: Vec<&str> = change["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(fields.contains(&"value"), "{change}");
    let sent = elements(&typed)
        .iter()
        .find(|e| e["ref"] == filter)
        .unwrap();
    assert_eq!(sent["value"], "abc");

    // The removed row's ref does not resolve to anything else later.
    let (code, _) = agent.tool_err(
        "browser.click",
        Some(target),
        json!({"observationId": typed["observationId"], "ref": row_5}),
    );
    assert_eq!(code, "stale_ref");
}

/// Item 3: one line per element with the same refs; a password's value never appears; the
/// manifest annotates the text field like the elements.
fn the_compact_form_keeps_refs_and_no_password(agent: &mut Agent, target: &Value) {
    let json_form = &observe(agent, target, json!({"limit": ALL}));
    let secret = "hunter2-Zq";
    let password = ref_named(json_form, "Password");
    act(
        agent,
        target,
        "browser.type",
        &json_form["observationId"],
        password,
        json!({"text": secret}),
    );
    let compact = observe(agent, target, json!({"limit": ALL, "format": "compact"}));
    assert!(compact.get("elements").is_none(), "no JSON elements");
    let text = compact["compact"].as_str().unwrap();
    assert!(!text.contains(secret), "password value in the compact text");
    assert!(!compact.to_string().contains(secret));
    let full = observe(agent, target, json!({"limit": ALL}));
    // Element lines; grouping lines (`## main > table`) have no ref.
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with("##")).collect();
    assert_eq!(lines.len(), elements(&full).len());
    for (line, element) in lines.iter().zip(elements(&full)) {
        let (first, _) = line.split_once(' ').unwrap();
        assert_eq!(
            first.parse::<u64>().unwrap(),
            element["ref"].as_u64().unwrap()
        );
    }
    let password_line = lines
        .iter()
        .find(|l| l.starts_with(&format!("{password} ")))
        .unwrap();
    assert!(
        password_line.contains("sensitive") && password_line.contains("len=10"),
        "{password_line}"
    );
    let checkbox = lines.iter().find(|l| l.contains("\"Show done\"")).unwrap();
    assert!(
        checkbox.contains("checkbox") && checkbox.contains("unchecked"),
        "{checkbox}"
    );
    let filter = lines.iter().find(|l| l.contains("\"Filter\"")).unwrap();
    assert!(filter.contains("=\"abc\""), "{filter}");
    let per_element = text.len() as f64 / lines.len() as f64;
    let json_per_element = bytes(&full["elements"]) as f64 / lines.len() as f64;
    eprintln!("rows: compact {per_element:.1} bytes/element, JSON {json_per_element:.1}");
    assert!(per_element <= 90.0, "{per_element} bytes per element");

    // The manifest's annotation of the text field.
    let listed = agent.bridge.ok(
        "tools/list",
        json!({"workspaceId": agent.workspace_id, "leaseId": agent.lease_id}),
    );
    let observe_tool = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "browser.observe")
        .unwrap();
    assert_eq!(
        observe_tool["outputSchema"]["properties"]["compact"]["x-browser-pilot-sensitivity"],
        json!(["browser_data"])
    );
}

/// Item 4: `maxTokens` on observe, read and search: the estimate stays within the budget,
/// `truncated` says `tokens`, and the viewport's elements are kept before the rest.
fn token_budgets_keep_the_viewport_first(agent: &mut Agent, target: &Value) {
    let full = observe(agent, target, json!({"limit": ALL}));
    let budget = 1_500u64;
    let cut = observe(agent, target, json!({"limit": ALL, "maxTokens": budget}));
    assert_eq!(cut["truncated"], true);
    let reasons = cut["truncationReasons"].as_array().unwrap();
    assert!(reasons.contains(&json!("tokens")), "{reasons:?}");
    let estimated = cut["estimatedTokens"].as_u64().unwrap();
    assert!(estimated <= budget, "{estimated}");
    // The estimator: bytes / 2.7, of the result as sent.
    assert!(
        bytes(&cut) as u64 * 10 <= budget * 27,
        "{} bytes for {budget} tokens",
        bytes(&cut)
    );
    let kept: HashSet<u64> = elements(&cut)
        .iter()
        .map(|e| e["ref"].as_u64().unwrap())
        .collect();
    assert!(!kept.is_empty());
    let in_view: Vec<u64> = elements(&full)
        .iter()
        .filter(|e| e["inViewport"] == true)
        .map(|e| e["ref"].as_u64().unwrap())
        .collect();
    let outside_kept = elements(&cut).iter().any(|e| e["inViewport"] != true);
    if outside_kept {
        for element_ref in &in_view {
            assert!(
                kept.contains(element_ref),
                "viewport ref {element_ref} dropped"
            );
        }
    } else {
        assert!(kept.len() <= in_view.len());
    }
    // Kept elements stay in document order.
    let order: Vec<u64> = elements(&full)
        .iter()
        .map(|e| e["ref"].as_u64().unwrap())
        .filter(|r| kept.contains(r))
        .collect();
    let sent: Vec<u64> = elements(&cut)
        .iter()
        .map(|e| e["ref"].as_u64().unwrap())
        .collect();
    assert_eq!(sent, order);
    // A ref no Observation of the document showed is stale_ref (the refs the budget left out
    // here were shown by `full`, so they still resolve: refs live as long as their document).
    let unshown = elements(&full)
        .iter()
        .map(|e| e["ref"].as_u64().unwrap())
        .max()
        .unwrap()
        + 1_000;
    let (code, _) = agent.tool_err(
        "browser.click",
        Some(target),
        json!({"observationId": cut["observationId"], "ref": unshown}),
    );
    assert_eq!(code, "stale_ref");
    for hint_ref in hint_refs(&cut) {
        assert!(kept.contains(&hint_ref), "hint ref {hint_ref} not returned");
    }

    let read = agent.tool("browser.read", Some(target), json!({"maxTokens": 200}));
    assert_eq!(read["truncated"], true);
    assert_eq!(read["truncationReasons"], json!(["tokens"]));
    assert!(read["estimatedTokens"].as_u64().unwrap() <= 200);
    assert!(bytes(&read) <= 540, "{} bytes", bytes(&read));
    assert!(
        read["text"].as_str().unwrap().starts_with("Orders"),
        "{read}"
    );
    let whole = agent.tool("browser.read", Some(target), json!({"maxChars": 1_000_000}));
    assert!(whole["text"].as_str().unwrap().len() > 20_000);

    let found = agent.tool(
        "browser.search",
        Some(target),
        json!({"query": "Order 1", "limit": 200, "maxTokens": 400}),
    );
    assert_eq!(found["truncated"], true);
    assert!(
        found["truncationReasons"]
            .as_array()
            .unwrap()
            .contains(&json!("tokens"))
    );
    assert!(bytes(&found) <= 1_080, "{} bytes", bytes(&found));
    let matches = found["matches"].as_array().unwrap();
    assert!(!matches.is_empty());
    assert!(matches.iter().all(|m| m["inViewport"] == true), "{found}");
}

/// The no-progress detector keeps hashing the full page: the same no-op click three times,
/// each result a diff against the last, is reported on the third.
fn repeated_no_op_actions_with_diffs_still_count_as_no_progress(agent: &mut Agent, target: &Value) {
    let mut current = observe(agent, target, json!({"limit": ALL}));
    let noop = ref_named(&current, "Apply nothing");
    for round in 1..=3 {
        current = act(
            agent,
            target,
            "browser.click",
            &current["observationId"],
            noop,
            json!({"observe": {"limit": ALL, "sinceObservationId": current["observationId"], "format": "compact"}}),
        );
        assert!(current.get("diff").is_some(), "{current}");
        let repeated = current["hints"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["code"] == "repeated_action");
        assert_eq!(repeated, round == 3, "round {round}: {}", current["hints"]);
    }
}

/// Item 2's fallbacks: an unknown base, another frame, another document.
fn a_base_that_is_gone_gives_a_full_observation(agent: &mut Agent, target: &Value, rig: &Rig) {
    let unknown = observe(
        agent,
        target,
        json!({"sinceObservationId": "observation:gone"}),
    );
    assert_eq!(unknown["diffUnavailable"], "expired");
    assert!(unknown.get("diff").is_none());
    assert!(!elements(&unknown).is_empty());

    let main = observe(agent, target, json!({}));
    let listed = agent.tool("browser.frames.list", Some(target), json!({}));
    let side = listed["frames"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "side")
        .unwrap_or_else(|| panic!("no side frame: {listed}"))["frameId"]
        .clone();
    let main_frame = listed["selectedFrameId"].clone();
    agent.tool(
        "browser.frames.select",
        Some(target),
        json!({"frameId": side}),
    );
    let in_frame = observe(
        agent,
        target,
        json!({"sinceObservationId": main["observationId"]}),
    );
    assert_eq!(in_frame["diffUnavailable"], "other_frame");
    assert_eq!(refs_by_name(&in_frame).len(), 1, "{in_frame}");
    assert!(refs_by_name(&in_frame).contains_key("Side button"));
    agent.tool(
        "browser.frames.select",
        Some(target),
        json!({"frameId": main_frame}),
    );

    let before = observe(agent, target, json!({}));
    agent.tool(
        "browser.navigate",
        Some(target),
        json!({"action": "goto", "url": rig.fixtures.url("/fixture/rows")}),
    );
    let reloaded = observe(
        agent,
        target,
        json!({"limit": ALL, "sinceObservationId": before["observationId"]}),
    );
    assert_eq!(reloaded["diffUnavailable"], "other_document");
    assert!(elements(&reloaded).len() > 2_000);
    // A new document starts a new numbering.
    let first_refs: Vec<u64> = elements(&reloaded)
        .iter()
        .take(3)
        .map(|e| e["ref"].as_u64().unwrap())
        .collect();
    assert_eq!(first_refs, vec![1, 2, 3]);
}

/// The 20,000-element page fits the default 4 MiB result complete in compact form.
fn a_20000_element_page_is_complete_in_compact_form(agent: &mut Agent, target: &Value, rig: &Rig) {
    agent.tool(
        "browser.navigate",
        Some(target),
        json!({"action": "goto", "url": rig.fixtures.url("/gen?n=20000")}),
    );
    let compact = observe(
        agent,
        target,
        json!({"limit": 25_000, "format": "compact", "maxBytes": 4_000_000}),
    );
    assert_eq!(
        compact["truncated"], false,
        "{}",
        compact["truncationReasons"]
    );
    let text = compact["compact"].as_str().unwrap();
    let lines = text.lines().filter(|l| !l.starts_with("##")).count();
    assert_eq!(lines as u64, compact["candidateCount"].as_u64().unwrap());
    assert!(lines >= 20_000, "{lines}");
    let total = bytes(&compact);
    eprintln!(
        "gen 20000: compact result {total} bytes, {:.1} bytes/element",
        text.len() as f64 / lines as f64
    );
    assert!(total < 4 << 20, "{total} bytes");
}
