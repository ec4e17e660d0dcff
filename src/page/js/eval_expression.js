// browser.eval, expression form (src/page/eval.rs fills in the source). Runs in the
// page's MAIN world: the caller asked for page code. The result is awaited and put in a
// box, so even a string stays in the page as an object handle until the bounded
// serializer (eval_serialize.js) reads it; nothing unbounded is returned by value. A
// throw or rejection is boxed too, so its text is bounded in the page as well.
(async function () {
  try {
    return { value: await (
/*BP_EVAL_SOURCE*/
) };
  } catch (bpThrown) {
    return { threw: true, thrown: bpThrown };
  }
})()
