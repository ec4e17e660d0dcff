// A function declaration run with Runtime.callFunctionOn on an element resolved in the
// Broker's isolated world of its document (never the page's main world): its 0-based position
// among the document's <input type=file> elements (what browser.upload's `inputIndex` counts),
// or -1 when it is not a connected file input of this document. Embedded by
// src/page/upload.rs as FILE_INPUT_INDEX.
function () {
  "use strict";
  if (this.localName !== 'input' || this.type !== 'file' || !this.isConnected || this.ownerDocument !== document) return -1;
  const all = document.querySelectorAll('input');
  let n = 0;
  for (let i = 0; i < all.length; i++) {
    if (all[i].type !== 'file') continue;
    if (all[i] === this) return n;
    n++;
  }
  return -1;
}
