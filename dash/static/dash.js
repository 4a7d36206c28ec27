// jobs dashboard: the chart, and live refresh of the pages marked data-live. Every page
// reads without this file; it adds nothing a page needs to be correct.
(function () {
  "use strict";

  // drawChart draws #chart from the JSON data island #chart-data with the vendored
  // uPlot, when both are there.
  function drawChart() {
    var el = document.getElementById("chart");
    var island = document.getElementById("chart-data");
    if (!el || !island || typeof window.uPlot !== "function") return;
    var d;
    try { d = JSON.parse(island.textContent); } catch (e) { return; }
    if (!d || !d.t || !d.t.length) return;
    el.textContent = "";
    el.classList.add("drawn");
    var styles = getComputedStyle(document.body);
    var fg = styles.color;
    var opts = {
      width: Math.max(300, el.clientWidth || 600), height: 200,
      series: [{}, { label: "processed", stroke: "#2e7d32", width: 2 }, { label: "failed", stroke: "#c62828", width: 2 }],
      axes: [{ stroke: fg }, { stroke: fg }]
    };
    new window.uPlot(opts, [d.t, d.processed, d.failed], el);
  }

  // refresh re-reads the page while it is visible and swaps the data-live region, so
  // counts move without a reload. It stops while the tab is hidden.
  var every = 5000;
  function refresh() {
    var live = document.querySelector("[data-live]");
    if (!live || document.hidden) return;
    fetch(location.href, { headers: { Accept: "text/html" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) return;
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.querySelector("[data-live]");
        if (!fresh) return;
        live.replaceWith(document.importNode(fresh, true));
        drawChart();
      })
      .catch(function () {});
  }

  document.addEventListener("DOMContentLoaded", function () {
    drawChart();
    if (document.querySelector("[data-live]")) {
      setInterval(refresh, every);
      document.addEventListener("visibilitychange", function () { if (!document.hidden) refresh(); });
    }
  });
})();
