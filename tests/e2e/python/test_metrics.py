"""--metrics-listen: /metrics moves with the traffic, /healthz and /readyz say
what they should, rule reloads are counted.

Every test runs a remold of its own (the counters are the process's) with
--metrics-listen on a free port. The exposition is parsed strictly (HELP and TYPE before the
samples of a family, histogram buckets cumulative and ending in +Inf equal
to _count), so a format mistake fails every test here.
"""

from __future__ import annotations

import http.client
import re
import socket
import subprocess
import time
from pathlib import Path
from typing import Optional

import pymongo
import pytest

from conftest import (BACKEND_START_TIMEOUT, SOURCE_DIR, Remold, _BACKEND_LINE,
                      drain_in_background, read_port_line, require_binary)

ATTRIBUTE_RULE = SOURCE_DIR / "tests" / "golden" / "cases" / "attribute" / "count_with_attribute_query" / "rule.yaml"

pytestmark = pytest.mark.usefixtures("proxy_only")


# --------------------------------------------------------------------------
# The exposition format, parsed strictly.

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')


def _labels(text: str) -> tuple:
    out = []
    pos = 0
    while pos < len(text):
        match = _LABEL.match(text, pos)
        assert match, f"bad label set {text!r} at {pos}"
        value = re.sub(r'\\(.)', lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), match.group(2))
        out.append((match.group(1), value))
        pos = match.end()
    return tuple(sorted(out))


def parse_exposition(text: str) -> dict:
    """{(name, labels): value}; asserts the text format 0.0.4 rules we rely on."""
    assert text.endswith("\n"), "the exposition ends with a newline"
    types: dict[str, str] = {}
    helps: set[str] = set()
    samples: dict = {}
    current: Optional[str] = None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split(" ", 3)[2]
            assert name not in helps, f"second HELP for {name}"
            helps.add(name)
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram"), line
            assert name not in types, f"second TYPE for {name}"
            assert name in helps, f"TYPE before HELP for {name}"
            types[name] = kind
            current = name
            continue
        assert not line.startswith("#") and line.strip(), f"unexpected line {line!r}"
        match = _SAMPLE.match(line)
        assert match, f"bad sample line {line!r}"
        name, labels, value = match.group(1), _labels(match.group(2) or ""), match.group(3)
        family = name
        if types.get(current) == "histogram":
            family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert family == current, f"sample {name} outside its family (current {current})"
        key = (name, labels)
        assert key not in samples, f"duplicate sample {line!r}"
        samples[key] = float(value.replace("+Inf", "inf"))
    # Histograms: cumulative buckets, +Inf last and equal to _count.
    for name, kind in types.items():
        if kind != "histogram":
            continue
        series: dict[tuple, list] = {}
        for (sample, labels), value in samples.items():
            if sample == name + "_bucket":
                rest = tuple(l for l in labels if l[0] != "le")
                le = dict(labels)["le"]
                series.setdefault(rest, []).append((float(le.replace("+Inf", "inf")), value))
        for rest, buckets in series.items():
            buckets.sort()
            assert buckets[-1][0] == float("inf"), f"{name}{rest}: no +Inf bucket"
            counts = [v for _, v in buckets]
            assert counts == sorted(counts), f"{name}{rest}: buckets not cumulative: {counts}"
            assert samples[(name + "_count", rest)] == counts[-1]
            assert (name + "_sum", rest) in samples
    return samples


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


# --------------------------------------------------------------------------
# Plumbing.


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_observed(private_remold, *extra: str, **kwargs) -> tuple[Remold, tuple[str, int]]:
    """A remold of the test's own with --metrics-listen on a free port."""
    port = free_port()
    remold = private_remold(extra_args=("--metrics-listen", f"127.0.0.1:{port}", *extra), **kwargs)
    return remold, ("127.0.0.1", port)


