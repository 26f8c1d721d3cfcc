// Worker task page: the lease's heartbeat. While the page is open it tells the server, on
// load and every few seconds, that this task is still being worked on, so the item is not
// handed to another worker as idle (docs/protocol.md, "Leases at the end of a round").
// It stops when the answer is sent or when the server says the task is no longer ours;
// a page whose task was answered elsewhere (a second tab, the Back button) or ran out
// says so, offers the way to the current task, and accepts no answer.
(function () {
  "use strict";
  var script = document.getElementById("lease-heartbeat");
  var form = document.getElementById("task-form");
  if (!script || !form) return;
  var csrf = form.querySelector('input[name="csrfmiddlewaretoken"]');
  var every = Math.max(1, parseFloat(script.dataset.every) || 30) * 1000;
  var timer = null;
  var sent = false;
  function stop() {
    if (timer !== null) { clearInterval(timer); timer = null; }
  }
  function stale() {
    stop();
    if (document.getElementById("stale-notice")) return;
    var notice = document.createElement("div");
    notice.id = "stale-notice";
    notice.className = "messages stale-notice";
    notice.setAttribute("role", "alert");
    var text = document.createElement("p");
    var gettext = window.gettext || String;
    text.textContent = gettext("This page is out of date: its task was already answered (on another page or tab) or its time ran out. Nothing you do here is recorded.");
    var link = document.createElement("a");
    link.className = "button button-primary";
    link.href = script.dataset.task;
    link.textContent = gettext("Go to your current task");
    notice.appendChild(text);
    notice.appendChild(link);
    form.parentNode.insertBefore(notice, form);
    form.querySelectorAll("button, input, select, textarea").forEach(function (el) { el.disabled = true; });
    notice.scrollIntoView({ block: "nearest" });
  }
  function renew() {
    if (sent) return;
    var body = new FormData();
    body.append("token", script.dataset.token);
    fetch(script.dataset.url, {
      method: "POST",
      body: body,
      credentials: "same-origin",
      headers: { "X-CSRFToken": csrf ? csrf.value : "" }
    }).then(function (response) {
      // 404: not ours; 403: not allowed to work; 429: too many for now (the next beat)
      if (response.status === 404 || response.status === 403) { stop(); return null; }
      return response.ok ? response.json() : null;
    }).then(function (answer) {
      // answered, expired or handed on: this page is stale
      if (answer && answer.renewed === false && !sent) stale();
    }).catch(function () { /* offline for a moment: the next beat tries again */ });
  }
  form.addEventListener("submit", function () { sent = true; stop(); });
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && timer !== null) renew();
  });
  // Back to a page the browser kept (its page cache): ask at once whether it is still ours.
  window.addEventListener("pageshow", function (event) {
    if (event.persisted) { sent = false; renew(); }
  });
  renew();
  timer = setInterval(renew, every);
})();
