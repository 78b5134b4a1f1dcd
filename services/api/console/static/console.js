// Org Memory operator console: a small vanilla script, no build step, no dependencies.
// The API key lives in this closure only (never in a URL, a cookie or storage) and goes out as the X-Api-Key
// header of every data request. Data arrives as HTML fragments the server rendered with autoescaping; error
// messages are written with textContent. State-changing actions are POSTs with the key header.
(() => {
  "use strict";
  let apiKey = null;
  let adminId = "";
  const timers = new WeakMap();

  function headers(extra) {
    const h = { "X-Api-Key": apiKey, "X-Principal-Roles": "admin" };
    if (adminId) h["X-Principal-Id"] = adminId;
    return Object.assign(h, extra || {});
  }

  function setState(text) {
    const out = document.getElementById("key-state");
    if (out) out.textContent = text;
  }

  function showError(target, status, body) {
    let msg = body;
    try {
      const j = JSON.parse(body);
      const d = j.detail !== undefined ? j.detail : j;
      msg = typeof d === "string" ? d : JSON.stringify(d);
    } catch (_) { /* not JSON: show the text */ }
    const p = document.createElement("p");
    p.className = "bad";
    p.setAttribute("role", "alert");
    p.textContent = `HTTP ${status}: ${String(msg).slice(0, 500)}`;
    target.replaceChildren(p);
    if (status === 401 || status === 403) lock("The key was refused (" + status + "): type it again.");
  }

  async function request(method, url, body) {
    if (!apiKey) throw new Error("locked");
    const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }),
                   credentials: "omit", cache: "no-store" };
    if (body !== undefined) init.body = JSON.stringify(body);
    const resp = await fetch(url, init);
    return { ok: resp.ok, status: resp.status, text: await resp.text() };
  }

  // the next poll is due `data-poll` ms after the previous one started (not after it finished)
  function schedule(el, startedAt) {
    clearTimeout(timers.get(el));
    const every = Number(el.dataset.poll || 0);
    if (every > 0 && apiKey) {
      const wait = Math.max(200, every - (startedAt === undefined ? 0 : performance.now() - startedAt));
      timers.set(el, setTimeout(() => { if (el.isConnected) load(el); }, wait));
    }
  }

  async function load(el) {
    if (!apiKey || !el.dataset.fragment) return;
    const startedAt = performance.now();
    el.setAttribute("aria-busy", "true");
    try {
      const r = await request("GET", el.dataset.fragment);
      if (r.ok && el.dataset.swap === "outer") {  // the fragment replaces the element (a job polling itself)
        const tpl = document.createElement("template");
        tpl.innerHTML = r.text;
        const fresh = tpl.content.firstElementChild;
        el.replaceWith(tpl.content);
        if (fresh) {
          if (fresh.dataset.fragment) schedule(fresh);
          activate(fresh);
        }
        return;
      }
      if (r.ok) {
        el.innerHTML = r.text;  // server-rendered, autoescaped; CSP forbids inline script anyway
        activate(el);
      } else {
        showError(el, r.status, r.text);
        if (r.status === 401 || r.status === 403) return;
      }
    } catch (e) {
      if (String(e.message) !== "locked") showError(el, 0, String(e.message));
      return;
    } finally {
      el.removeAttribute("aria-busy");
    }
    schedule(el, startedAt);
  }

  function activate(root) {
    root.querySelectorAll("[data-fragment]").forEach((child) => { if (child !== root) schedule(child); });
  }

  function formValues(form) {
    const out = {};
    const forms = [form];
    if (form.dataset.include) forms.unshift(document.getElementById(form.dataset.include));
    for (const f of forms) {
      for (const el of f.elements) {
        if (!el.name || el.disabled) continue;
        const v = el.value.trim();
        if (v === "") continue;
        out[el.name] = el.type === "number" ? Number(v) : v;
      }
    }
    return out;
  }

  async function post(url, body, target, confirmText) {
    if (confirmText && !window.confirm(confirmText)) return;
    if (!apiKey) { setState("Locked: type the API key first."); return; }
    target.setAttribute("aria-busy", "true");
    try {
      const r = await request("POST", url, body);
      if (r.ok) {
        target.innerHTML = r.text;
        activate(target);
      } else {
        showError(target, r.status, r.text);
      }
    } finally {
      target.removeAttribute("aria-busy");
    }
  }

  function unlock(key, who) {
    apiKey = key;
    adminId = who;
    document.body.classList.add("unlocked");
    document.getElementById("lock").hidden = false;
    setState("Unlocked: the key is kept in this page's memory until you reload or forget it.");
    document.querySelectorAll("[data-auto]").forEach(load);
  }

  function lock(text) {
    apiKey = null;
    document.body.classList.remove("unlocked");
    const btn = document.getElementById("lock");
    if (btn) btn.hidden = true;
    setState(text || "Locked.");
  }

  document.addEventListener("DOMContentLoaded", () => {
    const keyForm = document.getElementById("key-form");
    keyForm.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const input = document.getElementById("api-key");
      const who = document.getElementById("admin-id").value.trim();
      const key = input.value;
      input.value = "";
      if (key) unlock(key, who);
    });
    document.getElementById("lock").addEventListener("click", () => lock("Locked: the key was forgotten."));

    document.querySelectorAll("form[data-get]").forEach((form) => {
      form.addEventListener("submit", (ev) => {
        ev.preventDefault();
        const target = document.getElementById(form.dataset.target);
        const qs = new URLSearchParams(formValues(form)).toString();
        target.dataset.fragment = form.dataset.get + (qs ? "?" + qs : "");
        if (!apiKey) { setState("Locked: type the API key first."); return; }
        load(target);
      });
    });
    document.querySelectorAll("form[data-post]").forEach((form) => {
      form.addEventListener("submit", (ev) => {
        ev.preventDefault();
        post(form.dataset.post, formValues(form), document.getElementById(form.dataset.target), form.dataset.confirm);
      });
    });
    // buttons inside fragments: <button data-post="url" data-body='{"json": 1}' data-target="id" data-confirm="…">
    document.addEventListener("click", (ev) => {
      const btn = ev.target.closest("button[data-post]");
      if (!btn) return;
      ev.preventDefault();
      let body = {};
      try { body = JSON.parse(btn.dataset.body || "{}"); } catch (_) { body = {}; }
      post(btn.dataset.post, body, document.getElementById(btn.dataset.target), btn.dataset.confirm);
    });
  });
})();
