// The console's only script (no framework, no build): live updates by server-sent events.
// Every element with data-events="<url>" listens on that url; the server's events put
// fragments it drew (escaped there) in place of elements by id. See overnight/console/events.py.
// The pages work without it; it only keeps them fresh.
"use strict";

(function () {
  function fragment(html) {
    const template = document.createElement("template");
    template.innerHTML = html;
    return template.content;
  }

  function replace(data) {
    const old = document.getElementById(data.id);
    const made = fragment(data.html);
    if (old) {
      old.replaceWith(made);
      return;
    }
    const parent = data.parent ? document.getElementById(data.parent) : null;
    if (!parent) return;
    if (data.where === "start") parent.prepend(made);
    else parent.append(made);
  }

  function remove(data) {
    const old = document.getElementById(data.id);
    if (old) old.remove();
  }

  function listen(element) {
    const url = element.getAttribute("data-events");
    if (!url || !url.startsWith("/") || url.startsWith("//")) return; // only this console's own streams
    const source = new EventSource(url);
    const live = () => document.body.setAttribute("data-live", "on");
    source.addEventListener("open", live);
    source.addEventListener("replace", (e) => replace(JSON.parse(e.data)));
    source.addEventListener("remove", (e) => remove(JSON.parse(e.data)));
    source.addEventListener("reload", () => window.location.reload());
    source.addEventListener("error", () => document.body.setAttribute("data-live", "off"));
  }

  function confirmations() {
    // A form with data-confirm="question" asks before it is sent.
    document.querySelectorAll("form[data-confirm]").forEach((form) => {
      form.addEventListener("submit", (e) => {
        if (!window.confirm(form.getAttribute("data-confirm"))) e.preventDefault();
      });
    });
  }

  function ago(when) {
    const seconds = (Date.now() - when.getTime()) / 1000;
    if (seconds < 60) return "just now";
    if (seconds < 3600) return Math.floor(seconds / 60) + " min ago";
    if (seconds < 86400) return (seconds / 3600).toFixed(1) + " h ago";
    return Math.floor(seconds / 86400) + " d ago";
  }

  function refreshTimes() {
    // <time class="ago" datetime="..."> says how long ago, as the server drew it, kept true.
    document.querySelectorAll("time.ago[datetime]").forEach((element) => {
      const when = new Date(element.getAttribute("datetime"));
      if (!isNaN(when.getTime())) element.textContent = ago(when);
    });
  }

  function start() {
    document.querySelectorAll("[data-events]").forEach(listen);
    confirmations();
    window.setInterval(refreshTimes, 30000);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
