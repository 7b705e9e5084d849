// Live engine panel: polls the tenant's engine.json every 2 s and fills the [data-field] slots.
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
    set("tenant_blocks", (data.tenant || {}).num_blocks_used);
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
