/* gristmill web UI: a tiny YAML emitter and a YAML-subset reader for recipes.
 *
 * dump(value) writes a recipe the way people write them: block mappings and sequences, ops as
 * `- op_name: {…}` / nested param blocks, scalars quoted only when a YAML 1.1 reader (PyYAML, which
 * the server uses) would read them as something else. Nested lists and mappings inside params are
 * written in flow style (JSON-compatible), which every YAML reader accepts.
 *
 * parse(text) reads the subset that recipes use: block mappings and sequences, flow collections on
 * one line, plain / single- / double-quoted scalars, literal and folded block scalars, comments.
 * Anchors, aliases, tags, multi-document streams and multi-line flow collections throw a
 * YAMLSubsetError: the caller keeps such a recipe as text and lets the server read it.
 */
(function (root) {
  "use strict";

  class YAMLSubsetError extends Error {
    constructor(message, line) {
      super(line ? `line ${line}: ${message}` : message);
      this.name = "YAMLSubsetError";
      this.line = line || 0;
    }
  }

  /* ---------- scalars (YAML 1.1 core resolution, as PyYAML's safe_load) ---------- */

  const NULL_RE = /^(?:~|null|Null|NULL|)$/;
  const TRUE_RE = /^(?:y|Y|yes|Yes|YES|true|True|TRUE|on|On|ON)$/;
  const FALSE_RE = /^(?:n|N|no|No|NO|false|False|FALSE|off|Off|OFF)$/;
  const INT_RE = /^[-+]?(?:0|[1-9][0-9_]*)$/;
  const FLOAT_RE = /^[-+]?(?:[0-9][0-9_]*)?\.[0-9_]*(?:[eE][-+][0-9]+)?$/;
  const SPECIAL_FLOAT_RE = /^(?:[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$/;
  // anything a reader could resolve to a non-string, or that is not a safe plain scalar
  const LOOKS_TYPED_RE = /^(?:[-+]?[0-9][0-9_:.eExXoObB+-]*|[-+]?\.[0-9].*|[-+]?\.(?:inf|Inf|INF|nan|NaN|NAN)|<<|=)$/;

  function resolvePlain(s) {
    if (NULL_RE.test(s)) return null;
    // PyYAML reads y/n as strings (only the long forms are booleans)
    if (s !== "y" && s !== "Y" && s !== "n" && s !== "N") {
      if (TRUE_RE.test(s)) return true;
      if (FALSE_RE.test(s)) return false;
    }
    if (/^[-+]?0[0-9xXoObB_]|^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$/.test(s)) {
      throw new YAMLSubsetError(`${s}: octal, hexadecimal and base-60 numbers cannot be edited in the builder`);
    }
    if (INT_RE.test(s)) {
      const n = Number(s.replace(/_/g, ""));
      if (!Number.isSafeInteger(n)) throw new YAMLSubsetError(`integer ${s} is too large for the builder`);
      return n;
    }
    if (FLOAT_RE.test(s) && /[0-9]/.test(s)) return Number(s.replace(/_/g, ""));
    if (SPECIAL_FLOAT_RE.test(s)) {
      throw new YAMLSubsetError(`${s} cannot be edited in the builder`);
    }
    return s;
  }

  function needsQuotes(s) {
    if (s === "") return true;
    if (NULL_RE.test(s) || TRUE_RE.test(s) || FALSE_RE.test(s)) return true;
    if (INT_RE.test(s) || FLOAT_RE.test(s) || LOOKS_TYPED_RE.test(s)) return true;
    if (/^[\s]|[\s]$/.test(s)) return true;
    if (/^[-?:,\[\]{}#&*!|>'"%@`]/.test(s)) return true;
    if (/: |:$| #|[\n\r\t\x00-\x1f\x7f\u0085\u2028\u2029\ufeff]/.test(s)) return true;
    return /[^\x20-\x7e\u00a0-\ud7ff\ue000-\ufffd]/.test(s);
  }

  function quote(s) {
    // a JSON string is a valid YAML double-quoted scalar; YAML 1.1 line breaks and non-printables escaped
    return JSON.stringify(s).replace(/[\u007f-\u009f\u2028\u2029\ufeff\ufffe\uffff]|\p{Cs}/gu,
      (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  }

  function scalar(v) {
    if (v === null || v === undefined) return "null";
    if (typeof v === "boolean") return v ? "true" : "false";
    if (typeof v === "number") {
      if (!Number.isFinite(v)) return Number.isNaN(v) ? ".nan" : (v > 0 ? ".inf" : "-.inf");
      if (Number.isInteger(v) && Math.abs(v) < 1e21) return String(v);
      let t = String(v);
      // YAML 1.1 floats need a dot and a signed exponent (1e-07 → 1.0e-07)
      const m = /^(-?)(\d+)(?:\.(\d+))?e([-+])(\d+)$/.exec(t);
      if (m) t = `${m[1]}${m[2]}.${m[3] || "0"}e${m[4]}${m[5]}`;
      return t;
    }
    const s = String(v);
    return needsQuotes(s) ? quote(s) : s;
  }

  function key(k) {
    return needsQuotes(k) ? quote(k) : k;
  }

  function flow(v) {
    if (Array.isArray(v)) return "[" + v.map(flow).join(", ") + "]";
    if (v && typeof v === "object") {
      return "{" + Object.keys(v).map((k) => `${key(k)}: ${flow(v[k])}`).join(", ") + "}";
    }
    return scalar(v);
  }

  function isPlainObject(v) {
    return v !== null && typeof v === "object" && !Array.isArray(v);
  }

  /* ---------- emitter ---------- */

  // a mapping's entries as block lines at `indent`; nested containers are flow unless `deep`
  function emitMapping(obj, indent, out, deep) {
    const pad = " ".repeat(indent);
    for (const k of Object.keys(obj)) {
      const v = obj[k];
      if (deep && isPlainObject(v) && Object.keys(v).length) {
        out.push(`${pad}${key(k)}:`);
        emitMapping(v, indent + 2, out, false);
      } else if (deep && Array.isArray(v) && v.length && v.every((x) => !isPlainObject(x) && !Array.isArray(x))) {
        out.push(`${pad}${key(k)}:`);
        for (const x of v) out.push(`${pad}  - ${scalar(x)}`);
      } else {
        out.push(`${pad}${key(k)}: ${flow(v)}`);
      }
    }
  }

  function emitProcess(process, out) {
    for (const step of process) {
      if (!isPlainObject(step) || Object.keys(step).length !== 1) {
        out.push(`  - ${flow(step)}`);
        continue;
      }
      const name = Object.keys(step)[0];
      const params = step[name];
      if (!isPlainObject(params) || !Object.keys(params).length) {
        out.push(`  - ${key(name)}: ${params === null || params === undefined ? "{}" : flow(params)}`);
        continue;
      }
      out.push(`  - ${key(name)}:`);
      emitMapping(params, 6, out, false);
    }
  }

  /** A recipe (or any mapping) as block YAML, keys in their insertion order. */
  function dump(recipe) {
    const out = [];
    for (const k of Object.keys(recipe)) {
      const v = recipe[k];
      if (k === "process" && Array.isArray(v)) {
        if (!v.length) { out.push("process: []"); continue; }
        out.push("process:");
        emitProcess(v, out);
      } else if (isPlainObject(v) && Object.keys(v).length) {
        out.push(`${key(k)}:`);
        emitMapping(v, 2, out, true);
      } else {
        out.push(`${key(k)}: ${flow(v)}`);
      }
    }
    return out.join("\n") + "\n";
  }

  /* ---------- reader ---------- */

  function stripComment(text) {
    // remove a ` #…` comment that is outside quotes
    let q = null;
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      if (q) {
        if (q === '"' && c === "\\") { i++; continue; }
        if (c === q) {
          if (q === "'" && text[i + 1] === "'") { i++; continue; }
          q = null;
        }
        continue;
      }
      if ((c === '"' || c === "'") && (i === 0 || /[\s\[{,:]/.test(text[i - 1]) || /^\s*-?\s*$/.test(text.slice(0, i)))) {
        q = c;
        continue;
      }
      if (c === "#" && (i === 0 || /\s/.test(text[i - 1]))) return text.slice(0, i).replace(/\s+$/, "");
    }
    return text.replace(/\s+$/, "");
  }

  function parseDoubleQuoted(s, pos, line) {
    // s[pos] === '"'; returns [string, next position]
    let i = pos + 1;
    let out = "";
    const esc = { "0": "\0", a: "\x07", b: "\b", t: "\t", "\t": "\t", n: "\n", v: "\v", f: "\f", r: "\r",
      e: "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", N: "\u0085", _: "\u00a0", L: "\u2028", P: "\u2029" };
    while (i < s.length) {
      const c = s[i];
      if (c === '"') return [out, i + 1];
      if (c === "\\") {
        const d = s[i + 1];
        if (d in esc) { out += esc[d]; i += 2; continue; }
        const len = d === "x" ? 2 : d === "u" ? 4 : d === "U" ? 8 : 0;
        if (!len) throw new YAMLSubsetError(`unknown escape \\${d}`, line);
        const hex = s.slice(i + 2, i + 2 + len);
        if (!/^[0-9a-fA-F]+$/.test(hex) || hex.length !== len) throw new YAMLSubsetError("bad escape", line);
        out += String.fromCodePoint(parseInt(hex, 16));
        i += 2 + len;
        continue;
      }
      out += c;
      i++;
    }
    throw new YAMLSubsetError("unterminated double-quoted string (multi-line strings are not supported)", line);
  }

  function parseSingleQuoted(s, pos, line) {
    let i = pos + 1;
    let out = "";
    while (i < s.length) {
      if (s[i] === "'") {
        if (s[i + 1] === "'") { out += "'"; i += 2; continue; }
        return [out, i + 1];
      }
      out += s[i++];
    }
    throw new YAMLSubsetError("unterminated single-quoted string (multi-line strings are not supported)", line);
  }

  function checkPlain(s, line) {
    if (/^[&*!]/.test(s)) throw new YAMLSubsetError("anchors, aliases and tags are not supported", line);
    if (/^[|>]/.test(s)) throw new YAMLSubsetError("block scalar in an unsupported place", line);
    if (/^[%@`]/.test(s)) throw new YAMLSubsetError(`a plain value cannot start with ${s[0]}`, line);
  }

  // flow collections and scalars within one line
  function parseFlow(s, pos, line) {
    const ws = () => { while (pos < s.length && /\s/.test(s[pos])) pos++; };
    function value(inFlow) {
      ws();
      const c = s[pos];
      if (c === "{") {
        pos++;
        const obj = {};
        ws();
        if (s[pos] === "}") { pos++; return obj; }
        for (;;) {
          ws();
          const k = value(true);
          ws();
          let v = null;
          if (s[pos] === ":") { pos++; v = value(true); ws(); }
          if (typeof k !== "string" && typeof k !== "number" && typeof k !== "boolean" && k !== null) {
            throw new YAMLSubsetError("complex mapping keys are not supported", line);
          }
          obj[String(k)] = v;
          if (s[pos] === ",") { pos++; ws(); if (s[pos] === "}") { pos++; return obj; } continue; }
          if (s[pos] === "}") { pos++; return obj; }
          throw new YAMLSubsetError("expected , or } in a flow mapping", line);
        }
      }
      if (c === "[") {
        pos++;
        const arr = [];
        ws();
        if (s[pos] === "]") { pos++; return arr; }
        for (;;) {
          const v = value(true);
          ws();
          if (s[pos] === ":") throw new YAMLSubsetError("single-pair mappings in flow sequences are not supported", line);
          arr.push(v);
          if (s[pos] === ",") { pos++; ws(); if (s[pos] === "]") { pos++; return arr; } continue; }
          if (s[pos] === "]") { pos++; return arr; }
          throw new YAMLSubsetError("expected , or ] in a flow sequence (multi-line flow is not supported)", line);
        }
      }
      if (c === '"') { const [v, p] = parseDoubleQuoted(s, pos, line); pos = p; return v; }
      if (c === "'") { const [v, p] = parseSingleQuoted(s, pos, line); pos = p; return v; }
      // plain scalar: up to `,` `]` `}` (in flow), `: ` / ` #` / end
      let start = pos;
      while (pos < s.length) {
        const d = s[pos];
        if (inFlow && (d === "," || d === "]" || d === "}" || d === "[" || d === "{")) break;
        if (d === ":") {
          const nx = s[pos + 1];
          if (nx === undefined || /\s/.test(nx) || (inFlow && /[,\]}]/.test(nx))) break;
        }
        pos++;
      }
      const raw = s.slice(start, pos).trim();
      checkPlain(raw, line);
      return resolvePlain(raw);
    }
    const v = value(false);
    return [v, pos];
  }

  function inlineValue(text, line) {
    const t = text.trim();
    if (t === "") return null;
    const [v, pos] = parseFlow(t, 0, line);
    if (t.slice(pos).trim() !== "") throw new YAMLSubsetError(`unexpected text after a value: ${t.slice(pos).trim()}`, line);
    return v;
  }

  // split `key: value` outside quotes and flow; returns null when the line is not a mapping entry
  function splitKey(text, line) {
    let i = 0;
    let k;
    if (text[0] === '"' || text[0] === "'") {
      const [v, p] = text[0] === '"' ? parseDoubleQuoted(text, 0, line) : parseSingleQuoted(text, 0, line);
      k = v;
      i = p;
      while (text[i] === " ") i++;
      if (text[i] !== ":") return null;
      if (i + 1 < text.length && text[i + 1] !== " ") return null;
      return [k, text.slice(i + 1)];
    }
    if (text[0] === "{" || text[0] === "[") return null;
    for (; i < text.length; i++) {
      if (text[i] === ":" && (i + 1 === text.length || text[i + 1] === " ")) {
        k = text.slice(0, i).trim();
        if (k === "?" || k.startsWith("? ")) throw new YAMLSubsetError("complex keys are not supported", line);
        checkPlain(k, line);
        return [k, text.slice(i + 1)];
      }
    }
    return null;
  }

  /** Parse the recipe subset of YAML; throws YAMLSubsetError for anything beyond it. */
  function parse(text) {
    const raw = String(text).replace(/\r\n?/g, "\n").split("\n");
    const lines = [];
    for (let n = 0; n < raw.length; n++) {
      const r = raw[n];
      if (/\t/.test(r.match(/^\s*/)[0])) throw new YAMLSubsetError("tabs in indentation", n + 1);
      if (/^(---|\.\.\.)(\s|$)/.test(r)) {
        if (lines.length) throw new YAMLSubsetError("several YAML documents", n + 1);
        if (r.slice(3).trim() && !r.slice(3).trim().startsWith("#")) throw new YAMLSubsetError("content after ---", n + 1);
        continue;
      }
      if (/^%/.test(r)) throw new YAMLSubsetError("directives are not supported", n + 1);
      const body = stripComment(r);
      if (body.trim() === "") { lines.push({ blank: true, raw: r, n: n + 1 }); continue; }
      const indent = body.match(/^ */)[0].length;
      lines.push({ indent, text: body.slice(indent), raw: r, n: n + 1 });
    }
    let i = 0;
    const skip = () => { while (i < lines.length && lines[i].blank) i++; };

    function blockScalar(header, parentIndent, lineNo) {
      const m = /^([|>])([-+]?)(\d?)([-+]?)$/.exec(header);
      if (!m) throw new YAMLSubsetError(`unsupported block scalar header ${header}`, lineNo);
      const style = m[1];
      const chomp = m[2] || m[4];
      const body = [];
      let ind = m[3] ? parentIndent + Number(m[3]) : -1;
      while (i < lines.length) {
        const L = lines[i];
        const rawLine = L.raw;
        const lead = rawLine.match(/^ */)[0].length;
        if (rawLine.trim() === "") { body.push(""); i++; continue; }
        if (ind < 0) {
          if (lead <= parentIndent) break;
          ind = lead;
        }
        if (lead < ind) break;
        body.push(rawLine.slice(ind));
        i++;
      }
      // trailing blank lines belong to chomping
      let trailing = 0;
      while (body.length && body[body.length - 1] === "") { body.pop(); trailing++; }
      let s;
      if (style === "|") {
        s = body.join("\n");
      } else {
        s = "";
        for (let j = 0; j < body.length; j++) {
          const cur = body[j];
          if (j === 0) { s = cur; continue; }
          const prev = body[j - 1];
          if (cur === "") s += "\n";
          else if (prev === "") s += cur;
          else if (/^\s/.test(cur) || /^\s/.test(prev)) s += "\n" + cur;
          else s += " " + cur;
        }
      }
      if (!body.length) return chomp === "+" ? "\n".repeat(trailing) : "";
      if (chomp === "-") return s;
      if (chomp === "+") return s + "\n" + "\n".repeat(trailing);
      return s + "\n";
    }

    function valueAfterKey(rest, indent, lineNo) {
      const r = rest.trim();
      if (/^[|>]/.test(r)) return blockScalar(r, indent, lineNo);
      if (r !== "") {
        checkPlain(r[0] === "{" || r[0] === "[" || r[0] === '"' || r[0] === "'" ? "x" : r, lineNo);
        return inlineValue(r, lineNo);
      }
      skip();
      if (i >= lines.length) return null;
      const L = lines[i];
      if (L.indent > indent) return block(L.indent);
      if (L.indent === indent && (L.text === "-" || L.text.startsWith("- "))) return sequence(indent);
      return null;
    }

    function mapping(indent) {
      const obj = {};
      for (;;) {
        skip();
        if (i >= lines.length) return obj;
        const L = lines[i];
        if (L.indent < indent) return obj;
        if (L.indent > indent) throw new YAMLSubsetError("unexpected indentation", L.n);
        if (L.text === "-" || L.text.startsWith("- ")) return obj;
        const kv = splitKey(L.text, L.n);
        if (!kv) throw new YAMLSubsetError(`expected "key: value", got ${L.text}`, L.n);
        const [k, rest] = kv;
        if (Object.prototype.hasOwnProperty.call(obj, k)) throw new YAMLSubsetError(`duplicate key ${k}`, L.n);
        i++;
        obj[k] = valueAfterKey(rest, indent, L.n);
      }
    }

    function sequence(indent) {
      const arr = [];
      for (;;) {
        skip();
        if (i >= lines.length) return arr;
        const L = lines[i];
        if (L.indent !== indent || !(L.text === "-" || L.text.startsWith("- "))) {
          if (L.indent > indent) throw new YAMLSubsetError("unexpected indentation", L.n);
          return arr;
        }
        const rest = L.text === "-" ? "" : L.text.slice(2);
        const off = L.text === "-" ? 0 : 2 + rest.match(/^ */)[0].length;
        const item = rest.trim();
        if (item === "") {
          i++;
          skip();
          arr.push(i < lines.length && lines[i].indent > indent ? block(lines[i].indent) : null);
        } else if (item.startsWith("- ") || item === "-" || splitKey(item, L.n)) {
          // an inline nested block: re-read this line as starting at the item's column
          lines[i] = { indent: indent + off, text: item, raw: L.raw, n: L.n };
          arr.push(block(indent + off));
        } else {
          i++;
          if (/^[|>]/.test(item)) arr.push(blockScalar(item, indent, L.n));
          else arr.push(inlineValue(item, L.n));
        }
      }
    }

    function block(indent) {
      skip();
      const L = lines[i];
      if (L.text === "-" || L.text.startsWith("- ")) return sequence(indent);
      if (splitKey(L.text, L.n)) return mapping(indent);
      i++;
      skip();
      if (i < lines.length && lines[i].indent >= indent) {
        throw new YAMLSubsetError("multi-line plain values are not supported", lines[i].n);
      }
      return inlineValue(L.text, L.n);
    }

    skip();
    if (i >= lines.length) return null;
    const top = block(lines[i].indent);
    skip();
    if (i < lines.length) throw new YAMLSubsetError("unexpected content", lines[i].n);
    return top;
  }

  const api = { dump, parse, scalar, flow, YAMLSubsetError };
  root.GMYaml = api;
  if (typeof module !== "undefined" && module.exports) module.exports = api;
})(typeof window !== "undefined" ? window : globalThis);
