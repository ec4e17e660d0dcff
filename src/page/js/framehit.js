// A function declaration run with Runtime.callFunctionOn on a frame owner (<iframe>) element,
// resolved in its document's isolated world (never the page's main world): whether the point
// (x, y) of that document's viewport lands on the owner, so nothing in the parent covers the
// child frame there; a short description of what covers it otherwise; and the document's
// viewport size. Returns JSON text. Embedded by src/page/actions.rs as FRAME_POINT_HIT.
function (x, y) {
  "use strict";
  let hit = document.elementFromPoint(x, y);
  while (hit && hit.shadowRoot) {
    const inner = hit.shadowRoot.elementFromPoint(x, y);
    if (inner === null || inner === hit) break;
    hit = inner;
  }
  let inside = false;
  for (let node = hit; node; node = node.parentNode || (node instanceof ShadowRoot ? node.host : null)) {
    if (node === this) { inside = true; break; }
  }
  let by = null;
  if (!inside && hit && hit.nodeType === 1) {
    by = hit.localName + (hit.id ? "#" + String(hit.id).slice(0, 30) : "");
  }
  return JSON.stringify({ hit: inside, occludedBy: by, frame: [window.innerWidth, window.innerHeight] });
}
