"""Authentication pass-through: SCRAM conversations relayed to the backend.

remold holds no credentials: each client runs its own SCRAM-SHA-1 or
SCRAM-SHA-256 conversation with the backend (``saslStart``, ``saslContinue``,
and ``speculativeAuthenticate`` inside the handshake), and then acts as the
user it authenticated as. The backend here enforces SCRAM: FerretDB with its
new authentication (``auth_backend`` in conftest.py), with a remold of its
own at ``--log-level debug`` in front (``auth_target``).

FerretDB v1.24 has no roles (``createUser`` takes only ``roles: []``), so
"acts as itself" is shown by ``connectionStatus``, which names the user
authenticated on the backend connection.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass

import pymongo
import pytest
from bson.binary import Binary
from pymongo.errors import OperationFailure

import wire

AUTHENTICATION_FAILED = 18
UNAUTHORIZED = 13


@dataclass(frozen=True)
class User:
    name: str
    password: str
    mechanisms: tuple[str, ...]


@pytest.fixture(scope="module")
def users(auth_backend) -> dict[str, User]:
    """alice and bob: SCRAM-SHA-256 only; carol: SCRAM-SHA-1 and SCRAM-SHA-256."""
    made = {}
    for name, mechanisms in (("alice", ("SCRAM-SHA-256",)), ("bob", ("SCRAM-SHA-256",)),
                             ("carol", ("SCRAM-SHA-1", "SCRAM-SHA-256"))):
        # A distinctive password, so a search of the logs cannot match by chance.
        user = User(name, f"pw-{name}-{secrets.token_hex(10)}", mechanisms)
        auth_backend.create_user(user.name, user.password, user.mechanisms)
        made[name] = user
    return made


@pytest.fixture
def auth_client(auth_target):
    """Factory for MongoClients to the auth target; all closed after the test."""
    clients = []

    def make(user: User | None = None, password: str | None = None, **kwargs) -> pymongo.MongoClient:
        kwargs.setdefault("serverSelectionTimeoutMS", 10_000)
        if user is not None:
            kwargs.update(username=user.name, password=password or user.password, authSource="admin")
        c = pymongo.MongoClient(auth_target.uri, **kwargs)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


@pytest.fixture
def auth_db(auth_backend, db_name):
    """This test's database name on FerretDB; dropped afterwards."""
    yield db_name
    with auth_backend.admin_client() as admin:
        admin.drop_database(db_name)


def backend_log_count(auth_backend, text: str, at_least: int = 0, timeout: float = 5.0) -> int:
    """How often FerretDB has logged ``text``, waiting up to ``timeout`` for ``at_least``."""
    deadline = time.monotonic() + timeout
    while True:
        count = auth_backend.log().count(text)
        if count >= at_least or time.monotonic() > deadline:
            return count
        time.sleep(0.05)


def who(client: pymongo.MongoClient) -> list[dict]:
    return client.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"]


# --------------------------------------------------------------------------
# pymongo


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "default"])
def test_pymongo_scram_sha256_inserts_and_reads(auth_client, auth_backend, auth_db, users, mechanism):
    """With SCRAM-SHA-256 named, and with the default negotiation (saslSupportedMechs
    and speculativeAuthenticate in the handshake), pymongo authenticates through remold."""
    alice = users["alice"]
    passed_before = backend_log_count(auth_backend, "Speculative authentication passed")
    kwargs = {} if mechanism == "default" else {"authMechanism": mechanism}
    client = auth_client(alice, **kwargs)

    coll = client[auth_db]["readings"]
    coll.insert_many([{"_id": i, "v": i * i} for i in range(5)])
    assert list(coll.find({}, sort=[("_id", 1)])) == [{"_id": i, "v": i * i} for i in range(5)]
    assert who(client) == [{"user": "alice", "db": "admin"}]

    # The driver authenticated speculatively, in the handshake that remold rewrote:
    # the backend's speculativeAuthenticate reply reached it.
    assert backend_log_count(auth_backend, "Speculative authentication passed",
                             at_least=passed_before + 1) > passed_before


