//! Process tests of keyboard input as a page sees it, against a real headless Chromium and
//! fixture pages served from 127.0.0.1: typing evidence counted in Unicode code points (emoji
//! included) and compared after the browser's normalisation (a colour `#AbCd00` is `#abcd00`);
//! keys a page cancels are a `mismatch` for `browser.type` and `browser.keyboard` alike; every
//! US-layout character arrives with its real `key`/`code`/`keyCode` and Shift around shifted
//! ones, characters without a US key as one editing insertion; `browser.press` chords hold their
//! modifiers around the key; and date/time/colour/range inputs receive `beforeinput` then
//! `input`, with `change` only when the edit is committed (blur or submit).

use crate::support;

use serde_json::{Value, json};
use support::chromium::OwnCdp;
use support::rig::{Agent, Rig};

/// One Chromium for the whole module: the three scenarios run one after another on it, each
/// with its own bridge, Workspace and tab.
#[test]
fn keyboard_input_as_real_pages_see_it() {
    let rig = Rig::start();
    typing_evidence_counts_code_points_and_compares_normalised_values(&rig);
    keys_carry_the_us_layout_and_chords_hold_their_modifiers(&rig);
    date_time_colour_and_range_get_beforeinput_input_and_change_on_commit(&rig);
}

/// The fixture pages, each phase on its own tab (the fragment tells the tabs apart).
const TYPING_PAGE: &str = "keys#typing";
const CHORDS_PAGE: &str = "keys#chords";
const NATIVE_PAGE: &str = "native-inputs#sequences";

fn open(rig: &Rig, fixture: &str) -> (Agent, Value) {
    let mut agent = Agent::new(rig, "com.example.keys");
    agent.connect();
    let opened = agent.tool(
        "browser.open",
        None,
        json!({"url": rig.fixtures.url(&format!("/fixture/{fixture}"))}),
    );
    (agent, opened["targetId"].clone())
}

fn observe(agent: &mut Agent, target: &Value) -> Value {
    agent.tool("browser.observe", Some(target), json!({"limit": 200}))
}

/// The ref of the first element whose name contains `name`.
fn find_ref(observation: &Value, name: &str) -> u64 {
    observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"].as_str().unwrap_or("").contains(name))
        .unwrap_or_else(|| panic!("no element named {name:?} in {}", observation["elements"]))
        ["ref"]
        .as_u64()
        .unwrap()
}

/// Calls a tool on a ref of a fresh Observation.
fn on_ref(agent: &mut Agent, target: &Value, tool: &str, name: &str, extra: Value) -> Value {
    let observation = observe(agent, target);
    let mut arguments =
        json!({"observationId": observation["observationId"], "ref": find_ref(&observation, name)});
    if let (Some(arguments), Some(extra)) = (arguments.as_object_mut(), extra.as_object()) {
        arguments.extend(extra.clone());
    }
    agent.tool(tool, Some(target), arguments)
}

/// Like `on_ref`, for a call that must fail: (code, error).
fn on_ref_err(
    agent: &mut Agent,
    target: &Value,
    tool: &str,
    name: &str,
    extra: Value,
) -> (String, Value) {
    let observation = observe(agent, target);
    let mut arguments =
        json!({"observationId": observation["observationId"], "ref": find_ref(&observation, name)});
    if let (Some(arguments), Some(extra)) = (arguments.as_object_mut(), extra.as_object()) {
        arguments.extend(extra.clone());
    }
    agent.tool_err(tool, Some(target), arguments)
}

/// Evaluates `expression` (which yields a JSON string) in the page's main world through the
/// test's own CDP connection, as another tool on the machine would.
fn page_json(own: &mut OwnCdp, fixture: &str, expression: &str) -> Value {
    let result = own.evaluate_in_page(&format!("/fixture/{fixture}"), expression);
    let text = result["result"]["value"]
        .as_str()
        .unwrap_or_else(|| panic!("{expression} gave {result}"));
    serde_json::from_str(text).unwrap()
}

fn page_value(own: &mut OwnCdp, fixture: &str, id: &str) -> String {
    page_json(
        own,
        fixture,
        &format!("JSON.stringify(document.getElementById('{id}').value)"),
    )
    .as_str()
    .unwrap()
    .to_owned()
}

