// Error span annotation (kinds/error_spans.py, ESA): the worker marks error spans in the
// output (mouse, touch or keyboard), each minor or major with an optional category, then
// scores the output 0-100. Offsets sent to the server are Unicode code points of the output,
// as Python indexes it; JavaScript strings count UTF-16 units, so every offset is converted.
(function () {
  "use strict";
  var root = document.querySelector("section.esa");
  var source = document.getElementById("esa-output");
  if (!root || !source) return;
  var text = JSON.parse(source.textContent);
  var box = document.getElementById("esa-text");
  var bar = document.getElementById("esa-bar");
  var quote = document.getElementById("esa-quote");
  var problem = document.getElementById("esa-problem");
  var category = document.getElementById("esa-category");
  var list = document.getElementById("esa-list");
  var count = document.getElementById("esa-count");
  var status = document.getElementById("esa-status");
  var hidden = document.getElementById("esa-spans");
  var scoreNumber = document.getElementById("esa-score");
  var scoreRange = document.getElementById("esa-score-range");
  var maxSpans = parseInt(box.getAttribute("data-max-spans"), 10) || 100;
  // Worker-facing strings through Django's JavaScript catalog (annotator:jsi18n), English
  // when it is absent.
  var gettext = window.gettext || function (s) { return s; };
  var fmt = function (s, o) { return window.interpolate ? window.interpolate(s, o, true) : s.replace(/%\((\w+)\)s/g, function (_, k) { return o[k]; }); };
  var LABEL = { minor: gettext("Minor"), major: gettext("Major") };
  // Judge-prefilled suggestions (kinds/span_prefill.py): pre-marked spans the worker keeps
  // (accepted), re-grades or moves the boundaries of (edited; "resized" when its start or end
  // moved) or removes (deleted); every span says where it came from.
  var suggestedNode = document.getElementById("esa-suggestions");
  var suggested = suggestedNode ? JSON.parse(suggestedNode.textContent) : null;
  var deleted = [];      // suggestions removed: {start, end, severity, suggestion}
  var moving = null;     // the suggestion whose new passage the next selection gives ("Move")
  var moveHere = document.getElementById("esa-move-here");

  // --- code points <-> UTF-16 -------------------------------------------------------------
  var cpToU16 = [];
  var u16ToCp = new Array(text.length + 1);
  (function () {
    var i = 0, cp = 0;
    while (i < text.length) {
      cpToU16.push(i);
      u16ToCp[i] = cp;
      var c = text.charCodeAt(i);
      if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
        var d = text.charCodeAt(i + 1);
        if (d >= 0xdc00 && d <= 0xdfff) { u16ToCp[i + 1] = cp; i += 2; cp += 1; continue; }
      }
      i += 1;
      cp += 1;
    }
    cpToU16.push(text.length);
    u16ToCp[text.length] = cp;
  })();
  var nCp = cpToU16.length - 1;
  function floorCp(u) { return u16ToCp[u]; }
  function ceilCp(u) { var c = u16ToCp[u]; return cpToU16[c] === u ? c : c + 1; }
  function slice(start, end) { return text.slice(cpToU16[start], cpToU16[end]); }

  // Words (runs of non-space) in code points, for the keyboard.
  var words = [];
  text.replace(/\S+/g, function (w, at) {
    words.push({ start: floorCp(at), end: ceilCp(at + w.length) });
    return w;
  });

  // --- state ---------------------------------------------------------------------------------
  var spans = [];        // {start, end, severity, category}, code points, sorted, disjoint
  var pending = null;    // {start, end} the passage about to be marked
  var kb = null;         // {start, end} the keyboard's selection

  function overlapping(start, end, except) {
    return spans.filter(function (s) { return s !== except && s.start < end && start < s.end; });
  }

  // A suggestion's action from how it differs from what the judge proposed.
  function judgeState(t) {
    var g = suggested[t.suggestion];
    t.resized = t.start !== g.start || t.end !== g.end;
    t.action = t.resized || t.severity !== g.severity ? "edited" : "accepted";
  }

  function say(message) { status.textContent = message; }

  function short(t) {
    var one = t.replace(/\s+/g, " ");
    return one.length > 80 ? one.slice(0, 77) + "…" : one;
  }

  // --- the DOM -------------------------------------------------------------------------------
  function render() {
    box.textContent = "";
    var at = 0;
    spans.forEach(function (s, k) {
      if (s.start > at) box.appendChild(document.createTextNode(slice(at, s.start)));
      var mark = document.createElement("mark");
      mark.className = "esa-span esa-" + s.severity;
      mark.setAttribute("data-index", String(k));
      mark.setAttribute("tabindex", "0");
      mark.title = LABEL[s.severity] + " error" + (s.category ? " (" + s.category + ")" : "");
      mark.textContent = slice(s.start, s.end);
      box.appendChild(mark);
      at = s.end;
    });
    if (at < nCp) box.appendChild(document.createTextNode(slice(at, nCp)));

    list.textContent = "";
    spans.forEach(function (s, k) {
      var li = document.createElement("li");
      li.className = "esa-item esa-" + s.severity;
      var what = document.createElement("span");
      what.className = "esa-severity";
      what.textContent = LABEL[s.severity] + (s.category ? " · " + s.category : "") +
        (s.origin === "judge" ? " " + gettext("(suggested)") : "");
      var q = document.createElement("q");
      q.dir = "auto";
      q.textContent = short(slice(s.start, s.end));
      var remove = document.createElement("button");
      remove.type = "button";
      remove.className = "esa-remove";
      remove.setAttribute("data-index", String(k));
      remove.textContent = gettext("Remove");
      remove.setAttribute("aria-label", fmt(s.severity === "major" ? gettext("Remove major error %(quote)s") : gettext("Remove minor error %(quote)s"), { quote: q.textContent }));
      li.appendChild(what);
      li.appendChild(document.createTextNode(" "));
      li.appendChild(q);
      li.appendChild(document.createTextNode(" "));
      li.appendChild(remove);
      if (s.origin === "judge") {
        var other = s.severity === "minor" ? "major" : "minor";
        var toggle = document.createElement("button");
        toggle.type = "button";
        toggle.className = "esa-toggle";
        toggle.setAttribute("data-index", String(k));
        toggle.textContent = other === "major" ? gettext("Make major") : gettext("Make minor");
        li.appendChild(document.createTextNode(" "));
        li.appendChild(toggle);
        var move = document.createElement("button");
        move.type = "button";
        move.className = "esa-move";
        move.setAttribute("data-index", String(k));
        move.setAttribute("aria-pressed", s === moving ? "true" : "false");
        move.textContent = gettext("Move");
        move.setAttribute("aria-label", fmt(gettext("Move the suggested error %(quote)s"), { quote: q.textContent }));
        li.appendChild(document.createTextNode(" "));
        li.appendChild(move);
      }
      list.appendChild(li);
    });
    count.textContent = String(spans.length);
    var sent = spans.map(function (s) {
      var out = { start: s.start, end: s.end, severity: s.severity, category: s.category || null,
                  text: slice(s.start, s.end) };
      if (suggested) { out.origin = s.origin; out.action = s.action; }
      if (s.origin === "judge") out.suggestion = s.suggestion;
      if (s.origin === "judge" && s.action === "edited") out.resized = !!s.resized;
      return out;
    });
    deleted.forEach(function (d) {
      sent.push({ start: d.start, end: d.end, severity: d.severity, text: slice(d.start, d.end),
                  origin: "judge", action: "deleted", suggestion: d.suggestion });
    });
    hidden.value = JSON.stringify(sent);
    save();
  }

  // UTF-16 offset of a DOM point inside the box (the box holds only the output's text).
  function u16Of(node, offset) {
    var r = document.createRange();
    r.setStart(box, 0);
    r.setEnd(node, offset);
    return r.toString().length;
  }

  // DOM point of a UTF-16 offset.
  function domPoint(u) {
    var walker = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
    var node, at = 0, last = null;
    while ((node = walker.nextNode())) {
      if (u <= at + node.length) return { node: node, offset: u - at };
      at += node.length;
      last = node;
    }
    return last ? { node: last, offset: last.length } : { node: box, offset: 0 };
  }

  function selectDom(start, end) {
    var a = domPoint(cpToU16[start]), b = domPoint(cpToU16[end]);
    var sel = window.getSelection();
    if (sel) sel.setBaseAndExtent(a.node, a.offset, b.node, b.offset);
  }

  function clearDom() {
    var sel = window.getSelection();
    if (sel && sel.rangeCount && box.contains(sel.anchorNode)) sel.removeAllRanges();
  }

  // --- the passage to mark -------------------------------------------------------------------
  function setPending(start, end) {
    pending = { start: start, end: end };
    var problemText = "";
    if (overlapping(start, end, moving).length) problemText = gettext("It overlaps an error already marked: remove that one first.");
    else if (!moving && spans.length >= maxSpans) problemText = fmt(gettext("At most %(n)s errors can be marked."), { n: maxSpans });
    pending.ok = !problemText;
    quote.textContent = short(slice(start, end));
    problem.textContent = problemText;
    bar.querySelectorAll("button.esa-add").forEach(function (b) { b.disabled = !pending.ok; b.hidden = !!moving; });
    if (moveHere) { moveHere.hidden = !moving; moveHere.disabled = !pending.ok; }
    bar.hidden = false;
    say(fmt(gettext("Selected %(quote)s."), { quote: quote.textContent }) + " " + (problemText || (moving ? "" : gettext("Press m for minor, M for major."))));
  }

  function cancel() {
    pending = null;
    bar.hidden = true;
  }

  // A mouse or touch selection is widened to whole words: a start or end that falls inside
  // a word (letters, digits, their marks) moves to that word's edge.
  var WORD = /[\p{L}\p{N}\p{M}]/u;
  function wordAt(i) { return i >= 0 && i < nCp && WORD.test(slice(i, i + 1)); }
  function snap(start, end) {
    while (start > 0 && wordAt(start - 1) && wordAt(start)) start -= 1;
    while (end < nCp && wordAt(end - 1) && wordAt(end)) end += 1;
    return { start: start, end: end };
  }

  function fromSelection(final) {
    var sel = window.getSelection();
    if (!sel || sel.rangeCount === 0 || sel.isCollapsed) return;
    var r = sel.getRangeAt(0);
    if (!r.intersectsNode(box)) return;
    // A drag that runs past the text (into the list below, say) is cut at the text's edges.
    var all = document.createRange();
    all.selectNodeContents(box);
    var startU = r.compareBoundaryPoints(Range.START_TO_START, all) <= 0 ? 0 : u16Of(r.startContainer, r.startOffset);
    var endU = r.compareBoundaryPoints(Range.END_TO_END, all) >= 0 ? text.length : u16Of(r.endContainer, r.endOffset);
    var start = floorCp(startU);
    var end = ceilCp(endU);
    if (kb && pending && start === kb.start && end === kb.end) return; // the keyboard's own
    // Trim surrounding white space (a double-click often takes the space after a word);
    // a selection of white space only is kept (the spot where something is missing).
    var s = start, e = end;
    while (s < e && /\s/.test(slice(s, s + 1))) s += 1;
    while (e > s && /\s/.test(slice(e - 1, e))) e -= 1;
    if (s < e) { start = s; end = e; }
    if (s < e) { var snapped = snap(start, end); start = snapped.start; end = snapped.end; }
    if (start < end) {
      kb = { start: start, end: end };
      if (final) selectDom(start, end); // show the widened passage once the drag is over
      setPending(start, end);
    }
  }

  function add(severity) {
    if (!pending || !pending.ok || moving) return;
    var s = { start: pending.start, end: pending.end, severity: severity,
              category: category && category.value ? category.value : null };
    if (suggested) { s.origin = "worker"; s.action = "new"; }
    spans.push(s);
    spans.sort(function (a, b) { return a.start - b.start; });
    kb = { start: s.end, end: s.end };
    if (category) category.selectedIndex = 0; // a category belongs to one span
    cancel();
    clearDom();
    render();
    say(fmt(severity === "major" ? gettext("Marked major error: %(quote)s.") : gettext("Marked minor error: %(quote)s."), { quote: short(slice(s.start, s.end)) }));
  }

  function removeAt(k) {
    var s = spans[k];
    if (!s) return;
    if (s === moving) stopMoving();
    spans.splice(k, 1);
    if (s.origin === "judge") {
      var g = suggested[s.suggestion];
      deleted.push({ start: g.start, end: g.end, severity: g.severity, suggestion: s.suggestion });
    }
    render();
    say(fmt(s.severity === "major" ? gettext("Removed major error: %(quote)s.") : gettext("Removed minor error: %(quote)s."), { quote: short(slice(s.start, s.end)) }));
  }

  // --- a suggestion's boundaries ------------------------------------------------------------
  // Touch and mouse: "Move" on the suggestion in the list, select the passage it should
  // cover (widened to words as any selection), "Move here". Keyboard: on the focused mark,
  // an arrow moves its end and Shift+arrow its start by one character, forward or back in
  // reading order (in right-to-left text the left arrow goes forward). Offsets are code
  // points, as everywhere here.
  function resized(t, start, end) {
    t.start = start;
    t.end = end;
    judgeState(t);
    spans.sort(function (a, b) { return a.start - b.start; }); // moved past another one
    render();
    say(fmt(gettext("Error now covers: %(quote)s."), { quote: short(slice(start, end)) }));
  }

  function startMoving(t) {
    moving = t;
    cancel();
    clearDom();
    render();
    say(gettext("Select the passage this error should cover, then press Move here."));
  }

  function stopMoving() {
    moving = null;
    bar.querySelectorAll("button.esa-add").forEach(function (b) { b.hidden = false; });
    if (moveHere) moveHere.hidden = true;
  }

  function moveTo() {
    var t = moving;
    if (!t || !pending || !pending.ok) return;
    var start = pending.start, end = pending.end;
    stopMoving();
    cancel();
    clearDom();
    resized(t, start, end);
  }

  function markKey(event, mark) {
    var t = spans[parseInt(mark.getAttribute("data-index"), 10)];
    if (!t || t.origin !== "judge" || (event.key !== "ArrowRight" && event.key !== "ArrowLeft")) return false;
    var forward = (event.key === "ArrowRight") !== (window.getComputedStyle(box).direction === "rtl");
    var step = forward ? 1 : -1;
    var start = event.shiftKey ? t.start + step : t.start;
    var end = event.shiftKey ? t.end : t.end + step;
    if (start < 0 || end > nCp || start >= end) return true;
    if (overlapping(start, end, t).length) {
      say(gettext("It overlaps an error already marked: remove that one first."));
      return true;
    }
    resized(t, start, end);
    var again = box.querySelector('mark.esa-span[data-index="' + spans.indexOf(t) + '"]');
    if (again) again.focus({ preventScroll: true });
    return true;
  }

  // --- keyboard selection ----------------------------------------------------------------
  function kbSet(start, end) {
    kb = { start: start, end: end };
    selectDom(start, end);
    setPending(start, end);
  }

  function nextWord(from) {
    for (var i = 0; i < words.length; i++) if (words[i].start >= from) return words[i];
    return null;
  }

  function prevWord(before) {
    for (var i = words.length - 1; i >= 0; i--) if (words[i].end <= before) return words[i];
    return null;
  }

  function kbKey(event) {
    var key = event.key;
    if (key !== "ArrowRight" && key !== "ArrowLeft" && key !== "Home" && key !== "End") return false;
    if (!words.length) return true;
    var w;
    if (!kb || key === "Home") { w = words[0]; kbSet(w.start, w.end); return true; }
    if (key === "End") { w = words[words.length - 1]; kbSet(w.start, w.end); return true; }
    // "right" means forward in the text: in right-to-left text (the box's resolved direction,
    // dir="auto") the left arrow goes forward, as the caret does
    var right = (key === "ArrowRight") !== (window.getComputedStyle(box).direction === "rtl");
    if (kb.start === kb.end) { // after a mark: the caret sits at its end; take a whole word
      w = right ? nextWord(kb.end) : prevWord(kb.start);
      if (w) kbSet(w.start, w.end);
      return true;
    }
    if (event.shiftKey && (event.ctrlKey || event.metaKey)) {
      // one character more or less at the end
      var end = right ? Math.min(nCp, kb.end + 1) : Math.max(kb.start + 1, kb.end - 1);
      if (kb.end > kb.start || right) kbSet(kb.start, Math.max(end, kb.start + 1));
      return true;
    }
    if (event.shiftKey) {
      if (right) {
        for (var i = 0; i < words.length; i++) {
          if (words[i].end > kb.end) { kbSet(kb.start, words[i].end); return true; }
        }
      } else {
        for (var j = words.length - 1; j >= 0; j--) {
          if (words[j].end < kb.end && words[j].end > kb.start) { kbSet(kb.start, words[j].end); return true; }
        }
      }
      return true;
    }
    w = right ? nextWord(kb.end > kb.start ? kb.end : kb.start) : prevWord(kb.start);
    if (w) kbSet(w.start, w.end);
    return true;
  }

  function isField(el) {
    return el && (el.tagName === "INPUT" || el.tagName === "SELECT" || el.tagName === "TEXTAREA");
  }

  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (isField(target) || event.altKey) return;
    var inBox = box.contains(target);
    var handled = false;
    var onMark = inBox && target.classList && target.classList.contains("esa-span");
    if (onMark && !event.ctrlKey && !event.metaKey && markKey(event, target)) {
      handled = true;
    } else if (inBox && kbKey(event)) {
      handled = true;
    } else if (event.ctrlKey || event.metaKey) {
      return;
    } else if ((event.key === "m" || event.key === "M") && pending) {
      add(event.key === "M" ? "major" : "minor");
      box.focus({ preventScroll: true });
      handled = true;
    } else if (event.key === "Escape" && (pending || moving)) {
      cancel();
      clearDom();
      if (moving) { stopMoving(); render(); }
      say(gettext("Cancelled."));
      handled = true;
    } else if (event.key === "Delete" || event.key === "Backspace") {
      if (target && target.classList && target.classList.contains("esa-span")) {
        removeAt(parseInt(target.getAttribute("data-index"), 10));
        box.focus({ preventScroll: true });
        handled = true;
      } else if (inBox && kb) {
        var hit = overlapping(kb.start, Math.max(kb.end, kb.start + 1));
        hit.forEach(function (s) { removeAt(spans.indexOf(s)); });
        if (pending) kbSet(kb.start, kb.end);
        handled = hit.length > 0;
      }
    } else if (inBox && category && /^[0-9]$/.test(event.key) && pending) {
      var n = parseInt(event.key, 10);
      if (n < category.options.length) {
        category.selectedIndex = n;
        say(fmt(gettext("Category: %(name)s."), { name: category.options[n].text }));
      }
      handled = true;
    }
    if (handled) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);

  // --- pointer and touch -------------------------------------------------------------------
  var timer = null;
  document.addEventListener("selectionchange", function () {
    clearTimeout(timer);
    timer = setTimeout(fromSelection, 60);
  });
  document.addEventListener("mouseup", function (event) {
    if (bar.contains(event.target)) return;
    clearTimeout(timer);
    fromSelection(true);
  });
  box.addEventListener("touchend", function () {
    clearTimeout(timer);
    timer = setTimeout(function () { fromSelection(true); }, 120);
  });
  // Pressing a button of the bar must not drop the selection it acts on.
  bar.addEventListener("mousedown", function (event) {
    if (event.target.tagName !== "SELECT" && event.target.tagName !== "OPTION") event.preventDefault();
  });
  bar.addEventListener("click", function (event) {
    var button = event.target.closest("button");
    if (!button) return;
    if (button.classList.contains("esa-add")) add(button.getAttribute("data-severity"));
    else if (button === moveHere) moveTo();
    else if (button.id === "esa-cancel") {
      cancel();
      clearDom();
      if (moving) { stopMoving(); render(); }
    }
  });
  list.addEventListener("click", function (event) {
    var toggle = event.target.closest("button.esa-toggle");
    if (toggle) {
      var t = spans[parseInt(toggle.getAttribute("data-index"), 10)];
      t.severity = t.severity === "minor" ? "major" : "minor";
      judgeState(t);
      render();
      say(fmt(t.severity === "major" ? gettext("Now a major error: %(quote)s.") : gettext("Now a minor error: %(quote)s."), { quote: short(slice(t.start, t.end)) }));
      var again = list.querySelector('button.esa-toggle[data-index="' + toggle.getAttribute("data-index") + '"]');
      if (again) again.focus();
      return;
    }
    var mover = event.target.closest("button.esa-move");
    if (mover) {
      var m = spans[parseInt(mover.getAttribute("data-index"), 10)];
      if (m === moving) { stopMoving(); render(); } else startMoving(m);
      var same = list.querySelector('button.esa-move[data-index="' + spans.indexOf(m) + '"]');
      if (same) same.focus();
      return;
    }
    var button = event.target.closest("button.esa-remove");
    if (!button) return;
    removeAt(parseInt(button.getAttribute("data-index"), 10));
    box.focus();
  });
  // A new press in the text starts a new selection.
  box.addEventListener("mousedown", function () { if (pending) cancel(); });

  // --- the score ---------------------------------------------------------------------------
  // Unset until touched: the slider shows no thumb and the line beside it says so; a submit
  // without a score names what is missing.
  var scoreState = document.getElementById("esa-score-state");
  var scoreError = document.getElementById("esa-score-error");
  var MISSING = gettext("Give the response an overall score from 0 to 100: drag the slider or type a number.");
  function scoreShown() {
    var set = scoreNumber.value !== "";
    scoreRange.classList.toggle("unset", !set);
    if (scoreState) scoreState.textContent = set ? fmt(gettext("Score: %(score)s"), { score: scoreNumber.value }) : gettext("Not scored yet");
    scoreNumber.setCustomValidity(set || scoreNumber.disabled ? "" : MISSING);
    if (set && scoreError) scoreError.hidden = true;
  }
  scoreRange.addEventListener("input", function () {
    scoreNumber.value = scoreRange.value;
    scoreShown();
  });
  scoreNumber.addEventListener("input", function () {
    var v = parseInt(scoreNumber.value, 10);
    if (String(v) === scoreNumber.value && v >= 0 && v <= 100) scoreRange.value = String(v);
    scoreShown();
  });
  scoreNumber.addEventListener("invalid", function () {
    if (!scoreError) return;
    scoreError.textContent = scoreNumber.value === "" ? MISSING : gettext("A score is a whole number from 0 to 100.");
    scoreError.hidden = false;
  });

  // --- reload: the marks and the score are kept in this tab's sessionStorage, per task ------
  var tokenInput = document.querySelector('form input[name="token"]');
  var draft = window.humevalDraft("humeval-esa", tokenInput && tokenInput.value);
  function save() {
    draft.save({ text: text, spans: spans, deleted: deleted, score: scoreNumber.value });
  }
  function restore() {
    var kept = draft.load();
    if (!kept || kept.text !== text || !Array.isArray(kept.spans)) return;
    if (suggested) { // the suggestions' state as left: kept only when every one is accounted for
      var seen = {};
      kept.spans.concat(kept.deleted || []).forEach(function (s) {
        if (s && s.origin === "judge") seen[s.suggestion] = true;
      });
      if (Object.keys(seen).length !== suggested.length) return;
      deleted = (kept.deleted || []).filter(function (d) { return suggested[d.suggestion]; });
    }
    kept.spans.forEach(function (s) {
      var ok = s && Number.isInteger(s.start) && Number.isInteger(s.end) && s.start >= 0 &&
        s.start < s.end && s.end <= nCp && LABEL[s.severity] && !overlapping(s.start, s.end).length &&
        spans.length < maxSpans;
      var known = s.category && category &&
        Array.prototype.some.call(category.options, function (o) { return o.value === s.category; });
      var one = { start: s.start, end: s.end, severity: s.severity, category: known ? s.category : null };
      if (suggested) { one.origin = s.origin; one.action = s.action; one.suggestion = s.suggestion; }
      if (ok && one.origin === "judge" && suggested[one.suggestion]) judgeState(one);
      if (ok) spans.push(one);
    });
    spans.sort(function (a, b) { return a.start - b.start; });
    if (/^[0-9]{1,3}$/.test(kept.score || "") && parseInt(kept.score, 10) <= 100) {
      scoreNumber.value = kept.score;
    }
  }
  scoreNumber.addEventListener("input", save);
  scoreRange.addEventListener("input", save);

  restore();
  if (suggested && !spans.length && !deleted.length) {
    suggested.forEach(function (g, k) {
      spans.push({ start: g.start, end: g.end, severity: g.severity, category: null,
                   origin: "judge", action: "accepted", suggestion: k });
    });
  }
  if (scoreNumber.value !== "") scoreRange.value = scoreNumber.value;
  scoreShown();
  render();
})();
