// Helpers of browser.upload. `pickFileInput` chooses the file input (by ref,
// by its index among the document's file inputs, or the only one) and
// remembers it in this world's state; `pickedFileInput` hands that element to
// the Broker (the only helper here that returns an element, for
// DOM.setFileInputFiles); `uploadReadback` reads back what the remembered
// input holds after the files were set. On a remote browser the file is not on
// the browser's machine: `uploadChunk` collects its bytes in this world's state
// and `uploadSetFiles` builds the File from them and selects it through a
// DataTransfer, with the `input` and `change` events of a selection. File
// names read here are page data: they are compared, never returned. The other
// way, `downloadOpen` and `downloadChunk` read a download the page made itself
// (a blob: or data: URL, which a remote browser's download folder would get)
// so the Broker can store it.

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

// One piece of a remote upload's bytes (base64), appended to this world's
// buffer; `reset` starts a new buffer. Returns the bytes held so far.
function uploadChunk(options) {
  const state = bpState();
  if (options.reset || state.uploadBytes === undefined) {
    state.uploadBytes = { parts: [], length: 0 };
  }
  const text = atob(options.data);
  const part = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) part[i] = text.charCodeAt(i);
  state.uploadBytes.parts.push(part);
  state.uploadBytes.length += part.length;
  return { received: state.uploadBytes.length };
}

// Selects the collected bytes as the one file of the remembered input:
// `input.files` from a DataTransfer holding a File of them, then `input`
// (bubbling, composed) and `change` (bubbling), as a real selection fires them.
function uploadSetFiles(options) {
  const state = bpState();
  const held = state.uploadBytes;
  state.uploadBytes = undefined;
  const picked = state.upload;
  if (picked === undefined || picked.doc !== document || !picked.el.isConnected) {
    return bpError('ref_stale', 'the file input left the document');
  }
  if (held === undefined || held.length !== options.byteLength) {
    return bpError('invalid_argument', 'the upload bytes did not all arrive');
  }
  const file = new File(held.parts, options.name, { type: options.type, lastModified: Date.now() });
  const transfer = new DataTransfer();
  transfer.items.add(file);
  const el = picked.el;
  el.files = transfer.files;
  el.dispatchEvent(new Event('input', { bubbles: true, composed: true }));
  el.dispatchEvent(new Event('change', { bubbles: true }));
  return { set: true };
}

// Opens a download the page made (a blob: or data: URL) in this world: its
// size, or `tooLarge` past `maxBytes`; a URL that no longer resolves (a
// revoked blob) is `no_match`. The isolated world's own fetch, so a page that
// replaced its `fetch` changes nothing.
async function downloadOpen(options) {
  let blob;
  try {
    blob = await (await fetch(options.url)).blob();
  } catch (e) {
    return bpError('no_match', 'the download URL no longer resolves');
  }
  if (blob.size > options.maxBytes) return { size: blob.size, tooLarge: true };
  bpState().download = blob;
  return { size: blob.size, tooLarge: false };
}

// The base64 bytes of the open download from `offset` (at most `length`);
// the last piece forgets it.
async function downloadChunk(options) {
  const blob = bpState().download;
  if (blob === undefined) return bpError('no_match', 'no download is open');
  const end = Math.min(blob.size, options.offset + options.length);
  const url = await new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob.slice(options.offset, end));
  });
  if (end >= blob.size) bpState().download = undefined;
  return { data: url.slice(url.indexOf(',') + 1) };
}
