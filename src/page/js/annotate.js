// annotationBoxes(options): the live boxes of an Observation's refs for an
// annotated screenshot, in viewport CSS px of this document, clipped to the
// viewport. options.refs lists the refs to draw, or is null for the first
// options.limit elements of the Observation in document order. Every ref is
// revalidated: an element that left the document, is not rendered or lies
// wholly outside the viewport is skipped with its reason, never drawn.
function annotationBoxes(options) {
  const state = bpState();
  let entry = null;
  for (const candidate of state.observations) {
    if (candidate.key === options.observationKey) entry = candidate;
  }
  if (entry === null || entry.doc !== document) {
    return bpError('observation_unknown', 'no observation with this key in this document');
  }
  let refs = options.refs;
  if (refs === null) {
    // The first refs of this Observation in document order. Refs are stable per document, so
    // they are neither contiguous nor in document order themselves, and a diff Observation's
    // map holds its delta before its base: sort the elements by their place in the document
    // (elements that left it sort last and are reported stale below).
    const entries = Array.from(entry.elements);
    entries.sort((a, b) => {
      if (a[1] === b[1]) return 0;
      if (!a[1].isConnected || !b[1].isConnected) return a[1].isConnected ? -1 : (b[1].isConnected ? 1 : 0);
      return a[1].compareDocumentPosition(b[1]) & Node.DOCUMENT_POSITION_FOLLOWING ? -1 : 1;
    });
    refs = entries.slice(0, options.limit).map((pair) => pair[0]);
  }
  const view = bpViewport();
  const boxes = [];
  const skipped = [];
  for (const ref of refs) {
    const found = bpLookup(options.observationKey, ref);
    if (found.error) {
      skipped.push({ ref: ref, reason: found.error.code === 'ref_unknown' ? 'unknown_ref' : 'stale' });
      continue;
    }
    const el = found.element;
    const r = el.getBoundingClientRect();
    if (!el.checkVisibility({ visibilityProperty: true }) || r.width <= 0 || r.height <= 0) {
      skipped.push({ ref: ref, reason: 'not_visible' });
      continue;
    }
    const left = Math.max(0, r.left);
    const top = Math.max(0, r.top);
    const right = Math.min(view.width, r.right);
    const bottom = Math.min(view.height, r.bottom);
    if (right <= left || bottom <= top) {
      skipped.push({ ref: ref, reason: 'outside_viewport' });
      continue;
    }
    boxes.push({ ref: ref, x: left, y: top, width: right - left, height: bottom - top });
  }
  return { viewport: { width: view.width, height: view.height }, boxes: boxes, skipped: skipped };
}
