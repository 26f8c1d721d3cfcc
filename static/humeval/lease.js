// Worker task page: the lease's heartbeat. While the page is open it tells the server, on
// load and every few seconds, that this task is still being worked on, so the item is not
// handed to another worker as idle (docs/protocol.md, "Leases at the end of a round").
// It stops when the answer is sent or when the server says the task is no longer ours.
(function () {
  "use strict";
  var script = document.getElementById("lease-heartbeat");
  var form = document.getElementById("task-form");
  if (!script || !form) return;
  var csrf = form.querySelector('input[name="csrfmiddlewaretoken"]');
  var every = Math.max(1, parseFloat(script.dataset.every) || 30) * 1000;
  var timer = null;
  function stop() {
    if (timer !== null) { clearInterval(timer); timer = null; }
  }
  function renew() {
    var body = new FormData();
    body.append("token", script.dataset.token);
    fetch(script.dataset.url, {
      method: "POST",
      body: body,
      credentials: "same-origin",
      headers: { "X-CSRFToken": csrf ? csrf.value : "" }
    }).then(function (response) {
      // 404: not ours; 409: answered, expired or handed on; 403: not allowed to work
      if (response.status === 404 || response.status === 409 || response.status === 403) stop();
    }).catch(function () { /* offline for a moment: the next beat tries again */ });
  }
  form.addEventListener("submit", stop);
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && timer !== null) renew();
  });
  renew();
  timer = setInterval(renew, every);
})();