/// The key events the keys fixture recorded since the last call (and forgets them).
fn take_key_log(own: &mut OwnCdp) -> Vec<Value> {
    page_json(
        own,
        CHORDS_PAGE,
        "JSON.stringify(window.keyLog.splice(0, window.keyLog.length))",
    )
    .as_array()
    .unwrap()
    .clone()
}

/// `type key code keyCode [S][C]` of each keydown/keyup: what a page's key handler sees.
fn key_events(log: &[Value]) -> Vec<String> {
    log.iter()
        .filter(|e| e["type"] == "keydown" || e["type"] == "keyup")
        .map(|e| {
            format!(
                "{} {} {} {}{}{}",
                e["type"].as_str().unwrap(),
                e["key"].as_str().unwrap(),
                e["code"].as_str().unwrap(),
                e["keyCode"],
                if e["shift"] == true { " S" } else { "" },
                if e["ctrl"] == true { " C" } else { "" },
            )
        })
        .collect()
}

/// The key events of typed text, without a lone modifier tap (a modifier's key-down directly
/// followed by its key-up). On a loaded machine the keystroke guard can stop a burst at a shifted
/// character whose Shift already went through; that Shift's key-up passes too, and the character
/// is then typed again, whole, one guarded step at a time (docs/keyboard.md). Typed text never
/// makes a lone tap otherwise, so the comparison still pins every character's stroke.
fn typed_key_events(log: &[Value]) -> Vec<String> {
    const MODIFIERS: [&str; 4] = ["Shift", "Control", "Alt", "Meta"];
    let events = key_events(log);
    let mut kept = Vec::with_capacity(events.len());
    let mut index = 0;
    while index < events.len() {
        let parts: Vec<&str> = events[index].split(' ').collect();
        let tap = parts[0] == "keydown"
            && MODIFIERS.contains(&parts[1])
            && events
                .get(index + 1)
                .is_some_and(|next| next.starts_with(&format!("keyup {} ", parts[1])));
        match tap {
            true => index += 2,
            false => {
                kept.push(events[index].clone());
                index += 1;
            }
        }
    }
    kept
}

