"""remold refuses bad configuration: non-zero exit and one stderr line saying why."""

from __future__ import annotations

import socket
import subprocess

import pymongo
import pytest

from conftest import require_binary

EXIT_TIMEOUT = 10.0


def run_remold(*args: str) -> subprocess.CompletedProcess:
    binary = require_binary()
    try:
        return subprocess.run([str(binary), *args], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=EXIT_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"remold {' '.join(args)} still running after {EXIT_TIMEOUT}s "
                    f"(stdout: {exc.stdout!r}); a bad config must make it exit")


def assert_refused(result: subprocess.CompletedProcess, *mentions: str) -> str:
    """Non-zero exit, never bound, exactly one stderr line mentioning one of ``mentions``."""
    assert result.returncode != 0, f"exit 0; stderr: {result.stderr!r}"
    assert result.returncode > 0, f"killed by signal {-result.returncode}: {result.stderr!r}"
    assert "remold listening" not in result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one stderr line, got {lines!r}"
    assert any(m in lines[0] for m in mentions), f"{lines[0]!r} names none of {mentions}"
    return lines[0]


def write_config(tmp_path, text: str) -> str:
    path = tmp_path / "remold.yaml"
    path.write_text(text)
    return str(path)


def test_unknown_config_key(tmp_path, backend):
    config = write_config(tmp_path, f"lisen: 127.0.0.1:0\nbackend: {backend.uri}\nlog_level: warn\n")
    assert_refused(run_remold("serve", "--config", config), "lisen")


def test_bad_log_level_in_config(tmp_path, backend):
    config = write_config(tmp_path, f"listen: 127.0.0.1:0\nbackend: {backend.uri}\nlog_level: loud\n")
    assert_refused(run_remold("serve", "--config", config), "log_level", "loud")


@pytest.mark.parametrize("listen", ["127.0.0.1:notaport", "127.0.0.1:70000", "127.0.0.1:-1",
                                    "256.0.0.1:0", ":::"])
def test_bad_listen_address(listen, backend):
    result = run_remold("serve", "--listen", listen, "--backend", backend.uri, "--log-level", "warn")
    assert_refused(result, "listen", listen)


def test_bad_listen_address_in_config(tmp_path, backend):
    config = write_config(tmp_path, f"listen: 127.0.0.1:99999\nbackend: {backend.uri}\n")
    assert_refused(run_remold("serve", "--config", config), "listen", "99999")


def test_listen_address_in_use(backend):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_remold("serve", "--listen", f"127.0.0.1:{port}", "--backend", backend.uri,
                            "--log-level", "warn")
    assert result.returncode > 0, f"exit {result.returncode}; stderr: {result.stderr!r}"
    assert "remold listening" not in result.stdout
    assert result.stderr.strip(), "no error message on stderr"


@pytest.mark.parametrize("uri", ["http://127.0.0.1:27017", "127.0.0.1:27017",
                                 "redis://127.0.0.1:6379", "mongodb:127.0.0.1:27017", ""])
def test_backend_uri_not_mongodb(uri):
    result = run_remold("serve", "--listen", "127.0.0.1:0", "--backend", uri, "--log-level", "warn")
    assert_refused(result, "backend", *([uri] if uri else []))


def test_valid_config_file_serves(tmp_path, backend, private_remold):
    config = write_config(tmp_path, f"listen: 127.0.0.1:0\nbackend: {backend.uri}\nlog_level: warn\n")
    remold = private_remold(args=["serve", "--config", config])
    with pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=10_000) as client:
        assert client.admin.command("ping")["ok"] == 1
    assert remold.terminate() == 0
