// Helpers for the action tools, each taking one options object with
// `observationKey` and `ref` (see bpLookup in common.js). They return plain
// JSON or {error: {code, message}}; only `resolve` returns an element.

// The element behind a ref, or null when the observation is unknown, the ref
// out of range, the element detached or the document replaced.
function resolve(options) {
  const found = bpLookup(options.observationKey, options.ref, options.documentKey);
  return found.error ? null : found.element;
}

// The text-like value of an element: form value or editable text.
function bpValueOf(el) {
  const tag = el.localName;
  if (tag === 'input' || tag === 'textarea' || tag === 'select') return el.value;
  if (el.isContentEditable) return el.innerText;
  return null;
}

function bpIsPassword(el) {
  return bpIsSensitiveField(el);
}

// Unicode code points of a string: the one unit every length in typing
// evidence is counted in (an emoji is one, not two UTF-16 units).
function bpCodePoints(text) {
  let count = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
    count++;
  }
  return count;
}

// Where to click the element and whether it can take a click now: the click
// point (viewport CSS px of this frame), the box it was taken from (compared
// across samples for stability), the frame's viewport size (to map the point
// into the parent frame), whether it is disabled, and a hit test at the point.
// `scroll`: 'center' (the default) scrolls the element to the centre of the
// viewport, 'if_needed' only when it is not entirely in view, 'none' never;
// `scrolled` tells whether that moved it.
function clickPoint(options) {
  const found = bpLookup(options.observationKey, options.ref, options.documentKey);
  if (found.error) return found;
  const el = found.element;
  if (!el.checkVisibility({ visibilityProperty: true })) {
    return bpError('not_visible', 'the element is not rendered or is visibility:hidden');
  }
  const mode = options.scroll === undefined ? 'center' : options.scroll;
  let scrolled = false;
  if (mode !== 'none') {
    const before = el.getBoundingClientRect();
    const view = bpViewport();
    const entirely = before.top >= 0 && before.left >= 0 && before.bottom <= view.height && before.right <= view.width;
    if (mode === 'center' || !entirely) {
      el.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
      const after = el.getBoundingClientRect();
      scrolled = after.top !== before.top || after.left !== before.left;
    }
  }
  const viewport = bpViewport();
  let box = null;
  const rects = el.getClientRects();
  for (let i = 0; i < rects.length; i++) {
    const r = rects[i];
    if (r.width > 0 && r.height > 0 && bpRectInViewport(r, viewport)) {
      box = r;
      break;
    }
  }
  if (box === null) {
    const r = el.getBoundingClientRect();
    if (r.width <= 0 || r.height <= 0) return bpError('not_visible', 'the element has an empty box');
    box = r;
  }
  const left = Math.max(box.left, 0);
  const right = Math.min(box.right, viewport.width);
  const top = Math.max(box.top, 0);
  const bottom = Math.min(box.bottom, viewport.height);
  const x = right > left ? (left + right) / 2 : box.left + box.width / 2;
  const y = bottom > top ? (top + bottom) / 2 : box.top + box.height / 2;
  const hitElement = bpDeepElementFromPoint(x, y);
  let hit = hitElement !== null && bpComposedContains(el, hitElement);
  let viaLabel = false;
  if (!hit && bpIsLabelOf(el, hitElement)) {
    hit = true;
    viaLabel = true;
  }
  const round = (v) => Math.round(v * 100) / 100;
  const result = {
    x: round(x),
    y: round(y),
    hit: hit,
    inViewport: x >= 0 && y >= 0 && x < viewport.width && y < viewport.height,
    box: [round(box.left), round(box.top), round(box.width), round(box.height)],
    frame: [window.innerWidth, window.innerHeight],
    disabled: el.matches(':disabled') || el.getAttribute('aria-disabled') === 'true',
    scrolled: scrolled,
    frames: bpFramesSeen(),
    timeline: document.timeline.currentTime,
  };
  if (viaLabel) result.viaLabel = true;
  if (!hit) result.occludedBy = hitElement === null ? null : bpDescribe(hitElement);
  return result;
}

