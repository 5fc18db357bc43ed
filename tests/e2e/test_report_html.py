"""End-to-end: the HTML flame graph of `heapscope report` (src/report/flamegraph.c).

fg_writer (tests/e2e/programs/fg_writer.c) writes the page of a built-in scenario; headless
Chromium loads it, with the view set through the URL fragment (#zoom=ID&search=TEXT&value=KIND),
and dumps the DOM once the page's script has run. The dump is parsed here: every drawn frame is
a div.hs-f with data-id (the node's preorder index in the merged call tree, siblings sorted by
name), the frame name as text, and left/width (percent of the chart) and top (px) in its style.

The scenarios' stacks are repeated below (BASIC, DIFF, ...) and merged into the expected tree
the same way, so frame ids, widths and rows are checked exactly. Needs /usr/bin/chromium
(Debian's chromium package, installed by `make deps`).
"""
import concurrent.futures
import html.parser
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.parse

CHROMIUM = "/usr/bin/chromium"
WRITER = os.environ["HS_FG_WRITER"]
BUILD = os.environ["HS_BUILD_DIR"]
SCREENSHOT = os.path.join(BUILD, "tests", "e2e", "flamegraph.png")
ROW_PX = 18
WINDOW = (1200, 800)
KINDS = ["inuse_bytes", "inuse_count", "alloc_bytes", "alloc_count"]

# fg_writer's scenarios: (frames root first, values per KINDS, base values).
BASIC = [
    (["main", "load_config", "parse_json", "malloc"], [1024, 4, 4096, 16], None),
    (["main", "load_config", "read_file"], [3072, 1, 3072, 1], None),
    (["main", "process", "worker_loop", "std::vector<int>::push_back"], [8192, 64, 32768, 512],
     None),
    (["main", "process", "worker_loop", "hash_insert"], [4096, 128, 8192, 256], None),
    (["main", "process", "cache_fill"], [4096, 2, 4096, 2], None),
    (["start_thread", "thread_main", "malloc"], [4096, 1, 65536, 100], None),
]
DIFF = [
    (["main", "grow", "malloc"], [8192, 8, 0, 0], [1024, 1, 0, 0]),
    (["main", "shrink", "malloc"], [1024, 1, 0, 0], [8192, 8, 0, 0]),
    (["main", "same", "malloc"], [4096, 4, 0, 0], [4096, 4, 0, 0]),
    (["main", "new_cache"], [2048, 2, 0, 0], [0, 0, 0, 0]),
    (["main", "gone"], [0, 0, 0, 0], [4096, 4, 0, 0]),
]
DEEP = [
    (["main"] + ["recurse"] * 100 + ["malloc"], [1 << 20, 1, 0, 0], None),
    (["main", "tiny_leaf"], [1, 1, 0, 0], None),
    (["main"], [1 << 18, 1, 0, 0], None),
]
# The escape scenario's frame names as displayed (invalid UTF-8 shows as U+FFFD).
HOSTILE = [
    "</script><b>x</b>",
    "operator<<(std::ostream&, Foo const&)",
    "a&b",
    "say \"hi\" 'there'",
    "\u00fcn\u00efc\u00f6d\u00e9 \u6f22\u5b57 \U0001F600",
    "<!-- not a comment -->",
    "back\\slash",
    "bad \ufffd utf-8",
    "std::map<std::string, std::vector<int>>::operator[]",
    "line\u2028separator",
    "]]></div><img src=x onerror=alert(1)>",
]


class Node:
    def __init__(self, name, parent):
        self.name = name
        self.parent = parent
        self.values = [0] * 4
        self.base = [0] * 4
        self.children = {}
        self.id = -1
        self.depth = 0 if parent is None else parent.depth + 1

    def path(self):
        names = []
        node = self
        while node.parent is not None:
            names.append(node.name)
            node = node.parent
        return names[::-1]


def expected_tree(stacks):
    """The merged call tree, as flamegraph.c builds it; returns the nodes in preorder (ids)."""
    root = Node("all", None)
    for frames, values, base in stacks:
        node = root
        for k in range(4):
            node.values[k] += values[k]
            node.base[k] += (base or [0] * 4)[k]
        for name in frames:
            node = node.children.setdefault(name, Node(name, node))
            for k in range(4):
                node.values[k] += values[k]
                node.base[k] += (base or [0] * 4)[k]
    nodes = []
    todo = [root]
    while todo:
        node = todo.pop()
        node.id = len(nodes)
        nodes.append(node)
        # Siblings by name as strcmp orders them (UTF-8 bytes).
        todo.extend(sorted(node.children.values(), key=lambda c: c.name.encode(), reverse=True))
    return nodes


