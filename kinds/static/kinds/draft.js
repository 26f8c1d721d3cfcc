// A task's draft in this tab's sessionStorage under "<prefix>:<token>" (the assignment's
// token), so that a reload keeps the worker's marks. Reading one forgets the drafts of
// other tasks with the same prefix. Storage can be blocked (some frames) or full: then
// nothing is kept and load() gives null.
window.humevalDraft = function (prefix, token) {
  "use strict";
  var key = token ? prefix + ":" + token : null;
  function storage() {
    try { return key ? window.sessionStorage : null; } catch (e) { return null; }
  }
  return {
    save: function (value) {
      var st = storage();
      if (!st) return;
      try { st.setItem(key, JSON.stringify(value)); } catch (e) { /* full: nothing kept */ }
    },
    load: function () {
      var st = storage();
      if (!st) return null;
      try {
        for (var i = st.length - 1; i >= 0; i--) {
          var k = st.key(i);
          if (k && k.indexOf(prefix + ":") === 0 && k !== key) st.removeItem(k);
        }
        return JSON.parse(st.getItem(key) || "null");
      } catch (e) { return null; }
    }
  };
};