def http_get(address: tuple[str, int], path: str, method: str = "GET") -> tuple[int, str, dict]:
    conn = http.client.HTTPConnection(*address, timeout=10)
    try:
        conn.request(method, path)
        response = conn.getresponse()
        return response.status, response.read().decode(), dict(response.getheaders())
    finally:
        conn.close()


def scrape(address) -> dict:
    status, body, headers = http_get(address, "/metrics")
    assert status == 200, body
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4"), headers
    return parse_exposition(body)


def wait_for(predicate, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def write_attribute_rule(rules_dir: Path, db_name: str) -> str:
    """The golden attribute rule on <db>.products; returns the rule name."""
    rules_dir.mkdir(exist_ok=True)
    text = ATTRIBUTE_RULE.read_text().replace("namespace: shop.products", f"namespace: {db_name}.products")
    assert f"{db_name}.products" in text
    (rules_dir / "products.yaml").write_text(text)
    return "products"


class OwnBackend:
    """A mongo-java-server of the test's own, which it may kill and restart on the same port."""

    def __init__(self):
        self.proc: Optional[subprocess.Popen] = None
        self.port = 0

    def start(self, port: int = 0, timeout: float = BACKEND_START_TIMEOUT) -> None:
        cmd = ["java", "-cp", "tests/backend/lib/*:tests/backend/classes", "Launcher", "127.0.0.1",
               str(port)]
        deadline = time.monotonic() + timeout
        while True:
            proc = subprocess.Popen(cmd, cwd=SOURCE_DIR, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            try:
                _, self.port = read_port_line(proc, _BACKEND_LINE, timeout, "backend")
                break
            except RuntimeError:
                proc.kill()
                proc.wait()
                if port == 0 or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)  # the port may still be held: try again
        drain_in_background(proc.stdout, [])
        self.proc = proc

    @property
    def uri(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}/"

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def own_backend():
    backend = OwnBackend()
    yield backend
    backend.kill()


# --------------------------------------------------------------------------
# Tests.


def test_metrics_move_with_traffic(private_remold, direct_client, db_name, tmp_path):
    rule = write_attribute_rule(tmp_path / "rules", db_name)
    remold, address = start_observed(private_remold, "--rules", str(tmp_path / "rules"))
    client = pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000)
    try:
        client.admin.command("ping")
        before = scrape(address)
        # Every family is there from the start; the rule's series too, at 0.
        assert value(before, "remold_rewrites_total", rule=rule) == 0
        assert ("remold_rewrite_seconds_count", (("rule", rule),)) in before
        assert value(before, "remold_rule_reloads_total", result="success") == 1
        assert value(before, "remold_rule_reloads_total", result="failure") == 0
        assert value(before, "remold_rules") == 1
        # One series per pattern remold knows, each counting its rules.
        by_pattern = {dict(labels)["pattern"]: v for (name, labels), v in before.items()
                      if name == "remold_rules_by_pattern"}
        assert {"bucket", "attribute", "computed"} <= set(by_pattern), by_pattern
        assert by_pattern["attribute"] == 1, by_pattern
        assert all(n == 0 for p, n in by_pattern.items() if p != "attribute"), by_pattern
        assert value(before, "remold_connections_open") >= 1
        assert value(before, "remold_connections_total") >= 1

        plain = client[db_name].plain
        inserts = 7
        for i in range(inserts):
            plain.insert_one({"_id": i, "x": "y" * 100})
        assert len(list(plain.find({}))) == inserts
        with pytest.raises(pymongo.errors.DuplicateKeyError):
            plain.insert_one({"_id": 0})
        with pytest.raises(pymongo.errors.OperationFailure) as unknown:
            client[db_name].command("noSuchCommandAtAll")
        # The backend's code for an unknown command (mongod: 59
        # CommandNotFound; DocumentDB: 115), passed on as it is.
        with pytest.raises(pymongo.errors.OperationFailure) as oracle:
            direct_client[db_name].command("noSuchCommandAtAll")
        assert unknown.value.code == oracle.value.code
        after = scrape(address)

        def delta(name, **labels):
            return value(after, name, **labels) - value(before, name, **labels)

        assert delta("remold_requests_total", command="insert") == inserts + 1
        assert delta("remold_requests_total", command="find") == 1
        assert delta("remold_requests_total", command="other") == 1
        assert delta("remold_errors_total", code="11000") == 1  # the duplicate key, a write error
        assert delta("remold_errors_total", code=str(oracle.value.code)) == 1  # the unknown command, ok: 0
        assert delta("remold_bytes_received_total") > inserts * 100
        assert delta("remold_bytes_sent_total") > inserts * 100  # the find returns them
        assert delta("remold_backend_roundtrip_seconds_count") >= inserts + 3
        assert delta("remold_backend_roundtrip_seconds_sum") > 0
        assert delta("remold_rewrites_total", rule=rule) == 0

        # The ruled namespace: rewrites counted by rule, with their latency.
        products = client[db_name].products
        products.insert_one({"_id": 1, "name": "laptop", "ram_gb": 16})
        assert products.find_one({"ram_gb": 16})["name"] == "laptop"
        with pytest.raises(pymongo.errors.OperationFailure):
            list(products.find({"$where": "this.ram_gb > 1"}))  # refused by the rule
        ruled = scrape(address)
        assert value(ruled, "remold_rewrites_total", rule=rule) == 3
        assert value(ruled, "remold_rewrite_errors_total", rule=rule) == 1
        assert value(ruled, "remold_rewrite_seconds_count", rule=rule) == 3
        assert value(ruled, "remold_rewrite_seconds_sum", rule=rule) > 0
        # The rewritten insert's backend commands went through the histogram too.
        assert (value(ruled, "remold_backend_roundtrip_seconds_count")
                > value(after, "remold_backend_roundtrip_seconds_count"))
        # The rule really applied: the attribute is stored folded.
        assert "ram_gb" not in direct_client[db_name].products.find_one({"_id": 1})
    finally:
        client.close()
    closed = wait_for(lambda: (s := scrape(address)) and value(s, "remold_connections_open") == 0 and s,
                      10, "connections_open to drop to 0")
    assert value(closed, "remold_connections_total") >= value(before, "remold_connections_total")


