//! Process tests of the agent's view of real widget libraries (issue 31): jQuery and jQuery UI,
//! pinned and installed from npm (`scripts/test` puts them in target/widget-libs and names the
//! directory in BROWSER_PILOT_WIDGET_LIBS_DIR; without it the test installs them into a scratch
//! directory), served with the fixture tests/fixtures/widgets/widgets.html from 127.0.0.1. For
//! each widget the control appears with a role and name an agent can use, and the action on it
//! has the intended effect, read back from the page; listener-only controls (with and without a
//! pointer cursor, delegated or not) appear as their own elements.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};

use crate::support::rig::{Agent, Rig, find_ref};
use serde_json::{Value, json};

/// The pinned packages (scripts/test installs the same).
const JQUERY: &str = "jquery@3.7.1";
const JQUERY_UI: &str = "jquery-ui@1.14.2";

/// The widget libraries' directory: BROWSER_PILOT_WIDGET_LIBS_DIR, else a scratch install.
fn widget_libs() -> (PathBuf, Option<tempfile::TempDir>) {
    crate::support::npm_packages(
        "BROWSER_PILOT_WIDGET_LIBS_DIR",
        "node_modules/jquery-ui/dist/jquery-ui.js",
        &[JQUERY, JQUERY_UI],
    )
}

/// Serves the widget page at `/widgets` and the libraries under `/lib/`, from 127.0.0.1.
fn serve_widgets(libs: &Path) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let modules = libs.join("node_modules");
    let files: Vec<(&str, PathBuf, &str)> = vec![
        (
            "/widgets",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/widgets/widgets.html"),
            "text/html",
        ),
        (
            "/lib/jquery.js",
            modules.join("jquery/dist/jquery.js"),
            "text/javascript",
        ),
        (
            "/lib/jquery-ui.js",
            modules.join("jquery-ui/dist/jquery-ui.js"),
            "text/javascript",
        ),
        (
            "/lib/jquery-ui.css",
            modules.join("jquery-ui/dist/themes/base/jquery-ui.css"),
            "text/css",
        ),
    ];
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let files = files.clone();
            std::thread::spawn(move || answer(stream, &files));
        }
    });
    port
}

fn answer(stream: TcpStream, files: &[(&str, PathBuf, &str)]) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => break,
            Ok(_) if header == "\r\n" || header == "\n" => break,
            Ok(_) => {}
        }
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("/");
    let found = files.iter().find(|(name, _, _)| *name == path);
    let (status, kind, body) = match found
        .and_then(|(_, file, kind)| std::fs::read(file).ok().map(|body| (*kind, body)))
    {
        Some((kind, body)) => ("200 OK", kind, body),
        None => ("404 Not Found", "text/plain", Vec::new()),
    };
    let mut stream = stream;
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&body);
    let _ = stream.flush();
    let mut rest = Vec::new();
    let _ = reader.read_to_end(&mut rest);
}

/// One Chromium, one widget server; each scenario opens its own tab.
#[test]
fn real_widgets_are_seen_and_used() {
    let rig = Rig::start();
    let (libs, _scratch) = widget_libs();
    let port = serve_widgets(&libs);
    let url = format!("http://127.0.0.1:{port}/widgets");
    listener_only_controls_appear_and_work(&rig, &url);
    listener_controls_added_later_appear(&rig, &url);
    autocomplete_menu_items_are_options(&rig, &url);
    datepicker_months_and_days(&rig, &url);
    slider_moves_by_keyboard(&rig, &url);
    sortable_and_draggable_items_move(&rig, &url);
    accordion_tabs_and_menu(&rig, &url);
    long_values_are_read_whole(&rig, &url);
}

fn open(rig: &Rig, client: &str, url: &str) -> (Agent, Value) {
    let mut agent = Agent::new(rig, client);
    agent.connect();
    let opened = agent.tool("browser.open", None, json!({"url": url}));
    let tab = opened["targetId"].clone();
    // The libraries set the widgets up on DOMContentLoaded; wait for the last of them.
    agent.tool(
        "browser.wait",
        Some(&tab),
        json!({"selector": "#menu.ui-menu"}),
    );
    (agent, tab)
}

fn observe(agent: &mut Agent, tab: &Value) -> Value {
    agent.tool("browser.observe", Some(tab), json!({"limit": 400}))
}

/// The visible text of the first element matching `selector`.
fn text_of(agent: &mut Agent, tab: &Value, selector: &str) -> String {
    agent.tool("browser.read", Some(tab), json!({"selector": selector}))["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn click(agent: &mut Agent, tab: &Value, observation: &Value, element_ref: u64) -> Value {
    agent.tool(
        "browser.click",
        Some(tab),
        json!({"observationId": observation["observationId"], "ref": element_ref}),
    )
}

fn element<'a>(observation: &'a Value, name: &str) -> Option<&'a Value> {
    observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
}