fn typing_evidence_counts_code_points_and_compares_normalised_values(rig: &Rig) {
    let (mut agent, target) = open(rig, TYPING_PAGE);
    let mut own = OwnCdp::connect(&rig.chromium);
    // Emoji are one code point each: 9 expected, 9 landed, verified.
    let typed = on_ref(
        &mut agent,
        &target,
        "browser.type",
        "Full name",
        json!({"text": "👋 hello 🌍"}),
    );
    let evidence = &typed["evidence"];
    assert_eq!(evidence["status"], "verified", "{evidence}");
    assert_eq!(evidence["beforeLength"], 0, "{evidence}");
    assert_eq!(evidence["expectedLength"], 9, "{evidence}");
    assert_eq!(evidence["afterLength"], 9, "{evidence}");
    assert_eq!(evidence["keystrokes"], 7, "{evidence}");
    assert_eq!(evidence["insertions"], 2, "{evidence}");
    assert_eq!(page_value(&mut own, TYPING_PAGE, "name"), "👋 hello 🌍");
    // Appending counts the existing emoji the same way.
    let appended = on_ref(
        &mut agent,
        &target,
        "browser.type",
        "Full name",
        json!({"text": "!🎉", "clear": false}),
    );
    let evidence = &appended["evidence"];
    assert_eq!(evidence["status"], "verified", "{evidence}");
    assert_eq!(evidence["beforeLength"], 9, "{evidence}");
    assert_eq!(evidence["expectedLength"], 11, "{evidence}");
    assert_eq!(evidence["afterLength"], 11, "{evidence}");
    assert_eq!(page_value(&mut own, TYPING_PAGE, "name"), "👋 hello 🌍!🎉");
    // Line ends are Enter presses: one line break each in a textarea, CRLF included.
    let lines = on_ref(
        &mut agent,
        &target,
        "browser.type",
        "Message",
        json!({"text": "Hi,\r\nsee you\n🙂"}),
    );
    let evidence = &lines["evidence"];
    assert_eq!(evidence["status"], "verified", "{evidence}");
    assert_eq!(evidence["expectedLength"], 13, "{evidence}");
    assert_eq!(
        page_value(&mut own, TYPING_PAGE, "message"),
        "Hi,\nsee you\n🙂"
    );
    // An email input has no selection API: appending goes through End, as a user would.
    let email = on_ref(
        &mut agent,
        &target,
        "browser.type",
        "Email",
        json!({"text": "@example.org", "clear": false}),
    );
    let evidence = &email["evidence"];
    assert_eq!(evidence["status"], "verified", "{evidence}");
    assert_eq!(evidence["expectedLength"], 15, "{evidence}");
    assert_eq!(
        page_value(&mut own, TYPING_PAGE, "email"),
        "zoe@example.org"
    );
    // A rich-text field (contenteditable) is compared the same way.
    let bio = on_ref(
        &mut agent,
        &target,
        "browser.type",
        "Short bio",
        json!({"text": "Hi, I'm Zoë 👋"}),
    );
    let evidence = &bio["evidence"];
    assert_eq!(evidence["kind"], "contenteditable", "{evidence}");
    assert_eq!(evidence["status"], "verified", "{evidence}");
    assert_eq!(evidence["beforeLength"], 7, "{evidence}");
    assert_eq!(evidence["afterLength"], 13, "{evidence}");
    // A colour is compared as the browser spells it.
    let colour = on_ref(
        &mut agent,
        &target,
        "browser.type",
        "Accent colour",
        json!({"text": "#AbCd00", "verification": "require_exact"}),
    );
    let evidence = &colour["evidence"];
    assert_eq!(evidence["status"], "verified", "{evidence}");
    assert_eq!(evidence["method"], "native_setter");
    assert_eq!(evidence["expectedLength"], 7);
    assert_eq!(evidence["afterLength"], 7);
    assert_eq!(page_value(&mut own, TYPING_PAGE, "accent"), "#abcd00");
    // Something that is no colour is sanitised to black: that did not land.
    let bogus = on_ref(
        &mut agent,
        &target,
        "browser.type",
        "Accent colour",
        json!({"text": "not-a-colour"}),
    );
    assert_eq!(
        bogus["evidence"]["status"], "mismatch",
        "{}",
        bogus["evidence"]
    );
    assert_eq!(page_value(&mut own, TYPING_PAGE, "accent"), "#000000");
    // A page that cancels the keydown of digits: the value lacks them, a mismatch.
    let letters = on_ref(
        &mut agent,
        &target,
        "browser.type",
        "letters only",
        json!({"text": "ab12cd"}),
    );
    let evidence = &letters["evidence"];
    assert_eq!(evidence["status"], "mismatch", "{evidence}");
    assert_eq!(evidence["expectedLength"], 6);
    assert_eq!(evidence["afterLength"], 4);
    assert_eq!(page_value(&mut own, TYPING_PAGE, "letters"), "abcd");
    let (code, error) = on_ref_err(
        &mut agent,
        &target,
        "browser.type",
        "letters only",
        json!({"text": "x9", "verification": "require_exact"}),
    );
    assert_eq!(code, "verification_failed", "{error}");
    // browser.keyboard at the caret: Home, then text lands in front, verified.
    on_ref(
        &mut agent,
        &target,
        "browser.press",
        "letters only",
        json!({"key": "Home"}),
    );
    let before = page_value(&mut own, TYPING_PAGE, "letters");
    let before_length = before.chars().count();
    let front = agent.tool("browser.keyboard", Some(&target), json!({"text": "Zé"}));
    let evidence = &front["evidence"];
    assert_eq!(evidence["status"], "verified", "{evidence}");
    assert_eq!(evidence["expectedLength"], before_length + 2, "{evidence}");
    assert_eq!(evidence["afterLength"], before_length + 2, "{evidence}");
    assert_eq!(evidence["insertions"], 1, "{evidence}");
    assert_eq!(
        page_value(&mut own, TYPING_PAGE, "letters"),
        format!("Zé{before}")
    );
    // browser.keyboard where the page cancels keys: a mismatch, not verified.
    let cancelled = agent.tool("browser.keyboard", Some(&target), json!({"text": "q7w"}));
    let evidence = &cancelled["evidence"];
    assert_eq!(evidence["status"], "mismatch", "{evidence}");
    assert_eq!(evidence["typedLength"], 3);
    assert_eq!(evidence["expectedLength"], before_length + 5, "{evidence}");
    assert_eq!(evidence["afterLength"], before_length + 4, "{evidence}");
    assert_eq!(
        page_value(&mut own, TYPING_PAGE, "letters"),
        format!("Zéqw{before}")
    );
    // A code box that moves focus on once its digit is in: the keyboard cannot tell what the
    // field it typed into now holds from the focused element, so it says so.
    on_ref(
        &mut agent,
        &target,
        "browser.press",
        "Code digit 1",
        json!({"key": "Home"}),
    );
    let moved = agent.tool("browser.keyboard", Some(&target), json!({"text": "7"}));
    let evidence = &moved["evidence"];
    assert_eq!(evidence["status"], "unavailable", "{evidence}");
    assert_eq!(evidence["reason"], "focus_changed", "{evidence}");
    assert_eq!(page_value(&mut own, TYPING_PAGE, "otp1"), "7");
    // browser.type reads the field by its ref, so the same move does not hide the value.
    let typed = on_ref(
        &mut agent,
        &target,
        "browser.type",
        "Code digit 1",
        json!({"text": "4"}),
    );
    assert_eq!(
        typed["evidence"]["status"], "verified",
        "{}",
        typed["evidence"]
    );
}

