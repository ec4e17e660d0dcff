// Browser Pilot page-script prelude. Concatenated with every page script
// inside one installer function (see src/page/script.rs), so nothing here
// becomes a global: the installer publishes only a frozen object of entry
// points under the versioned symbol `Symbol.for(BP_VERSION)`. It runs in the
// Broker's isolated world: the page cannot see or patch these functions, but
// every DOM value it reads is page data.

const BP_STATE_SYMBOL = Symbol.for(BP_VERSION + '.state');
// BP_MAX_OBSERVATIONS and BP_NATIVE_VALUE_TYPES are injected from Rust
// (src/page/script.rs, `INJECTED_CONSTANTS`), never written here.

// The per-world state, stored under a non-enumerable symbol on the isolated
// world's global. It dies with the world, i.e. with the document.
function bpState() {
  let state = globalThis[BP_STATE_SYMBOL];
  if (state === undefined) {
    state = {
      observations: [],
      elementIds: new WeakMap(),
      nextElementId: 1,
      // Observation refs: one number per element for the document's life,
      // handed out in the order elements are first returned.
      refs: new WeakMap(),
      nextRef: 1,
      // The way back: ref -> WeakRef(element) for every ref handed out, so a
      // ref of any Observation of this document resolves while its element
      // lives (bpLookup). Bounded by BP_MAX_DOCUMENT_REFS (bpRefOf).
      refElements: new Map(),
      documentKey: 'doc:' + Math.random().toString(36).slice(2, 10) +
        Math.floor(performance.timeOrigin).toString(36),
    };
    Object.defineProperty(globalThis, BP_STATE_SYMBOL, {
      value: state, enumerable: false, configurable: false, writable: false,
    });
  }
  return state;
}

function bpDocumentKey() {
  return bpState().documentKey;
}

// A stable identity for an element within this document (and this world).
function bpElementKey(el) {
  const state = bpState();
  let id = state.elementIds.get(el);
  if (id === undefined) {
    id = state.nextElementId++;
    state.elementIds.set(el, id);
  }
  return state.documentKey + ':e' + id;
}

// The stable ref of an element in this document: the same number in every
// Observation of the document, never reused for another element.
function bpRefOf(el) {
  const state = bpState();
  let ref = state.refs.get(el);
  if (ref === undefined) {
    ref = state.nextRef++;
    state.refs.set(el, ref);
    if (state.refElements.size >= BP_MAX_DOCUMENT_REFS) bpPruneRefElements(state);
    state.refElements.set(ref, new WeakRef(el));
  }
  return ref;
}

// Makes room in the document's ref map: first the refs whose element was
// collected, then (a page that keeps that many elements alive) the oldest,
// down to nine tenths of the bound. A ref dropped here answers ref_unknown.
function bpPruneRefElements(state) {
  for (const [ref, weak] of state.refElements) {
    if (weak.deref() === undefined) state.refElements.delete(ref);
  }
  const keep = Math.floor(BP_MAX_DOCUMENT_REFS * 0.9);
  for (const ref of state.refElements.keys()) {
    if (state.refElements.size <= keep) break;
    state.refElements.delete(ref);
  }
}

// Keeps `elements` (a Map ref -> element) under `key`. With `baseKey`, the
// refs of that earlier observation of this document resolve through `key`
// too (a diff Observation); answers whether the base was found.
function bpRemember(key, elements, baseKey) {
  const state = bpState();
  let merged = false;
  if (typeof baseKey === 'string') {
    for (const entry of state.observations) {
      if (entry.key !== baseKey || entry.doc !== document) continue;
      for (const [ref, el] of entry.elements) {
        if (!elements.has(ref)) elements.set(ref, el);
      }
      merged = true;
    }
  }
  const kept = state.observations.filter((entry) => entry.key !== key);
  kept.push({ key: key, doc: document, elements: elements });
  while (kept.length > BP_MAX_OBSERVATIONS) kept.shift();
  state.observations = kept;
  return merged;
}