def test_hello_reply_keeps_sasl_supported_mechs(auth_target, users):
    """saslSupportedMechs survives remold's handshake rewrite: a SCRAM-SHA-256-only
    user is offered SCRAM-SHA-256 (the default negotiation depends on it)."""
    sock = wire.connect(*auth_target.address)
    try:
        for via in ("op_msg", "op_query"):
            cmd = {"isMaster": 1, "saslSupportedMechs": "admin.alice"}
            if via == "op_msg":
                reply = wire.command(sock, cmd)
            else:
                reply = wire.legacy_command(sock, cmd).doc
            assert reply.get("saslSupportedMechs") == ["SCRAM-SHA-256"], (via, reply)
        reply = wire.command(sock, {"hello": 1, "saslSupportedMechs": "admin.carol"})
        assert sorted(reply.get("saslSupportedMechs", [])) == ["SCRAM-SHA-1", "SCRAM-SHA-256"], reply
    finally:
        sock.close()


def test_pymongo_scram_sha1(auth_client, auth_db, users):
    carol = users["carol"]
    client = auth_client(carol, authMechanism="SCRAM-SHA-1")
    client[auth_db]["c"].insert_one({"_id": 1, "by": "carol"})
    assert client[auth_db]["c"].find_one({"_id": 1}) == {"_id": 1, "by": "carol"}
    assert who(client) == [{"user": "carol", "db": "admin"}]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "default"])
def test_pymongo_wrong_password_gets_backend_error_and_no_data(auth_client, auth_backend, auth_db,
                                                               users, mechanism):
    with auth_backend.admin_client() as admin:
        admin[auth_db]["secret"].insert_one({"_id": 1, "secret": "s"})

    kwargs = {} if mechanism == "default" else {"authMechanism": mechanism}
    client = auth_client(users["alice"], password="not-" + users["alice"].password, **kwargs)
    with pytest.raises(OperationFailure) as failure:
        client[auth_db]["secret"].find_one()
    assert failure.value.code == AUTHENTICATION_FAILED, failure.value.details
    assert failure.value.details.get("codeName") == "AuthenticationFailed"
    assert "Authentication failed" in str(failure.value)

    with pytest.raises(OperationFailure) as failure:
        client[auth_db]["secret"].insert_one({"_id": 2})
    assert failure.value.code == AUTHENTICATION_FAILED
    with auth_backend.admin_client() as admin:
        assert list(admin[auth_db]["secret"].find()) == [{"_id": 1, "secret": "s"}]


def test_unknown_user_refused(auth_client, auth_db):
    client = auth_client(User("mallory", "pw-mallory", ("SCRAM-SHA-256",)))
    with pytest.raises(OperationFailure) as failure:
        client[auth_db]["c"].find_one()
    assert failure.value.code == AUTHENTICATION_FAILED, failure.value.details


def test_unauthenticated_client_refused_by_backend(auth_client, auth_backend, auth_db):
    with auth_backend.admin_client() as admin:
        admin[auth_db]["secret"].insert_one({"_id": 1})
    client = auth_client()
    assert client.admin.command("ping")["ok"] == 1  # anonymous commands still work
    with pytest.raises(OperationFailure) as failure:
        client[auth_db]["secret"].find_one()
    assert failure.value.code == UNAUTHORIZED, failure.value.details
    with pytest.raises(OperationFailure) as failure:
        client[auth_db]["secret"].insert_one({"_id": 2})
    assert failure.value.code == UNAUTHORIZED
    assert who(client) == []


def test_authentication_does_not_outlive_its_client_connection(auth_client, auth_target, auth_db,
                                                              users):
    """A backend connection authenticated for one client is never handed to another:
    after alice's connections close, a new anonymous client on the same remold is
    still refused."""
    for _ in range(3):
        alice = auth_client(users["alice"], maxPoolSize=1)
        alice[auth_db]["c"].insert_one({})
        alice.close()
        anonymous = auth_client(maxPoolSize=1)
        with pytest.raises(OperationFailure) as failure:
            anonymous[auth_db]["c"].find_one()
        assert failure.value.code == UNAUTHORIZED
        assert who(anonymous) == []
        anonymous.close()


