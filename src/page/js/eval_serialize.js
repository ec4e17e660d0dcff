// browser.eval's bounded serializer, called with `this` = the box {value} the
// evaluated code produced (in the page's main world, where that value lives), or
// the box {threw, thrown} of what it threw: then the answer is {threw, text}, the
// thrown value's stack or string form cut to `options.maxExceptionChars`.
// It walks the value into a JSON-able copy and stops at `options.maxChars`
// characters of JSON text and `options.maxDepth` levels, so a huge value never
// leaves the page whole. Answers one JSON text:
// {type, value, truncated, truncationReasons} with reasons from
// "max_chars", "max_depth", "cycle", "unserializable". The page may have
// patched the builtins used here; the Broker re-checks the size and shape of
// the answer and treats it as untrusted browser data.
function (options) {
  'use strict';
  if (this.threw === true) {
    let text;
    try {
      const thrown = this.thrown;
      text = thrown instanceof Error && typeof thrown.stack === 'string' ? thrown.stack : String(thrown);
    } catch (e) {
      text = 'exception';
    }
    return JSON.stringify({ threw: true, text: String(text).slice(0, options.maxExceptionChars) });
  }
  const maxDepth = options.maxDepth;
  let budget = options.maxChars;
  const reasons = [];
  const seen = [];
  const OMIT = {};
  const note = function (reason) {
    if (reasons.indexOf(reason) < 0) reasons.push(reason);
  };
  const spend = function (n) {
    if (n > budget) {
      note('max_chars');
      budget = 0;
      return false;
    }
    budget -= n;
    return true;
  };
  const text = function (s) {
    let slice = s.length > budget ? s.slice(0, budget) : s;
    let encoded = JSON.stringify(slice);
    while (encoded.length > budget && slice.length > 0) {
      const keep = Math.floor((slice.length * budget) / encoded.length) - 2;
      slice = slice.slice(0, Math.max(0, Math.min(keep, slice.length - 1)));
      encoded = JSON.stringify(slice);
    }
    if (slice.length < s.length) note('max_chars');
    if (!spend(encoded.length)) return OMIT;
    return slice;
  };
  const walk = function (value, depth) {
    switch (typeof value) {
      case 'string':
        return text(value);
      case 'number':
        if (value - value !== 0) {
          note('unserializable');
          return spend(4) ? null : OMIT;
        }
        return spend(String(value).length) ? value : OMIT;
      case 'boolean':
        return spend(value ? 4 : 5) ? value : OMIT;
      case 'bigint':
        note('unserializable');
        return text(String(value));
      case 'undefined':
      case 'function':
      case 'symbol':
        note('unserializable');
        return undefined;
    }
    if (value === null) return spend(4) ? null : OMIT;
    if (seen.indexOf(value) >= 0) {
      note('cycle');
      return text('[Circular]');
    }
    if (value instanceof Error) return text(String(value.name) + ': ' + String(value.message));
    let toJSON;
    try {
      toJSON = value.toJSON;
    } catch (e) {
      toJSON = undefined;
    }
    if (typeof toJSON === 'function') {
      let converted;
      try {
        converted = toJSON.call(value);
      } catch (e) {
        note('unserializable');
        return spend(4) ? null : OMIT;
      }
      if (converted !== value) return walk(converted, depth);
    }
    const isArray = Array.isArray(value);
    if (depth >= maxDepth) {
      note('max_depth');
      return text(isArray ? '[Array]' : '[Object]');
    }
    if (!spend(2)) return OMIT;
    seen.push(value);
    try {
      if (isArray) {
        const out = [];
        const n = value.length;
        for (let i = 0; i < n; i++) {
          if (i > 0 && !spend(1)) break;
          let item;
          try {
            item = value[i];
          } catch (e) {
            item = undefined;
          }
          let copy = walk(item, depth + 1);
          if (copy === undefined) copy = spend(4) ? null : OMIT;
          if (copy === OMIT) break;
          out.push(copy);
        }
        return out;
      }
      const out = {};
      let keys;
      try {
        keys = Object.keys(value);
      } catch (e) {
        note('unserializable');
        keys = [];
      }
      let first = true;
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i];
        let item;
        try {
          item = value[key];
        } catch (e) {
          note('unserializable');
          continue;
        }
        if (typeof item === 'undefined' || typeof item === 'function' || typeof item === 'symbol') {
          note('unserializable');
          continue;
        }
        const cost = JSON.stringify(String(key)).length + 1 + (first ? 0 : 1);
        if (!spend(cost)) break;
        const copy = walk(item, depth + 1);
        if (copy === OMIT) break;
        out[key] = copy;
        first = false;
      }
      return out;
    } finally {
      seen.pop();
    }
  };
  let type = 'undefined';
  let copy = null;
  try {
    const result = this.value;
    type = result === null ? 'null' : Array.isArray(result) ? 'array' : typeof result;
    // A function that returns nothing is not a lossy result.
    copy = typeof result === 'undefined' ? null : walk(result, 0);
  } catch (e) {
    note('unserializable');
    copy = null;
  }
  if (copy === OMIT || copy === undefined) copy = null;
  return JSON.stringify({
    type: type,
    value: copy,
    truncated: reasons.length > 0,
    truncationReasons: reasons,
  });
}