// The element of `ref`, connected or not: through the kept observation
// `key`, else (the key was evicted from the last few kept here) through the
// document's ref map when `documentKey` names this document (the Broker
// vouches the key was issued for it; refs are stable per document). Outcome:
// {element} or {error: {code, message}}.
function bpElementOf(key, ref, documentKey) {
  const state = bpState();
  let entry = null;
  for (const candidate of state.observations) {
    if (candidate.key === key) entry = candidate;
  }
  if (entry !== null && entry.doc !== document) {
    return bpError('document_replaced', 'the document of this observation was replaced');
  }
  let el = entry !== null && Number.isInteger(ref) ? entry.elements.get(ref) : undefined;
  if (el === undefined) {
    if (entry === null && typeof documentKey !== 'string') {
      return bpError('observation_unknown', 'no observation with this key in this document');
    }
    if (entry === null && documentKey !== state.documentKey) {
      return bpError('document_replaced', 'the document of this observation was replaced');
    }
    const weak = Number.isInteger(ref) ? state.refElements.get(ref) : undefined;
    if (weak === undefined) {
      return bpError('ref_unknown', 'ref ' + ref + ' was not handed out in this document');
    }
    el = weak.deref();
    if (el === undefined) {
      return bpError('ref_stale', 'the element of ref ' + ref + ' is no longer in the document');
    }
  }
  return { element: el };
}

// Outcome of looking a ref up for an action: {element} (in this document)
// or {error: {code, message}}.
function bpLookup(key, ref, documentKey) {
  const found = bpElementOf(key, ref, documentKey);
  if (found.error) return found;
  const el = found.element;
  if (!el.isConnected || el.ownerDocument !== document) {
    return bpError('ref_stale', 'the element of ref ' + ref + ' is no longer in the document');
  }
  return found;
}

// The nodes Chromium listed with click-like listeners for this document and
// its open shadow roots (src/page/run.rs, `run_observe`), kept until the
// document changes: one MutationObserver of this world watches the light DOM
// and every open shadow root (elements added, attributes other than inline
// style; bpListingChange) and stops at the first change, which marks the
// listing stale. `mode` 'cached': the kept listing while current, else null
// (the caller lists and calls again with 'fresh'); the watch starts then,
// with the open shadow roots to list (bpListingRoots, for `listingRoot`),
// before the caller lists, so a change during the listing makes the new
// listing stale too. 'fresh': `args` after the options hold a new listing
// (kept and answered). Otherwise the `args` as given, nothing kept.
// Listeners added without any such change (rare: hydration of unchanged
// markup, a shadow root attached to an element already in the page) are seen
// at the next change.
function bpListenerListing(mode, args) {
  const given = [];
  for (let i = 1; args !== undefined && i < args.length; i++) given.push(args[i]);
  const state = bpState();
  const kept = state.listing;
  if (mode === 'cached') {
    if (kept !== undefined && kept.nodes !== null && !kept.stale &&
        !kept.watch.takeRecords().some(bpListingChange)) {
      return kept.nodes.filter((node) => node.isConnected);
    }
    bpWatchListing(state);
    return null;
  }
  if (mode !== 'fresh') return given;
  if (kept === undefined || kept.nodes !== null) bpWatchListing(state);
  state.listing.nodes = given;
  return given;
}

// At most this many open shadow roots are listed.
const BP_MAX_LISTING_ROOTS = 200;

// Starts a new watch (ending the previous one) for a listing still to come:
// of the document and its open shadow roots (`roots`, nested ones included).
function bpWatchListing(state) {
  if (state.listing !== undefined) state.listing.watch.disconnect();
  const kept = { nodes: null, stale: false, watch: null, roots: bpListingRoots() };
  kept.watch = new MutationObserver((records) => {
    if (!records.some(bpListingChange)) return;
    kept.stale = true;
    kept.watch.disconnect();
  });
  const watched = { childList: true, subtree: true, attributes: true };
  kept.watch.observe(document, watched);
  for (const root of kept.roots) kept.watch.observe(root, watched);
  state.listing = kept;
}

