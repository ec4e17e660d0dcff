// find(options): bounded, safe metadata of the elements matching the CSS
// options.selector in the document and, with options.pierce, in every open
// shadow root (each root's matches follow those of the roots before it).
// No handles are kept: results are not refs. An invalid selector is an
// error value, not a throw.
function find(options) {
  const TEXT_MAX = options.textMax;
  const ATTRIBUTE_MAX = 200;
  const MAX_ATTRIBUTES = 20;
  const MAX_CLASSES = 10;
  const SAFE_ATTRIBUTES = new Set(['type', 'name', 'href', 'placeholder']);
  const roots = [document];
  if (options.pierce) bpShadowRoots(document, roots);
  const scopes = new Map();
  const found = [];
  let total = 0;
  for (const root of roots) {
    let list;
    try {
      list = root.querySelectorAll(options.selector);
    } catch (error) {
      return bpError('invalid_selector', error.message);
    }
    total += list.length;
    for (let i = 0; i < list.length && found.length < options.limit; i++) {
      found.push({ el: list[i], root: root });
    }
  }
  const elements = found.map(({ el, root }) => {
    const tag = el.localName;
    let scope = scopes.get(root);
    if (scope === undefined) {
      scope = bpScope(root, false);
      scopes.set(root, scope);
    }
    const role = bpRoleOf(el, tag, scope);
    const classes = [];
    for (let i = 0; i < el.classList.length && i < MAX_CLASSES; i++) classes.push(bpClip(el.classList[i], 50));
    const attributes = {};
    let n = 0;
    for (const attribute of el.attributes) {
      if (n >= MAX_ATTRIBUTES) break;
      const name = attribute.name;
      if (SAFE_ATTRIBUTES.has(name) || name.startsWith('aria-')) {
        attributes[name] = bpClip(attribute.value, ATTRIBUTE_MAX);
        n++;
      }
    }
    const r = el.getBoundingClientRect();
    const visible = el.checkVisibility({ visibilityProperty: true }) && r.width > 0 && r.height > 0;
    const entry = { tag: tag };
    if (el.id) entry.id = bpClip(el.id, 100);
    entry.classes = classes;
    if (role !== null) entry.role = role;
    const name = bpNameOf(el, tag, role || '', scope, TEXT_MAX);
    if (name !== '') entry.name = name;
    entry.text = tag === 'input' || tag === 'textarea' ? '' : bpTextOf(el, TEXT_MAX);
    entry.visible = visible;
    entry.bounds = { x: Math.round(r.x), y: Math.round(r.y), width: Math.round(r.width), height: Math.round(r.height) };
    entry.inShadowRoot = root !== document;
    entry.attributes = attributes;
    return entry;
  });
  return { elements: elements, total: total, truncated: total > elements.length };
}