fn keys_carry_the_us_layout_and_chords_hold_their_modifiers(rig: &Rig) {
    let (mut agent, target) = open(rig, CHORDS_PAGE);
    let mut own = OwnCdp::connect(&rig.chromium);
    take_key_log(&mut own);
    // Shifted characters: Shift down, the character with its unshifted key's code, Shift up.
    let typed = on_ref(
        &mut agent,
        &target,
        "browser.type",
        "Full name",
        json!({"text": "a!^B"}),
    );
    assert_eq!(
        typed["evidence"]["status"], "verified",
        "{}",
        typed["evidence"]
    );
    assert_eq!(
        typed_key_events(&take_key_log(&mut own)),
        vec![
            "keydown a KeyA 65",
            "keyup a KeyA 65",
            "keydown Shift ShiftLeft 16 S",
            "keydown ! Digit1 49 S",
            "keyup ! Digit1 49 S",
            "keyup Shift ShiftLeft 16",
            "keydown Shift ShiftLeft 16 S",
            "keydown ^ Digit6 54 S",
            "keyup ^ Digit6 54 S",
            "keyup Shift ShiftLeft 16",
            "keydown Shift ShiftLeft 16 S",
            "keydown B KeyB 66 S",
            "keyup B KeyB 66 S",
            "keyup Shift ShiftLeft 16",
        ]
    );
    assert_eq!(page_value(&mut own, CHORDS_PAGE, "name"), "a!^B");
    // No US key: one editing insertion each, no key events.
    let inserted = on_ref(
        &mut agent,
        &target,
        "browser.type",
        "Message",
        json!({"text": "é🌍"}),
    );
    assert_eq!(
        inserted["evidence"]["status"], "verified",
        "{}",
        inserted["evidence"]
    );
    let log = take_key_log(&mut own);
    assert_eq!(key_events(&log), Vec::<String>::new(), "{log:?}");
    let edits: Vec<(String, String)> = log
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_owned(),
                format!(
                    "{}:{}",
                    e["inputType"].as_str().unwrap_or(""),
                    e["data"].as_str().unwrap_or("")
                ),
            )
        })
        .collect();
    assert_eq!(
        edits,
        vec![
            ("beforeinput".to_owned(), "insertText:é".to_owned()),
            ("input".to_owned(), "insertText:é".to_owned()),
            ("beforeinput".to_owned(), "insertText:🌍".to_owned()),
            ("input".to_owned(), "insertText:🌍".to_owned()),
        ]
    );
    // Shift+Tab from the message goes back to the letters field.
    let back = on_ref(
        &mut agent,
        &target,
        "browser.press",
        "Message",
        json!({"key": "Tab", "modifiers": ["Shift"]}),
    );
    assert!(
        back["evidence"]["effects"]
            .as_array()
            .unwrap()
            .contains(&json!("focus_changed")),
        "{}",
        back["evidence"]
    );
    let log = take_key_log(&mut own);
    assert_eq!(
        key_events(&log),
        vec![
            "keydown Shift ShiftLeft 16 S",
            "keydown Tab Tab 9 S",
            "keyup Tab Tab 9 S",
            "keyup Shift ShiftLeft 16",
        ]
    );
    assert_eq!(log[0]["target"], "message");
    assert_eq!(
        log[2]["target"], "letters",
        "the keyup goes to the newly focused field"
    );
    let focused = page_json(
        &mut own,
        CHORDS_PAGE,
        "JSON.stringify(document.activeElement.id)",
    );
    assert_eq!(focused, "letters");
    // Control+Shift+A: both modifiers down in order, the key with both, released in reverse.
    agent.tool(
        "browser.press",
        Some(&target),
        json!({"key": "a", "modifiers": ["Control", "Shift"]}),
    );
    assert_eq!(
        key_events(&take_key_log(&mut own)),
        vec![
            "keydown Control ControlLeft 17 C",
            "keydown Shift ShiftLeft 16 S C",
            "keydown A KeyA 65 S C",
            "keyup A KeyA 65 S C",
            "keyup Shift ShiftLeft 16 C",
            "keyup Control ControlLeft 17",
        ]
    );
    let shortcuts = page_json(&mut own, CHORDS_PAGE, "JSON.stringify(window.shortcuts)");
    assert_eq!(shortcuts, json!(["select-none"]));
    // Control+A, the letter in either case: the A key with Control, no Shift (the page's
    // Control+Shift+A shortcut does not fire).
    agent.tool(
        "browser.press",
        Some(&target),
        json!({"key": "A", "modifiers": ["Control"]}),
    );
    assert_eq!(
        key_events(&take_key_log(&mut own)),
        vec![
            "keydown Control ControlLeft 17 C",
            "keydown a KeyA 65 C",
            "keyup a KeyA 65 C",
            "keyup Control ControlLeft 17",
        ]
    );
    let shortcuts = page_json(&mut own, CHORDS_PAGE, "JSON.stringify(window.shortcuts)");
    assert_eq!(shortcuts, json!(["select-none"]));
    // Editing keys on the focused field are effects: its value (Backspace, Delete) or its caret
    // and selection (Home, Shift+End), never no_observable_effect.
    on_ref(
        &mut agent,
        &target,
        "browser.type",
        "Full name",
        json!({"text": "abc"}),
    );
    for (key, modifiers, effect, value, selection) in [
        ("Backspace", json!([]), "value_changed", "ab", [2, 2]),
        ("Home", json!([]), "selection_changed", "ab", [0, 0]),
        (
            "Shift+End",
            json!(["Shift"]),
            "selection_changed",
            "ab",
            [0, 2],
        ),
        ("Delete", json!([]), "value_changed", "", [0, 0]),
    ] {
        let name = key.rsplit('+').next().unwrap();
        let pressed = agent.tool(
            "browser.press",
            Some(&target),
            json!({"key": name, "modifiers": modifiers}),
        );
        let evidence = &pressed["evidence"];
        assert_eq!(evidence["status"], "verified", "{key}: {evidence}");
        assert!(
            evidence["effects"]
                .as_array()
                .unwrap()
                .contains(&json!(effect)),
            "{key}: {evidence}"
        );
        let field = page_json(
            &mut own,
            CHORDS_PAGE,
            "JSON.stringify((e => [e.id, e.value, e.selectionStart, e.selectionEnd])(document.activeElement))",
        );
        assert_eq!(
            field,
            json!(["name", value, selection[0], selection[1]]),
            "{key}"
        );
    }
    take_key_log(&mut own);
    // A key that is neither named nor on the US layout is refused before anything is sent.
    let (code, error) = agent.tool_err("browser.press", Some(&target), json!({"key": "é"}));
    assert_eq!(code, "invalid_params", "{error}");
    assert_eq!(error["data"]["context"]["reason"], "unknown_key");
    assert_eq!(take_key_log(&mut own), Vec::<Value>::new());
}

