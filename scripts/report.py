#!/usr/bin/env python3
"""The showcase's report: scripts/report.py DIR

Reads what the showcase's steps left in DIR (CSV, JSON, PNG, each step's
table as STEP.txt, steps.tsv, flame/) and writes DIR/report.md,
DIR/report.html (one self-contained file: the plots are embedded as data
URIs, no external script, style or font, so it works offline and can be
mailed) and DIR/summary.txt (the headline lines the showcase prints).

Only the files present are read: a step that did not run, or failed, gives
a line saying so instead of its section, and a file a section cannot make
sense of (truncated JSON, a CSV without a column it needs) gives an
"unreadable: FILE (why)" line in that section's place; the other sections
are still written. Python 3 standard library only.
"""

import base64
import csv
import glob
import html
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# How the locks plots draw the compute ceiling (bench/locks/lk_plot.c).
CEILING_LINE = ("; the dashed black line is the compute ceiling: it rises with the threads up "
                "to the number of CPUs, then stays flat")


class Unreadable(Exception):
    """A file that is there but cannot be made sense of."""

    def __init__(self, path, why):
        super().__init__("%s: %s" % (path, why))
        self.path, self.why = path, why


def read_tsv(path):
    rows = []
    if os.path.isfile(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                if line:
                    rows.append(line.split("\t"))
    return rows


def first_csv_block(path, need=()):
    """The rows of the first CSV block (header, then rows up to a blank line
    or a row of another width), as dicts; [] when the file is absent.
    Unreadable when the header lacks one of the columns in need."""
    if not os.path.isfile(path):
        return []
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        rows = list(csv.reader(lines))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise Unreadable(path, str(e)) from e
    if not rows:
        return []
    head, out = rows[0], []
    missing = [c for c in need if c not in head]
    if missing:
        raise Unreadable(path, "no column %s in its header" % ", ".join(missing))
    for r in rows[1:]:
        if len(r) != len(head):
            break
        out.append(dict(zip(head, r)))
    return out


def read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            js = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise Unreadable(path, str(e)) from e
    if not isinstance(js, dict):
        raise Unreadable(path, "not a JSON object")
    return js


def num(x):
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, digits=2):
    if v is None:
        return "-"
    if abs(v) >= 100:
        return "%.0f" % v
    return "%.*f" % (digits, v)


def ratio_text(v):
    return "-" if v is None else ("%.0fx" % v if v >= 10 else "%.2fx" % v)


