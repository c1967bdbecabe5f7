#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Turns r4c_bench's Google Benchmark JSON into the table and ratios of docs/performance.md.

Usage: report.py RESULTS.json --command "CMD" [--invocation "bench/run"] [--docs FILE]

Prints the table of medians and the targets (PASS/FAIL) and, with --docs, rewrites the part
of that file between <!-- bench:begin --> and <!-- bench:end -->. Standard library only.

Exit status: 0 when every benchmark produced figures (whether or not the ratios pass), 2 when a
benchmark reported an error or is missing, 1 when the docs file has no markers.
"""

import argparse
import datetime
import json
import re
import statistics
import sys

BEGIN = "<!-- bench:begin -->"
END = "<!-- bench:end -->"
THREADS = (1, 2, 4)
ORDER = (
    "BM_Floor",
    "BM_AdmittedCall",
    "BM_AdmittedCallObserved",
    "BM_Rejection",
    "BM_ExecuteAdmitted",
    "BM_ExecuteRejected",
    "BM_FixedBulkhead",
    "BM_ClockDefault",
    "BM_ClockSteady",
    "BM_MutexLimiter",
    "BM_PipelineBareExecute",
    "BM_PipelineLimit",
    "BM_PipelineLimitRate",
    "BM_PipelineLimitTimeout",
    "BM_PipelineLimitTimeoutToken",
    "BM_PipelineLimitBulkhead",
    "BM_PipelineAll",
    "BM_PipelineLimitRetry",
    "BM_PipelineLimitBreaker",
    "BM_PipelineLimitHedge",
    "BM_ExecutorRoundTrip",
    "BM_AsyncBaseline",
    "BM_AsyncExecute",
    "BM_AsyncRejected",
    "BM_RateLimiterTryAcquire",
    "BM_PipelineTryExecuteRejected",
    "BM_PipelineExecuteRejected",
    "BM_PipelineTryExecuteAdmitted",
    "BM_AdmittedCallLatencyHistogram",
    "BM_RateLimiterEnforce",
    "BM_RateLimiterObserveMode",
    "BM_BreakerEnforce",
    "BM_BreakerObserveMode",
    "BM_PipelineTryExecuteCodeFailure",
    "BM_AdmittedCallWithClass",
    "BM_BulkheadEnforce",
    "BM_BulkheadObserveMode",
    "BM_BulkheadTimed",
    "BM_BulkheadLatencyHistogram",
)
# What each policy adds to a pipeline that has only an adaptive limit.
POLICY_COSTS = (
    ("rate limiter", "BM_PipelineLimitRate"),
    ("timeout, callable without a token", "BM_PipelineLimitTimeout"),
    ("timeout, callable with a std::stop_token", "BM_PipelineLimitTimeoutToken"),
    ("bulkhead", "BM_PipelineLimitBulkhead"),
    ("all four policies, callable with a token", "BM_PipelineAll"),
    ("retry (success at the first attempt)", "BM_PipelineLimitRetry"),
    ("circuit breaker (closed)", "BM_PipelineLimitBreaker"),
    ("hedge (its attempt runs on the executor; see the hand-off below)", "BM_PipelineLimitHedge"),
)
# The hedge hands each call to another thread: its shared state, task and stop_source are
# allocated per call by design, so it is measured against that hand-off, not held to zero.
PIPELINE_BENCHMARKS = tuple(
    n for n in ORDER if n.startswith("BM_Pipeline") and n != "BM_PipelineLimitHedge")
ALLOC_BENCHMARKS = (
    "BM_AdmittedCall",
    "BM_Rejection",
    "BM_ExecuteAdmitted",
    "BM_ExecuteRejected",
    "BM_MutexLimiter",
)
ZERO_ALLOC_BENCHMARKS = ALLOC_BENCHMARKS[:4] + ("BM_AdmittedCallObserved",)
ALLOC_BENCHMARKS += ("BM_AdmittedCallObserved",) + PIPELINE_BENCHMARKS + ("BM_PipelineLimitHedge", "BM_ExecutorRoundTrip",
                                           "BM_AsyncBaseline", "BM_AsyncExecute",
                                           "BM_AsyncRejected")
NS_PER_UNIT = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


class Figures:
    """One benchmark at one thread count: medians over the repetitions, in ns per call."""

    def __init__(self, runs):
        first = runs[0]
        scale = NS_PER_UNIT[first["time_unit"]]
        threads = first["threads"]
        # Google Benchmark divides the threads' average wall time by all threads' iterations:
        # times the thread count, that is each thread's wall time per call.
        self.real_ns = statistics.median(r["real_time"] * scale * threads for r in runs)
        # CPU time is the sum over threads divided by all iterations: already per thread.
        self.cpu_ns = statistics.median(r["cpu_time"] * scale for r in runs)
        self.repetitions = len(runs)
        self.counters = {}
        for name in ("allocs_per_call", "bytes_per_call", "mallocs_per_call", "windows", "limit",
                     "results_per_call", "posts_run_per_call"):
            values = [r[name] for r in runs if name in r]
            if values:
                # Allocation counts must be zero in every repetition: keep the largest.
                pick = max if name.endswith("_per_call") else statistics.median
                self.counters[name] = pick(values)


def load(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    runs, errors = {}, []
    aggregated = any(b.get("run_type") == "aggregate" for b in data["benchmarks"])
    for bench in data["benchmarks"]:
        family = bench["run_name"].split("/")[0]
        key = (family, bench["threads"])
        if bench.get("error_occurred"):
            errors.append(f"{bench['run_name']}: {bench.get('error_message', 'error')}")
            continue
        if aggregated:
            # --benchmark_report_aggregates_only: the median carries the times; the counters
            # are taken from mean and max-like aggregates below.
            if bench.get("aggregate_name") not in ("median", "mean"):
                continue
        runs.setdefault(key, {}).setdefault(bench.get("aggregate_name", "run"), []).append(bench)
    figures = {}
    for key, by_kind in runs.items():
        if aggregated:
            median = by_kind.get("median")
            if not median:
                continue
            fig = Figures(median)
            fig.repetitions = median[0].get("repetitions", fig.repetitions)
            # The mean of counts that are never negative is zero only if every repetition's is.
            for name in ("allocs_per_call", "bytes_per_call", "mallocs_per_call",
                         "results_per_call", "posts_run_per_call"):
                if "mean" in by_kind and name in by_kind["mean"][0]:
                    fig.counters[name] = by_kind["mean"][0][name]
        else:
            fig = Figures(by_kind["run"])
        figures[key] = fig
    return data["context"], figures, errors


def machine():
    """The CPU model from /proc/cpuinfo, whether it is a virtual machine, the clocksource."""
    model, virtual = "unknown CPU", False
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown CPU":
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and " hypervisor" in line:
                    virtual = True
    except OSError:
        pass
    source = "unknown"
    try:
        with open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                  encoding="utf-8") as f:
            source = f.read().strip()
    except OSError:
        pass
    return f"{model}{' (virtual machine)' if virtual else ''}, kernel clocksource {source}"


def fmt_ns(value):
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def judge(figures, uses_tsc):
    """The targets: (label, measured text, verdict), verdict PASS, FAIL or n/a.

    Verdicts use CPU time per call per thread; the wall-clock figure and the verdict it would
    give are printed beside it (docs/performance.md explains the choice).
    """

    def get(name, threads):
        return figures.get((name, threads))

    def verdict(ok):
        return "PASS" if ok else "FAIL"

    def zero_alloc_row(label, names):
        """A row: allocs_per_call is 0 in every one of `names` on 1, 2 and 4 threads."""
        allocating = []
        for name in names:
            for threads in THREADS:
                fig = get(name, threads)
                count = fig.counters.get("allocs_per_call") if fig else None
                if count is None or count != 0:
                    allocating.append(f"{name}/threads:{threads}={count}")
        return (label, "0 in every one" if not allocating else ", ".join(allocating),
                verdict(not allocating))

    def ratio_row(label, num, den, bound):
        n, d = get(*num), get(*den)
        if n is None or d is None:
            return (label, "missing", "FAIL")
        cpu, wall = n.cpu_ns / d.cpu_ns, n.real_ns / d.real_ns
        text = (f"cpu {fmt_ns(n.cpu_ns)} / {fmt_ns(d.cpu_ns)} ns = {cpu:.3f}; "
                f"wall {fmt_ns(n.real_ns)} / {fmt_ns(d.real_ns)} ns = {wall:.3f} "
                f"({verdict(wall <= bound)} on wall)")
        return (label, text, verdict(cpu <= bound))

    rows = [
        ratio_row("1. AdmittedCall/threads:1 <= 1.2 x Floor/threads:1",
                  ("BM_AdmittedCall", 1), ("BM_Floor", 1), 1.2)
    ]
    label = "2. ClockDefault/threads:1 <= 0.5 x ClockSteady/threads:1"
    if uses_tsc:
        rows.append(ratio_row(label, ("BM_ClockDefault", 1), ("BM_ClockSteady", 1), 0.5))
    else:
        rows.append((label, "SystemClock is steady_clock here (no usable TSC)", "n/a"))
    label = "3. Rejection/threads:1 <= 2 ns"
    rejection = get("BM_Rejection", 1)
    if rejection is None:
        rows.append((label, "missing", "FAIL"))
    else:
        rows.append((label, f"cpu {rejection.cpu_ns:.3f} ns; wall {rejection.real_ns:.3f} ns "
                            f"({verdict(rejection.real_ns <= 2.0)} on wall)",
                     verdict(rejection.cpu_ns <= 2.0)))
    rows.append(ratio_row("4. AdmittedCall/threads:2 <= 1.3 x Floor/threads:2",
                          ("BM_AdmittedCall", 2), ("BM_Floor", 2), 1.3))
    rows.append(ratio_row("5. AdmittedCall/threads:2 <= 0.25 x MutexLimiter/threads:2",
                          ("BM_AdmittedCall", 2), ("BM_MutexLimiter", 2), 0.25))
    rows.append(zero_alloc_row("6. allocs_per_call == 0 (AdmittedCall, Rejection, ExecuteAdmitted, "
                               "ExecuteRejected; 1, 2, 4 threads)", ZERO_ALLOC_BENCHMARKS))
    rows.append(ratio_row("7. PipelineLimit/threads:1 <= 1.15 x PipelineBareExecute/threads:1",
                          ("BM_PipelineLimit", 1), ("BM_PipelineBareExecute", 1), 1.15))
    rows.append(zero_alloc_row(
        "8. allocs_per_call == 0 on every pipeline benchmark (1, 2, 4 threads)",
        PIPELINE_BENCHMARKS))
    rows.append(ratio_row("9. AsyncExecute/threads:1 <= 1.3 x AsyncBaseline/threads:1 (execute + "
                          "the bare Asio post)", ("BM_AsyncExecute", 1), ("BM_AsyncBaseline", 1),
                          1.3))
    extra = []
    for threads in THREADS:
        fig, base = get("BM_AsyncExecute", threads), get("BM_AsyncBaseline", threads)
        for name, f, counter in (("AsyncExecute", fig, "results_per_call"),
                                 ("AsyncBaseline", base, "posts_run_per_call")):
            done = f.counters.get(counter) if f else None
            if done is None or abs(done - 1.0) > 1e-9:
                extra.append(f"{name}/threads:{threads} {counter}={done} (must be 1)")
        if fig is None or base is None:
            extra.append(f"threads:{threads}=missing")
            continue
        for counter in ("allocs_per_call", "mallocs_per_call"):
            mine, theirs = fig.counters.get(counter), base.counters.get(counter)
            if mine is None or theirs is None or mine > theirs:
                extra.append(f"threads:{threads} {counter} {mine} vs {theirs}")
    rows.append(("10. AsyncExecute allocates no more than AsyncBaseline (operator new and malloc; "
                 "1, 2, 4 threads), every call completing in its iteration", "never more" if not extra else ", ".join(extra),
                 verdict(not extra)))
    rows.append(ratio_row("11. AdmittedCallObserved/threads:1 <= 1.1 x AdmittedCall/threads:1 "
                          "(a limit-change listener costs admitted calls nothing)",
                          ("BM_AdmittedCallObserved", 1), ("BM_AdmittedCall", 1), 1.1))
    rows += judge_floors(figures, ratio_row)
    rows += judge_operations(figures, ratio_row)
    rows.append(ratio_row(CLASSED_LABEL, ("BM_AdmittedCallWithClass", 1), ("BM_AdmittedCall", 1),
                          CLASSED_BOUND))
    return rows


# Issue 17: a priority class costs an admitted call one multiply (its share of the limit) and a
# test of the class; an admitted call of a class (best_effort, classes at their default shares)
# stays within 1.1 x the plain admitted call.
CLASSED_BOUND = 1.1
CLASSED_LABEL = (f"23. AdmittedCallWithClass/threads:1 <= {CLASSED_BOUND} x AdmittedCall/threads:1 "
                 "(an admitted call of a priority class)")


# Issue 21's pipeline without a throw: its refusals and admitted calls neither allocate nor throw
# (a throw mallocs its exception's header, so mallocs_per_call == 0 also says no throw happened).
NON_THROWING_PIPELINE = ("BM_PipelineTryExecuteRejected", "BM_PipelineTryExecuteAdmitted")
# The policies BM_PipelineAll adds to the limit, each measured alone beside the limit.
ALL_PARTS = ("BM_PipelineLimitTimeoutToken", "BM_PipelineLimitBulkhead", "BM_PipelineLimitRate")


# A call failing with an error code through the same pipeline: it does what an admitted call does,
# plus each policy's decision on the code (the retry's and the limit's predicates: two
# std::function calls) and the breaker's record of a failure (without its lock while no threshold
# is within reach; under it once every 32 outcomes or so). 1.5 x an admitted call leaves room for
# those (about 20 ns on a 30-45 ns call); a throw instead costs 40-60 x (PipelineExecuteRejected).
CODE_FAILURE_BOUND = 1.5


def code_failure_row(figures, ratio_row):
    """Target 18: a code failure as a value, no allocation and no throw, near an admitted call."""
    label, text, verdict = ratio_row(
        f"18. PipelineTryExecuteCodeFailure/threads:1 <= {CODE_FAILURE_BOUND} x "
        "PipelineTryExecuteAdmitted/threads:1, and allocs_per_call == mallocs_per_call == 0 "
        "(1, 2, 4 threads): a call failing with an error code costs no throw",
        ("BM_PipelineTryExecuteCodeFailure", 1), ("BM_PipelineTryExecuteAdmitted", 1),
        CODE_FAILURE_BOUND)
    bad = []
    for threads in THREADS:
        fig = figures.get(("BM_PipelineTryExecuteCodeFailure", threads))
        for counter in ("allocs_per_call", "mallocs_per_call"):
            count = fig.counters.get(counter) if fig else None
            if count is None or count != 0:
                bad.append(f"threads:{threads} {counter}={count}")
    if bad:
        return (label, text + "; " + ", ".join(bad), "FAIL")
    return (label, text + "; 0 allocations, 0 mallocs", verdict)


def judge_floors(figures, ratio_row):
    """Targets 12-18 (issue 21): a rejection's cost, every policy at its floor, a code failure."""

    def get(name, threads):
        return figures.get((name, threads))

    rows = []
    label = ("12. PipelineTryExecuteRejected/threads:1 <= 3 x Rejection/threads:1 + "
             "RateLimiterTryAcquire/threads:1 (a refusal as a value through retry, breaker, "
             "rate limiter, limit, timeout)")
    figs = [get(n, 1) for n in ("BM_PipelineTryExecuteRejected", "BM_Rejection",
                                "BM_RateLimiterTryAcquire")]
    if None in figs:
        rows.append((label, "missing", "FAIL"))
    else:
        mine, rejection, rate = figs
        cpu_bound = 3 * rejection.cpu_ns + rate.cpu_ns
        wall_bound = 3 * rejection.real_ns + rate.real_ns
        rows.append((label, f"cpu {fmt_ns(mine.cpu_ns)} ns against {fmt_ns(cpu_bound)} ns "
                            f"(3 x {fmt_ns(rejection.cpu_ns)} + {fmt_ns(rate.cpu_ns)}): "
                            f"{mine.cpu_ns / cpu_bound:.3f}; wall {fmt_ns(mine.real_ns)} against "
                            f"{fmt_ns(wall_bound)} ns: {mine.real_ns / wall_bound:.3f} "
                            f"({'PASS' if mine.real_ns <= wall_bound else 'FAIL'} on wall)",
                     "PASS" if mine.cpu_ns <= cpu_bound else "FAIL"))
    rows.append(ratio_row("13. PipelineExecuteRejected/threads:1 <= 1.1 x "
                          "ExecuteRejected/threads:1 (one throw, at the end)",
                          ("BM_PipelineExecuteRejected", 1), ("BM_ExecuteRejected", 1), 1.1))
    bad = []
    for name in NON_THROWING_PIPELINE:
        for threads in THREADS:
            fig = get(name, threads)
            for counter in ("allocs_per_call", "mallocs_per_call"):
                count = fig.counters.get(counter) if fig else None
                if count is None or count != 0:
                    bad.append(f"{name}/threads:{threads} {counter}={count}")
    rows.append(("14. allocs_per_call == mallocs_per_call == 0 for PipelineTryExecuteRejected "
                 "and PipelineTryExecuteAdmitted (1, 2, 4 threads): no allocation, no throw",
                 "0 in every one" if not bad else ", ".join(bad), "PASS" if not bad else "FAIL"))
    rows.append(ratio_row("15. PipelineLimitTimeoutToken/threads:1 <= 1.3 x "
                          "PipelineLimitTimeout/threads:1",
                          ("BM_PipelineLimitTimeoutToken", 1), ("BM_PipelineLimitTimeout", 1), 1.3))
    rows.append(ratio_row("16. PipelineLimitBreaker/threads:1 <= 1.3 x "
                          "PipelineLimitBulkhead/threads:1 (a closed breaker)",
                          ("BM_PipelineLimitBreaker", 1), ("BM_PipelineLimitBulkhead", 1), 1.3))
    label = ("17. PipelineAll/threads:1 <= 1.2 x its floor: PipelineLimit + each policy's own "
             "cost beside the limit (LimitTimeoutToken, LimitBulkhead, LimitRate, each minus "
             "PipelineLimit)")
    whole, limit = get("BM_PipelineAll", 1), get("BM_PipelineLimit", 1)
    parts = [get(n, 1) for n in ALL_PARTS]
    if whole is None or limit is None or None in parts:
        rows.append((label, "missing", "FAIL"))
    else:
        cpu_floor = sum(p.cpu_ns for p in parts) - (len(parts) - 1) * limit.cpu_ns
        wall_floor = sum(p.real_ns for p in parts) - (len(parts) - 1) * limit.real_ns
        cpu, wall = whole.cpu_ns / cpu_floor, whole.real_ns / wall_floor
        rows.append((label, f"cpu {fmt_ns(whole.cpu_ns)} / {fmt_ns(cpu_floor)} ns = {cpu:.3f}; "
                            f"wall {fmt_ns(whole.real_ns)} / {fmt_ns(wall_floor)} ns = {wall:.3f} "
                            f"({'PASS' if wall <= 1.2 else 'FAIL'} on wall)",
                     "PASS" if cpu <= 1.2 else "FAIL"))
    rows.append(code_failure_row(figures, ratio_row))
    return rows