// How many animation-frame callbacks of this document the world has seen
// since it first asked, watching for the next one. A sample whose count and
// `document.timeline.currentTime` (the animation clock, which advances once
// per rendered frame) are both larger than another's has a whole frame
// between them: CSS animations have advanced and the page's own frame
// callbacks have run, so an element animated per frame has moved by then.
// A document that renders nothing (a hidden tab) never counts up; the Broker
// then falls back to a timed interval.
function bpFramesSeen() {
  const state = bpState();
  if (state.frames === undefined) state.frames = 0;
  if (!state.frameWatch) {
    state.frameWatch = true;
    requestAnimationFrame(() => {
      state.frames += 1;
      state.frameWatch = false;
    });
  }
  return state.frames;
}

// The deepest element at a point of this frame's viewport, through open
// shadow roots.
function bpDeepElementFromPoint(x, y) {
  let hitElement = document.elementFromPoint(x, y);
  while (hitElement && hitElement.shadowRoot) {
    const inner = hitElement.shadowRoot.elementFromPoint(x, y);
    if (inner === null || inner === hitElement) break;
    hitElement = inner;
  }
  return hitElement;
}

// clickPoint, then, when the element can take a click where it is (also
// right after this call scrolled it there), the same again, without
// scrolling, in the first frame callback whose animation clock stepped
// `minStep` ms past the first sample's (a whole rendered frame lies between
// the two),
// or `second: null` when no such frame came within `maxWait` ms (a document
// that renders nothing). Resolves a promise: the frame is waited for here,
// not polled for. A refusal (stale ref, not rendered) is returned as is.
function clickSettle(options) {
  const first = clickPoint(options);
  if (first.error) return first;
  if (!first.inViewport || !first.hit || first.disabled || first.timeline === null) {
    return { first: first, second: null };
  }
  const again = Object.assign({}, options, { scroll: 'none' });
  return new Promise(function (resolve) {
    let done = false;
    const finish = function (second) {
      if (done) return;
      done = true;
      resolve({ first: first, second: second });
    };
    setTimeout(function () { finish(null); }, options.maxWait);
    const next = function () {
      requestAnimationFrame(function () {
        if (done) return;
        const now = document.timeline.currentTime;
        if (now === null || now - first.timeline < options.minStep) {
          next();
          return;
        }
        const second = clickPoint(again);
        finish(second.error ? null : second);
      });
    };
    next();
  });
}

// Whether `node` lies in a <label> whose control is `el`.
function bpIsLabelOf(el, node) {
  if (node === null || node === undefined || typeof node.closest !== 'function') return false;
  const label = node.closest('label');
  return label !== null && label.control === el;
}

// The click-truth record of this world (see clicktruth.js), or null.
function bpClickTruth() {
  const state = globalThis[Symbol.for('browser-pilot.click-truth.v1')];
  return state === undefined ? null : state;
}

function bpReleaseClicks(state) {
  for (const entry of state.clicks) {
    if (entry.release !== null) entry.release();
  }
  state.clicks = [];
  if (state.watch) {
    state.watch.disconnect();
    state.watch = null;
  }
}

// Whether a DOM mutation is something the page did: nodes added or removed,
// text changed, or an attribute other than an inline style (animations write
// styles on every frame) changed.
function bpPageMutation(record) {
  return record.type !== 'attributes' || record.attributeName !== 'style';
}

// Starts recording the trusted clicks of one action (`type`: click or
// auxclick). `early` tells whether the listener was installed at document
// start, before any page script.
function armClick(options) {
  const state = bpClickTruth();
  if (state === null) return { armed: false, early: false };
  bpReleaseClicks(state);
  state.armed = { type: options.type === 'auxclick' ? 'auxclick' : 'click' };
  // The document's own changes from now until the verdict: what the click
  // did beyond the clicked element's state (a counter, a message, a list).
  state.mutations = 0;
  state.watch = new MutationObserver((records) => {
    state.mutations += records.filter(bpPageMutation).length;
  });
  state.watch.observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
  return { armed: true, early: state.early };
}

