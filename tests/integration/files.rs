//! Process tests of files going into a page and annotated screenshots coming out, against a
//! real headless Chromium (one for the module, one Broker):
//!
//! - `browser.upload` of an imported file: verified by the page's own state; a page that
//!   clears the input after validation (`mismatch`, `files_cleared`), one that swaps the
//!   selection for its own file (`files_replaced`), one that replaces the input element
//!   (`input_replaced`), one that removes it (`unavailable`); output Artifacts (a screenshot)
//!   refused with `artifact_kind_not_allowed`; another client's Artifact answered exactly like
//!   an unknown id; no response ever names protected storage.
//! - File choosers: a click on a file input, and a button whose handler clicks a hidden one,
//!   never open a native chooser; the click reports `file_chooser_opened` and the Workspace
//!   gets a `file_chooser` event.
//! - `browser.capture` with `annotations`: the PNG's pixels show the outline colour exactly at
//!   the corners of the annotated elements' boxes and nowhere around the others, ref numbers
//!   are counted (`annotationCount`, `skippedRefs` for an element outside the viewport), the
//!   page's own world sees no canvas and no image decoding, and `fullPage`/`selector`
//!   combinations and an unknown Observation are refused.

use crate::support;

use std::path::Path;

use serde_json::{Value, json};
use support::chromium::OwnCdp;
use support::rig::{Agent, Rig, find_ref};

/// The outline colour of annotations (`src/page/js/annotatedraw.js`).
const STROKE: [u8; 3] = [255, 0, 255];

fn protected(rig: &Rig) -> String {
    rig.home
        .path()
        .join("artifacts")
        .to_string_lossy()
        .into_owned()
}

/// Imports a client file as an `upload_input` Artifact; returns its id.
fn import(agent: &mut Agent, path: &Path) -> Value {
    let result = agent.bridge.ok(
        "artifacts/import",
        json!({"workspaceId": agent.workspace_id, "leaseId": agent.lease_id, "path": path}),
    );
    assert_eq!(result["artifact"]["kind"], "upload_input", "{result}");
    result["artifact"]["id"].clone()
}

fn observe(agent: &mut Agent, target: &Value) -> Value {
    agent.tool("browser.observe", Some(target), json!({"limit": 200}))
}

/// The ref of the file input labelled `name` (file inputs are buttons to assistive tech).
fn input_ref(observation: &Value, name: &str) -> u64 {
    observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["inputType"] == "file" && e["name"].as_str().unwrap_or("").contains(name))
        .unwrap_or_else(|| panic!("no file input {name:?} in {}", observation["elements"]))["ref"]
        .as_u64()
        .unwrap()
}

/// Uploads `artifact` into the input `name` of a fresh Observation; returns the evidence.
fn upload(agent: &mut Agent, target: &Value, artifact: &Value, name: &str, rig: &Rig) -> Value {
    let observation = observe(agent, target);
    let arguments = json!({
        "artifactId": artifact,
        "observationId": observation["observationId"],
        "ref": input_ref(&observation, name),
        "observe": {"limit": 5},
    });
    let result = agent.tool("browser.upload", Some(target), arguments);
    let text = result.to_string();
    assert!(
        !text.contains(&protected(rig)),
        "upload leaked a path: {text}"
    );
    result["evidence"].clone()
}

/// Evaluates `expression` in the page's own world over the test's own CDP connection.
fn page_value(cdp: &mut OwnCdp, url_suffix: &str, expression: &str) -> Value {
    cdp.evaluate_in_page(url_suffix, expression)["result"]["value"].clone()
}

#[test]
fn files_in_and_annotated_screenshots_out() {
    let rig = Rig::start();
    let mut agent = Agent::new(&rig, "com.example.files");
    agent.connect();
    let mut cdp = OwnCdp::connect(&rig.chromium);
    let client_dir = tempfile::tempdir().unwrap();
    uploads(&rig, &mut agent, &mut cdp, client_dir.path());
    file_choosers(&rig, &mut agent, &mut cdp, client_dir.path());
    annotations(&rig, &mut agent, &mut cdp);
}