// The open shadow roots of the document, nested ones too (at most
// BP_MAX_LISTING_ROOTS, those nearer the document first). One native query
// per tree scope.
function bpListingRoots() {
  const roots = [];
  const scopes = [document];
  for (let s = 0; s < scopes.length && roots.length < BP_MAX_LISTING_ROOTS; s++) {
    const all = scopes[s].querySelectorAll('*');
    for (let i = 0; i < all.length; i++) {
      const shadow = all[i].shadowRoot;
      if (shadow === null) continue;
      roots.push(shadow);
      scopes.push(shadow);
      if (roots.length >= BP_MAX_LISTING_ROOTS) break;
    }
  }
  return roots;
}

// Whether a mutation can change which nodes have listeners: an element added
// (with whatever it holds) or an attribute other than inline style changed.
// Text replaced (a counter, a status line) or elements removed (a kept node
// that left is skipped) cannot.
function bpListingChange(record) {
  if (record.type === 'attributes') return record.attributeName !== 'style';
  for (const node of record.addedNodes) {
    if (node.nodeType === 1) return true;
  }
  return false;
}

function bpError(code, message) {
  return { error: { code: code, message: bpClip(String(message), 300) } };
}

function bpClip(text, max) {
  if (text.length <= max) return text;
  let end = max;
  const code = text.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end -= 1;
  return text.slice(0, end);
}

// Collapses whitespace and bounds the result. Reads at most `max * 4` raw
// characters so a huge text node costs no more than a small one.
function bpCollapse(text, max) {
  if (!text) return '';
  const raw = text.length > max * 4 ? text.slice(0, max * 4) : text;
  // Most names have nothing to collapse: skip the replace (and its copy).
  const collapsed = BP_NEEDS_COLLAPSE.test(raw) ? raw.replace(/\s+/g, ' ') : raw;
  return bpClip(collapsed.trim(), max);
}

// Whitespace other than single spaces.
const BP_NEEDS_COLLAPSE = /[^\S ]|\s\s/;

// The parent in the composed tree: through shadow roots to their host.
function bpComposedParent(node) {
  const parent = node.parentNode;
  if (parent === null) return null;
  if (parent.nodeType === 11 && parent.host) return parent.host;
  return parent;
}

function bpComposedContains(ancestor, node) {
  for (let current = node; current !== null; current = bpComposedParent(current)) {
    if (current === ancestor) return true;
  }
  return false;
}

function bpDeepActiveElement() {
  let active = document.activeElement;
  while (active && active.shadowRoot && active.shadowRoot.activeElement) {
    active = active.shadowRoot.activeElement;
  }
  return active;
}

function bpViewport() {
  const root = document.documentElement;
  return {
    width: (root && root.clientWidth) || window.innerWidth,
    height: (root && root.clientHeight) || window.innerHeight,
  };
}

function bpRectInViewport(r, viewport) {
  return bpBoxInViewport(r.x, r.y, r.width, r.height, viewport);
}

function bpBoxInViewport(x, y, width, height, viewport) {
  return y + height > 0 && x + width > 0 && y < viewport.height && x < viewport.width;
}

// Visible for our purposes: rendered, not visibility:hidden, non-empty box.
function bpIsVisible(el) {
  if (!el.checkVisibility({ visibilityProperty: true })) return false;
  const r = el.getBoundingClientRect();
  return r.width > 0 && r.height > 0;
}

// Calls fn(child) for each child of `node` in the composed (rendered) tree:
// a host's shadow root children instead of its light children, a slot's
// assigned nodes instead of its fallback content.
function bpForEachComposedChild(node, fn) {
  if (node.nodeType === 1) {
    const shadow = node.shadowRoot;
    if (shadow) {
      for (let child = shadow.firstChild; child !== null; child = child.nextSibling) fn(child);
      return;
    }
    if (node.localName === 'slot') {
      const assigned = node.assignedNodes();
      if (assigned.length > 0) {
        for (const child of assigned) fn(child);
        return;
      }
    }
  }
  for (let child = node.firstChild; child !== null; child = child.nextSibling) fn(child);
}

// Every open shadow root under `root`, in tree order, recursively.
function bpShadowRoots(root, out) {
  const all = root.querySelectorAll('*');
  for (let i = 0; i < all.length; i++) {
    const shadow = all[i].shadowRoot;
    if (shadow) {
      out.push(shadow);
      bpShadowRoots(shadow, out);
    }
  }
  return out;
}

