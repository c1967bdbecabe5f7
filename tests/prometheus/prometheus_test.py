#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""r4c's metrics against the real Prometheus tools (Debian package `prometheus`).

  prometheus_test.py promtool SERVER   promtool check metrics on SERVER --print's exposition
  prometheus_test.py scrape SERVER     a real Prometheus server scrapes SERVER every second
                                       while its adaptive limit moves; the values it stored
                                       must be the ones SERVER serves once settled

SERVER is the r4c_metrics_server example. Exits 77 (CTest's skip code) with a message when
the prometheus tools are not installed. Bounded in time: every wait has a deadline, and both
processes are stopped on the way out.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

SKIP = 77


def skip(message):
    print(f"SKIPPED: {message}", flush=True)
    sys.exit(SKIP)


def fail(message):
    print(f"FAILED: {message}", flush=True)
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


def sample(exposition, name, labels):
    """The value of `name{labels}` in a text exposition, or None."""
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in exposition.splitlines():
        if line.startswith(f"{name}{{{wanted}}} "):
            return float(line.rsplit(" ", 1)[1])
    return None


def check_promtool(server):
    promtool = shutil.which("promtool")
    if promtool is None:
        skip("promtool is not installed (Debian package prometheus): apt-get install prometheus")
    exposition = subprocess.run([server, "--print", "--load-seconds", "2"], check=True,
                                capture_output=True, text=True, timeout=60).stdout
    for family in ("r4c_calls_rejected_total", "r4c_adaptivelimit_limit_changes_total",
                   "r4c_adaptivelimit_limit", "r4c_adaptivelimit_concurrent_calls",
                   "r4c_circuitbreaker_state", "r4c_retry_calls_total", "r4c_hedge_calls_total",
                   "r4c_bulkhead_available_concurrent_calls",
                   "r4c_ratelimiter_available_permissions"):
        if f"# TYPE {family} " not in exposition:
            fail(f"the exposition has no {family}:\n{exposition}")
    checked = subprocess.run([promtool, "check", "metrics"], input=exposition,
                             capture_output=True, text=True, timeout=60)
    if checked.returncode != 0 or checked.stdout.strip() or checked.stderr.strip():
        fail(f"promtool check metrics (exit {checked.returncode}):\n"
             f"{checked.stdout}{checked.stderr}\n--- exposition:\n{exposition}")
    print(f"promtool check metrics: clean ({exposition.count(chr(10))} lines)")

    # The scrape config and the alert rule docs/observability.md shows.
    page = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                        "observability.md")
    with open(page) as text:
        blocks = re.findall(r"```yaml\n(.*?)```", text.read(), re.S)
    if len(blocks) != 2:
        fail(f"docs/observability.md should show 2 yaml blocks, shows {len(blocks)}")
    with tempfile.TemporaryDirectory() as folder:
        for block, what in zip(blocks, ("config", "rules")):
            path = os.path.join(folder, f"{what}.yml")
            with open(path, "w") as out:
                out.write(block)
            checked = subprocess.run([promtool, "check", what, path], capture_output=True,
                                     text=True, timeout=60)
            if checked.returncode != 0:
                fail(f"promtool check {what} on the page's block:\n{checked.stdout}"
                     f"{checked.stderr}\n{block}")
    print("promtool check config and check rules: the page's scrape config and alert are valid")


class Processes:
    """Starts processes and stops every one of them on the way out."""

    def __init__(self):
        self.started = []

    def start(self, args, **kwargs):
        process = subprocess.Popen(args, **kwargs)
        self.started.append(process)
        return process

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for process in self.started:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def read_line(process, prefix, deadline):
    """The next line of `process`'s standard output starting with `prefix`."""
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            fail(f"the server ended before printing '{prefix}' (exit {process.poll()})")
        if line.startswith(prefix):
            return line.strip()
    fail(f"no '{prefix}' line in time")


def query(prometheus_url, expression):
    url = f"{prometheus_url}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
    answer = json.loads(http_get(url))
    if answer.get("status") != "success":
        fail(f"query {expression}: {answer}")
    return answer["data"]["result"]


def check_scrape(server):
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        skip("prometheus is not installed (Debian package prometheus): apt-get install prometheus")
    deadline = time.monotonic() + 150
    with tempfile.TemporaryDirectory() as folder, Processes() as processes:
        app = processes.start([server, "--port", "0", "--load-seconds", "8", "--seconds", "120"],
                              stdout=subprocess.PIPE, text=True)
        address = read_line(app, "listening ", deadline).split()[1]

        prometheus_port = free_port()
        config = os.path.join(folder, "prometheus.yml")
        with open(config, "w") as out:
            out.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                      "scrape_configs:\n  - job_name: r4c\n"
                      f"    static_configs:\n      - targets: ['{address}']\n")
        log = open(os.path.join(folder, "prometheus.log"), "w")
        processes.start([prometheus, f"--config.file={config}",
                         f"--storage.tsdb.path={os.path.join(folder, 'data')}",
                         f"--web.listen-address=127.0.0.1:{prometheus_port}", "--log.level=warn"],
                        stdout=log, stderr=subprocess.STDOUT)
        prometheus_url = f"http://127.0.0.1:{prometheus_port}"

        settled = read_line(app, "settled ", deadline)
        print(f"server: {settled}")
        served = http_get(f"http://{address}/metrics")
        labels = {"kind": "adaptivelimit", "name": "orders"}
        limit = sample(served, "r4c_adaptivelimit_limit", labels)
        rejected = sample(served, "r4c_calls_rejected_total", labels)
        changes = sample(served, "r4c_adaptivelimit_limit_changes_total", labels)
        if limit is None or rejected is None or changes is None:
            fail(f"the server's /metrics lacks the limit's metrics:\n{served}")
        if rejected <= 0 or changes <= 0:
            fail(f"the load phase should reject calls and move the limit: {settled}")

        # Prometheus must store exactly the settled values, with the server's labels.
        want = {"r4c_adaptivelimit_limit": limit, "r4c_calls_rejected_total": rejected}
        got = {}
        while time.monotonic() < deadline and got != want:
            time.sleep(1)
            try:
                for name in want:
                    result = query(prometheus_url, f'{name}{{kind="adaptivelimit"}}')
                    if len(result) != 1:
                        continue
                    metric = result[0]["metric"]
                    expected_labels = {"__name__": name, "kind": "adaptivelimit", "name": "orders",
                                       "job": "r4c", "instance": address}
                    if metric != expected_labels:
                        fail(f"{name} arrived with labels {metric}, expected {expected_labels}")
                    got[name] = float(result[0]["value"][1])
            except OSError:
                continue  # Prometheus is still starting
        if got != want:
            with open(os.path.join(folder, "prometheus.log")) as log_text:
                fail(f"Prometheus stored {got}, the server serves {want}\n{log_text.read()}")
        print(f"Prometheus stored {got}")

        # And it saw the limit move while it scraped.
        moved = query(prometheus_url, 'changes(r4c_adaptivelimit_limit{name="orders"}[5m])')
        if not moved or float(moved[0]["value"][1]) < 1:
            fail(f"Prometheus never saw the limit move: {moved}")
        print(f"Prometheus saw the limit change {moved[0]['value'][1]} times between scrapes")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("promtool", "scrape"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, server = sys.argv[1], sys.argv[2]
    if mode == "promtool":
        check_promtool(server)
    else:
        check_scrape(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