fn uploads(rig: &Rig, agent: &mut Agent, cdp: &mut OwnCdp, client_dir: &Path) {
    let url = rig.fixtures.url("/fixture/upload");
    let target = agent.tool("browser.open", None, json!({"url": url}))["targetId"].clone();
    let report = client_dir.join("report.txt");
    std::fs::write(&report, b"quarterly numbers\n").unwrap();
    let artifact = import(agent, &report);

    // Verified: the page itself holds exactly this file, and its change handler saw it.
    let evidence = upload(agent, &target, &artifact, "Resume", rig);
    assert_eq!(evidence["status"], "verified", "{evidence}");
    assert_eq!(evidence["action"], "upload");
    assert_eq!(evidence["fileCount"], 1);
    assert_eq!(evidence["fileNameMatches"], true);
    assert!(
        evidence["effects"]
            .as_array()
            .unwrap()
            .contains(&json!("files_changed"))
    );
    let held = page_value(
        cdp,
        "/fixture/upload",
        "(() => { const f = document.getElementById('resume').files; return [f.length, f[0].name, f[0].size, document.getElementById('resume-status').textContent]; })()",
    );
    assert_eq!(
        held,
        json!([1, "report.txt", 18, "report.txt (18 bytes)"]),
        "the page's own view"
    );
    // The client's file is only read.
    assert!(report.exists());

    // Validation that clears the input after the change: mismatch.
    let evidence = upload(agent, &target, &artifact, "Cover letter", rig);
    assert_eq!(
        (
            &evidence["status"],
            &evidence["reason"],
            &evidence["fileCount"]
        ),
        (&json!("mismatch"), &json!("files_cleared"), &json!(0)),
        "{evidence}"
    );
    assert_eq!(
        page_value(
            cdp,
            "/fixture/upload",
            "document.getElementById('letter').files.length"
        ),
        json!(0)
    );

    // The page swaps the selection for its own file: mismatch, the name does not match.
    let evidence = upload(agent, &target, &artifact, "Photo", rig);
    assert_eq!(
        (
            &evidence["status"],
            &evidence["reason"],
            &evidence["fileNameMatches"]
        ),
        (&json!("mismatch"), &json!("files_replaced"), &json!(false)),
        "{evidence}"
    );
    assert_eq!(
        page_value(
            cdp,
            "/fixture/upload",
            "document.getElementById('photo').files[0].name"
        ),
        json!("normalised.jpg")
    );

    // The input element is replaced by a fresh clone: mismatch.
    let evidence = upload(agent, &target, &artifact, "Avatar", rig);
    assert_eq!(
        (
            &evidence["status"],
            &evidence["reason"],
            &evidence["fileCount"]
        ),
        (&json!("mismatch"), &json!("input_replaced"), &json!(0)),
        "{evidence}"
    );

    // The input is removed: nothing can be read back.
    let evidence = upload(agent, &target, &artifact, "Attachment", rig);
    assert_eq!(
        (&evidence["status"], &evidence["reason"]),
        (&json!("unavailable"), &json!("input_removed")),
        "{evidence}"
    );
    assert!(evidence.get("fileCount").is_none(), "{evidence}");
    assert_eq!(
        page_value(
            cdp,
            "/fixture/upload",
            "document.getElementById('attach-box').textContent"
        ),
        json!("Attached: report.txt")
    );

    // By index: the 0-based position among the document's file inputs (the resume input again).
    let by_index = agent.tool(
        "browser.upload",
        Some(&target),
        json!({"artifactId": artifact, "inputIndex": 0, "observe": {"limit": 5}}),
    );
    assert_eq!(by_index["evidence"]["status"], "verified", "{by_index}");
    // Several file inputs and none named: the agent must choose.
    let (code, error) = agent.tool_err(
        "browser.upload",
        Some(&target),
        json!({"artifactId": artifact}),
    );
    assert_eq!(code, "invalid_params", "{error}");
    let (code, _) = agent.tool_err(
        "browser.upload",
        Some(&target),
        json!({"artifactId": artifact, "inputIndex": 99}),
    );
    assert_eq!(code, "invalid_params");
    // A ref that is not a file input.
    let observation = observe(agent, &target);
    let submit = find_ref(&observation, "button", "Send application");
    let (code, error) = agent.tool_err(
        "browser.upload",
        Some(&target),
        json!({"artifactId": artifact, "observationId": observation["observationId"], "ref": submit}),
    );
    assert_eq!(code, "element_not_actionable", "{error}");

    // An output Artifact is never an upload input.
    let shot = agent.tool("browser.capture", Some(&target), json!({}))["artifact"]["id"].clone();
    let (code, error) = agent.tool_err(
        "browser.upload",
        Some(&target),
        json!({"artifactId": shot, "inputIndex": 0}),
    );
    assert_eq!(code, "artifact_kind_not_allowed", "{error}");
    assert!(!error.to_string().contains(&protected(rig)));

    // Another client's import is answered exactly like an id that never existed.
    let mut other = Agent::new(rig, "com.example.other");
    let theirs = import(&mut other, &report);
    let (code, foreign) = agent.tool_err(
        "browser.upload",
        Some(&target),
        json!({"artifactId": theirs, "inputIndex": 0}),
    );
    assert_eq!(code, "artifact_not_found", "{foreign}");
    let (_, unknown) = agent.tool_err(
        "browser.upload",
        Some(&target),
        json!({"artifactId": "artifact:00000000000000000000000000000000", "inputIndex": 0}),
    );
    // Alike but for the Command id each call gets.
    let without_command = |error: &Value| {
        let mut data = error["data"].clone();
        data["context"].as_object_mut().unwrap().remove("commandId");
        data
    };
    assert_eq!(without_command(&foreign), without_command(&unknown));
    assert_eq!(foreign["message"], unknown["message"]);
    assert_eq!(foreign["code"], unknown["code"]);
    // The refusals never reached the page: the resume input still holds the first upload.
    assert_eq!(
        page_value(
            cdp,
            "/fixture/upload",
            "document.getElementById('resume').files.length"
        ),
        json!(1)
    );
    // The page reads the protected copy when it reads the file: while the Artifact lives...
    let read = "document.getElementById('resume').files[0].text().then((t) => 'read:' + t, (e) => 'error:' + e.name)";
    assert_eq!(
        page_await(cdp, "/fixture/upload", read),
        json!("read:quarterly numbers\n")
    );
    // ...and not after it was released (docs/artifacts.md says so).
    agent.bridge.ok(
        "artifacts/release",
        json!({"workspaceId": agent.workspace_id, "leaseId": agent.lease_id, "artifactId": artifact}),
    );
    let after = page_await(cdp, "/fixture/upload", read);
    assert!(
        after.as_str().unwrap().starts_with("error:"),
        "read after release: {after}"
    );
}