fn listener_only_controls_appear_and_work(rig: &Rig, url: &str) {
    let (mut agent, tab) = open(rig, "com.example.listeners", url);
    let observation = observe(&mut agent, &tab);
    // Each element with its own click listener, with and without a pointer cursor, is a
    // control named by its text (the icon by its title); the delegated list's items are
    // options of their own, and the list itself is not an element.
    let cases = [
        ("clickable", "Span go", "l-span"),
        ("clickable", "Plain span go", "l-plain-span"),
        ("clickable", "Div go", "l-div"),
        ("clickable", "Pointer div go", "l-pointer-div"),
        ("clickable", "Li go", "l-li"),
        ("clickable", "Td go", "l-td"),
        ("clickable", "Plain td go", "l-plain-td"),
        ("clickable", "Settings", "icon"),
        ("option", "Green", "choice green"),
        ("option", "Red", "choice red"),
        // Inside a web component's open shadow root, and one nested in it.
        ("clickable", "Add to cart", "shadow add"),
        ("clickable", "Increase", "shadow increase"),
    ];
    for (role, name, _) in cases {
        let found = element(&observation, name)
            .unwrap_or_else(|| panic!("no {name:?} in {}", observation["elements"]));
        assert_eq!(found["role"], role, "{found}");
    }
    assert!(
        observation["elements"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["name"] != "Red Green"),
        "the delegating list does not stand in for its items"
    );
    for (role, name, logged) in cases {
        let observation = observe(&mut agent, &tab);
        let clicked = click(
            &mut agent,
            &tab,
            &observation,
            find_ref(&observation, role, name),
        );
        assert_eq!(clicked["evidence"]["action"], "click", "{clicked}");
        assert_eq!(text_of(&mut agent, &tab, "#log"), logged, "{name}");
    }
}

/// The listener listing is kept per document until it changes: a control inserted later, or
/// armed later in place with a class change, or rendered later inside a web component's shadow
/// root, is in the next Observation (the action's own).
fn listener_controls_added_later_appear(rig: &Rig, url: &str) {
    let (mut agent, tab) = open(rig, "com.example.later", url);
    let first = observe(&mut agent, &tab);
    let again = observe(&mut agent, &tab);
    for observation in [&first, &again] {
        assert!(element(observation, "Late go").is_none(), "not there yet");
        assert!(
            element(observation, "Checkout").is_none(),
            "not rendered yet"
        );
        assert!(
            element(observation, "Armed go").is_none_or(|e| e["role"] != "clickable"),
            "no listener yet"
        );
    }
    let added = click(
        &mut agent,
        &tab,
        &again,
        find_ref(&again, "button", "Add later"),
    );
    let late = element(&added, "Late go")
        .unwrap_or_else(|| panic!("inserted control in {}", added["elements"]));
    assert_eq!(late["role"], "clickable", "{late}");
    let armed = click(
        &mut agent,
        &tab,
        &added,
        find_ref(&added, "button", "Arm later"),
    );
    let armed_element = element(&armed, "Armed go")
        .unwrap_or_else(|| panic!("armed control in {}", armed["elements"]));
    assert_eq!(armed_element["role"], "clickable", "{armed_element}");
    let carted = click(
        &mut agent,
        &tab,
        &armed,
        find_ref(&armed, "clickable", "Add to cart"),
    );
    let checkout = element(&carted, "Checkout").unwrap_or_else(|| {
        panic!(
            "control rendered in the shadow root in {}",
            carted["elements"]
        )
    });
    assert_eq!(checkout["role"], "clickable", "{checkout}");
    for (name, logged) in [
        ("Late go", "l-late"),
        ("Armed go", "l-armed"),
        ("Checkout", "shadow checkout"),
    ] {
        let observation = observe(&mut agent, &tab);
        click(
            &mut agent,
            &tab,
            &observation,
            find_ref(&observation, "clickable", name),
        );
        assert_eq!(text_of(&mut agent, &tab, "#log"), logged, "{name}");
    }
}

fn autocomplete_menu_items_are_options(rig: &Rig, url: &str) {
    let (mut agent, tab) = open(rig, "com.example.autocomplete", url);
    let observation = observe(&mut agent, &tab);
    let tags = find_ref(&observation, "textbox", "Tags");
    agent.tool(
        "browser.type",
        Some(&tab),
        json!({"observationId": observation["observationId"], "ref": tags, "text": "a"}),
    );
    let observation = observe(&mut agent, &tab);
    // The menu's items (listeners delegated to the menu) are options, named by their text.
    let apple = find_ref(&observation, "option", "AppleScript");
    find_ref(&observation, "option", "ActionScript");
    click(&mut agent, &tab, &observation, apple);
    let observation = observe(&mut agent, &tab);
    let field = element(&observation, "Tags").unwrap();
    assert_eq!(field["value"], "AppleScript", "{field}");
}