def size_text(n):
    """A byte count as bpbench writes sizes: 64, 4K, 1M."""
    for shift, suffix in ((30, "G"), (20, "M"), (10, "K")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d%s" % (n >> shift, suffix)
    return str(n)


# Other processes' CPU (or steal), % of the machine, above which a step's
# numbers are marked as measured under load.
LOADED_PCT = 20

def spread(values, digits=2):
    """"median [min-max] n=K" of the numbers among values, or "-"."""
    v = [x for x in values if x is not None]
    if not v:
        return "-"
    if len(v) == 1:
        return "%s n=1" % fmt(v[0], digits)
    return "%s [%s-%s] n=%d" % (fmt(median(v), digits), fmt(min(v), digits),
                                fmt(max(v), digits), len(v))


def overlaps(a, b):
    """Whether the min-max ranges of two run lists overlap: then the runs
    do not show which is faster, whatever the medians say."""
    a = [x for x in a if x is not None]
    b = [x for x in b if x is not None]
    return bool(a and b and len(a) + len(b) > 2 and
                max(min(a), min(b)) <= min(max(a), max(b)))


OVERLAP = " (ranges overlap)"
OVERLAP_NOTE = ("\"(ranges overlap)\": the two sides' min-max ranges over the runs "
                "overlap, so the runs do not show a difference, whatever the medians "
                "say.")


def gnuplot(script):
    """Run gnuplot on script: "" when it drew, else why not."""
    exe = shutil.which("gnuplot")
    if not exe:
        return "gnuplot is not installed (scripts/deps.sh installs it)"
    try:
        r = subprocess.run([exe], input=script, text=True, capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        return "gnuplot failed: %s" % e
    if r.returncode != 0:
        return "gnuplot failed: %s" % (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
    return ""


PLOT_TERM = "set terminal pngcairo size %d,%d enhanced font 'DejaVu Sans,10'\n"


MISSED_RE = re.compile(r"\b(MISSED|MISSES)\b")
MET_RE = re.compile(r"\b(met|meets|MET)\b")


def target_lines(path):
    """The targets a step's table judges, as (target, verdict) pairs:
    every line of its HEADLINE block that says met / meets / MISSED /
    MISSES / n/a (a line with several verdicts, "a: meets; b: MISSES",
    gives one pair each); bpbench rdma's block is headed "targets".
    [] when the table has neither."""
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    out, inside = [], False
    for line in lines:
        if line.startswith("HEADLINE") or line.strip() == "targets":
            inside = True
            continue
        if not inside:
            continue
        if not line.strip():
            inside = False
            continue
        for part in line.strip().split("; "):
            if MISSED_RE.search(part):
                out.append((part, "MISSED"))
            elif MET_RE.search(part):
                out.append((part, "met"))
            elif re.search(r":\s*n/a\b", part):
                out.append((part, "n/a"))
    return out


def target_count(pairs):
    """"2 met, 1 MISSED" (n/a left out), or "" without targets."""
    met = sum(1 for _, v in pairs if v == "met")
    missed = sum(1 for _, v in pairs if v == "MISSED")
    if not met and not missed:
        return ""
    return "%d met, %d MISSED" % (met, missed)


class Report:
    """Collects sections as (markdown, html) pairs and the summary lines."""

    def __init__(self, d):
        self.dir = d
        self.flame_runs = {}  # flame_profiles: {name: (M/s, CPUs)} as profiled
        self.md = []
        self.html = []
        self.summary = []
        # Padded to id, status, seconds, title, note, others %, steal %: a
        # short line reads as empty fields, not as a crash.
        self.steps = {r[0]: r + [""] * (7 - len(r))
                      for r in read_tsv(os.path.join(d, "steps.tsv"))}
        self.meta = {r[0]: r[1] for r in read_tsv(os.path.join(d, "showcase.tsv")) if len(r) > 1}
        self.used_png = set()
        # Where the current section's heading ends, and the file it read
        # last: what guarded() keeps and names when the section fails.
        self.mark = (0, 0)
        self.current = None

    # -- output primitives -------------------------------------------------
    def heading(self, text, level=2):
        self.md.append("%s %s\n" % ("#" * level, text))
        self.html.append("<h%d>%s</h%d>" % (level, html.escape(text), level))
        self.mark = (len(self.md), len(self.html))

    def para(self, text, cls=None):
        self.md.append(text + "\n")
        c = ' class="%s"' % cls if cls else ""
        self.html.append("<p%s>%s</p>" % (c, html.escape(text)))

    def table(self, head, rows):
        self.md.append("| " + " | ".join(head) + " |")
        self.md.append("|" + "|".join(" --- " for _ in head) + "|")
        for r in rows:
            self.md.append("| " + " | ".join(str(c) for c in r) + " |")
        self.md.append("")
        h = "".join("<th>%s</th>" % html.escape(c) for c in head)
        body = "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % html.escape(str(c)) for c in r)
                       for r in rows)
        self.html.append("<table><tr>%s</tr>%s</table>" % (h, body))

    def pre(self, text, summary):
        self.md.append("<details><summary>%s</summary>\n\n```\n%s\n```\n</details>\n"
                       % (summary, text.rstrip()))
        self.html.append("<details><summary>%s</summary><pre>%s</pre></details>"
                         % (html.escape(summary), html.escape(text.rstrip())))

    def figure(self, name, sentence):
        path = os.path.join(self.dir, name)
        if not os.path.isfile(path) or os.path.getsize(path) == 0:
            self.para("Figure %s: not there (the step did not draw it)." % name, "missing")
            return
        self.used_png.add(os.path.normpath(name))
        with open(path, "rb") as f:
            data = base64.b64encode(f.read()).decode("ascii")
        self.md.append("![%s](%s)\n\n*%s*\n" % (name, name, sentence))
        self.html.append('<figure><img alt="%s" src="data:image/png;base64,%s">'
                         "<figcaption><b>%s</b>: %s</figcaption></figure>"
                         % (html.escape(name), data, html.escape(name), html.escape(sentence)))

    def plot(self, name, size, settings, plots, caption):
        """Draw NAME (a PNG in the results folder) with gnuplot: the common
        terminal and key, then settings and `plot` of the plots; the figure
        with its caption, or a line saying why it was not drawn."""
        png = os.path.join(self.dir, name)
        why = gnuplot(PLOT_TERM % size + "set output '%s'\nset termoption noenhanced\n"
                      "set grid\nset key outside right top\n%s\nplot %s\n"
                      % (png, settings.strip(), ", ".join(plots)))
        if why:
            self.para("%s: not drawn: %s" % (name, why), "missing")
        else:
            self.figure(name, caption)

    def link(self, href, text):
        self.md.append("* [%s](%s)" % (text, href))
        self.html.append('<li><a href="%s">%s</a></li>' % (html.escape(href), html.escape(text)))

    # -- input -------------------------------------------------------------
    def csv_rows(self, name, *need):
        self.current = os.path.join(self.dir, name)
        return first_csv_block(self.current, need)

    def json_file(self, name):
        self.current = os.path.join(self.dir, name)
        return read_json(self.current)

    def guarded(self, section, *args):
        """Runs one section. Should its input be malformed, what it wrote
        after its heading is dropped for one "unreadable: FILE (why)" line,
        and the report goes on with the next section. Beyond Unreadable,
        the errors malformed values raise (a cell that is not a number, a
        JSON field of another type) are caught too and named by the file
        the section read last."""
        md, ht, summ, png = len(self.md), len(self.html), len(self.summary), set(self.used_png)
        self.mark, self.current = (md, ht), None
        try:
            section(*args)
        except (Unreadable, OSError, UnicodeDecodeError, ValueError, KeyError, IndexError,
                TypeError, AttributeError, ZeroDivisionError) as e:
            del self.md[self.mark[0]:]
            del self.html[self.mark[1]:]
            del self.summary[summ:]
            self.used_png = png
            path = e.path if isinstance(e, Unreadable) else self.current
            why = e.why if isinstance(e, Unreadable) else "%s: %s" % (type(e).__name__, e)
            where = os.path.relpath(path, self.dir) if path else "a file of this section"
            line = "unreadable: %s (%s)" % (where, why)
            self.para(line, "missing")
            self.summary.append(line)

    # -- step status -------------------------------------------------------
    def step_state(self, sid, *needed):
        """None when the step's files are there; else the "not run" line."""
        st = self.steps.get(sid)
        have = all(os.path.isfile(os.path.join(self.dir, n)) for n in needed)
        if st and st[1] == "failed":
            return "FAILED, %s" % (st[4] if len(st) > 4 else "no reason given")
        if st and st[1] == "skipped":
            return "not run: %s" % (st[4] if len(st) > 4 else "skipped")
        if not have:
            return "not run: %s" % ("its output (%s) is missing" % ", ".join(needed)
                                    if st else "the step was not run")
        return None

    def not_run(self, sid, state):
        self.para(state, "missing")
        if state.startswith("FAILED"):
            self.summary.append("%s: %s" % (sid, state))

    def step_targets(self, sid):
        """The step's targets with their verdicts, in the open (from the
        HEADLINE of its own table), and one summary line when one was
        missed."""
        pairs = target_lines(os.path.join(self.dir, sid + ".txt"))
        if not pairs:
            return
        self.para("Targets, as the step's own table judges them on this run "
                  "(%s):" % target_count(pairs))
        self.table(["target", "verdict"], pairs)
        missed = [t for t, v in pairs if v == "MISSED"]
        judged = sum(1 for _, v in pairs if v in ("met", "MISSED"))
        if missed:
            self.summary.append("%s: %d of %d targets MISSED (first: %s)"
                                % (sid, len(missed), judged, missed[0]))

    RUNS_RE = re.compile(r"(\d+) runs? x (\d+) ms|(\d+) run\(s\) per point.*?--ms (\d+)|"
                         r"medians of (\d+) interleaved runs of (\d+) ms", re.S)

    def step_runs(self, sid):
        """How many runs of how long each the step's numbers come from, as
        its table says in its first lines: one line, or nothing."""
        p = os.path.join(self.dir, sid + ".txt")
        if not os.path.isfile(p):
            return
        with open(p, encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
        m = self.RUNS_RE.search(head)
        if m:
            g = [x for x in m.groups() if x is not None]
            self.para("Runs behind each figure: %s per point, each a window of %s ms "
                      "(interleaved; the spreads above are over these runs)." % (g[0], g[1]))

    def step_table(self, sid, targets=True):
        """How many runs of how long, the step's targets (unless targets
        is False: the flame step's table holds the profiled runs' output,
        not targets of its own), then its whole table, folded."""
        if targets:
            self.step_runs(sid)
            self.step_targets(sid)
        p = os.path.join(self.dir, sid + ".txt")
        if os.path.isfile(p) and os.path.getsize(p):
            with open(p, encoding="utf-8", errors="replace") as f:
                self.pre(f.read(), "%s: the step's table (%s.txt)" % (sid, sid))

    # -- sections ----------------------------------------------------------
    def machine(self):
        cpus = os.cpu_count()
        model = ""
        try:
            with open("/proc/cpuinfo") as f:
                m = re.search(r"^model name\s*:\s*(.*)$", f.read(), re.M)
                model = m.group(1) if m else ""
        except OSError:
            pass
        try:
            commit = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                                    capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            commit = ""
        try:
            with open("/proc/loadavg") as f:
                load_now = " ".join(f.read().split()[:3])
        except OSError:
            load_now = "?"
        rows = [
            ("date", self.meta.get("started", "?") + (" to " + self.meta["finished"]
                                                      if "finished" in self.meta else "")),
            ("mode", self.meta.get("mode", "?")),
            ("git commit", commit or "unknown"),
            ("CPUs", "%s x %s" % (cpus, model or "?")),
            ("kernel", "%s %s" % (platform.system(), platform.release())),
            ("load average (1, 5, 15 min)", "start %s, end %s" % (
                self.meta.get("loadavg_start", "?"), self.meta.get("loadavg_end", load_now))),
        ]
        self.heading("Machine and run")
        self.table(["what", "value"], rows)
        self.para("Numbers from a shared or virtual machine are rough: read the ratios of "
                  "variants measured in the same interleaved runs, not the absolute values.")

    def steps_section(self):
        self.heading("Steps")
        if not self.steps:
            self.para("not run: no steps.tsv (this folder was not written by the showcase)",
                      "missing")
            return
        rows, loaded = [], []
        for r in self.steps.values():
            load = ""
            others, steal = num(r[5]), num(r[6])
            if others is not None and steal is not None:
                load = "others %.0f %%, steal %.0f %%" % (others, steal)
                # the report step measures nothing: its load judges nothing
                if (others > LOADED_PCT or steal > LOADED_PCT) and r[0] != "report":
                    load += " (UNDER LOAD)"
                    loaded.append("%s (others %.0f %%, steal %.0f %%)"
                                  % (r[3] or r[0], others, steal))
            rows.append((r[3] or r[0], r[1],
                         target_count(target_lines(os.path.join(self.dir, r[0] + ".txt"))),
                         r[2], load, r[4]))
        self.table(["step", "status", "targets", "seconds", "machine load", "note"], rows)
        self.para("status says whether a step ran to the end; targets, what its own "
                  "table judged of its numbers (each section lists them); machine load, "
                  "the CPU other processes used and the steal a hypervisor took while "
                  "the step ran, as %% of the CPUs (above %d %%: UNDER LOAD)." % LOADED_PCT)
        if loaded:
            line = ("load: %s ran while the machine was busy with other work: "
                    "their numbers cannot be trusted" % ", ".join(loaded))
            self.para(line, "missing")
            self.summary.insert(0, line)

    def locks_headline(self, name):
        """Rows per thread count from NAME.json (else from NAME.csv)."""
        js, ceiling = None, None
        p = os.path.join(self.dir, name + ".json")
        if os.path.isfile(p):
            js = self.json_file(name + ".json")
            ceiling = num(js.get("ceiling_mps"))
            rows = []
            for h in js.get("headline", []):
                r = {k: h.get(k) for k in ("threads", "best_B", "best_mps",
                                           "mutex_mps", "ratio", "pipeline_mps",
                                           "best_pct_of_ceiling", "mutex_pct_of_ceiling",
                                           "pipeline_pct_of_ceiling")}
                # The best of the batchpipe variants at this thread count.
                r["best_variant"] = h.get("best_batchpipe")
                # The ceiling can depend on the thread count (min(threads, CPUs)).
                r["ceiling"] = num(h.get("ceiling_mps")) or ceiling
                rows.append(r)
            return js, ceiling, rows
        med = {}
        for r in self.csv_rows(name + ".csv", "variant", "threads", "B", "Mitems_per_s"):
            med.setdefault((r["variant"], int(r["threads"]), int(r["B"])), []).append(
                num(r["Mitems_per_s"]))
        med = {k: median(v) for k, v in med.items()}
        rows = []
        for t in sorted({k[1] for k in med}):
            best = max(((v, k) for k, v in med.items() if k[1] == t and v is not None
                        and k[0].startswith("batchpipe") and k[0] != "batchpipe-pipeline"),
                       default=None)
            mutex = max((v for k, v in med.items() if k[1] == t and k[0] == "mutex"
                         and v is not None), default=None)
            pipe = max((v for k, v in med.items() if k[1] == t and k[0] == "batchpipe-pipeline"
                        and v is not None), default=None)
            rows.append({"threads": t, "ceiling": None, "best_pct_of_ceiling": None,
                         "mutex_pct_of_ceiling": None, "pipeline_pct_of_ceiling": None,
                         "best_variant": best[1][0] if best else None,
                         "best_B": best[1][2] if best else None,
                         "best_mps": best[0] if best else None, "mutex_mps": mutex,
                         "ratio": best[0] / mutex if best and mutex else None,
                         "pipeline_mps": pipe})
        return None, None, rows

    def locks_runs(self, name):
        """{(variant, threads, B): [M/s of each run]} from NAME.csv, {} without it."""
        runs = {}
        if os.path.isfile(os.path.join(self.dir, name + ".csv")):
            for r in self.csv_rows(name + ".csv", "variant", "threads", "B", "Mitems_per_s"):
                v = num(r["Mitems_per_s"])
                if v is not None:
                    runs.setdefault((r["variant"], str(r["threads"]), str(r["B"])), []).append(v)
        return runs

    @staticmethod
    def locks_vals(runs, variant, threads, b, med):
        """The runs behind a headline median: at B b, or (b None) at the B
        whose median is med; [] without them."""
        if b is not None:
            return runs.get((variant, str(threads), str(b)), [])
        cands = [v for k, v in runs.items() if k[0] == variant and k[1] == str(threads)]
        return min(cands, key=lambda v: abs(median(v) - (med or 0)), default=[])

    @classmethod
    def locks_spread(cls, runs, variant, threads, b, med):
        """Those runs as "median [min-max] n"; the median alone without
        them."""
        vals = cls.locks_vals(runs, variant, threads, b, med)
        return spread(vals) if vals else fmt(med)

    def mutex_span(self, name, top):
        """" (mutex X-Y M/s over n runs: A-B x)": how far the mutex baseline
        itself moved between runs at the headline's thread count (at the B
        whose median is the headline's mutex figure), and so how far the
        ratio could; "" without the runs."""
        best, mutex = num(top.get("best_mps")), num(top.get("mutex_mps"))
        if not best or not mutex or not os.path.isfile(os.path.join(self.dir, name + ".csv")):
            return ""
        runs = {}
        for r in self.csv_rows(name + ".csv", "variant", "threads", "B", "Mitems_per_s"):
            if r["variant"] == "mutex" and str(r["threads"]) == str(top["threads"]):
                v = num(r["Mitems_per_s"])
                if v:
                    runs.setdefault(r["B"], []).append(v)
        vals = min(runs.values(), key=lambda v: abs(median(v) - mutex), default=[])
        if len(vals) < 2:
            return ""
        return " (mutex %s-%s M/s over %d runs: %s-%s)" % (
            fmt(min(vals)), fmt(max(vals)), len(vals), ratio_text(best / max(vals)),
            ratio_text(best / min(vals)))

    @staticmethod
    def pct_of_ceiling(r, what, ceiling):
        """WHAT's % of the compute ceiling: bpbench's own figure from the
        JSON (WHAT_pct_of_ceiling) where it wrote one, so the report and
        bpbench's table agree; else WHAT_mps over the row's ceiling."""
        v = num(r.get(what + "_pct_of_ceiling"))
        if v is not None:
            return v
        mps, c = num(r.get(what + "_mps")), r.get("ceiling") or ceiling
        return 100 * mps / c if mps and c else None

    def locks(self, name, label, work):
        self.heading("Locks, %s" % label)
        state = self.step_state(name, name + ".csv")
        if state and not os.path.isfile(os.path.join(self.dir, name + ".csv")):
            self.not_run(name, state)
            return
        if state:
            self.not_run(name, state)
        js, ceiling, rows = self.locks_headline(name)
        self.para("The write-up's experiment: N workers take jobs from a shared source and "
                  "emit results to one consumer. mutex is the baseline (a mutex on the job "
                  "queue, results one by one under a second mutex); the batchpipe variants "
                  "batch both ends through lock-free rings (batchpipe-pipeline is the library's "
                  "own producers -> workers -> sink). Medians of interleaved runs, M results/s.")
        head = ["threads", "best batchpipe variant (B)", "M/s, median [min-max] n",
                "mutex M/s, median [min-max] n", "batchpipe / mutex (of medians)",
                "batchpipe-pipeline M/s, median [min-max] n"]
        if work and ceiling:
            head += ["best % of ceiling", "mutex % of ceiling", "pipeline % of ceiling"]
        runs = self.locks_runs(name)
        out, above = [], False
        for r in rows:
            best_runs = self.locks_vals(runs, r["best_variant"], r["threads"], r["best_B"],
                                        num(r["best_mps"]))
            mutex_runs = self.locks_vals(runs, "mutex", r["threads"], None,
                                         num(r["mutex_mps"]))
            line = [r["threads"], "%s (B=%s)" % (r["best_variant"], r["best_B"])
                    if r["best_variant"] else "-",
                    spread(best_runs) if best_runs else fmt(num(r["best_mps"])),
                    spread(mutex_runs) if mutex_runs else fmt(num(r["mutex_mps"])),
                    ratio_text(num(r["ratio"])) +
                    (OVERLAP if overlaps(best_runs, mutex_runs) else ""),
                    self.locks_spread(runs, "batchpipe-pipeline", r["threads"], None,
                                      num(r["pipeline_mps"]))]
            if work and ceiling:
                pcts = [self.pct_of_ceiling(r, k, ceiling) for k in ("best", "mutex", "pipeline")]
                line += [fmt(v, 1) for v in pcts]
                if pcts[0] is not None and pcts[0] > 105:
                    above = True
            out.append(line)
        self.table(head, out)
        self.para(OVERLAP_NOTE + (" The % of the ceiling is of the medians." if work and ceiling
                                  else ""))
        if work and ceiling and above:
            self.para("Warning: a variant runs above the compute ceiling, which no correct "
                      "run can do: the ceiling's measurement (or the jobs' work) is off here, "
                      "so the % of the ceiling above cannot be trusted.", "missing")
        if js:
            extra = "usable CPUs %s" % js.get("cpus", js.get("usable_cpus"))
            if work:
                extra += (", job work asked %s ns, measured %s ns, compute ceiling %s M/s "
                          "with every CPU busy (measured: pinned threads, min(threads, CPUs) of "
                          "them, doing only the jobs, no hand-offs, beside every run): no correct "
                          "variant can beat it"
                          % (js.get("work_ns"), fmt(num(js.get("work_ns_measured")), 1),
                             fmt(num(ceiling))))
            self.para(extra + ".")
        if rows:
            # The write-up's headline point is 16 threads; else the most threads run.
            top = next((r for r in rows if r["threads"] == 16),
                       max(rows, key=lambda r: r["threads"] or 0))
            line = "%s, %s threads: best batchpipe variant %s %s M/s = %s mutex" % (
                label, top["threads"], top["best_variant"], fmt(num(top["best_mps"])),
                ratio_text(num(top["ratio"])))
            line += self.mutex_span(name, top)
            best_pct = self.pct_of_ceiling(top, "best", ceiling) if work and ceiling else None
            if best_pct is not None:
                line += " = %.0f %% of the ceiling" % best_pct
            line += " (batchpipe-pipeline %s M/s)" % fmt(num(top["pipeline_mps"]))
            self.summary.append(line)
            if work and ceiling and above:
                self.summary.append("%s: WARNING: a variant runs above the compute ceiling; "
                                    "the %% of the ceiling cannot be trusted" % label)
        if not work:
            self.para("The write-up this experiment follows (the \"150x in three steps\" of "
                      "the README) measured its own program; the ratio here is this machine's, "
                      "with the mutex baseline's run-to-run spread beside it in the headline: "
                      "on a shared machine the mutex moves by several times between runs.")
        self.figure(name + "-threads.png",
                    "the write-up's figure: throughput vs worker threads, log-log, one panel per "
                    "variant and one line per batch size B. A line that rises with threads "
                    "scales; a flat or falling one is a contended hand-off"
                    + (CEILING_LINE if work else "") + ".")
        self.figure(name + "-best.png",
                    "each variant at its best B vs threads, log-log: the vertical distance "
                    "between two lines is their ratio, the same at every height"
                    + (CEILING_LINE if work else "") + ".")
        self.step_table(name)

    def ring(self):
        self.heading("Ring comparison")
        state = self.step_state("ring", "ring.csv")
        rows = self.csv_rows("ring.csv", "queue", "P", "C", "B", "Mitems_per_s")
        if state:
            self.not_run("ring", state)
        if not rows:
            if not state:
                self.para("not run: ring.csv has no rows", "missing")
            return
        med = {}
        for r in rows:
            med.setdefault((r["P"], r["C"], int(r["B"])), {}).setdefault(r["queue"], []).append(
                num(r["Mitems_per_s"]))
        out, ratios = [], []
        for (p, c, b) in sorted(med, key=lambda k: (int(k[0]), int(k[1]), k[2])):
            qs = {q: median(v) for q, v in med[(p, c, b)].items()}
            bp = qs.get("batchpipe")
            # a "-ceiling" queue is code for one topology only (bench/queues/q_spsc.c):
            # batchpipe's mode for that topology is held to it, below
            others = [(v, q) for q, v in qs.items()
                      if not q.startswith("batchpipe") and not q.endswith("-ceiling") and v]
            best = max(others, default=None)
            ratio = bp / best[0] if bp and best else None
            if ratio:
                ratios.append(ratio)
            bp_runs = med[(p, c, b)].get("batchpipe", [])
            best_runs = med[(p, c, b)].get(best[1], []) if best else []
            out.append(["%sx%s" % (p, c), b, spread(bp_runs), best[1] if best else "-",
                        spread(best_runs) if best else "-",
                        ratio_text(ratio) + (OVERLAP if overlaps(bp_runs, best_runs) else "")])
        names = sorted({r["queue"] for r in rows
                        if not r["queue"].startswith("batchpipe")
                        and not r["queue"].endswith("-ceiling")})
        self.para("bp_ring (multi-producer, multi-consumer) against the best of the other "
                  "queues (%s) at each point: P producers x C consumers, batch size B; "
                  "medians of interleaved runs, M items/s." % ", ".join(names))
        self.table(["PxC", "B", "batchpipe M/s, median [min-max] n", "best other",
                    "its M/s, median [min-max] n", "batchpipe / best other (of medians)"],
                   out)
        self.para(OVERLAP_NOTE)
        self.ring_ratio_figure(med, names)
        if ratios:
            g = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
            self.summary.append("ring: batchpipe / best other queue: geometric mean %.2fx over "
                                "%d points (%.2fx to %.2fx)" % (g, len(ratios), min(ratios),
                                                               max(ratios)))
        ceil = []
        for (p, c, b) in sorted(med, key=lambda k: (int(k[0]), int(k[1]), k[2])):
            qs = {q: median(v) for q, v in med[(p, c, b)].items()}
            sp, top = qs.get("batchpipe-sp-sc"), qs.get("spsc-ceiling")
            if sp and top:
                a, t = med[(p, c, b)]["batchpipe-sp-sc"], med[(p, c, b)]["spsc-ceiling"]
                ceil.append(["%sx%s" % (p, c), b, spread(a), spread(t),
                             ratio_text(sp / top) + (OVERLAP if overlaps(a, t) else "")])
        if ceil:
            self.para("bp_ring's single-producer / single-consumer mode against the plain "
                      "cached-index SPSC ring written for that topology alone (its ceiling).")
            self.table(["PxC", "B", "batchpipe-sp-sc M/s, median [min-max] n",
                        "spsc-ceiling M/s, median [min-max] n", "ratio (of medians)"], ceil)
        for png in ("ring.png",):
            if os.path.isfile(os.path.join(self.dir, png)):
                self.figure(png, "ring throughput per queue and point.")
        self.step_table("ring")

    def ring_ratio_figure(self, med, names):
        """ring-ratios.png: batchpipe / each other queue at every point, a
        bar per queue, on a log scale with the line of 1 (above it,
        batchpipe moved more)."""
        keys = sorted(med, key=lambda k: (int(k[0]), int(k[1]), k[2]))
        dat = os.path.join(self.dir, "ring-ratios.dat")
        with open(dat, "w", encoding="utf-8") as f:
            f.write("# point " + " ".join(names) + "\n")
            for (p, c, b) in keys:
                qs = {q: median(v) for q, v in med[(p, c, b)].items()}
                bp = qs.get("batchpipe")
                f.write('"%sx%s B=%d"' % (p, c, b))
                for q in names:
                    v = qs.get(q)
                    f.write(" %s" % ("%.4g" % (bp / v) if bp and v else "?"))
                f.write("\n")
        self.plot("ring-ratios.png", (max(900, 30 * len(keys) * max(1, len(names)) // 2), 480),
                  """set datafile missing '?'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set ylabel 'batchpipe / queue (median M items/s; > 1: batchpipe moved more)'
set xtics rotate by -30
set title 'bp_ring against each other queue, per point (P producers x C consumers, batch B)'""",
                  ["'%s' using %d:xtic(1) title '%s'" % (dat, i + 2, q)
                   for i, q in enumerate(names)]
                  + ["1 with lines lw 2 lc rgb 'black' notitle"],
                  "batchpipe's median throughput over each other queue's, per point, on a "
                  "log scale: a bar above the black line at 1 is a point where batchpipe "
                  "moved more items than that queue; data in ring-ratios.dat, from ring.csv.")

    def pipeline(self):
        self.heading("Pipeline")
        state = self.step_state("pipeline", "pipeline.txt")
        if state:
            self.not_run("pipeline", state)
        rows = self.csv_rows("pipeline.csv", "workers", "wait", "B", "ordered",
                             "Mjobs_per_s")
        if rows:
            runs = {}
            for r in rows:
                if r["ordered"] == "0":
                    runs.setdefault((r["wait"], int(r["workers"]), int(r["B"])), []).append(
                        num(r["Mjobs_per_s"]))
            bs = sorted({k[2] for k in runs})
            if not runs:
                raise Unreadable(self.current, "no unordered rows")
            self.para("bp_pipeline end to end (producers -> workers -> sink, trivial jobs, "
                      "unordered): M jobs/s per wait strategy, worker count W and batch size B, "
                      "median [min-max] of n interleaved runs.")
            self.table(["wait", "W"] + ["B=%d" % b for b in bs],
                       [[w, n] + [spread(runs.get((w, n, b), []), 1) for b in bs]
                        for (w, n) in sorted({(k[0], k[1]) for k in runs})])
            self.pipeline_figure(runs)
        for png in sorted(glob.glob(os.path.join(self.dir, "pipeline*.png"))):
            if os.path.basename(png) != "pipeline-workers.png":
                self.figure(os.path.basename(png), "the pipeline's throughput.")
        self.pipeline_latency()
        self.step_table("pipeline")

    LAT_ROW = re.compile(r"^(busy-poll|spin-sleep|sleep)" + r"\s+([\d.]+) / ([\d.]+)" * 5 +
                         r"\s+([\d.]+)\s*$")

    def pipeline_latency(self):
        """The latency, wake-up and idle-CPU table of pipeline.txt, in the
        open: one job at a time through 1 producer and 1 worker, per wait."""
        p = os.path.join(self.dir, "pipeline.txt")
        if not os.path.isfile(p):
            return
        self.current = p
        with open(p, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
        start = next((i for i, l in enumerate(lines) if l.startswith("Latency, 1 producer")), None)
        if start is None:
            return
        rows, floors, gap = [], [], "a long"
        for line in lines[start:]:
            m = re.search(r"wake-up: (\d+) us idle", line)
            if m:
                gap = "%s us" % m.group(1)
            if line.startswith("HEADLINE"):
                break
            m = self.LAT_ROW.match(line)
            if m:
                g = m.groups()
                rows.append([g[0], "%s / %s" % (g[1], g[2]), "%s / %s" % (g[5], g[6]),
                             "%s / %s" % (g[7], g[8]), g[11]])
            elif line.startswith(("cross-core hand-off", "gap, p50 / p99", "wake-up floor")):
                floors.append(line.strip())
        if not rows:
            return
        self.para(("Latency and idle CPU (bpbench pipeline's own table): one job at a time, 1 "
                  "producer, 1 worker, submit -> sink callback one way in us, p50 / p99, "
                  "medians over the runs. low-load: the producer spins until its job is back; "
                  "same-wait: it waits with the row's strategy; wake-up: after %s idle "
                  "gap, so the workers and the sink sleep first; idle CPU: 2 workers and the "
                  "sink with no jobs, %% of one core. Busy-polling buys the wake-up with a "
                   "core; the sleeping waits give it back.") % gap)
        self.table(["wait", "low-load p50 / p99 us", "same-wait p50 / p99 us",
                    "wake-up p50 / p99 us", "idle CPU %"], rows)
        if floors:
            self.para("Floors on this machine: " + " ".join(floors))

    def chain(self):
        self.heading("Chains of stages")
        state = self.step_state("chain", "chain.txt")
        if state:
            self.not_run("chain", state)
            return
        self.para("A chain of two stages (each doing half of every job's work, W workers each) "
                  "against one stage doing all of it, and a serial-in-order stage against a "
                  "mutex-protected section (bpbench pipeline --stages 2; medians of per-run "
                  "ratios of interleaved runs).")
        self.step_table("chain")

    def plain_runs(self):
        """The plain variant's runs from pipeline.csv's tagged block:
        {(wait, W, B): [M jobs/s]}; {} when there is none."""
        p = os.path.join(self.dir, "pipeline.csv")
        out = {}
        with open(p, encoding="utf-8", errors="replace") as f:
            for row in csv.reader(f):
                if len(row) >= 8 and row[0] == "plain" and row[1] != "producers":
                    v = num(row[6])
                    if v is not None:
                        out.setdefault((row[4], int(row[2]), int(row[3])), []).append(v)
        return out

    def pipeline_figure(self, runs):
        """pipeline-workers.png: M jobs/s against W, a line per B, for the
        default wait (spin-sleep, else the first measured); the plain design
        dashed in the same colour where it ran."""
        waits = sorted({k[0] for k in runs})
        wait = "spin-sleep" if "spin-sleep" in waits else waits[0]
        plain = self.plain_runs()
        bs = sorted({k[2] for k in runs if k[0] == wait})
        dat = os.path.join(self.dir, "pipeline-workers.dat")
        plots = []
        with open(dat, "w", encoding="utf-8") as f:
            idx = 0
            for i, b in enumerate(bs):
                for what, src in (("batchpipe", runs), ("plain", plain)):
                    pts = sorted((k[1], median(v)) for k, v in src.items()
                                 if k[0] == wait and k[2] == b and median(v))
                    if not pts:
                        continue
                    f.write("# %s B=%d\n" % (what, b))
                    f.write("".join("%d %.4g\n" % p for p in pts) + "\n\n")
                    plots.append("'%s' index %d using 1:2 with linespoints lw 2 dt %d "
                                 "lc %d title '%s B=%d'" % (dat, idx, 1 if what == "batchpipe"
                                                            else 2, i + 1, what, b))
                    idx += 1
        if not plots:
            return
        self.plot("pipeline-workers.png", (900, 520), """set logscale x 2
set logscale y
set xlabel 'workers W'
set ylabel 'M jobs/s (median)'
set title 'bp_pipeline (solid) and the plain design (dashed), %s, trivial jobs'""" % wait,
                  plots,
                  "the pipeline's median throughput against the worker count, a colour per "
                  "batch size B, wait %s; dashed, the plain hand-written design moving the "
                  "same jobs where it ran; data in pipeline-workers.dat, from pipeline.csv."
                  % wait)

    def sweep(self):
        self.heading("Batch sweep")
        name = "sweep-pipeline"
        state = self.step_state("sweep", name + ".csv")
        rows = self.csv_rows(name + ".csv", "value", "throughput", "p99")
        if state:
            self.not_run("sweep", state)
        if not rows:
            return
        groups = {}
        units = ("", "")
        for r in rows:
            key = (r.get("param2", ""), r.get("value2", ""))
            groups.setdefault(key, {}).setdefault(num(r["value"]), []).append(
                (num(r["throughput"]), num(r["p99"])))
            units = (r.get("throughput_unit", ""), r.get("p99_unit", ""))
        out = []
        for (p2, v2), byb in sorted(groups.items()):
            bs = sorted(b for b in byb if b is not None)
            if not bs:
                continue
            lo, hi = bs[0], bs[-1]
            t_lo = median([t for t, _ in byb[lo]])
            t_hi = median([t for t, _ in byb[hi]])
            l_lo = median([p for _, p in byb[lo]])
            l_hi = median([p for _, p in byb[hi]])
            # the peak, which need not be at the largest B (None: no throughput)
            t_pk, b_pk = max(((median([t for t, _ in byb[b]]), b) for b in bs),
                             key=lambda x: x[0] if x[0] is not None else -1)
            label = "%s=%s" % (p2, v2) if p2 else "-"

            def runs(b, i):
                return [x[i] for x in byb[b]]
            peak_vs_lo = ratio_text(t_pk / t_lo) if t_lo and t_pk else "-"
            if t_lo and t_pk and b_pk != lo and overlaps(runs(b_pk, 0), runs(lo, 0)):
                peak_vs_lo += OVERLAP
            out.append([label, "%g" % lo, spread(runs(lo, 0)), spread(runs(lo, 1), 1),
                        "%g" % hi, spread(runs(hi, 0)), spread(runs(hi, 1), 1),
                        "%s at B=%g" % (spread(runs(b_pk, 0)), b_pk)
                        if t_pk is not None else "-",
                        peak_vs_lo, ratio_text(l_hi / l_lo) if l_lo and l_hi else "-"])
            if len(out) == 1:
                self.summary.append(
                    "sweep (pipeline): throughput B=%g %s, peak %s %s at B=%g (%s of B=%g), "
                    "B=%g %s; p99 at full load %s -> %s %s"
                    % (lo, fmt(t_lo), fmt(t_pk), units[0], b_pk, peak_vs_lo, lo, hi,
                       fmt(t_hi), fmt(l_lo), fmt(l_hi), units[1]))
        self.para("The pipeline run at full load once per batch size B: throughput (%s) and "
                  "p99 latency (%s) at the smallest and the largest B, median [min-max] n over "
                  "runs; the ratios are of medians. The "
                  "p99 is measured at saturation, so it is mostly queueing in full rings; "
                  "larger batches drain the rings faster, so it usually falls as B grows. It is "
                  "not what a batch costs a job when the pipeline is not busy: that is bpbench "
                  "pipeline's low-load latency table (its '4. latency', in the pipeline step's table where "
                  "that step measured it)." % (units[0] or "?", units[1] or "?"))
        self.para("One row per value of the sweep's second parameter (param2 of the CSV: "
                  "another option the sweep varied with B, such as the worker count; '-' "
                  "when it varied B alone).")
        self.table(["second parameter", "B small", "throughput", "p99", "B large",
                    "throughput", "p99", "peak throughput", "peak / B small",
                    "p99 large/small"], out)
        self.para(OVERLAP_NOTE)
        self.figure(name + ".png",
                    "throughput (left) and p99 latency at full load (right) vs B, log x axis; a "
                    "throughput curve that flattens says where larger batches stop paying; the "
                    "latency panel is queueing in full rings, which larger batches drain faster, "
                    "not the price of batching at low load.")
        self.step_table("sweep")

    def rdma(self):
        self.heading("RDMA loopback fill")
        state = self.step_state("rdma-fill", "rdma-fill.txt")
        if state:
            self.not_run("rdma-fill", state)
            return
        self.current = os.path.join(self.dir, "rdma-fill.txt")
        with open(self.current, encoding="utf-8", errors="replace") as f:
            text = f.read()
        row = r"^  %s\s+([\d.]+) (\[[\d.]+-[\d.]+\])"
        fill = re.search(row % "fill", text, re.M)
        raw = re.search(row % "raw", text, re.M)
        rel = re.search(r"fill / raw:\s*([\d.]+) \(ratio of medians\),\s*([\d.]+) "
                        r"\(median of per-run ratios\)", text)
        ver = re.search(r"verified:\s*(.*)", text)
        prov = re.search(r"provider (\S+),", text)
        runs = re.search(r"(\d+) runs? of each|(\d+) runs?\b", text)
        self.para("The random fill over loopback: bp-target RDMA-writes generated pages "
                  "into this process's buffer with the library's RDMA stage. Its raw "
                  "reference does the same work without the library: a writer process (a "
                  "fork of bpbench, as bp-target is another process) writes the same pages, "
                  "generated the same way with the same seed just before each is posted, "
                  "into the same buffer, in the same direction, with a bare libfabric loop "
                  "at the stage's depth and batches, each write delivered before it "
                  "completes as the fill's are. Both are timed by the client from its "
                  "request to the answer that every page is in its memory, every byte of "
                  "both is checked, and the runs alternate, so fill / raw is what "
                  "bp-target's path costs over the least code that does its job (target: "
                  ">= 0.9, on the median of per-run ratios).")

        def cell(m):
            return "%s %s" % (m.group(1), m.group(2)) if m else "-"
        self.table(["provider", "runs", "fill GB/s", "raw GB/s", "fill / raw (of medians)",
                    "fill / raw (per-run median)", "verified"],
                   [[prov.group(1) if prov else "?",
                     (runs.group(1) or runs.group(2)) if runs else "?", cell(fill), cell(raw),
                     rel.group(1) if rel else "-", rel.group(2) if rel else "-",
                     ver.group(1) if ver else "-"]])
        self.para("GB/s: median [min-max] over the runs.")
        if fill:
            self.summary.append("RDMA fill (%s, loopback): %s GB/s, the raw reference doing "
                                "the same work %s GB/s, fill / raw %s (median of per-run "
                                "ratios; target >= 0.9)" % (
                                    prov.group(1) if prov else "?", fill.group(1),
                                    raw.group(1) if raw else "-",
                                    rel.group(2) if rel else "-"))
        self.step_table("rdma-fill")

    def rdma_sizes(self):
        """Throughput and CPU per write against the write's size, the
        pipeline's RDMA stage and the raw libfabric loop, per provider
        (rdma-sizes.csv, bpbench rdma --sizes ... --no-latency)."""
        self.heading("RDMA write sizes")
        state = self.step_state("rdma-sizes", "rdma-sizes.csv")
        if state:
            self.not_run("rdma-sizes", state)
            return
        rows = self.csv_rows("rdma-sizes.csv", "provider", "mode", "size", "run", "GBps",
                             "cpu_ns_per_op")
        if not rows:
            self.para("not run: rdma-sizes.csv has no rows", "missing")
            return
        self.para("One-sided RDMA writes of each size over loopback, one worker and one "
                  "rail, 16 writes posted per batch, 16 completions reaped per call and 16 in "
                  "flight: the pipeline (producer -> worker posting through the RDMA stage "
                  "-> sink) against a raw libfabric loop doing the same writes to the same "
                  "target, in interleaved runs, each run's bytes checked. CPU per write is "
                  "the pipeline's threads (or the raw loop's one) over the writes done. "
                  "Small writes show what the pipeline's hand-offs cost per operation; "
                  "large ones, whether it keeps the link as full as the raw loop.")
        cells = {}
        for r in rows:
            key = (r["provider"], int(num(r["size"]) or 0))
            cells.setdefault(key, {}).setdefault(r["mode"], {})[r["run"]] = r
        table, dat_rows = [], {}
        for (prov, size) in sorted(cells):
            modes = cells[(prov, size)]
            pipe, raw = modes.get("pipeline", {}), modes.get("raw", {})
            per_run = [num(pipe[k]["GBps"]) / num(raw[k]["GBps"]) for k in pipe
                       if k in raw and num(pipe[k]["GBps"]) and num(raw[k]["GBps"])]

            def col(runs, field):
                # a run with no number (nan: a window that saw no write) is left out
                return [v for v in (num(x[field]) for x in runs.values()) if v is not None]
            table.append([prov, size_text(size), spread(col(pipe, "GBps"), 3),
                          spread(col(raw, "GBps"), 3),
                          ratio_text(median(per_run)) +
                          (OVERLAP if overlaps(col(pipe, "GBps"), col(raw, "GBps")) else ""),
                          spread(col(pipe, "cpu_ns_per_op"), 0),
                          spread(col(raw, "cpu_ns_per_op"), 0)])
            for mode, runs in (("pipeline", pipe), ("raw", raw)):
                g = median(col(runs, "GBps"))
                if g:
                    dat_rows.setdefault((prov, mode), []).append((size, g, min(col(runs, "GBps")),
                                                                  max(col(runs, "GBps"))))
        self.table(["provider", "size", "pipeline GB/s", "raw GB/s", "pipeline / raw",
                    "pipeline CPU ns/write", "raw CPU ns/write"], table)
        self.para("GB/s and CPU: median [min-max] n over the runs; pipeline / raw: the "
                  "median of per-run ratios (runs paired as they alternated). " + OVERLAP_NOTE)
        top = max(size for _, size in cells)
        for t, (_, size) in zip(table, sorted(cells)):
            if size != top:
                continue
            self.summary.append("RDMA %s writes (%s, loopback): pipeline %s GB/s, raw loop %s "
                                "GB/s, pipeline / raw %s" % (t[1], t[0], t[2], t[3], t[4]))
        dat = os.path.join(self.dir, "rdma-sizes.dat")
        plots = []
        provs = sorted({k[0] for k in dat_rows})
        with open(dat, "w", encoding="utf-8") as f:
            for idx, ((prov, mode), pts) in enumerate(sorted(dat_rows.items())):
                f.write("# %s %s: size GBps min max\n" % (prov, mode))
                for p in sorted(pts):
                    f.write("%d %.6g %.6g %.6g\n" % p)
                f.write("\n\n")
                lc = provs.index(prov) + 1
                dt = 1 if mode == "pipeline" else 2
                plots.append("'%s' index %d using 1:2:3:4 with yerrorlines lw 2 dt %d lc %d "
                             "pt %d title '%s %s'" % (dat, idx, dt, lc, 7 if dt == 1 else 6,
                                                      prov, mode))
        xtics = ", ".join("'%s' %d" % (size_text(n), n) for n in sorted({k[1] for k in cells}))
        if plots:
            self.plot("rdma-sizes.png", (900, 520), """set logscale x 2
set logscale y 10
set xtics (%s)
set format y '%%g'
set xlabel 'write size, bytes'
set ylabel 'GB/s (median, bars: min-max)'
set title 'RDMA writes over loopback: throughput against write size, pipeline and raw loop'""" % xtics,
                      plots,
                      "GB/s against the write's size per provider: the pipeline solid, the raw "
                      "libfabric loop dashed, the bars the runs' min-max; data in "
                      "rdma-sizes.dat, from rdma-sizes.csv. Where the solid line meets the "
                      "dashed one the pipeline keeps the link as busy as the raw loop.")
        self.step_table("rdma-sizes")

    def rdma_latency(self):
        """Document 001's trade-off: one operation's latency against the CPU
        it costs, per completion wait, the pipeline and a raw libfabric
        loop, per provider (rdma-latency.csv, bpbench rdma --latency)."""
        self.heading("RDMA latency and CPU")
        state = self.step_state("rdma-latency", "rdma-latency.csv")
        if state:
            self.not_run("rdma-latency", state)
            return
        rows = self.csv_rows("rdma-latency.csv", "provider", "mode", "wait", "p50_us",
                             "p99_us", "client_cpu_pct")
        if not rows:
            self.para("not run: rdma-latency.csv has no rows", "missing")
            return
        self.para("One 4 KiB RDMA write at a time (depth 1), closed loop, per completion wait: "
                  "the pipeline (submit -> sink, the sink resubmitting), the same stage run to "
                  "completion on one thread (direct: bp_rdma_direct_post -> the job back from "
                  "bp_rdma_direct_poll, no hand-off) and a raw libfabric loop (post -> "
                  "completion reaped). client CPU is the pipeline's workers and sink, or the "
                  "one thread, in % of one core. Busy-polling buys latency with a "
                  "core; waiting on an event gives the core back and pays in latency (the "
                  "trade-off of bRPC's polling mode, document 001 of the seeds).")
        self.table(["provider", "variant", "wait", "p50 us", "p99 us", "client CPU %",
                    "ops/s"],
                   [[r["provider"], r["mode"], r["wait"], fmt(num(r["p50_us"])),
                     fmt(num(r["p99_us"])), fmt(num(r["client_cpu_pct"]), 0),
                     fmt(num(r.get("ops_per_s")), 0)] for r in rows])
        dat = os.path.join(self.dir, "rdma-latency.dat")
        provs = sorted({r["provider"] for r in rows})
        plots = []
        with open(dat, "w", encoding="utf-8") as f:
            idx = 0
            for pi, prov in enumerate(provs):
                for mode, pt in (("pipeline", 7), ("direct", 9), ("raw", 5)):
                    sel = [r for r in rows if r["provider"] == prov and r["mode"] == mode
                           and num(r["p50_us"]) and num(r["client_cpu_pct"]) is not None]
                    if not sel:
                        continue
                    f.write("# %s %s\n" % (prov, mode))
                    for r in sel:
                        f.write("%.4g %.4g %.4g \"%s\"\n" % (
                            num(r["client_cpu_pct"]), num(r["p50_us"]), num(r["p99_us"]) or 0,
                            r["wait"]))
                    f.write("\n\n")
                    label = "%s %s" % (prov, mode)
                    plots.append("'%s' index %d using 1:2 with points pt %d ps 1.6 lc %d "
                                 "title '%s p50'" % (dat, idx, pt, pi + 1, label))
                    plots.append("'%s' index %d using 1:3 with points pt %d ps 1.6 lc %d "
                                 "title '%s p99'" % (dat, idx, pt - 1, pi + 1, label))
                    plots.append("'%s' index %d using 1:2:4 with labels offset 1,0.6 font ',8' "
                                 "notitle" % (dat, idx))
                    idx += 1
        if not plots:
            return
        self.plot("rdma-latency.png", (900, 560), """set logscale y
set xlabel 'client CPU, % of one core'
set ylabel 'latency of one 4 KiB write, us'
set title 'RDMA: latency against the CPU it costs, per completion wait (filled: p50, open: p99)'""",
                  plots,
                  "each point one completion wait (named beside it) of the pipeline, the "
                  "run-to-completion stage or the raw loop on one provider: p50 and p99 latency against the client's CPU. Lower "
                  "left is better; a point far to the right burns a core to wait; data in "
                  "rdma-latency.dat, from rdma-latency.csv.")
        self.step_table("rdma-latency")

    def flames(self):
        self.heading("Flame graphs")
        fdir = os.path.join(self.dir, "flame")
        state = self.step_state("flame")
        pages = sorted(glob.glob(os.path.join(fdir, "*.html")))
        if state:
            self.not_run("flame", state)
        if not pages:
            if not state:
                self.para("not run: no flame graphs in flame/", "missing")
            return
        self.para("CPU profiles (perf, cpu-clock, DWARF stacks) of the same experiment with the "
                  "baseline and with batchpipe. Width is the share of samples; a frame with "
                  "nothing on top of it is self time; the widest plateaus are the bottleneck. "
                  "The pages are interactive (click to zoom, search) and work offline.")
        self.md.append("")
        self.html.append("<ul>")
        for p in pages:
            rel = os.path.relpath(p, self.dir)
            b = os.path.basename(p)[:-5]
            self.link(rel, ("side by side and differential: " + b.replace("-vs-", " vs "))
                      if "-vs-" in b else "flame graph: " + b)
        self.html.append("</ul>")
        self.md.append("")
        profiles = self.flame_profiles()
        for line in profiles.values():
            self.para(line)
        for cmp_png in sorted(glob.glob(os.path.join(fdir, "*-vs-*.png"))):
            a, b = os.path.basename(cmp_png)[:-4].split("-vs-", 1)
            self.figure(os.path.relpath(cmp_png, self.dir),
                        "%s (left) and %s (right), then %s coloured by its change from %s: red "
                        "frames take a larger share of the samples, blue a smaller one, orange "
                        "ones are new. %s" % (a, b, b, a, self.flame_verdict(fdir, a, b)))
        self.step_table("flame", targets=False)

    @staticmethod
    def folded_shares(path):
        """(samples, % of them in a futex call, % in a system call) of a
        folded profile (one "frame;frame;... count" line per stack); None
        when it cannot be read."""
        total = futex = syscall = 0
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    stack, _, count = line.rstrip().rpartition(" ")
                    if not count.isdigit():
                        continue
                    c = int(count)
                    total += c
                    futex += c if "futex" in stack.lower() else 0
                    syscall += c if ("entry_SYSCALL_64" in stack or
                                     "do_syscall_64" in stack) else 0
        except OSError:
            return None
        return (total, 100 * futex / total, 100 * syscall / total) if total else None

    def flame_verdict(self, fdir, a, b):
        """What this pair of profiles shows, in numbers of this run: each
        side's throughput and CPUs as profiled, and how much of its samples
        the kernel's futex and system-call paths took."""
        sa = self.folded_shares(os.path.join(fdir, a + ".folded"))
        sb = self.folded_shares(os.path.join(fdir, b + ".folded"))
        runs = self.flame_runs
        if not sa or not sb:
            return ("Look for where the widest plateaus sit: in a lock and the kernel's "
                    "futex paths, or in the jobs' own work and the queue operations.")
        text = "In this run "
        if a in runs and b in runs and runs[a][0]:
            text += ("%s moved %s M/s on %s CPUs and %s %s M/s on %s CPUs (%s). " % (
                a, fmt(runs[a][0]), fmt(runs[a][1]), b, fmt(runs[b][0]), fmt(runs[b][1]),
                ratio_text(runs[b][0] / runs[a][0])))
        text += ("%s spent %.1f %% of its samples in futex calls (a lock's sleeps and "
                 "wake-ups) and %.1f %% in system calls; %s %.1f %% and %.1f %%. " % (
                     a, sa[1], sa[2], b, sb[1], sb[2]))
        for x, y, sx, sy in ((a, b, sa, sb), (b, a, sb, sa)):
            if sx[1] > 10 and sy[1] < sx[1] / 4:
                text += ("So %s's threads spend their CPU waking and waiting for each other "
                         "in the kernel; %s's spend it in user space, on the jobs and the "
                         "queue operations (the top self time of each is above)." % (x, y))
                break
        else:
            if max(sa[1], sb[1]) > 10:
                text += ("Neither is clearly free of a lock's kernel paths (at most a "
                         "quarter of the other's share): compare the widest plateaus and "
                         "the top self time of each (above).")
                return text
            text += ("Neither is dominated by a lock's kernel paths here: compare the "
                     "widest plateaus and the top self time of each (above).")
        return text

    def flame_unprofiled(self, name, row):
        """(M/s, CPUs) of flame/NAME.unprofiled.txt, the profiled command
        run without perf just before it; None without one."""
        p = os.path.join(self.dir, "flame", name + ".unprofiled.txt")
        if not os.path.isfile(p):
            return None
        with open(p, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = row.match(line.rstrip("\n"))
                if m and m.group(2) == name and num(m.group(4)):
                    return num(m.group(4)), num(m.group(5))
        return None

    def flame_profiles(self):
        """A sentence per profile from the step's table (flame.txt): the
        profiled run's own throughput and CPUs against the same point of
        the locks step, unprofiled, and where its time went (top self
        time). {name: sentence}; self.flame_runs gets {name: (M/s, CPUs)}."""
        self.flame_runs = {}
        p = os.path.join(self.dir, "flame.txt")
        if not os.path.isfile(p):
            return {}
        with open(p, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
        unprof = {}
        if os.path.isfile(os.path.join(self.dir, "locks.csv")):
            runs = {}
            for r in self.csv_rows("locks.csv", "variant", "threads", "B", "Mitems_per_s"):
                runs.setdefault((r["variant"], str(r["threads"]), str(r["B"])), []).append(
                    num(r["Mitems_per_s"]))
            unprof = {k: median([x for x in v if x is not None]) for k, v in runs.items()}
        out, seen, last = {}, set(), None
        row = re.compile(r"^\s+(\d+)\s+(\S+)\s+(\d+)\s+([\d.]+)\s+\S+\s+([\d.]+)$")
        for i, line in enumerate(lines):
            m = row.match(line)
            if m:
                last = m.groups()
                continue
            m = re.match(r"top self time, (\S+) \((\d+) samples\):", line)
            if not m or m.group(1) in seen:
                continue
            name = m.group(1)
            seen.add(name)
            tops = []
            for t in lines[i + 1:i + 4]:
                tm = re.match(r"\s*([\d.]+) %\s+\d+\s+(\S+)", t)
                if tm:
                    tops.append("%s %s %%" % (tm.group(2), tm.group(1)))
            text = "%s (%s samples): " % (name, m.group(2))
            if last and last[1] == name:
                mps, cpus = num(last[3]), num(last[4])
                self.flame_runs[name] = (mps, cpus)
                text += "the profiled run moved %s M/s on %s CPUs" % (fmt(mps), fmt(cpus))
                same = self.flame_unprofiled(name, row)
                ref = unprof.get((name, last[0], last[2]))
                if same and mps:
                    text += (" (the same command unprofiled, just before it: %s M/s on %s "
                             "CPUs: %s)" % (fmt(same[0]), fmt(same[1]), ratio_text(mps / same[0])))
                    ref = same[0]
                elif ref and mps:
                    text += " (the locks step, unprofiled, %s M/s at %s threads, B=%s: %s)" % (
                        fmt(ref), last[0], last[2], ratio_text(mps / ref))
                if ref and mps and mps / ref < 0.5:
                    text += "; profiling slowed it by more than half, so read the shares " \
                            "below with care: they are of a slower run"
                text += ". "
            if tops:
                text += "Where its time went (self time): %s." % ", ".join(tops)
            out[name] = text
        return out

    def other_pngs(self):
        rest = []
        for p in sorted(glob.glob(os.path.join(self.dir, "*.png"))):
            if os.path.normpath(os.path.relpath(p, self.dir)) not in self.used_png:
                rest.append(os.path.basename(p))
        if rest:
            self.heading("Other plots")
            for r in rest:
                self.figure(r, "a plot the steps wrote besides the ones above.")

    def write(self):
        title = "batchpipe showcase report"
        self.md.insert(0, "# %s\n" % title)
        md_text = "\n".join(self.md) + "\n"
        css = """
body { font-family: "DejaVu Sans", Verdana, sans-serif; margin: 20px auto; max-width: 1100px;
       color: #222; padding: 0 16px; }
h1 { font-size: 24px; } h2 { font-size: 19px; margin-top: 28px; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 8px 0; font-size: 14px; }
td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
th { background: #f2f2f2; }
figure { margin: 12px 0; } figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 13px; color: #444; max-width: 60em; }
p.missing { color: #a00; font-weight: bold; }
pre { font-size: 12px; background: #f7f7f7; padding: 8px; overflow-x: auto; }
ul.summary li { margin: 2px 0; }
"""
        summary = "".join("<li>%s</li>" % html.escape(s) for s in self.summary)
        page = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>%s</title><style>%s</style></head>
<body data-images-ok="pending">
<h1>%s</h1>
<h2>Headline</h2><ul class="summary">%s</ul>
%s
<script>
window.addEventListener("load", function () {
  var imgs = document.images, ok = 0;
  for (var i = 0; i < imgs.length; i++)
    if (imgs[i].complete && imgs[i].naturalWidth > 0) ok++;
  document.body.setAttribute("data-images-ok", ok + "/" + imgs.length);
});
</script>
</body></html>
""" % (title, css, title, summary or "<li>nothing measured</li>", "\n".join(self.html))
        with open(os.path.join(self.dir, "report.md"), "w", encoding="utf-8") as f:
            f.write(md_text.replace("# %s\n" % title, "# %s\n\n## Headline\n\n%s\n" % (
                title, "\n".join("* " + s for s in self.summary) or "* nothing measured"), 1))
        with open(os.path.join(self.dir, "report.html"), "w", encoding="utf-8") as f:
            f.write(page)
        with open(os.path.join(self.dir, "summary.txt"), "w", encoding="utf-8") as f:
            f.write("".join(s + "\n" for s in self.summary))


def main(argv):
    if len(argv) != 2 or argv[1].startswith("-"):
        sys.stderr.write("usage: scripts/report.py DIR   (a showcase results folder)\n")
        return 2
    d = argv[1]
    if not os.path.isdir(d):
        sys.stderr.write("report.py: %s is not a folder\n" % d)
        return 2
    r = Report(d)
    r.guarded(r.machine)
    r.guarded(r.steps_section)
    r.guarded(r.locks, "locks", "trivial jobs", False)
    r.guarded(r.locks, "locks-work50", "~50 ns jobs", True)
    r.guarded(r.ring)
    r.guarded(r.pipeline)
    r.guarded(r.chain)
    r.guarded(r.sweep)
    r.guarded(r.rdma)
    r.guarded(r.rdma_sizes)
    r.guarded(r.rdma_latency)
    r.guarded(r.flames)
    r.guarded(r.other_pngs)
    r.write()
    print("report.py: wrote %s and %s" % (os.path.join(d, "report.md"),
                                          os.path.join(d, "report.html")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