// What became of the armed clicks, against the element of a ref (when
// given): how many trusted clicks the document saw, how many were aimed
// inside the element (or its label), how many of those reached their target,
// and whether the first one that did had its default prevented (read after
// dispatch). Disarms the record. The element may have been removed by the
// click itself; it is still compared.
function clickVerdict(options) {
  const state = bpClickTruth();
  if (state === null || state.armed === null) {
    return { armed: false, early: state !== null && state.early, observed: 0, inside: 0, reached: 0, prevented: false, mutations: 0 };
  }
  let el = null;
  if (typeof options.observationKey === 'string') {
    el = bpElementOf(options.observationKey, options.ref, options.documentKey).element || null;
  }
  const clicks = state.clicks;
  state.armed = null;
  let inside = 0;
  let reached = 0;
  let prevented = false;
  for (const entry of clicks) {
    const target = entry.target;
    const within = el !== null && target !== null && target.nodeType !== undefined &&
      (bpComposedContains(el, target) || bpIsLabelOf(el, target));
    if (!within) continue;
    inside += 1;
    if (entry.reached) {
      if (reached === 0) prevented = entry.event.defaultPrevented;
      reached += 1;
    }
  }
  const observed = clicks.length;
  let mutations = state.mutations || 0;
  if (state.watch) mutations += state.watch.takeRecords().filter(bpPageMutation).length;
  bpReleaseClicks(state);
  return { armed: true, early: state.early, observed: observed, inside: inside, reached: reached, prevented: prevented, mutations: mutations };
}

// The keystroke guard of this world (see keyguard.js), or null.
function bpKeyGuard() {
  const state = globalThis[Symbol.for('browser-pilot.key-guard.v1')];
  return state === undefined ? null : state;
}

// Arms the keystroke guard for one typing burst on the deep active element,
// when the guard was installed at document start and the document has no
// frames (a key typed
// into a frame never reaches this window, so nothing here could stop it).
// `budget` (how long the burst may take), `gap` (the longest a key may be
// held on its way) and `linger` (after the deadline, how long a key still
// counts as the burst's) are milliseconds. Returns what activeElementKey does,
// and whether the guard is armed.
function armKeys(options) {
  const active = bpDeepActiveElement();
  const result = activeElementKey(options);
  result.armed = false;
  const state = bpKeyGuard();
  if (state === null) return result;
  state.armed = null;
  state.lapsed = null;
  if (!state.early || window.length > 0 || !active) return result;
  const now = performance.now();
  state.armed = {
    element: active, deadline: now + options.budget, gap: options.gap, linger: options.linger,
    refused: null, stopped: 0, seen: 0, blocked: 0, down: new Set(),
  };
  result.armed = true;
  return result;
}

// What the armed burst did (characters stopped and seen by this
// document, editing insertions stopped, and why the guard began refusing),
// and disarms the guard. Unarmed, says whether a key made after the burst's
// deadline and linger disarmed it (`lapsed`: `clean` or `cut`, see keyguard.js).
function keyRecord(options) {
  const state = bpKeyGuard();
  const armed = state === null ? null : state.armed;
  if (armed === null) {
    const lapsed = state === null ? null : state.lapsed;
    if (state !== null) state.lapsed = null;
    return { armed: false, lapsed: lapsed, stopped: 0, seen: 0, blocked: 0, refused: null };
  }
  state.armed = null;
  return {
    armed: true, stopped: armed.stopped, seen: armed.seen, blocked: armed.blocked, refused: armed.refused,
  };
}

// The observable state of the element behind a ref, for before/after
// evidence. Password values are never returned, only their length.
function stateSnapshot(options) {
  const found = bpLookup(options.observationKey, options.ref, options.documentKey);
  if (found.error) return found;
  return bpSnapshotOf(found.element, options.valueMax);
}

function bpSnapshotOf(el, valueMax) {
  const tag = el.localName;
  const snapshot = { documentKey: bpDocumentKey(), elementKey: bpElementKey(el), connected: el.isConnected };
  if (tag === 'input' && (el.type === 'checkbox' || el.type === 'radio')) {
    snapshot.checked = el.indeterminate ? 'mixed' : el.checked;
  } else if (el.hasAttribute('aria-checked')) {
    const checked = el.getAttribute('aria-checked');
    snapshot.checked = checked === 'mixed' ? 'mixed' : checked === 'true';
  }
  if (tag === 'option') snapshot.selected = el.selected;
  else if (el.hasAttribute('aria-selected')) snapshot.selected = el.getAttribute('aria-selected') === 'true';
  if (el.hasAttribute('aria-expanded')) snapshot.expanded = el.getAttribute('aria-expanded') === 'true';
  else if (tag === 'summary' && el.parentElement && el.parentElement.localName === 'details') snapshot.expanded = el.parentElement.open;
  else if (tag === 'details') snapshot.expanded = el.open;
  if (el.hasAttribute('aria-pressed')) {
    const pressed = el.getAttribute('aria-pressed');
    snapshot.pressed = pressed === 'mixed' ? 'mixed' : pressed === 'true';
  }
  const value = bpValueOf(el);
  if (value !== null) {
    snapshot.valueLength = bpCodePoints(value);
    if (bpIsPassword(el)) snapshot.sensitive = true;
    else snapshot.value = bpClip(value, valueMax);
  }
  if (tag === 'select') {
    snapshot.selectedValues = Array.from(el.selectedOptions).slice(0, 100).map((option) => bpClip(option.value, 200));
  }
  snapshot.focused = bpDeepActiveElement() === el;
  return snapshot;
}