// Elements that start a new line in rendered text.
const BP_BLOCK_TAGS = new Set([
  'address', 'article', 'aside', 'blockquote', 'dd', 'details', 'dialog', 'div', 'dl', 'dt',
  'fieldset', 'figcaption', 'figure', 'footer', 'form', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6',
  'header', 'hgroup', 'hr', 'li', 'main', 'nav', 'ol', 'p', 'pre', 'section', 'summary',
  'table', 'tbody', 'thead', 'tfoot', 'tr', 'ul', 'legend', 'caption', 'body', 'html', 'option',
  'td', 'th',
]);

const BP_WIDGET_ROLES = new Set([
  'button', 'link', 'checkbox', 'radio', 'switch', 'tab', 'menuitem',
  'menuitemcheckbox', 'menuitemradio', 'option', 'combobox', 'listbox',
  'textbox', 'searchbox', 'slider', 'spinbutton', 'dialog', 'alertdialog',
  'alert', 'heading', 'treeitem',
]);

// Roles whose accessible name may come from their content.
const BP_NAME_FROM_CONTENT = new Set([
  'button', 'link', 'checkbox', 'radio', 'switch', 'tab', 'menuitem',
  'menuitemcheckbox', 'menuitemradio', 'option', 'heading', 'treeitem',
  'alert', 'clickable',
]);

const BP_TEXT_INPUT_TYPES = new Set([
  'text', 'search', 'email', 'url', 'tel', 'password', 'number', 'date',
  'time', 'datetime-local', 'month', 'week', 'color', 'range',
]);

// A field whose value is a secret: an <input type=password>, or a text
// field (input or textarea) whose autocomplete tokens say it holds a
// password (`current-password`, `new-password`), as sites that restyle a
// password box as type=text declare it. Such values are never returned,
// only their length (docs/observation.md).
const BP_SECRET_AUTOCOMPLETE = /(^|\s)(current-password|new-password)(\s|$)/i;

function bpIsSensitiveField(el) {
  const tag = el.localName;
  if (tag !== 'input' && tag !== 'textarea') return false;
  if (tag === 'input' && el.type === 'password') return true;
  const autocomplete = el.getAttribute('autocomplete');
  return autocomplete !== null && BP_SECRET_AUTOCOMPLETE.test(autocomplete);
}

function bpInputRole(el) {
  const type = el.type;
  switch (type) {
    case 'hidden': return null;
    case 'button': case 'submit': case 'reset': case 'image': case 'file': return 'button';
    case 'checkbox': return 'checkbox';
    case 'radio': return 'radio';
    case 'range': return 'slider';
    case 'number': return 'spinbutton';
    case 'search': return el.hasAttribute('list') ? 'combobox' : 'searchbox';
    case 'text': case 'email': case 'url': case 'tel':
      return el.hasAttribute('list') ? 'combobox' : 'textbox';
    default: return 'textbox';
  }
}

function bpFirstToken(text) {
  if (text === null) return null;
  return text.trim().split(/\s+/)[0].toLowerCase();
}

// A tree scope (the document or one shadow root) prepared for lookups. In
// `fast` mode (many candidates) an element without any attribute skips
// every attribute read (one `hasAttributes` call instead of up to ten
// `getAttribute` calls: a binding call from this world is the dominant
// cost), and one native query finds the disabled/required controls.
function bpScope(root, fast) {
  return {
    root: root,
    fast: fast,
    formStates: fast ? new Set(root.querySelectorAll(':disabled, :required')) : null,
    labels: bpLabelMap(root),
    lastElement: null,
    lastAttributed: true,
  };
}

// Whether `el` may carry attributes worth reading (memoized for the element
// the walk is on).
function bpAttributed(scope, el) {
  if (scope === null || !scope.fast) return true;
  if (scope.lastElement !== el) {
    scope.lastElement = el;
    scope.lastAttributed = el.hasAttributes();
  }
  return scope.lastAttributed;
}

// Whether `el` may be in `set` (always, without a set).
function bpMay(set, el) {
  return set === null || set.has(el);
}

