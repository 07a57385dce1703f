// planbus web view: live updates of the server-rendered pages through
// server-sent events. Plain JavaScript, no build step.
(function () {
  'use strict';

  var STATES = ['pending', 'running', 'retrying', 'succeeded', 'failed', 'timeout', 'skipped', 'cancelled'];
  var page = document.body.dataset.page;

  function live(on) {
    var el = document.getElementById('live');
    if (!el) return;
    el.classList.toggle('on', on);
    el.classList.toggle('off', !on);
    el.textContent = on ? 'live' : 'not live';
  }

  // stream opens an event stream with a handler per event name. The
  // browser reconnects by itself after an error, unless the handler closes
  // the stream.
  function stream(url, handlers) {
    var es = new EventSource(url);
    es.onopen = function () { live(true); };
    es.onerror = function () { live(false); };
    Object.keys(handlers).forEach(function (name) {
      es.addEventListener(name, function (e) {
        handlers[name](e.data ? JSON.parse(e.data) : null, es);
      });
    });
    return es;
  }

  function duration(ms) {
    if (!ms) return '';
    if (ms < 1000) return Math.round(ms) + 'ms';
    if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 3 : 1).replace(/\.?0+$/, '') + 's';
    return Math.floor(ms / 60000) + 'm' + Math.round((ms % 60000) / 1000) + 's';
  }

  // The requests page: its table is fetched again when requests change,
  // and every half minute for the ages.
  function requestsPage() {
    var box = document.getElementById('requests');
    var busy = false;
    function reload() {
      if (busy) return;
      busy = true;
      var q = new URLSearchParams(location.search);
      q.set('partial', '1');
      fetch('/requests?' + q.toString(), { credentials: 'same-origin' })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) { box.innerHTML = html; })
        .catch(function () { live(false); })
        .then(function () { busy = false; });
    }
    stream('/events', { changed: reload });
    setInterval(reload, 30000);
  }

  // A request's page reloads when the request changes, until it ends.
  function requestPage() {
    var facts = document.getElementById('facts');
    if (!facts || facts.dataset.ended === 'true') { live(false); return; }
    var q = new URLSearchParams({ request: facts.dataset.request, status: facts.dataset.status, plan: facts.dataset.plan });
    stream('/events?' + q.toString(), {
      changed: function () { location.reload(); }
    });
  }

  // The plan page: tools coloured by state on the drawn DAG and in the
  // table, the critical path marked, a tool's panel on click.
  function planPage() {
    var facts = document.getElementById('facts');
    var plan = facts.dataset.plan;
    var renderedState = facts.dataset.state;
    var detail = document.getElementById('detail');
    var openTool = null;

    function node(id) { return document.getElementById('t/' + id); }
    function row(id) { return document.querySelector('#tools tr[data-tool="' + CSS.escape(id) + '"]'); }

    function paint(t) {
      var n = node(t.id);
      if (n) {
        STATES.forEach(function (s) { n.classList.remove('st-' + s); });
        n.classList.add('st-' + t.state);
      }
      var r = row(t.id);
      if (!r) return;
      var changed = r.dataset.state !== t.state;
      r.dataset.state = t.state;
      var badge = r.querySelector('.state .badge');
      badge.className = 'badge st-' + t.state;
      badge.textContent = t.state;
      if (t.attempt !== undefined) {
        var a = r.querySelector('.attempt');
        a.textContent = t.attempt + '/' + a.textContent.split('/')[1];
      }
      if (t.skill) r.querySelector('.skill').textContent = t.skill;
      if (t.worker) r.querySelector('.worker').textContent = t.worker;
      if (t.durationMs) r.querySelector('.duration').textContent = duration(t.durationMs);
      if (changed && openTool === t.id) show(t.id, false);
    }

    function critical(ids) {
      document.querySelectorAll('#dag .crit').forEach(function (el) { el.classList.remove('crit'); });
      document.querySelectorAll('#tools tr[data-critical]').forEach(function (r) { delete r.dataset.critical; });
      (ids || []).forEach(function (id, i) {
        var n = node(id);
        if (n) n.classList.add('crit');
        var r = row(id);
        if (r) r.dataset.critical = String(i + 1);
        if (i > 0) {
          var e = document.getElementById('e/' + ids[i - 1] + '/' + id);
          if (e) e.classList.add('crit');
        }
      });
    }

    function planState(state) {
      var b = document.getElementById('plan-state');
      b.className = 'badge st-' + state;
      b.textContent = state;
      facts.dataset.live = state;
    }

    function show(id, remember) {
      openTool = id;
      document.querySelectorAll('#dag g.node.sel').forEach(function (n) { n.classList.remove('sel'); });
      var n = node(id);
      if (n) n.classList.add('sel');
      fetch('/plans/' + encodeURIComponent(plan) + '/tools/' + encodeURIComponent(id) + '?partial=1', { credentials: 'same-origin' })
        .then(function (r) { return r.text(); })
        .then(function (html) { if (openTool === id) detail.innerHTML = html; });
      if (remember) history.replaceState(null, '', '#tool=' + encodeURIComponent(id));
    }

    // The drawing fills its box, but a small DAG is not blown up past
    // one and a half times the size Graphviz gave it.
    var svg = document.querySelector('#dag svg');
    if (svg && svg.viewBox && svg.viewBox.baseVal) {
      svg.style.maxWidth = Math.round(svg.viewBox.baseVal.width * 4 / 3 * 1.5) + 'px';
    }

    // The state the page was rendered with, then the stream's.
    var rows = Array.prototype.slice.call(document.querySelectorAll('#tools tr[data-tool]'));
    rows.forEach(function (r) { paint({ id: r.dataset.tool, state: r.dataset.state }); });
    critical(rows.filter(function (r) { return r.dataset.critical; })
      .sort(function (a, b) { return a.dataset.critical - b.dataset.critical; })
      .map(function (r) { return r.dataset.tool; }));

    document.querySelectorAll('#dag g.node').forEach(function (n) {
      n.addEventListener('click', function () { show(n.id.slice(2), true); });
    });
    document.querySelectorAll('#tools a.tool-link').forEach(function (a) {
      a.addEventListener('click', function (e) { e.preventDefault(); show(a.closest('tr').dataset.tool, true); });
    });
    var m = /^#tool=(.+)$/.exec(location.hash);
    if (m) show(decodeURIComponent(m[1]), false);

    stream('/plans/' + encodeURIComponent(plan) + '/events', {
      snapshot: function (s) { s.tools.forEach(paint); critical(s.critical); if (s.state) planState(s.state); },
      tool: paint,
      critical: critical,
      plan: function (p) { planState(p.state); },
      // The plan ended while the page was open: read it again for the
      // outputs and the end's details (the open tool stays open).
      end: function (p, es) {
        es.close();
        live(false);
        planState(p.state);
        if (renderedState === '' || renderedState === 'running') location.reload();
      },
      done: function (p, es) { es.close(); live(false); },
      failure: function (p, es) { es.close(); live(false); }
    });
  }

  if (page === 'requests') requestsPage();
  else if (page === 'request') requestPage();
  else if (page === 'plan') planPage();
})();