/// Awaits `expression` (a promise) in the page's own world over the test's own connection.
fn page_await(cdp: &mut OwnCdp, url_suffix: &str, expression: &str) -> Value {
    let target = cdp
        .pages()
        .into_iter()
        .find(|(_, url)| url.ends_with(url_suffix))
        .expect("page found")
        .0;
    let session = cdp.call(
        "Target.attachToTarget",
        json!({"targetId": target, "flatten": true}),
    )["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let result = cdp.call_in(
        Some(&session),
        "Runtime.evaluate",
        json!({"expression": expression, "awaitPromise": true, "returnByValue": true}),
    );
    cdp.call("Target.detachFromTarget", json!({"sessionId": session}));
    result["result"]["value"].clone()
}

fn file_choosers(rig: &Rig, agent: &mut Agent, cdp: &mut OwnCdp, client_dir: &Path) {
    let url = rig.fixtures.url("/fixture/upload#choosers");
    let target = agent.tool("browser.open", None, json!({"url": url}))["targetId"].clone();
    agent.events();
    let observation = observe(agent, &target);
    let clicked = agent.tool(
        "browser.click",
        Some(&target),
        json!({"observationId": observation["observationId"], "ref": input_ref(&observation, "Resume"), "observe": {"limit": 5}}),
    );
    let effects = clicked["evidence"]["effects"].as_array().unwrap().clone();
    assert!(
        effects.contains(&json!("file_chooser_opened")),
        "{}",
        clicked["evidence"]
    );
    let event = agent.wait_event("file_chooser");
    assert_eq!(event["payload"]["targetId"], target);
    assert_eq!(event["payload"]["mode"], "single");
    assert!(
        !event.to_string().contains("backendNodeId"),
        "no raw ids: {event}"
    );
    // The tab is not stuck behind a native dialog: the next call works at once.
    observe(agent, &target);

    // A custom button whose handler clicks a hidden multi-file input.
    let observation = observe(agent, &target);
    let button = find_ref(&observation, "button", "Choose images");
    agent.tool(
        "browser.click",
        Some(&target),
        json!({"observationId": observation["observationId"], "ref": button, "observe": {"limit": 5}}),
    );
    let event = agent.wait_event("file_chooser");
    assert_eq!(event["payload"]["mode"], "multiple", "{event}");
    // Answered without naming the input: the chooser's own (hidden, in no Observation).
    let photo = client_dir.join("holiday.png");
    std::fs::write(&photo, b"not really a png").unwrap();
    let artifact = import(agent, &photo);
    let answered = agent.tool(
        "browser.upload",
        Some(&target),
        json!({"artifactId": artifact, "observe": {"limit": 5}}),
    );
    assert_eq!(answered["evidence"]["status"], "verified", "{answered}");
    assert_eq!(answered["evidence"]["multiple"], true);
    let gallery = page_value(
        cdp,
        "/fixture/upload#choosers",
        "[...document.getElementById('gallery').files].map((f) => f.name)",
    );
    assert_eq!(gallery, json!(["holiday.png"]));
    user_tab_choosers(rig, agent);
}