fn datepicker_months_and_days(rig: &Rig, url: &str) {
    let (mut agent, tab) = open(rig, "com.example.datepicker", url);
    let observation = observe(&mut agent, &tab);
    click(
        &mut agent,
        &tab,
        &observation,
        find_ref(&observation, "textbox", "Date"),
    );
    let observation = observe(&mut agent, &tab);
    // Prev and Next are `<a>` without href, clickable through their own listeners.
    let month = text_of(&mut agent, &tab, ".ui-datepicker-title");
    click(
        &mut agent,
        &tab,
        &observation,
        find_ref(&observation, "clickable", "Next"),
    );
    let next = text_of(&mut agent, &tab, ".ui-datepicker-title");
    assert_ne!(next, month, "Next shows another month");
    let observation = observe(&mut agent, &tab);
    click(
        &mut agent,
        &tab,
        &observation,
        find_ref(&observation, "clickable", "Prev"),
    );
    assert_eq!(text_of(&mut agent, &tab, ".ui-datepicker-title"), month);
    // A day cell's link picks the date.
    let observation = observe(&mut agent, &tab);
    let day = observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["role"] == "link" && e["name"] == "15")
        .unwrap_or_else(|| panic!("no day 15 in {}", observation["elements"]))["ref"]
        .as_u64()
        .unwrap();
    click(&mut agent, &tab, &observation, day);
    let picked = text_of(&mut agent, &tab, "#date-picked");
    assert!(
        picked.starts_with("picked ") && picked.contains("/15/"),
        "{picked}"
    );
}

fn slider_moves_by_keyboard(rig: &Rig, url: &str) {
    let (mut agent, tab) = open(rig, "com.example.slider", url);
    let observation = observe(&mut agent, &tab);
    // The handle is a focusable `<span tabindex=0>` without a pointer cursor.
    let handle = observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["role"] == "slider")
        .unwrap_or_else(|| panic!("no slider in {}", observation["elements"]))["ref"]
        .clone();
    for _ in 0..2 {
        let observation = observe(&mut agent, &tab);
        agent.tool(
            "browser.press",
            Some(&tab),
            json!({"observationId": observation["observationId"], "ref": handle, "key": "ArrowRight"}),
        );
    }
    assert_eq!(text_of(&mut agent, &tab, "#slider-value"), "2");
}

fn sortable_and_draggable_items_move(rig: &Rig, url: &str) {
    let (mut agent, tab) = open(rig, "com.example.sortable", url);
    let observation = observe(&mut agent, &tab);
    // The sortable's listener is on the list: each item is its own element.
    let first = find_ref(&observation, "clickable", "Item 1");
    let third = find_ref(&observation, "clickable", "Item 3");
    agent.tool(
        "browser.drag",
        Some(&tab),
        json!({"observationId": observation["observationId"], "ref": first, "toRef": third}),
    );
    let order = text_of(&mut agent, &tab, "#order");
    assert!(!order.starts_with("Item 1,"), "{order}");
    assert!(order.contains("Item 1"), "{order}");

    let observation = observe(&mut agent, &tab);
    let dragged = element(&observation, "Drag me").unwrap().clone();
    assert_eq!(dragged["role"], "clickable", "{dragged}");
    let (x, y) = (
        dragged["bounds"]["x"].as_f64().unwrap(),
        dragged["bounds"]["y"].as_f64().unwrap(),
    );
    agent.tool(
        "browser.drag",
        Some(&tab),
        json!({"observationId": observation["observationId"], "ref": dragged["ref"],
            "toX": x + 250.0, "toY": y + 30.0}),
    );
    assert_eq!(text_of(&mut agent, &tab, "#drag-stop"), "yes");
    let observation = observe(&mut agent, &tab);
    let moved = element(&observation, "Drag me").unwrap();
    assert!(
        moved["bounds"]["x"].as_f64().unwrap() > x + 100.0,
        "{moved} from {x}"
    );
}