/// `type(value)` of every event the native-inputs fixture recorded for `id` (and the form).
fn sequence(events: &Value, id: &str) -> Vec<String> {
    events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["target"] == id || e["target"] == "booking")
        .map(|e| {
            format!(
                "{}({})",
                e["type"].as_str().unwrap(),
                e["value"].as_str().unwrap_or("")
            )
        })
        .collect()
}

fn take_events(own: &mut OwnCdp) -> Value {
    page_json(
        own,
        NATIVE_PAGE,
        "JSON.stringify(window.events.splice(0, window.events.length))",
    )
}

fn date_time_colour_and_range_get_beforeinput_input_and_change_on_commit(rig: &Rig) {
    let (mut agent, target) = open(rig, NATIVE_PAGE);
    let mut own = OwnCdp::connect(&rig.chromium);
    let cases = [
        ("Day", "day", "2026-11-30", "2026-11-30"),
        ("Time", "time", "10:30", "10:30"),
        // The browser spells a local date-time with a T.
        ("Arrival", "arrival", "2026-11-30 19:45", "2026-11-30T19:45"),
        ("Napkin colour", "napkin", "#AbCd00", "#abcd00"),
        // A range compares as a number.
        ("Party size", "party", "42.0", "42"),
    ];
    for (name, id, text, landed) in cases {
        let typed = on_ref(
            &mut agent,
            &target,
            "browser.type",
            name,
            json!({"text": text}),
        );
        let evidence = &typed["evidence"];
        assert_eq!(evidence["status"], "verified", "{name}: {evidence}");
        assert_eq!(evidence["method"], "native_setter", "{name}");
        assert_eq!(
            evidence["afterLength"],
            landed.chars().count(),
            "{name}: {evidence}"
        );
        // Focus, then beforeinput and input; no change while the field keeps focus.
        let events = take_events(&mut own);
        let before = if id == "party" {
            "50"
        } else if id == "napkin" {
            "#000000"
        } else {
            ""
        };
        assert_eq!(
            sequence(&events, id),
            vec![
                format!("focus({before})"),
                format!("beforeinput({before})"),
                format!("input({landed})"),
            ],
            "{name}"
        );
        // Moving on commits the edit: change (before blur, as Chromium orders them), once.
        on_ref(
            &mut agent,
            &target,
            "browser.type",
            "Notes",
            json!({"text": "x"}),
        );
        let events = take_events(&mut own);
        assert_eq!(
            sequence(&events, id),
            vec![format!("change({landed})"), format!("blur({landed})")],
            "{name}: {events}"
        );
        assert_eq!(page_value(&mut own, NATIVE_PAGE, id), landed);
    }
    // A clamped range value did not land: mismatch.
    let clamped = on_ref(
        &mut agent,
        &target,
        "browser.type",
        "Party size",
        json!({"text": "150"}),
    );
    assert_eq!(
        clamped["evidence"]["status"], "mismatch",
        "{}",
        clamped["evidence"]
    );
    assert_eq!(page_value(&mut own, NATIVE_PAGE, "party"), "100");
    take_events(&mut own);
    // Submit commits too: change comes before the form's submit, after input.
    let submitted = on_ref(
        &mut agent,
        &target,
        "browser.type",
        "Day",
        json!({"text": "2027-01-02", "submit": true}),
    );
    assert_eq!(
        submitted["evidence"]["status"], "verified",
        "{}",
        submitted["evidence"]
    );
    let events = take_events(&mut own);
    let day: Vec<String> = sequence(&events, "day")
        .into_iter()
        .filter(|e| !e.starts_with("keydown") && !e.starts_with("focus"))
        .collect();
    assert_eq!(
        day,
        vec![
            "beforeinput(2026-11-30)",
            "input(2027-01-02)",
            "change(2027-01-02)",
            "submit(2027-01-02)",
        ],
        "{events}"
    );
    // Enter submits nothing from a colour or range input: refused before any change.
    let (code, error) = on_ref_err(
        &mut agent,
        &target,
        "browser.type",
        "Party size",
        json!({"text": "7", "submit": true}),
    );
    assert_eq!(code, "invalid_params", "{error}");
    assert_eq!(error["data"]["context"]["reason"], "submit_not_supported");
    assert_eq!(page_value(&mut own, NATIVE_PAGE, "party"), "100");
}