# Issue 19's ratio targets: (label, benchmark, baseline, bound), each on 1 thread.
OPERATIONS_RATIOS = (
    ("19. AdmittedCallLatencyHistogram/threads:1 <= 1.15 x AdmittedCall/threads:1 (latency "
     "histograms on)", "BM_AdmittedCallLatencyHistogram", "BM_AdmittedCall", 1.15),
    ("21. RateLimiterObserveMode/threads:1 <= 1.1 x RateLimiterEnforce/threads:1 (a permitted "
     "call in observe mode)", "BM_RateLimiterObserveMode", "BM_RateLimiterEnforce", 1.1),
    ("22. BreakerObserveMode/threads:1 <= 1.1 x BreakerEnforce/threads:1 (a closed breaker's "
     "call in observe mode)", "BM_BreakerObserveMode", "BM_BreakerEnforce", 1.1),
    ("24. BulkheadObserveMode/threads:1 <= 1.1 x BulkheadEnforce/threads:1 (an admitted call "
     "in observe mode)", "BM_BulkheadObserveMode", "BM_BulkheadEnforce", 1.1),
    ("25. BulkheadLatencyHistogram/threads:1 <= 1.15 x BulkheadTimed/threads:1 (latency "
     "histograms on, against the call and the two clock readings any latency of it needs)",
     "BM_BulkheadLatencyHistogram", "BM_BulkheadTimed", 1.15),
)