def test_healthz_readyz_follow_the_backend(private_remold, own_backend):
    own_backend.start()
    remold, address = start_observed(private_remold, backend_uri=own_backend.uri)

    status, body, _ = http_get(address, "/healthz")
    assert (status, body) == (200, "ok\n")
    wait_for(lambda: http_get(address, "/readyz")[:2] == (200, "ready\n"), 10, "/readyz 200")
    assert value(scrape(address), "remold_ready") == 1
    assert value(scrape(address), "remold_backend_reachable") == 1

    port = own_backend.port
    own_backend.kill()
    status, body, _ = wait_for(lambda: (r := http_get(address, "/readyz"))[0] == 503 and r, 10,
                               "/readyz 503 with the backend down")
    assert body.startswith("not ready: backend unreachable") and body.endswith("\n"), body
    assert body.count("\n") == 1, "one line"
    assert f"127.0.0.1:{port}" in body
    assert http_get(address, "/healthz")[0] == 200, "the process is still up"
    samples = scrape(address)
    assert value(samples, "remold_ready") == 0
    assert value(samples, "remold_backend_reachable") == 0

    own_backend.start(port)
    wait_for(lambda: http_get(address, "/readyz")[:2] == (200, "ready\n"), 30,
             "/readyz 200 once the backend is back")
    client = pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000)
    try:
        assert client.admin.command("ping")["ok"] == 1
    finally:
        client.close()
    # One warning when the backend went away (not one per probe).
    assert remold.stderr().count("backend probe: unreachable") == 1, remold.stderr()


