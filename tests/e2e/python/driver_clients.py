"""The clients of the driver matrix: where each is installed, which release
the project pins, and how to run its scenario program.

Every client is installed by scripts/install-deps.sh from a pin in the
project's files (tests/e2e/node/package.json, tests/e2e/go/go.mod,
tests/e2e/java/pom.xml). ``locate(name)`` checks that what is installed is
that pin, built from the current sources, and fails the test (never skips)
saying to run scripts/install-deps.sh when it is not.

``Client.run(plan)`` runs the client's scenario program with the plan
({uri, db, compressed}) and returns its stdout.
"""

from __future__ import annotations

import json
import re
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import SOURCE_DIR
from test_node_driver import INSTALL_HINT, NODE_DIR, node_binary

GO_DIR = SOURCE_DIR / "tests" / "e2e" / "go"
JAVA_DIR = SOURCE_DIR / "tests" / "e2e" / "java"
RUN_TIMEOUT = 180


@dataclass(frozen=True)
class Client:
    name: str
    version: str                  # the pinned release, as installed
    argv: tuple[str, ...]         # the plan JSON is appended, unless plan_env names a variable
    cwd: Path
    plan_env: str = ""
    env: dict = field(default_factory=dict)
    reports_compressor: bool = False  # prints driverCompressors: what its handshake negotiated

    def run(self, plan: dict, env: dict) -> str:
        text = json.dumps(plan)
        argv = list(self.argv) + ([] if self.plan_env else [text])
        run_env = {**env, **self.env, **({self.plan_env: text} if self.plan_env else {})}
        done = subprocess.run(argv, cwd=self.cwd, env=run_env, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT)
        assert done.returncode == 0, (f"{self.name} scenario exited {done.returncode}:\n"
                                      f"stdout:\n{done.stdout[-4000:]}\n"
                                      f"stderr:\n{done.stderr[-4000:]}")
        return done.stdout


def _fail(what: str) -> None:
    pytest.fail(f"{what}: {INSTALL_HINT}")


def _require_fresh(target: Path, sources: list[Path]) -> None:
    """``target`` exists and is no older than any of ``sources``."""
    if not target.exists():
        _fail(f"{target} is not built")
    stale = [s for s in sources if s.stat().st_mtime > target.stat().st_mtime]
    if stale:
        _fail(f"{target} is older than {', '.join(str(s) for s in stale)}")


def _npm_pin(package: str) -> str:
    return json.loads((NODE_DIR / "package.json").read_text())["dependencies"][package]


def _npm_installed(package: str) -> str:
    manifest = NODE_DIR / "node_modules" / package / "package.json"
    if not manifest.is_file():
        _fail(f"npm package {package} is not installed in {NODE_DIR}/node_modules")
    return json.loads(manifest.read_text())["version"]


def node_driver() -> Client:
    node = node_binary()  # fails unless the pinned mongodb is installed
    return Client("node-driver", _npm_pin("mongodb"), (node, str(NODE_DIR / "scenario.mjs")),
                  NODE_DIR)


def mongosh() -> Client:
    node = node_binary()
    pinned, installed = _npm_pin("mongosh"), _npm_installed("mongosh")
    if installed != pinned:
        _fail(f"mongosh {installed} installed, {pinned} pinned")
    # The driver's snappy and zstd compressors are optional npm packages; the
    # driver says nothing about a missing one until a connection asks for it.
    check = subprocess.run([node, "-e", "require('snappy'); require('@mongodb-js/zstd')"],
                           cwd=NODE_DIR, capture_output=True, text=True)
    if check.returncode != 0:
        _fail(f"the driver's compression modules do not load:\n{check.stderr}")
    script = NODE_DIR / "node_modules" / "mongosh" / "bin" / "mongosh.js"
    # mongosh phones home unless told not to: telemetry off (mongosh's own
    # switch for tests), and --quiet also skips its check for a newer release.
    return Client("mongosh", pinned,
                  (node, str(script), "--nodb", "--norc", "--quiet", "--file",
                   str(NODE_DIR / "scenario-mongosh.js")),
                  NODE_DIR, plan_env="REMOLD_DRIVER_PLAN",
                  env={"MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING": "1"})


def go_driver() -> Client:
    go_mod = (GO_DIR / "go.mod").read_text()
    match = re.search(r"^require go\.mongodb\.org/mongo-driver/v2 (v\S+)$", go_mod, re.M)
    assert match, "tests/e2e/go/go.mod pins no go.mongodb.org/mongo-driver/v2"
    binary = GO_DIR / "bin" / "scenario"
    _require_fresh(binary, sorted(GO_DIR.glob("*.go")) + [GO_DIR / "go.mod", GO_DIR / "go.sum"])
    return Client("go-driver", match.group(1), (str(binary),), GO_DIR)


def java_sync() -> Client:
    pom = ET.parse(JAVA_DIR / "pom.xml")
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    versions = {d.findtext("m:artifactId", namespaces=ns): d.findtext("m:version", namespaces=ns)
                for d in pom.getroot().iterfind("m:dependencies/m:dependency", ns)}
    version = versions["mongodb-driver-sync"]
    if not (JAVA_DIR / "lib" / f"mongodb-driver-sync-{version}.jar").is_file():
        _fail(f"mongodb-driver-sync {version} is not in {JAVA_DIR}/lib")
    _require_fresh(JAVA_DIR / "classes" / ".built",
                   sorted((JAVA_DIR / "src").glob("*.java")) + [JAVA_DIR / "pom.xml"])
    return Client("java-sync", version, ("java", "-cp", "lib/*:classes", "Scenario"), JAVA_DIR,
                  reports_compressor=True)


CLIENTS = {"node-driver": node_driver, "mongosh": mongosh, "go-driver": go_driver,
           "java-sync": java_sync}


def locate(name: str) -> Client:
    return CLIENTS[name]()
