"""The report of a benchmark run (bench/lib/bench.py runs the cases): its
statistics (median [min-max] cells), the goals table, the markdown write-up
and the gnuplot figures. Pure formatting of the results dict: also used to
rewrite a report from its JSON (`bench.py --report MODE`). Stdlib only."""
import json
import os
import shutil
import statistics
import subprocess
import time

MiB = 1 << 20


def cold_label(tag):
    """A cold-miss row's name: "8x64m" -> "64 MiB, 8 at once"."""
    tier, _, size = tag.rpartition("/")
    n, _, size = size.rpartition("x")
    label = size.replace("1m", "1 MiB").replace("64m", "64 MiB")
    if n:
        label += ", %s at once" % n
    return label + {"": "", "slow": ", 100 MiB/s tier", "dir": ", directory store"}[tier]


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def summary(xs):
    xs = [x for x in xs if x == x]
    if not xs:
        return dict(med=float("nan"), lo=float("nan"), hi=float("nan"), n=0)
    return dict(med=statistics.median(xs), lo=min(xs), hi=max(xs), n=len(xs))


def fmt(s, digits=None):
    m = s["med"]
    if m != m:
        return "n/a"
    d = digits if digits is not None else (0 if abs(m) >= 100 else (1 if abs(m) >= 10 else 2))
    if s["n"] <= 1:
        return "%.*f" % (d, m)
    return "%.*f [%.*f-%.*f]" % (d, m, d, s["lo"], d, s["hi"])


def cell(runs, key, digits=None):
    """A report cell: field key of every run, as median [min-max]."""
    return fmt(summary([x[key] for x in runs]), digits)



