//! Page scripts against a real headless Chromium, driven through the real
//! janitor with the crate's `CdpClient`, on fixture pages served from
//! 127.0.0.1 (`tests/fixtures/pages/`). Each test starts its own browser.
//! Covers observe (roles, names, states, password redaction, shadow DOM,
//! visibility, truncation, page metrics), every observation hint, read,
//! search, find, resolve across navigation, and the action helpers.

use crate::support::pages::{Browser, FixtureServer, Tab, WAIT, client_over_janitor};
use browser_pilot::page::{
    self, ActiveElementKey, ArmKeys, Checked, ClickPoint, Find, FocusAndSelectAll, HintContext,
    KeyRecord, ListOptions, Observe, ObserveOptions, ObservedElement, OptionsKind, PageError,
    PageObservation, PageScript, Read, RefTarget, Role, ScriptCall, ScriptErrorCode, Search,
    SelectOptions, SetNativeValue, StateSnapshot, TruncationReason,
};
use serde_json::{Value, json};
use std::time::Duration;

/// Everything one test needs, kept alive together.
struct Fixture {
    tab: Tab,
    server: FixtureServer,
    _janitor: tokio::process::Child,
    _browser: Browser,
}

async fn open(path: &str) -> Fixture {
    let browser = Browser::start();
    let server = FixtureServer::start();
    let (client, janitor) = client_over_janitor(&browser.ws_url()).await;
    let tab = Tab::open(&client, &server.url(path)).await;
    Fixture {
        tab,
        server,
        _janitor: janitor,
        _browser: browser,
    }
}

async fn observe_with(tab: &Tab, key: &str, options: ObserveOptions) -> PageObservation {
    tab.run(&Observe {
        key: key.to_owned(),
        options,
        base_key: None,
        compact: false,
        key_record: false,
        click_verdict: None,
        state_of: None,
    })
    .await
    .unwrap()
}

async fn observe(tab: &Tab, key: &str) -> PageObservation {
    observe_with(tab, key, ObserveOptions::default()).await
}

fn named<'a>(observation: &'a PageObservation, name: &str) -> &'a ObservedElement {
    observation
        .elements
        .iter()
        .find(|element| element.name == name)
        .unwrap_or_else(|| panic!("no element named {name:?} in {:#?}", names(observation)))
}

fn names(observation: &PageObservation) -> Vec<&str> {
    observation
        .elements
        .iter()
        .map(|element| element.name.as_str())
        .collect()
}

fn hints(observation: &PageObservation, context: HintContext) -> Value {
    serde_json::to_value(page::observation_hints(observation, &context)).unwrap()
}

fn hint<'a>(hints: &'a Value, code: &str) -> &'a Value {
    hints
        .as_array()
        .unwrap()
        .iter()
        .find(|hint| hint["code"] == json!(code))
        .unwrap_or_else(|| panic!("no {code} hint in {hints}"))
}

