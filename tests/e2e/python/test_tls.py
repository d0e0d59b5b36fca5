"""TLS through the real binary: clients to remold (--tls-cert/--tls-key,
--tls-client-ca, SIGHUP reload) and remold to the backend (the URI's tls,
tlsCAFile, tlsCertificateKeyFile, tlsAllowInvalidHostnames).

Certificates are made at test time with the openssl CLI (tls_certs.py). The
test backend has no TLS, so the backend tests put a small TLS terminator
(python's ssl module in an asyncio TCP proxy) in front of it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
from pathlib import Path
from typing import Optional

import pymongo
import pytest
from pymongo.errors import PyMongoError, ServerSelectionTimeoutError

import scram
import wire
from conftest import NO_PROXY, Remold, require_binary
from support import assert_request_survives_sigterm
from tls_certs import Ca, Cert, make_ca, make_cert, require_openssl

pytestmark = pytest.mark.skipif(NO_PROXY, reason="remold's own TLS; REMOLD_TEST_NO_PROXY=1")

SELECTION_TIMEOUT_MS = 3000


# --------------------------------------------------------------------------
# Fixtures and helpers.


class Pki:
    """A CA, the certificates it signs, and a second CA nobody trusts."""

    def __init__(self, root: Path):
        self.root = root
        self.ca: Ca = make_ca(root / "ca", "remold-test-ca")
        self.other_ca: Ca = make_ca(root / "other", "untrusted-ca")
        self.server: Cert = make_cert(root / "server", "server", self.ca, serial=1001)
        self.client: Cert = make_cert(root / "client", "client", self.ca, serial=3001,
                                      sans=(), usage="clientAuth")
        self.stranger: Cert = make_cert(root / "stranger", "stranger", self.other_ca, serial=4001,
                                        sans=(), usage="clientAuth")
        self._serial = 5000

    def new_server_cert(self, name: str, **kwargs) -> Cert:
        self._serial += 1
        return make_cert(self.root / name, name, self.ca, serial=self._serial, **kwargs)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    require_openssl()
    return Pki(tmp_path_factory.mktemp("pki"))


def tls_client(remold: Remold, pki: Pki, **kwargs) -> pymongo.MongoClient:
    kwargs.setdefault("serverSelectionTimeoutMS", SELECTION_TIMEOUT_MS)
    return pymongo.MongoClient(remold.uri, tls=True, tlsCAFile=str(pki.ca.cert), **kwargs)


def tls_socket(address: tuple[str, int], ca: Path, cert: Optional[Cert] = None) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(ca))
    if cert:
        context.load_cert_chain(str(cert.cert), str(cert.key))
    raw = socket.create_connection(address, timeout=5)
    return context.wrap_socket(raw, server_hostname=address[0])


def served_serial(address: tuple[str, int], ca: Path) -> int:
    """The serial number of the certificate a new connection is shown."""
    with tls_socket(address, ca) as sock:
        return int(sock.getpeercert()["serialNumber"], 16)


def insert_and_find(client: pymongo.MongoClient, db_name: str, value) -> None:
    coll = client[db_name].things
    coll.insert_one({"_id": value, "v": value})
    assert coll.find_one({"_id": value}) == {"_id": value, "v": value}


def wait_for(predicate, timeout: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def run_remold_expecting_failure(args: list[str]) -> subprocess.CompletedProcess:
    binary = require_binary()
    return subprocess.run([str(binary), "serve", "--listen", "127.0.0.1:0", *args],
                          capture_output=True, text=True, timeout=20)


@pytest.fixture
def tls_remold(private_remold, pki):
    """Factory: a remold serving TLS with ``cert`` (default pki.server)."""

    def start(cert: Optional[Cert] = None, extra: tuple[str, ...] = ()) -> Remold:
        cert = cert or pki.server
        return private_remold(extra_args=("--tls-cert", str(cert.cert), "--tls-key", str(cert.key),
                                          *extra))

    return start


# --------------------------------------------------------------------------
# Client side.


def test_tls_client_inserts_and_finds(tls_remold, pki, direct_client, db_name):
    remold = tls_remold()
    try:
        with tls_client(remold, pki) as client:
            insert_and_find(client, db_name, 1)
            assert client[db_name].things.count_documents({}) == 1
        assert served_serial(remold.address, pki.ca.cert) == pki.server.serial
    finally:
        direct_client.drop_database(db_name)


def test_plain_client_to_tls_remold_fails(tls_remold, pki, direct_client, db_name):
    remold = tls_remold()
    with pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=SELECTION_TIMEOUT_MS) as plain:
        with pytest.raises(ServerSelectionTimeoutError):
            plain.admin.command("ping")
    # A raw plaintext hello gets no reply: the connection is closed.
    sock = wire.connect(*remold.address, authenticate=False)
    try:
        with pytest.raises((wire.ConnectionClosed, ConnectionResetError)):
            wire.command(sock, {"hello": 1})
    finally:
        sock.close()
    assert remold.alive()
    try:
        with tls_client(remold, pki) as client:
            insert_and_find(client, db_name, "after-plain")
    finally:
        direct_client.drop_database(db_name)


def test_client_certificate_required(tls_remold, pki, direct_client, db_name):
    remold = tls_remold(extra=("--tls-client-ca", str(pki.ca.cert)))
    try:
        with tls_client(remold, pki) as no_cert:
            with pytest.raises(PyMongoError):
                no_cert.admin.command("ping")
        with tls_client(remold, pki, tlsCertificateKeyFile=str(pki.stranger.combined)) as stranger:
            with pytest.raises(PyMongoError):
                stranger.admin.command("ping")
        with tls_client(remold, pki, tlsCertificateKeyFile=str(pki.client.combined)) as client:
            insert_and_find(client, db_name, "with-cert")
        assert remold.alive()
    finally:
        direct_client.drop_database(db_name)


def replace_file(target: Path, source: Path) -> None:
    tmp = target.with_suffix(".tmp")
    shutil.copyfile(source, tmp)
    os.replace(tmp, target)


def test_sighup_reloads_the_certificate(tls_remold, pki, tmp_path, direct_client, db_name):
    cert_path, key_path = tmp_path / "served.pem", tmp_path / "served.key"
    first = pki.new_server_cert("reload-a")
    second = pki.new_server_cert("reload-b")
    replace_file(cert_path, first.cert)
    replace_file(key_path, first.key)
    remold = tls_remold(cert=Cert(cert_path, key_path, cert_path, first.serial))
    try:
        assert served_serial(remold.address, pki.ca.cert) == first.serial
        old_socket = tls_socket(remold.address, pki.ca.cert)
        assert wire.command(old_socket, {"ping": 1})["ok"] == 1
        old_client = tls_client(remold, pki)
        insert_and_find(old_client, db_name, "before")

        replace_file(cert_path, second.cert)
        replace_file(key_path, second.key)
        remold.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: served_serial(remold.address, pki.ca.cert) == second.serial,
                 what="the new certificate to be served")

        # Connections opened before the reload keep working on their session.
        assert wire.command(old_socket, {"ping": 1})["ok"] == 1
        insert_and_find(old_client, db_name, "after")
        with tls_client(remold, pki) as new_client:
            assert new_client[db_name].things.count_documents({}) == 2

        # A broken file on reload: logged, and the certificate in force stays.
        cert_path.write_text("not a certificate\n")
        remold.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "TLS reload" in remold.stderr(), what="the reload error in the log")
        assert "tls_cert" in remold.stderr()
        assert served_serial(remold.address, pki.ca.cert) == second.serial
        with tls_client(remold, pki) as new_client:
            new_client.admin.command("ping")
        assert wire.command(old_socket, {"ping": 1})["ok"] == 1
        old_socket.close()
        old_client.close()
        assert remold.alive()
    finally:
        direct_client.drop_database(db_name)


class RawTls:
    """A TLS client over a plain socket through memory BIOs, so a test sends
    exactly the encrypted bytes it chooses (part of a record, say)."""

    def __init__(self, address: tuple[str, int], ca: Path):
        context = ssl.create_default_context(cafile=str(ca))
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_hostname=address[0])
        self.sock = socket.create_connection(address, timeout=10)
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.sock.sendall(self.outgoing.read())
                self.incoming.write(self.sock.recv(65536))
        self.sock.sendall(self.outgoing.read())

    def encrypt(self, data: bytes) -> bytes:
        self.tls.write(data)
        return self.outgoing.read()

    def recv_message(self) -> wire.Reply:
        """One whole wire message, decrypted; raises wire.ConnectionClosed at EOF."""
        plain = b""
        while len(plain) < 4 or len(plain) < int.from_bytes(plain[:4], "little"):
            try:
                plain += self.tls.read(65536)
                continue
            except ssl.SSLWantReadError:
                pass
            chunk = self.sock.recv(65536)
            if not chunk:
                raise wire.ConnectionClosed("EOF")
            self.incoming.write(chunk)
        length = int.from_bytes(plain[:4], "little")
        return wire.parse_message(wire.HEADER.unpack(plain[:wire.HEADER.size]), plain[wire.HEADER.size:length])

    def close(self) -> None:
        self.sock.close()


def test_sigterm_keeps_a_request_inside_a_tls_record(tls_remold, pki, direct_client, db_name):
    """SIGTERM while only part of a TLS record carrying a request has arrived:
    the bytes are inside OpenSSL, not yet decrypted, and remold still counts
    the request as arriving: it is read to its end and answered."""
    remold = tls_remold()
    client = RawTls(remold.address, pki.ca.cert)
    try:
        client.sock.sendall(client.encrypt(wire.op_msg({"ping": 1, "$db": "admin"})))
        assert client.recv_message().doc["ok"] == 1
        if remold.credentials is not None:  # a backend that requires authentication
            def run(doc, db):
                client.sock.sendall(client.encrypt(wire.op_msg({**doc, "$db": db})))
                return client.recv_message().doc
            c = remold.credentials
            scram.authenticate(run, c.user, c.password, c.source)
        record = client.encrypt(wire.op_msg({"insert": "tls_partial", "documents": [{"_id": 1}],
                                             "$db": db_name}))
        reply = assert_request_survives_sigterm(
            remold,
            lambda: client.sock.sendall(record[:30]),  # the record's header and part of its body
            lambda: client.sock.sendall(record[30:]),
            client.recv_message)
        assert reply.doc.get("ok") == 1 and reply.doc.get("n") == 1, reply.doc
        assert direct_client[db_name].tls_partial.count_documents({}) == 1
    finally:
        client.close()
        direct_client.drop_database(db_name)


def test_too_many_connections_over_tls(tls_remold, pki):
    remold = tls_remold(extra=("--max-connections", "1"))
    first = tls_socket(remold.address, pki.ca.cert)
    try:
        assert wire.command(first, {"ping": 1})["ok"] == 1
        second = tls_socket(remold.address, pki.ca.cert)
        try:
            reply = wire.roundtrip(second, wire.op_msg({"hello": 1, "$db": "admin"}))
            assert reply.is_error()
            assert "too many connections (limit 1)" in reply.doc["errmsg"]
            with pytest.raises(wire.ConnectionClosed):
                wire.recv_message(second, timeout=5)
        finally:
            second.close()
        assert wire.command(first, {"ping": 1})["ok"] == 1
    finally:
        first.close()


def test_bad_client_tls_files_stop_remold_at_start(backend, pki, tmp_path):
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    result = run_remold_expecting_failure(["--backend", backend.uri, "--tls-cert", str(garbage),
                                           "--tls-key", str(pki.server.key)])
    assert result.returncode == 2, result.stderr
    assert "config error: tls_cert" in result.stderr
    other = pki.new_server_cert("mismatch")
    result = run_remold_expecting_failure(["--backend", backend.uri, "--tls-cert",
                                           str(pki.server.cert), "--tls-key", str(other.key)])
    assert result.returncode == 2, result.stderr
    assert "does not match" in result.stderr


# --------------------------------------------------------------------------
# Backend side: a TLS terminator in front of the plain test backend.


class TlsTerminator:
    """Accepts TLS with ``cert`` on a loopback port and relays the bytes to
    the backend in the clear. With ``client_ca``, demands a client
    certificate signed by it."""

    def __init__(self, backend_address: tuple[str, int], cert: Cert,
                 client_ca: Optional[Path] = None):
        self.backend_address = backend_address
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(str(cert.cert), str(cert.key))
        if client_ca:
            self.context.verify_mode = ssl.CERT_REQUIRED
            self.context.load_verify_locations(str(client_ca))
        self.connections = 0
        self.loop = asyncio.new_event_loop()
        self.loop.set_exception_handler(lambda loop, context: None)  # failed handshakes are expected
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self.context), self.loop).result(10)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _handle(self, reader, writer):
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.backend_address)
        except OSError:
            writer.close()
            return

        async def pipe(source, sink):
            try:
                while data := await source.read(1 << 16):
                    sink.write(data)
                    await sink.drain()
            except (OSError, ssl.SSLError):
                pass
            finally:
                sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def uri(self, host: str = "127.0.0.1", **options: str) -> str:
        query = "&".join(f"{k}={v}" for k, v in {"tls": "true", **options}.items())
        return f"mongodb://{host}:{self.port}/?{query}"

    def close(self) -> None:
        async def stop():
            self.server.close()
            await self.server.wait_closed()

        try:
            asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


@pytest.fixture
def terminator(backend, pki):
    started: list[TlsTerminator] = []

    def start(cert: Optional[Cert] = None, client_ca: Optional[Path] = None) -> TlsTerminator:
        t = TlsTerminator((backend.host, backend.port), cert or pki.server, client_ca)
        started.append(t)
        return t

    yield start
    for t in started:
        t.close()


def plain_client(remold: Remold) -> pymongo.MongoClient:
    return pymongo.MongoClient(remold.uri, serverSelectionTimeoutMS=SELECTION_TIMEOUT_MS)


def assert_backend_unreachable(remold: Remold, log_fragment: str) -> None:
    with plain_client(remold) as client:
        with pytest.raises(PyMongoError):
            client.admin.command("ping")
    assert remold.alive()
    wait_for(lambda: log_fragment in remold.stderr(), what=f"{log_fragment!r} in the log")


def test_backend_tls_with_ca_file(private_remold, terminator, pki, direct_client, db_name):
    t = terminator()
    remold = private_remold(backend_uri=t.uri(tlsCAFile=str(pki.ca.cert)))
    try:
        with plain_client(remold) as client:
            insert_and_find(client, db_name, "over-tls")
            assert client[db_name].things.count_documents({}) == 1
        assert t.connections >= 1
        # What remold wrote through TLS is in the backend.
        assert direct_client[db_name].things.find_one({"_id": "over-tls"})["v"] == "over-tls"
    finally:
        direct_client.drop_database(db_name)


def test_backend_tls_with_a_host_name(private_remold, terminator, pki, direct_client, db_name):
    t = terminator()  # the certificate names localhost and 127.0.0.1
    remold = private_remold(backend_uri=t.uri(host="localhost", tlsCAFile=str(pki.ca.cert)))
    try:
        with plain_client(remold) as client:
            insert_and_find(client, db_name, "by-name")
    finally:
        direct_client.drop_database(db_name)


def test_backend_tls_wrong_ca_fails_cleanly(private_remold, terminator, pki):
    t = terminator()
    remold = private_remold(backend_uri=t.uri(tlsCAFile=str(pki.other_ca.cert)))
    assert_backend_unreachable(remold, "TLS handshake failed: certificate verify failed")
    assert f"checked against tlsCAFile {pki.other_ca.cert}" in remold.stderr()


def test_readyz_probes_the_backend_over_its_tls(private_remold, terminator, pki):
    """/readyz means a request would be served: its probe connects as real
    traffic does (the TLS handshake with the same CA) and sends an isMaster.
    A TCP connect alone reported ready with a CA that fails every request."""
    from test_metrics import http_get, start_observed, wait_for
    t = terminator()
    wrong, address = start_observed(private_remold, backend_uri=t.uri(tlsCAFile=str(pki.other_ca.cert)))
    status, body, _ = wait_for(lambda: (r := http_get(address, "/readyz"))[0] == 503 and
                               "unreachable" in r[1] and r, 10, "/readyz 503 with the wrong CA")
    assert body.startswith("not ready: backend unreachable: "), body
    assert "TLS handshake failed: certificate verify failed" in body, body
    assert body.count("\n") == 1, "one line"
    assert_backend_unreachable(wrong, "TLS handshake failed")  # and requests fail, as /readyz says

    right, address = start_observed(private_remold, backend_uri=t.uri(tlsCAFile=str(pki.ca.cert)))
    wait_for(lambda: http_get(address, "/readyz")[:2] == (200, "ready\n"), 10, "/readyz 200 with the right CA")
    with plain_client(right) as client:
        assert client.admin.command("ping")["ok"] == 1


def test_backend_tls_host_name_mismatch(private_remold, terminator, pki, direct_client, db_name):
    t = terminator(cert=pki.new_server_cert("elsewhere", sans=("DNS:db.elsewhere.invalid",)))
    strict = private_remold(backend_uri=t.uri(tlsCAFile=str(pki.ca.cert)))
    assert_backend_unreachable(strict, "mismatch")
    assert "tlsAllowInvalidHostnames" in strict.stderr()
    lenient = private_remold(backend_uri=t.uri(tlsCAFile=str(pki.ca.cert),
                                                tlsAllowInvalidHostnames="true"))
    try:
        with plain_client(lenient) as client:
            insert_and_find(client, db_name, "lenient")
    finally:
        direct_client.drop_database(db_name)


def test_backend_client_certificate(private_remold, terminator, pki, direct_client, db_name):
    t = terminator(client_ca=pki.ca.cert)
    without = private_remold(backend_uri=t.uri(tlsCAFile=str(pki.ca.cert)))
    with plain_client(without) as client:
        with pytest.raises(PyMongoError):
            client.admin.command("ping")
    assert without.alive()
    with_cert = private_remold(backend_uri=t.uri(tlsCAFile=str(pki.ca.cert),
                                                 tlsCertificateKeyFile=str(pki.client.combined)))
    try:
        with plain_client(with_cert) as client:
            insert_and_find(client, db_name, "client-cert")
    finally:
        direct_client.drop_database(db_name)


def test_backend_tls_to_a_plain_backend(private_remold, backend, pki):
    # The stand-in reads the ClientHello as a message header and waits for
    # the rest: the connect timeout ends the handshake.
    remold = private_remold(backend_uri=f"mongodb://{backend.host}:{backend.port}/?tls=true"
                                        f"&tlsCAFile={pki.ca.cert}&connectTimeoutMS=1000")
    assert_backend_unreachable(remold, "TLS handshake failed")


def test_bad_backend_tls_files_stop_remold_at_start(pki, tmp_path):
    result = run_remold_expecting_failure(
        ["--backend", f"mongodb://127.0.0.1:1/?tls=true&tlsCAFile={tmp_path / 'missing.pem'}"])
    assert result.returncode == 2, result.stderr
    assert "config error: backend: tlsCAFile" in result.stderr
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    result = run_remold_expecting_failure(
        ["--backend", f"mongodb://127.0.0.1:1/?tls=true&tlsCertificateKeyFile={garbage}"])
    assert result.returncode == 2, result.stderr
    assert "config error: backend: tlsCertificateKeyFile" in result.stderr