fn accordion_tabs_and_menu(rig: &Rig, url: &str) {
    let (mut agent, tab) = open(rig, "com.example.accordion", url);
    let observation = observe(&mut agent, &tab);
    assert!(!text_of(&mut agent, &tab, "#accordion").contains("Second panel text"));
    click(
        &mut agent,
        &tab,
        &observation,
        find_ref(&observation, "tab", "Section Two"),
    );
    assert!(text_of(&mut agent, &tab, "#accordion").contains("Second panel text"));

    let observation = observe(&mut agent, &tab);
    click(
        &mut agent,
        &tab,
        &observation,
        find_ref(&observation, "tab", "Beta"),
    );
    let tabs = text_of(&mut agent, &tab, "#tabs");
    assert!(
        tabs.contains("Beta content") && !tabs.contains("Alpha content"),
        "{tabs}"
    );

    let observation = observe(&mut agent, &tab);
    click(
        &mut agent,
        &tab,
        &observation,
        find_ref(&observation, "menuitem", "Music"),
    );
    assert_eq!(text_of(&mut agent, &tab, "#menu-picked"), "Music");
}

fn long_values_are_read_whole(rig: &Rig, url: &str) {
    let (mut agent, tab) = open(rig, "com.example.values", url);
    let observation = observe(&mut agent, &tab);
    // The Observation cuts the value and says how long it is.
    let long = element(&observation, "Long text").unwrap();
    assert_eq!(long["valueLength"], 2000, "{long}");
    assert!(long["value"].as_str().unwrap().len() < 2000);
    // browser.read of the control returns the whole value.
    let whole = agent.tool("browser.read", Some(&tab), json!({"selector": "#long"}));
    let text = whole["text"].as_str().unwrap();
    assert_eq!(text.chars().count(), 2000, "{whole}");
    assert!(text.starts_with("line 0 of the long value.") && text.ends_with("END-MARKER"));
    assert_eq!(whole["valueLength"], 2000);
    assert_eq!(whole["truncated"], false);
    // Paged: a bounded piece from an offset, saying there is more.
    let piece = agent.tool(
        "browser.read",
        Some(&tab),
        json!({"selector": "#long", "offset": 1000, "maxChars": 500}),
    );
    assert_eq!(piece["text"].as_str().unwrap(), &text[1000..1500]);
    assert_eq!(piece["truncated"], true, "{piece}");
    assert_eq!(piece["offset"], 1000);
    let tail = agent.tool(
        "browser.read",
        Some(&tab),
        json!({"selector": "#long", "offset": 1500, "maxChars": 500}),
    );
    assert_eq!(tail["text"].as_str().unwrap(), &text[1500..]);
    assert_eq!(tail["truncated"], false, "{tail}");
    // The compact form says the value was cut and how to read the rest: the ref, from an offset.
    let compact = agent.tool("browser.observe", Some(&tab), json!({"format": "compact"}));
    let line = compact["compact"]
        .as_str()
        .unwrap()
        .lines()
        .find(|line| line.contains("\"Long text\""))
        .unwrap_or_else(|| panic!("{compact}"))
        .to_owned();
    assert!(
        line.contains("len=2000 cut: read the ref with offset"),
        "{line}"
    );
    // Read by that ref: the rest of the value from where the Observation's cut it.
    let shown = long["value"].as_str().unwrap().trim_end_matches('\u{2026}');
    let by_ref = json!({
        "observationId": observation["observationId"],
        "ref": long["ref"],
        "offset": shown.chars().count(),
    });
    let rest = agent.tool("browser.read", Some(&tab), by_ref);
    assert_eq!(
        format!("{shown}{}", rest["text"].as_str().unwrap()),
        text,
        "{rest}"
    );
    assert_eq!(rest["valueLength"], 2000);
    assert_eq!(rest["truncated"], false, "{rest}");
    // A selector and a ref together are refused, naming the conflict.
    let (code, both) = agent.tool_err(
        "browser.read",
        Some(&tab),
        json!({"selector": "#long", "observationId": observation["observationId"], "ref": long["ref"]}),
    );
    assert_eq!(code, "invalid_params", "{both}");
    // A sensitive field answers only its length, by selector and by ref.
    let secret = agent.tool("browser.read", Some(&tab), json!({"selector": "#secret"}));
    assert_eq!(secret["text"], "", "{secret}");
    assert_eq!(secret["valueLength"], 8);
    assert_eq!(secret["sensitive"], true);
    assert!(!secret.to_string().contains("hunter22"));
    let field = observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["sensitive"] == true)
        .unwrap_or_else(|| panic!("{observation}"));
    let secret = agent.tool(
        "browser.read",
        Some(&tab),
        json!({"observationId": observation["observationId"], "ref": field["ref"]}),
    );
    assert_eq!(secret["text"], "", "{secret}");
    assert_eq!(secret["valueLength"], 8);
    assert!(!secret.to_string().contains("hunter22"));
}