def goals(res):
    """The issue's bars, one line each: case | goal | measured (median [min-max]) | met."""
    L = ["| case | goal | measured | met |", "| --- | --- | --- | --- |"]

    def yes(ok):
        return "yes" if ok else "**no**"
    for row in res.get("hits", {}).get("rows", []):
        r = summary([a["rps"] / b["rps"] for a, b in zip(row["sg"], row["ngx"])])
        p = summary([a["p99"] / max(1, b["p99"]) for a, b in zip(row["sg"], row["ngx"])])
        if row["size"] == "4k":
            L.append("| hit 4 KiB c=%d | >= 1.0x req/s, p99 <= nginx | %sx req/s, p99 %sx | %s |" % (
                row["c"], fmt(r, 2), fmt(p, 2), yes(r["med"] >= 1.0 and p["med"] <= 1.0)))
        else:
            L.append("| hit %s c=%d | >= 1.0x MB/s | %sx (p99 %sx) | %s |" % (
                row["size"].replace("m", " MiB"), row["c"], fmt(r, 2), fmt(p, 2), yes(r["med"] >= 1.0)))
    one_at_a_time = {row["size"]: row for row in res.get("cold", [])}
    for row in res.get("cold", []):
        r = summary([x["MBps"] / y["MBps"] for x, y in zip(row["sg"], row["direct"])])
        t = summary([x["ttfb_ms"] - y["ttfb_ms"] for x, y in zip(row["sg"], row["direct"])])
        b = summary([x["ttbody_ms"] - y["ttbody_ms"] for x, y in zip(row["sg"], row["direct"])])
        if row.get("conc", 1) > 1:
            # several fills at once: the aggregate against as many direct
            # GETs at once, and what it gained over one fill at a time
            single = one_at_a_time.get(row["size"].split("x", 1)[1])
            gain = ", %s MB/s one at a time" % cell(single["sg"], "MBps") if single else ""
            L.append("| cold misses %s | aggregate >= 0.9x as many direct GETs at once | %sx (%s MB/s%s) | %s |" % (
                cold_label(row["size"]), fmt(r, 2), cell(row["sg"], "MBps"), gain, yes(r["med"] >= 0.9)))
            if row.get("disk"):
                d = summary([x["MBps"] / y["MBps"] for x, y in zip(row["sg"], row["disk"])])
                L.append("| cold misses %s, against the disk | >= 0.9x what the disk makes durable at %d writers | %sx (disk %s MB/s) | %s |" % (
                    cold_label(row["size"]), row["conc"], fmt(d, 2), cell(row["disk"], "MBps"),
                    yes(d["med"] >= 0.9)))
        else:
            L.append("| cold miss %s | >= 0.95x throughput, TTFB +<= 1 ms | %sx, TTFB +%s ms (first body byte +%s ms) | %s |" % (
                cold_label(row["size"]), fmt(r, 2), fmt(t, 2), fmt(b, 1),
                yes(r["med"] >= 0.95 and t["med"] <= 1.0)))
        if row.get("proxy"):
            c = summary([x["cpu_ms_per_obj"] / max(1e-9, y["cpu_ms_per_obj"])
                         for x, y in zip(row["sg"], row["proxy"])])
            L.append("| fill CPU %s | <= 1.5x nginx proxy_cache's CPU per object filled | %sx | %s |" % (
                cold_label(row["size"]), fmt(c, 2), yes(c["med"] <= 1.5)))
    if "late_joiner" in res:
        lj = res["late_joiner"]
        j = summary([x["ttfb_joiners_med_ms"] for x in lj["sg"]])
        w = summary([max(x["ttbody_ms"][1:]) for x in lj["sg"]])
        g = summary([x["backend_gets"] for x in lj["sg"]])
        n = summary([x["ttfb_joiners_med_ms"] for x in lj["ngx"]])
        L.append("| late joiners (7 after the first) | TTFB <= 10 ms, 1 backend GET | median %s ms, worst joiner %s ms, %s GET (nginx lock: %s ms) | %s |" % (
            fmt(j, 2), fmt(w, 1), fmt(g, 0), fmt(n, 0), yes(w["med"] <= 10 and g["hi"] == 1)))
        f = summary([x["ttbody_ms"][0] for x in lj["sg"]])
        L.append("| the filling (first) reader | - | first body byte %s ms | - |" % fmt(f, 1))
    if "nvme" in res:
        import nvme
        nvme.goals_nvme(res, L, fmt, summary, yes)
    if "mixed" in res:
        mx = res["mixed"]
        r = summary([a["rps"] / b["rps"] for a, b in zip(mx["with_cold"], mx["alone"])])
        L.append("| hits with cold traffic | >= 0.9x | %sx | %s |" % (fmt(r, 2), yes(r["med"] >= 0.9)))
    if "bipolar" in res:
        bp = res["bipolar"]
        r = summary([a["MBps"] / b["MBps"] for a, b in zip(bp["during"], bp["alone"])])
        L.append("| bipolar (%d MiB PUTs) | >= 0.8x | %sx | %s |" % (bp["put_bytes"] // MiB, fmt(r, 2), yes(r["med"] >= 0.8)))
    if "memory" in res:
        m = res["memory"]
        L.append("| memory | written down | idle %.1f MiB; +%.1f KiB per idle connection; %.0f B per cached object (%d objects) | - |" % (
            m["rss_idle_kib"] / 1024, (m["rss_idle_conns_kib"] - m["rss_idle_kib"]) / max(1, m["idle_conns_ok"]),
            m["bytes_per_object"], m["cache_objects"]))
        h = m["restart_first_hit_s"]
        L.append("| restart until the first hit (%d objects) | <= 2 s | %s | %s |" % (
            m["restart_cache_objects"], "%.3f s" % h if h else "no hit", yes(bool(h) and h <= 2 and m["restart_was_hit"])))
    e = res.get("epoch")
    if e and not e.get("skipped"):
        later = [(a, b) for a, b in zip(e["lru"], e["hints"]) if a["epoch"] > 0]
        t = summary([b["secs"] / a["secs"] for a, b in later])
        c = summary([b["cold_MiB"] / max(1e-9, a["cold_MiB"]) for a, b in later])
        L.append("| epochs 1+ with ordered hints vs LRU | better than LRU | time %sx, cold-tier bytes %sx | %s |" % (
            fmt(t, 2), fmt(c, 2), yes(t["med"] < 1.0 and c["med"] < 1.0)))
    return "\n".join(L)


# Why a goal is missed, as measured, and the next step: (case prefix, reason,
# next step), the first prefix a missed row starts with wins. Links are
# relative to bench/results/, where the report is written. A missed row
# without an entry says so.
MISSED = [
    ("hit 4 KiB c=1 ",
     "One connection waits one round trip per request, shardgate and nginx alike. The ratio "
     "sits at 1.0 within this VM's spread: medians 0.98-1.03x in the four quick runs of "
     "2026-11-29, met in one ([README.md](README.md)).",
     "None of its own; the c=8 and c=64 rows below are where the per-request cost shows."),
    ("hit 4 KiB",
     "libmicrohttpd's per-request work. The table below has the server CPU per hit: about "
     "12-14 us against nginx's 8-9 us. The file work is gone (hits from memory, "
     "[ab-memtier.md](ab-memtier.md)). What is left is libmicrohttpd's request cycle and "
     "`epoll_wait` (6.5%), its pool reset (`memset`, ~4%) and per-header allocations, "
     "and our header formatting, of which the `snprintf`s that built constant names are "
     "gone: 4-9% less CPU per hit ([ab-hit-formatting.md](ab-hit-formatting.md)). No lock "
     "is shared by both HTTP threads any more (futex calls 124 -> 7-10 per 1,000 hits, CPU "
     "level at two threads: [ab-guard-shards.md](ab-guard-shards.md)); "
     "[README.md](README.md), bottleneck 7, \"Small hits\".",
     "A hit path that answers a GET hit outside libmicrohttpd's request cycle (its own "
     "parse and one `writev`), measured against this row."),
    ("hit 1 MiB", "Hits of more than 128 KiB, up to 4 MiB, are read into memory and sent with "
     "their headers in one `sendmsg` ([hits-wire.md](hits-wire.md)): a file response of more "
     "than one of libmicrohttpd's 128 KiB `sendfile` pieces went out at 0.55-0.59x the rate "
     "of the copy at 1 MiB, with 0.8-0.9 cores of softirq against 0.3. A missed row here is "
     "this VM's spread: 1.22-1.58x at c = 8 and 64 in the run of 06:31 UTC.",
     "A rerun; `bench/hits_wire.py` for the wire-level counters."),
    ("hit 64 MiB", "Sent by `sendfile` (above 4 MiB a buffer per response would be too much "
     "memory): libmicrohttpd's 128 KiB pieces are not the cause, as 2 MiB pieces measured "
     "level (0.98-1.03x, [hits-wire.md](hits-wire.md)). Medians 0.94-1.07x in the four "
     "quick runs of 2026-11-29, met in one ([README.md](README.md)): within this VM's spread.",
     "`bench/hits_wire.py --size 64m --conc 8` for what differs on the wire, if anything."),
    ("cold misses", "Against as many direct GETs at once, out of reach for any cache that keeps "
     "what it serves. A direct GET from warm page cache writes nothing, and a fill writes and "
     "fdatasyncs every byte. Against the disk's durable rate, the fills also pay a miss's "
     "copies (above) on the two cores. `bench/run.sh fills` "
     "([report-fills.md](report-fills.md)) measured 0.87-0.93x of the disk when the disk was "
     "the slower part.",
     "The copies of a miss (above); the against-the-disk row is the one a cache can meet."),
    ("cold miss 64 MiB, 100 MiB/s tier",
     "The tier's own rate bounds it: the first body byte comes within 1 ms, and earlier runs "
     "measured 0.92-1.00x. throttle.py (Python) shares the two cores with the fill.",
     "A rerun on a quiet machine; nothing in the fill path waits on a throttled tier beyond "
     "its rate."),
    ("cold miss 1 MiB, directory store",
     "Sent from the source file by `sendfile` while the fill goes on into the cache: "
     "2.33-2.50x the rate of a miss that copied the fill's bytes, at the direct GET's rate "
     "within its spread ([fills-ab-dir-source.md](fills-ab-dir-source.md)). What is left is "
     "the fill's own CPU (a read of the source, an O_DIRECT write and an fdatasync) on the "
     "same two cores, and the cache lookup and fill start before the first byte.",
     "None in the read path; the fill's CPU is the \"fill CPU\" rows' work."),
    ("cold miss 64 MiB, directory store",
     "Sent from the source file by `sendfile` while the fill reads the same file and writes "
     "it with O_DIRECT on the other core: one client 1.03-1.10x the rate of the copying "
     "path, eight at once 2.28x ([fills-ab-dir-source.md](fills-ab-dir-source.md)). The "
     "fill and the send share the two cores with the client.",
     "A cheaper fill: its read of the source and its write are most of what shares the "
     "cores."),
    ("cold miss", "A miss moves each byte through five copies on the two cores: the socket, "
     "curl, the fill buffer, the page cache, then libmicrohttpd's buffer and the socket. A "
     "direct GET moves it through two. perf: context switches and wake-ups about 37%, the copy "
     "into libmicrohttpd's buffer 12.6%. Fewer fill pieces measured 0.98x "
     "([miss-1m-profile.md](miss-1m-profile.md)). That puts a miss near 0.4x, the 64 MiB rows "
     "included.",
     "A zero-copy body for readers of a fill (libmicrohttpd 0.9.75 copies a callback "
     "response's bytes into its buffer), or a cold tier that is not on these two cores."),
    ("fill CPU 1 MiB",
     "Each fill has fixed work, heavy for a 1 MiB object: a cache file created, written, "
     "fdatasync'ed by the publisher and renamed, and a request to the cold tier. Measured in "
     "the scheduler's nanoseconds ([cpu-meter.md](cpu-meter.md); clock ticks had put the "
     "row anywhere from 0.75x to 2.00x), one fill at a time costs what nginx's does (1.73 "
     "against 1.79 ms); eight at once, nginx's falls to 1.00 ms per object and ours stayed "
     "at 1.72 with O_DIRECT. An O_DIRECT write that extends a new file goes through an "
     "io_uring kernel worker, six hand-offs per 1 MiB fill; fills under 4 MiB now go through "
     "the page cache, 0.94x the CPU eight at once and 1.13x one at a time "
     "([fills-ab-small-buffered.md](fills-ab-small-buffered.md)): 1.80x at 01:03 UTC, 1.55x "
     "at 04:08.",
     "Group the publisher's syncs of small fills, measured against this row."),
    ("hit from disk", "The two libmicrohttpd threads block on each read, so at most two reads "
     "are in flight. `--threads 8` takes 4 KiB hits at c=64 from 15-23k to 40-45k req/s, but "
     "the p99 of hits from memory rises from 2.7-3.8 to 6.6-8.1 ms, so the default stays one "
     "thread per core. Reader threads capped at 24-31k req/s: each read paid two thread hops "
     "([header-tier.md](header-tier.md)).",
     "A deployment whose hits come from the drive raises `--threads` (README). In the code: "
     "complete a read on the connection's own thread, which libmicrohttpd 0.9.75 has no hook "
     "for."),
    ("hits with cold traffic", "CPU contention on two cores. The fills' CPU (curl's receive, "
     "the copies, the writes), the cold tier, throttle.py and wrk share the cores with the "
     "hit threads. Fill workers at nice 5 ([ab-fill-nice.md](ab-fill-nice.md)) and staging "
     "with O_DIRECT ([fills-ab-direct.md](fills-ab-direct.md)) moved the row from 0.47x to "
     "0.87-0.95x.",
     "The copies of a miss (above), which are most of the fills' CPU."),
]


def missed(goal_table):
    """The missed rows of the goals table, grouped by their measured reason,
    each group with its next step."""
    groups = []   # [entry or None, [cases]], in the order of first appearance
    for line in goal_table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) < 4 or cells[-1] != "**no**":
            continue
        case = cells[0]
        hit = next((m for m in MISSED if (case + " ").startswith(m[0])), None)
        for g in groups:
            if g[0] is hit:
                g[1].append(case)
                break
        else:
            groups.append([hit, [case]])
    if not groups:
        return ""
    L = ["| missed cases | measured reason | next step |", "| --- | --- | --- |"]
    for hit, cases in groups:
        reason, step = (hit[1], hit[2]) if hit else ("not analysed yet", "-")
        L.append("| %s | %s | %s |" % ("; ".join(cases), reason, step))
    return "\n".join(L)


def report(mode_name, mode, res, env_):
    L = []
    A = L.append

    def table_head(header):
        """A markdown table's header row and its separator, one "---" a column."""
        A(header)
        A("|" + " --- |" * (header.count("|") - 1))

    def section(title):
        A("## " + title)
        A("")

    A("# shardgate benchmarks: `bench/run.sh %s`" % mode_name)
    A("")
    A("%s, %s, commit %s%s. Medians of %d runs per cell with [min-max]; the two systems alternate run by "
      "run; ratios are the median of the per-run pair ratios (shardgate / reference)." %
      (env_.get("date") or time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), env_["machine"], env_["commit"],
       " (tree has local changes)" if env_["dirty"] else "", mode["reps"]))
    A("")
    A("Load average (1 min) at start / end: %s / %s. This machine is shared with other engineers' test "
      "suites: a load above 2 means the figures are noisy; the side-by-side ratios are the figures to read." %
      (env_.get("load0", "?"), env_.get("load1", "?")))
    A("")
    section("Goals")
    table = goals(res)
    A(table)
    A("")
    why = missed(table)
    if why:
        section("Missed goals: the measured reason and the next step")
        A(why)
        A("")
    if "hits" in res:
        h = res["hits"]
        section("Cache-hit GET vs nginx static (wrk, keep-alive, %d s per run)" % mode["dur"])
        A("shardgate: %d hits, %d cold-tier GETs during the measured runs (all hits)." %
          (h["hits_delta"], h["backend_get_delta"]))
        A("")
        table_head("| size | c | shardgate req/s | nginx req/s | ratio | shardgate MB/s | nginx MB/s | sg p50 ms | nginx p50 ms | sg p99 ms | nginx p99 ms | p99 ratio | sg CPU µs/req | nginx CPU µs/req |")
        for row in h["rows"]:
            sgr, ng = row["sg"], row["ngx"]
            ratio = summary([a["rps"] / b["rps"] for a, b in zip(sgr, ng)])
            p99r = summary([a["p99"] / max(1, b["p99"]) for a, b in zip(sgr, ng)])
            A("| %s | %d | %s | %s | **%s** | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                row["size"], row["c"], cell(sgr, "rps"), cell(ng, "rps"), fmt(ratio, 2),
                cell(sgr, "MBps"), cell(ng, "MBps"), cell(sgr, "p50_ms", 3), cell(ng, "p50_ms", 3),
                cell(sgr, "p99_ms", 3), cell(ng, "p99_ms", 3), fmt(p99r, 2),
                cell(sgr, "cpu_us_per_req"), cell(ng, "cpu_us_per_req")))
        A("")
        A("![throughput](%s-hits-throughput.png)" % mode_name)
        A("![p99](%s-hits-p99.png)" % mode_name)
        A("![ratio](%s-hits-ratio.png)" % mode_name)
        A("")
    if "cold" in res:
        section("Cold miss vs a direct GET from the cold tier (keep-alive; one client, "
                "sequential, unless N at once)")
        A("The directory-store rows are a second gateway whose cold tier is the dataset "
          "directory itself (`--data`); their direct reference is nginx static over it.")
        A("")
        table_head("| size | objects/run | shardgate MB/s | direct MB/s | ratio | sg TTFB ms | direct TTFB ms | TTFB overhead ms | sg first body byte ms | sg CPU ms/object | nginx proxy_cache MB/s, CPU ms/object | misses |")
        for row in res["cold"]:
            a, b, p = row["sg"], row["direct"], row.get("proxy")
            A("| %s | %d | %s | %s | **%s** | %s | %s | **%s** | %s | %s | %s | %d |" % (
                cold_label(row["size"]),
                row.get("count") or {"1m": mode["cold1m"], "64m": mode["cold64m"]}.get(row["size"], 1),
                cell(a, "MBps"), cell(b, "MBps"),
                fmt(summary([x["MBps"] / y["MBps"] for x, y in zip(a, b)]), 2),
                cell(a, "ttfb_ms", 3), cell(b, "ttfb_ms", 3),
                fmt(summary([x["ttfb_ms"] - y["ttfb_ms"] for x, y in zip(a, b)]), 3),
                cell(a, "ttbody_ms", 3),
                cell(a, "cpu_ms_per_obj", 2),
                "%s, %s" % (cell(p, "MBps"), cell(p, "cpu_ms_per_obj", 2)) if p else "-",
                row["misses"]))
        A("")
    if "late_joiner" in res:
        lj = res["late_joiner"]
        section("Late joiners: %d clients, %d ms apart, one cold 64 MiB object, cold tier throttled to 100 MiB/s" %
          (lj["clients"], lj["stagger_ms"]))
        A("TTFB here is to the first body byte. Backend GETs are counted in the cold tier's access log.")
        A("")
        table_head("| system | joiners' TTFB ms (median over clients 2-8) | worst TTFB ms | last client done ms | backend GETs per object |")
        for name, rs in (("shardgate", lj["sg"]), ("nginx proxy_cache + lock", lj["ngx"])):
            A("| %s | %s | %s | %s | %s |" % (name, cell(rs, "ttfb_joiners_med_ms", 2),
                                             cell(rs, "ttfb_max_ms", 2),
                                             cell(rs, "last_done_ms"),
                                             cell(rs, "backend_gets", 0)))
        A("")
        A("Per-client first-body-byte times of the median run (ms, in joining order):")
        A("")
        for name, rs in (("shardgate", lj["sg"]), ("nginx", lj["ngx"])):
            r = sorted(rs, key=lambda x: x["ttfb_max_ms"])[len(rs) // 2]
            A("- %s: %s" % (name, ", ".join("%.1f" % x for x in r["ttbody_ms"])))
        A("")
        A("![late joiner](%s-late-joiner.png)" % mode_name)
        A("")
    if "nvme" in res:
        import nvme
        nvme.report_nvme(res, A, section, table_head, fmt, summary, cell)
    if "mixed" in res:
        mx = res["mixed"]
        section("Hit path with cold traffic: 4 KiB hits c=8, alone vs while 2 throttled 64 MiB misses stream in")
        table_head("| | req/s | p50 ms | p99 ms | sg CPU µs/req | cold bytes into the cache MB/s |")
        for name, rs in (("with cold traffic", mx["with_cold"]), ("hits alone", mx["alone"])):
            A("| %s | %s | %s | %s | %s | %s |" % (name, cell(rs, "rps"),
                                                  cell(rs, "p50_ms", 3),
                                                  cell(rs, "p99_ms", 3),
                                                  cell(rs, "cpu_us_per_req"),
                                                  fmt(summary([x.get("bg_MBps", float("nan")) for x in rs]))))
        A("")
        A("Ratio with / alone: **%s** (req/s), p99 ratio %s." % (
            fmt(summary([a["rps"] / b["rps"] for a, b in zip(mx["with_cold"], mx["alone"])]), 2),
            fmt(summary([a["p99"] / max(1, b["p99"]) for a, b in zip(mx["with_cold"], mx["alone"])]), 2)))
        A("")
    if "bipolar" in res:
        bp = res["bipolar"]
        section("Bipolar: 8 readers of 1 MiB hits, alone vs while %d MiB checkpoint PUTs stream in back to back" %
          (bp["put_bytes"] // MiB))
        table_head("| | MB/s | req/s | p50 ms | p99 ms | PUT MB/s | PUTs done / failed |")
        for name, rs in (("during the PUT", bp["during"]), ("readers alone", bp["alone"])):
            A("| %s | %s | %s | %s | %s | %s | %s |" % (
                name, cell(rs, "MBps"), cell(rs, "rps"),
                cell(rs, "p50_ms", 3), cell(rs, "p99_ms", 3),
                fmt(summary([x.get("put_MBps", float("nan")) for x in rs])),
                "%s / %s" % (sum(x.get("puts_done", 0) for x in rs), sum(x.get("put_fails", 0) for x in rs))
                if "puts_done" in rs[0] else "-"))
        A("")
        A("The same PUT alone (no readers): %.0f MB/s (curl --aws-sigv4, UNSIGNED-PAYLOAD; shardgate spools, "
          "then writes through to the cold tier, here a shardgate --data, as a multipart upload)." %
          bp.get("put_alone_MBps", float("nan")))
        A("")
        A("Ratio during / alone: **%s** (MB/s)." % fmt(summary(
            [a["MBps"] / b["MBps"] for a, b in zip(bp["during"], bp["alone"])]), 2))
        A("")
    if "memory" in res:
        m = res["memory"]
        section("Memory and restart")
        table_head("| what | figure |")
        A("| RSS at start | %.1f MiB |" % (m["rss_start_kib"] / 1024))
        A("| RSS idle (after a few requests) | %.1f MiB |" % (m["rss_idle_kib"] / 1024))
        A("| RSS with %d idle keep-alive connections | %.1f MiB (%d of %d connections got their answer; a new connection meanwhile: %s) |" % (
            m["idle_conns"], m["rss_idle_conns_kib"] / 1024, m["idle_conns_ok"], m["idle_conns"], m["new_conn_while_idle"]))
        A("| per idle connection | %.1f KiB |" % ((m["rss_idle_conns_kib"] - m["rss_idle_kib"]) / max(1, m["idle_conns_ok"])))
        A("| RSS after the connections closed | %.1f MiB |" % (m["rss_after_close_kib"] / 1024))
        A("| fill of %d objects of 1 KiB through shardgate, c=8 | %.1f s (%.0f objects/s), %d failed |" % (
            m["objects"], m["fill_secs"], m["objects"] / m["fill_secs"], m["fill_failed"]))
        A("| RSS with %d cached objects | %.1f MiB |" % (m["cache_objects"], m["rss_filled_kib"] / 1024))
        A("| RSS per cached object | **%.0f bytes** |" % m["bytes_per_object"])
        A("| restart (SIGTERM, exec) until the first hit, %d objects cached | **%s** (was a hit: %s; objects after restart %d) |" % (
            m["cache_objects"], "%.3f s" % m["restart_first_hit_s"] if m["restart_first_hit_s"] else "no hit",
            m["restart_was_hit"], m["restart_cache_objects"]))
        A("| RSS right after the restart | %.1f MiB |" % (m["rss_after_restart_kib"] / 1024))
        A("")
    if "threads" in res:
        section("`--threads N` (shardgate alone)")
        table_head("| threads | size | c | req/s | MB/s | p99 ms | CPU µs/req |")
        for t in res["threads"]:
            rs = t["runs"]
            A("| %d | %s | %d | %s | %s | %s | %s |" % (t["threads"], t["size"], t["c"],
                                                      cell(rs, "rps"),
                                                      cell(rs, "MBps"),
                                                      cell(rs, "p99_ms", 3),
                                                      cell(rs, "cpu_us_per_req")))
        A("")
    if "epoch" in res:
        e = res["epoch"]
        section("Epoch runs: ordered prefetch hints vs LRU without hints")
        if e["skipped"]:
            A("Skipped: %s." % e["why"])
        else:
            A("%d shards of %d MiB (%d MiB) from the 100 MiB/s cold tier, cache %d MiB (`--cache-size`), "
              "one reader (keep-alive, sequential), each epoch in a new shuffled order; with hints an ordered "
              "hint (consumer rank0) is sent just before the epoch's first GET. Each variant starts on an empty cache." %
              (e["shards"], e["shard_bytes"] // MiB, e["shards"] * e["shard_bytes"] // MiB, e["cache_bytes"] // MiB))
            A("")
            table_head("| epoch | LRU s | hints s | time ratio hints/LRU | LRU cold MiB | hints cold MiB | LRU hits | hints hits | hints first-byte p50 / max ms |")
            for a, b in zip(e["lru"], e["hints"]):
                A("| %d | %.2f | %.2f | **%.2f** | %.0f | %.0f | %d | %d | %.1f / %.1f |" % (
                    a["epoch"], a["secs"], b["secs"], b["secs"] / a["secs"], a["cold_MiB"], b["cold_MiB"],
                    a["hits"], b["hits"], b["ttfb_p50_ms"], b["ttfb_max_ms"]))
            later = [(a, b) for a, b in zip(e["lru"], e["hints"]) if a["epoch"] > 0]
            if later:
                A("")
                A("Epochs 1+: time ratio hints/LRU median **%s**, cold-tier bytes ratio %s." % (
                    fmt(summary([b["secs"] / a["secs"] for a, b in later]), 2),
                    fmt(summary([b["cold_MiB"] / max(1e-9, a["cold_MiB"]) for a, b in later]), 2)))
            last = e["hints"][-1].get("job_objects")
            if last:
                A("")
                A("Last hint job's objects: `%s`." % json.dumps(last))
        A("")
    section("Setup")
    A("- shardgate: `%s`, Release build, `--cold` = the cold tier, `--cache-dir` on the same disk, log level warn "
      "(nginx has access_log off), %s threads (one per core), `cache.memory` %s." % (
          env_["bin"], os.cpu_count(),
          "0 (off: every hit reads its cache file)" if mode.get("sg_memory") == 0
          else "64 MiB (default: hits of objects up to 16 KiB after their first come from memory)"))
    A("- cold tier: nginx static over the dataset directory (2 workers), `/bench/slow/` throttled with "
      "`limit_rate 100m` and `sendfile_max_chunk 256k` (100 MiB/s per connection; nginx does not delay a "
      "response's first chunk, so a 4 MiB object comes at about 125 MiB/s), WebDAV PUT for write-through; "
      "the bipolar case has its own S3-complete cold tier (a shardgate `--data` over the same directory) "
      "because shardgate writes big PUTs through as multipart uploads.")
    A("- nginx static (hit reference): worker_processes 2, sendfile, tcp_nopush, keepalive_requests 1e6, "
      "open_file_cache, access_log off, over the same dataset files (page cache warm for both).")
    A("- nginx proxy_cache (late-joiner reference): proxy_cache_lock on, in front of the same cold tier.")
    A("- clients: wrk (2 threads, a Lua script cycling over the distinct keys) for hits; "
      "bench/clients/getc.c for cold misses, late joiners and fills. Client and servers share the 2 cores.")
    A("- CPU per request: the scheduler's nanosecond count of every thread of the server's processes (nginx: its workers), /proc/PID/task/TID/schedstat; utime+stime ticks only where a thread ended in between (bench/lib/procs.py cpu_since).")
    A("")
    A("Reproduce: `bench/run.sh %s` (results in bench/results/report-%s.md / .json)." % (mode_name, mode_name))
    A("")
    return "\n".join(L)


def plots(mode_name, res, results, log):
    """Writes the plots of a run into the results folder; returns the files made."""
    if "hits" not in res or not shutil.which("gnuplot"):
        return []
    made = []
    rows = res["hits"]["rows"]
    dat = os.path.join(results, "%s-hits.dat" % mode_name)
    with open(dat, "w") as f:
        f.write("# label sg_MBps ngx_MBps sg_rps ngx_rps sg_p99ms ngx_p99ms\n")
        for r in rows:
            f.write('"%s c=%d" %f %f %f %f %f %f\n' % (
                r["size"], r["c"], med([x["MBps"] for x in r["sg"]]), med([x["MBps"] for x in r["ngx"]]),
                med([x["rps"] for x in r["sg"]]), med([x["rps"] for x in r["ngx"]]),
                med([x["p99_ms"] for x in r["sg"]]), med([x["p99_ms"] for x in r["ngx"]])))
    common = """set terminal pngcairo size 1100,520 noenhanced
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key top left
set grid ytics
set xtics rotate by -30
"""
    gp = common + """set output '{o1}'
set multiplot layout 1,2 title 'cache-hit GET: shardgate vs nginx static (median of runs)'
set title 'requests/s (4 KiB)'
plot '{d}' every ::0::{k4} using 4:xtic(1) title 'shardgate', '' every ::0::{k4} using 5 title 'nginx'
set title 'MB/s (1 MiB, 64 MiB)'
plot '{d}' every ::{k5} using 2:xtic(1) title 'shardgate', '' every ::{k5} using 3 title 'nginx'
unset multiplot
set output '{o2}'
set logscale y
set title 'cache-hit GET: p99 latency (ms, log scale), shardgate vs nginx static'
plot '{d}' using 6:xtic(1) title 'shardgate', '' using 7 title 'nginx'
"""
    n4 = sum(1 for r in rows if r["size"] == "4k")
    o1 = os.path.join(results, "%s-hits-throughput.png" % mode_name)
    o2 = os.path.join(results, "%s-hits-p99.png" % mode_name)
    if n4 == len(rows):  # smoke: one size only
        gp = common + "set output '{o1}'\nset title 'cache-hit GET 4 KiB req/s'\nplot '{d}' using 4:xtic(1) title 'shardgate', '' using 5 title 'nginx'\nset output '{o2}'\nset title 'p99 ms'\nplot '{d}' using 6:xtic(1) title 'shardgate', '' using 7 title 'nginx'\n"
    gp = gp.format(o1=o1, o2=o2, d=dat, k4=n4 - 1, k5=n4)
    if "late_joiner" in res:
        lj = res["late_joiner"]
        dat2 = os.path.join(results, "%s-late-joiner.dat" % mode_name)
        a = sorted(lj["sg"], key=lambda x: x["ttfb_max_ms"])[len(lj["sg"]) // 2]
        b = sorted(lj["ngx"], key=lambda x: x["ttfb_max_ms"])[len(lj["ngx"]) // 2]
        with open(dat2, "w") as f:
            f.write("# client sg_ttfb_ms ngx_ttfb_ms\n")
            for i, (x, y) in enumerate(zip(a["ttbody_ms"], b["ttbody_ms"])):
                f.write("%d %f %f\n" % (i + 1, max(x, 0.01), max(y, 0.01)))
        o3 = os.path.join(results, "%s-late-joiner.png" % mode_name)
        gp += """unset logscale y
set output '{o3}'
set logscale y
set xtics norotate
set title 'late joiners on one cold 64 MiB object (100 MiB/s cold tier): time to first body byte per client (ms, log)'
set xlabel 'client (joins 50 ms after the previous one)'
plot '{d2}' using 2:xtic(1) title 'shardgate', '' using 3 title 'nginx proxy_cache_lock'
""".format(o3=o3, d2=dat2)
        made.append(o3)
    # the ratios, with the spread of the per-run pairs
    dat3 = os.path.join(results, "%s-hits-ratio.dat" % mode_name)
    with open(dat3, "w") as f:
        f.write("# label ratio_med ratio_min ratio_max (shardgate/nginx throughput per run pair)\n")
        for r in rows:
            rs = summary([a["bytes"] / a["duration_us"] / (b["bytes"] / b["duration_us"]) for a, b in zip(r["sg"], r["ngx"])])
            f.write('"%s c=%d" %f %f %f\n' % (r["size"], r["c"], rs["med"], rs["lo"], rs["hi"]))
    o4 = os.path.join(results, "%s-hits-ratio.png" % mode_name)
    gp += """unset logscale y
unset xlabel
set output '{o4}'
set style histogram errorbars gap 1 lw 1
set xtics rotate by -30
set yrange [0:*]
set title 'cache-hit GET: shardgate / nginx static throughput, median and min-max of the run pairs (goal >= 1.0)'
plot '{d3}' using 2:3:4:xtic(1) title 'shardgate / nginx', 1 with lines lc rgb 'red' dt 2 title 'parity'
""".format(o4=o4, d3=dat3)
    made.append(o4)
    gpf = os.path.join(results, "%s-plots.gp" % mode_name)
    with open(gpf, "w") as f:
        f.write(gp)
    r = subprocess.run(["gnuplot", gpf], capture_output=True, text=True)
    if r.returncode != 0:
        log("gnuplot failed: %s" % r.stderr[-400:])
        return []
    return [o1, o2] + made