// Focuses the element and selects all of its editable content, or with
// `atEnd` puts the caret after it (typing then appends).
function focusAndSelectAll(options) {
  const found = bpLookup(options.observationKey, options.ref, options.documentKey);
  if (found.error) return found;
  const el = found.element;
  el.focus({ preventScroll: true });
  let selectedAll = false;
  const tag = el.localName;
  if (options.atEnd) {
    return bpCaretToEnd(el);
  }
  if (tag === 'input' || tag === 'textarea') {
    try {
      el.select();
      selectedAll = true;
    } catch (error) {
      selectedAll = false;
    }
  } else if (el.isContentEditable) {
    const selection = el.getRootNode().getSelection ? el.getRootNode().getSelection() : window.getSelection();
    (selection || window.getSelection()).selectAllChildren(el);
    selectedAll = true;
  }
  const active = bpDeepActiveElement();
  return {
    focused: active === el,
    selectedAll: selectedAll,
    activeElementKey: active ? bpElementKey(active) : null,
  };
}

// Everything typing needs before its first key, in one call: the element's
// state (stateSnapshot), then the focus (focusAndSelectAll, or the caret at
// the end with `atEnd`), then the deep active element, arming the keystroke
// guard on it when `arm` is given (armKeys). A stale ref fails before
// anything is focused.
function prepareTyping(options) {
  const before = stateSnapshot(options);
  if (before.error) return before;
  const focus = focusAndSelectAll(options);
  if (focus.error) return focus;
  const active = options.arm ? armKeys(options.arm) : activeElementKey(options);
  return { before: before, focus: focus, active: active };
}

// Collapses the caret to the end of a focused element's content. Inputs
// without a selection API (email, number) report caretAtEnd false.
function bpCaretToEnd(el) {
  let caretAtEnd = false;
  const tag = el.localName;
  if (tag === 'input' || tag === 'textarea') {
    try {
      const end = el.value.length;
      el.setSelectionRange(end, end);
      caretAtEnd = el.selectionStart === end;
    } catch (error) {
      caretAtEnd = false;
    }
  } else if (el.isContentEditable) {
    const root = el.getRootNode();
    const selection = (root.getSelection && root.getSelection()) || window.getSelection();
    selection.selectAllChildren(el);
    selection.collapseToEnd();
    caretAtEnd = true;
  }
  const active = bpDeepActiveElement();
  return {
    focused: active === el,
    selectedAll: false,
    caretAtEnd: caretAtEnd,
    activeElementKey: active ? bpElementKey(active) : null,
  };
}

// The identity of the deep active element (through open shadow roots).
function activeElementKey(options) {
  const active = bpDeepActiveElement();
  if (!active) return { key: null, documentKey: bpDocumentKey(), tag: null, editable: false };
  const tag = active.localName;
  const editable = tag === 'textarea' || active.isContentEditable ||
    (tag === 'input' && !['checkbox', 'radio', 'button', 'submit', 'reset', 'image', 'file', 'range', 'color', 'hidden'].includes(active.type));
  return { key: bpElementKey(active), documentKey: bpDocumentKey(), tag: tag, editable: editable };
}

