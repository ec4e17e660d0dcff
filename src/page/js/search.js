// search(options): case-insensitive matches of options.query in the visible
// text of the document and its open shadow roots, in rendered order. A match
// may span inline elements; whitespace in a literal query matches any
// whitespace run. Returns at most options.limit matches with context and
// viewport geometry, plus the total number of visible matches (counting
// stops at options.countMax).
function search(options) {
  const SKIP = new Set(['script', 'style', 'noscript', 'template', 'head', 'textarea', 'select']);
  const CONTEXT = options.contextChars;
  let pattern;
  try {
    pattern = new RegExp(options.regex ? options.query : bpLiteralPattern(options.query), 'gi');
  } catch (error) {
    return bpError('invalid_regex', error.message);
  }
  const viewport = bpViewport();
  const nodes = [];
  const starts = [];
  const chunks = [];
  let length = 0;

  function visit(node) {
    if (node.nodeType === 3) {
      const data = node.data;
      if (data.length === 0) return;
      nodes.push(node);
      starts.push(length);
      chunks.push(data);
      length += data.length;
      return;
    }
    if (node.nodeType !== 1) return;
    const tag = node.localName;
    if (SKIP.has(tag)) return;
    // Block boundaries separate words, so matches and context do not glue
    // "Action 1" to "Paragraph 2".
    const block = BP_BLOCK_TAGS.has(tag) || tag === 'br';
    if (block) separate();
    bpForEachComposedChild(node, visit);
    if (block) separate();
  }

  function separate() {
    if (length > 0 && chunks[chunks.length - 1] !== '\n') {
      chunks.push('\n');
      length += 1;
    }
  }
  const root = document.body || document.documentElement;
  if (root !== null) visit(root);
  const text = chunks.join('');

  // Index of the text node holding character `offset`.
  function nodeAt(offset) {
    let low = 0;
    let high = starts.length - 1;
    while (low < high) {
      const mid = (low + high + 1) >> 1;
      if (starts[mid] <= offset) low = mid;
      else high = mid - 1;
    }
    return low;
  }

  const visibleCache = new Map();
  function visibleNode(index) {
    const parent = nodes[index].parentElement;
    if (parent === null) return false;
    let visible = visibleCache.get(parent);
    if (visible === undefined) {
      visible = parent.checkVisibility({ visibilityProperty: true });
      visibleCache.set(parent, visible);
    }
    return visible;
  }

  function geometry(startIndex, startOffset, endIndex, endOffset) {
    const range = document.createRange();
    range.setStart(nodes[startIndex], Math.min(startOffset, nodes[startIndex].data.length));
    if (nodes[endIndex].getRootNode() === nodes[startIndex].getRootNode()) {
      range.setEnd(nodes[endIndex], Math.min(endOffset, nodes[endIndex].data.length));
    } else {
      range.setEnd(nodes[startIndex], nodes[startIndex].data.length);
    }
    const r = range.getBoundingClientRect();
    return {
      bounds: { x: Math.round(r.x), y: Math.round(r.y), width: Math.round(r.width), height: Math.round(r.height) },
      inViewport: r.width > 0 && r.height > 0 && bpRectInViewport(r, viewport),
      empty: r.width === 0 && r.height === 0,
    };
  }

  // Up to CONTEXT characters each side, whitespace collapsed.
  function contextOf(start, end, matched) {
    const before = text.slice(Math.max(0, start - CONTEXT * 4), start).replace(/\s+/g, ' ');
    const after = text.slice(end, end + CONTEXT * 4).replace(/\s+/g, ' ');
    let head = before.slice(-CONTEXT);
    const first = head.charCodeAt(0);
    if (first >= 0xdc00 && first <= 0xdfff) head = head.slice(1);
    return (head.trimStart() + bpCollapse(matched, options.matchMax) + bpClip(after, CONTEXT).trimEnd());
  }

  const matches = [];
  let total = 0;
  let capped = false;
  if (text.length > 0) {
    let found;
    while ((found = pattern.exec(text)) !== null) {
      const matched = found[0];
      if (matched.length === 0) {
        pattern.lastIndex++;
        continue;
      }
      const start = found.index;
      const end = start + matched.length;
      const startIndex = nodeAt(start);
      if (!visibleNode(startIndex)) continue;
      if (matches.length < options.limit) {
        const endIndex = nodeAt(end - 1);
        const where = geometry(startIndex, start - starts[startIndex], endIndex, end - starts[endIndex]);
        if (where.empty) continue;
        matches.push({
          text: bpCollapse(matched, options.matchMax),
          context: contextOf(start, end, matched),
          bounds: where.bounds,
          inViewport: where.inViewport,
        });
      }
      total++;
      if (total >= options.countMax) {
        capped = true;
        break;
      }
    }
  }
  return { matches: matches, total: total, truncated: total > matches.length, totalCapped: capped };
}
