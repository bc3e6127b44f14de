// Swap in the live part of the page every few seconds. The part is HTML
// the server rendered with html/template (everything in it escaped), so
// it is set as it comes; a 401 means the login ran out: reload to get the
// form.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live) return;
  var src = live.getAttribute("data-src") + location.search;
  var every = parseInt(live.getAttribute("data-refresh"), 10) || 2000;
  var updates = 0;
  function tick() {
    fetch(src, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (r.status === 401) { location.reload(); return null; }
        return r.ok ? r.text() : null;
      })
      .then(function (html) {
        if (html !== null && html !== undefined) {
          live.innerHTML = html;
          updates++;
          live.setAttribute("data-updates", String(updates));
          live.classList.remove("stale");
        }
      })
      .catch(function () { live.classList.add("stale"); })
      .then(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
})();