def test_two_users_on_one_remold_each_act_as_themselves(auth_client, auth_db, users):
    clients = {name: auth_client(users[name], maxPoolSize=2) for name in ("alice", "bob")}
    errors: list[BaseException] = []

    def work(name: str) -> None:
        try:
            client = clients[name]
            for i in range(20):
                assert who(client) == [{"user": name, "db": "admin"}]
                client[auth_db]["log"].insert_one({"by": name, "i": i})
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(name,)) for name in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    for name, client in clients.items():
        assert client[auth_db]["log"].count_documents({"by": name}) == 20
        assert who(client) == [{"user": name, "db": "admin"}]


# --------------------------------------------------------------------------
# Raw SCRAM conversations: each relay shown on one remold connection.


class Scram:
    """The client side of RFC 5802 SCRAM (SHA-1 as MongoDB uses it, or SHA-256)."""

    def __init__(self, mechanism: str, user: str, password: str):
        self.mechanism = mechanism
        self.hash = hashlib.sha256 if mechanism == "SCRAM-SHA-256" else hashlib.sha1
        if mechanism == "SCRAM-SHA-1":  # MongoDB hashes the password first for SHA-1
            password = hashlib.md5(f"{user}:mongo:{password}".encode()).hexdigest()
        self.password = password.encode()
        self.nonce = base64.b64encode(secrets.token_bytes(24)).decode()
        self.first_bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={self.nonce}"
        self.auth_message = b""
        self.salted = b""

    def first(self) -> Binary:
        return Binary(("n,," + self.first_bare).encode())

    def final(self, server_first: bytes) -> Binary:
        fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
        assert fields["r"].startswith(self.nonce), server_first
        self.salted = hashlib.pbkdf2_hmac(self.hash().name, self.password,
                                          base64.b64decode(fields["s"]), int(fields["i"]))
        without_proof = f"c=biws,r={fields['r']}"
        self.auth_message = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        client_key = hmac.digest(self.salted, b"Client Key", self.hash)
        signature = hmac.digest(self.hash(client_key).digest(), self.auth_message, self.hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        return Binary(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())

    def verify(self, server_final: bytes) -> None:
        server_key = hmac.digest(self.salted, b"Server Key", self.hash)
        expected = base64.b64encode(hmac.digest(server_key, self.auth_message, self.hash)).decode()
        assert server_final.decode() == f"v={expected}", "server signature does not verify"


def sasl_finish(sock, scram: Scram, conversation_id, server_first: bytes) -> dict:
    """saslContinue to the end; returns the last reply (or the first error)."""
    reply = wire.command(sock, {"saslContinue": 1, "conversationId": conversation_id,
                                "payload": scram.final(server_first)})
    if reply.get("ok") != 1:
        return reply
    scram.verify(reply["payload"])
    for _ in range(3):
        if reply.get("done"):
            return reply
        reply = wire.command(sock, {"saslContinue": 1, "conversationId": conversation_id,
                                    "payload": Binary(b"")})
        if reply.get("ok") != 1:
            return reply
    raise AssertionError(f"conversation not done: {reply}")


def assert_acts_as(sock, user: str, db: str) -> None:
    status = wire.command(sock, {"connectionStatus": 1})
    assert status["authInfo"]["authenticatedUsers"] == [{"user": user, "db": "admin"}], status
    reply = wire.command(sock, {"insert": "raw", "documents": [{"by": user}]}, db=db)
    assert reply.get("ok") == 1 and reply.get("n") == 1, reply
    reply = wire.command(sock, {"find": "raw", "filter": {"by": user}}, db=db)
    assert reply.get("ok") == 1 and reply["cursor"]["firstBatch"], reply


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-1"])
def test_raw_speculative_authenticate_in_hello(auth_target, auth_db, users, mechanism):
    """speculativeAuthenticate in an OP_QUERY isMaster: the backend's first SCRAM
    message comes back inside remold's rewritten handshake reply, and saslContinue
    on the same connection finishes the conversation."""
    carol = users["carol"]
    scram = Scram(mechanism, carol.name, carol.password)
    sock = wire.connect(*auth_target.address)
    try:
        hello = wire.legacy_command(sock, {
            "isMaster": 1, "client": {"application": {"name": "remold-e2e-auth"}},
            "saslSupportedMechs": "admin.carol",
            "speculativeAuthenticate": {"saslStart": 1, "mechanism": mechanism, "db": "admin",
                                        "payload": scram.first(),
                                        "options": {"skipEmptyExchange": True}},
        }).doc
        assert hello.get("ok") == 1, hello
        if auth_target.is_proxy:
            assert hello.get("msg") == "isdbgrid", "not remold's rewritten handshake"
        speculative = hello.get("speculativeAuthenticate")
        assert speculative and speculative.get("payload"), f"speculativeAuthenticate dropped: {hello}"
        reply = sasl_finish(sock, scram, speculative["conversationId"], speculative["payload"])
        assert reply.get("ok") == 1, reply
        assert_acts_as(sock, "carol", auth_db)
    finally:
        sock.close()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-1"])
def test_raw_sasl_start_and_continue(auth_target, auth_db, users, mechanism):
    carol = users["carol"]
    scram = Scram(mechanism, carol.name, carol.password)
    sock = wire.connect(*auth_target.address)
    try:
        assert wire.command(sock, {"hello": 1})["ok"] == 1
        start = wire.command(sock, {"saslStart": 1, "mechanism": mechanism, "payload": scram.first(),
                                    "options": {"skipEmptyExchange": True}})
        assert start.get("ok") == 1 and not start.get("done"), start
        reply = sasl_finish(sock, scram, start["conversationId"], start["payload"])
        assert reply.get("ok") == 1, reply
        assert_acts_as(sock, "carol", auth_db)
    finally:
        sock.close()


def test_raw_wrong_proof_gets_backend_error_and_no_data(auth_target, auth_backend, auth_db, users):
    with auth_backend.admin_client() as admin:
        admin[auth_db]["raw"].insert_one({"secret": 1})
    scram = Scram("SCRAM-SHA-256", "alice", "not-" + users["alice"].password)
    sock = wire.connect(*auth_target.address)
    try:
        start = wire.command(sock, {"saslStart": 1, "mechanism": "SCRAM-SHA-256",
                                    "payload": scram.first()})
        assert start.get("ok") == 1, start
        reply = wire.command(sock, {"saslContinue": 1, "conversationId": start["conversationId"],
                                    "payload": scram.final(start["payload"])})
        assert reply.get("ok") == 0 and reply.get("code") == AUTHENTICATION_FAILED, reply
        assert reply.get("errmsg") == "Authentication failed.", reply
        found = wire.command(sock, {"find": "raw", "filter": {}}, db=auth_db)
        assert found.get("ok") == 0 and found.get("code") == UNAUTHORIZED, found
        assert "cursor" not in found
    finally:
        sock.close()


# --------------------------------------------------------------------------
# remold's own log


def test_remold_debug_log_never_contains_a_password(auth_target, auth_client, auth_backend, auth_db,
                                                     users, proxy_only_auth):
    remold = auth_target.remold
    wrong = "not-" + users["bob"].password
    for name, mechanism in (("alice", "SCRAM-SHA-256"), ("carol", "SCRAM-SHA-1"), ("bob", None)):
        kwargs = {"authMechanism": mechanism} if mechanism else {}
        client = auth_client(users[name], **kwargs)
        client[auth_db]["c"].insert_one({"by": name})
    with pytest.raises(OperationFailure):
        auth_client(users["bob"], password=wrong)[auth_db]["c"].find_one()

    log = remold.stderr()
    # The log did record these sessions (it is not empty for some other reason).
    assert "session" in log, f"remold logged no session:\n{log[:2000]}"
    for secret in [u.password for u in users.values()] + [wrong, auth_backend.admin_password]:
        assert secret not in log, "a password appears in remold's log"


@pytest.fixture
def proxy_only_auth(auth_target) -> None:
    if not auth_target.is_proxy:
        pytest.skip("reads remold's own log; REMOLD_TEST_NO_PROXY=1")
