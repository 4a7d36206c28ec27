// chart.js draws the overview's per-minute chart with the vendored uPlot. The page
// carries the data as a JSON island, <script type="application/json" id="chart-data">
// holding {"t": [Unix seconds], "processed": [n], "failed": [n]}, and a <div id="chart">
// to draw into; no inline script, so the page's Content-Security-Policy stays strict.
// Without JavaScript (or without uPlot) the page's table of the same numbers stays.
"use strict";
(() => {
	let plot = null;

	function read() {
		const island = document.getElementById("chart-data");
		if (!island) return null;
		try {
			const d = JSON.parse(island.textContent);
			if (!Array.isArray(d.t) || !Array.isArray(d.processed) || !Array.isArray(d.failed)) return null;
			return [d.t, d.processed, d.failed];
		} catch (e) {
			console.warn("chart: the data island is not JSON:", e.message);
			return null;
		}
	}

	// Axis and grid colours follow the page's text colour, so the chart suits dark mode.
	function options(el) {
		const fg = getComputedStyle(el).color || "#444";
		const axis = { stroke: fg, grid: { stroke: "rgba(128,128,128,0.2)" }, ticks: { stroke: "rgba(128,128,128,0.4)" } };
		return {
			width: Math.max(el.clientWidth, 300),
			height: 220,
			scales: { x: { time: true } },
			series: [
				{},
				{ label: "processed", stroke: "#2a9d8f", fill: "rgba(42,157,143,0.15)", width: 2 },
				{ label: "failed", stroke: "#e63946", width: 2 },
			],
			axes: [axis, Object.assign({}, axis, { size: 50 })],
		};
	}

	// draw (re)draws the chart from the page's current data island; a live update that
	// replaces the island calls it again (window.jobsChart.draw).
	function draw() {
		const el = document.getElementById("chart");
		const data = read();
		if (!el || !data || typeof uPlot !== "function") return;
		if (plot) {
			if (plot.root.isConnected && el.contains(plot.root)) {
				plot.setData(data);
				return;
			}
			plot.destroy();
		}
		plot = new uPlot(options(el), data, el);
		el.dataset.drawn = "true";
		for (const t of document.querySelectorAll(".nojs-chart")) t.hidden = true;
	}

	window.jobsChart = { draw };
	if (document.readyState === "loading") {
		document.addEventListener("DOMContentLoaded", draw);
	} else {
		draw();
	}
	window.addEventListener("resize", () => {
		const el = document.getElementById("chart");
		if (plot && el) plot.setSize({ width: Math.max(el.clientWidth, 300), height: 220 });
	});
})();
