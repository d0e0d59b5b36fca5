"""SCRAM-SHA-256 over a raw wire connection (RFC 5802, RFC 7677), for the
tests that speak the wire protocol by hand (wire.py) to a backend that
requires authentication.

Only what the tests need: ASCII user names and passwords (no SASLprep), the
conversation of MongoDB's Authentication spec (saslStart with
``options: {skipEmptyExchange: true}``, saslContinue until ``done``).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
from typing import Callable

from bson.binary import Binary


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b))


def _fields(message: bytes) -> dict[str, str]:
    return dict(part.split("=", 1) for part in message.decode().split(","))


def _escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def authenticate(run_command: Callable[[dict, str], dict], user: str, password: str,
                 source: str = "admin") -> None:
    """Runs the conversation with ``run_command(doc, db)``; raises on failure."""
    nonce = base64.b64encode(os.urandom(24)).decode()
    first_bare = f"n={_escape(user)},r={nonce}"
    reply = run_command({"saslStart": 1, "mechanism": "SCRAM-SHA-256",
                         "payload": Binary(b"n,," + first_bare.encode()),
                         "options": {"skipEmptyExchange": True}}, source)
    _check(reply, "saslStart")
    server_first = bytes(reply["payload"])
    fields = _fields(server_first)
    if not fields["r"].startswith(nonce):
        raise RuntimeError("SCRAM: the server's nonce does not extend ours")
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    stored_key = hashlib.sha256(client_key).digest()
    final_bare = f"c=biws,r={fields['r']}"
    auth_message = f"{first_bare},{server_first.decode()},{final_bare}".encode()
    proof = _xor(client_key, hmac.digest(stored_key, auth_message, "sha256"))
    final = f"{final_bare},p={base64.b64encode(proof).decode()}"
    reply = run_command({"saslContinue": 1, "conversationId": reply["conversationId"],
                         "payload": Binary(final.encode())}, source)
    _check(reply, "saslContinue")
    server_key = hmac.digest(salted, b"Server Key", "sha256")
    expected = base64.b64encode(hmac.digest(server_key, auth_message, "sha256")).decode()
    if _fields(bytes(reply["payload"])).get("v") != expected:
        raise RuntimeError("SCRAM: the server's signature is wrong")
    while not reply.get("done"):
        reply = run_command({"saslContinue": 1, "conversationId": reply["conversationId"],
                             "payload": Binary(b"")}, source)
        _check(reply, "saslContinue")


def _check(reply: dict, step: str) -> None:
    if reply.get("ok") != 1:
        raise RuntimeError(f"SCRAM {step} failed: {reply.get('errmsg')} (code {reply.get('code')})")