# Issue 19's bound read literally for the bulkhead, whose admitted call reads no clock: shown,
# never a verdict, since two clock readings alone cost more than the call (docs/performance.md,
# target 25).
LITERAL_BULKHEAD_HISTOGRAM = (
    "25 as issue 19 words it: BulkheadLatencyHistogram/threads:1 <= 1.15 x "
    "BulkheadEnforce/threads:1 (unreachable: BulkheadTimed/BulkheadEnforce is the least it can be)")


def judge_operations(figures, ratio_row):
    """Issue 19's targets: what operating features cost an admitted call."""
    rows = [ratio_row(label, (name, 1), (base, 1), bound)
            for label, name, base, bound in OPERATIONS_RATIOS]
    fig = figures.get(("BM_AdmittedCallLatencyHistogram", 1))
    count = fig.counters.get("allocs_per_call") if fig else None
    rows.insert(1, ("20. allocs_per_call == 0 for AdmittedCallLatencyHistogram (1 thread)",
                    "missing" if count is None else f"{count}", "PASS" if count == 0 else "FAIL"))
    label, measured, _ = ratio_row(LITERAL_BULKHEAD_HISTOGRAM, ("BM_BulkheadLatencyHistogram", 1),
                                   ("BM_BulkheadEnforce", 1), 1.15)
    timed, enforce = figures.get(("BM_BulkheadTimed", 1)), figures.get(("BM_BulkheadEnforce", 1))
    if timed and enforce:
        measured += f"; least possible: {timed.cpu_ns / enforce.cpu_ns:.2f}"
    rows.append((label, measured, "unreachable"))
    return rows


