/* gristmill web UI: recipe builder, preview, try-it, jobs. Plain ES2020, no build step, no external
 * resources. Every piece of data goes into the page as text (textContent / text nodes), never as HTML.
 * All calls go to the REST API next to this page (relative URLs), with the bearer token typed into the
 * top bar (kept in sessionStorage) when the server needs one.
 */
(function () {
  "use strict";

  const Y = window.GMYaml;
  const $ = (id) => document.getElementById(id);
  const KIND_ORDER = ["mapper", "filter", "deduplicator", "selector", "grouper", "aggregator"];
  const TERMINAL = new Set(["done", "failed", "cancelled", "interrupted"]);
  const RESUMABLE = new Set(["failed", "cancelled", "interrupted"]);
  const TOKEN_KEY = "gristmill.token";
  const DRAFT_KEY = "gristmill.recipe";
  const POLL_MS = 700;
  const LOG_LINES_KEPT = 2000;
  const SETTING_KEYS = ["project_name", "dataset_path", "export_path", "np", "text_keys"];

  const S = {
    token: "",
    ops: [], // catalogue
    opNames: new Set(),
    details: new Map(), // name → Promise of /api/ops/{name}
    settings: { project_name: "", dataset_path: "", export_path: "", np: "1", text_keys: "text" },
    extra: {}, // other recipe keys (from YAML), kept as they are
    chain: [], // [{uid, name, detail, specs, values, unknown, open}]
    uid: 0,
    mode: "builder", // "builder": the YAML is generated; "yaml": the text is the recipe
    yamlText: "",
    builderYaml: "",
    yamlParsed: null, // {ok: recipe} | {error}
    validateSeq: 0,
    validateTimer: 0,
    validation: null,
    touched: false,
    previewRows: null,
    trySeq: 0,
    tryDirty: false,
    jobId: null,
    jobGen: 0,
    jobTimer: 0,
    logNext: 0,
    logLines: [],
    lastJobState: null,
    reportBlobUrl: null,
  };

  /* ------------------------------------------------------------------ DOM helpers */

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === null || v === undefined || v === false) continue;
        if (k === "class") el.className = v;
        else if (k === "text") el.textContent = v;
        else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
        else if (k === "dataset") Object.assign(el.dataset, v);
        else if (k === "hidden") el.hidden = true;
        else if (k === "checked" || k === "disabled" || k === "value" || k === "selected") el[k] = v;
        else el.setAttribute(k, v === true ? "" : String(v));
      }
    }
    append(el, children);
    return el;
  }

  function append(el, children) {
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      if (Array.isArray(c)) append(el, c);
      else if (c instanceof Node) el.appendChild(c);
      else el.appendChild(document.createTextNode(String(c)));
    }
  }

  function clear(el) {
    while (el.firstChild) el.removeChild(el.firstChild);
    return el;
  }

  function fmtInt(n) {
    return typeof n === "number" && Number.isFinite(n) ? n.toLocaleString("en-US") : n === null || n === undefined ? "—" : String(n);
  }

  function fmtNum(n, digits) {
    if (typeof n !== "number" || !Number.isFinite(n)) return "—";
    return n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
  }

  function fmtBytes(b) {
    if (typeof b !== "number" || !Number.isFinite(b)) return "—";
    const u = ["B", "KB", "MB", "GB", "TB"];
    let i = 0;
    while (b >= 1000 && i < u.length - 1) { b /= 1000; i++; }
    return `${b.toFixed(i && b < 100 ? 1 : 0)} ${u[i]}`;
  }

  function toDate(v) {
    if (v === null || v === undefined || v === "") return null;
    if (typeof v === "number") return new Date(v < 1e12 ? v * 1000 : v);
    const d = new Date(v);
    return Number.isNaN(d.getTime()) ? null : d;
  }

  function fmtTime(v) {
    const d = toDate(v);
    if (!d) return "—";
    const now = new Date();
    const time = d.toLocaleTimeString("en-GB", { hour12: false });
    if (d.toDateString() === now.toDateString()) return time;
    return `${d.toISOString().slice(0, 10)} ${time}`;
  }

  function fmtDuration(s) {
    if (typeof s !== "number" || !Number.isFinite(s) || s < 0) return "";
    if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m} min ${Math.round(s - m * 60)} s`;
    return `${Math.floor(m / 60)} h ${m % 60} min`;
  }

  function truncate(s, n) {
    s = String(s);
    return s.length > n ? s.slice(0, n).replace(/\s+\S*$/, "") + "…" : s;
  }

  function compact(v) {
    if (typeof v === "string") return v;
    try { return JSON.stringify(v); } catch (e) { return String(v); }
  }

  function debounce(fn, ms) {
    let t = 0;
    return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
  }

  function enc(s) {
    return encodeURIComponent(s);
  }

  /* ------------------------------------------------------------------ API */

  class ApiError extends Error {
    constructor(status, message, details) {
      super(message);
      this.status = status;
      this.details = details || [];
    }
  }

  function authHeaders() {
    return S.token ? { Authorization: `Bearer ${S.token}` } : {};
  }

  async function api(path, opts) {
    const { method = "GET", body } = opts || {};
    const headers = Object.assign({ Accept: "application/json" }, authHeaders());
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let r;
    try {
      r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store" });
    } catch (e) {
      setHealth("unreachable", "bad");
      throw new ApiError(0, `cannot reach the server (${e.message})`);
    }
    const text = await r.text();
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch (e) { data = text; }
    }
    if (!r.ok) {
      let msg = `${r.status} ${r.statusText}`;
      if (data && typeof data === "object") {
        if (typeof data.error === "string") msg = data.error;
        else if (typeof data.detail === "string") msg = data.detail;
        else if (data.detail) msg = compact(data.detail);
      } else if (typeof data === "string" && data.length < 300) {
        msg = data;
      }
      if (r.status === 401) tokenNeeded();
      throw new ApiError(r.status, msg, data && typeof data === "object" ? data.details : null);
    }
    return data;
  }

  function errorText(e) {
    const det = (e.details || []).map((d) => (typeof d === "string" ? d : d && d.message ? (d.path ? `${d.path}: ${d.message}` : d.message) : compact(d)))
      .filter((t) => t && !e.message.includes(t));
    return det.length ? `${e.message} — ${det.join("; ")}` : e.message;
  }

  function showGlobalError(msg) {
    const el = $("global-error");
    if (!msg) { el.hidden = true; clear(el); return; }
    clear(el);
    append(el, [msg, " ", h("button", { type: "button", class: "btn small ghost", text: "Dismiss", onclick: () => showGlobalError(null) })]);
    el.hidden = false;
  }

  function setHealth(text, cls) {
    const el = $("health");
    el.textContent = text;
    el.className = `health ${cls || ""}`;
  }

  function tokenNeeded() {
    setHealth("token needed", "bad");
    $("token").classList.add("attention");
  }

  /* ------------------------------------------------------------------ op catalogue */

  function kindRank(k) {
    const i = KIND_ORDER.indexOf(k);
    return i < 0 ? KIND_ORDER.length : i;
  }

  async function loadCatalogue() {
    try {
      const ops = await api("api/ops");
      S.ops = (Array.isArray(ops) ? ops : ops.ops || []).slice().sort((a, b) => kindRank(a.kind) - kindRank(b.kind) || a.name.localeCompare(b.name));
      S.opNames = new Set(S.ops.map((o) => o.name));
      const sel = $("op-kind");
      const kinds = [...new Set(S.ops.map((o) => o.kind))].sort((a, b) => kindRank(a) - kindRank(b));
      while (sel.options.length > 1) sel.remove(1);
      for (const k of kinds) sel.appendChild(h("option", { value: k, text: k }));
      renderCatalogue();
      // the chain may hold ops loaded before the catalogue arrived
      if (S.chain.some((e) => !e.detail && S.opNames.has(e.name))) {
        await Promise.all(S.chain.map(async (e) => { if (!e.detail && S.opNames.has(e.name)) await attachDetail(e, e.unknown); }));
        renderChain();
      }
    } catch (e) {
      clear($("cat-list")).appendChild(h("p", { class: "err-static", text: `Cannot load the ops: ${errorText(e)}` }));
    }
  }

  function renderCatalogue() {
    const q = $("op-search").value.trim().toLowerCase();
    const kind = $("op-kind").value;
    const words = q.split(/\s+/).filter(Boolean);
    const match = S.ops.filter((o) => {
      if (kind && o.kind !== kind) return false;
      const hay = `${o.name} ${o.kind} ${o.summary || ""}`.toLowerCase();
      return words.every((w) => hay.includes(w));
    });
    const list = clear($("cat-list"));
    $("cat-count").textContent = `${match.length} of ${S.ops.length} ops`;
    if (!match.length) {
      list.appendChild(h("p", { class: "empty", text: "No op matches." }));
      return;
    }
    let group = null;
    let ul = null;
    for (const o of match) {
      if (o.kind !== group) {
        group = o.kind;
        const n = match.filter((x) => x.kind === group).length;
        list.appendChild(h("h4", { class: `cat-kind kind-${group}` }, h("span", { class: `kind-dot kind-${group}` }), `${group}s`, h("span", { class: "muted", text: ` · ${n}` })));
        ul = h("ul", { class: "cat-ops" });
        list.appendChild(ul);
      }
      const summary = (o.summary || "").trim();
      ul.appendChild(h("li", null, h("button", {
        type: "button", class: "cat-op", dataset: { op: o.name }, title: summary,
        "aria-label": `Add ${o.name} (${o.kind})${summary ? `: ${truncate(summary, 160)}` : ""}`,
        onclick: () => addOp(o.name),
      }, h("span", { class: "cat-name", text: o.name }), h("span", { class: "cat-summary", text: truncate(summary, 140) }), h("span", { class: "cat-add", "aria-hidden": "true", text: "+" }))));
    }
  }

  function getDetail(name) {
    if (!S.details.has(name)) {
      const p = api(`api/ops/${enc(name)}`).catch((e) => { S.details.delete(name); throw e; });
      S.details.set(name, p);
    }
    return S.details.get(name);
  }

  /* ------------------------------------------------------------------ param forms from JSON schema */

  function specsFor(detail) {
    const schema = detail.schema || {};
    const props = schema.properties || {};
    const req = new Set(schema.required || []);
    const params = detail.params || [];
    const names = params.length ? params.map((p) => p.name) : Object.keys(props);
    for (const k of Object.keys(props)) if (!names.includes(k)) names.push(k);
    // text_key (every op has one, rarely set) goes last
    names.sort((a, b) => (a === "text_key") - (b === "text_key"));
    return names.map((name) => fieldSpec(name, props[name] || {}, params.find((p) => p.name === name) || {}, req.has(name)));
  }

  function fieldSpec(name, prop, p, required) {
    let variants = Array.isArray(prop.anyOf) ? prop.anyOf : Array.isArray(prop.oneOf) ? prop.oneOf : [prop];
    const nullable = variants.some((v) => v && v.type === "null");
    variants = variants.filter((v) => v && v.type !== "null");
    let kind = "json";
    let enumVals = null;
    const v0 = variants[0] || {};
    const types = variants.map((v) => (v.enum ? "enum" : v.type === "array" ? `array:${(v.items && v.items.type) || "any"}` : v.type));
    if (variants.length === 1) {
      if (v0.enum) { kind = "enum"; enumVals = v0.enum; }
      else if (v0.const !== undefined) { kind = "enum"; enumVals = [v0.const]; }
      else if (v0.type === "boolean") kind = "bool";
      else if (v0.type === "integer") kind = "int";
      else if (v0.type === "number") kind = "number";
      else if (v0.type === "string") kind = "string";
      else if (types[0] === "array:string") kind = "strlist";
      else if (types[0] === "array:integer" || types[0] === "array:number") kind = "numlist";
    } else if (types.length === 2 && types.includes("string") && types.includes("array:string")) {
      kind = "strOrList";
    } else if (types.every((t) => t === "integer" || t === "number")) {
      kind = "number";
    } else if (types.every((t) => t === "enum" || t === "string")) {
      kind = "string";
    }
    const hasDefault = Object.prototype.hasOwnProperty.call(prop, "default") || (!required && !p.required && p.default !== undefined);
    const def = Object.prototype.hasOwnProperty.call(prop, "default") ? prop.default : p.default;
    return {
      name, kind, nullable, enumVals,
      required: required || !!p.required,
      hasDefault,
      def: hasDefault ? def : undefined,
      description: prop.description || p.description || "",
      typeLabel: p.type || types.join(" | ") + (nullable ? " | None" : ""),
      minimum: v0.minimum, maximum: v0.maximum, exclusiveMinimum: v0.exclusiveMinimum, exclusiveMaximum: v0.exclusiveMaximum,
      pattern: v0.pattern,
    };
  }

  function numStr(v) {
    return String(v);
  }

  function isHuge(v) {
    return typeof v === "number" && Number.isInteger(v) && !Number.isSafeInteger(v);
  }

  function simpleListItem(x) {
    return typeof x === "string" && x !== "" && x.trim() === x && !/[,\n\r]/.test(x) && !x.startsWith("[");
  }

  function toDisplay(spec, v) {
    if (spec.kind === "bool") return v === null || v === undefined ? false : !!v;
    if (v === null || v === undefined) return "";
    switch (spec.kind) {
      case "enum": return String(v);
      case "int": case "number":
        // an integer beyond 2^53 (int64 max: "no limit") cannot round-trip through JSON: left empty
        if (typeof v === "number" && Number.isInteger(v) && !Number.isSafeInteger(v)) return "";
        return typeof v === "number" ? numStr(v) : String(v);
      case "string": return typeof v === "string" ? v : JSON.stringify(v);
      case "strlist":
        return Array.isArray(v) && v.every(simpleListItem) ? v.join(", ") : JSON.stringify(v);
      case "numlist":
        return Array.isArray(v) && v.every((x) => typeof x === "number") ? v.join(", ") : JSON.stringify(v);
      case "strOrList":
        return typeof v === "string" && !v.startsWith("[") ? v : JSON.stringify(v);
      default: return JSON.stringify(v);
    }
  }

  function parseNumber(t) {
    const s = t.trim();
    if (/^[-+]?\d+$/.test(s)) {
      const n = Number(s);
      return Number.isSafeInteger(n) ? n : s; // the server reads a big integer from its digits
    }
    if (/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(s)) return Number(s);
    return t; // not a number: sent as typed, the server names the problem
  }

  function tryJSON(t) {
    try { return { ok: JSON.parse(t) }; } catch (e) { return { error: e.message }; }
  }

  // the value the recipe gets from a field's text; {omit: true} leaves the op's default
  function fromDisplay(spec, raw) {
    if (spec.kind === "bool") return { value: !!raw };
    const t = String(raw);
    if (t.trim() === "") {
      if (spec.kind === "string" && !spec.nullable) return { value: "" };
      if (spec.nullable) return { value: null };
      return { omit: true };
    }
    switch (spec.kind) {
      case "enum": return { value: t };
      case "string": return { value: t };
      case "int": case "number": return { value: parseNumber(t) };
      case "strlist": {
        if (t.trim().startsWith("[")) { const j = tryJSON(t); return j.error ? { value: t, hint: "not valid JSON" } : { value: j.ok }; }
        return { value: t.split(",").map((x) => x.trim()).filter((x) => x !== "") };
      }
      case "numlist": {
        if (t.trim().startsWith("[")) { const j = tryJSON(t); return j.error ? { value: t, hint: "not valid JSON" } : { value: j.ok }; }
        return { value: t.split(",").map((x) => x.trim()).filter((x) => x !== "").map(parseNumber) };
      }
      case "strOrList": {
        if (t.trim().startsWith("[")) { const j = tryJSON(t); return j.error ? { value: t, hint: "not valid JSON" } : { value: j.ok }; }
        return { value: t };
      }
      default: {
        const j = tryJSON(t);
        return j.error ? { value: t, hint: "not valid JSON: sent as text" } : { value: j.ok };
      }
    }
  }

  function isChanged(spec, raw) {
    if (!spec.hasDefault) return spec.kind === "bool" ? true : String(raw).trim() !== "";
    return spec.kind === "bool" ? !!raw !== !!toDisplay(spec, spec.def) : String(raw) !== String(toDisplay(spec, spec.def));
  }

  function entryParams(e) {
    const out = {};
    if (e.specs) {
      for (const spec of e.specs) {
        const raw = e.values[spec.name];
        if (raw === undefined || !isChanged(spec, raw)) continue;
        const r = fromDisplay(spec, raw);
        if (!r.omit) out[spec.name] = r.value;
      }
    }
    for (const [k, v] of Object.entries(e.unknown || {})) out[k] = v;
    return out;
  }

  /* ------------------------------------------------------------------ the recipe */

  function builderRecipe() {
    const s = S.settings;
    const r = {};
    if (s.project_name.trim()) r.project_name = s.project_name.trim();
    r.dataset_path = s.dataset_path.trim();
    if (s.export_path.trim()) r.export_path = s.export_path.trim();
    r.np = parseNumber(String(s.np).trim() || "1");
    const tk = s.text_keys.trim() || "text";
    r.text_keys = tk.includes(",") ? tk.split(",").map((x) => x.trim()).filter(Boolean) : tk;
    for (const [k, v] of Object.entries(S.extra)) r[k] = v;
    r.process = S.chain.map((e) => ({ [e.name]: entryParams(e) }));
    return r;
  }

  function textKey() {
    const tk = S.settings.text_keys.trim() || "text";
    return tk.split(",")[0].trim() || "text";
  }

  // the recipe as the server will read it: the builder's, or the YAML text's when edited as text
  function recipeBody() {
    if (S.mode === "yaml") return { yaml: S.yamlText };
    return { recipe: builderRecipe() };
  }

  // the process list for try-it (null when the text cannot be read here)
  function currentProcess() {
    if (S.mode === "yaml") {
      if (!S.yamlParsed || !S.yamlParsed.ok) return null;
      return Array.isArray(S.yamlParsed.ok.process) ? S.yamlParsed.ok.process : [];
    }
    return builderRecipe().process;
  }

  function builderChanged() {
    S.touched = true;
    S.mode = "builder";
    S.yamlParsed = null;
    const y = Y.dump(builderRecipe());
    S.builderYaml = y;
    S.yamlText = y;
    const ta = $("yaml-text");
    if (ta.value !== y) ta.value = y;
    setYamlStatus("sync");
    saveDraft();
    recipeChanged();
  }

  function recipeChanged() {
    S.tryDirty = true;
    $("run-status").textContent = "";
    scheduleValidate();
    updateChainCount();
  }

  function saveDraft() {
    try { sessionStorage.setItem(DRAFT_KEY, S.yamlText); } catch (e) { /* private mode */ }
  }

  /* ------------------------------------------------------------------ settings */

  function bindSettings() {
    for (const k of SETTING_KEYS) {
      const el = $(`s-${k}`);
      el.addEventListener("input", () => {
        S.settings[k] = el.value;
        builderChanged();
      });
    }
  }

  function renderSettings() {
    for (const k of SETTING_KEYS) {
      const el = $(`s-${k}`);
      if (el.value !== S.settings[k]) el.value = S.settings[k];
    }
    renderExtra();
  }

  function renderExtra() {
    const box = clear($("extra-settings"));
    const keys = Object.keys(S.extra);
    box.hidden = !keys.length;
    if (!keys.length) return;
    box.appendChild(h("h4", { text: "Other settings (from the YAML; edit them there)" }));
    const ul = h("ul", { class: "extra-list" });
    for (const k of keys) {
      ul.appendChild(h("li", { class: "extra-item", dataset: { key: k } },
        h("code", { text: `${k}: ${truncate(Y.flow(S.extra[k]), 80)}` }),
        h("button", { type: "button", class: "icon-btn", "aria-label": `Remove the setting ${k}`, title: "Remove", text: "×",
          onclick: () => { delete S.extra[k]; renderExtra(); builderChanged(); } }),
        h("p", { class: "err", id: `x-${k}-err`, hidden: true })));
    }
    box.appendChild(ul);
  }

  /* ------------------------------------------------------------------ the op chain */

  async function attachDetail(e, params) {
    try {
      const d = await getDetail(e.name);
      e.detail = d;
      e.specs = specsFor(d);
      e.values = {};
      e.unknown = {};
      const given = params || {};
      for (const spec of e.specs) {
        e.values[spec.name] = Object.prototype.hasOwnProperty.call(given, spec.name) ? toDisplay(spec, given[spec.name]) : toDisplay(spec, spec.def);
      }
      for (const [k, v] of Object.entries(given)) if (!e.specs.some((s) => s.name === k)) e.unknown[k] = v;
    } catch (err) {
      e.loadError = errorText(err);
      e.unknown = Object.assign({}, params || {});
    }
  }

  function newEntry(name) {
    return { uid: ++S.uid, name, detail: null, specs: null, values: {}, unknown: {}, open: true };
  }

  async function addOp(name) {
    const e = newEntry(name);
    await attachDetail(e, {});
    S.chain.push(e);
    renderChain();
    builderChanged();
    const card = document.querySelector(`.op-card[data-uid="${e.uid}"]`);
    if (card) {
      card.scrollIntoView({ block: "nearest" });
      const first = card.querySelector(".op-body input, .op-body select, .op-body textarea");
      (first || card.querySelector(".op-title")).focus({ preventScroll: true });
      card.classList.add("flash");
      setTimeout(() => card.classList.remove("flash"), 900);
    }
    $("run-status").textContent = "";
  }

  function moveOp(i, d) {
    const j = i + d;
    if (j < 0 || j >= S.chain.length) return;
    const [e] = S.chain.splice(i, 1);
    S.chain.splice(j, 0, e);
    renderChain();
    builderChanged();
    const btn = document.querySelector(`.op-card[data-uid="${e.uid}"] .${d < 0 ? "up" : "down"}`);
    const fallback = document.querySelector(`.op-card[data-uid="${e.uid}"] .op-title`);
    (btn && !btn.disabled ? btn : fallback).focus();
  }

  function removeOp(i) {
    S.chain.splice(i, 1);
    renderChain();
    builderChanged();
    const next = document.querySelectorAll(".op-card .remove")[Math.min(i, S.chain.length - 1)];
    (next || $("op-search")).focus();
  }

  function updateChainCount() {
    $("chain-count").textContent = S.chain.length ? `· ${S.chain.length}` : "";
    $("chain-empty").hidden = S.chain.length > 0;
    $("clear-chain").hidden = S.chain.length === 0;
  }

  function changedSummary(e) {
    const p = entryParams(e);
    const parts = Object.entries(p).map(([k, v]) => `${k}=${truncate(Y.flow(v), 40)}`);
    return parts.join("  ");
  }

  function fieldId(e, name) {
    return `op${e.uid}-${name.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  }

  function renderChain() {
    const ol = clear($("chain"));
    S.chain.forEach((e, i) => ol.appendChild(renderCard(e, i)));
    updateChainCount();
    if (S.validation) placeErrors(S.validation);
  }

  function renderCard(e, i) {
    const kind = e.detail ? e.detail.kind : "unknown";
    const bodyId = `op${e.uid}-body`;
    const summary = h("span", { class: "op-changed", text: changedSummary(e) });
    const toggle = h("button", {
      type: "button", class: "op-title", "aria-expanded": String(e.open), "aria-controls": bodyId,
      title: e.open ? "Collapse" : "Expand",
      onclick: () => {
        e.open = !e.open;
        toggle.setAttribute("aria-expanded", String(e.open));
        body.hidden = !e.open;
        card.classList.toggle("collapsed", !e.open);
      },
    }, h("span", { class: "chev", "aria-hidden": "true" }), h("span", { class: "op-name", text: e.name }));
    const n = S.chain.length;
    const head = h("div", { class: "op-head" },
      h("span", { class: "op-pos", text: `#${i}`, title: `process[${i}]` }),
      h("span", { class: `kind-badge kind-${kind}`, text: kind }),
      toggle,
      summary,
      h("span", { class: "grow" }),
      h("button", { type: "button", class: "icon-btn up", "aria-label": `Move ${e.name} up`, title: "Move up", text: "↑", disabled: i === 0, onclick: () => moveOp(i, -1) }),
      h("button", { type: "button", class: "icon-btn down", "aria-label": `Move ${e.name} down`, title: "Move down", text: "↓", disabled: i === n - 1, onclick: () => moveOp(i, 1) }),
      h("button", { type: "button", class: "icon-btn remove", "aria-label": `Remove ${e.name}`, title: "Remove", text: "×", onclick: () => removeOp(i) }));
    const cardErr = h("p", { class: "err card-err", id: `op${e.uid}-err`, hidden: true });
    const body = h("div", { class: "op-body", id: bodyId, hidden: !e.open });
    if (e.detail) {
      const doc = (e.detail.doc || "").trim();
      const first = doc.split(/\n\s*\n/)[0].replace(/\s*\n\s*/g, " ");
      if (first) body.appendChild(h("p", { class: "op-doc", text: first }));
      if (doc.length > first.length + 2) {
        body.appendChild(h("details", { class: "op-more" }, h("summary", { text: "Full description" }), h("pre", { class: "doc-full", text: doc })));
      }
      const grid = h("div", { class: "params" });
      for (const spec of e.specs) grid.appendChild(renderParam(e, spec, summary));
      if (!e.specs.length) grid.appendChild(h("p", { class: "muted small", text: "This op has no parameters." }));
      body.appendChild(grid);
    } else {
      body.appendChild(h("p", { class: "err-static", text: e.loadError || (S.opNames.size && !S.opNames.has(e.name) ? `unknown op ${e.name}` : "loading…") }));
    }
    const unk = Object.keys(e.unknown || {});
    if (unk.length) {
      const grid = h("div", { class: "params unknown" });
      for (const k of unk) {
        const id = fieldId(e, k);
        grid.appendChild(h("div", { class: "param", dataset: { param: k } },
          h("label", { for: id }, h("span", { class: "pname", text: k }), h("span", { class: "muted", text: " (not a param of this op)" })),
          h("div", { class: "pctl" },
            h("div", { class: "inline" },
              h("input", { id, type: "text", readonly: true, value: Y.flow(e.unknown[k]), "aria-describedby": `${id}-err` }),
              h("button", { type: "button", class: "btn small ghost", text: "Remove", "aria-label": `Remove the param ${k}`,
                onclick: () => { delete e.unknown[k]; renderChain(); builderChanged(); } })),
            h("p", { class: "err", id: `${id}-err`, hidden: true }))));
      }
      body.appendChild(grid);
    }
    const card = h("li", { class: `op-card kind-${kind}${e.open ? "" : " collapsed"}`, dataset: { uid: String(e.uid), op: e.name, position: String(i) } }, head, cardErr, body);
    return card;
  }

  function renderParam(e, spec, summaryEl) {
    const id = fieldId(e, spec.name);
    const helpId = `${id}-help`;
    const errId = `${id}-err`;
    const raw = e.values[spec.name];
    const onChange = (val) => {
      e.values[spec.name] = val;
      summaryEl.textContent = changedSummary(e);
      const r = isChanged(spec, val) ? fromDisplay(spec, val) : {};
      hint.textContent = r.hint || "";
      hint.hidden = !r.hint;
      wrap.classList.toggle("changed", isChanged(spec, val));
      builderChanged();
    };
    let ctl;
    const common = { id, "aria-describedby": `${helpId} ${errId}`, "aria-required": spec.required ? "true" : null, dataset: { param: spec.name } };
    if (spec.kind === "bool") {
      ctl = h("input", Object.assign({ type: "checkbox", checked: !!raw, onchange: (ev) => onChange(ev.target.checked) }, common));
    } else if (spec.kind === "enum") {
      ctl = h("select", Object.assign({ onchange: (ev) => onChange(ev.target.value) }, common));
      if (spec.nullable || !spec.hasDefault) ctl.appendChild(h("option", { value: "", text: spec.nullable ? "— none —" : "— choose —" }));
      for (const v of spec.enumVals) ctl.appendChild(h("option", { value: String(v), text: String(v) }));
      ctl.value = raw === undefined ? "" : String(raw);
    } else if (spec.kind === "json" && /object|array/.test(spec.typeLabel + (spec.def && typeof spec.def === "object" ? " object" : ""))) {
      ctl = h("textarea", Object.assign({ rows: 2, spellcheck: "false", oninput: (ev) => onChange(ev.target.value), placeholder: "JSON" }, common));
      ctl.value = raw === undefined ? "" : String(raw);
    } else {
      const numeric = spec.kind === "int" || spec.kind === "number";
      ctl = h("input", Object.assign({
        type: "text", spellcheck: "false", autocomplete: "off",
        inputmode: numeric ? (spec.kind === "int" ? "numeric" : "decimal") : null,
        class: numeric ? "numeric" : null,
        placeholder: spec.kind === "strlist" || spec.kind === "numlist" ? "a, b, c  or  [JSON]" : spec.kind === "json" ? "JSON"
          : isHuge(spec.def) ? "no limit" : spec.nullable ? "none" : "",
        oninput: (ev) => onChange(ev.target.value),
      }, common));
      ctl.value = raw === undefined ? "" : String(raw);
    }
    const helpParts = [];
    if (spec.description) helpParts.push(spec.description);
    const meta = [];
    if (spec.typeLabel) meta.push(spec.typeLabel);
    if (spec.hasDefault) meta.push(`default ${spec.def === null ? "none" : isHuge(spec.def) ? "no limit" : truncate(Y.flow(spec.def), 60)}`);
    const bounds = [];
    if (spec.minimum !== undefined) bounds.push(`≥ ${spec.minimum}`);
    if (spec.exclusiveMinimum !== undefined) bounds.push(`> ${spec.exclusiveMinimum}`);
    if (spec.maximum !== undefined) bounds.push(`≤ ${spec.maximum}`);
    if (spec.exclusiveMaximum !== undefined) bounds.push(`< ${spec.exclusiveMaximum}`);
    if (bounds.length) meta.push(bounds.join(", "));
    if (spec.kind === "strlist" || spec.kind === "numlist") meta.push("comma-separated or JSON");
    const hint = h("p", { class: "hint", hidden: true });
    const label = h("label", { for: id },
      h("span", { class: "pname", text: spec.name }),
      spec.required ? h("span", { class: "req", title: "required", "aria-label": "required", text: " *" }) : null);
    const wrap = h("div", { class: `param${isChanged(spec, raw) ? " changed" : ""}`, dataset: { param: spec.name } },
      label,
      h("div", { class: "pctl" },
        spec.kind === "bool" ? h("div", { class: "inline" }, ctl, h("span", { class: "muted small", text: raw ? "on" : "off" })) : ctl,
        h("p", { class: "help", id: helpId }, helpParts.join(" "), meta.length ? h("span", { class: "meta", text: ` (${meta.join(" · ")})` }) : null),
        hint,
        h("p", { class: "err", id: errId, hidden: true })));
    if (spec.kind === "bool") {
      ctl.addEventListener("change", () => { ctl.nextSibling.textContent = ctl.checked ? "on" : "off"; });
    }
    return wrap;
  }

  /* ------------------------------------------------------------------ validation */

  function scheduleValidate() {
    clearTimeout(S.validateTimer);
    setValidationBanner("pending");
    S.validateTimer = setTimeout(validateNow, 300);
  }

  async function validateNow() {
    const seq = ++S.validateSeq;
    let res;
    try {
      res = await api("api/recipes/validate", { method: "POST", body: recipeBody() });
    } catch (e) {
      res = { ok: false, errors: [{ path: "", message: errorText(e) }], warnings: [], transport: true };
    }
    if (seq !== S.validateSeq) return;
    S.validation = res;
    placeErrors(res);
    setValidationBanner(res.ok ? "ok" : "bad", res);
    updateRunButtons();
    if (res.ok && S.tryDirty && S.previewRows && $("try-live").checked) doTry();
  }

  function setValidationBanner(state, res) {
    const el = clear($("validation"));
    el.className = `validation ${state}`;
    if (state === "pending") { el.textContent = "checking…"; return; }
    if (state === "ok") {
      const n = (res.ops || []).length;
      append(el, [h("span", { class: "v-icon", "aria-hidden": "true", text: "✓" }), ` Valid recipe · ${n} op${n === 1 ? "" : "s"}`]);
      if ((res.warnings || []).length) append(el, [h("span", { class: "v-warn", text: ` · ${res.warnings.length} warning${res.warnings.length === 1 ? "" : "s"}`, title: res.warnings.join("\n") })]);
      return;
    }
    const n = (res.errors || []).length;
    append(el, [h("span", { class: "v-icon", "aria-hidden": "true", text: "✗" }), ` ${n} problem${n === 1 ? "" : "s"} `,
      h("button", { type: "button", class: "btn small ghost", text: "Show the first", onclick: focusFirstError })]);
  }

  function focusFirstError() {
    const err = document.querySelector("#recipe .err:not([hidden]):not(.hint)");
    if (!err) return;
    const holder = err.closest(".param, .field, .op-card, .extra-item, .yaml-panel, .general-errors");
    const card = err.closest(".op-card");
    if (card && card.classList.contains("collapsed")) card.querySelector(".op-title").click();
    const ctl = holder && holder.querySelector("input, select, textarea, button");
    (ctl || err).scrollIntoView({ block: "center" });
    if (ctl) ctl.focus({ preventScroll: true });
  }

  function setErr(el, msgs) {
    if (!el) return false;
    el.textContent = msgs.join(" · ");
    el.hidden = !msgs.length;
    const holder = el.closest(".param, .field");
    if (holder) {
      holder.classList.toggle("invalid", msgs.length > 0);
      const ctl = holder.querySelector("input, select, textarea");
      if (ctl) {
        if (msgs.length) ctl.setAttribute("aria-invalid", "true");
        else ctl.removeAttribute("aria-invalid");
      }
    }
    return true;
  }

  function placeErrors(res) {
    // clear every target
    document.querySelectorAll("#recipe .err").forEach((el) => setErr(el, []));
    document.querySelectorAll(".op-card.invalid").forEach((c) => c.classList.remove("invalid"));
    const targets = new Map(); // element → messages
    const general = [];
    const add = (el, msg) => {
      if (!el) return false;
      if (!targets.has(el)) targets.set(el, []);
      targets.get(el).push(msg);
      return true;
    };
    for (const err of res.errors || []) {
      const path = err.path || "";
      const msg = err.message || "";
      let placed = false;
      const m = /^process\[(\d+)\](?:\.([^.[\]]+))?(?:\.([^.[\]]+))?/.exec(path);
      if (m) {
        const e = S.chain[Number(m[1])];
        if (e) {
          const card = document.querySelector(`.op-card[data-uid="${e.uid}"]`);
          if (card) card.classList.add("invalid");
          if (m[3] && m[2] === e.name) placed = add($(`${fieldId(e, m[3])}-err`), msg);
          if (!placed) placed = add($(`op${e.uid}-err`), msg);
        }
      } else if (path) {
        const top = path.split(/[.[]/)[0];
        if (SETTING_KEYS.includes(top)) placed = add($(`s-${top}-err`), path === top ? msg : `${path}: ${msg}`);
        else if (Object.prototype.hasOwnProperty.call(S.extra, top)) placed = add($(`x-${top}-err`), path === top ? msg : `${path}: ${msg}`);
      }
      if (!placed) general.push(path ? `${path}: ${msg}` : msg);
    }
    for (const [el, msgs] of targets) setErr(el, msgs);
    const g = clear($("general-errors"));
    g.hidden = !general.length;
    if (general.length) {
      const ul = h("ul", { class: "msg-list" });
      for (const t of general) ul.appendChild(h("li", { class: "err err-item", text: t }));
      g.appendChild(ul);
    }
    // every message, with its path, next to the YAML
    const yl = clear($("yaml-errors"));
    const all = (res.errors || []).map((e) => ({ cls: "err-item", t: e.path ? `${e.path}: ${e.message}` : e.message }))
      .concat((res.warnings || []).map((w) => ({ cls: "warn-item", t: typeof w === "string" ? w : compact(w) })));
    yl.hidden = !all.length;
    for (const x of all) yl.appendChild(h("li", { class: x.cls, text: x.t }));
  }

  function updateRunButtons() {
    const ok = S.validation && S.validation.ok;
    $("run-btn").disabled = !ok;
    $("analyze-btn").disabled = !ok;
    $("run-btn").title = ok ? "" : "Fix the recipe first";
  }

  /* ------------------------------------------------------------------ YAML view */

  // while the text cannot be shown in the builder, the builder is paused (an edit there would replace the text)
  function pauseBuilder(why) {
    const body = $("builder-body");
    $("builder-paused").hidden = !why;
    $("builder-paused-why").textContent = why ? `The builder is paused: the YAML text cannot be shown in it (${why}). The text is what gets validated and run.` : "";
    body.inert = !!why;
    body.classList.toggle("paused", !!why);
  }

  function setYamlStatus(kind, detail) {
    pauseBuilder(kind === "text" ? detail : null);
    const chip = $("yaml-mode");
    const st = $("yaml-status");
    $("yaml-load").disabled = true;
    if (kind === "sync") {
      chip.textContent = "in sync";
      chip.className = "chip ok";
      st.textContent = "Generated from the builder. Paste, type or upload a recipe here to edit it as text.";
    } else if (kind === "follow") {
      chip.textContent = "edited as text";
      chip.className = "chip warn";
      st.textContent = "Edited as text: this text is what gets validated and run; the builder follows it. Editing the builder regenerates the text (comments are not kept).";
      $("yaml-load").disabled = false;
    } else {
      chip.textContent = "text only";
      chip.className = "chip bad";
      st.textContent = `Kept as text (${detail}): validated and run as written; the builder is not updated.`;
    }
  }

  function simpleEnough(obj) {
    if (obj === null || typeof obj !== "object" || Array.isArray(obj)) return "not a mapping of settings";
    if (obj.process !== undefined && !Array.isArray(obj.process)) return "process is not a list";
    for (const [i, step] of (obj.process || []).entries()) {
      if (step === null || typeof step !== "object" || Array.isArray(step) || Object.keys(step).length !== 1) return `process[${i}] is not one op`;
      const params = Object.values(step)[0];
      if (params !== null && (typeof params !== "object" || Array.isArray(params))) return `process[${i}] params are not a mapping`;
    }
    if (obj.dataset_path !== undefined && typeof obj.dataset_path !== "string") return "dataset_path is not a single string";
    for (const k of ["project_name", "export_path"]) {
      if (obj[k] !== undefined && obj[k] !== null && typeof obj[k] !== "string") return `${k} is not a string`;
    }
    if (obj.np !== undefined && typeof obj.np !== "number" && typeof obj.np !== "string") return "np is not a number";
    const tk = obj.text_keys;
    if (tk !== undefined && typeof tk !== "string" && !(Array.isArray(tk) && tk.every((x) => typeof x === "string" && !x.includes(",")))) return "text_keys is not a string or list of strings";
    return null;
  }

  let loadSeq = 0;

  async function loadIntoBuilder(obj) {
    const seq = ++loadSeq;
    const settings = {
      project_name: obj.project_name || "",
      dataset_path: obj.dataset_path || "",
      export_path: obj.export_path || "",
      np: obj.np === undefined ? "1" : String(obj.np),
      text_keys: Array.isArray(obj.text_keys) ? obj.text_keys.join(", ") : obj.text_keys || "text",
    };
    const extra = {};
    for (const [k, v] of Object.entries(obj)) if (!SETTING_KEYS.includes(k) && k !== "process") extra[k] = v;
    // reuse the cards whose op and position are unchanged (keeps their open/closed state)
    const chain = [];
    const steps = obj.process || [];
    await Promise.all(steps.map(async (step, i) => {
      const name = Object.keys(step)[0];
      const params = step[name] || {};
      const old = S.chain[i];
      const e = newEntry(name);
      if (old && old.name === name) e.open = old.open;
      else e.open = steps.length <= 4;
      if (!S.opNames.size || S.opNames.has(name)) await attachDetail(e, params);
      else e.unknown = Object.assign({}, params);
      chain[i] = e;
    }));
    if (seq !== loadSeq) return false;
    S.settings = settings;
    S.extra = extra;
    S.chain = chain;
    renderSettings();
    renderChain();
    return true;
  }

  const parseYamlSoon = debounce(async () => {
    if (S.mode !== "yaml") return;
    let obj;
    try {
      obj = Y.parse(S.yamlText);
      if (obj === null) obj = {};
    } catch (e) {
      S.yamlParsed = { error: e.message };
      setYamlStatus("text", e.message);
      return;
    }
    const why = simpleEnough(obj);
    if (why) {
      S.yamlParsed = { error: why, ok: obj && typeof obj === "object" && !Array.isArray(obj) ? obj : null };
      setYamlStatus("text", why);
      return;
    }
    S.yamlParsed = { ok: obj };
    if (await loadIntoBuilder(obj)) {
      setYamlStatus("follow");
      if (S.validation) placeErrors(S.validation);
      if (S.validation && S.validation.ok && S.tryDirty && S.previewRows && $("try-live").checked) doTry();
    }
  }, 350);

  function yamlEdited(text) {
    S.touched = true;
    S.yamlText = text;
    saveDraft();
    if (text === S.builderYaml) {
      S.mode = "builder";
      S.yamlParsed = null;
      setYamlStatus("sync");
    } else {
      S.mode = "yaml";
      parseYamlSoon();
    }
    recipeChanged();
  }

  function bindYaml() {
    const ta = $("yaml-text");
    ta.addEventListener("input", () => yamlEdited(ta.value));
    ta.addEventListener("keydown", (ev) => {
      // Tab inserts two spaces; Escape then Tab leaves the box (keyboard users are not trapped)
      if (ev.key === "Tab" && !ev.shiftKey && !ta.dataset.escaped) {
        ev.preventDefault();
        const s = ta.selectionStart;
        ta.setRangeText("  ", s, ta.selectionEnd, "end");
        yamlEdited(ta.value);
      }
      if (ev.key === "Escape") ta.dataset.escaped = "1";
      else if (ev.key !== "Tab") delete ta.dataset.escaped;
    });
    ta.addEventListener("blur", () => { delete ta.dataset.escaped; });
    $("yaml-file").addEventListener("change", async (ev) => {
      const f = ev.target.files && ev.target.files[0];
      if (!f) return;
      const text = await f.text();
      ta.value = text;
      ev.target.value = "";
      yamlEdited(text);
    });
    $("yaml-load").addEventListener("click", () => {
      builderChanged(); // the builder follows the text already: regenerate the text from it
      $("yaml-text").focus();
    });
    $("yaml-reset").hidden = true;
    $("builder-resume").addEventListener("click", () => { builderChanged(); $("op-search").focus(); });
    $("gallery").addEventListener("change", async (ev) => {
      const name = ev.target.value;
      if (!name) return;
      ev.target.value = "";
      try {
        const res = await api(`api/recipes/${enc(name)}`);
        ta.value = res.yaml || "";
        yamlEdited(ta.value);
        ta.focus();
        ta.setSelectionRange(0, 0);
        ta.scrollTop = 0;
      } catch (e) { showGlobalError(`Cannot load the example ${name}: ${errorText(e)}`); }
    });
    $("yaml-download").addEventListener("click", () => {
      const blob = new Blob([S.yamlText], { type: "application/x-yaml" });
      const url = URL.createObjectURL(blob);
      const a = h("a", { href: url, download: `${(S.settings.project_name || "recipe").replace(/[^\w.-]+/g, "_")}.yaml` });
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 1000);
    });
  }

  /* ------------------------------------------------------------------ rows (preview, try-it) */

  const PRIVATE = new Set(["__stats__", "__meta__", "__dj__stats__", "__dj__meta__"]);

  function textBlock(text, n) {
    const s = text === null || text === undefined ? "" : typeof text === "string" ? text : compact(text);
    if (s.trim() === "") return h("div", { class: "text-cell" }, h("span", { class: "empty", text: text === null || text === undefined ? "(no text)" : "(empty text)" }));
    const short = truncate(s.replace(/\s+/g, " ").trim(), n);
    const span = h("span", { class: "t", text: short });
    if (short.length >= s.length && !/\n/.test(s)) return h("div", { class: "text-cell" }, span);
    const btn = h("button", { type: "button", class: "link-btn", "aria-expanded": "false", text: `show all (${fmtInt(s.length)} chars)` });
    const box = h("div", { class: "text-cell" }, span, " ", btn);
    btn.addEventListener("click", () => {
      const open = btn.getAttribute("aria-expanded") !== "true";
      btn.setAttribute("aria-expanded", String(open));
      span.textContent = open ? s : short;
      span.classList.toggle("full", open);
      btn.textContent = open ? "show less" : `show all (${fmtInt(s.length)} chars)`;
    });
    return box;
  }

  function statChips(row) {
    const st = row.__stats__ || row.__dj__stats__;
    const meta = row.__meta__ || row.__dj__meta__;
    const chips = [];
    for (const obj of [st, meta]) {
      if (!obj || typeof obj !== "object") continue;
      for (const [k, v] of Object.entries(obj)) {
        if (v === null || v === undefined) continue;
        const val = typeof v === "number" ? (Number.isInteger(v) ? fmtInt(v) : fmtNum(v, 3)) : truncate(compact(v), 30);
        chips.push(h("span", { class: "stat-chip", title: k }, h("span", { class: "k", text: k }), " ", h("span", { class: "v", text: val })));
      }
    }
    return chips;
  }

  function fieldsBlock(row, tk) {
    const items = [];
    for (const [k, v] of Object.entries(row)) {
      if (k === tk || k === "id" || PRIVATE.has(k)) continue;
      items.push(h("div", { class: "kv" }, h("span", { class: "k", text: `${k}: ` }), h("span", { class: "v", text: truncate(compact(v), 70), title: truncate(compact(v), 600) })));
    }
    return items;
  }

  function rowsTable(rows, tk, opts) {
    const o = Object.assign({ chars: 240, extra: null, cls: "" }, opts || {});
    const t = h("table", { class: `rows ${o.cls}` });
    const hasFields = rows.some((r) => Object.keys(r).some((k) => k !== tk && k !== "id" && !PRIVATE.has(k)));
    t.appendChild(h("thead", null, h("tr", null,
      h("th", { scope: "col", class: "c-n", text: "#" }),
      o.extra ? h("th", { scope: "col", text: o.extra.title }) : null,
      h("th", { scope: "col", text: tk }),
      hasFields && !o.noFields ? h("th", { scope: "col", text: "other fields" }) : null)));
    const tb = h("tbody");
    rows.forEach((r, i) => {
      const chips = statChips(r);
      tb.appendChild(h("tr", null,
        h("td", { class: "c-n" }, String(i + 1), r.id !== undefined ? h("div", { class: "rid", title: String(r.id), text: truncate(String(r.id), 14) }) : null),
        o.extra ? h("td", { class: "c-extra" }, o.extra.cell(r, i)) : null,
        h("td", { class: "c-text" }, textBlock(r[tk], o.chars), chips.length ? h("div", { class: "chips" }, chips) : null),
        hasFields && !o.noFields ? h("td", { class: "c-fields" }, fieldsBlock(r, tk)) : null));
    });
    t.appendChild(tb);
    return t;
  }

  function previewBody() {
    const body = { path: S.settings.dataset_path.trim(), n: Math.max(1, Math.min(1000, Number($("preview-n").value) || 20)), text_key: textKey() };
    const src = S.mode === "yaml" && S.yamlParsed && S.yamlParsed.ok ? S.yamlParsed.ok : S.extra;
    if (src.input_format) body.format = src.input_format;
    if (src.reader_params && typeof src.reader_params === "object") body.reader_params = src.reader_params;
    if (S.mode === "yaml" && S.yamlParsed && S.yamlParsed.ok && typeof S.yamlParsed.ok.dataset_path === "string") body.path = S.yamlParsed.ok.dataset_path;
    return body;
  }

  async function doPreview() {
    const body = previewBody();
    const status = $("data-status");
    if (!body.path) {
      status.textContent = "Set a dataset path first.";
      $("s-dataset_path").focus();
      return;
    }
    status.textContent = "reading…";
    $("preview-btn").disabled = true;
    try {
      const res = await api("api/preview", { method: "POST", body });
      const rows = Array.isArray(res) ? res : res.rows || [];
      S.previewRows = rows;
      S.previewTextKey = body.text_key;
      const out = clear($("preview-out"));
      $("preview-count").textContent = `· first ${rows.length} of ${body.path}`;
      if (!rows.length) out.appendChild(h("p", { class: "empty", text: "The dataset has no rows." }));
      else out.appendChild(rowsTable(rows, body.text_key, { chars: 220 }));
      status.textContent = "";
      $("try-btn").disabled = false;
      S.tryDirty = true;
      if ($("try-live").checked && S.validation && S.validation.ok) doTry();
    } catch (e) {
      status.textContent = "";
      const out = clear($("preview-out"));
      out.appendChild(h("p", { class: "err", text: `Cannot preview ${body.path}: ${errorText(e)}` }));
    } finally {
      $("preview-btn").disabled = false;
    }
  }

  function sumReasons(r) {
    return r && typeof r === "object" ? Object.values(r).reduce((a, b) => a + (Number(b) || 0), 0) : 0;
  }

  function removedCount(o) {
    if (typeof o.removed === "number") return o.removed;
    if (Array.isArray(o.removed) && o.removed.length) return o.removed.length;
    if (o.removed && typeof o.removed === "object" && !Array.isArray(o.removed)) return sumReasons(o.removed);
    return sumReasons(o.reasons);
  }

  function rejectedCount(o) {
    if (typeof o.rejected === "number") return o.rejected;
    return Array.isArray(o.rejected) ? o.rejected.length : 0;
  }

  function reasonsOf(o) {
    if (o.reasons && typeof o.reasons === "object" && Object.keys(o.reasons).length) return o.reasons;
    if (o.removed && typeof o.removed === "object" && !Array.isArray(o.removed)) return o.removed;
    const r = {};
    if (Array.isArray(o.removed)) for (const x of o.removed) r[x.reason || "removed"] = (r[x.reason || "removed"] || 0) + 1;
    return r;
  }

  function reasonsText(o) {
    return Object.entries(reasonsOf(o)).map(([k, v]) => `${k}: ${fmtInt(v)}`).join(", ");
  }

  function reasonsCell(o) {
    const items = Object.entries(reasonsOf(o));
    const td = h("td", { class: "reasons" });
    items.forEach(([k, v], i) => {
      if (i) td.appendChild(document.createTextNode(", "));
      td.appendChild(h("span", { class: "reason-item", text: `${k}: ${fmtInt(v)}` }));
    });
    return td;
  }

  const ROW_LOCAL = new Set(["mapper", "filter"]);

  function opKind(name) {
    const o = S.ops.find((x) => x.name === name);
    return o ? o.kind : null;
  }

  // A chain with a global op (dedup…) runs as a small run on the server and returns counts and reasons but
  // not the removed rows: the row-local ops before the first global one are asked again on their own, which
  // gives the same rows (same input, same ops), now with what each removed.
  async function fillRemovedRows(res, proc, tk) {
    const ops = res.ops || [];
    const missing = ops.some((o) => Array.isArray(o.removed) && !o.removed.length && removedCount(o) > 0);
    if (!missing) return;
    let k = 0;
    while (k < proc.length && ROW_LOCAL.has(opKind(Object.keys(proc[k] || {})[0]))) k++;
    if (k === 0 || k >= proc.length) return;
    try {
      const pre = await api("api/apply", { method: "POST", body: { rows: S.previewRows, process: proc.slice(0, k), text_key: tk } });
      (pre.ops || []).forEach((o, i) => {
        const t = ops[i];
        if (!t || t.op !== o.op) return;
        if (Array.isArray(o.removed) && o.removed.length && (!Array.isArray(t.removed) || !t.removed.length)) t.removed = o.removed;
        if (Array.isArray(o.rejected) && o.rejected.length && (!Array.isArray(t.rejected) || !t.rejected.length)) t.rejected = o.rejected;
      });
    } catch (e) { /* the counts and reasons stay */ }
  }

  async function doTry() {
    const proc = currentProcess();
    const status = $("data-status");
    if (!S.previewRows) { status.textContent = "Preview the dataset first."; return; }
    if (proc === null) { status.textContent = "Try it needs a recipe the builder can read."; return; }
    S.tryDirty = false;
    const seq = ++S.trySeq;
    status.textContent = "running the ops…";
    $("try-btn").disabled = true;
    const t0 = performance.now();
    try {
      const tk = S.previewTextKey || textKey();
      const res = await api("api/apply", { method: "POST", body: { rows: S.previewRows, process: proc, text_key: tk } });
      if (seq !== S.trySeq) return;
      await fillRemovedRows(res, proc, tk);
      if (seq !== S.trySeq) return;
      renderTry(res, tk, (performance.now() - t0) / 1000);
      status.textContent = "";
    } catch (e) {
      if (seq !== S.trySeq) return;
      status.textContent = "";
      clear($("try-out")).appendChild(h("p", { class: "err", text: `Try it failed: ${errorText(e)}` }));
      $("try-count").textContent = "";
    } finally {
      if (seq === S.trySeq) $("try-btn").disabled = false;
    }
  }

  function renderTry(res, tk, secs) {
    const out = clear($("try-out"));
    const ops = res.ops || [];
    const rows = res.rows || [];
    const nIn = S.previewRows.length;
    $("try-count").textContent = `· ${nIn} rows in → ${rows.length} out (${secs.toFixed(1)} s)`;
    const t = h("table", { class: "ops-table try-ops" });
    t.appendChild(h("thead", null, h("tr", null, ["#", "op", "in", "out", "removed", "rejected", "reasons"].map((c, i) => h("th", { scope: "col", class: i >= 2 && i <= 5 ? "num" : null, text: c })))));
    const tb = h("tbody");
    ops.forEach((o, i) => {
      const rem = removedCount(o);
      const rej = rejectedCount(o);
      tb.appendChild(h("tr", { dataset: { op: o.op, position: String(o.position ?? i) } },
        h("td", { class: "num muted", text: String(o.position ?? i) }),
        h("td", null, h("code", { text: o.op })),
        h("td", { class: "num", dataset: { col: "rows_in", value: String(o.rows_in) }, text: fmtInt(o.rows_in) }),
        h("td", { class: "num", dataset: { col: "rows_out", value: String(o.rows_out) }, text: fmtInt(o.rows_out) }),
        h("td", { class: `num${rem ? " neg" : ""}`, dataset: { col: "removed", value: String(rem) }, text: fmtInt(rem) }),
        h("td", { class: `num${rej ? " neg" : ""}`, dataset: { col: "rejected", value: String(rej) }, text: fmtInt(rej) }),
        reasonsCell(o)));
    });
    t.appendChild(tb);
    out.appendChild(t);

    // removed and rejected rows, per op
    const gone = h("div", { class: "removed-box" });
    for (const o of ops) {
      const rem = Array.isArray(o.removed) ? o.removed : [];
      const rej = Array.isArray(o.rejected) ? o.rejected : [];
      const count = removedCount(o);
      if (!count && !rej.length) continue;
      const det = h("details", { class: "removed-op", open: true, dataset: { op: o.op } },
        h("summary", null, h("code", { text: o.op }), ` removed ${fmtInt(count)}${rej.length ? `, rejected ${fmtInt(rej.length)}` : ""}`));
      if (rem.length) {
        det.appendChild(rowsTable(rem.map((x) => x.row || {}), tk, {
          chars: 160, cls: "removed", noFields: true,
          extra: { title: "reason", cell: (r, i) => h("span", { class: "reason", text: rem[i].reason || "removed" }) },
        }));
      } else if (count) {
        det.appendChild(h("p", { class: "muted small", text: `${reasonsText(o)} — the rows themselves are not returned after a global op; the run's report shows them.` }));
      }
      if (rej.length) {
        det.appendChild(rowsTable(rej.map((x) => x.row || {}), tk, {
          chars: 160, cls: "removed", noFields: true,
          extra: { title: "error", cell: (r, i) => h("span", { class: "reason bad", text: `${rej[i].error_type || "error"}: ${rej[i].message || ""}` }) },
        }));
      }
      gone.appendChild(det);
    }
    if (gone.childNodes.length) {
      out.appendChild(h("h4", { text: "Removed and rejected rows" }));
      out.appendChild(gone);
    }
    out.appendChild(h("h4", null, "Output rows ", h("span", { class: "muted", text: `· ${rows.length}` })));
    if (rows.length) out.appendChild(rowsTable(rows, tk, { chars: 200, noFields: true }));
    else out.appendChild(h("p", { class: "empty", text: "No rows come out." }));
  }

  /* ------------------------------------------------------------------ jobs */

  async function submit(kind) {
    const status = $("run-status");
    status.textContent = "submitting…";
    $("run-btn").disabled = true;
    $("analyze-btn").disabled = true;
    try {
      let job;
      const name = $("job-name").value.trim();
      if (kind === "run") {
        const body = Object.assign(recipeBody(), name ? { name } : {});
        job = await api("api/jobs", { method: "POST", body });
      } else {
        let recipe = S.mode === "yaml" ? (S.yamlParsed && S.yamlParsed.ok) : builderRecipe();
        if (!recipe) throw new ApiError(0, "Analyze needs a recipe the builder can read");
        const body = Object.assign({ recipe }, name ? { name } : {});
        job = await api("api/analyze", { method: "POST", body });
      }
      status.textContent = "";
      watchJob(job.id, job);
      refreshJobs();
      $("job-view").scrollIntoView({ block: "start" });
    } catch (e) {
      status.textContent = "";
      status.appendChild(h("span", { class: "err", text: errorText(e) }));
      // a refused recipe (a path that does not exist…): its messages go to the fields they name
      const located = (e.details || []).filter((d) => d && typeof d === "object" && typeof d.message === "string");
      if (e.status === 400 && located.length) {
        S.validation = { ok: false, errors: located.map((d) => ({ path: d.path || "", message: d.message })), warnings: [] };
        placeErrors(S.validation);
        setValidationBanner("bad", S.validation);
      }
    } finally {
      updateRunButtons();
    }
  }

  function watchJob(id, initial) {
    const gen = ++S.jobGen;
    clearTimeout(S.jobTimer);
    S.jobId = id;
    S.logNext = 0;
    S.logLines = [];
    S.lastJobState = null;
    if (S.reportBlobUrl) { URL.revokeObjectURL(S.reportBlobUrl); S.reportBlobUrl = null; }
    $("job-view").hidden = false;
    $("job-log").textContent = "";
    clear($("job-ops")).appendChild(h("p", { class: "empty", text: "The per-op table appears when the job is done." }));
    clear($("job-outputs")).appendChild(h("li", { class: "empty", text: "—" }));
    $("job-report").hidden = true;
    $("report-frame-wrap").hidden = true;
    $("report-frame").removeAttribute("src");
    $("report-frame").removeAttribute("srcdoc");
    $("report-toggle").setAttribute("aria-expanded", "false");
    $("report-toggle").textContent = "Show the report here";
    try { history.replaceState(null, "", `#job=${enc(id)}`); } catch (e) { /* file:// */ }
    if (initial) renderJob(initial);
    markOpenJob();
    const tick = async () => {
      if (gen !== S.jobGen) return;
      let job = null;
      try {
        job = await api(`api/jobs/${enc(id)}`);
        if (gen !== S.jobGen) return;
        renderJob(job);
        await pollLogs(id, gen);
      } catch (e) {
        if (gen !== S.jobGen) return;
        $("job-times").textContent = `cannot poll: ${errorText(e)}`;
        if (e.status === 404) return;
      }
      if (gen !== S.jobGen) return;
      if (job && TERMINAL.has(job.state)) {
        await finished(job, gen);
        return;
      }
      S.jobTimer = setTimeout(tick, POLL_MS);
    };
    tick();
  }

  async function pollLogs(id, gen) {
    for (let guard = 0; guard < 20; guard++) {
      const res = await api(`api/jobs/${enc(id)}/logs?since=${S.logNext}`);
      if (gen !== S.jobGen) return;
      const lines = (res && res.lines) || [];
      if (typeof res.next === "number") S.logNext = res.next;
      else S.logNext += lines.length;
      if (lines.length) {
        const pre = $("job-log");
        const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
        S.logLines.push(...lines.map((l) => (typeof l === "string" ? l : compact(l))));
        if (S.logLines.length > LOG_LINES_KEPT) S.logLines.splice(0, S.logLines.length - LOG_LINES_KEPT);
        pre.textContent = S.logLines.join("\n");
        if (atBottom) pre.scrollTop = pre.scrollHeight;
      }
      if (lines.length < 500) return;
    }
  }

  function stateBadge(state) {
    return h("span", { class: `state state-${state || "unknown"}`, text: state || "?" });
  }

  function renderJob(job) {
    const title = $("job-title");
    clear(title);
    append(title, [job.kind && job.kind !== "run" ? h("span", { class: "chip", text: job.kind }) : null, " ",
      job.name || "job", " ", h("code", { class: "muted small", text: job.id })]);
    const st = $("job-state");
    st.className = `state state-${job.state}`;
    st.textContent = job.state;
    const created = toDate(job.created);
    const started = toDate(job.started);
    const fin = toDate(job.finished);
    const parts = [];
    if (created) parts.push(`submitted ${fmtTime(job.created)}`);
    if (started) parts.push(`started ${fmtTime(job.started)}`);
    if (started) parts.push(`${fin ? "took" : "running for"} ${fmtDuration(((fin || new Date()) - started) / 1000)}`);
    $("job-times").textContent = parts.join(" · ");
    $("job-cancel").disabled = !(job.state === "queued" || job.state === "running");
    $("job-resume").disabled = !RESUMABLE.has(job.state);
    const err = $("job-error");
    err.hidden = !job.error;
    err.textContent = job.error ? `Error: ${compact(job.error)}` : "";
    renderProgress(job);
    if (Array.isArray(job.ops) && job.ops.length) renderJobOps(job.ops);
    if (S.lastJobState !== job.state) {
      if (S.lastJobState !== null) refreshJobs();
      S.lastJobState = job.state;
    }
  }

  function renderProgress(job) {
    const p = job.progress || {};
    const total = Number(p.shards_total) || 0;
    const done = Number(p.shards_done) || 0;
    let pct = total ? Math.min(100, (100 * done) / total) : 0;
    if (job.state === "done") pct = 100;
    const fill = $("prog-fill");
    fill.style.width = `${pct.toFixed(1)}%`;
    fill.className = `progress-fill state-${job.state}`;
    const bar = $("prog-bar");
    bar.setAttribute("aria-valuenow", pct.toFixed(0));
    bar.setAttribute("aria-valuetext", total ? `${done} of ${total} shards` : job.state);
    $("prog-stage").textContent = p.stage ? String(p.stage) : job.state === "queued" ? "queued" : job.state === "running" ? "starting…" : job.state;
    $("prog-shards").textContent = total ? ` · ${fmtInt(done)} / ${fmtInt(total)} shards` : "";
    const dl = clear($("prog-stats"));
    const stat = (k, v) => { dl.appendChild(h("div", null, h("dt", { text: k }), h("dd", { text: v }))); };
    if (p.rows !== undefined && p.rows !== null) stat("rows", fmtInt(p.rows));
    if (p.bytes !== undefined && p.bytes !== null) stat("read", fmtBytes(p.bytes));
    if (p.rows_per_s !== undefined && p.rows_per_s !== null) stat("rows/s", fmtInt(Math.round(p.rows_per_s)));
    if (p.mb_per_s !== undefined && p.mb_per_s !== null) stat("MB/s", fmtNum(p.mb_per_s, 1));
  }

  function renderJobOps(ops, rep) {
    const t = h("table", { class: "ops-table job-ops" });
    t.appendChild(h("thead", null, h("tr", null, ["#", "op", "rows in", "rows out", "removed", "rejected", "seconds", "removed by reason"].map((c, i) => h("th", { scope: "col", class: i >= 2 && i <= 6 ? "num" : null, text: c })))));
    const tb = h("tbody");
    for (const o of ops) {
      const rem = removedCount(o);
      const rej = rejectedCount(o);
      const pos = o.position === null || o.position === undefined ? "" : String(o.position);
      tb.appendChild(h("tr", { dataset: { op: o.op, position: pos } },
        h("td", { class: "num muted", text: pos }),
        h("td", null, h("code", { text: o.op })),
        h("td", { class: "num", dataset: { col: "rows_in", value: String(o.rows_in) }, text: fmtInt(o.rows_in) }),
        h("td", { class: "num", dataset: { col: "rows_out", value: String(o.rows_out) }, text: fmtInt(o.rows_out) }),
        h("td", { class: `num${rem ? " neg" : ""}`, dataset: { col: "removed", value: String(rem) }, text: fmtInt(rem) }),
        h("td", { class: `num${rej ? " neg" : ""}`, dataset: { col: "rejected", value: String(rej) }, text: fmtInt(rej) }),
        h("td", { class: "num", text: typeof o.seconds === "number" ? fmtNum(o.seconds, 2) : "—" }),
        reasonsCell(o)));
    }
    t.appendChild(tb);
    const box = clear($("job-ops"));
    box.appendChild(t);
    if (rep) {
      const bits = [];
      if (typeof rep.rows_read === "number") bits.push(`${fmtInt(rep.rows_read)} rows read`);
      if (typeof rep.rows_out === "number") bits.push(`${fmtInt(rep.rows_out)} rows out`);
      if (typeof rep.rejects === "number") bits.push(`${fmtInt(rep.rejects)} rejected`);
      if (typeof rep.seconds === "number") bits.push(`${fmtNum(rep.seconds, 1)} s`);
      if (bits.length) box.appendChild(h("p", { class: "muted small summary-line", text: bits.join(" · ") }));
    }
  }

  async function finished(job, gen) {
    try { await pollLogs(job.id, gen); } catch (e) { /* the log is best effort */ }
    if (gen !== S.jobGen) return;
    refreshJobs();
    if (job.state !== "done") return;
    const base = `api/jobs/${enc(job.id)}`;
    $("job-report").hidden = false;
    const link = $("report-link");
    link.href = `${base}/report.html`;
    $("report-json-link").href = `${base}/report`;
    if (job.kind !== "analyze") {
      try {
        const rep = await api(`${base}/report`);
        if (gen !== S.jobGen) return;
        if (rep && Array.isArray(rep.ops) && rep.ops.length) renderJobOps(rep.ops, rep);
      } catch (e) { /* the job's own counts stay */ }
    }
    try {
      const res = await api(`${base}/outputs`);
      if (gen !== S.jobGen) return;
      renderOutputs(res);
    } catch (e) {
      clear($("job-outputs")).appendChild(h("li", { class: "err", text: errorText(e) }));
    }
  }

  function renderOutputs(res) {
    const ul = clear($("job-outputs"));
    let list = Array.isArray(res) ? res : res && (res.outputs || res.files || res.exported_files) || [];
    if (!Array.isArray(list) && typeof list === "object") list = Object.entries(list).map(([k, v]) => ({ name: k, path: v }));
    if (!list.length) { ul.appendChild(h("li", { class: "empty", text: "No output files." })); return; }
    for (const f of list) {
      if (typeof f === "string") { ul.appendChild(h("li", null, h("code", { text: f }))); continue; }
      const path = f.path || f.name || f.file || compact(f);
      const size = f.bytes ?? f.size;
      const bits = [];
      if (f.kind || f.role) bits.push(f.kind || f.role);
      if (typeof size === "number") bits.push(fmtBytes(size));
      if (typeof f.rows === "number") bits.push(`${fmtInt(f.rows)} rows`);
      const label = h("code", { text: f.name || path, title: f.path || path });
      let item = label;
      if (f.url) {
        const url = String(f.url).replace(/^\//, "");
        item = h("a", { href: url, download: (f.name || "output").split("/").pop() }, label);
        item.addEventListener("click", (ev) => { if (S.token) { ev.preventDefault(); downloadWithToken(url, item.getAttribute("download")); } });
      }
      ul.appendChild(h("li", null, item, bits.length ? h("span", { class: "muted small", text: ` · ${bits.join(" · ")}` }) : null));
    }
  }

  async function downloadWithToken(url, name) {
    try {
      const r = await fetch(url, { headers: authHeaders() });
      if (!r.ok) throw new ApiError(r.status, `${r.status} ${r.statusText}`);
      const blobUrl = URL.createObjectURL(await r.blob());
      const a = h("a", { href: blobUrl, download: name });
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(blobUrl), 5000);
    } catch (e) { showGlobalError(`Download failed: ${errorText(e)}`); }
  }

  // the report fetched with the token, as a page without its script: a page made here (srcdoc, blob) runs
  // under this page's Content-Security-Policy, which allows no inline script (the report reads fine without)
  async function reportHtml() {
    const r = await fetch($("report-link").getAttribute("href"), { headers: authHeaders() });
    if (!r.ok) throw new ApiError(r.status, `report: ${r.status} ${r.statusText}`);
    const doc = new DOMParser().parseFromString(await r.text(), "text/html");
    doc.querySelectorAll("script").forEach((x) => x.remove());
    return `<!DOCTYPE html>\n${doc.documentElement.outerHTML}`;
  }

  async function reportUrl() {
    const href = $("report-link").getAttribute("href");
    if (!S.token) return href;
    if (S.reportBlobUrl) return S.reportBlobUrl;
    S.reportBlobUrl = URL.createObjectURL(new Blob([await reportHtml()], { type: "text/html" }));
    return S.reportBlobUrl;
  }

  function bindJobs() {
    $("run-btn").addEventListener("click", () => submit("run"));
    $("analyze-btn").addEventListener("click", () => submit("analyze"));
    $("job-cancel").addEventListener("click", async () => {
      const id = S.jobId;
      $("job-cancel").disabled = true;
      try {
        const job = await api(`api/jobs/${enc(id)}/cancel`, { method: "POST" });
        if (job && job.state && S.jobId === id) renderJob(job);
      } catch (e) { showGlobalError(`Cancel failed: ${errorText(e)}`); }
    });
    $("job-resume").addEventListener("click", async () => {
      const id = S.jobId;
      $("job-resume").disabled = true;
      try {
        const job = await api(`api/jobs/${enc(id)}/resume`, { method: "POST" });
        watchJob((job && job.id) || id, job && job.state ? job : null);
        refreshJobs();
      } catch (e) { showGlobalError(`Resume failed: ${errorText(e)}`); }
    });
    $("report-link").addEventListener("click", async (ev) => {
      if (!S.token) return; // a plain link works without a token
      ev.preventDefault();
      try { window.open(await reportUrl(), "_blank", "noopener"); } catch (e) { showGlobalError(errorText(e)); }
    });
    $("report-toggle").addEventListener("click", async () => {
      const wrap = $("report-frame-wrap");
      const btn = $("report-toggle");
      const open = wrap.hidden;
      if (open) {
        try {
          const frame = $("report-frame");
          if (S.token) {
            frame.removeAttribute("src");
            frame.srcdoc = await reportHtml();
          } else {
            const url = $("report-link").getAttribute("href");
            frame.removeAttribute("srcdoc");
            if (frame.getAttribute("src") !== url) frame.src = url;
          }
        } catch (e) { showGlobalError(errorText(e)); return; }
      }
      wrap.hidden = !open;
      btn.setAttribute("aria-expanded", String(open));
      btn.textContent = open ? "Hide the report" : "Show the report here";
    });
    $("jobs-refresh").addEventListener("click", refreshJobs);
  }

  let jobsSeq = 0;

  async function refreshJobs() {
    const seq = ++jobsSeq;
    let jobs;
    try {
      const res = await api("api/jobs");
      jobs = Array.isArray(res) ? res : res.jobs || [];
    } catch (e) {
      if (seq === jobsSeq) clear($("jobs-out")).appendChild(h("p", { class: "err", text: `Cannot list the jobs: ${errorText(e)}` }));
      return;
    }
    if (seq !== jobsSeq) return;
    const out = clear($("jobs-out"));
    if (!jobs.length) { out.appendChild(h("p", { class: "empty", text: "No jobs yet." })); return; }
    jobs = jobs.slice().sort((a, b) => ((toDate(b.created) || 0) - (toDate(a.created) || 0)));
    const t = h("table", { class: "jobs-table" });
    t.appendChild(h("thead", null, h("tr", null, ["state", "name", "kind", "id", "submitted", "took", ""].map((c) => h("th", { scope: "col", text: c })))));
    const tb = h("tbody");
    for (const j of jobs) {
      const st = toDate(j.started);
      const fin = toDate(j.finished);
      const took = st ? fmtDuration(((fin || new Date()) - st) / 1000) : "";
      tb.appendChild(h("tr", { dataset: { job: j.id }, class: j.id === S.jobId ? "current" : null },
        h("td", null, stateBadge(j.state)),
        h("td", { text: j.name || "—" }),
        h("td", { text: j.kind || "run" }),
        h("td", null, h("code", { class: "small", text: j.id })),
        h("td", { text: fmtTime(j.created) }),
        h("td", { text: took }),
        h("td", null, h("button", { type: "button", class: "btn small", text: "Open", "aria-label": `Open job ${j.name || j.id}`,
          onclick: () => { watchJob(j.id, j); $("run").scrollIntoView({ block: "start" }); } }))));
    }
    t.appendChild(tb);
    out.appendChild(t);
  }

  function markOpenJob() {
    document.querySelectorAll(".jobs-table tr[data-job]").forEach((tr) => tr.classList.toggle("current", tr.dataset.job === S.jobId));
  }

  /* ------------------------------------------------------------------ start */

  async function checkHealth() {
    try {
      const res = await api("api/health");
      const v = res && (res.version || res.gristmill);
      setHealth(`connected${v ? ` · gristmill ${v}` : ""}`, "ok");
      $("token").classList.remove("attention");
      return true;
    } catch (e) {
      if (e.status !== 401) setHealth(`server error: ${e.message}`, "bad");
      return false;
    }
  }

  // the recipe this tab had before a reload: back in the builder when it is the builder's own YAML,
  // else as the text it was
  async function restoreDraft(draft) {
    let obj = null;
    try { obj = Y.parse(draft); } catch (e) { obj = null; }
    if (obj && !simpleEnough(obj) && await loadIntoBuilder(obj) && Y.dump(builderRecipe()) === draft) {
      builderChanged();
      return;
    }
    $("yaml-text").value = draft;
    yamlEdited(draft);
  }

  async function loadGallery() {
    const sel = $("gallery");
    try {
      const res = await api("api/recipes");
      const list = (res && res.recipes) || [];
      while (sel.options.length > 1) sel.remove(1);
      for (const r of list) sel.appendChild(h("option", { value: r.name, text: r.name, title: r.summary || "" }));
      sel.hidden = !list.length;
    } catch (e) {
      sel.hidden = true;
    }
  }

  async function start() {
    await checkHealth();
    await loadCatalogue();
    refreshJobs();
    loadGallery();
  }

  function init() {
    try { S.token = sessionStorage.getItem(TOKEN_KEY) || ""; } catch (e) { S.token = ""; }
    $("token").value = S.token;
    $("token-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      S.token = $("token").value.trim();
      try {
        if (S.token) sessionStorage.setItem(TOKEN_KEY, S.token);
        else sessionStorage.removeItem(TOKEN_KEY);
      } catch (e) { /* private mode */ }
      S.details.clear();
      start();
      if (S.touched) scheduleValidate();
    });
    $("op-search").addEventListener("input", renderCatalogue);
    $("op-kind").addEventListener("change", renderCatalogue);
    $("op-search").addEventListener("keydown", (ev) => {
      if (ev.key === "Enter") {
        const first = document.querySelector("#cat-list .cat-op");
        if (first) { ev.preventDefault(); first.click(); }
      }
    });
    $("clear-chain").addEventListener("click", () => { S.chain = []; renderChain(); builderChanged(); $("op-search").focus(); });
    $("preview-btn").addEventListener("click", doPreview);
    $("try-btn").addEventListener("click", doTry);
    bindSettings();
    bindYaml();
    bindJobs();
    updateRunButtons();
    // the builder's YAML, or the draft of this tab
    const y = Y.dump(builderRecipe());
    S.builderYaml = y;
    S.yamlText = y;
    $("yaml-text").value = y;
    renderChain();
    start().then(() => {
      let draft = null;
      try { draft = sessionStorage.getItem(DRAFT_KEY); } catch (e) { /* private mode */ }
      if (draft && draft !== y) restoreDraft(draft);
      const m = /^#job=(.+)$/.exec(location.hash);
      if (m) watchJob(decodeURIComponent(m[1]));
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