def test_http_edges(private_remold):
    remold, address = start_observed(private_remold)
    assert http_get(address, "/nope")[0] == 404
    assert http_get(address, "/metrics?x=1")[0] == 200
    status, body, headers = http_get(address, "/metrics", method="HEAD")
    assert status == 200 and body == "" and int(headers["Content-Length"]) > 0
    assert http_get(address, "/metrics", method="POST")[0] == 405

    # Garbage gets a 400; a head too large a 431; silence is cut off; none of it hurts.
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400")
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\n" + b"X-Pad: " + b"a" * 20_000)
        reply = b""
        while chunk := sock.recv(4096):
            reply += chunk
        assert reply.startswith(b"HTTP/1.1 431"), reply[:100]
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\n")  # never finished
        start = time.monotonic()
        assert sock.recv(100) == b"", "closed without a reply"
        assert time.monotonic() - start < 9
    assert http_get(address, "/healthz")[0] == 200


def test_metrics_listen_in_use_is_an_error():
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    try:
        port = holder.getsockname()[1]
        result = subprocess.run([str(require_binary()), "serve", "--listen", "127.0.0.1:0",
                                 "--backend", "mongodb://127.0.0.1:1", "--metrics-listen",
                                 f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=20)
        assert result.returncode == 1
        assert f"metrics listen 127.0.0.1:{port}" in result.stderr, result.stderr
    finally:
        holder.close()


def test_rule_reloads_are_counted(private_remold, db_name, tmp_path):
    rules = tmp_path / "rules"
    rule = write_attribute_rule(rules, db_name)
    remold, address = start_observed(private_remold, "--rules", str(rules))
    wait_for(lambda: http_get(address, "/readyz")[0] == 200, 10, "/readyz 200")
    start = scrape(address)
    assert value(start, "remold_rule_reloads_total", result="success") == 1

    (rules / "broken.yaml").write_text(f"namespace: {db_name}.other\npattern: nosuchpattern\n")
    failed = wait_for(lambda: (s := scrape(address)) and
                      value(s, "remold_rule_reloads_total", result="failure") >= 1 and s,
                      10, "a failed reload to be counted")
    assert value(failed, "remold_rule_reloads_total", result="failure") == 1
    assert value(failed, "remold_rule_reloads_total", result="success") == 1
    assert value(failed, "remold_rules") == 1, "the rules in force stay"
    # A failed reload keeps the rules in force: still ready.
    assert http_get(address, "/readyz")[0] == 200

    (rules / "broken.yaml").unlink()
    wait_for(lambda: value(scrape(address), "remold_rule_reloads_total", result="success") == 2,
             10, "the next good reload to be counted")
    assert value(scrape(address), "remold_rewrites_total", rule=rule) == 0


def test_readyz_turns_503_while_draining(private_remold, db_name):
    """After SIGTERM, while a request is still in flight, /readyz says
    "draining" (the readiness probe moves traffic away) and /healthz stays 200."""
    import signal

    import wire
    remold, address = start_observed(private_remold, "--drain-timeout-ms", "3000")
    wait_for(lambda: http_get(address, "/readyz")[0] == 200, 10, "/readyz 200")
    sock = wire.connect(*remold.address)
    try:
        message = wire.op_msg({"ping": 1, "$db": db_name})
        sock.sendall(message[:20])  # a request being received: the drain waits for it
        time.sleep(0.3)
        remold.proc.send_signal(signal.SIGTERM)
        status, body, _ = wait_for(lambda: (r := http_get(address, "/readyz"))[0] == 503 and r, 5,
                                   "/readyz 503 while draining")
        assert body == "not ready: draining: shutting down\n", body
        assert http_get(address, "/healthz")[0] == 200
        sock.sendall(message[20:])
        reply = wire.recv_message(sock, timeout=5)
        assert reply.doc.get("ok") == 1, reply.doc
    finally:
        sock.close()
    assert remold.proc.wait(timeout=10) == 0
