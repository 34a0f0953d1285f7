// The report's only script: it redraws the lease timeline for a zoomed
// span, pans it, shows an op's record on hover and takes an anomaly of the
// list to the timeline. It draws what reports/svg.go draws, with the same
// geometry; the page reads fine without it.
(function () {
  "use strict";
  var W = 1200, L = 64, R = 12, AX = 22, NEM = 22, LANE = 16, PITCH = 20;
  var D = JSON.parse(document.getElementById("tl-data").textContent);
  var svg = document.getElementById("tl");
  var tip = document.getElementById("tip");
  if (!svg || !D) return;
  document.documentElement.classList.add("js");
  document.getElementById("tlctl").hidden = false;
  var end = Math.max(D.end, 1);
  var t0 = 0, t1 = end, sel = -1;
  var nl = D.lanes.length;
  var byLane = [];
  for (var l = 0; l < nl; l++) byLane.push([]);
  D.holds.forEach(function (h, i) { byLane[h[0]].push(i); });

  function laneY(l) { return l === 0 ? AX : AX + NEM + (l - 1) * PITCH; }
  function x(t) { return L + (t - t0) / Math.max(t1 - t0, 1) * (W - L - R); }
  function f1(v) { return Math.round(v * 10) / 10; }
  function esc(s) { return String(s).replace(/[&<>"]/g, function (c) { return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]; }); }
  function clampX(v) { return Math.min(Math.max(v, L - 2), W - R + 2); }
  function secs(t, step) {
    var d = 0;
    for (var s = step; s < 1e6 && d < 6; s *= 10) d++;
    return (t / 1e6).toFixed(d) + "s";
  }
  function tickStep(span, n) {
    var raw = Math.max(span, 1) / n, p = Math.pow(10, Math.floor(Math.log10(raw)));
    var ms = [1, 2, 5, 10];
    for (var i = 0; i < ms.length; i++) if (ms[i] * p >= raw) return Math.max(Math.round(ms[i] * p), 1);
    return Math.max(Math.round(10 * p), 1);
  }
  // firstAtOrAfter finds, in arr sorted by key(e), the first e with key(e) >= t.
  function firstAtOrAfter(arr, t, key) {
    var lo = 0, hi = arr.length;
    while (lo < hi) { var m = (lo + hi) >> 1; if (key(arr[m]) < t) lo = m + 1; else hi = m; }
    return lo;
  }

  function render() {
    var o = [];
    var bottom = laneY(nl) - (PITCH - LANE);
    for (var l = 0; l < nl; l++) {
      var h = l === 0 ? NEM - 4 : LANE;
      o.push('<rect class="lane" x="' + L + '" y="' + laneY(l) + '" width="' + (W - L - R) + '" height="' + h + '"/><text class="lbl" x="' + (L - 6) + '" y="' + f1(laneY(l) + h / 2 + 4) + '">' + esc(D.lanes[l]) + '</text>');
    }
    D.faults.forEach(function (f, i) {
      if (f.e < t0 || f.s > t1) return;
      var x0 = clampX(x(f.s)), x1 = clampX(x(f.e)), w = Math.max(x1 - x0, 1);
      o.push('<rect class="fault" data-f="' + i + '" x="' + f1(x0) + '" y="' + AX + '" width="' + f1(w) + '" height="' + f1(bottom - AX) + '"/>');
      if (w > 40) {
        var lbl = f.f + " " + f.t, n = Math.floor(w / 6);
        if (lbl.length > n) lbl = lbl.slice(0, Math.max(n - 1, 0)) + "…";
        o.push('<text class="flbl" x="' + f1(x0 + 2) + '" y="' + (AX + 13) + '">' + esc(lbl) + '</text>');
      }
      (f.l || []).forEach(function (l) {
        o.push('<rect class="pause" data-f="' + i + '" x="' + f1(x0) + '" y="' + laneY(l) + '" width="' + f1(w) + '" height="' + LANE + '"/>');
      });
    });
    // Holds, merged per lane where narrower than a pixel.
    for (var ln = 0; ln < nl; ln++) {
      var run = null, y = laneY(ln) + 2;
      var flush = function () {
        if (!run) return;
        if (run.n === 1) {
          var hd = D.holds[run.first], cls = "hold";
          if (hd[5] & 4) cls += " an";
          if (hd[5] & 2) cls += " norel";
          var xs = clampX(x(hd[2]));
          o.push('<rect class="' + cls + '" data-h="' + run.first + '" x="' + f1(run.x0) + '" y="' + y + '" width="' + f1(Math.max(xs - run.x0, 1)) + '" height="' + (LANE - 4) + '"/>');
          if (run.x1 - xs >= 0.5) o.push('<rect class="exp" data-h="' + run.first + '" x="' + f1(xs) + '" y="' + y + '" width="' + f1(run.x1 - xs) + '" height="' + (LANE - 4) + '"/>');
          if (hd[4] >= 0) {
            var tl = String(hd[4]);
            if (run.x1 - run.x0 >= 7 * tl.length + 4) o.push('<text class="tok" x="' + f1((run.x0 + run.x1) / 2) + '" y="' + (y + LANE - 7) + '">' + tl + '</text>');
          }
        } else {
          o.push('<rect class="hold merged' + (run.an ? " an" : "") + '" data-m="' + run.n + '" x="' + f1(run.x0) + '" y="' + y + '" width="' + f1(Math.max(run.x1 - run.x0, 1)) + '" height="' + (LANE - 4) + '"/>');
        }
        run = null;
      };
      byLane[ln].forEach(function (i) {
        var hd = D.holds[i];
        if (hd[3] < t0 || hd[1] > t1) return;
        var x0 = clampX(x(hd[1])), x1 = clampX(x(hd[3])), an = (hd[5] & 4) !== 0;
        if (run && run.narrow && x1 - x0 < 1 && x0 <= run.x1 + 1) {
          run.x1 = Math.max(run.x1, x0 + 1, x1); run.n++; run.an = run.an || an;
          return;
        }
        flush();
        run = { x0: x0, x1: Math.max(x1, x0 + 1), n: 1, first: i, an: an, narrow: x1 - x0 < 1 };
      });
      flush();
    }
    // Writes: at most one tick per lane, pixel and kind.
    var seen = {};
    var wt = function (w) { return w[1]; };
    for (var k = firstAtOrAfter(D.writes, t0, wt); k < D.writes.length && D.writes[k][1] <= t1; k++) {
      var w = D.writes[k], wx = x(w[1]), key = w[0] + ":" + Math.floor(wx) + ":" + w[2];
      if (seen[key]) continue;
      seen[key] = true;
      var wy = laneY(w[0]), y0 = w[2] === 1 ? wy - 1 : wy + LANE - 5;
      o.push('<line class="w w' + w[2] + '" data-w="' + k + '" x1="' + f1(wx) + '" x2="' + f1(wx) + '" y1="' + y0 + '" y2="' + (wy + LANE + 2) + '"/>');
    }
    // Lost-lock notices: a small triangle above the lane.
    var nt = function (n) { return n[1]; };
    for (var q = firstAtOrAfter(D.notices, t0, nt); q < D.notices.length && D.notices[q][1] <= t1; q++) {
      var n = D.notices[q], nx = x(n[1]), ny = laneY(n[0]);
      o.push('<path class="n" data-n="' + q + '" d="M' + f1(nx - 4) + ' ' + f1(ny - 3) + 'L' + f1(nx + 4) + ' ' + f1(ny - 3) + 'L' + f1(nx) + ' ' + f1(ny + 4) + 'Z"/>');
    }
    o.push('<g clip-path="url(#tlclip)">');
    D.anomalies.forEach(function (a, i) {
      o.push('<g class="anom' + (i === sel ? " sel" : "") + '" id="tl-' + a.id + '" data-a="' + i + '">');
      var pts = a.p.map(function (p) { return f1(x(p[1])) + "," + f1(laneY(p[0]) + LANE / 2); });
      if (pts.length > 1) o.push('<polyline points="' + pts.join(" ") + '"/>');
      a.p.forEach(function (p, j) {
        var cx = x(p[1]);
        if (cx < L - 4 || cx > W - R + 4) return;
        o.push('<circle data-o="' + a.o[j] + '" data-a="' + i + '" cx="' + f1(cx) + '" cy="' + f1(laneY(p[0]) + LANE / 2) + '" r="4"/>');
      });
      o.push('</g>');
    });
    o.push('</g>');
    var step = tickStep(t1 - t0, 12);
    var ax = ['<g class="axis"><line x1="' + L + '" x2="' + (W - R) + '" y1="' + (AX - 2) + '" y2="' + (AX - 2) + '"/>'];
    for (var v = Math.ceil(t0 / step) * step; v <= t1; v += step) {
      var vx = f1(x(v));
      ax.push('<line x1="' + vx + '" x2="' + vx + '" y1="' + (AX - 6) + '" y2="' + (AX - 2) + '"/><text x="' + vx + '" y="' + (AX - 9) + '">' + secs(v, step) + '</text>');
    }
    ax.push('</g>');
    var defs = '<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="3" height="6" fill="#555"/></pattern>' +
      '<clipPath id="tlclip"><rect x="' + L + '" y="0" width="' + (W - L - R) + '" height="' + (bottom + 10) + '"/></clipPath></defs>';
    svg.innerHTML = defs + '<g id="tl-body">' + o.join("") + '</g>' + ax.join("");
    document.getElementById("tlspan").textContent = "showing " + secs(t0, 1000) + " – " + secs(t1, 1000) + " of " + secs(end, 1000);
  }

  function setSpan(a, b) {
    var span = Math.min(Math.max(b - a, 100), end);
    if (a < 0) a = 0;
    if (a + span > end) a = end - span;
    t0 = Math.max(a, 0); t1 = t0 + span;
    render();
  }
  function zoom(f, at) {
    if (at === undefined) at = (t0 + t1) / 2;
    setSpan(at - (at - t0) * f, at + (t1 - at) * f);
  }
  function timeAt(clientX) {
    var r = svg.getBoundingClientRect();
    var px = (clientX - r.left) * W / r.width;
    return t0 + (px - L) / (W - L - R) * (t1 - t0);
  }

  document.getElementById("tlctl").addEventListener("click", function (e) {
    var z = e.target.getAttribute && e.target.getAttribute("data-z");
    if (z === "in") zoom(0.5);
    if (z === "out") zoom(2);
    if (z === "all") setSpan(0, end);
  });
  svg.addEventListener("wheel", function (e) {
    e.preventDefault();
    zoom(e.deltaY > 0 ? 1.25 : 0.8, timeAt(e.clientX));
  }, { passive: false });
  var drag = null;
  svg.addEventListener("mousedown", function (e) { drag = { x: e.clientX, t0: t0, t1: t1 }; });
  window.addEventListener("mouseup", function () { drag = null; });
  window.addEventListener("mousemove", function (e) {
    if (!drag) return;
    var r = svg.getBoundingClientRect();
    var dt = (e.clientX - drag.x) * W / r.width / (W - L - R) * (drag.t1 - drag.t0);
    if (Math.abs(dt) > 0) setSpan(drag.t0 - dt, drag.t1 - dt);
  });

  function rec(i) { return D.ops[i] || ("op " + i + " (its record is in history.jsonl)"); }
  function holdText(i) {
    var h = D.holds[i];
    var s = D.lanes[h[0]] + " holds " + D.locks[h[8]] + (h[4] >= 0 ? " with token " + h[4] : "") + " from " + secs(h[1], 1000) + " to " + secs(h[3], 1000);
    if (h[5] & 2) s += " (no release came)";
    else if (h[2] < h[3]) s += " (its lease ended at " + secs(h[2], 1000) + ")";
    s += "\n" + rec(h[6]);
    if (h[7] >= 0) s += "\n" + rec(h[7]);
    return s;
  }
  function tipText(el) {
    var d = el.dataset || {};
    if (d.o !== undefined) return D.anomalies[+d.a].k + ": " + D.anomalies[+d.a].x + "\n" + rec(+d.o);
    if (d.h !== undefined) return holdText(+d.h);
    if (d.w !== undefined) {
      var w = D.writes[+d.w];
      return ["write accepted", "write rejected by the store", "write failed", "write of unknown outcome"][w[2]] + " at " + secs(w[1], 1000) + "\n" + rec(w[3]);
    }
    if (d.n !== undefined) {
      var nn = D.notices[+d.n];
      return "lost-lock notice at " + secs(nn[1], 1000) + "\n" + rec(nn[2]);
    }
    if (d.m !== undefined) return d.m + " holds, too short to tell apart here: zoom in";
    if (d.f !== undefined) {
      var f = D.faults[+d.f];
      return f.f + " " + f.t + ": from " + secs(f.s, 1000) + (f.h >= 0 ? ", healed at " + secs(f.e, 1000) : ", never healed") + "\n" + rec(f.i) + (f.h >= 0 ? "\n" + rec(f.h) : "");
    }
    return null;
  }
  svg.addEventListener("mouseover", function (e) {
    var t = tipText(e.target);
    if (!t || drag) { tip.hidden = true; return; }
    tip.textContent = t;
    tip.hidden = false;
  });
  svg.addEventListener("mousemove", function (e) {
    if (tip.hidden) return;
    var left = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
    var top = e.clientY + 16;
    if (top + tip.offsetHeight > window.innerHeight) top = e.clientY - tip.offsetHeight - 8;
    tip.style.left = left + "px"; tip.style.top = top + "px";
  });
  svg.addEventListener("mouseleave", function () { tip.hidden = true; });
  svg.addEventListener("click", function (e) {
    var a = e.target.getAttribute("data-a") || (e.target.parentNode && e.target.parentNode.getAttribute && e.target.parentNode.getAttribute("data-a"));
    if (a === null || a === undefined) return;
    var el = document.getElementById(D.anomalies[+a].id);
    if (el) el.scrollIntoView({ block: "center" });
    select(+a);
  });

  function select(i) {
    sel = i;
    document.querySelectorAll(".anomaly").forEach(function (el) { el.classList.toggle("sel", +el.getAttribute("data-a") === i); });
  }
  // showAnomaly zooms the timeline to anomaly i and scrolls to it.
  function showAnomaly(i) {
    var a = D.anomalies[i];
    if (!a) return;
    select(i);
    if (a.p.length > 0) {
      var lo = Infinity, hi = -Infinity;
      a.p.forEach(function (p) { lo = Math.min(lo, p[1]); hi = Math.max(hi, p[1]); });
      var m = Math.max((hi - lo) * 0.25, 20000);
      setSpan(lo - m, hi + m);
    } else {
      render();
    }
    document.getElementById("timeline").scrollIntoView({ block: "start" });
  }
  document.querySelectorAll(".goto").forEach(function (el) {
    el.addEventListener("click", function (e) { e.preventDefault(); showAnomaly(+el.getAttribute("data-a")); });
  });
  window.locktestReport = { showAnomaly: showAnomaly, span: function () { return [t0, t1]; }, setSpan: setSpan };
  render();
})();