fn refs_of(hint: &Value) -> Vec<u32> {
    hint["refs"]
        .as_array()
        .map(|refs| refs.iter().map(|r| r.as_u64().unwrap() as u32).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_reports_roles_names_and_states() {
    let fixture = open("/controls.html").await;
    let tab = &fixture.tab;
    tab.eval("document.getElementById('notes').focus()").await;
    let observation = observe(tab, "o1").await;
    for (index, element) in observation.elements.iter().enumerate() {
        assert_eq!(element.element_ref as usize, index + 1, "refs are dense");
    }
    assert!(!observation.truncated);

    let heading = named(&observation, "Controls");
    assert_eq!((heading.role, heading.level), (Role::Heading, Some(1)));
    assert_eq!(named(&observation, "Third level").level, Some(3));
    assert_eq!(named(&observation, "Aria heading").level, Some(4));

    let agree = named(&observation, "Agree");
    assert_eq!(agree.role, Role::Checkbox);
    assert_eq!(agree.checked, Some(Checked::True));
    assert_eq!(agree.input_type.as_deref(), Some("checkbox"));
    assert_eq!(named(&observation, "Partial").checked, Some(Checked::Mixed));
    assert_eq!(named(&observation, "Red").checked, Some(Checked::False));
    let wifi = named(&observation, "Wi-Fi");
    assert_eq!(
        (wifi.role, wifi.checked),
        (Role::Switch, Some(Checked::True))
    );
    assert_eq!(named(&observation, "Bold").pressed, Some(Checked::True));
    assert_eq!(named(&observation, "Menu").expanded, Some(false));
    assert!(named(&observation, "Disabled button").disabled);
    let required = named(&observation, "Required field");
    assert!(required.required && !required.readonly);
    assert_eq!(required.value.as_deref(), Some("r"));
    assert!(named(&observation, "Read only").readonly);
    let notes = named(&observation, "Notes");
    assert_eq!((notes.role, notes.focused), (Role::Textbox, true));
    assert_eq!(notes.value.as_deref(), Some("line one"));
    assert_eq!(observation.elements.iter().filter(|e| e.focused).count(), 1);
    let editor = observation
        .elements
        .iter()
        .find(|element| element.tag == "div" && element.role == Role::Textbox)
        .expect("contenteditable host");
    assert_eq!(editor.value.as_deref(), Some("Editable text"));
    let summary = named(&observation, "More");
    assert_eq!(
        (summary.role, summary.expanded),
        (Role::Button, Some(false))
    );
    let docs = named(&observation, "Documentation");
    assert_eq!(docs.role, Role::Link);
    assert_eq!(
        docs.href.as_deref(),
        Some(fixture.server.url("/docs?page=1").as_str())
    );
    assert!(!names(&observation).contains(&"Not a link"));
    let size = named(&observation, "Size");
    assert_eq!(
        (size.role, size.value.as_deref()),
        (Role::Combobox, Some("Medium"))
    );
    let toppings = named(&observation, "Toppings");
    assert_eq!(toppings.role, Role::Listbox);
    let olive = named(&observation, "Olive");
    assert_eq!((olive.role, olive.selected), (Role::Option, Some(true)));
    assert_eq!(named(&observation, "Ham").selected, Some(false));
    assert!(
        !names(&observation).contains(&"Small"),
        "options of a closed select are not listed"
    );
    assert_eq!(named(&observation, "Volume").role, Role::Slider);
    assert_eq!(named(&observation, "Volume").value.as_deref(), Some("5"));
    assert_eq!(named(&observation, "Count").role, Role::Spinbutton);
    assert_eq!(
        named(&observation, "Date").input_type.as_deref(),
        Some("date")
    );
    assert_eq!(named(&observation, "Clickable card").role, Role::Clickable);
    assert_eq!(named(&observation, "Tabbable card").role, Role::Clickable);
    // A keyboard-focusable element is a control with or without a pointer cursor (issue 31).
    assert_eq!(
        named(&observation, "Focusable but not pointer").role,
        Role::Clickable
    );
    assert_eq!(named(&observation, "Company logo").role, Role::Img);
    assert_eq!(named(&observation, "Saved!").role, Role::Alert);
    let with_alt_empty = observation
        .elements
        .iter()
        .filter(|element| element.tag == "img")
        .count();
    assert_eq!(with_alt_empty, 1, "alt=\"\" images are decorative");

    let bounds = agree.bounds;
    assert!(bounds.width > 0 && bounds.height > 0);
    assert!(agree.in_viewport);
    assert_eq!(
        observation.page.viewport.width,
        tab.eval("document.documentElement.clientWidth")
            .await
            .as_i64()
            .unwrap()
    );
    assert_eq!(
        observation.candidate_count,
        observation.elements.len() as u64
    );
    // Nothing leaked into the page's own world.
    let globals = tab
        .eval("Object.getOwnPropertySymbols(window).length + Object.keys(window).filter(k => /^bp|observe/.test(k)).length")
        .await;
    assert_eq!(globals, json!(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_pages_return_every_element_once() {
    let fixture = open("/generated/100").await;
    let observation = observe_with(
        &fixture.tab,
        "generated",
        ObserveOptions {
            limit: 1000,
            ..ObserveOptions::default()
        },
    )
    .await;
    assert_eq!(observation.elements.len(), 100);
    assert_eq!(observation.candidate_count, 100);
    let count = |role: Role| {
        observation
            .elements
            .iter()
            .filter(|element| element.role == role)
            .count()
    };
    let shadow = names(&observation)
        .iter()
        .filter(|name| **name == "Shadow button")
        .count();
    assert_eq!(shadow, 10, "one shadow button per custom element");
    // Rows cycle through nine controls; every tenth row is a custom element.
    assert_eq!(count(Role::Link), 10);
    assert_eq!(count(Role::Checkbox), 10);
    assert_eq!(count(Role::Combobox), 10);
    assert_eq!(
        count(Role::Textbox),
        10 + 10 + 10,
        "inputs, textareas, contenteditables"
    );
    assert_eq!(named(&observation, "Input 2").value.as_deref(), Some("v2"));
    assert_eq!(named(&observation, "Check 3").checked, Some(Checked::False));
}

/// `Observe` with every tree scope forced onto the read-each-attribute
/// path (observe.js's `smallScope` knob) instead of the attribute sets.
struct ObserveWithoutSets(Observe);

impl PageScript for ObserveWithoutSets {
    type Output = PageObservation;

    fn call(&self) -> Result<ScriptCall, PageError> {
        let mut call = self.0.call()?;
        call.argument["smallScope"] = json!(u32::MAX);
        Ok(call)
    }

    fn parse(&self, json: &str) -> Result<PageObservation, PageError> {
        self.0.parse(json)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attribute_sets_and_direct_reads_observe_the_same_elements() {
    for path in ["/controls.html", "/labels.html", "/login.html"] {
        let fixture = open(path).await;
        let with_sets = observe(&fixture.tab, "sets").await;
        let without = fixture
            .tab
            .run(&ObserveWithoutSets(Observe {
                key: "direct".to_owned(),
                options: ObserveOptions::default(),
                base_key: None,
                compact: false,
                key_record: false,
                click_verdict: None,
                state_of: None,
            }))
            .await
            .unwrap();
        assert_eq!(
            serde_json::to_value(&with_sets.elements).unwrap(),
            serde_json::to_value(&without.elements).unwrap(),
            "{path}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_names_come_from_every_label_kind() {
    let fixture = open("/labels.html").await;
    let observation = observe(&fixture.tab, "labels").await;
    let expected = [
        "Wrapped name",
        "For attribute",
        "Aria label",
        "First Second",
        "Title text",
        "Placeholder text",
        "Image submit",
        "Send it",
        "Submit",
        "Search icon",
        "Country",
        "One Two",
    ];
    let got = names(&observation);
    for name in expected {
        assert!(got.contains(&name), "{name:?} missing from {got:?}");
    }
    assert_eq!(
        named(&observation, "Country").value.as_deref(),
        Some("France")
    );
    let long = observation
        .elements
        .iter()
        .find(|element| element.role == Role::Link)
        .unwrap();
    assert_eq!(long.name.chars().count(), 200, "names are bounded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_skips_invisible_elements() {
    let fixture = open("/hidden.html").await;
    let observation = observe(&fixture.tab, "hidden").await;
    assert_eq!(
        names(&observation),
        vec!["Visible button", "Visible again", "Closed select"]
    );
    assert_eq!(observation.candidate_count, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwords_are_redacted_and_authentication_transitions_are_hinted() {
    let mut fixture = open("/login.html").await;
    let observation = observe(&fixture.tab, "login").await;
    let password = named(&observation, "Password");
    assert!(password.sensitive);
    assert_eq!(password.value, None);
    assert_eq!(password.value_length, Some(7));
    let wire = serde_json::to_string(&observation.wire(&[])).unwrap();
    assert!(!wire.contains("hunter2"), "{wire}");
    assert_eq!(
        named(&observation, "Email or username").value.as_deref(),
        Some("ada@example.com")
    );

    assert!(page::has_auth_surface(&observation));
    let first = hints(&observation, HintContext::default());
    let auth = hint(&first, "authentication_surface");
    assert_eq!(auth["state"], json!("present"));
    assert_eq!(auth["confidence"], json!("strong"));
    assert_eq!(auth["recommendedAction"], json!("authenticate_or_ask_user"));
    let expected: Vec<u32> = ["Email or username", "Password", "Sign in"]
        .iter()
        .map(|name| named(&observation, name).element_ref)
        .collect();
    assert_eq!(refs_of(auth), expected);

    let plain_url = fixture.server.url("/plain.html");
    fixture.tab.navigate(&plain_url).await;
    let plain = observe(&fixture.tab, "plain").await;
    assert!(!page::has_auth_surface(&plain));
    let left = hints(
        &plain,
        HintContext {
            main_document_status: Some(200),
            previous_auth_surface: Some(true),
        },
    );
    assert_eq!(
        hint(&left, "authentication_surface")["state"],
        json!("left")
    );
    let nothing = hints(
        &plain,
        HintContext {
            main_document_status: Some(200),
            previous_auth_surface: Some(false),
        },
    );
    assert_eq!(nothing, json!([]));

    let login_url = fixture.server.url("/login.html");
    fixture.tab.navigate(&login_url).await;
    let again = observe(&fixture.tab, "login-again").await;
    let entered = hints(
        &again,
        HintContext {
            main_document_status: Some(200),
            previous_auth_surface: Some(false),
        },
    );
    assert_eq!(
        hint(&entered, "authentication_surface")["state"],
        json!("entered")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_includes_nested_open_shadow_dom_and_so_do_search_and_find() {
    let fixture = open("/shadow.html").await;
    let tab = &fixture.tab;
    let observation = observe(tab, "shadow").await;
    assert_eq!(
        names(&observation),
        vec![
            "Light before",
            "Shadow label",
            "Outer shadow button",
            "Nested shadow link",
            "Light after"
        ],
        "open roots in tree order, closed roots invisible"
    );
    let link = named(&observation, "Nested shadow link");
    let clicked = tab
        .run(&StateSnapshot(RefTarget::new("shadow", link.element_ref)))
        .await
        .unwrap();
    assert!(clicked.connected);

    let found = tab
        .run(&Search {
            query: "needle".to_owned(),
            regex: false,
            limit: 50,
        })
        .await
        .unwrap();
    let texts: Vec<&str> = found.matches.iter().map(|m| m.context.as_str()).collect();
    assert_eq!(found.total, 2, "{texts:?}");
    assert!(texts[0].contains("needle one") && texts[1].contains("needle two"));

    let pierced = tab
        .run(&Find {
            selector: ".deep".to_owned(),
            pierce: true,
            limit: 50,
        })
        .await
        .unwrap();
    assert_eq!(pierced.total, 3);
    assert!(
        pierced
            .elements
            .iter()
            .all(|element| element.in_shadow_root)
    );
    assert_eq!(pierced.elements[0].name.as_deref(), Some("Shadow label"));
    let flat = tab
        .run(&Find {
            selector: ".deep".to_owned(),
            pierce: false,
            limit: 50,
        })
        .await
        .unwrap();
    assert_eq!(flat.total, 0);

    let text = tab.run(&Read::default()).await.unwrap();
    assert!(
        text.text.contains("Outer shadow text with needle one"),
        "{}",
        text.text
    );
    assert!(text.text.contains("Inner needle two"));
    assert!(!text.text.contains("closed needle"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_truncates_by_limit_and_bytes_and_reports_page_metrics() {
    let fixture = open("/long.html").await;
    let tab = &fixture.tab;
    let full = observe_with(
        tab,
        "all",
        ObserveOptions {
            limit: 1000,
            ..ObserveOptions::default()
        },
    )
    .await;
    assert_eq!(
        full.elements.len(),
        302,
        "heading, 300 buttons, bottom button"
    );
    assert!(!full.truncated);

    let limited = observe_with(
        tab,
        "limited",
        ObserveOptions {
            limit: 10,
            ..ObserveOptions::default()
        },
    )
    .await;
    assert_eq!(limited.elements.len(), 10);
    assert!(limited.truncated);
    assert_eq!(limited.truncation_reasons, vec![TruncationReason::Limit]);
    assert_eq!(limited.candidate_count, 302);

    let small = observe_with(
        tab,
        "bytes",
        ObserveOptions {
            limit: 1000,
            max_bytes: 2048,
            viewport_only: false,
        },
    )
    .await;
    assert!(
        small.elements.len() > 3 && small.elements.len() < 30,
        "{}",
        small.elements.len()
    );
    assert_eq!(small.truncation_reasons, vec![TruncationReason::Bytes]);
    let bytes = serde_json::to_vec(&small.elements).unwrap().len();
    assert!(bytes < 2048 + 512, "approximate bound held: {bytes}");

    let metrics = full.page;
    assert!(metrics.document.height > 300 * 40);
    assert_eq!(metrics.scroll.y, 0);
    assert_eq!(metrics.remaining.up, 0);
    assert_eq!(
        metrics.remaining.down,
        metrics.document.height - metrics.viewport.height
    );
    assert_eq!(metrics.percent.y, 0);

    tab.eval("window.scrollTo(0, (document.documentElement.scrollHeight - document.documentElement.clientHeight) / 2)")
        .await;
    let middle = observe_with(
        tab,
        "viewport",
        ObserveOptions {
            viewport_only: true,
            ..ObserveOptions::default()
        },
    )
    .await;
    assert!(middle.elements.iter().all(|element| element.in_viewport));
    assert!(middle.elements.len() < 30, "{}", middle.elements.len());
    assert!(
        middle
            .elements
            .iter()
            .all(|e| e.name.starts_with("Action "))
    );
    let scrolled = middle.page;
    assert!(
        (49..=51).contains(&scrolled.percent.y),
        "{:?}",
        scrolled.percent
    );
    assert_eq!(scrolled.remaining.up, scrolled.scroll.y);
    assert_eq!(
        scrolled.remaining.up + scrolled.remaining.down + scrolled.viewport.height,
        scrolled.document.height
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modal_dialog_and_covering_overlay_are_blocking_hints() {
    let mut fixture = open("/modal.html").await;
    let observation = observe(&fixture.tab, "modal").await;
    let found = hints(&observation, HintContext::default());
    let modal = hint(&found, "modal_overlay");
    assert_eq!(modal["confidence"], json!("strong"));
    assert_eq!(modal["blocking"], json!(true));
    assert_eq!(modal["recommendedAction"], json!("resolve_overlay_first"));
    let dialog = observation
        .elements
        .iter()
        .find(|element| element.role == Role::Dialog)
        .unwrap();
    let expected: Vec<u32> = std::iter::once(dialog.element_ref)
        .chain(
            ["Terms of service", "Your initials", "Accept", "Close"]
                .iter()
                .map(|name| named(&observation, name).element_ref),
        )
        .collect();
    assert_eq!(refs_of(modal), expected);
    assert!(!refs_of(modal).contains(&named(&observation, "Behind the dialog").element_ref));

    let overlay_url = fixture.server.url("/overlay.html");
    fixture.tab.navigate(&overlay_url).await;
    let covered = observe(&fixture.tab, "overlay").await;
    let found = hints(&covered, HintContext::default());
    let overlay = hint(&found, "modal_overlay");
    assert_eq!(overlay["confidence"], json!("medium"));
    assert_eq!(overlay["evidence"], json!(["covering_element"]));
    let expected: Vec<u32> = ["Agree", "Reject all"]
        .iter()
        .map(|name| named(&covered, name).element_ref)
        .collect();
    assert_eq!(refs_of(overlay), expected);

    // The covered button's click point hits the backdrop instead.
    let under = named(&covered, "Covered button").element_ref;
    let point = fixture
        .tab
        .run(&ClickPoint(RefTarget::new("overlay", under)))
        .await
        .unwrap();
    assert!(!point.hit);
    assert_eq!(
        point.occluded_by.as_deref(),
        Some("div#backdrop.modal-backdrop")
    );
    let agree = named(&covered, "Agree").element_ref;
    let point = fixture
        .tab
        .run(&ClickPoint(RefTarget::new("overlay", agree)))
        .await
        .unwrap();
    assert!(point.hit && point.in_viewport);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autocomplete_and_custom_combobox_are_hinted_when_open() {
    let mut fixture = open("/autocomplete.html").await;
    let tab = &fixture.tab;
    let observation = observe(tab, "ac").await;
    let search = named(&observation, "Search products");
    assert_eq!(search.role, Role::Combobox);
    assert_eq!(search.value.as_deref(), Some("lap"));
    let found = hints(&observation, HintContext::default());
    let autocomplete = hint(&found, "autocomplete");
    assert_eq!(autocomplete["confidence"], json!("strong"));
    assert_eq!(
        autocomplete["recommendedAction"],
        json!("choose_suggestion_or_continue")
    );
    let expected: Vec<u32> = ["Search products", "laptop", "laptop stand", "lapel pin"]
        .iter()
        .map(|name| named(&observation, name).element_ref)
        .collect();
    assert_eq!(refs_of(autocomplete), expected);
    assert_eq!(named(&observation, "laptop stand").selected, Some(true));
    tab.eval("document.getElementById('suggestions').hidden = true")
        .await;
    let closed = observe(tab, "ac-closed").await;
    assert_eq!(hints(&closed, HintContext::default()), json!([]));

    let combobox_url = fixture.server.url("/combobox.html");
    fixture.tab.navigate(&combobox_url).await;
    let tab = &fixture.tab;
    let collapsed = observe(tab, "cb1").await;
    let fruit = named(&collapsed, "Fruit");
    assert_eq!((fruit.role, fruit.expanded), (Role::Combobox, Some(false)));
    assert!(!names(&collapsed).contains(&"Apple"));
    assert_eq!(hints(&collapsed, HintContext::default()), json!([]));
    let listed = tab
        .run(&ListOptions {
            target: RefTarget::new("cb1", fruit.element_ref),
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(listed.kind, OptionsKind::Aria);
    assert_eq!(listed.popup_visible, Some(false));
    assert!(listed.options.is_empty());

    let point = tab
        .run(&ClickPoint(RefTarget::new("cb1", fruit.element_ref)))
        .await
        .unwrap();
    assert!(point.hit);
    tab.click_at(point.x, point.y).await;
    let expanded = observe(tab, "cb2").await;
    assert_eq!(named(&expanded, "Fruit").expanded, Some(true));
    assert_eq!(named(&expanded, "Banana").selected, Some(true));
    assert!(named(&expanded, "Cherry").disabled);
    let found = hints(&expanded, HintContext::default());
    let autocomplete = hint(&found, "autocomplete");
    assert_eq!(refs_of(autocomplete).len(), 4);
    let listed = tab
        .run(&ListOptions {
            target: RefTarget::new("cb2", named(&expanded, "Fruit").element_ref),
            limit: 10,
        })
        .await
        .unwrap();
    let labels: Vec<(&str, &str, bool, bool)> = listed
        .options
        .iter()
        .map(|o| (o.label.as_str(), o.value.as_str(), o.selected, o.disabled))
        .collect();
    assert_eq!(
        labels,
        vec![
            ("Apple", "apple", false, false),
            ("Banana", "banana", true, false),
            ("Cherry", "cherry", false, true)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_sidebar_and_access_block_are_hinted() {
    let mut fixture = open("/filters.html").await;
    let observation = observe(&fixture.tab, "filters").await;
    let found = hints(&observation, HintContext::default());
    let codes: Vec<&Value> = found
        .as_array()
        .unwrap()
        .iter()
        .map(|h| &h["code"])
        .collect();
    assert_eq!(codes, vec![&json!("filter_controls")], "{found}");
    let filters = hint(&found, "filter_controls");
    assert_eq!(filters["recommendedAction"], json!("use_filters"));
    assert_eq!(filters["confidence"], json!("strong"));
    let expected: Vec<u32> = ["Acme", "Bolt", "Under $50"]
        .iter()
        .map(|name| named(&observation, name).element_ref)
        .collect();
    assert_eq!(refs_of(filters), expected);
    assert!(!refs_of(filters).contains(&named(&observation, "Weekly digest").element_ref));

    let blocked_url = fixture.server.url("/blocked.html");
    fixture.tab.navigate(&blocked_url).await;
    let blocked = observe(&fixture.tab, "blocked").await;
    let found = hints(&blocked, HintContext::default());
    let access = hint(&found, "access_blocked");
    assert_eq!(access["source"], json!("observation"));
    assert_eq!(access["confidence"], json!("strong"));
    assert_eq!(access["blocking"], json!(true));
    assert_eq!(access["recommendedAction"], json!("stop_and_report"));
    let evidence = access["evidence"].as_array().unwrap();
    assert!(evidence.contains(&json!("captcha_frame")), "{evidence:?}");
    assert!(
        evidence.contains(&json!("text:unusual traffic")),
        "{evidence:?}"
    );
    assert!(
        evidence.contains(&json!("text:access denied")),
        "{evidence:?}"
    );
    let by_status = hints(
        &observe(&fixture.tab, "blocked-2").await,
        HintContext {
            main_document_status: Some(403),
            previous_auth_surface: None,
        },
    );
    let access = hint(&by_status, "access_blocked");
    assert_eq!(
        (access["source"].clone(), access["status"].clone()),
        (json!("network"), json!(403))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_search_and_find_are_bounded() {
    let fixture = open("/long.html").await;
    let tab = &fixture.tab;
    let all = tab.run(&Read::default()).await.unwrap();
    assert!(!all.truncated);
    assert!(
        all.text
            .starts_with("Long page\nParagraph 1 says hello marker1 Action 1\nParagraph 2"),
        "{:.120}",
        all.text
    );
    assert!(
        all.text.ends_with("Bottom button"),
        "{}",
        &all.text[all.text.len() - 60..]
    );
    assert!(!all.text.contains("innerHTML"), "scripts are skipped");
    assert_eq!(all.char_count, all.text.encode_utf16().count() as u64);
    let cut = tab
        .run(&Read {
            selector: None,
            target: None,
            max_chars: 100,
            offset: 0,
        })
        .await
        .unwrap();
    assert!(cut.truncated);
    assert_eq!(cut.char_count, 100);
    assert!(all.text.starts_with(&cut.text));
    let region = tab
        .run(&Read {
            selector: Some("p:nth-of-type(3)".to_owned()),
            target: None,
            max_chars: 1000,
            offset: 0,
        })
        .await
        .unwrap();
    assert_eq!(region.text, "Paragraph 3 says hello marker3 Action 3");
    let invalid = tab
        .run(&Read {
            selector: Some("p[".to_owned()),
            target: None,
            max_chars: 10,
            offset: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(invalid.refusal(), Some(ScriptErrorCode::InvalidSelector));
    let missing = tab
        .run(&Read {
            selector: Some("#nope".to_owned()),
            target: None,
            max_chars: 10,
            offset: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(missing.refusal(), Some(ScriptErrorCode::NoMatch));

    let search = |query: &str, regex: bool, limit: u32| Search {
        query: query.to_owned(),
        regex,
        limit,
    };
    let hello = tab.run(&search("HELLO  marker", false, 5)).await.unwrap();
    assert_eq!(hello.total, 300);
    assert_eq!(hello.matches.len(), 5);
    assert!(hello.truncated);
    assert_eq!(hello.matches[0].text, "hello marker");
    let context = &hello.matches[0].context;
    assert!(
        context.starts_with("Long page Paragraph 1 says hello marker1 Action 1 Paragraph 2 says"),
        "{context}"
    );
    assert!(context.chars().count() <= 80 + 12 + 80, "{context}");
    assert!(hello.matches[0].in_viewport);
    let far = tab.run(&search("marker300", false, 5)).await.unwrap();
    assert_eq!(far.total, 1);
    assert!(!far.matches[0].in_viewport);
    assert!(far.matches[0].bounds.y > 10_000);
    let regex = tab.run(&search(r"marker2\d\b", true, 200)).await.unwrap();
    assert_eq!(regex.total, 10);
    let bad = tab.run(&search("(", true, 5)).await.unwrap_err();
    assert_eq!(bad.refusal(), Some(ScriptErrorCode::InvalidRegex));

    let buttons = tab
        .run(&Find {
            selector: "button".to_owned(),
            pierce: false,
            limit: 3,
        })
        .await
        .unwrap();
    assert_eq!(buttons.total, 301);
    assert!(buttons.truncated);
    assert_eq!(buttons.elements.len(), 3);
    let first = &buttons.elements[0];
    assert_eq!(
        (first.tag.as_str(), first.text.as_str()),
        ("button", "Action 1")
    );
    assert_eq!(first.role, Some(Role::Button));
    assert!(first.visible);
    let invalid = tab
        .run(&Find {
            selector: "##".to_owned(),
            pierce: true,
            limit: 3,
        })
        .await
        .unwrap_err();
    assert_eq!(invalid.refusal(), Some(ScriptErrorCode::InvalidSelector));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolve_returns_null_after_navigation_and_refs_go_stale() {
    let mut fixture = open("/plain.html").await;
    let observation = observe(&fixture.tab, "before").await;
    let button = named(&observation, "Do nothing").element_ref;
    let resolve = |tab: &Tab, key: &str, element_ref: u32| {
        let target = RefTarget::new(key, element_ref);
        let client = tab.client.clone();
        let session = tab.session.clone();
        let context = tab.context;
        async move {
            page::resolve_object(&client, &session, context, &target, WAIT)
                .await
                .unwrap()
        }
    };
    let object = resolve(&fixture.tab, "before", button).await;
    assert!(object.is_some());
    let described = fixture
        .tab
        .client
        .call(
            Some(&fixture.tab.session),
            "DOM.describeNode",
            json!({"objectId": object.unwrap().as_str()}),
            WAIT,
        )
        .await
        .unwrap();
    assert_eq!(described["node"]["localName"], json!("button"));
    assert!(resolve(&fixture.tab, "before", 99).await.is_none());
    assert!(resolve(&fixture.tab, "unknown", 1).await.is_none());

    // Detached in place: the helpers say the ref is stale.
    fixture
        .tab
        .eval("document.querySelector('button').remove()")
        .await;
    assert!(resolve(&fixture.tab, "before", button).await.is_none());
    let stale = fixture
        .tab
        .run(&StateSnapshot(RefTarget::new("before", button)))
        .await
        .unwrap_err();
    assert_eq!(stale.refusal(), Some(ScriptErrorCode::RefStale));

    // After navigation the new document's world knows no old observation.
    let old_context = fixture.tab.context;
    let login = fixture.server.url("/login.html");
    fixture.tab.navigate(&login).await;
    assert_ne!(old_context, fixture.tab.context);
    assert!(resolve(&fixture.tab, "before", 1).await.is_none());
    let unknown = fixture
        .tab
        .run(&ClickPoint(RefTarget::new("before", 1)))
        .await
        .unwrap_err();
    assert_eq!(unknown.refusal(), Some(ScriptErrorCode::ObservationUnknown));
    // The old world died with its document.
    let gone = page::run(
        &fixture.tab.client,
        &fixture.tab.session,
        old_context,
        &ActiveElementKey,
        WAIT,
    )
    .await
    .unwrap_err();
    assert!(matches!(gone, PageError::Cdp(_)), "{gone:?}");

    // Only the last few observations are kept per world.
    for n in 0..5 {
        observe(&fixture.tab, &format!("k{n}")).await;
    }
    assert!(resolve(&fixture.tab, "k0", 1).await.is_none());
    assert!(resolve(&fixture.tab, "k1", 1).await.is_some());
    assert!(resolve(&fixture.tab, "k4", 1).await.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_native_value_fires_beforeinput_then_input_without_change() {
    let fixture = open("/controls.html").await;
    let tab = &fixture.tab;
    let observation = observe(tab, "native").await;
    let set = |name: &str, value: &str| SetNativeValue {
        target: RefTarget::new("native", named(&observation, name).element_ref),
        value: value.to_owned(),
    };
    let date = tab.run(&set("Date", "2024-05-06")).await.unwrap();
    assert_eq!(
        (date.before.as_str(), date.after.as_str(), date.canceled),
        ("", "2024-05-06", false)
    );
    assert_eq!(
        tab.eval("eventLog.splice(0)").await,
        json!(["when:beforeinput:", "when:input:2024-05-06"])
    );
    let color = tab.run(&set("Tint", "#FF0000")).await.unwrap();
    assert_eq!(color.after, "#ff0000", "the browser sanitizes colors");
    let range = tab.run(&set("Volume", "7")).await.unwrap();
    assert_eq!(range.after, "7");
    tab.eval("eventLog.splice(0)").await;
    let canceled = tab.run(&set("Volume", "9")).await.unwrap();
    assert!(canceled.canceled);
    assert_eq!(canceled.after, "7");
    assert_eq!(
        tab.eval("eventLog.splice(0)").await,
        json!(["volume:beforeinput:7"])
    );
    let time = tab.run(&set("Time", "25:99")).await.unwrap();
    assert_eq!(time.after, "", "invalid times are sanitized away");
    let wrong = tab.run(&set("Notes", "x")).await.unwrap_err();
    assert_eq!(wrong.refusal(), Some(ScriptErrorCode::UnsupportedElement));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn select_options_sets_native_selects_and_fires_input_then_change() {
    let fixture = open("/controls.html").await;
    let tab = &fixture.tab;
    let observation = observe(tab, "select").await;
    let size = RefTarget::new("select", named(&observation, "Size").element_ref);
    let toppings = RefTarget::new("select", named(&observation, "Toppings").element_ref);

    let by_label = tab
        .run(&SelectOptions {
            target: size.clone(),
            values: vec!["Large".to_owned()],
        })
        .await
        .unwrap();
    assert!(by_label.changed);
    assert_eq!(by_label.selected.len(), 1);
    assert_eq!(
        (
            by_label.selected[0].value.as_str(),
            by_label.selected[0].label.as_str()
        ),
        ("l", "Large")
    );
    assert_eq!(
        tab.eval("eventLog.splice(0)").await,
        json!(["size:input:l", "size:change:l"])
    );
    let same = tab
        .run(&SelectOptions {
            target: size.clone(),
            values: vec!["l".to_owned()],
        })
        .await
        .unwrap();
    assert!(!same.changed);
    let missing = tab
        .run(&SelectOptions {
            target: size.clone(),
            values: vec!["Huge".to_owned()],
        })
        .await
        .unwrap_err();
    assert_eq!(missing.refusal(), Some(ScriptErrorCode::OptionNotFound));
    let disabled = tab
        .run(&SelectOptions {
            target: size.clone(),
            values: vec!["xl".to_owned()],
        })
        .await
        .unwrap_err();
    assert_eq!(disabled.refusal(), Some(ScriptErrorCode::OptionDisabled));
    let state = tab.run(&StateSnapshot(size.clone())).await.unwrap();
    assert_eq!(state.selected_values, Some(vec!["l".to_owned()]));

    let multiple = tab
        .run(&SelectOptions {
            target: toppings.clone(),
            values: vec!["ham".to_owned(), "egg".to_owned()],
        })
        .await
        .unwrap();
    let values: Vec<&str> = multiple.selected.iter().map(|s| s.value.as_str()).collect();
    assert_eq!(values, vec!["ham", "egg"]);
    let listed = tab
        .run(&ListOptions {
            target: size,
            limit: 2,
        })
        .await
        .unwrap();
    assert_eq!(listed.kind, OptionsKind::Native);
    assert_eq!(
        (listed.total, listed.truncated, listed.options.len()),
        (4, true, 2)
    );
    let wrong = tab
        .run(&SelectOptions {
            target: RefTarget::new("select", named(&observation, "Notes").element_ref),
            values: vec!["x".to_owned()],
        })
        .await
        .unwrap_err();
    assert_eq!(wrong.refusal(), Some(ScriptErrorCode::UnsupportedElement));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn click_point_state_snapshot_focus_and_active_element() {
    let fixture = open("/controls.html").await;
    let tab = &fixture.tab;
    let observation = observe(tab, "act").await;
    let agree = RefTarget::new("act", named(&observation, "Agree").element_ref);
    let before = tab.run(&StateSnapshot(agree.clone())).await.unwrap();
    assert_eq!(
        (before.checked, before.focused),
        (Some(Checked::True), false)
    );
    let point = tab.run(&ClickPoint(agree.clone())).await.unwrap();
    assert!(point.hit && point.in_viewport);
    tab.click_at(point.x, point.y).await;
    let after = tab.run(&StateSnapshot(agree)).await.unwrap();
    assert_eq!((after.checked, after.focused), (Some(Checked::False), true));
    assert_eq!(after.document_key, before.document_key);
    assert_eq!(after.element_key, before.element_key);

    let notes = RefTarget::new("act", named(&observation, "Notes").element_ref);
    let focus = tab.run(&FocusAndSelectAll(notes.clone())).await.unwrap();
    assert!(focus.focused && focus.selected_all);
    let active = tab.run(&ActiveElementKey).await.unwrap();
    assert_eq!(active.key, focus.active_element_key);
    assert_eq!(active.tag.as_deref(), Some("textarea"));
    assert!(active.editable);
    let selection = tab
        .eval("[document.activeElement.selectionStart, document.activeElement.selectionEnd]")
        .await;
    assert_eq!(selection, json!([0, 8]));
    let state = tab.run(&StateSnapshot(notes)).await.unwrap();
    assert_eq!(
        (state.value.as_deref(), state.value_length),
        (Some("line one"), Some(8))
    );

    let editor = observation
        .elements
        .iter()
        .find(|element| element.tag == "div" && element.role == Role::Textbox)
        .unwrap();
    let focus = tab
        .run(&FocusAndSelectAll(RefTarget::new(
            "act",
            editor.element_ref,
        )))
        .await
        .unwrap();
    assert!(focus.focused && focus.selected_all);
    assert_eq!(
        tab.eval("getSelection().toString()").await,
        json!("Editable text")
    );
    assert_ne!(
        tab.run(&ActiveElementKey).await.unwrap().key,
        active.key,
        "a different element has a different key"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn active_element_key_reaches_into_shadow_roots_and_passwords_stay_hidden() {
    let mut fixture = open("/shadow.html").await;
    let observation = observe(&fixture.tab, "sh").await;
    let input = RefTarget::new("sh", named(&observation, "Shadow label").element_ref);
    let focus = fixture.tab.run(&FocusAndSelectAll(input)).await.unwrap();
    assert!(focus.focused);
    let active = fixture.tab.run(&ActiveElementKey).await.unwrap();
    assert_eq!(active.tag.as_deref(), Some("input"));
    assert_eq!(active.key, focus.active_element_key);
    assert_eq!(
        fixture.tab.eval("document.activeElement.id").await,
        json!("outer"),
        "the page's own activeElement stops at the host"
    );

    let login = fixture.server.url("/login.html");
    fixture.tab.navigate(&login).await;
    let observation = observe(&fixture.tab, "pw").await;
    let password = RefTarget::new("pw", named(&observation, "Password").element_ref);
    let state = fixture.tab.run(&StateSnapshot(password)).await.unwrap();
    assert!(state.sensitive);
    assert_eq!((state.value, state.value_length), (None, Some(7)));
}

/// The keystroke guard, installed as at document start: a key made after the burst's deadline
/// but within its linger is stopped (`expired`); one made after the linger passes unguarded,
/// disarms the guard, and the record says the guard lapsed cleanly (once). Once a key was
/// refused, later keys are stopped past the linger too (a burst never lands out of order), and
/// only a key ten lingers late lapses the guard, as `cut`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keystroke_guard_stops_late_keys_and_says_when_it_lapsed() {
    let fixture = open("/controls.html").await;
    let tab = &fixture.tab;
    tab.eval_in_world(&page::document_start_script()).await;
    let observation = observe(tab, "keys").await;
    let notes = RefTarget::new("keys", named(&observation, "Notes").element_ref);
    let focus = || async { tab.run(&FocusAndSelectAll(notes.clone())).await.unwrap() };
    assert!(focus().await.focused);
    let value = || async { tab.run(&StateSnapshot(notes.clone())).await.unwrap().value };
    let arm = |linger: u64| ArmKeys {
        budget: Duration::ZERO,
        gap: Duration::from_secs(30),
        linger: Duration::from_millis(linger),
    };

    assert!(tab.run(&arm(5_000)).await.unwrap().armed);
    tokio::time::sleep(Duration::from_millis(30)).await;
    tab.stroke("a").await;
    let record = tab.run(&KeyRecord).await.unwrap();
    assert!(record.armed && record.lapsed.is_none(), "{record:?}");
    assert_eq!(
        (record.stopped, record.refused.as_deref()),
        (1, Some("expired"))
    );
    assert_eq!(
        value().await.as_deref(),
        Some("line one"),
        "an expired key is stopped"
    );

    assert!(tab.run(&arm(0)).await.unwrap().armed);
    tokio::time::sleep(Duration::from_millis(30)).await;
    tab.stroke("b").await;
    let record = tab.run(&KeyRecord).await.unwrap();
    assert_eq!(
        (record.armed, record.lapsed.as_deref()),
        (false, Some("clean")),
        "{record:?}"
    );
    assert_eq!(
        value().await.as_deref(),
        Some("b"),
        "a lapsed key goes through"
    );
    let again = tab.run(&KeyRecord).await.unwrap();
    assert!(
        !again.armed && again.lapsed.is_none(),
        "the lapse is told once: {again:?}"
    );

    // Refused (focus left the field), then late: stopped past the linger, lapsed ten lingers on.
    assert!(focus().await.focused);
    let linger = 500;
    assert!(tab.run(&arm(linger)).await.unwrap().armed);
    let armed_at = std::time::Instant::now();
    tab.eval("document.activeElement.blur()").await;
    tab.stroke("c").await;
    assert!(focus().await.focused);
    tokio::time::sleep(Duration::from_millis(linger * 2)).await;
    tab.stroke("d").await;
    assert_eq!(
        value().await.as_deref(),
        Some("b"),
        "refused keys are stopped"
    );
    tokio::time::sleep_until((armed_at + Duration::from_millis(linger * 10 + 300)).into()).await;
    tab.stroke("e").await;
    let record = tab.run(&KeyRecord).await.unwrap();
    assert_eq!(
        (record.armed, record.lapsed.as_deref()),
        (false, Some("cut")),
        "{record:?}"
    );
    assert_eq!(
        value().await.as_deref(),
        Some("e"),
        "a key ten lingers late goes through"
    );
}
