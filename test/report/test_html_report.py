#!/usr/bin/env python3
"""strata-inspect --html in a real browser (Debian's chromium, headless).

For an in-memory plan and one under budgets that put optimizer state on the
SSD, both trained a few steps with strata-run --trace and --log-json: the
page loads with no console message at all (it has no script and loads
nothing), and its figures are there and agree with the plan and the run:
memory per tier within the tier's size, a predicted timeline that ends at
the compiler's predicted step time, a measured run of the plan in which
every step of the plan appears, a loss curve with a point per logged step.

    test_html_report.py --bin build/bin --work /tmp/report
"""

import html.parser
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "models"))
from harness import parse_args, run, run_tests, tool  # noqa: E402

import unittest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
ARGS = None


def chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    raise AssertionError("no chromium on PATH: scripts/install-deps.sh "
                         "installs Debian's chromium for this test")


def render(page, work):
    """Loads `page` in headless chromium: (the DOM after load, the console
    messages it logged)."""
    profile = os.path.join(work, "chromium-profile")
    r = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
         "--no-first-run", "--user-data-dir=" + profile,
         "--enable-logging=stderr", "--v=0", "--dump-dom",
         "file://" + os.path.abspath(page)],
        capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError("chromium failed on %s:\n%s" % (page, r.stderr))
    console = [line for line in r.stderr.splitlines()
               if ":CONSOLE" in line or "Uncaught" in line]
    return r.stdout, console


class Elements(html.parser.HTMLParser):
    """Every element with an id (its attributes), and the bars (rect.bar)
    and areas (polygon.area) inside each svg."""

    def __init__(self):
        super().__init__()
        self.by_id = {}
        self.shapes = {}
        self.svg = None
        self.table = None
        self.rows = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.by_id[a["id"]] = (tag, a)
        if tag == "svg":
            self.svg = a.get("id")
            self.shapes[self.svg] = {"bar": 0, "area": 0}
        elif self.svg and a.get("class") in ("bar", "area"):
            self.shapes[self.svg][a["class"]] += 1
        if tag == "table":
            self.table = a.get("id")
            self.rows[self.table] = []
        elif tag == "tr" and self.table:
            self.rows[self.table].append([])

    def handle_endtag(self, tag):
        if tag == "svg":
            self.svg = None
        elif tag == "table":
            self.table = None

    def handle_data(self, data):
        if self.table and self.rows[self.table] and data.strip():
            self.rows[self.table][-1].append(data.strip())


def parse(dom):
    p = Elements()
    p.feed(dom)
    return p


class HtmlReportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        work = ARGS.work
        run([sys.executable, os.path.join(ROOT, "examples", "gpt2-tiny",
                                          "make_model.py"), "--out", work])
        model = os.path.join(work, "gpt2-tiny.onnx")
        corpus = os.path.join(work, "corpus.bin")
        common = ["--input-shape", "input_ids=4x16", "--optimizer", "adamw",
                  "--lr", "3e-3"]
        cls.plans = {
            "memory": [],
            # Parameters, optimizer state and swapped activations on the
            # SSD; updates of some parameters on the CPU.
            "ssd": ["--gpu-mem", "448KiB", "--cpu-mem", "64KiB",
                    "--place-params", "ssd", "--place-states", "ssd",
                    "--place-activations", "ssd", "--ssd-dir",
                    os.path.join(work, "ssd")],
        }
        cls.steps = 6
        cls.pages = {}
        for name, extra in cls.plans.items():
            art = os.path.join(work, name + ".strata")
            shutil.rmtree(art, ignore_errors=True)
            run([tool("strata-compile"), model, *common, *extra, "-o", art])
            trace, log = art + ".trace.json", art + ".jsonl"
            run([tool("strata-run"), art, "--data", corpus, "--steps",
                 str(cls.steps), "--trace", trace, "--trace-steps", "2",
                 "--log-json", log, "--quiet"])
            page = os.path.join(work, name + ".html")
            run([tool("strata-inspect"), art, "--html", page, "--trace",
                 trace, "--log-json", log])
            cls.pages[name] = (art, page, trace, log)

    def inspect(self, art):
        text = run([tool("strata-inspect"), art]).stdout
        steps = int(re.search(r"^steps: (\d+)", text, re.M).group(1))
        with open(os.path.join(art, "manifest.txt")) as f:
            manifest = f.read()
        predicted = float(re.search(r"predicted step time: ([\d.]+) ms",
                                    manifest).group(1))
        return steps, predicted

    def test_console_check_sees_errors(self):
        """The console check is real: a page that logs an error and loads a
        missing image is caught."""
        bad = os.path.join(ARGS.work, "bad.html")
        with open(bad, "w") as f:
            f.write("<!DOCTYPE html><html><body><img src=\"missing.png\">"
                    "<script>console.error('broken page')</script>"
                    "</body></html>")
        _, console = render(bad, ARGS.work)
        self.assertTrue(any("broken page" in line for line in console),
                        console)

    def check_page(self, name):
        art, page, trace, log = self.pages[name]
        steps, predicted_ms = self.inspect(art)
        dom, console = render(page, ARGS.work)
        self.assertEqual(console, [], "the page logged to the console")
        p = parse(dom)
        ids = p.by_id

        # Memory per tier: the device always, within its size.
        tag, dev = ids["memory-device"]
        self.assertEqual(tag, "svg")
        self.assertGreater(int(dev["data-peak-bytes"]), 0)
        self.assertLessEqual(int(dev["data-peak-bytes"]),
                             int(dev["data-capacity-bytes"]))
        self.assertEqual(int(dev["data-positions"]), steps)
        self.assertGreaterEqual(p.shapes["memory-device"]["area"], 3)

        # The predicted queues end at the compiler's predicted step.
        tag, pred = ids["timeline-predicted"]
        self.assertEqual(tag, "svg")
        self.assertGreaterEqual(int(pred["data-spans"]), steps)
        self.assertAlmostEqual(float(pred["data-end-us"]) / 1e3,
                               predicted_ms, delta=0.002)
        self.assertGreater(p.shapes["timeline-predicted"]["bar"], 0)

        # The measured run: the last traced run of the plan, every step.
        tag, meas = ids["timeline-measured"]
        self.assertEqual(tag, "svg")
        self.assertEqual(int(meas["data-steps-covered"]), steps)
        with open(trace) as f:
            runs = [e for e in json.load(f)["traceEvents"]
                    if e.get("cat") == "run"]
        self.assertEqual(len(runs), 2)  # --trace-steps 2
        self.assertAlmostEqual(float(meas["data-run-us"]), runs[-1]["dur"],
                               delta=0.01)
        self.assertGreater(p.shapes["timeline-measured"]["bar"], 0)

        # The loss curve: a point per logged step.
        with open(log) as f:
            logged = [json.loads(line) for line in f if line.strip()]
        self.assertEqual(len(logged), self.steps)
        tag, loss = ids["loss-curve"]
        self.assertEqual(tag, "svg")
        self.assertEqual(int(loss["data-points"]), self.steps)

        # The placement table and the step-time table, with the schedule's
        # floor where the plan has one, as the manifest gives it.
        self.assertIn("placement", p.rows)
        self.assertIn("step-time", p.rows)
        with open(os.path.join(art, "manifest.txt")) as f:
            floor = re.search(r"^this schedule's floor: (.+)$", f.read(),
                              re.M)
        times = {r[0]: r[1] for r in p.rows["step-time"] if len(r) > 1}
        key = "this schedule's floor (the order of the work)"
        if floor:
            self.assertEqual(times.get(key), floor.group(1), times)
        else:
            self.assertNotIn(key, times)
        p.floor = floor
        return p

    def test_in_memory_plan(self):
        p = self.check_page("memory")
        # Nothing is on the SSD.
        self.assertEqual(p.by_id["memory-ssd"][0], "p")

    def test_ssd_plan(self):
        p = self.check_page("ssd")
        # Its SSD reads after the backward pass starts hold the step: the
        # page shows the floor.
        self.assertIsNotNone(p.floor)
        tag, ssd = p.by_id["memory-ssd"]
        self.assertEqual(tag, "svg")
        self.assertGreater(int(ssd["data-peak-bytes"]), 0)
        self.assertLessEqual(int(ssd["data-peak-bytes"]),
                             int(ssd["data-capacity-bytes"]))
        # The optimizer state's SSD column has bytes.
        rows = {r[0]: r[1:] for r in p.rows["placement"] if r}
        for cls in ("parameters", "optimizer state", "activations"):
            self.assertNotEqual(rows[cls][2], "-", cls)
        # Some updates ran on the CPU: predicted and measured busy time.
        busy = {r[0]: r[1:] for r in p.rows["queue-busy"] if r}
        self.assertNotEqual(busy["cpu"][0], "0.000 ms")
        self.assertNotEqual(busy["cpu"][1], "0.000 ms")
        # The planner weighed the naive plans (activations are forced).
        self.assertGreaterEqual(int(p.by_id["planner"][1]["data-rows"]), 2)

    def test_screenshot(self):
        """The page renders to an image (the README's is made this way)."""
        _, page, _, _ = self.pages["ssd"]
        png = os.path.join(ARGS.work, "report.png")
        if os.path.exists(png):
            os.unlink(png)
        r = subprocess.run(
            [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
             "--hide-scrollbars", "--user-data-dir=" +
             os.path.join(ARGS.work, "chromium-profile"),
             "--screenshot=" + png, "--window-size=980,2400",
             "file://" + page], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(png, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_bad_inputs(self):
        art, page, trace, log = self.pages["memory"]
        out = os.path.join(ARGS.work, "never.html")
        bad = os.path.join(ARGS.work, "bad-trace.json")
        with open(bad, "w") as f:
            f.write('{"traceEvents": [{"ph": "X", "tid": 1, "ts": 0,')
        r = subprocess.run([tool("strata-inspect"), art, "--html", out,
                            "--trace", bad], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn(bad, r.stderr)
        self.assertIn("not JSON", r.stderr)
        self.assertFalse(os.path.exists(out))
        badlog = os.path.join(ARGS.work, "bad.jsonl")
        with open(badlog, "w") as f:
            f.write('{"step": 0, "loss": 1.0}\n{"step": 1, "loss": \n')
        r = subprocess.run([tool("strata-inspect"), art, "--html", out,
                            "--log-json", badlog], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("line 2", r.stderr)
        r = subprocess.run([tool("strata-inspect"), art, "--trace", trace],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--html", r.stderr)
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    ARGS = parse_args()
    run_tests()
