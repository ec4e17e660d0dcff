// browser.eval, function form (src/page/eval.rs fills in the source and the JSON
// arguments). Runs in the page's MAIN world with the global object as `this`; the
// awaited result, or what it threw, is boxed as in eval_expression.js.
(async function (bpArguments) {
  try {
    return { value: await (
/*BP_EVAL_SOURCE*/
).apply(globalThis, bpArguments) };
  } catch (bpThrown) {
    return { threw: true, thrown: bpThrown };
  }
})(/*BP_EVAL_ARGUMENTS*/)