/// A user tab intercepts choosers only while a Lease controls it: `browser.tabs.release`
/// switches interception off, and controlling the tab again brings it back.
fn user_tab_choosers(rig: &Rig, agent: &mut Agent) {
    let mut cdp = OwnCdp::connect(&rig.chromium);
    let url = rig.fixtures.url("/fixture/upload#user");
    cdp.open_user_tab(&url);
    let mut target = Value::Null;
    assert!(
        support::wait_until(std::time::Duration::from_secs(15), || {
            let tabs = agent.tabs();
            match tabs.iter().find(|t| t["url"] == url.as_str()) {
                Some(tab) => {
                    target = tab["targetId"].clone();
                    true
                }
                None => false,
            }
        }),
        "the user tab is listed"
    );
    cdp.wait_for_document("/fixture/upload#user", "Upload documents");
    let click_resume = |agent: &mut Agent| {
        let observation = observe(agent, &target);
        agent.tool(
            "browser.click",
            Some(&target),
            json!({"observationId": observation["observationId"], "ref": input_ref(&observation, "Resume"), "observe": {"limit": 5}}),
        )
    };
    let controlled = click_resume(agent);
    assert!(
        controlled["evidence"]["effects"]
            .as_array()
            .unwrap()
            .contains(&json!("file_chooser_opened")),
        "{}",
        controlled["evidence"]
    );
    agent.wait_event("file_chooser");
    agent.tool("browser.tabs.release", Some(&target), json!({}));
    agent.events();
    // Released, interception was switched off; controlled again, the Broker's click is
    // intercepted once more (one event, from this click).
    let again = click_resume(agent);
    assert!(
        again["evidence"]["effects"]
            .as_array()
            .unwrap()
            .contains(&json!("file_chooser_opened")),
        "{}",
        again["evidence"]
    );
    let mut seen = Vec::new();
    assert!(
        support::wait_until(std::time::Duration::from_secs(15), || {
            seen.extend(agent.events());
            seen.iter().any(|e| e["type"] == "file_chooser")
        }),
        "no file_chooser event after the controlled click"
    );
    let choosers = seen.iter().filter(|e| e["type"] == "file_chooser").count();
    assert_eq!(choosers, 1, "{seen:?}");

    // Another Workspace takes the tab and is released while it controls it; the tab goes back
    // to the user, and the next controller's clicks are intercepted again.
    agent.tool("browser.tabs.release", Some(&target), json!({}));
    let mut other = Agent::new(rig, "com.example.other-user-tab");
    other.connect();
    let theirs = other
        .tabs()
        .into_iter()
        .find(|t| t["url"] == url.as_str())
        .unwrap()["targetId"]
        .clone();
    let observation = observe(&mut other, &theirs);
    let clicked = other.tool(
        "browser.click",
        Some(&theirs),
        json!({"observationId": observation["observationId"], "ref": input_ref(&observation, "Resume")}),
    );
    assert!(
        clicked["evidence"]["effects"]
            .as_array()
            .unwrap()
            .contains(&json!("file_chooser_opened")),
        "{}",
        clicked["evidence"]
    );
    let workspace_id = other.workspace_id.clone();
    other
        .bridge
        .ok("workspaces/release", json!({"workspaceId": workspace_id}));
    let back = click_resume(agent);
    assert!(
        back["evidence"]["effects"]
            .as_array()
            .unwrap()
            .contains(&json!("file_chooser_opened")),
        "{}",
        back["evidence"]
    );
    agent.tool("browser.tabs.release", Some(&target), json!({}));
}

