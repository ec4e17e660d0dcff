function (early) {
  // The keystroke guard. Registered with the click-truth listener in the
  // Broker's isolated world at document start (early = true), so its window
  // capture listeners are the first of the document to see a key event; the
  // library installer calls it too (early = false) for a loaded document,
  // where a page listener may come first, so typing never relies on it there.
  // Armed by one typing burst with the element focus must stay on, it lets a
  // trusted key event of the burst through only while the deep active element
  // is that element, and a key-down only if it was made (its timeStamp, set
  // when the browser dispatched it) before the burst's deadline and was not
  // held on the way: a dialog holds the keys behind it, and once it is
  // answered they arrive late but keep their timeStamp. From the first refusal on, every
  // key event of the burst is stopped before any page listener runs and its
  // default (the character) prevented, except the key-up of a key whose
  // key-down went through: a stroke goes whole or not at all. A key made more
  // than `linger` after the deadline is not the burst's: it disarms the guard
  // and passes, and the record says the guard lapsed, `clean` (on a loaded
  // machine the burst's own keys can be that late: they went through
  // unguarded, in order, as every key before them). Once the guard refused a
  // key it lapses only after ten times that (`cut`): a burst's later keys
  // passing after its earlier ones were stopped would land out of order.
  // The same holds for a trusted `beforeinput` outside a stroke (an editing
  // insertion such as fill's, which sends no key): stopped, default
  // prevented, once focus left the element or the guard refused, and counted
  // in `blocked`.
  // Counts the characters (key-downs other than modifiers) that this document
  // saw and those it stopped (the rest went through). Nothing happens
  // unless a burst armed it, only `isTrusted` events count, and it lives in
  // the isolated world: the page can neither see nor patch it.
  'use strict';
  const key = Symbol.for('browser-pilot.key-guard.v1');
  if (Object.prototype.hasOwnProperty.call(globalThis, key)) return false;
  const state = { early: early === true, armed: null, lapsed: null };
  Object.defineProperty(globalThis, key, { value: state, enumerable: false, configurable: false, writable: false });
  const modifiers = new Set(['Shift', 'Control', 'Alt', 'Meta', 'AltGraph', 'CapsLock']);
  const focused = function () {
    let active = document.activeElement;
    while (active && active.shadowRoot && active.shadowRoot.activeElement) {
      active = active.shadowRoot.activeElement;
    }
    return active;
  };
  const guard = function (event) {
    const armed = state.armed;
    if (armed === null || !event.isTrusted) return;
    const clean = armed.refused === null;
    if (event.timeStamp > armed.deadline + armed.linger * (clean ? 1 : 10)) {
      state.armed = null;
      state.lapsed = clean ? 'clean' : 'cut';
      return;
    }
    if (event.type === 'beforeinput') {
      // The edit of a key whose key-down went through belongs to that stroke.
      if (armed.down.size > 0) return;
      if (armed.refused === null && focused() !== armed.element) armed.refused = 'focus_changed';
      if (armed.refused !== null) {
        event.preventDefault();
        event.stopImmediatePropagation();
        armed.blocked += 1;
      }
      return;
    }
    if (event.type === 'keyup' && armed.down.has(event.code)) {
      armed.down.delete(event.code);
      return;
    }
    const character = event.type === 'keydown' && !modifiers.has(event.key);
    if (character) armed.seen += 1;
    if (armed.refused === null) {
      if (focused() !== armed.element) {
        armed.refused = 'focus_changed';
      } else if (event.type === 'keydown' && event.timeStamp > armed.deadline) {
        armed.refused = 'expired';
      } else if (event.type === 'keydown' && performance.now() - event.timeStamp > armed.gap) {
        armed.refused = 'held';
      }
    }
    if (armed.refused !== null) {
      event.preventDefault();
      event.stopImmediatePropagation();
      if (character) armed.stopped += 1;
      return;
    }
    if (event.type === 'keydown') armed.down.add(event.code);
  };
  window.addEventListener('keydown', guard, true);
  window.addEventListener('keypress', guard, true);
  window.addEventListener('keyup', guard, true);
  window.addEventListener('beforeinput', guard, true);
  return true;
}