class Element:
    def __init__(self, tag, attrs):
        self.tag = tag
        self.attrs = attrs
        self.children = []

    def text(self):
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def walk(self):
        yield self
        for c in self.children:
            if isinstance(c, Element):
                yield from c.walk()

    def classes(self):
        return set(self.attrs.get("class", "").split())


class DomParser(html.parser.HTMLParser):
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
            "track", "wbr"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.open = [self.root]

    def handle_starttag(self, tag, attrs):
        el = Element(tag, {k: (v if v is not None else "") for k, v in attrs})
        self.open[-1].children.append(el)
        if tag not in self.VOID:
            self.open.append(el)

    def handle_startendtag(self, tag, attrs):
        self.open[-1].children.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag):
        for i in range(len(self.open) - 1, 0, -1):
            if self.open[i].tag == tag:
                del self.open[i:]
                return

    def handle_data(self, data):
        self.open[-1].children.append(data)


class Frame:
    STYLE_RE = re.compile(r"left:\s*([-\d.e]+)%;\s*width:\s*([-\d.e]+)%;\s*top:\s*(\d+)px")

    def __init__(self, el):
        self.id = int(el.attrs["data-id"])
        self.name = el.text()
        self.classes = el.classes()
        style = el.attrs.get("style", "")
        m = self.STYLE_RE.search(style)
        if not m:
            raise AssertionError("frame style without left/width/top: %r" % style)
        self.left, self.width, self.top = float(m.group(1)), float(m.group(2)), int(m.group(3))
        m = re.search(r"background-color:\s*rgb\((\d+),\s*(\d+),\s*(\d+)\)", style)
        self.rgb = tuple(int(x) for x in m.groups()) if m else None

    def __repr__(self):
        return "Frame(%d %r %.4f+%.4f @%d)" % (self.id, self.name, self.left, self.width, self.top)


class Page:
    """A dumped DOM: the frames drawn, and the texts around them."""

    def __init__(self, dom):
        parser = DomParser()
        parser.feed(dom)
        parser.close()
        self.dom = dom
        self.root = parser.root
        self.ids = {el.attrs["id"]: el for el in self.root.walk() if "id" in el.attrs}
        chart = self.ids.get("hs-chart")
        if chart is None or "data-render-ms" not in chart.attrs:
            raise AssertionError("the page's script did not finish rendering:\n" + dom[:3000])
        self.chart = chart
        self.frames = [Frame(el) for el in chart.walk() if "hs-f" in el.classes()]
        self.by_id = {f.id: f for f in self.frames}
        if len(self.by_id) != len(self.frames):
            raise AssertionError("a frame id drawn twice")

    def text(self, element_id):
        return self.ids[element_id].text()

    def named(self, name):
        return [f for f in self.frames if f.name == name]

    def radio(self, group, value):
        for el in self.root.walk():
            if el.tag == "input" and el.attrs.get("name") == group and \
                    el.attrs.get("value") == value:
                return el
        return None


def chromium(url, *flags):
    """Runs headless Chromium on url with a fresh profile; returns its stdout."""
    profile = tempfile.mkdtemp(prefix="hs-chromium-")
    try:
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
               "--user-data-dir=" + profile,
               "--virtual-time-budget=5000", "--window-size=%d,%d" % WINDOW] + list(flags) + [url]
        r = subprocess.run(cmd, capture_output=True, timeout=60)
        if r.returncode != 0:
            raise AssertionError("chromium failed (%d): %s" % (r.returncode, r.stderr[-2000:]))
        return r.stdout.decode("utf-8")
    finally:
        shutil.rmtree(profile, ignore_errors=True)


