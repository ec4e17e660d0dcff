// Helpers of browser.wait, browser.hover and browser.drag. Like every page
// script they run in the Broker's isolated world: the page's own overrides of
// querySelector, innerText or addEventListener do not exist here, but every
// DOM value read is page data. Each returns plain JSON or {error}.

// Elements looked at per visibility scan (hover): a bound on huge pages.
const BP_SCAN_MAX = 20000;
// Appeared elements reported per hover.
const BP_APPEARED_MAX = 10;

function bpNormalizedText(text) {
  return String(text).replace(/\s+/g, ' ').trim().toLowerCase();
}

// Whether `needle` (case-insensitive, whitespace collapsed) is in the
// document's rendered text: innerText of the body (hidden elements are not
// rendered text), then the visible text nodes of open shadow roots.
function bpHasVisibleText(needle) {
  const want = bpNormalizedText(needle);
  const body = document.body || document.documentElement;
  if (!body) return false;
  if (bpNormalizedText(body.innerText || '').includes(want)) return true;
  for (const root of bpShadowRoots(body, [])) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const el = node.parentElement;
      if (el && bpNormalizedText(node.data).includes(want) && bpIsVisible(el)) return true;
    }
  }
  return false;
}

// One look at the conditions browser.wait waits for: `text` (is it shown),
// `selector` (how many match, how many of them are visible).
function waitProbe(options) {
  const out = {};
  if (typeof options.text === 'string') out.textFound = bpHasVisibleText(options.text);
  if (typeof options.selector === 'string') {
    let matched;
    try {
      matched = document.querySelectorAll(options.selector);
    } catch (e) {
      return bpError('invalid_selector', 'the selector is not valid CSS: ' + options.selector);
    }
    let visible = 0;
    for (let i = 0; i < matched.length && i < BP_SCAN_MAX; i++) {
      if (bpIsVisible(matched[i])) visible++;
    }
    out.matched = matched.length;
    out.visible = visible;
  }
  return out;
}

// Every element of the document and its open shadow roots, at most
// BP_SCAN_MAX, in tree order.
function bpScanElements() {
  const out = [];
  const visit = (root) => {
    const all = root.querySelectorAll('*');
    for (let i = 0; i < all.length && out.length < BP_SCAN_MAX; i++) {
      out.push(all[i]);
      if (all[i].shadowRoot) visit(all[i].shadowRoot);
    }
  };
  visit(document);
  return out;
}

// A short description of an element for evidence: tag, role, bounded name.
function bpEvidenceOf(el) {
  const role = el.getAttribute('role') || el.localName;
  const label = el.getAttribute('aria-label');
  const name = bpCollapse(label !== null ? label : (el.innerText || el.textContent || ''), 80);
  return { tag: el.localName, role: role, name: name };
}

// Before a hover: remember which elements are visible now.
function hoverMark(options) {
  const state = bpState();
  const visible = new WeakSet();
  let count = 0;
  for (const el of bpScanElements()) {
    if (bpIsVisible(el)) { visible.add(el); count++; }
  }
  state.hoverBefore = visible;
  return { visible: count };
}

// After a hover: whether the ref's element (if any) is hovered, and which
// elements became visible since hoverMark (outermost ones first, bounded).
function hoverReport(options) {
  const state = bpState();
  const before = state.hoverBefore;
  state.hoverBefore = undefined;
  let hovered = null;
  if (options.observationKey !== undefined) {
    const found = bpLookup(options.observationKey, options.ref, options.documentKey);
    if (found.error) return found;
    hovered = found.element.matches(':hover');
  }
  if (before === undefined) return { hovered: hovered, appearedCount: 0, appeared: [], marked: false };
  const appeared = [];
  let count = 0;
  for (const el of bpScanElements()) {
    if (before.has(el) || !bpIsVisible(el)) continue;
    // Count only the outermost element of what appeared: one whose parent
    // was visible before (or is not rendered as a box itself).
    const parent = bpComposedParent(el);
    if (parent !== null && parent.nodeType === 1 && !before.has(parent) && bpIsVisible(parent)) continue;
    count++;
    if (appeared.length < BP_APPEARED_MAX) appeared.push(bpEvidenceOf(el));
  }
  return { hovered: hovered, appearedCount: count, appeared: appeared, marked: true };
}

