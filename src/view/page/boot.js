// The first script of the page, before any other runs: it takes the one-time secret out of the
// address bar (and so out of the history) and spends it for the page's token, which lives only
// in this page's memory. The page itself was served without any data.
(function () {
  'use strict';
  var marker = '#bpview=';
  var hash = window.location.hash;
  var secret = hash.indexOf(marker) === 0 ? hash.slice(marker.length) : '';
  window.history.replaceState(null, '', window.location.pathname);
  var session = secret
    ? fetch('/api/session', { method: 'POST', headers: { 'X-BP-Secret': secret } }).then(
        function (response) {
          return response.ok ? response.json().then(function (body) { return body.token; }) : null;
        },
        function () { return null; })
    : Promise.resolve(null);
  Object.defineProperty(window, 'bpSession', { value: session });
})();
