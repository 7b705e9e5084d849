// Live engine panel: polls the tenant's engine.json every 2 s, fills the [data-field] slots and draws
// the throughput / KV-use chart from data.history (observability.history) on a plain canvas.
// Plain JS, no build step. Text goes in through textContent only (never innerHTML).
(function () {
  "use strict";
  const panel = document.getElementById("engine-panel");
  if (!panel) return;
  const field = (name) => panel.querySelector(`[data-field="${name}"]`);
  const set = (name, value) => { const el = field(name); if (el) el.textContent = value ?? "–"; };

  function render(data) {
    const engine = data.engine || {};
    set("state", engine.state === "ready" && engine.alive ? "ready" : engine.state);
    field("state").className = "badge " + (engine.alive ? "ok" : "warn");
    set("model", [engine.model, engine.max_model_len ? `context ${engine.max_model_len} tokens` : null, engine.error]
      .filter(Boolean).join(" · "));
    const stats = data.stats || {};
    for (const key of ["num_running", "num_waiting", "num_blocks_used", "num_blocks_cached", "num_blocks_pinned", "num_blocks_total"]) {
      set(key, stats[key]);
    }
    const tenant = data.tenant || {};
    set("tenant_blocks", tenant.num_blocks_used);
    set("tenant_hit_rate", tenant.prefix_cache_hit_rate == null ? null
      : `${(100 * tenant.prefix_cache_hit_rate).toFixed(1)}% (${tenant.prefix_cache_hits} / ${tenant.prefix_cache_queries})`);
    set("kv_usage", stats.kv_usage == null ? null : `${(100 * stats.kv_usage).toFixed(1)}%`);
    const points = (data.history || {}).points || [];
    const last = points.length ? points[points.length - 1].tokens_per_s : null;
    set("tokens_per_s", last == null ? null : last < 10 ? last.toFixed(1) : Math.round(last));
    drawChart(data.history);
    const total = stats.num_blocks_total || 0;
    for (const part of ["used", "cached", "pinned"]) {
      const bar = panel.querySelector(`[data-bar="${part}"]`);
      bar.style.width = total ? `${(100 * (stats["num_blocks_" + part] || 0)) / total}%` : "0";
    }
    const pin = data.pin || {};
    set("pin", !pin.engine ? "" : pin.pinned
      ? `System prompt pinned: ${pin.num_tokens} of its ${pin.num_prompt_tokens} tokens, in ${pin.num_blocks} whole KV blocks.`
      : `System prompt not pinned${pin.error ? ": " + pin.error : ""}.`);
  }

  const canvas = panel.querySelector("[data-chart]");
  const GAP_S = 10; // samples further apart than this (nobody watching) are not joined by a line

  function niceCeil(value) { // 1, 2, 5 x 10^k at or above value
    const base = Math.pow(10, Math.floor(Math.log10(value)));
    return [1, 2, 5, 10].map((m) => m * base).find((v) => v >= value);
  }

  function drawLine(ctx, points, key, scale, color, x, y) {
    ctx.strokeStyle = color;
    ctx.lineWidth = 2;
    ctx.beginPath();
    let previous = null;
    for (const p of points) {
      const v = p[key];
      if (v == null) { previous = null; continue; }
      const joined = previous && previous.age_s - p.age_s <= GAP_S;
      joined ? ctx.lineTo(x(p.age_s), y(v / scale)) : ctx.moveTo(x(p.age_s), y(v / scale));
      previous = p;
    }
    ctx.stroke();
  }

  function drawChart(history) {
    if (!canvas || !history) return;
    const points = history.points || [];
    const windowS = history.window_s || 600;
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth, height = canvas.clientHeight;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const pad = 4;
    const x = (age) => width - pad - ((width - 2 * pad) * Math.min(age, windowS)) / windowS;
    const y = (fraction) => height - pad - (height - 2 * pad) * Math.max(0, Math.min(1, fraction));
    ctx.strokeStyle = "#eaeef2";
    ctx.lineWidth = 1;
    for (let i = 1; i < 4; i++) {
      ctx.beginPath(); ctx.moveTo(pad, y(i / 4)); ctx.lineTo(width - pad, y(i / 4)); ctx.stroke();
    }
    const rates = points.map((p) => p.tokens_per_s).filter((v) => v != null);
    const maxRate = niceCeil(Math.max(1, ...rates));
    drawLine(ctx, points, "kv_usage", 1, "#9a6700", x, y);
    drawLine(ctx, points, "tokens_per_s", maxRate, "#0b5cad", x, y);
    set("chart_max", `${maxRate} tokens/s`);
    set("chart_window", Math.round(windowS / 60));
  }

  async function poll() {
    try {
      const response = await fetch(panel.dataset.url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (response.ok) render(await response.json());
      else set("state", `error ${response.status}`);
    } catch (err) {
      set("state", "offline");
    }
  }
  poll();
  setInterval(poll, 2000);
})();