/// Decodes a PNG in a blank tab of the test's own (pixels read with `colorSpaceConversion:
/// none`, so values are the file's) and returns the RGB of each point.
fn pixels(cdp: &mut OwnCdp, png: &[u8], points: &[(u32, u32)]) -> Vec<[u8; 3]> {
    let tab = cdp.open_user_tab("about:blank");
    let session = cdp.call(
        "Target.attachToTarget",
        json!({"targetId": tab, "flatten": true}),
    )["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let expression = format!(
        "(async () => {{ const b = atob({:?}); const u = new Uint8Array(b.length); for (let i = 0; i < b.length; i++) u[i] = b.charCodeAt(i); const bmp = await createImageBitmap(new Blob([u]), {{colorSpaceConversion: 'none', premultiplyAlpha: 'none'}}); const c = new OffscreenCanvas(bmp.width, bmp.height); const g = c.getContext('2d'); g.drawImage(bmp, 0, 0); return JSON.stringify({}.map(([x, y]) => Array.from(g.getImageData(x, y, 1, 1).data).slice(0, 3))); }})()",
        base64(png),
        serde_json::to_string(&points.iter().map(|(x, y)| [*x, *y]).collect::<Vec<_>>()).unwrap(),
    );
    let result = cdp.call_in(
        Some(&session),
        "Runtime.evaluate",
        json!({"expression": expression, "awaitPromise": true, "returnByValue": true}),
    );
    cdp.call("Target.closeTarget", json!({"targetId": tab}));
    let text = result["result"]["value"]
        .as_str()
        .unwrap_or_else(|| panic!("decode failed: {result}"));
    serde_json::from_str(text).unwrap()
}

fn base64(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            match i <= chunk.len() {
                true => out.push(TABLE[((n >> (18 - 6 * i)) & 63) as usize] as char),
                false => out.push('='),
            }
        }
    }
    out
}

/// The image of a capture's Artifact.
fn artifact_bytes(agent: &mut Agent, capture: &Value) -> Vec<u8> {
    let got = agent.bridge.ok(
        "artifacts/get",
        json!({"workspaceId": agent.workspace_id, "leaseId": agent.lease_id, "artifactId": capture["artifact"]["id"]}),
    );
    std::fs::read(got["path"].as_str().unwrap()).unwrap()
}

/// An observed element's box: `(x, y, width, height)`, viewport CSS px.
fn bounds(observation: &Value, element_ref: u64) -> (u32, u32, u32, u32) {
    let element = observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["ref"] == element_ref)
        .unwrap();
    let b = &element["bounds"];
    let n = |key: &str| b[key].as_u64().unwrap() as u32;
    (n("x"), n("y"), n("width"), n("height"))
}

/// The four inner corner pixels of a box.
fn corners((x, y, w, h): (u32, u32, u32, u32)) -> Vec<(u32, u32)> {
    vec![
        (x, y),
        (x + w - 1, y),
        (x, y + h - 1),
        (x + w - 1, y + h - 1),
    ]
}

