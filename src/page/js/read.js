// read(options): the readable text of the page (or of the first element
// matching options.selector, or of the element of the ref options.target) in rendered order, open shadow roots included:
// visible text only, block-level elements on their own lines, script/style
// and hidden subtrees skipped. Stops once options.maxChars is reached. A form control
// (input, textarea, select) reads as its value instead, paged by options.offset.
function read(options) {
  const SKIP = new Set(['script', 'style', 'noscript', 'template', 'head', 'title', 'meta', 'link', 'svg', 'canvas', 'iframe', 'object', 'textarea', 'select']);
  const maxChars = options.maxChars;
  let root = document.body || document.documentElement;
  if (options.target !== undefined) {
    const found = bpLookup(options.target.observationKey, options.target.ref, options.target.documentKey);
    if (found.error) return found;
    root = found.element;
  } else if (options.selector !== null) {
    try {
      root = document.querySelector(options.selector);
    } catch (error) {
      return bpError('invalid_selector', error.message);
    }
    if (root === null) return bpError('no_match', 'no element matches the selector');
  }
  if (root === null) return { text: '', truncated: false, charCount: 0 };
  // A form control reads as its value, from `offset` on (UTF-16 units), with its whole length;
  // a sensitive field only as its length (docs/observation.md, "Values").
  const tag = root.localName;
  if (tag === 'input' || tag === 'textarea' || tag === 'select') {
    const value = tag === 'select'
      ? Array.from(root.selectedOptions, (option) => option.label).join(', ') : root.value;
    if (bpIsSensitiveField(root)) {
      return { text: '', truncated: false, charCount: 0, valueLength: value.length, sensitive: true };
    }
    const from = Math.min(options.offset, value.length);
    const text = bpClip(value.slice(from), maxChars);
    return {
      text: text,
      truncated: from + text.length < value.length,
      charCount: text.length,
      valueLength: value.length,
      offset: from,
    };
  }

  const parts = [];
  let length = 0;
  let full = false;
  let pendingBreak = false;
  let pendingSpace = false;
  const visibleCache = new Map();

  function visibleParent(el) {
    let visible = visibleCache.get(el);
    if (visible === undefined) {
      visible = el.checkVisibility({ visibilityProperty: true });
      visibleCache.set(el, visible);
    }
    return visible;
  }

  function emit(text) {
    if (full) return;
    if (length + text.length > maxChars) {
      parts.push(bpClip(text, maxChars - length));
      length = maxChars;
      full = true;
      return;
    }
    parts.push(text);
    length += text.length;
  }

  function lineBreak() {
    if (length > 0) pendingBreak = true;
    pendingSpace = false;
  }

  function onText(node, preformatted) {
    const parent = node.parentElement;
    if (parent === null || !visibleParent(parent)) return;
    let data = node.data;
    if (preformatted) {
      if (data === '') return;
    } else {
      const startsWithSpace = /^\s/.test(data);
      const endsWithSpace = /\s$/.test(data);
      data = data.replace(/\s+/g, ' ').trim();
      if (data === '') {
        if (startsWithSpace && length > 0) pendingSpace = true;
        return;
      }
      if (startsWithSpace && length > 0) pendingSpace = true;
      if (pendingBreak) emit('\n');
      else if (pendingSpace) emit(' ');
      pendingBreak = false;
      pendingSpace = endsWithSpace;
      emit(data);
      return;
    }
    if (pendingBreak) emit('\n');
    pendingBreak = false;
    pendingSpace = false;
    emit(data);
  }

  function visit(node, preformatted) {
    if (full) return;
    if (node.nodeType === 3) {
      onText(node, preformatted);
      return;
    }
    if (node.nodeType !== 1 && node.nodeType !== 11) return;
    if (node.nodeType === 1) {
      const tag = node.localName;
      if (SKIP.has(tag)) return;
      if (tag === 'br') {
        emit('\n');
        pendingBreak = false;
        pendingSpace = false;
        return;
      }
      if (!node.checkVisibility()) return;
      const cell = tag === 'td' || tag === 'th';
      const block = BP_BLOCK_TAGS.has(tag) && !cell;
      if (block) lineBreak();
      if (cell && !pendingBreak && length > 0) pendingSpace = true;
      const pre = preformatted || tag === 'pre';
      if (tag === 'img') {
        return;
      }
      bpForEachComposedChild(node, (child) => visit(child, pre));
      if (block) lineBreak();
      if (cell) pendingSpace = true;
      return;
    }
    bpForEachComposedChild(node, (child) => visit(child, preformatted));
  }

  visit(root, false);
  const text = parts.join('').replace(/\n{3,}/g, '\n\n');
  return { text: text, truncated: full, charCount: text.length };
}
