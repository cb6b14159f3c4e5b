// The report's script: decodes a group's data on first use and renders a rollout's
// tokens in chunks as they scroll into view. No network, no external assets.
(function () {
  'use strict';
  var CHUNK = 2000, NONE = 65535;
  var vocab = null; // parsed on first use: a long run's vocabulary is large
  var groups = {};

  function buf(s) {
    var bin = atob(s), u = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) u[i] = bin.charCodeAt(i);
    return u.buffer;
  }
  function group(g) {
    if (groups[g]) return groups[g];
    var d = JSON.parse(document.getElementById('data-' + g).textContent);
    d.seqs.forEach(function (s) {
      s.tok = new Int32Array(buf(s.tok));
      s.flags = new Uint8Array(buf(s.flags));
      s.slp = new Uint16Array(buf(s.slp));
      s.tlp = new Uint16Array(buf(s.tlp));
      s.tbd = new Uint16Array(buf(s.tbd));
      s.kall = new Uint16Array(buf(s.kall));
      s.kn = new Uint8Array(buf(s.kn));
      s.kid = new Int32Array(buf(s.kid));
      s.klp = new Uint16Array(buf(s.klp));
      s.koff = new Uint32Array(s.n + 1);
      for (var p = 0; p < s.n; p++) s.koff[p + 1] = s.koff[p] + s.kn[p];
      s.hintAt = {};
      s.hints.forEach(function (h) { (s.hintAt[h.pos] = s.hintAt[h.pos] || []).push(h.text); });
    });
    return (groups[g] = d);
  }
  function lp(q) { return q === NONE ? null : -q / 1000; }
  function text(id) {
    if (!vocab) vocab = JSON.parse(document.getElementById('vocab').textContent);
    var t = vocab[id];
    return t === undefined ? '\u27e8' + id + '\u27e9' : t;
  }
  function fmt(v) { return v === null ? '\u2013' : v.toFixed(3); }
  function heat(d) {
    var a = Math.min(Math.abs(d), 4) / 4 * 0.7 + 0.08;
    return (d < 0 ? 'hsla(0,85%,50%,' : 'hsla(215,85%,50%,') + a.toFixed(3) + ')';
  }

  function renderChunk(box, s, from) {
    var frag = document.createDocumentFragment(), to = Math.min(s.n, from + CHUNK);
    for (var p = from; p < to; p++) {
      (s.hintAt[p] || []).forEach(function (h) {
        var e = document.createElement('span');
        e.className = 'hint';
        e.textContent = 'hint: ' + h;
        frag.appendChild(e);
      });
      var f = s.flags[p], el = document.createElement('span');
      el.className = 't k' + (f & 7) + (f & 8 ? ' m' : '') + (f & 16 ? ' s' : '') + (f & 32 ? ' o' : '');
      el.dataset.p = p;
      el.textContent = text(s.tok[p]);
      // The heat colour only where the teacher's logprob is in its row: outside the
      // top-K the rows give a bound, and such tokens have a colour of their own.
      if ((f & 48) === 16) {
        var t = lp(s.tlp[p]), st = lp(s.slp[p]);
        if (t !== null && st !== null) el.style.background = heat(t - st);
      }
      frag.appendChild(el);
    }
    if (to === s.n) {
      (s.hintAt[s.n] || []).forEach(function (h) {
        var e = document.createElement('span');
        e.className = 'hint';
        e.textContent = 'hint: ' + h;
        frag.appendChild(e);
      });
    }
    box.appendChild(frag);
    box.dataset.rendered = to;
    return to;
  }

  var observer = 'IntersectionObserver' in window ? new IntersectionObserver(function (entries) {
    entries.forEach(function (en) {
      if (!en.isIntersecting) return;
      observer.unobserve(en.target);
      var box = en.target.parentNode;
      en.target.remove();
      more(box);
    });
  }, { rootMargin: '800px' }) : null;

  function seqOf(box) {
    var d = box.closest('details');
    return group(d.dataset.group).seqs[d.dataset.seq];
  }
  // more renders the next chunk of a rollout and, when tokens remain, a sentinel that
  // renders the following one when it comes near the viewport.
  function more(box) {
    var s = seqOf(box), from = +(box.dataset.rendered || 0);
    if (from >= s.n && s.n > 0) return;
    var to = renderChunk(box, s, from);
    if (to < s.n) {
      var m = document.createElement('span');
      m.className = 'more';
      m.textContent = '\u2026 ' + (s.n - to) + ' more tokens';
      box.appendChild(m);
      if (observer) observer.observe(m); else m.onclick = function () { m.remove(); more(box); };
    }
  }
  document.querySelectorAll('details.seq').forEach(function (d) {
    d.addEventListener('toggle', function () {
      var box = d.querySelector('.toks');
      if (d.open && !box.dataset.rendered) more(box);
    });
  });

  var tip = document.getElementById('tip');
  function row(cells, cls) {
    var tr = document.createElement('tr');
    if (cls) tr.className = cls;
    cells.forEach(function (c) { var td = document.createElement('td'); td.textContent = c; tr.appendChild(td); });
    return tr;
  }
  // describe fills the tooltip for position p of sequence s.
  function describe(s, p) {
    tip.textContent = '';
    var f = s.flags[p], t = lp(s.tlp[p]), st = lp(s.slp[p]), k = s.kn[p], all = s.kall[p];
    var head = document.createElement('div');
    head.className = 'tip-head';
    head.textContent = 'position ' + p + ', token ' + s.tok[p] + ' ' + JSON.stringify(text(s.tok[p])) +
      ': student logprob ' + fmt(st);
    tip.appendChild(head);
    if (f & 16) {
      var line = document.createElement('div');
      if (f & 32) {
        line.className = 'tip-outside';
        line.textContent = 'outside the teacher\u2019s top-K (rank > ' + all + '), logprob \u2264 ' + fmt(lp(s.tbd[p])) +
          (t !== null ? '; the teacher\u2019s logprob of this token, given apart from the rows: ' + fmt(t) +
            (st !== null ? ', \u0394 ' + fmt(t - st) : '') : '');
      } else {
        var rank = 0;
        for (var r = 0; r < k; r++) if (s.kid[s.koff[p] + r] === s.tok[p]) rank = r + 1;
        line.className = 'tip-teacher';
        line.textContent = 'teacher logprob ' + fmt(t) + (rank ? ' (rank ' + rank + ')' : ' (rank > ' + k + ', in the top ' + all + ')') +
          (t !== null && st !== null ? ', \u0394 ' + fmt(t - st) : '');
      }
      tip.appendChild(line);
    }
    if (k > 0) {
      var cap = document.createElement('div');
      cap.className = 'tip-count';
      cap.textContent = 'the teacher\u2019s top-K: ' + k + ' of ' + all + ' entries shown';
      tip.appendChild(cap);
      var tb = document.createElement('table');
      tb.className = 'topk';
      tb.appendChild(row(['rank', 'token', 'id', 'teacher logprob']));
      for (var i = 0; i < k; i++) {
        var id = s.kid[s.koff[p] + i];
        tb.appendChild(row([String(i + 1), JSON.stringify(text(id)), String(id), fmt(lp(s.klp[s.koff[p] + i]))],
          id === s.tok[p] ? 'sampled' : ''));
      }
      tip.appendChild(tb);
    }
  }
  document.addEventListener('mouseover', function (ev) {
    var el = ev.target.closest && ev.target.closest('.toks .t');
    if (!el) { tip.hidden = true; return; }
    describe(seqOf(el.parentNode), +el.dataset.p);
    tip.hidden = false;
    var x = Math.min(ev.clientX + 12, window.innerWidth - tip.offsetWidth - 8);
    var y = ev.clientY + 16;
    if (y + tip.offsetHeight > window.innerHeight) y = Math.max(0, ev.clientY - tip.offsetHeight - 8);
    tip.style.left = x + 'px';
    tip.style.top = y + 'px';
  });

  // For scripted checks: open every rollout and render all of its tokens.
  window.opdReport = {
    renderAll: function () {
      document.querySelectorAll('details.seq').forEach(function (d) {
        d.open = true;
        var box = d.querySelector('.toks'), s = seqOf(box);
        box.querySelectorAll('.more').forEach(function (m) { if (observer) observer.unobserve(m); m.remove(); });
        var from = +(box.dataset.rendered || 0);
        while (from < s.n) from = renderChunk(box, s, from);
      });
    }
  };
  // A page closed by a failed run says so at its top, where its notice of being
  // incomplete was (without the script, that notice stays and the failure is at the end).
  var failed = document.getElementById('run-failed');
  if (failed) {
    var status = document.getElementById('run-status');
    status.querySelector('.incomplete').hidden = true;
    status.appendChild(failed);
  }
  document.documentElement.dataset.ready = '1';
})();