// The deep active element's state for `browser.keyboard`, with where the
// caret or selection is (code-point offsets into the value) when the
// element exposes it, or how many code points a contenteditable selection
// spans. Password values never come back, only lengths.
function activeElementState(options) {
  const el = bpDeepActiveElement();
  if (!el) return { state: null };
  const result = { state: bpSnapshotOf(el, options.valueMax) };
  const value = bpValueOf(el);
  const tag = el.localName;
  if ((tag === 'input' || tag === 'textarea') && value !== null) {
    let start = null;
    let end = null;
    try {
      start = el.selectionStart;
      end = el.selectionEnd;
    } catch (error) {
      start = null;
    }
    if (typeof start === 'number' && typeof end === 'number') {
      result.selectionStart = bpCodePoints(value.slice(0, start));
      result.selectionEnd = bpCodePoints(value.slice(0, end));
    }
  } else if (el.isContentEditable) {
    const root = el.getRootNode();
    const selection = (root.getSelection && root.getSelection()) || window.getSelection();
    if (selection && selection.rangeCount > 0 && el.contains(selection.getRangeAt(0).commonAncestorContainer)) {
      result.selectedLength = bpCodePoints(String(selection));
    }
  }
  return result;
}

// BP_NATIVE_VALUE_TYPES: injected from Rust (page::NATIVE_VALUE_TYPES).

// How this browser normalises `value` for an input of `type`, read from a
// detached input of this world (so no page script can answer), and whether
// `value` is a valid value of that type at all. A range is normalised
// without its element's bounds and step: clamping changes a value, it does
// not merely spell it differently.
function bpNormalizedValue(type, value) {
  const scratch = document.createElement('input');
  scratch.type = type;
  if (type === 'range') {
    scratch.min = '-1e308';
    scratch.max = '1e308';
    scratch.step = 'any';
  }
  scratch.value = value;
  const normalized = scratch.value;
  let valid;
  if (type === 'range') valid = value.trim() !== '' && Number.isFinite(Number(value));
  else if (type === 'color') valid = normalized !== '#000000' || CSS.supports('color', value.trim());
  else valid = normalized !== '' || value === '';
  return { normalized: normalized, valid: valid };
}

// Elements whose value Browser Pilot set and whose `change` is still due,
// with the value they had when that edit began.
const BP_PENDING_CHANGE = new WeakMap();

// Fires `change` the way a browser does for an edit it commits later: once,
// when the element loses focus or its form is submitted, whichever comes
// first, and only if the value then differs from the value before the edit.
// The listeners sit on the element's root (document or shadow root) in the
// capture phase, so `change` comes before the page's own `blur` or `submit`
// handlers on the element or form run, as in Chromium.
function bpChangeOnCommit(el, before) {
  if (BP_PENDING_CHANGE.has(el)) return;
  BP_PENDING_CHANGE.set(el, before);
  const root = el.getRootNode();
  const commit = (event) => {
    const onBlur = event.type === 'blur' && event.target === el;
    const onSubmit = event.type === 'submit' && el.form !== null && event.target === el.form;
    if (!onBlur && !onSubmit) return;
    root.removeEventListener('blur', commit, true);
    root.removeEventListener('submit', commit, true);
    const started = BP_PENDING_CHANGE.get(el);
    BP_PENDING_CHANGE.delete(el);
    if (el.isConnected && el.value !== started) {
      el.dispatchEvent(new Event('change', { bubbles: true }));
    }
  };
  root.addEventListener('blur', commit, true);
  root.addEventListener('submit', commit, true);
}

// Sets the value of a date/time/color/range input through the native value
// setter, announced by a cancelable `beforeinput` and followed by `input`;
// `change` follows on commit (blur or submit, see bpChangeOnCommit), never
// before `input`. The effective value after the page's handlers is
// reported, with the browser's normalisation of the requested value.
function setNativeValue(options) {
  const found = bpLookup(options.observationKey, options.ref, options.documentKey);
  if (found.error) return found;
  const el = found.element;
  if (el.localName !== 'input' || !BP_NATIVE_VALUE_TYPES.has(el.type)) {
    return bpError('unsupported_element', 'setNativeValue needs a date, time, datetime-local, month, week, color or range input');
  }
  if (el.disabled || el.readOnly) return bpError('not_editable', 'the input is disabled or read-only');
  const before = el.value;
  const wanted = bpNormalizedValue(el.type, options.value);
  const eventInit = {
    bubbles: true, cancelable: true, composed: true,
    inputType: 'insertReplacementText', data: options.value,
  };
  const proceed = el.dispatchEvent(new InputEvent('beforeinput', eventInit));
  if (!proceed) {
    return { before: before, after: el.value, canceled: true, normalized: wanted.normalized, valid: wanted.valid };
  }
  const setter = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set;
  setter.call(el, options.value);
  el.dispatchEvent(new InputEvent('input', {
    bubbles: true, cancelable: false, composed: true,
    inputType: 'insertReplacementText', data: options.value,
  }));
  bpChangeOnCommit(el, before);
  return { before: before, after: el.value, canceled: false, normalized: wanted.normalized, valid: wanted.valid };
}

