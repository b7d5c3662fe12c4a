// seqprob explore: the page. It talks only to the JSON API of its own server (/api/...).
// Numbers come from the library; the page only formats them, colours them and, for the
// temperature slider, re-applies softmax(u / T), top-k and top-p to the row it was sent
// (the same steps as seqprob.sampling.next_token_probs), so the slider needs no round trip.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const LN2 = Math.LN2;
  const state = {
    models: [], model: null, score: null, words: null, row: null, rowVocab: null,
    undo: [], view: "surprisal", seq: {}, ended: false, compare: null, inside: null,
  };

  // ------------------------------------------------------------------ API
  // JSON has no infinity: the API writes -inf / inf / NaN as the strings "-inf", "inf", "nan".
  const num = (x) => (x === "-inf" ? -Infinity : x === "inf" ? Infinity : x === "nan" ? NaN : x);

  class ApiError extends Error {
    constructor(message, status) { super(message); this.status = status; }
  }

  async function api(path, body) {
    const init = body === undefined ? {} : {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    };
    const res = await fetch(path, init);
    const data = await res.json();
    if (!res.ok) throw new ApiError(data.error || res.statusText, res.status);
    return data;
  }

  // Each channel answers only its latest request: a slow answer to an old text is dropped.
  function ticket(channel) {
    const n = (state.seq[channel] || 0) + 1;
    state.seq[channel] = n;
    return () => state.seq[channel] === n;
  }

  function debounce(fn, ms) {
    let timer = null;
    return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
  }

  // ------------------------------------------------------------------ formatting
  const SUP = { "-": "⁻", 0: "⁰", 1: "¹", 2: "²", 3: "³", 4: "⁴", 5: "⁵", 6: "⁶", 7: "⁷", 8: "⁸", 9: "⁹" };

  function fmt(x, digits = 3) {
    x = num(x);
    if (Number.isNaN(x)) return "–";  // undefined: e.g. a KL after an impossible context
    if (x === Infinity) return "∞";
    if (x === -Infinity) return "−∞";
    const text = x.toFixed(digits);
    return /^-0\.?0*$/.test(text) ? text.slice(1) : text.replace("-", "−");  // no "−0.0"
  }

  function fmtProb(p) {
    p = num(p);
    if (!Number.isFinite(p)) return fmt(p);
    if (p === 0) return "0";
    if (p >= 0.001) return p.toPrecision(3);
    const [m, e] = p.toExponential(2).split("e");
    return `${m}×10${[...String(Number(e))].map((c) => SUP[c]).join("")}`;
  }

  function probOfLog(lp) {
    lp = num(lp);
    if (lp === -Infinity) return "0";
    if (lp > -700) return fmtProb(Math.exp(lp));
    const e10 = lp / Math.LN10, e = Math.floor(e10);  // below the smallest double: mantissa × 10^e
    return `${Math.pow(10, e10 - e).toFixed(2)}×10${[...String(e)].map((c) => SUP[c]).join("")}`;
  }

  function shown(text) {
    if (text === "") return "∅";
    return text.replace(/\n/g, "↵").replace(/\t/g, "⇥").replace(/^ +$/, (s) => "␣".repeat(s.length));
  }

  // ------------------------------------------------------------------ colours
  const SURPRISAL_STOPS = [[0, "#fffbe6"], [1, "#fff0a3"], [2, "#fed976"], [4, "#feb24c"], [6, "#fd8d3c"],
    [9, "#f03b20"], [13, "#bd0026"], [18, "#67000d"]];
  const RANK_BUCKETS = [[10, "#a6e3a1", "top 10"], [100, "#fbe38e", "top 100"], [1000, "#f5a3a3", "top 1000"],
    [Infinity, "#cdb4f6", "beyond"]];

  const rgb = (hex) => [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));

  function ramp(stops, x) {
    if (x <= stops[0][0]) return rgb(stops[0][1]);
    for (let i = 1; i < stops.length; i++) {
      if (x <= stops[i][0]) {
        const [x0, c0] = stops[i - 1], [x1, c1] = stops[i], f = (x - x0) / (x1 - x0);
        const a = rgb(c0), b = rgb(c1);
        return a.map((v, k) => Math.round(v + f * (b[k] - v)));
      }
    }
    return rgb(stops[stops.length - 1][1]);
  }

  // [css colour, is it dark (white text)?]
  function paint(c) {
    const light = 0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2];
    return [`rgb(${c[0]}, ${c[1]}, ${c[2]})`, light < 140];
  }

  function surprisalColour(bits) {
    bits = num(bits);
    if (!Number.isFinite(bits)) return ["#1d1d1d", true];
    return paint(ramp(SURPRISAL_STOPS, bits));
  }

  function rankColour(rank) {
    const bucket = RANK_BUCKETS.find(([limit]) => rank <= limit);
    return [bucket[1], false];
  }

  function divergingColour(bits) {  // surprisal difference: blue = less surprised, red = more
    bits = num(bits);
    if (Number.isNaN(bits)) return ["#eeeeee", false];
    const f = Math.min(Math.abs(bits) / 8, 1);
    const end = bits < 0 ? [49, 99, 206] : [200, 40, 40];
    return paint([255, 255, 255].map((v, k) => Math.round(v + f * (end[k] - v))));
  }

  function klColour(bits) {
    bits = num(bits);
    if (Number.isNaN(bits)) return ["#eeeeee", false];
    const f = Math.min(Math.sqrt(Math.max(bits, 0) / 4), 1);
    return paint([255, 255, 255].map((v, k) => Math.round(v + f * ([94, 60, 153][k] - v))));
  }

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.startsWith("data-")) node.setAttribute(k, v);
      else node[k] = v;
    }
    for (const c of children) node.append(c);
    return node;
  }

  function colour(node, [background, dark]) {
    node.style.background = background;
    node.classList.toggle("dark", dark);
  }

  // ------------------------------------------------------------------ text and its tokens
  const textBox = () => $("text");
  const info = () => state.models.find((m) => m.name === state.model);
  const prefixText = () => textBox().value.slice(0, textBox().selectionStart);

  function setLegend() {
    const box = $("legend");
    box.textContent = "";
    if (state.view === "rank") {
      box.append("rank of the token among all predictions:");
      for (const [, c, label] of RANK_BUCKETS) {
        const i = el("i"); i.style.background = c;
        box.append(el("span", { class: "swatch" }, i, label));
      }
      return;
    }
    box.append(state.view === "words" ? "word surprisal (bits):" : "surprisal −log₂ p (bits):");
    const strip = el("span", { class: "ramp" });
    for (const [bits] of SURPRISAL_STOPS) {
      const cell = el("span", { text: bits === 18 ? "18+" : String(bits) });
      colour(cell, surprisalColour(bits));
      strip.append(cell);
    }
    const inf = el("span", { text: "∞" });
    colour(inf, surprisalColour(Infinity));
    strip.append(inf);
    box.append(strip);
  }

  function tokenChip(t, index) {
    const chip = el("span", {
      class: "tok" + (t.is_oov ? " oov" : ""), tabIndex: 0,
      "data-token-id": String(t.id), "data-logprob": String(t.logprob), "data-position": String(t.position),
    });
    chip.append(el("span", { class: "t", text: shown(t.text) }));
    const rankView = state.view === "rank";
    chip.append(el("span", { class: "n", text: rankView ? `#${t.rank}` : fmt(t.surprisal_bits, 1) }));
    colour(chip, rankView ? rankColour(t.rank) : surprisalColour(t.surprisal_bits));
    chip.addEventListener("mouseenter", () => showDetails(index));
    chip.addEventListener("focus", () => showDetails(index));
    return chip;
  }

  function renderTokens() {
    const box = $("tokens");
    box.textContent = "";
    if (!state.score) return;
    state.score.tokens.forEach((t, i) => box.append(tokenChip(t, i)));
  }

  function renderWords() {
    const box = $("words");
    box.textContent = "";
    if (!state.words) return;
    for (const w of state.words.words) {
      const chip = el("span", { class: "tok", tabIndex: 0, "data-logprob": String(w.logprob),
        title: `${w.word}: log P = ${fmt(w.logprob)} nats, ${w.n_tokens} token(s)` });
      chip.append(el("span", { class: "t", text: shown(w.word) }), el("span", { class: "n", text: fmt(w.surprisal_bits, 1) }));
      colour(chip, surprisalColour(w.surprisal_bits));
      box.append(chip);
    }
  }

  function renderTotals() {
    const s = state.score;
    $("total-logprob").textContent = s ? fmt(s.total_logprob) : "–";
    $("total-prob").textContent = s ? probOfLog(s.total_logprob) : "–";
    $("perplexity").textContent = s ? fmt(s.perplexity, 2) : "–";
    $("bits-per-byte").textContent = s ? fmt(s.bits_per_byte) : "–";
    $("n-tokens").textContent = s ? String(s.n_tokens) : "–";
    const chain = $("chain");
    if (!s) { chain.textContent = ""; return; }
    const few = (terms, sep) => (terms.length > 10 ? terms.slice(0, 10).join(sep) + sep + "…" : terms.join(sep));
    const probs = few(s.tokens.map((t) => probOfLog(t.logprob)), " × ");
    const logs = few(s.tokens.map((t) => `(${fmt(t.logprob)})`), " + ");
    chain.textContent = `P(text) = ${probs} = ${probOfLog(s.total_logprob)};  log P(text) = ${logs} = ${fmt(s.total_logprob)} nats`;
  }

  function contextOf(i) {
    const before = state.score.tokens.slice(Math.max(0, i - 4), i).map((t) => t.text);
    return (i > 4 ? "… " : "<s> ") + before.join(" ");
  }

  function showDetails(i) {
    const t = state.score && state.score.tokens[i];
    if (!t) return;
    document.querySelectorAll("#tokens .tok.active").forEach((n) => n.classList.remove("active"));
    const chip = $("tokens").children[i];
    if (chip) chip.classList.add("active");
    const box = $("details");
    box.textContent = "";
    box.append(el("h3", { text: `“${shown(t.text)}”, token ${t.position} of ${state.score.n_tokens}` + (t.is_oov ? " (unknown to the model: scored as <unk>)" : "") }));
    const facts = el("div", { class: "facts" });
    const fact = (label, value) => facts.append(el("div", {}, `${label} `, el("b", { text: value })));
    fact(`P(${shown(t.text)} | ${contextOf(i).trim()}) =`, probOfLog(t.logprob));
    fact("log p =", `${fmt(t.logprob)} nats`);
    fact("surprisal =", `${fmt(t.surprisal_bits, 2)} bits`);
    fact("rank =", `${t.rank} of ${info() ? info().vocab_size : "?"}`);
    fact("entropy here =", `${fmt(t.entropy_bits, 2)} bits`);
    box.append(facts, el("div", { class: "hint", text: "The 10 likeliest tokens at this position:" }));
    const alts = el("div", { class: "alts" });
    for (const a of t.top) alts.append(bar(a.text, Math.exp(num(a.logprob)), a.id === t.id));
    box.append(alts);
  }

  function bar(text, p, mine) {
    const fill = el("div", { class: "fill" });
    fill.style.width = `${Math.max(p * 100, 0.2)}%`;
    return el("div", { class: "bar" + (mine ? " me" : "") }, el("span", { class: "w", text: shown(text), title: text }),
      el("div", { class: "track" }, fill), el("span", { class: "p", text: fmtProb(p) }));
  }

  function textHint() {
    const s = state.score, m = info(), hint = $("text-hint");
    hint.classList.remove("error");
    if (!m) return;
    const unknown = s ? s.tokens.filter((t) => t.is_oov).map((t) => t.text) : [];
    const note = s && s.note ? " " + s.note : "";
    if (unknown.length) {
      hint.textContent = `${unknown.length} token(s) unknown to ${m.name}, scored as <unk> (underlined): ${[...new Set(unknown)].slice(0, 6).join(", ")}. ` +
        `This model knows ${m.vocab_size} tokens.` + note;
    } else {
      hint.textContent = `${m.name}: ${m.kind}, ${m.vocab_size} tokens in its vocabulary` +
        (m.context ? `, reads the last ${m.context} tokens` : "") + ". Every token is scored from x₀ = <s>." + note;
    }
  }

  function showError(where, err) {
    const hint = $(where);
    hint.textContent = err.message;
    hint.classList.add("error");
  }

  async function updateScore() {
    const text = textBox().value, fresh = ticket("score");
    if (!text.trim()) {
      state.score = null; state.words = null;
      renderAll();
      return;
    }
    try {
      const s = await api("/api/score", { text, model: state.model });
      if (!fresh()) return;
      state.score = s;
      if (state.view === "words") await updateWords(text);
      renderAll();
      updateCompare(text);
      updateInside(text);
    } catch (err) {
      if (fresh()) showError("text-hint", err);
    }
  }

  async function updateWords(text) {
    const fresh = ticket("words");
    try {
      const w = await api("/api/words", { text, model: state.model });
      if (fresh()) state.words = w;
    } catch (err) {
      if (fresh()) { state.words = null; showError("text-hint", err); }
    }
  }

  function renderAll() {
    renderTotals();
    renderTokens();
    renderWords();
    textHint();
    if (state.score) showDetails(Math.max(0, state.score.tokens.length - 1));
    else $("details").textContent = "";
    if (!state.score) { $("compare").textContent = ""; clearInside(); }
  }

  // ------------------------------------------------------------------ next token
  const temperature = () => Number($("temperature").value);
  const topK = () => { const v = $("top-k").value.trim(); return v === "" ? null : Math.max(1, Math.floor(Number(v))); };
  const topP = () => { const v = $("top-p").value.trim(); return v === "" ? null : Math.min(1, Math.max(0.01, Number(v))); };

  // softmax(u / T) (T = 0: the argmax, ties split), then top-k, then top-p, renormalized:
  // the steps of seqprob.sampling.next_token_probs.
  function nextProbs(row, t, k, p) {
    const V = row.length, out = new Float64Array(V);
    let m = -Infinity;
    for (let i = 0; i < V; i++) if (row[i] > m) m = row[i];
    if (t === 0) {
      for (let i = 0; i < V; i++) out[i] = row[i] === m ? 1 : 0;
    } else {
      for (let i = 0; i < V; i++) out[i] = Math.exp((row[i] - m) / t);
    }
    normalize(out);
    if (k !== null && k < V) {
      const kth = Float64Array.from(out).sort().reverse()[k - 1];
      for (let i = 0; i < V; i++) if (out[i] < kth) out[i] = 0;
    }
    if (p !== null) {
      const order = [...out.keys()].sort((a, b) => out[b] - out[a] || a - b);
      let total = 0, cum = 0, keep = order.length;
      for (const i of order) total += out[i];
      for (let j = 0; j < order.length; j++) {
        cum += out[order[j]];
        if (cum / total >= p - 1e-12) { keep = j + 1; break; }
      }
      for (let j = keep; j < order.length; j++) out[order[j]] = 0;
    }
    return normalize(out);
  }

  function normalize(a) {
    let s = 0;
    for (const v of a) s += v;
    for (let i = 0; i < a.length; i++) a[i] /= s;
    return a;
  }

  function entropyBits(p) {
    let h = 0;
    for (const v of p) if (v > 0) h -= v * Math.log(v);
    return h / LN2 + 0;
  }

  async function updateNext() {
    const prefix = prefixText(), fresh = ticket("next");
    try {
      const r = await api("/api/next", { text: prefix, model: state.model, k: 1, logprobs: true });
      if (!fresh()) return;
      state.row = Float64Array.from(r.logprobs, num);
      state.rowContext = prefix;
      drawNext();
    } catch (err) {
      if (fresh()) { state.row = null; $("next-bars").textContent = ""; showError("next-context", err); }
    }
  }

  function drawNext() {
    const t = temperature();
    $("temperature-value").textContent = t === 0 ? "0 (argmax)" : t.toFixed(2);
    if (!state.row) return;
    const probs = nextProbs(state.row, t, topK(), topP());
    const h = entropyBits(probs);
    const ent = $("next-entropy");
    ent.textContent = fmt(h, 3);
    ent.setAttribute("data-entropy-bits", String(h));
    const order = [...probs.keys()].filter((i) => probs[i] > 0).sort((a, b) => probs[b] - probs[a] || a - b).slice(0, 10);
    const box = $("next-bars");
    box.textContent = "";
    box.setAttribute("data-context", state.rowContext);
    const vocab = state.rowVocab || [];
    for (const i of order) box.append(bar(vocab[i] ?? `#${i}`, probs[i], false));
    const ctx = $("next-context");
    ctx.classList.remove("error");
    ctx.textContent = "After ";
    const words = state.rowContext.trim();
    ctx.append(el("q", { text: words.length > 60 ? "…" + words.slice(-60) : words || "<s>" }),
      ` (the text up to the cursor), the likeliest next tokens:`);
  }

  async function sample() {
    const box = textBox(), value = box.value, cursor = box.selectionStart;
    const prefix = value.slice(0, cursor), rest = value.slice(cursor);
    const seed = Math.max(0, Math.floor(Number($("seed").value) || 0)) + state.undo.length;
    $("sample").disabled = true;  // one draw at a time: each extends the text the next one reads
    try {
      const r = await api("/api/sample", { text: prefix, model: state.model, temperature: temperature(),
        top_k: topK(), top_p: topP(), seed });
      if (r.ended) { setEnded(`</s> drawn (seed ${seed}): the text ends here. Edit it or step back to go on.`); return; }
      state.undo.push({ value, cursor, seed });
      box.value = r.text + rest;
      box.setSelectionRange(r.text.length, r.text.length);
      $("back").disabled = false;
      textChanged();
    } catch (err) {
      showError("next-context", err);
    } finally {
      $("sample").disabled = state.ended;
    }
  }

  function stepBack() {
    const last = state.undo.pop();
    if (!last) return;
    const box = textBox();
    box.value = last.value;
    box.setSelectionRange(last.cursor, last.cursor);
    $("back").disabled = state.undo.length === 0;
    textChanged();
  }

  function setEnded(message) {
    state.ended = Boolean(message);
    $("ended").textContent = message || "";
    $("ended").classList.toggle("hidden", !message);
    $("sample").disabled = state.ended;
  }

  // ------------------------------------------------------------------ compare
  function compareGroup() {
    const me = info();
    if (!me) return [];
    return [me, ...state.models.filter((m) => m !== me && m.tokenizer === me.tokenizer)];
  }

  async function updateCompare(text) {
    const card = $("compare-card"), group = compareGroup();
    card.classList.toggle("hidden", state.models.length < 2);
    if (state.models.length < 2) return;
    const others = state.models.filter((m) => !group.includes(m)).map((m) => m.name);
    $("compare-hint").classList.remove("error");
    $("compare-hint").textContent = "Each row scores the same tokens under one model: surprisal in bits (colour as above)." +
      (others.length ? ` Not compared (another tokenizer): ${others.join(", ")}.` : "");
    if (group.length < 2) { $("compare").textContent = ""; return; }
    const fresh = ticket("compare");
    try {
      const r = await api("/api/compare", { text, models: group.map((m) => m.name) });
      if (fresh()) {
        state.compare = r;
        renderCompare(r);
        $("compare").setAttribute("data-text", text);
        if (r.note) $("compare-hint").textContent += " " + r.note;
      }
    } catch (err) {
      if (fresh()) { $("compare").textContent = ""; showError("compare-hint", err); }
    }
  }

  function compareRow(label, values, paintCell, attrs, totals, cls = "", digits = 1) {
    const tr = el("tr", { class: cls }, el("th", { class: "name", text: label }));
    values.forEach((v, i) => {
      const td = el("td", { text: fmt(v, digits), ...(attrs ? attrs(i) : {}) });
      colour(td, paintCell(v));
      tr.append(td);
    });
    for (const t of totals) tr.append(el("td", { class: "total", text: t }));
    return tr;
  }

  function renderCompare(r) {
    const table = $("compare");
    table.textContent = "";
    const head = el("tr", {}, el("th", { class: "name", text: "model" }));
    for (const t of r.tokens) head.append(el("th", { text: shown(t) }));
    for (const h of ["log P (nats)", "perplexity", "bits/byte", r.reference ? "Σ KL (bits)" : ""]) if (h) head.append(el("th", { text: h }));
    const body = el("tbody");
    table.append(el("thead", {}, head), body);
    const kind = (m) => (m.kind === "truth" ? "P*, exact" : m.kind);
    for (const m of r.models) {
      const kl = m.kl_bits ? m.kl_bits.map(num).filter((v) => !Number.isNaN(v)).reduce((a, b) => a + b, 0) : null;
      const totals = [fmt(m.total_logprob, 2), fmt(m.perplexity, 2), fmt(m.bits_per_byte, 3)];
      if (r.reference) totals.push(kl === null ? "" : fmt(kl, 2));
      body.append(compareRow(`${m.name} (${kind(m)})`, m.surprisal_bits, surprisalColour,
        (i) => ({ "data-model": m.name, "data-token-id": String(m.ids[i]), "data-logprob": String(m.logprob[i]),
          title: `${m.name}: P = ${probOfLog(m.logprob[i])}, log P = ${fmt(m.logprob[i])} nats` }), totals, "gap"));
      if (m.name !== r.baseline) {
        body.append(compareRow(`Δ bits vs ${r.baseline}`, m.diff_bits, divergingColour, null, [], "sub", 2));
      }
      if (m.kl_bits) {
        body.append(compareRow(`KL(P* ‖ ${m.name}) bits`, m.kl_bits, klColour, null, [], "sub", 2));
      }
    }
  }

  // ------------------------------------------------------------------ inside f_theta
  function clearInside() {
    $("attention").textContent = "";
    $("lens").textContent = "";
  }

  function fillSelect(select, n) {
    const keep = select.value;
    select.textContent = "";
    for (let i = 0; i < n; i++) select.append(el("option", { value: String(i), text: String(i + 1) }));
    if (keep !== "" && Number(keep) < n) select.value = keep;
  }

  async function updateInside(text) {
    const m = info(), body = $("inside-body"), hint = $("inside-hint");
    hint.classList.remove("error");
    if (!m || !m.inspectable) {
      body.classList.add("hidden");
      hint.textContent = `${m ? m.name : "This model"} (${m ? m.kind : "?"}) has no attention or residual stream: choose a GPT model above to look inside.`;
      return;
    }
    const n = state.score ? state.score.tokens.length : 0;
    if (!n) { clearInside(); return; }
    if (m.context && n + 1 > m.context) {
      body.classList.add("hidden");
      hint.textContent = `The text has ${n} tokens; ${m.name} reads at most ${m.context} positions (x₀ = <s> and ${m.context - 1} tokens). Shorten the text to look inside.`;
      return;
    }
    body.classList.remove("hidden");
    hint.textContent = `${m.name}: ${m.n_layer} blocks × ${m.n_head} attention heads.`;
    const fresh = ticket("inside");
    try {
      const r = await api("/api/inside", { text, model: m.name, layer: Number($("layer").value), head: Number($("head").value) });
      if (fresh()) { state.inside = r; renderAttention(r); renderLens(r); }
    } catch (err) {
      if (fresh()) { clearInside(); showError("inside-hint", err); }
    }
  }

  function renderAttention(r) {
    const table = $("attention");
    table.textContent = "";
    const head = el("tr", {}, el("th"));
    for (const t of r.tokens) head.append(el("th", {}, el("span", { text: shown(t) })));
    const body = el("tbody");
    r.attention.forEach((row, i) => {
      const tr = el("tr", {}, el("th", { text: shown(r.tokens[i]) }));
      row.forEach((w, j) => {
        const td = el("td", { title: j <= i ? `${r.tokens[i]} reads ${r.tokens[j]}: ${fmt(w, 3)}` : "future: masked" });
        td.style.background = j <= i ? `rgba(47, 95, 208, ${Math.max(num(w), 0)})` : "#f1f2f5";
        tr.append(td);
      });
      body.append(tr);
    });
    table.append(el("thead", {}, head), body);
  }

  function renderLens(r) {
    const table = $("lens");
    table.textContent = "";
    const T = r.tokens.length, byLayer = new Map();
    for (const row of r.logit_lens) {
      if (!byLayer.has(row.layer)) byLayer.set(row.layer, []);
      byLayer.get(row.layer)[row.position - 1] = row;
    }
    const head = el("tr", {}, el("th", { class: "name", text: "input token →" }));
    for (let p = 0; p < T; p++) head.append(el("th", { text: shown(r.tokens[p]) }));
    const body = el("tbody");
    for (const [layer, rows] of byLayer) {
      const name = layer === 0 ? "embeddings" : `block ${layer}` + (layer === r.n_layer ? " (output)" : "");
      const tr = el("tr", {}, el("th", { class: "name", text: name }));
      for (const row of rows) {
        const hit = row.top_token === row.token;
        tr.append(el("td", { class: hit ? "hit" : "", text: shown(row.top_token),
          title: `after ${row.context}: top guess ${row.top_token}; the real next token ${row.token} has p = ${fmtProb(row.prob)}, rank ${row.rank}` }));
      }
      body.append(tr);
    }
    const actual = el("tr", { class: "actual" }, el("th", { class: "name", text: "real next token" }));
    for (const row of byLayer.get(0) || []) actual.append(el("td", { text: shown(row.token) }));
    body.append(actual);
    table.append(el("thead", {}, head), body);
  }

  // ------------------------------------------------------------------ wiring
  const textChanged = (() => {
    const later = debounce(() => { updateScore(); updateNext(); }, 90);
    return () => { setEnded(null); later(); };
  })();

  const cursorMoved = debounce(() => { if (prefixText() !== state.rowContext) updateNext(); }, 60);

  async function fetchVocab() {  // display strings of every id, for the next-token bars
    const r = await api(`/api/vocab?model=${encodeURIComponent(state.model)}`);
    state.rowVocab = r.tokens;
  }

  async function chooseModel(name) {
    state.model = name;
    state.row = null;
    const m = info();
    fillSelect($("layer"), m.n_layer || 0);
    fillSelect($("head"), m.n_head || 0);
    await fetchVocab();
    updateScore();
    updateNext();
  }

  function chooseView(view) {
    state.view = view;
    document.querySelectorAll(".tab").forEach((b) => b.setAttribute("aria-selected", String(b.dataset.view === view)));
    $("tokens").classList.toggle("hidden", view === "words");
    $("words").classList.toggle("hidden", view !== "words");
    setLegend();
    if (view === "words" && !state.words && state.score) {
      updateWords(textBox().value).then(renderAll);
    } else {
      renderAll();
    }
  }

  async function main() {
    const r = await api("/api/models");
    state.models = r.models;
    const select = $("model");
    for (const m of r.models) select.append(el("option", { value: m.name, text: `${m.name} (${m.kind === "truth" ? "P*, exact" : m.kind})` }));
    select.addEventListener("change", () => chooseModel(select.value));
    const box = textBox();
    box.addEventListener("input", textChanged);
    for (const ev of ["click", "keyup", "select"]) box.addEventListener(ev, cursorMoved);
    $("temperature").addEventListener("input", drawNext);
    for (const id of ["top-k", "top-p"]) $(id).addEventListener("input", drawNext);
    $("sample").addEventListener("click", sample);
    $("back").addEventListener("click", stepBack);
    for (const id of ["layer", "head"]) $(id).addEventListener("change", () => updateInside(textBox().value));
    document.querySelectorAll(".tab").forEach((b) => b.addEventListener("click", () => chooseView(b.dataset.view)));
    setLegend();
    box.setSelectionRange(box.value.length, box.value.length);
    await chooseModel(r.models[0].name);
    document.body.setAttribute("data-ready", "true");
  }

  main().catch((err) => {
    const hint = $("text-hint");
    hint.textContent = `The page could not start: ${err.message}`;
    hint.classList.add("error");
  });
})();
