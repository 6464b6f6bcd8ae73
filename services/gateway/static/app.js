// The coachbus web chat: plain ES module, no framework, no build step.
//
// Rule for everything below: text from the user or from an agent only ever reaches
// the page through textContent (via el()), never through an HTML parser, so a
// message that contains markup is shown as text, not run. The CSP backs this up.

import { readEvents } from "./sse.js";

const AGENTS = ["shadow", "persona", "plasticity", "stability", "coach"];
const TRAITS = ["openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism"];
const KEY_STORE = "coachbus.key";
const SESSION_STORE = "coachbus.session";
const SESSION_RE = /^[A-Za-z0-9._:-]{1,128}$/;
// A human reviewer may take a while; stop asking after this long.
const HUMAN_POLL_MS = 4000;
const HUMAN_POLL_FOR_MS = 30 * 60 * 1000;

const $ = (id) => document.getElementById(id);

const state = {
  key: sessionStorage.getItem(KEY_STORE) || "",
  session: sessionStorage.getItem(SESSION_STORE) || newSessionId(),
  turns: new Map(),
  latest: null, // the turn the timeline shows
  helpLanguage: null, // the language the help panel shows
};

// ------------------------------------------------------------------ helpers

/** Create an element; `text` is set with textContent, never parsed as HTML. */
function el(tag, { cls, text, attrs } = {}, ...children) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
  for (const child of children) if (child) node.append(child);
  return node;
}

