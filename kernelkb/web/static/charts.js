// KernelKB's interactive charts, drawn with Plotly (served from the installed plotly
// package at /ui/vendor/plotly.min.js: no CDN, works offline). Data comes as JSON from
// the server; every text from a record is set with textContent, never as HTML.
"use strict";

(function () {
  const VERDICT_COLOURS = {improved: "#2e7d32", neutral: "#9e9e9e", regressed: "#e65100",
    incorrect: "#c62828", failed: "#c62828", invalid: "#6a1b9a"};
  const REGIME_SYMBOLS = ["circle", "square", "diamond", "triangle-up", "cross", "x"];

  function getJson(url) {
    return fetch(url, {headers: {Accept: "application/json"}}).then(function (r) {
      if (!r.ok) { throw new Error(url + ": " + r.status); }
      return r.json();
    });
  }

  function say(el, text) { if (el) { el.textContent = text; } }

  // Plotly reads hover text as a little HTML (<br>, <b>, <a>): a record's text is escaped
  function esc(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function experienceUrl(id) { return "/ui/experiences/" + encodeURIComponent(id); }

  // -- the landscape: axes and colour from any knob or metric -------------------------
  function landscapeValue(p, name, data) {
    if (name in data.metric_keys) { return p[data.metric_keys[name]]; }
    return p.config[name];
  }

  function options(select, names, chosen) {
    names.forEach(function (name) {
      const o = document.createElement("option");
      o.value = name; o.textContent = name;
      if (name === chosen) { o.selected = true; }
      select.appendChild(o);
    });
  }

  function drawLandscape(box, data) {
    const x = document.getElementById("axis-x").value;
    const y = document.getElementById("axis-y").value;
    const c = document.getElementById("axis-colour").value;
    const numeric = function (name) {
      return data.points.every(function (p) {
        const v = landscapeValue(p, name, data);
        return v === null || v === undefined || typeof v === "number";
      });
    };
    const groups = {};
    const colourNumeric = numeric(c);
    data.points.forEach(function (p) {
      const xv = landscapeValue(p, x, data), yv = landscapeValue(p, y, data);
      if (xv === null || xv === undefined || yv === null || yv === undefined) { return; }
      const key = colourNumeric ? p.kind : String(landscapeValue(p, c, data));
      (groups[key] = groups[key] || []).push(p);
    });
    const allColour = data.points.map(function (p) { return landscapeValue(p, c, data); })
      .filter(function (v) { return typeof v === "number"; });
    const traces = Object.keys(groups).sort().map(function (key) {
      const ps = groups[key];
      const marker = {size: 8, opacity: 0.8,
        symbol: ps.map(function (p) {
          return p.kind === "predicted" ? "triangle-up-open" :
            (p.exp_id === data.best ? "star" : "circle");
        })};
      if (colourNumeric) {
        marker.color = ps.map(function (p) { return landscapeValue(p, c, data); });
        marker.colorscale = "Viridis";
        marker.cmin = Math.min.apply(null, allColour);
        marker.cmax = Math.max.apply(null, allColour);
        marker.colorbar = {title: {text: c}};
        marker.showscale = key === "measured";
      }
      const named = colourNumeric || data.metric_keys[c] === "kind" ? key : c + " = " + key;
      return {type: "scatter", mode: "markers", name: named,
        x: ps.map(function (p) { return landscapeValue(p, x, data); }),
        y: ps.map(function (p) { return landscapeValue(p, y, data); }),
        customdata: ps.map(function (p) { return p.exp_id || ""; }),
        text: ps.map(function (p) {
          return (p.kind === "predicted" ? "predicted (not measured)" : "measured") +
            "<br>" + esc(p.config_text).replace(/, /g, "<br>") +
            "<br>time " + p.time_ms.toPrecision(4) + " ms" +
            (p.gbps ? "<br>" + p.gbps.toFixed(0) + " GB/s" : "") +
            (p.peak_pct ? "<br>" + p.peak_pct.toFixed(0) + "% of peak" : "") +
            (p.exp_id ? "<br>click: experience " + p.exp_id.slice(0, 10) : "");
        }),
        hovertemplate: "%{text}<extra></extra>", marker: marker};
    });
    const axis = function (name) {
      return {title: {text: name}, type: numeric(name) ? "linear" : "category",
        automargin: true};
    };
    const layout = {margin: {t: 30, r: 10}, xaxis: axis(x), yaxis: axis(y),
      legend: {orientation: "h", y: -0.2}, hovermode: "closest",
      title: {text: data.op + " · " + data.gpu + " · " + data.shape, font: {size: 13}}};
    return Plotly.react(box, traces, layout, {displaylogo: false, responsive: true});
  }

  function landscape(box) {
    getJson(box.dataset.src).then(function (data) {
      const names = data.metrics.concat(data.knobs);
      options(document.getElementById("axis-x"), names, data.knobs[0] || "programs");
      options(document.getElementById("axis-y"), names, "time (ms)");
      options(document.getElementById("axis-colour"), names, "measured or predicted");
      ["axis-x", "axis-y", "axis-colour"].forEach(function (id) {
        document.getElementById(id).addEventListener("change", function () {
          drawLandscape(box, data);
        });
      });
      document.getElementById("landscape-axes").hidden = false;
      drawLandscape(box, data).then(function () {
        box.on("plotly_click", function (ev) {
          const id = ev.points.length ? ev.points[0].customdata : "";
          if (id) { window.location.href = experienceUrl(id); }
        });
        box.dataset.ready = "1";
      });
    }).catch(function (err) { say(box, "chart not drawn: " + err.message); });
  }

  // -- a run: every candidate as it lands, and the lineage graph ----------------------
  function roundTraces(data, yKey) {
    const byRegime = {};
    data.rounds.forEach(function (r) { (byRegime[r.regime] = byRegime[r.regime] || []).push(r); });
    return data.regimes.map(function (regime, i) {
      const rs = byRegime[regime] || [];
      return {type: "scatter", mode: "lines+markers", name: regime || "rounds",
        x: rs.map(function (r) { return r.iteration; }),
        y: rs.map(function (r) { return yKey === "verdict" ? r.verdict : r[yKey]; }),
        customdata: rs.map(function (r) { return r.id; }),
        text: rs.map(function (r) {
          return "#" + r.iteration + " " + r.kind + " · " + r.verdict + "<br>" +
            esc(r.summary.slice(0, 120));
        }),
        hovertemplate: "%{text}<extra></extra>",
        line: {width: 1, color: "#b0bec5"},
        marker: {size: 10, symbol: REGIME_SYMBOLS[i % REGIME_SYMBOLS.length],
          color: rs.map(function (r) { return VERDICT_COLOURS[r.verdict] || "#000"; })}};
    });
  }

  function drawRounds(box, data) {
    const timed = data.rounds.some(function (r) { return r.time_ms !== null; });
    const yKey = timed ? "time_ms" : "verdict";
    const layout = {margin: {t: 10, r: 10}, hovermode: "closest",
      xaxis: {title: {text: "round (of its regime)"}, dtick: 1},
      yaxis: {title: {text: timed ? "time (ms)" : "verdict (untimed: CPU interpreter)"},
        type: timed ? "linear" : "category"},
      legend: {orientation: "h", y: -0.25}};
    box.dataset.points = String(data.rounds.length);
    return Plotly.react(box, roundTraces(data, yKey), layout,
      {displaylogo: false, responsive: true});
  }

  function showNode(panel, node) {
    say(panel.querySelector(".node-title"), "#" + node.iteration + " " + node.kind + " · " +
      node.verdict + (node.speedup_vs_parent ? " · " + node.speedup_vs_parent.toFixed(2) +
      "x vs parent" : "") + (node.best ? " · best" : ""));
    say(panel.querySelector(".node-summary"), node.summary);
    const link = panel.querySelector(".node-link");
    link.href = experienceUrl(node.id);
    say(link, node.id);
    const pre = panel.querySelector(".node-diff");
    pre.textContent = "";
    const lines = (node.diff || "(no diff: the starting kernel)").split("\n");
    lines.forEach(function (line) {
      const span = document.createElement("span");
      span.textContent = line + "\n";
      if (line.startsWith("+") && !line.startsWith("+++")) { span.className = "add"; }
      else if (line.startsWith("-") && !line.startsWith("---")) { span.className = "del"; }
      pre.appendChild(span);
    });
    if (node.diff_cut) { pre.appendChild(document.createTextNode("… (cut: the experience has all of it)")); }
    panel.dataset.node = node.id;
  }

  function drawLineage(box, panel, data) {
    const regime = box.dataset.regime;
    const nodes = data.lineage[regime] || [];
    const at = {};
    nodes.forEach(function (n) { at[n.id] = n; });
    const ex = [], ey = [];
    nodes.forEach(function (n) {
      const p = at[n.parent];
      if (p) { ex.push(p.iteration, n.iteration, null); ey.push(p.lane, n.lane, null); }
    });
    const edges = {type: "scatter", mode: "lines", x: ex, y: ey, hoverinfo: "skip",
      line: {color: "#b0bec5", width: 1.5}, showlegend: false};
    const dots = {type: "scatter", mode: "markers+text", showlegend: false,
      x: nodes.map(function (n) { return n.iteration; }),
      y: nodes.map(function (n) { return n.lane; }),
      text: nodes.map(function (n) { return "#" + n.iteration; }),
      textposition: "top center", customdata: nodes.map(function (n) { return n.id; }),
      hovertext: nodes.map(function (n) {
        return n.kind + " · " + n.verdict + "<br>" + esc(n.summary.slice(0, 100));
      }),
      hovertemplate: "%{hovertext}<extra></extra>",
      marker: {size: nodes.map(function (n) { return n.best ? 18 : 12; }),
        symbol: nodes.map(function (n) { return n.best ? "star" : "circle"; }),
        color: nodes.map(function (n) { return VERDICT_COLOURS[n.verdict] || "#000"; })}};
    const lanes = nodes.reduce(function (m, n) { return Math.max(m, n.lane); }, 0);
    const layout = {margin: {t: 10, r: 10, l: 30, b: 40}, hovermode: "closest",
      height: Math.min(600, 140 + 40 * lanes),
      xaxis: {title: {text: "round"}, dtick: 1, zeroline: false},
      yaxis: {visible: false, autorange: "reversed"}};
    box.dataset.nodes = String(nodes.length);
    return Plotly.react(box, [edges, dots], layout, {displaylogo: false, responsive: true})
      .then(function () {
        if (!box.dataset.bound) {
          box.on("plotly_click", function (ev) {
            const pt = ev.points.find(function (q) { return q.customdata; });
            if (pt) { showNode(panel, at[pt.customdata] || {}); }
          });
          box.dataset.bound = "1";
        }
      });
  }

  // a live run's tables: the page as the server renders it now (its text escaped there),
  // swapped in part by part, so the rounds table grows without a reload
  const LIVE_PARTS = ["live", "regime-best", "rounds", "lineage"];

  function refreshParts() {
    return fetch(window.location.href).then(function (r) { return r.text(); })
      .then(function (html) {
        const fresh = new DOMParser().parseFromString(html, "text/html");
        LIVE_PARTS.forEach(function (id) {
          const now = document.getElementById(id), next = fresh.getElementById(id);
          if (now && next) { now.replaceWith(document.importNode(next, true)); }
        });
      });
  }

  function run(box) {
    const lineages = Array.prototype.slice.call(document.querySelectorAll(".lineage-graph"));
    const panel = document.getElementById("lineage-node");
    const status = document.getElementById("rounds-chart-status");
    let wasLive = false, seen = null;
    function tick() {
      getJson(box.dataset.src).then(function (data) {
        const now = data.rounds.length + "/" + JSON.stringify(data.candidate);
        if (data.live && seen !== null && now !== seen) { refreshParts(); }
        seen = now;
        return drawRounds(box, data).then(function () {
          return Promise.all(lineages.map(function (g) { return drawLineage(g, panel, data); }));
        }).then(function () {
          box.dataset.ready = "1";
          say(status, data.live ? "under way: " + data.rounds.length +
            " rounds so far, updated as each lands" : data.rounds.length + " rounds");
          if (data.live) { wasLive = true; window.setTimeout(tick, 3000); }
          else if (wasLive) { window.location.reload(); }  // ended: the report is written
        });
      }).catch(function (err) { say(status, "chart not drawn: " + err.message); });
    }
    tick();
  }

  function start() {
    if (typeof Plotly === "undefined") { return; }  // the script did not load: PNGs stay
    document.querySelectorAll(".js-only").forEach(function (el) { el.hidden = false; });
    document.querySelectorAll(".no-js").forEach(function (el) { el.hidden = true; });
    const land = document.getElementById("landscape-chart");
    if (land) { landscape(land); }
    const rounds = document.getElementById("rounds-chart");
    if (rounds) { run(rounds); }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else { start(); }
})();