def policy_cost_table(figures):
    """Each policy's own cost: its pipeline's time minus the limit-only pipeline's."""
    lines = ["| Added to a pipeline with only an adaptive limit | CPU ns per call, 1 thread "
             "| 2 threads |", "|---|---:|---:|"]
    for label, name in POLICY_COSTS:
        cells = []
        for threads in (1, 2):
            fig, base = figures.get((name, threads)), figures.get(("BM_PipelineLimit", threads))
            cells.append(fmt_ns(fig.cpu_ns - base.cpu_ns) if fig and base else "missing")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    hedge, trip = figures.get(("BM_PipelineLimitHedge", 1)), figures.get(("BM_ExecutorRoundTrip", 1))
    if hedge and trip:
        lines += ["", f"A hedged call (1 thread) takes {fmt_ns(hedge.real_ns)} ns of wall time "
                  f"against {fmt_ns(trip.real_ns)} ns for the bare executor hand-off it needs "
                  f"(post + wait on a std::promise): {hedge.real_ns / trip.real_ns:.2f}x."]
    return lines


def time_table(figures):
    lines = [
        "| Benchmark | CPU, 1 thread | CPU, 2 threads | CPU, 4 threads "
        "| wall, 1 thread | wall, 2 threads | wall, 4 threads |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in ORDER:
        figs = [figures.get((name, threads)) for threads in THREADS]
        cpu = [fmt_ns(f.cpu_ns) if f else "missing" for f in figs]
        wall = [fmt_ns(f.real_ns) if f else "missing" for f in figs]
        lines.append(f"| {name} | " + " | ".join(cpu + wall) + " |")
    return lines


def cores_table(figures):
    """How many cores the threads kept busy: their CPU time over the wall time.

    Below the thread count, threads waited (for a core another process held, for a mutex, or,
    on 4 threads, for each other): contention between them was then only partly measured.
    """
    lines = ["| Benchmark | 2 threads | 4 threads |", "|---|---:|---:|"]
    for name in ORDER:
        cells = []
        for threads in THREADS[1:]:
            fig = figures.get((name, threads))
            cells.append(f"{fig.cpu_ns * threads / fig.real_ns:.2f}" if fig else "missing")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def alloc_table(figures):
    lines = [
        "| Benchmark | threads | allocs_per_call | bytes_per_call | mallocs_per_call |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in ALLOC_BENCHMARKS:
        for threads in THREADS:
            fig = figures.get((name, threads))
            if not fig:
                continue
            c = fig.counters
            lines.append(f"| {name} | {threads} | {c.get('allocs_per_call', 0):.3g} | "
                         f"{c.get('bytes_per_call', 0):.3g} | {c.get('mallocs_per_call', 0):.3g} |")
    return lines


def windows_line(figures):
    admitted = [(t, figures.get(("BM_AdmittedCall", t))) for t in THREADS]
    parts = [f"{fig.counters['windows']:.0f} on {t} thread{'s' * (t > 1)}"
             for t, fig in admitted if fig and "windows" in fig.counters]
    if not parts:
        return ""
    limits = sorted({f"{fig.counters['limit']:.0f}" for _, fig in admitted
                     if fig and "limit" in fig.counters})
    return (f"Windows closed within one BM_AdmittedCall measurement (median): {', '.join(parts)}; "
            f"the limit ended at {' / '.join(limits)}.")


def markdown(context, figures, rows, command, invocation, repetitions):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load_avg = ", ".join(f"{x:.2f}" for x in context.get("load_avg", []))
    out = [
        BEGIN,
        "<!-- Written by bench/run; edit the text around the markers, not between them. -->",
        "",
        f"- Machine: {machine()}, {context.get('num_cpus', '?')} logical CPUs at "
        f"{context.get('mhz_per_cpu', '?')} MHz; SystemClock reads the TSC: "
        f"{context.get('r4c_system_clock_uses_tsc', 'unknown')}; load average when the run "
        f"started: {load_avg}.",
        f"- Date: {now}.",
        f"- Command, from the repository root: `{command}` (started as `{invocation}`).",
        f"- Median of {repetitions} repetitions, in ns per call per thread: CPU time (what "
        "the targets are judged on) and wall-clock time.",
        "",
    ]
    out += time_table(figures)
    out += ["", "Cores the threads kept busy (their CPU time over wall time): about 2 when "
            "both cores ran benchmark threads throughout, less when threads waited for a core "
            "another process held, for a lock, or for each other:", ""]
    out += cores_table(figures)
    out += ["", "Allocations per call (mean of the repetitions: 0 means 0 in every one):", ""]
    out += alloc_table(figures)
    out += ["", "Each policy's own cost in a pipeline (its pipeline's CPU time minus that of the "
            "pipeline with only an adaptive limit; medians, so small differences are noise):", ""]
    out += policy_cost_table(figures)
    line = windows_line(figures)
    if line:
        out += ["", line]
    out += ["", "| Target | Measured | Verdict (CPU time) |", "|---|---|---|"]
    for label, text, verdict in rows:
        out.append(f"| {label} | {text} | **{verdict}** |")
    out += ["", END]
    return "\n".join(out)


def rewrite_docs(path, block):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(text):
        print(f"report.py: {path} has no {BEGIN} ... {END} section", file=sys.stderr)
        return False
    with open(path, "w", encoding="utf-8") as f:
        f.write(pattern.sub(lambda _: block, text, count=1))
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results")
    parser.add_argument("--command", required=True, help="the command that produced RESULTS")
    parser.add_argument("--invocation", default="bench/run", help="how the run was started")
    parser.add_argument("--docs", help="rewrite this file's results section")
    args = parser.parse_args()

    context, figures, errors = load(args.results)
    missing = [f"{n}/threads:{t}" for n in ORDER for t in THREADS if (n, t) not in figures]
    uses_tsc = context.get("r4c_system_clock_uses_tsc") == "true"
    rows = judge(figures, uses_tsc)
    repetitions = max((f.repetitions for f in figures.values()), default=0)

    print(f"Median of {repetitions} repetitions, ns per call per thread:")
    print("\n".join(time_table(figures)))
    print()
    print("Cores kept busy (thread CPU time / wall time):")
    print("\n".join(cores_table(figures)))
    print()
    print("\n".join(alloc_table(figures)))
    print()
    print("\n".join(policy_cost_table(figures)))
    line = windows_line(figures)
    if line:
        print()
        print(line)
    print()
    print("Targets (verdict on CPU time per call per thread):")
    for label, text, verdict in rows:
        print(f"{verdict:>4}  {label}: {text}")
    failed = [label for label, _, verdict in rows if verdict == "FAIL"]
    print()
    if failed:
        print(f"FAIL: {len(failed)} of {len(rows)} targets missed:")
        for label in failed:
            print(f"  FAIL {label}")
    else:
        print("All targets met (n/a ones excepted).")

    status = 0
    for problem in errors + [f"{m}: no result" for m in missing]:
        print(f"error: {problem}", file=sys.stderr)
        status = 2
    if args.docs and status == 0:
        block = markdown(context, figures, rows, args.command, args.invocation, repetitions)
        if not rewrite_docs(args.docs, block):
            return 1
        print(f"Rewrote the results section of {args.docs}.")
    return status


if __name__ == "__main__":
    sys.exit(main())
