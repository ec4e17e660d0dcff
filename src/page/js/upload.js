// Helpers of browser.upload. `pickFileInput` chooses the file input (by ref,
// by its index among the document's file inputs, or the only one) and
// remembers it in this world's state; `pickedFileInput` hands that element to
// the Broker (the only helper here that returns an element, for
// DOM.setFileInputFiles); `uploadReadback` reads back what the remembered
// input holds after the files were set. File names read here are page data:
// they are compared, never returned.

function bpFileInputs() {
  const all = document.querySelectorAll('input');
  const inputs = [];
  for (let i = 0; i < all.length; i++) {
    if (all[i].type === 'file') inputs.push(all[i]);
  }
  return inputs;
}

function pickFileInput(options) {
  const inputs = bpFileInputs();
  let el = null;
  if (options.observationKey !== undefined) {
    const found = bpLookup(options.observationKey, options.ref, options.documentKey);
    if (found.error) return found;
    el = found.element;
  } else if (options.index !== undefined) {
    if (options.index >= inputs.length) {
      return bpError('no_match', 'inputIndex ' + options.index + ' is past the ' + inputs.length + ' file inputs of the document');
    }
    el = inputs[options.index];
  } else if (inputs.length === 1) {
    el = inputs[0];
  } else {
    return bpError('invalid_argument', 'the document has ' + inputs.length + ' file inputs: name one with observationId + ref or inputIndex');
  }
  if (el.localName !== 'input' || el.type !== 'file') {
    return bpError('unsupported_element', 'the element is not an <input type=file>');
  }
  if (el.disabled) {
    return bpError('not_editable', 'the file input is disabled');
  }
  bpState().upload = {
    el: el,
    doc: document,
    name: el.getAttribute('name'),
    id: el.id || null,
    form: el.form,
  };
  return {
    multiple: el.multiple === true,
    fileCount: el.files === null ? 0 : el.files.length,
    fileInputs: inputs.length,
  };
}

function pickedFileInput(options) {
  const picked = bpState().upload;
  if (picked === undefined || picked.doc !== document || !picked.el.isConnected) return null;
  return picked.el;
}

// What a file input holds: its file count and whether it is exactly one file
// named `expected`.
function bpFilesOf(el, expected) {
  const files = el.files;
  const count = files === null ? 0 : files.length;
  return { fileCount: count, nameMatches: count === 1 && files[0].name === expected };
}

// A connected file input that took the remembered one's place: the same id,
// or the same name in the same form.
function bpReplacementOf(picked) {
  const inputs = bpFileInputs();
  for (const el of inputs) {
    if (el === picked.el) continue;
    if (picked.id !== null && el.id === picked.id) return el;
    if (picked.name !== null && el.getAttribute('name') === picked.name &&
        (picked.form === null || el.form === picked.form || !picked.form.isConnected)) return el;
  }
  return null;
}

function uploadReadback(options) {
  const picked = bpState().upload;
  if (picked === undefined || picked.doc !== document) {
    return { state: 'unreadable' };
  }
  if (picked.el.isConnected && picked.el.type === 'file') {
    const held = bpFilesOf(picked.el, options.expectedName);
    return { state: 'connected', fileCount: held.fileCount, nameMatches: held.nameMatches };
  }
  const replacement = bpReplacementOf(picked);
  if (replacement !== null) {
    const held = bpFilesOf(replacement, options.expectedName);
    return { state: 'replaced', fileCount: held.fileCount, nameMatches: held.nameMatches };
  }
  return { state: 'removed' };
}
