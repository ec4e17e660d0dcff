// Document-level helpers: scroll positions and scrolling (browser.scroll),
// the frame's URL and title, and its viewport size. Like every page script
// they run in the Broker's isolated world, where the page's own overrides of
// `document.title`, `scrollBy` or `querySelector` do not exist.

function bpScrollOf(el) {
  return { x: el.scrollLeft, y: el.scrollTop };
}

// The document's scroll position, to the CSS pixel.
function scrollPosition(options) {
  return { x: Math.round(scrollX), y: Math.round(scrollY) };
}

// Scrolls the document by {dx, dy}.
function scrollPage(options) {
  window.scrollBy(options.dx, options.dy);
  return { scrolled: true };
}

// Scrolls the first element matching `selector` by {dx, dy}; `found` is
// false for an invalid selector or no match.
function scrollContainer(options) {
  let el = null;
  try { el = document.querySelector(options.selector); } catch (e) { el = null; }
  if (!el) return { found: false };
  const before = bpScrollOf(el);
  el.scrollBy(options.dx, options.dy);
  const after = bpScrollOf(el);
  return { found: true, moved: before.x !== after.x || before.y !== after.y, before: before, after: after };
}

// Scrolls the first visible text match of `text` (case-insensitive, open
// Shadow DOM included) to the middle of the viewport.
function scrollToText(options) {
  const needle = String(options.text).toLowerCase();
  const visit = (root) => {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT);
    for (let node = walker.currentNode; node; node = walker.nextNode()) {
      if (node.nodeType === 1 && node.shadowRoot) { const hit = visit(node.shadowRoot); if (hit) return hit; }
      if (node.nodeType === 3 && node.data.toLowerCase().includes(needle)) {
        const el = node.parentElement;
        if (el && el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden') return el;
      }
    }
    return null;
  };
  const el = visit(document.body || document.documentElement);
  if (!el) return { found: false };
  el.scrollIntoView({ block: 'center', inline: 'nearest' });
  return { found: true };
}

// The frame's URL and title, each cut one character past its bound so the
// caller can mark a cut value.
function documentInfo(options) {
  return {
    url: String(location.href).slice(0, options.maxUrlChars + 1),
    title: String(document.title).slice(0, options.maxTitleChars + 1),
  };
}

// The frame's layout viewport, in its own CSS pixels, and whether the
// document is hidden (a background tab renders no frames of its own).
function viewportSize(options) {
  return { width: innerWidth, height: innerHeight, hidden: document.visibilityState === 'hidden' };
}