// Selects options of a native <select> by value (or, failing that, by
// label), then fires `input` and `change`. Nothing changes when a wanted
// option is missing or disabled.
function selectOptions(options) {
  const found = bpLookup(options.observationKey, options.ref, options.documentKey);
  if (found.error) return found;
  const el = found.element;
  if (el.localName !== 'select') return bpError('unsupported_element', 'selectOptions needs a native select');
  if (el.matches(':disabled')) return bpError('not_editable', 'the select is disabled');
  const wanted = options.values;
  if (!el.multiple && wanted.length !== 1) {
    return bpError('invalid_argument', 'a single select takes exactly one value');
  }
  const all = Array.from(el.options);
  const chosen = [];
  for (const want of wanted) {
    let option = all.find((candidate) => candidate.value === want);
    if (option === undefined) option = all.find((candidate) => candidate.label.trim() === want.trim());
    if (option === undefined) return bpError('option_not_found', 'no option with value or label ' + JSON.stringify(bpClip(want, 100)));
    if (option.disabled) return bpError('option_disabled', 'the option ' + JSON.stringify(bpClip(want, 100)) + ' is disabled');
    chosen.push(option);
  }
  const before = all.map((option) => option.selected);
  for (const option of all) option.selected = chosen.includes(option);
  const changed = all.some((option, i) => option.selected !== before[i]);
  el.dispatchEvent(new Event('input', { bubbles: true, composed: true }));
  el.dispatchEvent(new Event('change', { bubbles: true }));
  return {
    changed: changed,
    selected: Array.from(el.selectedOptions).map((option) => ({
      value: bpClip(option.value, 200), label: bpCollapse(option.label, 200),
    })),
  };
}

// The options of a native select, or the currently exposed options of an
// ARIA combobox/listbox (its aria-controls/aria-owns popup or itself).
function listOptions(options) {
  const found = bpLookup(options.observationKey, options.ref, options.documentKey);
  if (found.error) return found;
  const el = found.element;
  const max = options.limit;
  if (el.localName === 'select') {
    const all = Array.from(el.options);
    return {
      kind: 'native',
      multiple: el.multiple,
      options: all.slice(0, max).map((option, index) => ({
        index: index,
        value: bpClip(option.value, 200),
        label: bpCollapse(option.label, 200),
        selected: option.selected,
        disabled: option.disabled,
      })),
      total: all.length,
      truncated: all.length > max,
    };
  }
  let popup = null;
  const root = el.getRootNode();
  for (const attribute of ['aria-controls', 'aria-owns']) {
    const ids = el.getAttribute(attribute);
    if (!ids || popup !== null) continue;
    for (const id of ids.trim().split(/\s+/)) {
      const target = root.getElementById ? root.getElementById(id) : null;
      if (target) {
        popup = target;
        break;
      }
    }
  }
  if (popup === null) {
    popup = el.getAttribute('role') === 'listbox' ? el : el.querySelector('[role="listbox"]');
  }
  if (popup === null) return { kind: 'aria', multiple: false, options: [], total: 0, truncated: false, popupVisible: false };
  const all = Array.from(popup.querySelectorAll('[role="option"]'));
  const visibleOptions = all.filter((option) => bpIsVisible(option));
  return {
    kind: 'aria',
    multiple: popup.getAttribute('aria-multiselectable') === 'true',
    options: visibleOptions.slice(0, max).map((option, index) => ({
      index: index,
      value: bpClip(option.getAttribute('data-value') || option.id || '', 200),
      label: bpNameOf(option, 'div', 'option', null, 200),
      selected: option.getAttribute('aria-selected') === 'true',
      disabled: option.getAttribute('aria-disabled') === 'true',
    })),
    total: visibleOptions.length,
    truncated: visibleOptions.length > max,
    popupVisible: bpIsVisible(popup),
  };
}