class ReportHtml(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(CHROMIUM, os.X_OK):
            raise AssertionError("%s is missing: this test needs Debian's chromium package "
                                 "(make deps installs it; or apt-get install chromium)" % CHROMIUM)
        cls.tmp = tempfile.mkdtemp(prefix="hs-report-html-")
        cls.pages = {}
        for scenario in ("basic", "inuse", "alloc_count", "inuse_alloc", "diff", "deep",
                         "escape", "big", "empty"):
            path = os.path.join(cls.tmp, scenario + ".html")
            r = subprocess.run([WRITER, scenario, path], capture_output=True, text=True,
                               timeout=60)
            if r.returncode != 0:
                raise AssertionError("fg_writer %s: %s" % (scenario, r.stderr))
            cls.pages[scenario] = path
        cls.basic_tree = expected_tree(BASIC)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def load(self, scenario, fragment="", path=None):
        url = "file://" + (path or self.pages[scenario])
        if fragment:
            url += "#" + fragment
        return Page(chromium(url, "--dump-dom"))

    def load_many(self, scenario, fragments):
        """Pages of one scenario with several fragments, loaded in parallel."""
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            return list(pool.map(lambda f: self.load(scenario, f), fragments))

    def probe(self, scenario, script):
        """Runs script after the page's own (it ends by storing JSON in the body's
        data-probe attribute); returns that JSON."""
        with open(self.pages[scenario], encoding="utf-8") as f:
            raw = f.read()
        path = os.path.join(self.tmp, "probe-%s.html" % scenario)
        with open(path, "w", encoding="utf-8") as f:
            f.write(raw.replace("</body>", "<script>\n" + script + "</script>\n</body>"))
        page = self.load(scenario, path=path)
        body = [el for el in page.root.walk() if el.tag == "body"][0]
        self.assertIn("data-probe", body.attrs, "the probe script failed")
        return json.loads(body.attrs["data-probe"])

    def basic_node(self, *path):
        for node in self.basic_tree:
            if node.path() == list(path):
                return node
        raise KeyError(path)

    def assertWidths(self, page, nodes, kind, top):
        """Every node of top's subtree at least a pixel wide is drawn at the right place, with
        width value / top's value, on the row of its depth."""
        k = KINDS.index(kind)
        drawn = 0
        for node in nodes:
            if node is not top and top not in ancestors(node):
                continue
            share = node.values[k] / top.values[k] if top.values[k] else 1.0
            if share * WINDOW[0] < 2:
                continue
            f = page.by_id.get(node.id)
            self.assertIsNotNone(f, "%s (id %d) not drawn" % (node.path(), node.id))
            self.assertEqual(f.name, node.name)
            self.assertAlmostEqual(f.width / 100, share, delta=0.01 * max(share, 0.01),
                                   msg="width of %s" % node.path())
            self.assertEqual(f.top, node.depth * ROW_PX, node.path())
            if node is not top:
                p = page.by_id[node.parent.id]
                self.assertGreaterEqual(f.left, p.left - 1e-3)
                self.assertLessEqual(f.left + f.width, p.left + p.width + 1e-3)
            drawn += 1
        return drawn

    # ---- Layout and values ----

    def test_basic_layout_by_bytes(self):
        page = self.load("basic")
        nodes = self.basic_tree
        self.assertEqual(self.assertWidths(page, nodes, "inuse_bytes", nodes[0]), len(nodes))
        self.assertEqual(len(page.frames), len(nodes))
        root = page.by_id[0]
        self.assertEqual((root.name, root.left, root.width, root.top), ("all", 0, 100, 0))
        # A child holding 25% of its parent's value has 25% of its width.
        parse = page.named("parse_json")[0]
        load = page.named("load_config")[0]
        self.assertAlmostEqual(parse.width / load.width, 0.25, delta=0.01)
        self.assertEqual(page.text("hs-title"), "heap.dump")
        self.assertEqual(page.text("hs-subtitle"), "6 stacks, 24.0 KiB in use")
        self.assertEqual(page.text("hs-total"),
                         "Total: 24.0 KiB in-use bytes; 200 in-use objects")
        self.assertIn("Width: in-use bytes", page.text("hs-legend"))
        self.assertIn("root at the top", page.text("hs-legend"))
        self.assertEqual(page.text("hs-match"), "")
        self.assertIn("disabled", page.ids["hs-reset"].attrs, "nothing to reset")
        # Details show the zoomed frame (the root) until a frame is hovered.
        self.assertEqual(page.text("hs-details"),
                         "allin-use bytes: 24.0 KiB (24,576 B); in-use objects: 200"
                         "100.00% of total")

    def test_value_switch_changes_widths(self):
        nodes = self.basic_tree
        kinds = ("inuse_count", "alloc_bytes", "alloc_count")
        pages = self.load_many("basic", ["value=" + kind for kind in kinds])
        for kind, page in zip(kinds, pages):
            with self.subTest(kind=kind):
                self.assertWidths(page, nodes, kind, nodes[0])
                unit = kind.split("_")[1]
                group = kind.split("_")[0]
                self.assertIn("checked", page.radio("hs-unit", unit).attrs)
                self.assertIn("checked", page.radio("hs-kind", group).attrs)
                self.assertNotIn("checked", page.radio("hs-unit", "bytes" if unit == "count"
                                                       else "count").attrs)
                if kind == "inuse_count":
                    # Counts and bytes really differ: load_config is 2.5% by count, 16.7% by
                    # bytes.
                    self.assertAlmostEqual(page.named("load_config")[0].width, 2.5, delta=0.01)
                    self.assertEqual(page.text("hs-total"),
                                     "Total: 200 in-use objects; 24.0 KiB in-use bytes")
                if kind == "alloc_bytes":
                    self.assertEqual(page.text("hs-total"),
                                     "Total: 115.0 KiB allocated bytes; 887 allocated objects")

    def test_inuse_only_hides_allocated(self):
        page, counts = self.load_many("inuse", ["value=alloc_bytes", "value=inuse_count"])
        self.assertIsNone(page.radio("hs-kind", "alloc"), "no allocated choice")
        self.assertNotIn("hs-kinds", page.ids)
        self.assertNotIn("Allocated", page.text("hs-controls"))
        # The unknown value falls back to in-use bytes.
        self.assertWidths(page, self.basic_tree, "inuse_bytes", self.basic_tree[0])
        self.assertTrue(page.text("hs-total").startswith("Total: 24.0 KiB in-use bytes"))
        with open(self.pages["inuse"], encoding="utf-8") as f:
            data = page_data(f.read())
        self.assertEqual(sorted(data["values"]), ["inuse_bytes", "inuse_count"])
        self.assertWidths(counts, self.basic_tree, "inuse_count", self.basic_tree[0])

    def test_opens_on_the_value_asked(self):
        opened, chosen = self.load_many("alloc_count", ["", "value=inuse_bytes"])
        self.assertWidths(opened, self.basic_tree, "alloc_count", self.basic_tree[0])
        self.assertIn("checked", opened.radio("hs-unit", "count").attrs)
        self.assertIn("checked", opened.radio("hs-kind", "alloc").attrs)
        self.assertTrue(opened.text("hs-total").startswith("Total: 887 allocated objects"))
        # The URL's value= still chooses.
        self.assertWidths(chosen, self.basic_tree, "inuse_bytes", self.basic_tree[0])
        self.assertIn("checked", chosen.radio("hs-unit", "bytes").attrs)
        # Without allocated values, the page opens on in-use bytes.
        fallback = self.load("inuse_alloc")
        self.assertWidths(fallback, self.basic_tree, "inuse_bytes", self.basic_tree[0])
        with open(self.pages["alloc_count"], encoding="utf-8") as f:
            self.assertEqual(page_data(f.read())["value"], "alloc_count")
        with open(self.pages["inuse_alloc"], encoding="utf-8") as f:
            self.assertEqual(page_data(f.read())["value"], "inuse_bytes")

    def test_hash_names_the_value_unless_it_is_the_opening_one(self):
        r = self.probe("alloc_count", """
(function () {
  var F = window.heapscopeFlame, r = {};
  r.opened = F.state().value;
  r.hashOpened = location.hash;
  F.setValue('inuse_bytes');
  r.hashInuse = location.hash;
  F.setValue('alloc_count');
  r.hashBack = location.hash;
  document.body.setAttribute('data-probe', JSON.stringify(r));
})();
""")
        self.assertEqual(r, {"opened": "alloc_count", "hashOpened": "",
                             "hashInuse": "#value=inuse_bytes", "hashBack": ""})

    # ---- Zoom ----

    def test_zoom_from_fragment(self):
        process = self.basic_node("main", "process")
        page = self.load("basic", "zoom=%d" % process.id)
        f = page.by_id[process.id]
        self.assertEqual((f.left, f.width), (0, 100), "the zoomed frame takes the full width")
        self.assertNotIn("hs-anc", f.classes)
        for anc in (self.basic_node(), self.basic_node("main")):
            a = page.by_id[anc.id]
            self.assertEqual((a.left, a.width), (0, 100))
            self.assertIn("hs-anc", a.classes, "ancestors stay visible, dimmed")
        # Everything else is gone; the subtree is scaled to the zoomed frame.
        drawn = {n.name for n in self.basic_tree if n.id in page.by_id}
        self.assertEqual(drawn, {"all", "main", "process", "cache_fill", "worker_loop",
                                 "hash_insert", "std::vector<int>::push_back"})
        self.assertEqual(self.assertWidths(page, self.basic_tree, "inuse_bytes", process), 5)
        self.assertAlmostEqual(page.named("worker_loop")[0].width, 75, delta=0.01)
        self.assertNotIn("disabled", page.ids["hs-reset"].attrs)
        self.assertEqual(page.text("hs-details"),
                         "processin-use bytes: 16.0 KiB (16,384 B); in-use objects: 194"
                         "66.67% of total, 100.00% of the zoomed frame")

    def test_zoom_combines_with_value_and_search(self):
        load = self.basic_node("main", "load_config")
        page = self.load("basic", "zoom=%d&value=alloc_count&search=MALLOC" % load.id)
        self.assertWidths(page, self.basic_tree, "alloc_count", load)
        self.assertEqual(page.named("parse_json")[0].width, 94.1176)  # 16 of 17
        self.assertEqual(page.text("hs-match"),
                         "Matched 2 frames: 116, 13.08% of total")  # (16 + 100) / 887
        self.assertEqual(page.ids["hs-search"].attrs.get("value"), "MALLOC")

    def test_bad_fragment_is_ignored(self):
        page = self.load("basic", "zoom=9999&value=bogus&search=&junk")
        self.assertEqual(len(page.frames), len(self.basic_tree))
        self.assertFalse(any("hs-anc" in f.classes for f in page.frames))
        self.assertWidths(page, self.basic_tree, "inuse_bytes", self.basic_tree[0])

    def test_fragment_edited_later(self):
        # Changing the fragment after load (hashchange) changes the view, bad values included.
        process = self.basic_node("main", "process")
        steps = ["zoom=%d" % process.id, "zoom=-1", "zoom=%d&value=alloc_count" % process.id,
                 "zoom=abc", "search=%zz", "search=a%26b%3C", "zoom=", "value=inuse_count"]
        r = self.probe("basic", """
var F = window.heapscopeFlame, steps = %s, out = [], k = 0;
function next() {
  if (k < steps.length) location.hash = steps[k++];
  else document.body.setAttribute('data-probe', JSON.stringify(out));
}
// Registered after the page's own listener, so it sees the view already updated.
window.addEventListener('hashchange', function () {
  var s = F.state();
  out.push([s.zoom, s.value, s.search, document.querySelectorAll('.hs-anc').length]);
  next();
});
next();
""" % json.dumps(steps))
        self.assertEqual(r, [[process.id, "inuse_bytes", "", 2],
                             [0, "inuse_bytes", "", 0],
                             [process.id, "alloc_count", "", 2],
                             [0, "inuse_bytes", "", 0],
                             [0, "inuse_bytes", "%zz", 0],
                             [0, "inuse_bytes", "a&b<", 0],
                             [0, "inuse_bytes", "", 0],
                             [0, "inuse_count", "", 0]])

    # ---- Search ----

    def test_search_highlights_exactly_the_matches(self):
        page, vector, nothing = self.load_many("basic", [
            "search=main", "search=" + urllib.parse.quote("vector<int>"),
            "search=nothing-like-this"])
        matched = {f.name for f in page.frames if "hs-match" in f.classes}
        self.assertEqual(matched, {"main", "thread_main"}, "case-insensitive substring")
        for f in page.frames:
            if "hs-match" in f.classes:
                self.assertEqual(f.rgb, (176, 56, 214))
        # thread_main is under no other match, main neither: 20480 + 4096 of 24576.
        self.assertEqual(page.text("hs-match"), "Matched 2 frames: 24.0 KiB, 100.00% of total")
        self.assertEqual([f.name for f in vector.frames if "hs-match" in f.classes],
                         ["std::vector<int>::push_back"])
        self.assertEqual(vector.text("hs-match"), "Matched 1 frame: 8.0 KiB, 33.33% of total")
        self.assertFalse(any("hs-match" in f.classes for f in nothing.frames))
        self.assertEqual(nothing.text("hs-match"), "Matched 0 frames: 0 B, 0.00% of total")

    def test_search_counts_frames_too_thin_to_draw(self):
        page = self.load("deep", "search=tiny")
        self.assertEqual(page.named("tiny_leaf"), [], "1 byte of 1.25 MiB: not drawn")
        self.assertEqual(page.text("hs-match"), "Matched 1 frame: 1 B, 0.00% of total")

    # ---- Diff ----

    def test_diff_colors_and_details(self):
        nodes = expected_tree(DIFF)
        grow = [n for n in nodes if n.path() == ["main", "grow"]][0]
        new = [n for n in nodes if n.path() == ["main", "new_cache"]][0]
        page, grown, counted = self.load_many("diff", [
            "", "zoom=%d" % grow.id, "zoom=%d&value=inuse_count" % new.id])
        self.assertWidths(page, nodes, "inuse_bytes", nodes[0])
        color = {f.name: f.rgb for f in page.frames}
        classes = {f.name: f.classes for f in page.frames}
        for name in ("grow", "new_cache"):
            r, g, b = color[name]
            self.assertGreater(r, b + 100, "%s grew: red %s" % (name, color[name]))
            self.assertIn("hs-grew", classes[name])
        r, g, b = color["shrink"]
        self.assertGreater(b, r + 100, "shrink shrank: blue %s" % (color["shrink"],))
        self.assertIn("hs-shrank", classes["shrink"])
        r, g, b = color["same"]
        self.assertTrue(r == g == b, "same is grey: %s" % (color["same"],))
        self.assertIn("hs-same", classes["same"])
        self.assertEqual(page.named("gone"), [], "nothing left to draw")
        # Intensity follows the relative change: 0 -> 2 KiB is stronger than 1 -> 8 KiB, which is
        # stronger than main's 17 -> 15 KiB.
        strength = {n: color[n][0] - color[n][2] for n in ("new_cache", "grow")}
        strength["main"] = color["main"][2] - color["main"][0]
        self.assertGreater(strength["new_cache"], strength["grow"])
        self.assertGreater(strength["grow"], strength["main"])
        self.assertGreater(strength["main"], 0, "main shrank a little: light blue")
        self.assertEqual(page.text("hs-total"), "Total: 15.0 KiB in-use bytes "
                         "(base 17.0 KiB, -2.0 KiB); 15 in-use objects")
        self.assertIn("Red: grew", page.text("hs-legend"))
        self.assertIn("before: 1.0 KiB (1,024 B), after: 8.0 KiB (8,192 B), delta: +7.0 KiB "
                      "(+700.0%)", grown.text("hs-details"))
        self.assertIn("before: 0, after: 2, delta: +2 (new)", counted.text("hs-details"))

    # ---- Hostile names ----

    def test_escaping(self):
        with open(self.pages["escape"], "rb") as f:
            raw = f.read().decode("utf-8")  # valid UTF-8 whatever the input bytes were
        self.assertEqual(raw.count("<script"), 2, "no script element injected")
        self.assertEqual(raw.count("</script"), 2, "no script element closed early")
        data_text = re.search(r'<script type="application/json" id="hs-data">(.*?)</script>',
                              raw, re.S).group(1)
        self.assertNotIn("</", data_text)
        self.assertNotIn("<!--", data_text)
        self.assertNotIn("\u2028", data_text)
        self.assertTrue(set(HOSTILE) <= set(json.loads(data_text)["names"]))

        page, shift, amp = self.load_many("escape", [
            "", "search=" + urllib.parse.quote("operator<<", safe=""),
            "search=" + urllib.parse.quote("&", safe="")])
        names = {f.name for f in page.frames}
        self.assertTrue(set(HOSTILE) <= names, set(HOSTILE) - names)
        body_tags = {el.tag for el in page.ids["hs-chart"].walk()}
        self.assertEqual(body_tags, {"div"}, "names stay text")
        tags = [el.tag for el in page.root.walk()]
        self.assertNotIn("b", tags)
        self.assertNotIn("img", tags)
        self.assertEqual(tags.count("script"), 2)
        title = "</title><script>alert(1)</script> & \"co\""
        self.assertEqual(page.text("hs-title"), title)
        self.assertEqual([el.text() for el in page.root.walk() if el.tag == "title"],
                         [title + " - heapscope flame graph"])
        self.assertEqual(page.text("hs-subtitle"), "<b>not bold</b> 'single' \u2028 \ufffd")
        # Searching for markup finds the names, not the page's own markup.
        self.assertEqual([f.name for f in shift.frames if "hs-match" in f.classes], [HOSTILE[1]])
        self.assertEqual(sorted(f.name for f in amp.frames if "hs-match" in f.classes),
                         sorted([HOSTILE[1], HOSTILE[2]]))

    def test_page_is_self_contained(self):
        with open(self.pages["basic"], encoding="utf-8") as f:
            raw = f.read()
        for needle in ("http:", "https:", "//cdn", "<link", "@import", "url(", " src=",
                       "@font-face"):
            self.assertNotIn(needle, raw)
        self.assertIn("Content-Security-Policy", raw)
        self.assertIn("default-src 'none'", raw)
        data = page_data(raw)
        self.assertEqual(data["depth"], [n.depth for n in self.basic_tree])
        self.assertEqual([data["names"][i] for i in data["name"]],
                         [n.name for n in self.basic_tree])
        for k, kind in enumerate(KINDS):
            self.assertEqual(data["values"][kind], [n.values[k] for n in self.basic_tree])

    # ---- Shapes ----

    def test_deep_stack(self):
        nodes = expected_tree(DEEP)
        page = self.load("deep")
        drawn = self.assertWidths(page, nodes, "inuse_bytes", nodes[0])
        self.assertEqual(drawn, 103, "all, main, 100 x recurse, malloc")
        self.assertEqual(len(page.named("recurse")), 100)
        self.assertEqual(page.named("malloc")[0].top, 102 * ROW_PX)
        self.assertIn("height: %dpx" % (103 * ROW_PX), page.chart.attrs["style"])
        # main's own 256 KiB leave a gap after recurse: 1 MiB of 1.25 MiB.
        self.assertAlmostEqual(page.named("recurse")[0].width, 80, delta=0.01)

    def test_empty_profile(self):
        page = self.load("empty")
        self.assertEqual([(f.name, f.width) for f in page.frames], [("all", 100)])
        self.assertEqual(page.text("hs-total"), "Total: 0 B in-use bytes; 0 in-use objects")

    def test_big_profile_renders(self):
        start = time.monotonic()
        page = self.load("big")
        elapsed = time.monotonic() - start
        # Timings are reported, never asserted (the machine's load is not the page's fault):
        # the page's own clock, navigation start to first drawing done (about 0.25 s on an
        # idle machine), and the whole Chromium run (about 2 s).
        print("big profile: first draw %s ms, render %s ms, Chromium run %.1f s"
              % (page.chart.attrs["data-ready-ms"], page.chart.attrs["data-render-ms"], elapsed))
        self.assertEqual(len(page.frames), int(page.chart.attrs["data-frames"]))
        self.assertGreater(len(page.frames), 100)
        self.assertLess(len(page.frames), 20000, "thin frames are not drawn")
        min_pct = 100 * 0.5 / WINDOW[0]
        self.assertTrue(all(f.width >= min_pct for f in page.frames))
        self.assertEqual((page.by_id[0].width, page.by_id[0].top), (100, 0))
        # Zoom into a frame on the deepest drawn row, and search: still fast.
        deepest = max(page.frames, key=lambda f: (f.top, f.width))
        page = self.load("big", "zoom=%d&search=module3&value=alloc_count" % deepest.id)
        self.assertEqual((page.by_id[deepest.id].left, page.by_id[deepest.id].width), (0, 100))
        self.assertRegex(page.text("hs-match"),
                         r"^Matched [\d,]+ frames: [\d,]+, [\d.]+% of total$")
        self.assertGreater(page.by_id[deepest.id].top // ROW_PX, 5)

    # ---- The page's JavaScript API, clicks and hovers ----

    def test_api_clicks_and_hash(self):
        r = self.probe("basic", """
(function () {
  var F = window.heapscopeFlame, r = {};
  function frame(name) {
    return Array.prototype.find.call(document.querySelectorAll('.hs-f'),
                                     function (e) { return e.textContent === name; });
  }
  r.zoomed = F.zoomTo(['main', 'process']);
  r.afterZoom = F.state();
  r.hashAfterZoom = location.hash;
  r.badPath = F.zoomTo(['main', 'nope']);
  r.search = F.search('malloc');
  r.setAlloc = F.setValue('alloc_bytes');
  r.setBogus = F.setValue('bogus');
  r.state = F.state();
  r.hash = location.hash;
  F.search('');
  F.setValue('inuse_bytes');
  F.zoomTo(null);
  frame('worker_loop').click();
  r.afterClick = F.state();
  r.hashAfterClick = location.hash;
  var target = frame('hash_insert');
  var box = target.getBoundingClientRect();
  target.dispatchEvent(new MouseEvent('mousemove', {bubbles: true, clientX: box.left + 2,
                                                    clientY: box.top + 2}));
  var tip = document.getElementById('hs-tip');
  r.tipShown = getComputedStyle(tip).display;
  r.tip = Array.prototype.map.call(tip.children, function (d) { return d.textContent; });
  r.details = document.getElementById('hs-details').textContent;
  document.getElementById('hs-reset').click();
  r.afterReset = F.state();
  r.hashAfterReset = location.hash;
  var count = document.querySelector('input[name=hs-unit][value=count]');
  count.click();
  r.afterRadio = F.state().value;
  document.body.setAttribute('data-probe', JSON.stringify(r));
})();
""")
        process = self.basic_node("main", "process")
        worker = self.basic_node("main", "process", "worker_loop")
        self.assertTrue(r["zoomed"])
        self.assertEqual(r["afterZoom"]["zoom"], process.id)
        self.assertEqual(r["afterZoom"]["zoomPath"], ["main", "process"])
        self.assertEqual(r["hashAfterZoom"], "#zoom=%d" % process.id)
        self.assertFalse(r["badPath"])
        self.assertEqual(r["search"], {"frames": 2, "value": 5120, "share": 5120 / 24576})
        self.assertTrue(r["setAlloc"])
        self.assertFalse(r["setBogus"])
        self.assertEqual(r["state"]["value"], "alloc_bytes")
        self.assertEqual(r["state"]["values"], KINDS)
        self.assertEqual(r["state"]["total"], 117760)
        self.assertEqual(r["hash"], "#zoom=%d&search=malloc&value=alloc_bytes" % process.id)
        self.assertEqual(r["afterClick"]["zoom"], worker.id, "a click zooms")
        self.assertEqual(r["hashAfterClick"], "#zoom=%d" % worker.id)
        self.assertEqual(r["tipShown"], "block")
        self.assertEqual(r["tip"], ["hash_insert",
                                    "in-use bytes: 4.0 KiB (4,096 B); in-use objects: 128",
                                    "16.67% of total, 33.33% of the zoomed frame"])
        self.assertEqual(r["details"], "".join(r["tip"]), "the details bar follows the hover")
        self.assertEqual(r["afterReset"]["zoom"], 0)
        self.assertEqual(r["hashAfterReset"], "")
        self.assertEqual(r["afterRadio"], "inuse_count")

    # ---- Screenshot ----

    def test_screenshot(self):
        os.makedirs(os.path.dirname(SCREENSHOT), exist_ok=True)
        if os.path.exists(SCREENSHOT):
            os.unlink(SCREENSHOT)
        chromium("file://" + self.pages["basic"], "--screenshot=" + SCREENSHOT)
        with open(SCREENSHOT, "rb") as f:
            png = f.read()
        self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
        self.assertEqual(png[12:16], b"IHDR")
        width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
        self.assertEqual((width, height), WINDOW)
        self.assertGreater(len(png), 10000, "more than a blank page")


def ancestors(node):
    out = []
    while node.parent is not None:
        node = node.parent
        out.append(node)
    return out


def page_data(raw):
    m = re.search(r'<script type="application/json" id="hs-data">(.*?)</script>', raw, re.S)
    return json.loads(m.group(1))


if __name__ == "__main__":
    unittest.main()
