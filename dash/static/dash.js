// jobs dashboard: the chart, and live pages. Every page reads without this file; it adds
// nothing a page needs to be correct.
//   - The overview ([data-stream]) listens to /live, server-sent events carrying the
//     queues' counts, which the server reads once per tick for every open tab, and
//     re-reads the whole page every 30 s (throughput, chart).
//   - Other live pages ([data-live]) re-read themselves every 5 s.
//   - While the dashboard cannot read Redis (a "down" event, a failed re-read), a banner
//     (#stale) says the figures shown are not live, and since when; it goes at the next
//     good read.
// Nothing is read while the tab is hidden.
(function () {
  "use strict";

  var base = document.body.getAttribute("data-base") || "";

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
    var fg = getComputedStyle(document.body).color;
    var opts = {
      width: Math.max(300, el.clientWidth || 600), height: 200,
      // Room on the right for the last x-axis label, which is centred on its tick at the
      // plot's right edge (uPlot's automatic padding leaves it cut in half).
      padding: [null, 36, null, null],
      series: [{}, { label: "processed", stroke: "#2e7d32", width: 2 }, { label: "failed", stroke: "#c62828", width: 2 }],
      axes: [{ stroke: fg }, { stroke: fg }]
    };
    new window.uPlot(opts, [d.t, d.processed, d.failed], el);
  }

  // stale shows why the page's figures stopped updating, or takes the banner away (why
  // empty). The time is the first failure's, by this browser's clock.
  var staleSince = null;
  function stale(why) {
    var el = document.getElementById("stale");
    if (!why) {
      staleSince = null;
      if (el) el.remove();
      return;
    }
    if (!staleSince) staleSince = new Date();
    if (!el) {
      el = document.createElement("p");
      el.id = "stale";
      el.className = "warn";
      el.setAttribute("role", "alert");
      var main = document.querySelector("main") || document.body;
      main.insertBefore(el, main.firstChild);
    }
    el.textContent = "Not updating since " + staleSince.toLocaleTimeString() + ": " + why +
      ". The figures below are from before; the page catches up by itself once reads work again.";
  }

  // refresh re-reads the page and swaps its data-live region.
  function refresh() {
    var live = document.querySelector("[data-live]");
    if (!live || document.hidden) return;
    fetch(location.href, { headers: { Accept: "text/html" }, credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) stale("the dashboard answered " + r.status + " (is Redis reachable?)");
        return r.ok ? r.text() : null;
      })
      .then(function (html) {
        if (!html) return;
        stale(null);
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.querySelector("[data-live]");
        if (!fresh) return;
        live.replaceWith(document.importNode(fresh, true));
        drawChart();
      })
      .catch(function () { stale("the dashboard server does not answer"); });
  }

  function latency(ms) {
    if (ms <= 0) return "-";
    if (ms < 1000) return ms + "ms";
    if (ms < 3600000) return Math.round(ms / 1000) + "s";
    return Math.round(ms / 60000) + "m";
  }

  function setCount(row, name, value) {
    var cell = row.querySelector('[data-count="' + name + '"]');
    if (!cell) return;
    var target = cell.querySelector("a") || cell;
    if (target.textContent !== String(value)) target.textContent = String(value);
  }

  // apply puts one /live snapshot into the queues table; a queue added or gone needs
  // the page itself, so it is re-read.
  function apply(snap) {
    var rows = document.querySelectorAll("#queues tr[data-queue]");
    if (rows.length !== snap.queues.length) { refresh(); return; }
    var byName = {};
    rows.forEach(function (r) { byName[r.getAttribute("data-queue")] = r; });
    for (var i = 0; i < snap.queues.length; i++) {
      var q = snap.queues[i], row = byName[q.name];
      if (!row) { refresh(); return; }
      ["ready", "scheduled", "active", "retry", "dead", "done", "workers", "processed_today", "failed_today"]
        .forEach(function (k) { setCount(row, k, q[k]); });
      var p = row.querySelector("[data-paused]");
      if (p) { p.setAttribute("data-paused", String(q.paused)); p.textContent = q.paused ? "yes" : "no"; }
      var l = row.querySelector("[data-latency-ms]");
      if (l) { l.setAttribute("data-latency-ms", String(q.latency_ms)); l.textContent = latency(q.latency_ms); }
    }
  }

  var stream = null;
  function listen() {
    if (stream || document.hidden || typeof window.EventSource !== "function") return;
    stream = new EventSource(base + "/live");
    stream.addEventListener("stats", function (ev) {
      try { apply(JSON.parse(ev.data)); stale(null); } catch (e) { /* a bad snapshot: wait for the next */ }
    });
    stream.addEventListener("down", function (ev) {
      var why = "Redis cannot be read";
      try { why += " (" + JSON.parse(ev.data).error + ")"; } catch (e) { /* keep the plain words */ }
      stale(why);
    });
    // The dashboard server itself went away: EventSource reconnects on its own.
    stream.onerror = function () { if (stream && stream.readyState !== 1) stale("the live stream was lost; reconnecting"); };
  }
  function unlisten() {
    if (stream) { stream.close(); stream = null; }
  }

  document.addEventListener("DOMContentLoaded", function () {
    drawChart();
    var streamed = !!document.querySelector("[data-stream]");
    if (streamed) listen();
    if (document.querySelector("[data-live]")) {
      setInterval(refresh, streamed ? 30000 : 5000);
    }
    document.addEventListener("visibilitychange", function () {
      if (document.hidden) { unlisten(); return; }
      if (streamed) listen();
      refresh();
    });
  });
})();
