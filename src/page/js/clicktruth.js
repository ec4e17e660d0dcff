function (early) {
  // The click-truth listener. The Broker registers this function with
  // Page.addScriptToEvaluateOnNewDocument in its isolated world (called with
  // early = true), so it runs when a document's window is created, before any
  // page script; the library installer calls it too (early = false) for a
  // document that was already loaded. It records the trusted clicks of one
  // armed action: the first window capture listener of the document sees
  // every click, and the listener it adds to the click's own target during
  // dispatch runs only if the event reaches the target (a page listener that
  // stops propagation earlier in capture prevents it). Nothing is recorded
  // unless an action armed it, at most 8 clicks, and only `isTrusted` events.
  // Lives in the isolated world: the page can neither see nor patch it.
  'use strict';
  const key = Symbol.for('browser-pilot.click-truth.v1');
  if (Object.prototype.hasOwnProperty.call(globalThis, key)) return false;
  const state = { early: early === true, armed: null, clicks: [] };
  Object.defineProperty(globalThis, key, { value: state, enumerable: false, configurable: false, writable: false });
  const record = function (event) {
    const armed = state.armed;
    if (armed === null || !event.isTrusted || event.type !== armed.type || state.clicks.length >= 8) return;
    const path = event.composedPath();
    const target = path.length > 0 ? path[0] : null;
    const entry = { target: target, event: event, reached: false, release: null };
    state.clicks.push(entry);
    if (target !== null && target !== window && typeof target.addEventListener === 'function') {
      const atTarget = function (seen) {
        if (seen === event) entry.reached = true;
      };
      target.addEventListener(event.type, atTarget, true);
      entry.release = function () {
        target.removeEventListener(event.type, atTarget, true);
      };
    }
  };
  window.addEventListener('click', record, true);
  window.addEventListener('auxclick', record, true);
  return true;
}
