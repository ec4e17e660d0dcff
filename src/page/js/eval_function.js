// browser.eval, function form (src/page/eval.rs fills in the source and the JSON
// arguments). Runs in the page's MAIN world with the global object as `this`; the
// awaited result is boxed as in eval_expression.js.
(async function (bpArguments) {
  return { value: await (
/*BP_EVAL_SOURCE*/
).apply(globalThis, bpArguments) };
})(/*BP_EVAL_ARGUMENTS*/)
