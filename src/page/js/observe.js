// observe(options): one pass over the document and its open shadow roots in
// tree order, collecting interactive and landmark elements with their role,
// accessible name, value and states. The element handles stay in this world
// under `options.observationKey` for later resolve() calls; the result is
// plain JSON. Refs are stable per document (bpRefOf), so they are unique but
// not dense; with `baseKey` the refs of that earlier observation resolve
// through this one too. Options (validated by the Rust side): observationKey, baseKey, limit,
// maxBytes, viewportOnly, nameMax, valueMax, hrefMax, filterKeywords,
// signInPhrases, blockedPhrases, captchaPatterns, listing. The stub's `args` after the options
// are the nodes Chromium reports with click-like listeners (src/page/run.rs, `run_observe`;
// `listing` says whether to keep them or use the kept ones, bpListenerListing): controls that
// only a script listener makes clickable join the candidates (listenerExtras). With
// `compact`, the result also has `sections`: the landmarks, lists, tables and dialogs around the
// returned elements and the frames between them, for the compact form's grouping lines.
function observe(options, args) {
  const NAME_MAX = options.nameMax;
  const VALUE_MAX = options.valueMax;
  const HREF_MAX = options.hrefMax;
  const MAX_SIGNAL_ITEMS = 8;
  const MAX_SIGNAL_REFS = 50;
  // Scopes with at most this many candidates read attributes one by one
  // (tests raise it to compare both paths).
  const SMALL_SCOPE = options.smallScope === undefined ? 4 : options.smallScope;
  const HIDDEN_MARKERS = '[inert], [aria-hidden="true"]';
  const VISIBILITY_OPTIONS = { visibilityProperty: true };
  const CANDIDATES = 'a[href], area[href], button, input, textarea, select, ' +
    'select[multiple] option, select[size] option, ' +
    'h1, h2, h3, h4, h5, h6, img[alt], dialog[open], summary, [role], [contenteditable], ' +
    '[tabindex], [onclick]' + (options.compact ? ', iframe, frame' : '');
  // What groups elements for the compact form (docs/observation.md, "Compact form"):
  // landmarks, lists, tables and dialogs; `sectionKind` says which of these count.
  const SECTIONS = 'nav, main, aside, header, footer, form, section, search, ul, ol, table, ' +
    'dialog, [role]';
  const SECTION_ROLES = new Map([
    ['navigation', 'navigation'], ['main', 'main'], ['complementary', 'complementary'],
    ['banner', 'banner'], ['contentinfo', 'contentinfo'], ['search', 'search'], ['form', 'form'],
    ['region', 'region'], ['list', 'list'], ['table', 'table'], ['grid', 'grid'],
    ['treegrid', 'grid'], ['dialog', 'dialog'], ['alertdialog', 'dialog'],
  ]);
  const SECTION_NAME_MAX = 40;
  // The listener listing first: a stale kept one answers before anything is
  // read or disarmed, and the Broker calls again with a fresh listing.
  const listed = bpListenerListing(options.listing, args);
  if (listed === null) return { needsListing: true, shadowRoots: bpState().listing.roots.length };
  // What an action reads first, when asked, in this order: the keystroke
  // guard's record (keyRecord, which disarms it), the click-truth verdict
  // (clickVerdict, which disarms it) and its element's state (stateSnapshot).
  const keys = options.keyRecord ? keyRecord({}) : null;
  const click = options.clickVerdict ? clickVerdict(options.clickVerdict) : null;
  const stateOf = options.stateOf ? stateSnapshot(options.stateOf) : null;
  const viewport = bpViewport();
  const active = bpDeepActiveElement();
  const extras = listenerExtras(listed);

  const elements = [];
  // Returned elements in document order, their refs, and ref -> element.
  const handles = [];
  const refList = [];
  const byRef = new Map();
  let bytes = 0;
  let candidateCount = 0;
  let stopped = false;
  const reasons = [];

  // Sections (compact only): [kind, name, parent index or -1], the section index of each
  // returned element (-1: none), and the frames as [index of the next element, name].
  const sectionList = [];
  const sectionOfElement = [];
  const sectionIndex = new Map();
  const frames = [];

  const dialogs = [];
  const comboboxes = [];
  const options_ = [];
  const groupControls = [];
  const usernames = [];
  const signIns = [];
  const passwordRefs = [];
  let passwordCount = 0;

  // Listener-only controls (docs/observation.md, "Listener-only controls"): Map(element ->
  // role) of the elements to add beside the candidates. An element with its own click-like
  // listener is a control unless it is (or is inside) a control already, or holds controls;
  // a list-like container with the listener (delegation, as jQuery UI's menu, autocomplete
  // and sortable do) stands for its items instead; a listener on the document, html or body,
  // or on a container that holds controls, delegates to what shows a pointer cursor below it
  // (the outermost pointer element, once).
  function listenerExtras(list) {
    const out = new Map();
    if (list.length === 0) return out;
    const INTERACTIVE = 'a[href], area[href], button, input, select, textarea, summary, label, ' +
      '[onclick], [contenteditable=""], [contenteditable="true"], [tabindex]:not([tabindex^="-"]), ' +
      '[role="button"], [role="link"], [role="checkbox"], [role="radio"], [role="switch"], ' +
      '[role="tab"], [role="menuitem"], [role="menuitemcheckbox"], [role="menuitemradio"], ' +
      '[role="option"], [role="treeitem"], [role="slider"], [role="spinbutton"], ' +
      '[role="combobox"], [role="textbox"], [role="searchbox"]';
    const LIST_LIKE = 'ul, ol, menu, table, thead, tbody, tfoot, [role="list"], [role="listbox"], ' +
      '[role="menu"], [role="menubar"], [role="tree"], [role="grid"], [role="tablist"]';
    const MAX_ITEMS = 500;
    const MAX_SCANNED = 20000;
    let scanned = 0;
    const scanRoots = [];
    const holdsControls = (el) => el.querySelector(INTERACTIVE) !== null;
    // Inside a control (a link, a button, a label, a widget item) an element is part of it.
    const INSIDE = 'a[href], area[href], button, label, summary, select, [role="button"], ' +
      '[role="link"], [role="option"], [role="menuitem"], [role="tab"], [role="treeitem"], ' +
      '[role="checkbox"], [role="radio"]';
    const add = (el) => {
      if (el.matches(INTERACTIVE) || el.closest(INSIDE) !== null || holdsControls(el)) return;
      out.set(el, listenerRole(el));
    };
    for (const node of list) {
      if (node === null || node === undefined) continue;
      if (node === document) {
        if (document.body) scanRoots.push(document.body);
        continue;
      }
      // A listener on an open shadow root delegates like one on the document.
      if (node.nodeType === 11 && node.host !== undefined && node.host.shadowRoot === node) {
        scanRoots.push(node);
        continue;
      }
      if (node.nodeType !== 1 || node.ownerDocument !== document) continue;
      const tag = node.localName;
      if (tag === 'html' || tag === 'body') {
        if (document.body) scanRoots.push(document.body);
        continue;
      }
      if (node.closest(INSIDE) !== null) continue;
      if (node.matches(LIST_LIKE)) {
        const items = tag === 'table' || tag === 'thead' || tag === 'tbody' || tag === 'tfoot'
          ? node.rows : node.children;
        for (let i = 0; i < items.length && i < MAX_ITEMS; i++) add(items[i]);
      } else if (holdsControls(node)) {
        scanRoots.push(node);
      } else if (!node.matches(INTERACTIVE)) {
        out.set(node, listenerRole(node));
      }
    }
    // Outermost pointer-cursor elements below each delegating root (a root inside an
    // earlier one is covered by it).
    const done = new Set();
    for (const root of scanRoots) {
      if (done.has(root)) continue;
      done.add(root);
      const walker = document.createTreeWalker(root, NodeFilter.SHOW_ELEMENT);
      for (let el = walker.nextNode(); el !== null && scanned < MAX_SCANNED; el = walker.nextNode()) {
        scanned++;
        const tag = el.localName;
        if (tag === 'script' || tag === 'style') continue;
        if (out.has(el) || getComputedStyle(el).cursor !== 'pointer') continue;
        const parent = el.parentElement;
        if (parent !== null && parent !== root && getComputedStyle(parent).cursor === 'pointer') continue;
        add(el);
      }
    }
    return out;
  }

  // The role of a listener-only control: an item of a listbox-like menu is an `option`, a row
  // of a tree a `treeitem`, a focusable slider handle a `slider`, anything else `clickable`.
  function listenerRole(el) {
    const parent = el.parentElement;
    if (parent === null) return 'clickable';
    const tag = el.localName;
    if (tag === 'li' || parent.matches('[role="listbox"], [role="menu"]')) {
      if (parent.closest('[role="tree"], [class*="tree" i]') !== null) return 'treeitem';
      if (parent.closest('[role="listbox"], [role="menu"], [class*="menu" i], ' +
        '[class*="autocomplete" i], [class*="dropdown" i], [class*="listbox" i], ' +
        '[class*="suggest" i]') !== null) return 'option';
    }
    if (parent.closest('[role="tree"]') !== null) return 'treeitem';
    return 'clickable';
  }

  // A listener-only control's name: aria-label, its text (or an inner image's alt), title.
  function listenerName(el, max) {
    let name = bpCollapse(el.getAttribute('aria-label') || '', max);
    if (name === '') name = bpContentName(el, max);
    if (name === '') name = bpCollapse(el.getAttribute('title') || '', max);
    if (name === '') {
      const titled = el.querySelector('[title]');
      if (titled !== null) name = bpCollapse(titled.getAttribute('title'), max);
    }
    return name;
  }

  function setValue(entry, value) {
    if (value.length > VALUE_MAX) {
      entry.value = bpClip(value, VALUE_MAX);
      entry.valueLength = value.length;
    } else {
      entry.value = value;
    }
  }

  function ariaTristate(value) {
    if (value === 'true') return true;
    if (value === 'mixed') return 'mixed';
    return false;
  }

  // The packed form the Rust side decodes (src/page/observe.rs,
  // `PackedElement`): [ref, role, name, tag, x, y, width, height,
  // inViewport (0|1), optional fields object or null]. Arrays keep the
  // JSON text (and its transfer through CDP) about half the size.
  function describeElement(el, tag, role, scope, x, y, width, height, inViewport) {
    // One character past the bound tells a cut name, which then ends with
    // the truncation marker (docs/observation.md, "Bounded page strings").
    let name = bpNameOf(el, tag, role, scope, NAME_MAX + 1);
    if (name === '' && extras.has(el)) name = listenerName(el, NAME_MAX + 1);
    if (name.length > NAME_MAX) name = bpClip(name, NAME_MAX - 1) + '\u2026';
    const entry = {};
    const stated = bpAttributed(scope, el);
    let nativeCheck = false;
    let inputType = null;
    const formControl = tag === 'input' || tag === 'textarea' || tag === 'select' ||
      tag === 'button' || tag === 'option';
    switch (tag) {
      case 'input': {
        inputType = el.type;
        if (bpIsSensitiveField(el)) {
          entry.valueLength = el.value.length;
          entry.sensitive = true;
        } else if (BP_TEXT_INPUT_TYPES.has(inputType)) {
          setValue(entry, el.value);
        }
        if (inputType === 'checkbox' || inputType === 'radio') {
          nativeCheck = true;
          entry.checked = el.indeterminate ? 'mixed' : el.checked;
        }
        break;
      }
      case 'textarea':
        if (bpIsSensitiveField(el)) {
          entry.valueLength = el.value.length;
          entry.sensitive = true;
        } else {
          setValue(entry, el.value);
        }
        break;
      case 'select': {
        const labels = [];
        const selected = el.selectedOptions;
        for (let i = 0; i < selected.length && i < 20; i++) labels.push(bpCollapse(selected[i].label, NAME_MAX));
        setValue(entry, labels.join(', '));
        break;
      }
      default:
        if (role === 'textbox' || role === 'searchbox') {
          setValue(entry, el.isContentEditable ? el.innerText : bpCollapse(el.textContent, VALUE_MAX * 2));
        } else if ((role === 'slider' || role === 'spinbutton') && stated) {
          const text = el.getAttribute('aria-valuetext') || el.getAttribute('aria-valuenow');
          if (text !== null) setValue(entry, text);
        }
    }
    if (!nativeCheck && (role === 'checkbox' || role === 'radio' || role === 'switch' ||
      role === 'menuitemcheckbox' || role === 'menuitemradio')) {
      entry.checked = stated ? ariaTristate(el.getAttribute('aria-checked')) : false;
    }
    if (tag === 'option') {
      entry.selected = el.selected;
    } else if (role === 'option' || role === 'tab' || role === 'treeitem') {
      entry.selected = stated && el.getAttribute('aria-selected') === 'true';
    }
    if (stated) {
      const expanded = el.getAttribute('aria-expanded');
      if (expanded !== null) entry.expanded = expanded === 'true';
      const pressed = el.getAttribute('aria-pressed');
      if (pressed !== null) entry.pressed = ariaTristate(pressed);
    }
    if (entry.expanded === undefined && tag === 'summary') entry.expanded = el.parentElement.open;
    const formState = formControl && bpMay(scope.formStates, el);
    if ((formState && el.matches(':disabled')) || (stated && el.getAttribute('aria-disabled') === 'true')) {
      entry.disabled = true;
    }
    if (el === active) entry.focused = true;
    if ((formState && el.matches(':required')) || (stated && el.getAttribute('aria-required') === 'true')) {
      entry.required = true;
    }
    if ((stated && (tag === 'input' || tag === 'textarea') && el.readOnly) ||
      (stated && el.getAttribute('aria-readonly') === 'true')) {
      entry.readonly = true;
    }
    if (role === 'heading') {
      const level = tag.length === 2 && tag[0] === 'h'
        ? Number(tag[1]) : (stated ? Number(el.getAttribute('aria-level')) : 0);
      entry.level = level >= 1 && level <= 9 ? level : 2;
    }
    if (inputType !== null) entry.inputType = inputType;
    if (role === 'link' && (tag === 'a' || tag === 'area')) {
      const href = el.href;
      if (href) entry.href = href.length > HREF_MAX ? bpClip(href, HREF_MAX - 1) + '\u2026' : href;
    }
    let extra = null;
    for (const key in entry) {
      extra = entry;
      break;
    }
    return [0, role, name, tag, Math.round(x), Math.round(y), Math.round(width), Math.round(height),
      inViewport ? 1 : 0, extra];
  }

  // Approximate size of an element in the agent-facing JSON (objects with
  // named fields, not the packed form), without serializing it.
  function estimateBytes(packed) {
    if (options.compact) return estimateCompactBytes(packed);
    let size = 110 + packed[1].length + packed[2].length + packed[3].length;
    const extra = packed[9];
    if (extra !== null) {
      size += 20;
      if (extra.value !== undefined) size += 12 + extra.value.length;
      if (extra.href !== undefined) size += 10 + extra.href.length;
      if (extra.inputType !== undefined) size += 14 + extra.inputType.length;
    }
    return size;
  }

  // Approximate size of its compact line (src/page/shape.rs, `compact_line`):
  // ref, role, quoted name, value, a few state words and the position.
  function estimateCompactBytes(packed) {
    let size = 20 + packed[1].length + packed[2].length;
    const extra = packed[9];
    if (extra !== null) {
      size += 12;
      if (extra.value !== undefined) size += 4 + extra.value.length;
    }
    return size;
  }

  function noteSignals(el, tag, role, name, ref) {
    if (role === 'combobox' && tag !== 'select') {
      comboboxes.push({ el: el, ref: ref });
    } else if ((role === 'textbox' || role === 'searchbox') && el.hasAttribute('aria-autocomplete')) {
      comboboxes.push({ el: el, ref: ref });
    } else if (role === 'option') {
      options_.push({ el: el, ref: ref });
    }
    if (role === 'checkbox' || role === 'radio' || role === 'switch' || tag === 'select') {
      groupControls.push({ el: el, ref: ref });
    }
    if (tag === 'input') {
      const type = el.type;
      if (bpIsSensitiveField(el)) {
        passwordRefs.push(ref);
      } else if (type === 'email' || ((type === 'text' || type === 'tel') && looksLikeUsername(el))) {
        usernames.push({ el: el, ref: ref });
      }
    }
    if ((role === 'button' || role === 'link' || role === 'clickable') && matchesAny(name, options.signInPhrases)) {
      signIns.push({ el: el, ref: ref });
    }
  }

  // The section kind of a container, or null when it does not group (an unnamed form or
  // section; a header or footer inside an article, aside, main, nav or section).
  function sectionKind(el) {
    const role = el.getAttribute('role');
    if (role !== null) return SECTION_ROLES.get(role.trim().split(' ')[0]) || null;
    const named = el.hasAttribute('aria-label') || el.hasAttribute('aria-labelledby');
    switch (el.localName) {
      case 'nav': return 'navigation';
      case 'main': return 'main';
      case 'aside': return 'complementary';
      case 'search': return 'search';
      case 'ul': case 'ol': return 'list';
      case 'table': return 'table';
      case 'dialog': return el.open ? 'dialog' : null;
      case 'form': return named ? 'form' : null;
      case 'section': return named ? 'region' : null;
      case 'header': case 'footer': {
        const parent = el.parentElement;
        if (parent !== null && parent.closest('article, aside, main, nav, section') !== null) return null;
        return el.localName === 'header' ? 'banner' : 'contentinfo';
      }
      default: return null;
    }
  }

  function sectionName(el, kind) {
    let name = el.getAttribute('aria-label') || '';
    const labelledBy = el.getAttribute('aria-labelledby');
    if (name === '' && labelledBy) {
      const label = el.ownerDocument.getElementById(labelledBy.trim().split(/\s+/)[0]);
      if (label !== null) name = bpCollapse(label.textContent, SECTION_NAME_MAX);
    }
    if (name === '' && kind === 'table' && el.caption) name = bpCollapse(el.caption.textContent, SECTION_NAME_MAX);
    if (name === '' && kind === 'dialog') {
      const heading = el.querySelector('h1, h2, h3, h4, h5, h6');
      if (heading !== null) name = bpCollapse(heading.textContent, SECTION_NAME_MAX);
    }
    return bpCollapse(name, SECTION_NAME_MAX);
  }

  // The index of the innermost section holding `el` (itself included), registering it and
  // its outer sections on first sight; -1 when none.
  function sectionOf(el) {
    const found = el === null ? null : el.closest(SECTIONS);
    if (found === null) return -1;
    const known = sectionIndex.get(found);
    if (known !== undefined) return known;
    const parent = sectionOf(found.parentElement);
    const kind = sectionKind(found);
    let index = parent;
    if (kind !== null) {
      index = sectionList.length;
      sectionList.push([kind, sectionName(found, kind), parent]);
    }
    sectionIndex.set(found, index);
    return index;
  }

  function noteFrame(el) {
    const rect = el.getBoundingClientRect();
    if (rect.width <= 0 || rect.height <= 0 || !el.checkVisibility(VISIBILITY_OPTIONS)) return;
    if (frames.length >= 100) return;
    const name = el.getAttribute('title') || el.getAttribute('name') || el.getAttribute('src') || '';
    frames.push([elements.length, bpCollapse(name, SECTION_NAME_MAX)]);
  }

  function looksLikeUsername(el) {
    const autocomplete = (el.getAttribute('autocomplete') || '').toLowerCase();
    if (autocomplete.includes('username') || autocomplete.includes('email')) return true;
    return /user|email|login|account/i.test((el.name || '') + ' ' + (el.id || ''));
  }

  function matchesAny(text, phrases) {
    const lower = text.toLowerCase();
    for (const phrase of phrases) {
      if (lower.includes(phrase)) return true;
    }
    return false;
  }

  function consider(el, tag, role, scope) {
    // The box first: display:none (also of an ancestor) has an empty one.
    const rect = el.getBoundingClientRect();
    const width = rect.width;
    const height = rect.height;
    if (width <= 0 || height <= 0) return;
    if (!el.checkVisibility(VISIBILITY_OPTIONS)) return;
    const x = rect.x;
    const y = rect.y;
    const inViewport = bpBoxInViewport(x, y, width, height, viewport);
    if (options.viewportOnly && !inViewport) return;
    candidateCount++;
    if ((tag === 'input' || tag === 'textarea') && bpIsSensitiveField(el)) passwordCount++;
    const dialogLike = role === 'dialog' || role === 'alertdialog';
    if (!stopped && elements.length >= options.limit) {
      stopped = true;
      reasons.push('limit');
    }
    let entry = null;
    if (!stopped) {
      entry = describeElement(el, tag, role, scope, x, y, width, height, inViewport);
      const size = estimateBytes(entry);
      if (bytes + size > options.maxBytes) {
        stopped = true;
        reasons.push('bytes');
        entry = null;
      } else {
        bytes += size;
      }
    }
    if (entry === null) {
      if (dialogLike && dialogs.length < MAX_SIGNAL_ITEMS) dialogs.push({ el: el, ref: null });
      return;
    }
    // Stable within the document: the ref the element got when it was first
    // returned (docs/observation.md, "Refs").
    const ref = bpRefOf(el);
    entry[0] = ref;
    elements.push(entry);
    if (options.compact) sectionOfElement.push(sectionOf(el));
    handles.push(el);
    refList.push(ref);
    byRef.set(ref, el);
    if (dialogLike && dialogs.length < MAX_SIGNAL_ITEMS) dialogs.push({ el: el, ref: ref });
    noteSignals(el, tag, role, entry[2], ref);
  }

  // One tree scope in tree order; each open shadow root is visited right
  // after its host, before the host's light descendants.
  function visit(root, inheritedHidden) {
    const candidates = root.querySelectorAll(CANDIDATES);
    // Attribute sets pay off with many candidates; a small shadow root is
    // cheaper to read attribute by attribute than to query twice more.
    const scope = bpScope(root, candidates.length > SMALL_SCOPE);
    const hiddenMarkers = root.querySelector(HIDDEN_MARKERS) !== null;
    // One walk over every element finds the shadow hosts and, for each,
    // how many candidates precede it (itself included), by identity with
    // the candidate list (same tree order). No compareDocumentPosition: it
    // scans siblings, quadratic on flat pages.
    // With listener-only controls (`extras`), the same walk merges them into the candidate
    // list in tree order.
    const merging = extras.size > 0;
    const ordered = merging ? [] : candidates;
    const hosts = [];
    const inserts = [];
    let passed = 0;
    let nextCandidate = candidates.length > 0 ? candidates[0] : null;
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_ELEMENT);
    for (let el = walker.nextNode(); el !== null; el = walker.nextNode()) {
      if (el === nextCandidate) {
        passed++;
        nextCandidate = passed < candidates.length ? candidates[passed] : null;
        if (merging) ordered.push(el);
      } else if (merging && extras.has(el)) {
        ordered.push(el);
      }
      if (el.shadowRoot !== null) {
        hosts.push(el);
        inserts.push(merging ? ordered.length : passed);
      }
    }
    const hiddenBy = (el) => hiddenMarkers && el.closest(HIDDEN_MARKERS) !== null;
    let next = 0;
    for (let i = 0; i <= ordered.length; i++) {
      while (next < hosts.length && inserts[next] === i) {
        const host = hosts[next];
        visit(host.shadowRoot, inheritedHidden || hiddenBy(host));
        next++;
      }
      if (i === ordered.length) break;
      if (inheritedHidden) continue;
      const el = ordered[i];
      const tag = el.localName;
      if (options.compact && (tag === 'iframe' || tag === 'frame') && !hiddenBy(el)) noteFrame(el);
      let role = bpRoleOf(el, tag, scope);
      if (role === null && merging) {
        const extra = extras.get(el);
        if (extra !== undefined) role = extra;
      }
      if (role === null || hiddenBy(el)) continue;
      consider(el, tag, role, scope);
    }
  }

  function refsInside(container, list) {
    const refs = [];
    for (const item of list) {
      if (item.ref !== null && bpComposedContains(container, item.el)) {
        refs.push(item.ref);
        if (refs.length >= MAX_SIGNAL_REFS) break;
      }
    }
    return refs;
  }

  function returnedItems() {
    const list = [];
    for (let i = 0; i < handles.length; i++) list.push({ el: handles[i], ref: refList[i] });
    return list;
  }

  function viewportCoverage(rect) {
    const width = Math.max(0, Math.min(rect.right, viewport.width) - Math.max(rect.left, 0));
    const height = Math.max(0, Math.min(rect.bottom, viewport.height) - Math.max(rect.top, 0));
    const area = viewport.width * viewport.height;
    return area > 0 ? Math.round((width * height / area) * 100) / 100 : 0;
  }

  function zIndexOf(el) {
    const value = parseInt(getComputedStyle(el).zIndex, 10);
    return Number.isNaN(value) ? null : value;
  }

  function nearestFixed(el) {
    for (let current = el; current !== null; current = bpComposedParent(current)) {
      if (current.nodeType !== 1) continue;
      if (getComputedStyle(current).position === 'fixed') return current;
    }
    return null;
  }

  function overlaySignals() {
    const all = returnedItems();
    const out = [];
    for (const dialog of dialogs) {
      const el = dialog.el;
      const modal = (el.localName === 'dialog' && el.matches(':modal')) ||
        el.getAttribute('aria-modal') === 'true';
      out.push({
        kind: el.localName === 'dialog' ? 'dialog' : 'aria_dialog',
        ref: dialog.ref,
        modal: modal,
        coverage: viewportCoverage(el.getBoundingClientRect()),
        zIndex: zIndexOf(el),
        controlRefs: refsInside(el, all).filter((ref) => ref !== dialog.ref),
      });
    }
    if (out.some((item) => item.modal)) return out;
    // Singular hit tests only: elementsFromPoint lists every layer and
    // costs tens of ms on a big page. The fixed layer on top at the centre
    // is what the user sees; when that is a smaller fixed box, a backdrop
    // beside it shows at the corners instead.
    const centre = document.elementFromPoint(viewport.width / 2, viewport.height / 2);
    const box = centre === null ? null : nearestFixed(centre);
    let covering = null;
    if (box !== null && viewportCoverage(box.getBoundingClientRect()) >= 0.5) {
      covering = box;
    } else if (box !== null) {
      const corners = [[0.05, 0.05], [0.95, 0.95]];
      for (const [fx, fy] of corners) {
        const corner = document.elementFromPoint(viewport.width * fx, viewport.height * fy);
        const layer = corner === null ? null : nearestFixed(corner);
        if (layer !== null && viewportCoverage(layer.getBoundingClientRect()) >= 0.5) {
          covering = layer;
          break;
        }
      }
    }
    if (covering !== null) {
      const container = box !== null ? box : covering;
      let ref = null;
      for (let i = 0; i < handles.length; i++) {
        if (handles[i] === container) ref = refList[i];
      }
      out.push({
        kind: 'covering',
        ref: ref,
        modal: false,
        coverage: viewportCoverage(covering.getBoundingClientRect()),
        zIndex: zIndexOf(covering),
        controlRefs: refsInside(container, all).filter((item) => item !== ref),
      });
    }
    return out;
  }

  function popupOf(el) {
    const root = el.getRootNode();
    for (const attribute of ['aria-controls', 'aria-owns']) {
      const ids = el.getAttribute(attribute);
      if (!ids) continue;
      for (const id of ids.trim().split(/\s+/)) {
        const target = root.getElementById ? root.getElementById(id) : null;
        if (target) return target;
      }
    }
    return el.querySelector('[role="listbox"], [role="tree"], [role="grid"]');
  }

  function comboboxSignals() {
    const out = [];
    for (const combo of comboboxes) {
      if (out.length >= MAX_SIGNAL_ITEMS) break;
      const el = combo.el;
      const expanded = el.getAttribute('aria-expanded');
      const popup = popupOf(el);
      const popupVisible = popup !== null && bpIsVisible(popup);
      out.push({
        ref: combo.ref,
        expanded: expanded === null ? null : expanded === 'true',
        autocomplete: el.getAttribute('aria-autocomplete'),
        popupVisible: popupVisible,
        optionRefs: popupVisible ? refsInside(popup, options_) : [],
      });
    }
    return out;
  }

  function containerLabels(container) {
    const labels = [];
    const aria = bpIdRefsText(container, 'aria-labelledby', NAME_MAX) ||
      bpCollapse(container.getAttribute('aria-label') || '', NAME_MAX);
    if (aria !== '') labels.push({ label: aria, labelSource: 'aria' });
    if (container.localName === 'fieldset') {
      const legend = container.querySelector('legend');
      if (legend) labels.push({ label: bpTextOf(legend, NAME_MAX), labelSource: 'legend' });
    }
    const heading = container.querySelector('h1, h2, h3, h4, h5, h6, [role="heading"]');
    if (heading) labels.push({ label: bpTextOf(heading, NAME_MAX), labelSource: 'heading' });
    const attributes = ((container.id || '') + ' ' + (container.getAttribute('class') || '')).trim();
    if (attributes !== '') labels.push({ label: bpClip(attributes, NAME_MAX), labelSource: 'attribute' });
    return labels;
  }

  function groupSignals() {
    const CONTAINERS = 'form, aside, section, fieldset, nav, [role="search"], ' +
      '[role="complementary"], [role="region"], [role="group"], [role="radiogroup"], [role="form"]';
    const chosen = new Map();
    const labelCache = new Map();
    for (const control of groupControls) {
      let container = control.el.parentElement ? control.el.parentElement.closest(CONTAINERS) : null;
      let found = null;
      for (let depth = 0; container !== null && depth < 6 && found === null; depth++) {
        let labels = labelCache.get(container);
        if (labels === undefined) {
          labels = containerLabels(container);
          labelCache.set(container, labels);
        }
        for (const label of labels) {
          if (found === null && matchesAny(label.label, options.filterKeywords)) {
            found = { container: container, label: label };
          }
        }
        container = container.parentElement ? container.parentElement.closest(CONTAINERS) : null;
      }
      if (found === null) continue;
      let group = chosen.get(found.container);
      if (group === undefined) {
        if (chosen.size >= MAX_SIGNAL_ITEMS) continue;
        group = { label: found.label.label, labelSource: found.label.labelSource, refs: [] };
        chosen.set(found.container, group);
      }
      if (group.refs.length < MAX_SIGNAL_REFS) group.refs.push(control.ref);
    }
    return Array.from(chosen.values());
  }

  function formOf(el) {
    return el.form || el.closest('form');
  }

  function authSignals() {
    const passwordForms = new Set();
    for (const ref of passwordRefs) passwordForms.add(formOf(byRef.get(ref)));
    const signInForms = new Set(signIns.map((item) => formOf(item.el)));
    const usernameForms = new Set(usernames.map((item) => formOf(item.el)));
    const refs = [];
    for (const item of usernames) {
      const form = formOf(item.el);
      if (passwordForms.has(form) || signInForms.has(form)) refs.push(item.ref);
    }
    for (const item of signIns) {
      const form = formOf(item.el);
      if (passwordForms.has(form) || usernameForms.has(form)) refs.push(item.ref);
    }
    refs.sort((a, b) => a - b);
    return {
      passwordCount: passwordCount,
      passwordRefs: passwordRefs.slice(0, MAX_SIGNAL_REFS),
      formRefs: refs.slice(0, MAX_SIGNAL_REFS),
    };
  }

  function blockedSignals() {
    let captchaFrames = 0;
    const frames = document.querySelectorAll('iframe');
    for (let i = 0; i < frames.length && i < 200; i++) {
      const text = ((frames[i].getAttribute('src') || '') + ' ' + (frames[i].getAttribute('title') || '')).toLowerCase();
      if (matchesAny(text, options.captchaPatterns)) captchaFrames++;
    }
    captchaFrames += document.querySelectorAll('.g-recaptcha, .h-captcha, .cf-turnstile').length;
    const SAMPLE_MAX = 4000;
    let sample = (document.title || '') + ' ';
    let complete = true;
    if (document.body) {
      const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node !== null; node = walker.nextNode()) {
        const parent = node.parentElement;
        if (parent && (parent.localName === 'script' || parent.localName === 'style')) continue;
        sample += node.data + ' ';
        if (sample.length > SAMPLE_MAX) {
          complete = false;
          break;
        }
      }
    }
    const lower = sample.replace(/\s+/g, ' ').toLowerCase();
    const phrases = options.blockedPhrases.filter((phrase) => lower.includes(phrase));
    return { captchaFrames: captchaFrames, phrases: phrases, textSampleComplete: complete };
  }

  function pageMetrics() {
    const scroller = document.scrollingElement || document.documentElement;
    const docWidth = Math.max(scroller ? scroller.scrollWidth : 0, viewport.width);
    const docHeight = Math.max(scroller ? scroller.scrollHeight : 0, viewport.height);
    const sx = Math.round(window.scrollX);
    const sy = Math.round(window.scrollY);
    const percent = (offset, total, view) => total > view
      ? Math.max(0, Math.min(100, Math.round((offset / (total - view)) * 100))) : 0;
    return {
      viewport: { width: viewport.width, height: viewport.height },
      document: { width: docWidth, height: docHeight },
      scroll: { x: sx, y: sy },
      remaining: {
        up: Math.max(0, sy),
        down: Math.max(0, docHeight - viewport.height - sy),
        left: Math.max(0, sx),
        right: Math.max(0, docWidth - viewport.width - sx),
      },
      percent: { x: percent(sx, docWidth, viewport.width), y: percent(sy, docHeight, viewport.height) },
    };
  }

  if (document.documentElement) visit(document, false);
  const baseMerged = bpRemember(options.observationKey, byRef, options.baseKey);
  return {
    documentKey: bpDocumentKey(),
    state: stateOf,
    keys: keys,
    click: click,
    baseMerged: baseMerged,
    elements: elements,
    page: pageMetrics(),
    truncated: reasons.length > 0,
    truncationReasons: reasons,
    candidateCount: candidateCount,
    sections: options.compact
      ? { list: sectionList, of: sectionOfElement, frames: frames } : null,
    signals: {
      overlays: overlaySignals(),
      comboboxes: comboboxSignals(),
      filterGroups: groupSignals(),
      auth: authSignals(),
      blocked: blockedSignals(),
    },
  };
}

// listingRoot(options): the tree scope `options.index` of the listing the Broker is about to
// take (src/page/run.rs, `listener_targets`): 0 the document, then the open shadow roots
// bpWatchListing gathered; null past them. Returned as an object, so the Broker can resolve
// it in the page's main world, whose listeners Chromium lists.
function listingRoot(options) {
  if (options.index === 0) return document;
  const kept = bpState().listing;
  if (kept === undefined) return null;
  const root = kept.roots[options.index - 1];
  return root === undefined ? null : root;
}