fn annotations(rig: &Rig, agent: &mut Agent, cdp: &mut OwnCdp) {
    let url = rig.fixtures.url("/fixture/annotate");
    let target = agent.tool("browser.open", None, json!({"url": url}))["targetId"].clone();
    let observation = observe(agent, &target);
    let observation_id = observation["observationId"].clone();
    let alpha = find_ref(&observation, "button", "Alpha");
    let beta = find_ref(&observation, "link", "Beta");
    let gamma = find_ref(&observation, "textbox", "Gamma");
    let delta = find_ref(&observation, "button", "Delta");
    let far = find_ref(&observation, "button", "Far below");
    assert_eq!(bounds(&observation, alpha), (40, 30, 120, 40));

    // Chosen refs: Alpha, Gamma and the one below the viewport.
    let capture = agent.tool(
        "browser.capture",
        Some(&target),
        json!({"annotations": {"observationId": observation_id, "refs": [alpha, gamma, far]}}),
    );
    assert_eq!(capture["annotationCount"], 2, "{capture}");
    assert_eq!(
        capture["skippedRefs"],
        json!([{"ref": far, "reason": "outside_viewport"}])
    );
    assert_eq!(capture["artifact"]["kind"], "screenshot");
    let png = artifact_bytes(agent, &capture);
    let mut points = Vec::new();
    for element_ref in [alpha, gamma] {
        points.extend(corners(bounds(&observation, element_ref)));
    }
    let drawn = pixels(cdp, &png, &points);
    assert!(
        drawn.iter().all(|p| *p == STROKE),
        "annotated corners {points:?}: {drawn:?}"
    );
    // Just outside each annotated box, at mid-height: the white page, untouched.
    let (x, y, w, h) = bounds(&observation, alpha);
    let (gx, gy, gw, gh) = bounds(&observation, gamma);
    let outside = [
        (x - 2, y + h / 2),
        (x + w + 1, y + h / 2),
        (gx - 2, gy + gh / 2),
        (gx + gw + 1, gy + gh / 2),
        (x + w / 2, y - 2),
    ];
    let around = pixels(cdp, &png, &outside);
    assert!(
        around.iter().all(|p| *p == [255, 255, 255]),
        "outside the boxes: {around:?}"
    );
    // The middle of a box shows the element, not the outline.
    let middle = pixels(cdp, &png, &[(x + w / 2, y + h / 2 + 8)]);
    assert_ne!(middle[0], STROKE);
    // Elements not asked for carry no outline.
    let mut others = corners(bounds(&observation, beta));
    others.extend(corners(bounds(&observation, delta)));
    let plain = pixels(cdp, &png, &others);
    assert!(plain.iter().all(|p| *p != STROKE), "{plain:?}");

    // Refs omitted: every ref in the viewport is drawn, the one below it skipped.
    let all = agent.tool(
        "browser.capture",
        Some(&target),
        json!({"annotations": {"observationId": observation_id}}),
    );
    let in_view = observation["elements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["inViewport"] == true)
        .count();
    assert_eq!(all["annotationCount"], in_view, "{all}");
    assert_eq!(in_view, 4);
    let png = artifact_bytes(agent, &all);
    let mut points = Vec::new();
    for element_ref in [alpha, beta, gamma, delta] {
        points.extend(corners(bounds(&observation, element_ref)));
    }
    let drawn = pixels(cdp, &png, &points);
    assert!(drawn.iter().all(|p| *p == STROKE), "{drawn:?}");

    // JPEG: drawn and re-encoded as JPEG at the asked quality.
    let jpeg = agent.tool(
        "browser.capture",
        Some(&target),
        json!({"format": "jpeg", "quality": 90, "annotations": {"observationId": observation_id, "refs": [delta]}}),
    );
    assert_eq!(jpeg["annotationCount"], 1, "{jpeg}");
    assert_eq!(jpeg["artifact"]["mimeType"], "image/jpeg");
    let bytes = artifact_bytes(agent, &jpeg);
    assert_eq!(&bytes[..3], b"\xff\xd8\xff", "a JPEG file");
    let (dx, dy, _, _) = bounds(&observation, delta);
    let near = pixels(cdp, &bytes, &[(dx, dy + 10)])[0];
    assert!(
        near[0] > 200 && near[1] < 80 && near[2] > 200,
        "the outline survives JPEG: {near:?}"
    );

    // A plain capture is not annotated, and the page's world never saw a canvas or a decode.
    let plain = agent.tool("browser.capture", Some(&target), json!({}));
    assert!(plain.get("annotationCount").is_none());
    let png = artifact_bytes(agent, &plain);
    let clean = pixels(cdp, &png, &corners(bounds(&observation, alpha)));
    assert!(clean.iter().all(|p| *p != STROKE), "{clean:?}");
    assert_eq!(
        page_value(
            cdp,
            "/fixture/annotate",
            "[window.__sawCanvas, document.querySelectorAll('canvas').length]"
        ),
        json!([0, 0])
    );

    // Refusals: annotations only for viewport captures; a stale or unknown Observation.
    for other in [json!({"fullPage": true}), json!({"selector": "button"})] {
        let mut arguments = other.clone();
        arguments["annotations"] = json!({"observationId": observation_id});
        let (code, error) = agent.tool_err("browser.capture", Some(&target), arguments);
        assert_eq!(code, "invalid_params", "{other}: {error}");
        assert_eq!(error["data"]["context"]["path"], "arguments.annotations");
    }
    let (code, _) = agent.tool_err(
        "browser.capture",
        Some(&target),
        json!({"annotations": {"observationId": "observation:00000000000000000000000000000000"}}),
    );
    assert_eq!(code, "observation_not_found");
    agent.tool(
        "browser.navigate",
        Some(&target),
        json!({"action": "reload"}),
    );
    let (code, error) = agent.tool_err(
        "browser.capture",
        Some(&target),
        json!({"annotations": {"observationId": observation_id}}),
    );
    assert_eq!(
        code, "observation_not_found",
        "an Observation of the old document: {error}"
    );
}