// The role of an element, or null when it is not one we report. `clickable`
// is Browser Pilot's pseudo-role for an element with an onclick handler or a
// tabindex that shows a pointer cursor.
function bpRoleOf(el, tag, scope) {
  const attributed = bpAttributed(scope, el);
  const explicit = attributed ? bpFirstToken(el.getAttribute('role')) : null;
  if (explicit !== null && BP_WIDGET_ROLES.has(explicit)) return explicit;
  switch (tag) {
    case 'a': case 'area':
      return el.hasAttribute('href') ? 'link' : bpClickableRole(el, attributed);
    case 'button': return 'button';
    case 'input': return bpInputRole(el);
    case 'textarea': return 'textbox';
    case 'select': return (el.multiple || el.size > 1) ? 'listbox' : 'combobox';
    case 'option': {
      let select = el.parentElement;
      if (select !== null && select.localName === 'optgroup') select = select.parentElement;
      return select !== null && select.localName === 'select' && (select.multiple || select.size > 1)
        ? 'option' : null;
    }
    case 'h1': case 'h2': case 'h3': case 'h4': case 'h5': case 'h6': return 'heading';
    case 'img': {
      const alt = el.getAttribute('alt');
      return alt !== null && alt.trim() !== '' ? 'img' : bpClickableRole(el, attributed);
    }
    case 'dialog': return el.open ? 'dialog' : null;
    case 'summary': {
      const parent = el.parentElement;
      return parent !== null && parent.localName === 'details' ? 'button' : null;
    }
    default:
      if (attributed && el.hasAttribute('contenteditable') && el.isContentEditable) {
        const parent = bpComposedParent(el);
        if (!(parent !== null && parent.nodeType === 1 && parent.isContentEditable)) return 'textbox';
      }
      return bpClickableRole(el, attributed);
  }
}

// An element made a control by an onclick attribute or a tabindex: `clickable` with a pointer
// cursor; a keyboard-focusable one without it (a slider handle `<span tabindex=0>`) also, as a
// `slider` when it or its parent says slider, unless it holds controls or scrolls (a focusable
// scroll region is not a control).
function bpClickableRole(el, attributed) {
  if (!attributed) return null;
  const tabbable = el.hasAttribute('tabindex') && el.tabIndex >= 0;
  if (!tabbable && !el.hasAttribute('onclick')) return null;
  const style = getComputedStyle(el);
  const parent = el.parentElement;
  if (tabbable && (/slider/i.test(el.getAttribute('class') || '') ||
    (parent !== null && /slider/i.test(parent.getAttribute('class') || '')))) return 'slider';
  if (style.cursor === 'pointer') return 'clickable';
  if (!tabbable) return null;
  // A focusable list, menu, table or grid manages its items by keyboard; they are the controls.
  if (BP_LIST_TAGS.has(el.localName) || el.hasAttribute('role')) return null;
  const overflow = style.overflowY;
  if (overflow === 'auto' || overflow === 'scroll') return null;
  return el.querySelector(BP_CONTROL_SELECTOR) === null ? 'clickable' : null;
}

const BP_LIST_TAGS = new Set(['ul', 'ol', 'menu', 'table', 'tbody', 'dl']);

// What holds a control: native controls and widget roles.
const BP_CONTROL_SELECTOR = 'a[href], area[href], button, input, select, textarea, summary, ' +
  '[onclick], [tabindex]:not([tabindex^="-"]), [role="button"], [role="link"], ' +
  '[role="checkbox"], [role="radio"], [role="switch"], [role="tab"], [role="menuitem"], ' +
  '[role="option"], [role="treeitem"], [role="slider"], [role="combobox"], [role="textbox"]';

// Map(control -> [label elements]) for one tree scope, built once: reading
// `element.labels` instead costs O(n^2) on a fresh page (field notes §3).
function bpLabelMap(root) {
  const map = new Map();
  const labels = root.querySelectorAll('label');
  for (let i = 0; i < labels.length; i++) {
    const control = labels[i].control;
    if (!control) continue;
    const list = map.get(control);
    if (list === undefined) map.set(control, [labels[i]]);
    else list.push(labels[i]);
  }
  return map;
}

