// heapscope flame graph: draws the call tree that heapscope wrote into #hs-data.
// Layout: the root ('all') at the top, callees below it; a frame's width is its share
// of the chosen value (its own plus its callees') relative to the zoomed frame.
(function () {
  'use strict';

  var KIND_LABELS = {
    inuse_bytes: 'in-use bytes',
    inuse_count: 'in-use objects',
    alloc_bytes: 'allocated bytes',
    alloc_count: 'allocated objects'
  };
  var ROW_PX = 18; // height of a row of frames, as in the style sheet
  var MIN_PX = 0.5; // narrower frames are not drawn, nor their callees
  var TEXT_PX = 20; // narrower frames keep their name in the DOM but do not paint it
  var MATCH_COLOR = 'rgb(176,56,214)';

  // The tree comes in preorder (each node followed by its subtree) with each node's depth,
  // name index and inclusive values per kind: compact, and enough to rebuild the structure.
  var data = JSON.parse(byId('hs-data').textContent);
  var n = data.depth.length;
  var parent = new Int32Array(n);
  // end[i]: one past the last node of i's subtree; i's children are i + 1, end[i + 1], ...
  var end = new Int32Array(n);
  var namesLower = data.names.map(function (s) { return s.toLowerCase(); });
  var nameColors = [];

  // The value the page opens on (heapscope report --value); the URL's value= overrides.
  var initialValue = hasKind(data.value) ? data.value : 'inuse_bytes';
  var state = { zoom: 0, search: '', value: initialValue };
  var matches = null; // per name index: does the name match the search (null: no search)
  var hovered = -1;
  var renderPending = false;
  var chart = byId('hs-chart');
  var tip = byId('hs-tip');

  function byId(id) {
    return document.getElementById(id);
  }

  // Rebuilds parents and subtree ends from the depths; open ancestors wait on a stack.
  function buildTree() {
    var open = [];
    for (var i = 0; i < n; i++) {
      var d = data.depth[i];
      while (open.length > d) end[open.pop()] = i;
      parent[i] = d > 0 ? open[d - 1] : -1;
      open.push(i);
    }
    while (open.length) end[open.pop()] = n;
  }

  function hasKind(kind) {
    return Object.prototype.hasOwnProperty.call(data.values, kind);
  }

  // Negative values (possible in hand-made input) draw as nothing rather than break layout.
  function value(kind, i) {
    var x = data.values[kind][i];
    return x > 0 ? x : 0;
  }

  function baseValue(kind, i) {
    var x = data.base[kind][i];
    return x > 0 ? x : 0;
  }

  function frameName(i) {
    return data.names[data.name[i]];
  }

  // ---- Formatting ----

  function grouped(x) {
    return x.toLocaleString('en-US');
  }

  function humanBytes(x) {
    var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
    var u = 0;
    while (x >= 1024 && u < units.length - 1) {
      x /= 1024;
      u++;
    }
    return (u ? x.toFixed(1) : String(x)) + ' ' + units[u];
  }

  function isBytes(kind) {
    return kind.slice(-6) === '_bytes';
  }

  // Short form, for totals: '4.0 KiB', '1,234'.
  function formatValue(kind, x) {
    return isBytes(kind) ? humanBytes(x) : grouped(x);
  }

  // Long form, for details: '4.0 KiB (4,096 B)'.
  function formatExact(kind, x) {
    if (!isBytes(kind) || x < 1024) return formatValue(kind, x);
    return humanBytes(x) + ' (' + grouped(x) + ' B)';
  }

  function formatDelta(kind, d) {
    return (d < 0 ? '-' : '+') + formatValue(kind, Math.abs(d));
  }

  function percent(part, whole) {
    return (whole > 0 ? (100 * part) / whole : 0).toFixed(2) + '%';
  }

  // ---- Colours ----

  // A warm colour derived from the name, so that a function keeps its colour everywhere;
  // colours only tell neighbours apart.
  function nameColor(k) {
    if (nameColors[k] === undefined) {
      var s = data.names[k];
      var h = 2166136261;
      for (var j = 0; j < s.length; j++) h = Math.imul(h ^ s.charCodeAt(j), 16777619);
      h >>>= 0;
      nameColors[k] = 'hsl(' + (h % 48) + ',' + (72 + ((h >>> 8) % 22)) + '%,' +
        (58 + ((h >>> 16) % 12)) + '%)';
    }
    return nameColors[k];
  }

  // Diff colouring: red when the frame grew since the base, blue when it shrank, grey
  // when unchanged. The strength follows the change relative to the larger of the two
  // values, so it stays within 0..1: 0 -> x is full red, x -> 0 full blue, x -> 2x half.
  function diffColor(div, i) {
    var after = value(state.value, i);
    var before = baseValue(state.value, i);
    var delta = after - before;
    if (delta === 0) {
      div.classList.add('hs-same');
      return 'rgb(226,226,226)';
    }
    var k = 0.25 + (0.75 * Math.abs(delta)) / Math.max(after, before);
    var to = delta > 0 ? [214, 38, 38] : [38, 92, 214];
    div.classList.add(delta > 0 ? 'hs-grew' : 'hs-shrank');
    if (k > 0.6) div.classList.add('hs-dark');
    var mixed = to.map(function (c) { return Math.round(240 + (c - 240) * k); });
    return 'rgb(' + mixed.join(',') + ')';
  }

  function paint(div, i) {
    var color;
    if (matches && i > 0 && matches[data.name[i]]) {
      div.classList.add('hs-match');
      color = MATCH_COLOR;
    } else if (data.diff) {
      color = diffColor(div, i);
    } else {
      color = nameColor(data.name[i]);
    }
    div.style.backgroundColor = color;
  }

  // ---- Drawing ----

  function pct(fraction) {
    return (100 * fraction).toFixed(4) + '%';
  }

  function frameDiv(i, left, width, row, cls, narrow) {
    var div = document.createElement('div');
    div.className = 'hs-f' + (cls ? ' ' + cls : '') + (narrow ? ' hs-narrow' : '');
    div.setAttribute('data-id', i);
    div.style.left = pct(left);
    div.style.width = pct(width);
    div.style.top = row * ROW_PX + 'px';
    div.textContent = frameName(i);
    paint(div, i);
    return div;
  }

  // Root first, ending with i.
  function ancestry(i) {
    var path = [];
    for (; i >= 0; i = parent[i]) path.unshift(i);
    return path;
  }

  // Adds the frames of top's subtree at least MIN_PX wide, top itself full width on row0;
  // returns the number of rows used. An explicit stack, not recursion: stacks can be deep.
  function drawSubtree(frag, kind, top, row0, widthPx) {
    var v = data.values[kind];
    var scale = v[top] > 0 ? 1 / v[top] : 0;
    var rows = row0 + 1;
    var todo = [top, 0, row0]; // triples: node, left edge (fraction), row
    frag.appendChild(frameDiv(top, 0, 1, row0, ''));
    while (todo.length) {
      var row = todo.pop() + 1;
      var x = todo.pop();
      var i = todo.pop();
      for (var c = i + 1; c < end[i]; c = end[c]) {
        var w = (v[c] > 0 ? v[c] : 0) * scale;
        if (w * widthPx >= MIN_PX) {
          frag.appendChild(frameDiv(c, x, w, row, '', w * widthPx < TEXT_PX));
          rows = Math.max(rows, row + 1);
          if (end[c] > c + 1) todo.push(c, x, row);
        }
        x += w; // skipped frames keep their place: the gap shows memory too thin to draw
      }
    }
    return rows;
  }

  // Redraws the chart from the state: the zoomed frame's ancestors full width and dimmed,
  // the zoomed frame full width, its callees scaled to it. Only visible frames become
  // elements, so this stays fast for large profiles.
  function render() {
    var started = performance.now();
    var widthPx = chart.clientWidth || 1000;
    var frag = document.createDocumentFragment();
    var path = ancestry(state.zoom);
    for (var r = 0; r < path.length - 1; r++) {
      frag.appendChild(frameDiv(path[r], 0, 1, r, 'hs-anc'));
    }
    var rows = drawSubtree(frag, state.value, state.zoom, path.length - 1, widthPx);
    chart.textContent = '';
    chart.style.height = rows * ROW_PX + 'px';
    chart.appendChild(frag);
    updateText();
    chart.setAttribute('data-frames', chart.childElementCount);
    chart.setAttribute('data-render-ms', (performance.now() - started).toFixed(1));
    // Since navigation start: reading, parsing and the first drawing, for tests.
    if (!chart.hasAttribute('data-ready-ms')) {
      chart.setAttribute('data-ready-ms', performance.now().toFixed(1));
    }
  }

  function scheduleRender() {
    if (renderPending) return;
    renderPending = true;
    requestAnimationFrame(function () {
      renderPending = false;
      render();
    });
  }

  // ---- Text: totals, legend, search result, details ----

  function setLines(el, lines) {
    el.textContent = '';
    lines.forEach(function (line, k) {
      var div = document.createElement('div');
      if (k === 0) div.className = 'hs-name';
      div.textContent = line;
      el.appendChild(div);
    });
  }

  // The lines describing frame i: name, value, the other unit, shares, and the diff.
  function details(i) {
    var kind = state.value;
    var group = kind.slice(0, kind.indexOf('_'));
    var other = isBytes(kind) ? group + '_count' : group + '_bytes';
    var v = value(kind, i);
    var share = percent(v, value(kind, 0)) + ' of total';
    if (state.zoom !== 0) {
      share += ', ' + percent(v, value(kind, state.zoom)) + ' of the zoomed frame';
    }
    var lines = [
      frameName(i),
      KIND_LABELS[kind] + ': ' + formatExact(kind, v) + '; ' + KIND_LABELS[other] + ': ' +
        formatExact(other, value(other, i)),
      share
    ];
    if (data.diff) {
      var before = baseValue(kind, i);
      var change = before > 0 ? ' (' + (v >= before ? '+' : '') +
        ((100 * (v - before)) / before).toFixed(1) + '%)' : v > 0 ? ' (new)' : '';
      lines.push('before: ' + formatExact(kind, before) + ', after: ' +
        formatExact(kind, v) + ', delta: ' + formatDelta(kind, v - before) + change);
    }
    return lines;
  }

  // A matching frame counts once with its callees: a match below a match is included.
  function matched(kind) {
    var frames = 0;
    var sum = 0;
    for (var i = 1; i < n; i++) if (matches[data.name[i]]) frames++;
    for (var j = 1; j < n;) {
      if (matches[data.name[j]]) {
        sum += value(kind, j);
        j = end[j];
      } else {
        j++;
      }
    }
    var total = value(kind, 0);
    return { frames: frames, value: sum, share: total > 0 ? sum / total : 0 };
  }

  function legend(kind) {
    var text = 'Width: ' + KIND_LABELS[kind] + ' of a function and its callees; ' +
      'root at the top, callees below. Click to zoom, Esc to reset. ';
    if (data.diff) {
      text += 'Red: grew since the base, blue: shrank; the stronger, the larger the ' +
        'relative change. ';
    } else {
      text += 'Colours only tell functions apart. ';
    }
    return text + 'Search matches are purple. Frames under half a pixel are not drawn.';
  }

  function updateText() {
    var kind = state.value;
    var total = value(kind, 0);
    var group = kind.slice(0, kind.indexOf('_'));
    var other = isBytes(kind) ? group + '_count' : group + '_bytes';
    var line = 'Total: ' + formatValue(kind, total) + ' ' + KIND_LABELS[kind];
    if (data.diff) {
      var before = baseValue(kind, 0);
      line += ' (base ' + formatValue(kind, before) + ', ' +
        formatDelta(kind, total - before) + ')';
    }
    byId('hs-total').textContent = line + '; ' + formatValue(other, value(other, 0)) + ' ' +
      KIND_LABELS[other];
    byId('hs-legend').textContent = legend(kind);
    byId('hs-reset').disabled = state.zoom === 0;
    var summary = '';
    if (matches) {
      var m = matched(kind);
      var frames = grouped(m.frames) + (m.frames === 1 ? ' frame' : ' frames');
      summary = 'Matched ' + frames + ': ' + formatValue(kind, m.value) + ', ' +
        percent(m.value, total) + ' of total';
    }
    byId('hs-match').textContent = summary;
    syncControls();
    setLines(byId('hs-details'), details(hovered >= 0 ? hovered : state.zoom));
  }

  // ---- State changes ----

  function setSearch(text) {
    state.search = text;
    if (!text) {
      matches = null;
      return;
    }
    var needle = text.toLowerCase(); // case-insensitive substring: what a search box does
    matches = namesLower.map(function (s) { return s.indexOf(needle) >= 0; });
  }

  // A frame from a node id (a number or a string of digits) or from a list of names, the
  // root's child first; -1 if there is none. Nothing (null, '') is the root.
  function resolve(path) {
    if (path === undefined || path === null || path === '') return 0;
    if (Array.isArray(path)) return resolveNames(path);
    var s = String(path);
    if (!/^[0-9]+$/.test(s)) return -1;
    var id = Number(s);
    return id < n ? id : -1;
  }

  function resolveNames(names) {
    var i = 0;
    for (var k = 0; k < names.length; k++) {
      var c = i + 1;
      while (c < end[i] && frameName(c) !== names[k]) c = end[c];
      if (c >= end[i]) return -1;
      i = c;
    }
    return i;
  }

  function update() {
    render();
    writeHash();
  }

  function zoomTo(path) {
    var id = resolve(path);
    if (id < 0) return false;
    state.zoom = id;
    update();
    return true;
  }

  function search(text) {
    setSearch(text === undefined || text === null ? '' : String(text));
    update();
    return matches ? matched(state.value) : null;
  }

  function setValue(kind) {
    if (!hasKind(kind)) return false;
    state.value = kind;
    update();
    return true;
  }

  function snapshot() {
    return {
      zoom: state.zoom,
      zoomPath: ancestry(state.zoom).slice(1).map(frameName),
      search: state.search,
      value: state.value,
      values: Object.keys(data.values),
      total: value(state.value, 0),
      matched: matches ? matched(state.value) : null,
      diff: !!data.diff
    };
  }

  // ---- URL fragment: #zoom=ID&search=TEXT&value=KIND, so a view can be shared ----

  function decode(s) {
    try {
      return decodeURIComponent(s);
    } catch (e) {
      return s; // a malformed escape: take the text as it is
    }
  }

  function readHash() {
    var params = Object.create(null);
    location.hash.slice(1).split('&').forEach(function (part) {
      var eq = part.indexOf('=');
      if (eq > 0) params[decode(part.slice(0, eq))] = decode(part.slice(eq + 1));
    });
    state.value = hasKind(params.value) ? params.value : initialValue;
    var zoom = resolve(params.zoom);
    state.zoom = zoom >= 0 ? zoom : 0;
    setSearch(params.search || '');
  }

  function writeHash() {
    var parts = [];
    if (state.zoom) parts.push('zoom=' + state.zoom);
    if (state.search) parts.push('search=' + encodeURIComponent(state.search));
    if (state.value !== initialValue) parts.push('value=' + state.value);
    var hash = parts.length ? '#' + parts.join('&') : '';
    if (hash === location.hash) return;
    try {
      // replaceState, not location.hash =: no history entry per keystroke, no hashchange.
      history.replaceState(null, '', hash || location.pathname + location.search);
    } catch (e) {
      // Some browsers refuse for file: pages; the view works regardless.
    }
  }

  // ---- Controls ----

  function checkedValue(name) {
    var r = document.querySelector('input[name=' + name + ']:checked');
    return r ? r.value : '';
  }

  // Checks the radio button of group name with value v. The checked attribute follows too,
  // so that a dump of the DOM shows the state.
  function setChecked(name, v) {
    document.querySelectorAll('input[name=' + name + ']').forEach(function (r) {
      r.checked = r.defaultChecked = r.value === v;
    });
  }

  function syncControls() {
    var parts = state.value.split('_');
    setChecked('hs-kind', parts[0]);
    setChecked('hs-unit', parts[1]);
    var box = byId('hs-search');
    if (box.value !== state.search) box.value = state.search;
    box.defaultValue = state.search;
  }

  function frameAt(target) {
    var f = target.closest ? target.closest('.hs-f') : null;
    return f ? Number(f.getAttribute('data-id')) : -1;
  }

  function hideTip() {
    tip.style.display = 'none';
    if (hovered >= 0) {
      hovered = -1;
      setLines(byId('hs-details'), details(state.zoom));
    }
  }

  function onMove(e) {
    var id = frameAt(e.target);
    if (id < 0) return hideTip();
    if (id !== hovered) {
      hovered = id;
      var lines = details(id);
      setLines(tip, lines);
      setLines(byId('hs-details'), lines);
    }
    tip.style.display = 'block';
    // Keep the tip inside the window: left of the pointer near the right edge, above it
    // near the bottom.
    var w = tip.offsetWidth;
    var h = tip.offsetHeight;
    tip.style.left = Math.max(0, Math.min(e.clientX + 12, innerWidth - w - 4)) + 'px';
    var below = e.clientY + 16 + h <= innerHeight;
    tip.style.top = (below ? e.clientY + 16 : Math.max(0, e.clientY - h - 8)) + 'px';
  }

  function onKey(e) {
    var box = byId('hs-search');
    if (e.key === 'Escape') {
      if (e.target === box && state.search) search('');
      else zoomTo(0);
    } else if (e.key === '/' && e.target !== box) {
      e.preventDefault();
      box.focus();
    }
  }

  function wire() {
    chart.addEventListener('click', function (e) {
      var id = frameAt(e.target);
      if (id >= 0) zoomTo(id);
    });
    chart.addEventListener('mousemove', onMove);
    chart.addEventListener('mouseleave', hideTip);
    document.querySelectorAll('#hs-controls input[type=radio]').forEach(function (r) {
      r.addEventListener('change', function () {
        setValue((checkedValue('hs-kind') || 'inuse') + '_' + checkedValue('hs-unit'));
      });
    });
    byId('hs-search').addEventListener('input', function (e) { search(e.target.value); });
    byId('hs-reset').addEventListener('click', function () { zoomTo(0); });
    document.addEventListener('keydown', onKey);
    window.addEventListener('hashchange', function () {
      readHash();
      render();
    });
    window.addEventListener('resize', scheduleRender);
  }

  buildTree();
  window.heapscopeFlame = {
    zoomTo: zoomTo,
    search: search,
    setValue: setValue,
    state: snapshot,
    details: function (id) { return resolve(id) >= 0 ? details(resolve(id)) : null; }
  };
  wire();
  readHash();
  update();
})();