// Where an element sits: its parent, its index among the parent's element
// children, its box in document CSS px (so scrolling does not move it).
function bpPlaceOf(el) {
  const parent = el.parentElement;
  const index = parent === null ? -1 : Array.prototype.indexOf.call(parent.children, el);
  const r = el.getBoundingClientRect();
  return { parent: parent, index: index, rect: [r.x + scrollX, r.y + scrollY, r.width, r.height] };
}

// Before a drag: the source (a ref, else the element at the start point),
// the target's content size, and listeners for the HTML5 drag events.
function dragArm(options) {
  let source = null;
  if (options.source !== undefined) {
    const found = bpLookup(options.source.observationKey, options.source.ref, options.source.documentKey);
    if (found.error) return found;
    source = found.element;
  } else if (options.start !== undefined) {
    source = bpDeepElementFromPoint(options.start[0], options.start[1]);
  }
  let target = null;
  if (options.target !== undefined) {
    const found = bpLookup(options.target.observationKey, options.target.ref, options.target.documentKey);
    if (found.error) return found;
    target = found.element;
  }
  const state = bpState();
  if (state.drag && state.drag.release) state.drag.release();
  const drag = {
    source: source,
    target: target,
    place: source ? bpPlaceOf(source) : null,
    targetChildren: target ? target.childElementCount : null,
    targetText: target ? (target.textContent || '').length : null,
    events: { dragstart: false, drop: null, dragend: null },
    release: null,
  };
  const onStart = (event) => {
    if (event.isTrusted) drag.events.dragstart = true;
  };
  const onDrop = (event) => {
    if (!event.isTrusted || drag.events.drop !== null) return;
    const path = event.composedPath();
    const hit = path.length > 0 ? path[0] : null;
    const types = event.dataTransfer ? Array.prototype.slice.call(event.dataTransfer.types, 0, 8) : [];
    drag.events.drop = {
      inside: target === null ? null : (hit !== null && hit.nodeType === 1 && bpComposedContains(target, hit)),
      types: types.map((t) => bpClip(String(t), 64)),
    };
  };
  const onEnd = (event) => {
    if (event.isTrusted && event.dataTransfer) drag.events.dragend = String(event.dataTransfer.dropEffect);
  };
  window.addEventListener('dragstart', onStart, true);
  window.addEventListener('drop', onDrop, true);
  window.addEventListener('dragend', onEnd, true);
  drag.release = () => {
    window.removeEventListener('dragstart', onStart, true);
    window.removeEventListener('drop', onDrop, true);
    window.removeEventListener('dragend', onEnd, true);
  };
  state.drag = drag;
  return { armed: true, source: source !== null };
}

// After a drag: what the HTML5 events saw, whether the source moved (another
// parent, another index, or its box moved by more than a pixel while it stayed
// in the document), and whether the target's content changed.
function dragVerdict(options) {
  const state = bpState();
  const drag = state.drag;
  state.drag = undefined;
  if (!drag) return { armed: false };
  drag.release();
  const out = {
    armed: true,
    dragStarted: drag.events.dragstart,
    drop: drag.events.drop,
    dropEffect: drag.events.dragend,
    sourceConnected: drag.source !== null && drag.source.isConnected,
    moved: false,
    targetChanged: false,
  };
  if (drag.source !== null && drag.source.isConnected && drag.place !== null) {
    const now = bpPlaceOf(drag.source);
    const before = drag.place;
    const shifted = Math.abs(now.rect[0] - before.rect[0]) > 1 || Math.abs(now.rect[1] - before.rect[1]) > 1;
    out.moved = now.parent !== before.parent || now.index !== before.index || shifted;
    out.reordered = now.parent !== before.parent || now.index !== before.index;
  }
  if (drag.target !== null && drag.target.isConnected) {
    out.targetChanged = drag.target.childElementCount !== drag.targetChildren ||
      (drag.target.textContent || '').length !== drag.targetText;
  }
  return out;
}