// Text of a label without the text of the control it wraps (a wrapped
// <select> would otherwise contribute all its options).
function bpLabelText(label, control, max) {
  let out = '';
  const visit = (node) => {
    if (out.length > max * 4) return;
    if (node.nodeType === 3) { out += node.data; return; }
    if (node.nodeType !== 1) return;
    if (node === control) return;
    const tag = node.localName;
    if (tag === 'select' || tag === 'textarea' || tag === 'script' || tag === 'style') return;
    if (tag === 'input') {
      const type = node.type;
      if (type === 'submit' || type === 'button' || type === 'reset') out += ' ' + node.value + ' ';
      return;
    }
    for (let child = node.firstChild; child !== null; child = child.nextSibling) visit(child);
  };
  visit(label);
  return bpCollapse(out, max);
}

function bpIdRefsText(el, attribute, max) {
  const ids = el.getAttribute(attribute);
  if (!ids) return '';
  const root = el.getRootNode();
  const parts = [];
  for (const id of ids.trim().split(/\s+/)) {
    const target = root.getElementById ? root.getElementById(id) : document.getElementById(id);
    if (target) parts.push(bpTextOf(target, max));
  }
  return bpCollapse(parts.join(' '), max);
}

function bpTextOf(el, max) {
  return bpCollapse(el.textContent, max);
}

// Content name with a fallback to the alt/aria-label of a descendant image
// or icon when the element has no text of its own.
function bpContentName(el, max) {
  const text = bpTextOf(el, max);
  if (text !== '') return text;
  const inner = el.querySelector('img[alt], [aria-label], svg title');
  if (inner === null) return '';
  if (inner.localName === 'title') return bpTextOf(inner, max);
  return bpCollapse(inner.getAttribute('alt') || inner.getAttribute('aria-label') || '', max);
}

// Accessible name, in this order: aria-labelledby, aria-label, <label>s,
// alt (images), the value of button-like inputs, content (roles that take
// their name from content), title, placeholder. Bounded to `max` chars.
function bpNameOf(el, tag, role, scope, max) {
  const named = bpAttributed(scope, el);
  let name = '';
  if (named) {
    name = bpIdRefsText(el, 'aria-labelledby', max);
    if (name !== '') return name;
    name = bpCollapse(el.getAttribute('aria-label') || '', max);
    if (name !== '') return name;
  }
  if (scope !== null) {
    const labels = scope.labels.get(el);
    if (labels !== undefined) {
      name = bpCollapse(labels.map((label) => bpLabelText(label, el, max)).join(' '), max);
      if (name !== '') return name;
    }
  }
  if (tag === 'img' || tag === 'area') {
    name = bpCollapse(el.getAttribute('alt') || '', max);
    if (name !== '') return name;
  }
  if (tag === 'input') {
    const type = el.type;
    if (type === 'image') {
      name = bpCollapse(el.getAttribute('alt') || '', max);
      if (name !== '') return name;
    }
    if (type === 'submit' || type === 'button' || type === 'reset') {
      name = bpCollapse(el.value, max);
      if (name !== '') return name;
      if (type === 'submit') return 'Submit';
      if (type === 'reset') return 'Reset';
    }
  }
  if (BP_NAME_FROM_CONTENT.has(role) && tag !== 'input' && tag !== 'select' && tag !== 'textarea') {
    name = bpContentName(el, max);
    if (name !== '') return name;
  }
  if (!named) return '';
  name = bpCollapse(el.getAttribute('title') || '', max);
  if (name !== '') return name;
  return bpCollapse(el.getAttribute('placeholder') || el.getAttribute('aria-placeholder') || '', max);
}

// A short, bounded description of an element for diagnostics
// (`button#save.primary`).
function bpDescribe(el) {
  if (!el || el.nodeType !== 1) return null;
  let text = el.localName;
  if (el.id) text += '#' + bpClip(el.id, 30);
  const classes = el.classList;
  for (let i = 0; i < classes.length && i < 2; i++) text += '.' + bpClip(classes[i], 30);
  return bpClip(text, 100);
}

// A regex source that matches `query` literally, with any whitespace run
// matching any whitespace run.
function bpLiteralPattern(query) {
  return query.trim().split(/\s+/)
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('\\s+');
}
