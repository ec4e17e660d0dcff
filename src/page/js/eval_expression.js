// browser.eval, expression form (src/page/eval.rs fills in the source). Runs in the
// page's MAIN world: the caller asked for page code. The result is awaited and put in a
// box, so even a string stays in the page as an object handle until the bounded
// serializer (eval_serialize.js) reads it; nothing unbounded is returned by value.
(async function () {
  return { value: await (
/*BP_EVAL_SOURCE*/
) };
})()