function newSessionId() {
  const bytes = crypto.getRandomValues(new Uint8Array(4));
  return "web-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

const title = (name) => name.charAt(0).toUpperCase() + name.slice(1);
const human = (slug) => String(slug).replace(/^goal:/, "").replace(/[_-]+/g, " ");
const pct = (x) => `${Math.round(x * 100)}%`;

function duration(ms) {
  if (!Number.isFinite(ms)) return "";
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

function listOf(names) {
  const words = names.map(title);
  if (words.length < 2) return words.join("");
  return `${words.slice(0, -1).join(", ")} and ${words[words.length - 1]}`;
}

let statusTimer = null;
function showStatus(message, kind = "info") {
  const box = $("status");
  box.textContent = message;
  box.dataset.kind = kind;
  box.hidden = false;
  clearTimeout(statusTimer);
  if (kind !== "error") statusTimer = setTimeout(() => (box.hidden = true), 6000);
}

class ApiError extends Error {
  constructor(status, titleText, detail) {
    super(detail ? `${titleText}: ${detail}` : titleText);
    this.status = status;
  }
}

/** Call the gateway with the key; problem+json errors become ApiError. */
async function api(path, { method = "GET", body, signal } = {}) {
  const headers = { Authorization: `Bearer ${state.key}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
    cache: "no-store",
  });
  if (!response.ok) {
    let problem = {};
    try {
      problem = await response.json();
    } catch {
      // not JSON (a proxy's error page): fall back to the status line
    }
    if (response.status === 401) signOut();
    throw new ApiError(response.status, problem.title || response.statusText, problem.detail);
  }
  return response;
}

// ------------------------------------------------------------------ key and session

function showIdentity(userId) {
  $("user-id").textContent = userId;
  $("identity").hidden = false;
  $("key-form").hidden = true;
}

function signOut() {
  state.key = "";
  sessionStorage.removeItem(KEY_STORE);
  $("identity").hidden = true;
  $("key-form").hidden = false;
}

async function connect(key) {
  state.key = key;
  try {
    const data = await loadBeliefs();
    sessionStorage.setItem(KEY_STORE, key);
    showIdentity(data.user_id);
    return true;
  } catch (err) {
    showStatus(err.status === 401 ? "That key was not accepted." : err.message, "error");
    $("key-input").focus();
    return false;
  }
}

function setSession(id) {
  state.session = id;
  sessionStorage.setItem(SESSION_STORE, id);
  $("session-input").value = id;
}

// ------------------------------------------------------------------ chat

function scrollChat() {
  const list = $("messages");
  list.lastElementChild?.scrollIntoView({ block: "end", behavior: "smooth" });
}

function bubble(kind, label, text) {
  const item = el("li", { cls: `msg msg-${kind}`, attrs: { "data-kind": kind } });
  if (label) item.append(el("span", { cls: "msg-label", text: label }));
  item.append(el("p", { cls: "msg-text", text }));
  return item;
}

function addUserMessage(text) {
  $("empty-chat").hidden = true;
  const item = bubble("user", null, text);
  item.setAttribute("aria-label", "You");
  $("messages").append(item);
  return item;
}

function pendingLine(turn, text) {
  if (!turn.pending) {
    turn.pending = el("li", { cls: "msg msg-pending", attrs: { "data-kind": "pending" } });
    turn.pending.append(el("span", { cls: "dots", attrs: { "aria-hidden": "true" } }, el("i"), el("i"), el("i")));
    turn.pending.append(el("span", { cls: "pending-text" }));
    $("messages").append(turn.pending);
  }
  turn.pending.querySelector(".pending-text").textContent = text;
  scrollChat();
}

function clearPending(turn) {
  turn.pending?.remove();
  turn.pending = null;
}

function insertBeforePending(turn, node) {
  if (turn.pending) turn.pending.before(node);
  else $("messages").append(node);
  scrollChat();
}

function conflictNote(conflict) {
  const text = `${title(conflict.winner)} overruled ${title(conflict.overruled)} on ${human(conflict.topic)}`;
  const note = el("li", { text, attrs: { title: `${conflict.rule}: ${conflict.detail}` } });
  return note;
}

function renderCoach(turn, reply) {
  if (turn.coachEl) return;
  turn.coach = reply;
  turn.coachEl = bubble("coach", "First thoughts", reply.text);
  insertBeforePending(turn, turn.coachEl);
  pendingLine(turn, "The agents are weighing in…");
  onReply(turn.coachEl, reply);
}

// The synthesis as Synth streams it: sentences appended in order (a piece out of
// order is skipped; the final replaces the whole draft anyway).
function renderDraft(turn, piece) {
  if (turn.finalEl || piece.seq !== (turn.draftSeq || 0)) return;
  turn.draftSeq = piece.seq + 1;
  if (!turn.draftEl) {
    // Styled as the synthesis, but its own kind: it is not the final reply yet.
    turn.draftEl = bubble("final", "coachbus", "");
    turn.draftEl.dataset.kind = "draft";
    turn.draftEl.classList.add("msg-streaming");
    turn.draftEl.setAttribute("aria-busy", "true");
    insertBeforePending(turn, turn.draftEl);
    pendingLine(turn, "Writing…");
  }
  turn.draftEl.querySelector(".msg-text").textContent += piece.text;
  scrollChat();
}

function renderFinal(turn, reply) {
  if (turn.finalEl) return;
  turn.final = reply;
  clearPending(turn);
  // The final is the whole reply: it takes the streamed draft's place.
  turn.draftEl?.remove();
  turn.draftEl = null;
  const item = bubble("final", "coachbus", reply.text);
  if (reply.degraded) {
    const missing = reply.missing_agents || [];
    const text = missing.length
      ? `Answered without ${listOf(missing)}: ${missing.length > 1 ? "they" : "it"} did not report in time.`
      : "Answered in a reduced mode.";
    item.append(el("p", { cls: "note note-degraded", text }));
    item.dataset.degraded = "true";
  }
  if (reply.conflicts?.length) {
    const list = el("ul", { cls: "note note-conflicts", attrs: { "aria-label": "How disagreements were settled" } });
    for (const conflict of reply.conflicts) list.append(conflictNote(conflict));
    item.append(list);
  }
  turn.finalEl = item;
  $("messages").append(item);
  scrollChat();
  onReply(item, reply);
}

function renderHuman(turn, reply) {
  if (turn.humans.has(reply.created_at)) return;
  turn.humans.add(reply.created_at);
  const item = bubble("human", "A human coach", reply.text);
  $("messages").append(item);
  scrollChat();
  onReply(item, reply);
}

// ------------------------------------------------------------------ a turn

async function sendMessage(text) {
  if (!state.key) {
    showStatus("Enter your API key first.", "error");
    $("key-input").focus();
    return;
  }
  const userEl = addUserMessage(text);
  const turn = {
    id: null,
    userEl,
    sentAt: performance.now(),
    agents: {},
    humans: new Set(),
    abort: new AbortController(),
  };
  pendingLine(turn, "Thinking…");
  let accepted;
  try {
    const response = await api(`/v1/sessions/${encodeURIComponent(state.session)}/messages`, {
      method: "POST",
      body: { text },
      signal: turn.abort.signal,
    });
    accepted = await response.json();
  } catch (err) {
    clearPending(turn);
    userEl.append(el("p", { cls: "note note-error", text: `Not sent. ${err.message}` }));
    showStatus(err.message, "error");
    return;
  }
  turn.id = accepted.turn_id;
  userEl.dataset.turn = turn.id;
  state.turns.set(turn.id, turn);
  state.latest = turn;
  renderTimeline(turn);
  await followTurn(turn, accepted.events);
}

async function followTurn(turn, eventsPath) {
  try {
    const response = await api(eventsPath, { signal: turn.abort.signal });
    await readEvents(response, (event, data) => onTurnEvent(turn, event, data));
  } catch (err) {
    if (turn.abort.signal.aborted) return; // erased or superseded: nothing to show
    showStatus(`Lost the live updates: ${err.message}`, "error");
  }
  if (!turn.final && !turn.timedOut && !turn.abort.signal.aborted) {
    // The stream ended early (a proxy, a dropped connection): the turn's
    // snapshot still has whatever arrived.
    await refreshTurn(turn);
  }
}

function onTurnEvent(turn, event, data) {
  switch (event) {
    case "coach":
      turn.coachAt = performance.now();
      renderCoach(turn, data);
      break;
    case "agent":
      turn.agents[data.agent] = data;
      if (!turn.finalEl && turn.coachEl) {
        const seen = AGENTS.filter((a) => turn.agents[a]).length;
        pendingLine(turn, `The agents are weighing in… ${seen} of ${AGENTS.length}`);
      }
      break;
    case "final_delta":
      turn.draftAt ??= performance.now();
      renderDraft(turn, data);
      break;
    case "final":
      turn.finalAt = performance.now();
      renderFinal(turn, data);
      afterFinal(turn);
      break;
    case "human":
      renderHuman(turn, data);
      break;
    case "timeout":
      turn.timedOut = true;
      clearPending(turn);
      $("messages").append(
        el("li", { cls: "msg msg-system", text: "No considered answer arrived in time. The first thoughts above still stand." }),
      );
      break;
    default:
      return;
  }
  if (turn === state.latest) renderTimeline(turn);
}

async function refreshTurn(turn) {
  let snapshot;
  try {
    snapshot = await (await api(`/v1/turns/${encodeURIComponent(turn.id)}`, { signal: turn.abort.signal })).json();
  } catch {
    return null;
  }
  for (const [name, result] of Object.entries(snapshot.agents || {})) turn.agents[name] = result;
  if (snapshot.coach) renderCoach(turn, snapshot.coach);
  if (snapshot.final && !turn.finalEl) {
    renderFinal(turn, snapshot.final);
    afterFinal(turn);
  }
  for (const reply of snapshot.human || []) renderHuman(turn, reply);
  if (turn === state.latest) renderTimeline(turn);
  return snapshot;
}

function afterFinal(turn) {
  loadBeliefs().catch(() => {});
  checkEscalation(turn, 5);
}

function checkEscalation(turn, triesLeft) {
  // The final reply can overtake an agent's result on its way to the gateway (they
  // travel on different topics), and the event stream closes at the final: fetch
  // the turn again for a result that is still missing.
  if (!turn.agents.stability && triesLeft > 0) {
    setTimeout(() => {
      refreshTurn(turn)
        .then(() => checkEscalation(turn, triesLeft - 1))
        .catch(() => {});
    }, 400);
    return;
  }
  const crisis = turn.agents.stability?.payload?.crisis;
  if (crisis && crisis.category !== "none") offerHelp(turn.finalEl, turn.final, { always: true });
  if (crisis?.escalated && !turn.watching) {
    turn.watching = true;
    turn.finalEl.append(
      el("p", { cls: "note note-human", text: "A human coach has been asked to read this and may reply here." }),
    );
    watchForHuman(turn);
  }
}

function watchForHuman(turn) {
  const until = Date.now() + HUMAN_POLL_FOR_MS;
  const tick = async () => {
    if (turn.abort.signal.aborted || Date.now() > until) return;
    const snapshot = await refreshTurn(turn);
    if (snapshot?.human?.length) return; // answered
    setTimeout(tick, HUMAN_POLL_MS);
  };
  setTimeout(tick, HUMAN_POLL_MS);
}

// ------------------------------------------------------------------ help lines

// The lines come from GET /v1/help-lines, built from the same file as the crisis
// replies. The request is public and made without the key (not through api()): a
// person in crisis must see the lines before signing in and when their key fails.
const helpTables = new Map(); // language → promise of its table

function helpTable(language) {
  const lang = language === "de" ? "de" : "en";
  if (!helpTables.has(lang)) {
    const loading = fetch(`/v1/help-lines?language=${lang}`).then((response) => {
      if (!response.ok) throw new Error(`help lines: ${response.status}`);
      return response.json();
    });
    loading.catch(() => helpTables.delete(lang)); // ask again next time
    helpTables.set(lang, loading);
  }
  return helpTables.get(lang);
}

const dial = (number) => `tel:${number.replace(/[^0-9+]/g, "")}`;

/** The table's groups as a list; a line whose numbers were all shown above is left out
 *  (the medical line usually repeats the emergency numbers). */
function helpGroups(table) {
  const list = el("ul", { cls: "help-groups" });
  const shown = new Set();
  for (const group of table.groups) {
    const lines = group.lines.filter((line) => !line.numbers.every((n) => shown.has(n)));
    if (!lines.length) continue;
    const entries = el("ul", { cls: "help-lines" });
    for (const line of lines) {
      const entry = el("li", { cls: "help-line" });
      if (line.name) entry.append(el("span", { cls: "help-name", text: line.name }), " ");
      line.numbers.forEach((number, i) => {
        shown.add(number);
        if (i) entry.append(" / ");
        entry.append(el("a", { cls: "help-number", text: number, attrs: { href: dial(number) } }));
      });
      if (line.details) entry.append(" ", el("span", { cls: "help-details", text: `(${line.details})` }));
      entries.append(entry);
    }
    list.append(el("li", { cls: "help-group", attrs: { "data-kind": group.kind } },
      el("span", { cls: "help-label", text: group.label }), entries));
  }
  return list;
}

function showHelpIn(language) {
  if (state.helpLanguage === language) return;
  state.helpLanguage = language;
  helpTable(language)
    .then((table) => {
      if (state.helpLanguage !== table.language) return; // the chat moved on meanwhile
      $("help").lang = table.language;
      $("help-title").textContent = table.title;
      $("help-region").textContent = table.region;
      $("help-body").replaceChildren(el("p", { cls: "help-intro", text: table.intro }), helpGroups(table));
    })
    .catch(() => {}); // the page's own emergency line stays
}

/** Whether `text` carries one of the table's numbers (not inside a longer number). */
function mentionsHelpLine(text, table) {
  return table.groups.some((group) => group.lines.some((line) => line.numbers.some((number) => {
    const digits = number.replace(/\+/g, "\\+");
    return new RegExp(`(^|[^0-9])${digits}(?![0-9])`).test(text);
  })));
}

// A reply gets the lines beside it when it is a crisis reply. The page's data has no
// flag for that: a reply carries kind, text and language, and Stability's screen (the
// one crisis signal the page sees) comes after the Coach's reply, or never when
// Stability is late. But a crisis reply always carries the deployment's help lines
// (Coach and Synth build it from the same file, and Synth's validator refuses one
// without them), so a reply that contains one of those numbers counts, from its first
// moment on the page. A false match (a "112" in ordinary coaching) costs one extra help
// box; a missed crisis could cost far more. Stability's screen, once in, adds the box
// to the final reply too (checkEscalation).
async function offerHelp(item, reply, { always = false } = {}) {
  if (!item || !reply || item.querySelector(".crisis-help")) return;
  let table;
  try {
    table = await helpTable(reply.language);
  } catch {
    return; // the panel at the top keeps its own emergency line
  }
  if (!always && !mentionsHelpLine(reply.text || "", table)) return;
  if (item.querySelector(".crisis-help")) return; // added while this one waited
  item.append(el("aside", { cls: "crisis-help", attrs: { "aria-label": table.title, lang: table.language } },
    el("p", { cls: "crisis-help-title", text: table.title }),
    el("p", { cls: "help-intro", text: table.intro }),
    helpGroups(table)));
  scrollChat();
}

function onReply(item, reply) {
  if (reply.language) showHelpIn(reply.language);
  offerHelp(item, reply);
}

// ------------------------------------------------------------------ timeline

const ms = (iso) => Date.parse(iso);

function renderTimeline(turn) {
  const list = $("timeline");
  list.replaceChildren();
  $("timeline-empty").hidden = true;

  // Server clocks throughout (agents, coach and synth stamp their events), so the
  // bars line up with each other whatever the browser's clock says. The turn starts
  // when the first agent started working: its finish time less its latency.
  const starts = [];
  for (const a of AGENTS) {
    const r = turn.agents[a];
    if (r) starts.push(ms(r.created_at) - r.latency_ms);
  }
  if (turn.coach) starts.push(ms(turn.coach.created_at));
  const origin = starts.length ? Math.min(...starts) : null;
  const ends = [];
  for (const a of AGENTS) if (turn.agents[a]) ends.push(ms(turn.agents[a].created_at));
  if (turn.coach) ends.push(ms(turn.coach.created_at));
  if (turn.final) ends.push(ms(turn.final.created_at));
  const span = origin === null ? 1 : Math.max(1, Math.max(...ends) - origin);
  const at = (t) => Math.min(100, Math.max(0, ((t - origin) / span) * 100));

  const missing = new Set(turn.final?.missing_agents || []);
  for (const agent of AGENTS) {
    const r = turn.agents[agent];
    const row = el("li", { cls: "wf-row", attrs: { "data-agent": agent } });
    row.append(el("span", { cls: "wf-name", text: title(agent) }));
    const track = el("span", { cls: "wf-track", attrs: { "aria-hidden": "true" } });
    let meta;
    if (r) {
      const end = ms(r.created_at);
      const start = end - r.latency_ms;
      const wait = el("span", { cls: "wf-wait" });
      wait.style.left = "0%";
      wait.style.width = `${at(start)}%`;
      const work = el("span", { cls: `wf-bar tier-${r.tier}` });
      work.style.left = `${at(start)}%`;
      work.style.width = `${Math.max(0.8, at(end) - at(start))}%`;
      track.append(wait, work);
      row.dataset.tier = r.tier;
      meta = el("span", { cls: "wf-meta" },
        el("span", { cls: "wf-ms", text: duration(r.latency_ms) }),
        el("span", { cls: `tier tier-${r.tier}`, text: r.tier }));
      row.setAttribute("aria-label", `${title(agent)}: ${duration(r.latency_ms)}, ${r.tier} tier, done ${duration(end - origin)} into the turn`);
    } else {
      row.classList.add(missing.has(agent) ? "wf-missed" : "wf-pending");
      const label = missing.has(agent) ? "missed" : turn.final ? "—" : "working…";
      meta = el("span", { cls: "wf-meta" }, el("span", { cls: "wf-ms", text: label }));
      row.setAttribute("aria-label", `${title(agent)}: ${label}`);
    }
    row.append(track, meta);
    list.append(row);
  }

  for (const [kind, reply, label] of [["coach", turn.coach, "First reply"], ["final", turn.final, "Synthesis"]]) {
    const row = el("li", { cls: "wf-row wf-marker", attrs: { "data-event": kind } });
    row.append(el("span", { cls: "wf-name", text: label }));
    const track = el("span", { cls: "wf-track", attrs: { "aria-hidden": "true" } });
    let text = "…";
    if (reply && origin !== null) {
      const t = ms(reply.created_at);
      const dot = el("span", { cls: `wf-dot wf-dot-${kind}` });
      dot.style.left = `${at(t)}%`;
      track.append(dot);
      text = `+${duration(t - origin)}`;
    }
    row.append(track, el("span", { cls: "wf-meta" }, el("span", { cls: "wf-ms", text })));
    row.setAttribute("aria-label", `${label}: ${text === "…" ? "not yet" : text + " into the turn"}`);
    list.append(row);
  }

  const total = $("timeline-total");
  if (turn.final && turn.finalAt) {
    total.textContent = `answered in ${duration(turn.finalAt - turn.sentAt)}`;
  } else if (turn.coachAt) {
    total.textContent = `first reply in ${duration(turn.coachAt - turn.sentAt)}`;
  } else {
    total.textContent = "";
  }
}

function clearTimeline() {
  $("timeline").replaceChildren();
  $("timeline-empty").hidden = false;
  $("timeline-total").textContent = "";
}

// ------------------------------------------------------------------ beliefs

async function loadBeliefs() {
  const data = await (await api("/v1/me/beliefs")).json();
  renderBeliefs(data);
  return data;
}

function section(heading, ...children) {
  return el("section", { cls: "belief-section" }, el("h3", { text: heading }), ...children);
}

function meter(label, value01, { confidence, suffix } = {}) {
  const row = el("div", { cls: "meter-row" });
  const valuetext = `${pct(value01)}${confidence !== undefined ? `, confidence ${pct(confidence)}` : ""}`;
  row.append(el("span", { cls: "meter-label", text: label }));
  const bar = el("span", {
    cls: "meter",
    attrs: {
      role: "meter", "aria-label": label, "aria-valuemin": "0", "aria-valuemax": "100",
      "aria-valuenow": String(Math.round(value01 * 100)), "aria-valuetext": valuetext,
    },
  });
  const fill = el("span", { cls: "meter-fill" });
  fill.style.width = pct(value01);
  // Low confidence shows as a paler bar: the number is there, but not much rests on it.
  if (confidence !== undefined) fill.style.opacity = String(0.3 + 0.7 * confidence);
  bar.append(fill);
  row.append(bar, el("span", { cls: "meter-value", text: suffix ?? pct(value01) }));
  return row;
}

function renderGoals(shadow) {
  const goals = shadow.stated_goals || [];
  if (!goals.length) return null;
  const predictions = new Map((shadow.follow_through || []).map((f) => [f.goal_id, f]));
  const avoided = new Set(shadow.avoided_goals || []);
  const list = el("ul", { cls: "goals" });
  for (const goal of goals) {
    const item = el("li", { cls: "goal", attrs: { "data-goal-id": goal.goal_id } });
    const head = el("div", { cls: "goal-head" }, el("span", { cls: "goal-text", text: goal.text }));
    if (goal.domain) head.append(el("span", { cls: "chip", text: human(goal.domain) }));
    if (avoided.has(goal.goal_id)) head.append(el("span", { cls: "chip chip-warn", text: "stalling" }));
    item.append(head);
    if (goal.quote) item.append(el("blockquote", { cls: "quote", text: `“${goal.quote}”` }));
    const sessions = goal.sessions_mentioned === 1 ? "1 session" : `${goal.sessions_mentioned} sessions`;
    item.append(el("p", {
      cls: "muted small",
      text: `Mentioned in ${sessions} · ${goal.progress_reports} progress, ${goal.setback_reports} setbacks`,
    }));
    const p = predictions.get(goal.goal_id);
    if (p) {
      const basis = p.evidence ? `from ${p.evidence} report${p.evidence === 1 ? "" : "s"}` : "a first guess";
      const m = meter("Follow-through", p.probability / 100);
      m.title = [basis, ...(p.reasons || [])].join(" · ");
      item.append(m);
    }
    list.append(item);
  }
  return section("Goals you've stated", list);
}

function renderPatterns(shadow) {
  const patterns = shadow.patterns || [];
  if (!patterns.length) return null;
  const list = el("ul", { cls: "patterns" });
  for (const p of patterns) {
    const item = el("li", { cls: "pattern", attrs: { "data-pattern": p.pattern } });
    const head = el("div", { cls: "goal-head" }, el("span", { cls: "goal-text", text: title(human(p.pattern)) }));
    if (p.pattern === shadow.primary_pattern) head.append(el("span", { cls: "chip chip-accent", text: "main pattern" }));
    item.append(head);
    item.append(el("p", {
      cls: "muted small",
      text: `Seen ${p.occurrences}× · confidence ${pct(p.confidence)}${p.turns_since ? ` · last ${p.turns_since} turns ago` : ""}`,
    }));
    const quotes = el("ul", { cls: "quotes", attrs: { "aria-label": "Evidence" } });
    for (const q of (p.evidence || []).slice(0, 3)) quotes.append(el("li", { cls: "quote", text: `“${q}”` }));
    if (quotes.childElementCount) item.append(quotes);
    list.append(item);
  }
  return section("Patterns", list);
}

function renderPersona(persona, shadow) {
  const nodes = [];
  const ocean = el("div", { cls: "ocean" });
  for (const trait of TRAITS) {
    const t = persona.ocean?.[trait];
    if (!t) continue;
    const row = meter(title(trait), t.value, { confidence: t.confidence });
    row.dataset.trait = trait;
    row.append(el("span", { cls: "meter-conf", text: `conf. ${pct(t.confidence)}` }));
    ocean.append(row);
  }
  if (ocean.childElementCount) {
    nodes.push(section("Personality (OCEAN)", ocean,
      el("p", { cls: "muted small", text: "Paler bars rest on less evidence." })));
  }

  const facts = el("dl", { cls: "facts" });
  if (persona.follow_through_pct !== null && persona.follow_through_pct !== undefined) {
    const basis = { prior: "a guess from your traits", blended: "traits and your reports", evidence: "from your reports" };
    facts.append(el("dt", { text: "Follow-through" }),
      el("dd", { text: `${Math.round(persona.follow_through_pct)}% · ${basis[persona.follow_through_basis] || "estimate"}` }));
  }
  facts.append(el("dt", { text: "Sessions seen" }), el("dd", { text: String(persona.sessions_seen ?? 0) }));
  if (persona.recurring_goals?.length) {
    const names = new Map((shadow?.stated_goals || []).map((g) => [g.goal_id, g.text]));
    const chips = el("dd", { cls: "chips" });
    for (const id of persona.recurring_goals) chips.append(el("span", { cls: "chip", text: names.get(id) || human(id) }));
    facts.append(el("dt", { text: "Recurring goals" }), chips);
  }
  nodes.push(section("Profile", facts));

  if (persona.growth_opportunities?.length) {
    const list = el("ul", { cls: "growth" });
    for (const g of persona.growth_opportunities) list.append(el("li", { text: g }));
    nodes.push(section("Growth opportunities", list));
  }
  return nodes;
}

function renderBeliefs(data) {
  const box = $("beliefs");
  const shadow = data.shadow?.payload;
  const persona = data.persona?.payload;
  const nodes = [];
  if (shadow) nodes.push(renderGoals(shadow), renderPatterns(shadow));
  if (persona) nodes.push(...renderPersona(persona, shadow));
  const shown = nodes.filter(Boolean);
  if (!shown.length) {
    box.replaceChildren(el("p", { cls: "muted small", attrs: { "data-empty": "true" }, text: "Nothing yet: coachbus learns as you talk." }));
    return;
  }
  const when = [data.shadow?.created_at, data.persona?.created_at].filter(Boolean).map(ms);
  shown.push(el("p", { cls: "muted small updated", text: `As of ${new Date(Math.max(...when)).toLocaleTimeString()}` }));
  box.replaceChildren(...shown);
}

// ------------------------------------------------------------------ erase

async function eraseMyData() {
  try {
    await api("/v1/me", { method: "DELETE" });
  } catch (err) {
    showStatus(`Could not erase: ${err.message}`, "error");
    return;
  }
  for (const turn of state.turns.values()) turn.abort.abort();
  state.turns.clear();
  state.latest = null;
  $("messages").replaceChildren();
  $("empty-chat").hidden = false;
  clearTimeline();
  setSession(newSessionId());
  renderBeliefs({ shadow: null, persona: null });
  showStatus("Erased. Every agent is forgetting what it knew about you.", "ok");
  // Confirm from the server's side rather than trusting the local clear.
  loadBeliefs().catch(() => {});
}

// ------------------------------------------------------------------ wiring

function wire() {
  setSession(SESSION_RE.test(state.session) ? state.session : newSessionId());
  showHelpIn((navigator.language || "en").toLowerCase().startsWith("de") ? "de" : "en");

  $("key-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const key = $("key-input").value.trim();
    if (key && (await connect(key))) {
      $("key-input").value = "";
      $("composer-text").focus();
    }
  });
  $("change-key").addEventListener("click", () => {
    signOut();
    $("key-input").focus();
  });

  $("session-input").addEventListener("change", (e) => {
    const id = e.target.value.trim();
    if (SESSION_RE.test(id)) setSession(id);
    else {
      showStatus("A session id is 1–128 letters, digits or . _ : -", "error");
      e.target.value = state.session;
    }
  });
  $("session-form").addEventListener("submit", (e) => e.preventDefault());
  $("new-session").addEventListener("click", () => {
    setSession(newSessionId());
    showStatus("New session started.");
  });

  const text = $("composer-text");
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const message = text.value.trim();
    if (!message) return;
    text.value = "";
    sendMessage(message);
  });
  text.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $("composer").requestSubmit();
    }
  });

  $("refresh-beliefs").addEventListener("click", () => {
    if (!state.key) return showStatus("Enter your API key first.", "error");
    loadBeliefs().catch((err) => showStatus(err.message, "error"));
  });

  const dialog = $("erase-dialog");
  $("erase").addEventListener("click", () => {
    if (!state.key) return showStatus("Enter your API key first.", "error");
    dialog.returnValue = "";
    dialog.showModal();
  });
  dialog.addEventListener("close", () => {
    if (dialog.returnValue === "erase") eraseMyData();
  });

  if (state.key) connect(state.key);
  else $("key-input").focus();
}

wire();
