"""The clients of the driver matrix: where each is installed, which release
the project pins, and how to run its scenario program.

Each client comes in two version sets, which run the same scenario programs:

- ``pinned``, for the stand-in (mongo-java-server, wire version 8 = MongoDB
  4.2) and an external backend (REMOLD_TEST_BACKEND_URI): the newest releases
  that still speak to MongoDB 4.2 (tests/e2e/node/package.json,
  tests/e2e/go/go.mod, tests/e2e/java/pom.xml, the suite's own pymongo).
- ``latest``, for DocumentDB (wire version 21): the newest release of each
  (tests/e2e/node-latest/package.json, tests/e2e/go/go.latest.mod, the
  ``latest`` profile of tests/e2e/java/pom.xml,
  tests/e2e/pymongo/requirements-latest.txt).

Every client is installed by scripts/install-deps.sh from those pins.
``locate(name)`` checks that what is installed is the pin, built from the
current sources, and fails the test (never skips) saying to run
scripts/install-deps.sh when it is not.

``Client.run(plan)`` runs the client's scenario program with the plan
({uri, db, compressed}) and returns its stdout.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import pymongo
import pytest

from conftest import BACKEND_KIND_ENV, BACKEND_URI_ENV, SOURCE_DIR
from test_node_driver import INSTALL_HINT, NODE_DIR

E2E_DIR = SOURCE_DIR / "tests" / "e2e"
NODE_LATEST_DIR = E2E_DIR / "node-latest"
GO_DIR = E2E_DIR / "go"
JAVA_DIR = E2E_DIR / "java"
PYMONGO_DIR = E2E_DIR / "pymongo"
RUN_TIMEOUT = 180

# The version set of this session's backend (see the module's docstring).
VERSION_SET = "latest" if BACKEND_KIND_ENV == "documentdb" and not BACKEND_URI_ENV else "pinned"


@dataclass(frozen=True)
class Client:
    name: str
    version: str                  # the release pinned for this version set, as installed
    argv: tuple[str, ...]         # the plan JSON is appended, unless plan_env names a variable
    cwd: Path
    plan_env: str = ""
    env: dict = field(default_factory=dict)
    reports_compressor: bool = False  # prints driverCompressors: what its handshake negotiated
    detail: str = ""              # what else its report names (mongosh: the driver it runs on)

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}" + (f" ({self.detail})" if self.detail else "")

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


def _latest(version_set: str) -> bool:
    assert version_set in ("pinned", "latest"), version_set
    return version_set == "latest"


def _node_dir(version_set: str) -> Path:
    return NODE_LATEST_DIR if _latest(version_set) else NODE_DIR


def _npm_pin(package: str, version_set: str) -> str:
    return json.loads((_node_dir(version_set) / "package.json").read_text())["dependencies"][package]


def _npm_installed(package: str, version_set: str) -> str:
    manifest = _node_dir(version_set) / "node_modules" / package / "package.json"
    if not manifest.is_file():
        _fail(f"npm package {package} is not installed in {_node_dir(version_set)}/node_modules")
    return json.loads(manifest.read_text())["version"]


def _node(version_set: str) -> tuple[str, tuple[str, ...]]:
    """The node that install-deps.sh chose, with this set's pinned driver
    installed (or fail), and the flags that run a scenario file of this
    set's directory against that directory's node_modules: node-latest's
    scenario files are symlinks to tests/e2e/node's."""
    directory = _node_dir(version_set)
    found = subprocess.run([str(NODE_DIR / "find-node.sh"), str(directory)],
                           capture_output=True, text=True)
    if found.returncode != 0:
        _fail(f"no Node.js that the driver accepts (see engines in {directory}/package.json)\n"
              f"{found.stderr}")
    pinned, installed = _npm_pin("mongodb", version_set), _npm_installed("mongodb", version_set)
    if installed != pinned:
        _fail(f"MongoDB Node.js driver {installed} installed in {directory}, {pinned} pinned")
    flags = ("--preserve-symlinks", "--preserve-symlinks-main") if _latest(version_set) else ()
    return found.stdout.strip(), flags


def node_driver(version_set: str) -> Client:
    node, flags = _node(version_set)
    directory = _node_dir(version_set)
    return Client("node-driver", _npm_pin("mongodb", version_set),
                  (node, *flags, str(directory / "scenario.mjs")), directory)


def mongosh(version_set: str) -> Client:
    node, flags = _node(version_set)
    directory = _node_dir(version_set)
    pinned, installed = _npm_pin("mongosh", version_set), _npm_installed("mongosh", version_set)
    if installed != pinned:
        _fail(f"mongosh {installed} installed in {directory}, {pinned} pinned")
    # The driver's snappy and zstd compressors are optional npm packages; the
    # driver says nothing about a missing one until a connection asks for it.
    check = subprocess.run([node, "-e", "require('snappy'); require('@mongodb-js/zstd')"],
                           cwd=directory, capture_output=True, text=True)
    if check.returncode != 0:
        _fail(f"the driver's compression modules do not load in {directory}:\n{check.stderr}")
    script = directory / "node_modules" / "mongosh" / "bin" / "mongosh.js"
    # mongosh phones home unless told not to: telemetry off (mongosh's own
    # switch for tests), and --quiet also skips its check for a newer release.
    # It runs on the one driver its directory pins (package.json's override).
    return Client("mongosh", pinned,
                  (node, *flags, str(script), "--nodb", "--norc", "--quiet", "--file",
                   str(directory / "scenario-mongosh.js")),
                  directory, plan_env="REMOLD_DRIVER_PLAN",
                  env={"MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING": "1"},
                  detail=f"on mongodb {_npm_installed('mongodb', version_set)}")


def _go_mod(version_set: str) -> str:
    return "go.latest.mod" if _latest(version_set) else "go.mod"


def _go_pin(version_set: str) -> str:
    go_mod = _go_mod(version_set)
    match = re.search(r"^require go\.mongodb\.org/mongo-driver/v2 (v\S+)$",
                      (GO_DIR / go_mod).read_text(), re.M)
    assert match, f"tests/e2e/go/{go_mod} pins no go.mongodb.org/mongo-driver/v2"
    return match.group(1)


def go_driver(version_set: str) -> Client:
    go_mod = _go_mod(version_set)
    go_sum = go_mod.removesuffix(".mod") + ".sum"
    binary = GO_DIR / "bin" / ("scenario-latest" if _latest(version_set) else "scenario")
    _require_fresh(binary, sorted(GO_DIR.glob("*.go")) + [GO_DIR / go_mod, GO_DIR / go_sum])
    return Client("go-driver", _go_pin(version_set), (str(binary),), GO_DIR)


def _pom_versions(version_set: str) -> dict[str, str]:
    """The pom's properties as the version set sees them: the defaults, and
    for ``latest`` the ``latest`` profile's over them."""
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    root = ET.parse(JAVA_DIR / "pom.xml").getroot()

    def properties(element) -> dict[str, str]:
        found = element.find("m:properties", ns)
        return {p.tag.split("}", 1)[1]: p.text for p in (found if found is not None else [])}

    props = properties(root)
    if _latest(version_set):
        profile = [p for p in root.iterfind("m:profiles/m:profile", ns)
                   if p.findtext("m:id", namespaces=ns) == "latest"]
        assert profile, "tests/e2e/java/pom.xml has no profile latest"
        props.update(properties(profile[0]))
    versions = {}
    for d in root.iterfind("m:dependencies/m:dependency", ns):
        version = d.findtext("m:version", namespaces=ns)
        versions[d.findtext("m:artifactId", namespaces=ns)] = re.sub(
            r"\$\{([^}]+)\}", lambda m: props[m.group(1)], version)
    return versions


def java_sync(version_set: str) -> Client:
    lib, classes = ("lib-latest", "classes-latest") if _latest(version_set) else ("lib", "classes")
    version = _pom_versions(version_set)["mongodb-driver-sync"]
    if not (JAVA_DIR / lib / f"mongodb-driver-sync-{version}.jar").is_file():
        _fail(f"mongodb-driver-sync {version} is not in {JAVA_DIR}/{lib}")
    _require_fresh(JAVA_DIR / classes / ".built",
                   sorted((JAVA_DIR / "src").glob("*.java")) + [JAVA_DIR / "pom.xml"])
    return Client("java-sync", version, ("java", "-cp", f"{lib}/*:{classes}", "Scenario"),
                  JAVA_DIR, reports_compressor=True)


def _pymongo_latest_pins() -> dict[str, str]:
    """requirements-latest.txt: every package of the newest pymongo's venv."""
    lines = (PYMONGO_DIR / "requirements-latest.txt").read_text().splitlines()
    pins = dict(line.split("==", 1) for line in lines if line and not line.startswith("#"))
    assert "pymongo" in pins, "tests/e2e/pymongo/requirements-latest.txt pins no pymongo"
    return pins


def pymongo_client(version_set: str) -> Client:
    """pinned: the suite's own interpreter and pymongo; latest: the venv
    beside scenario.py with requirements-latest.txt installed."""
    script = str(PYMONGO_DIR / "scenario.py")
    if not _latest(version_set):
        return Client("pymongo", pymongo.version, (sys.executable, script), PYMONGO_DIR)
    python = PYMONGO_DIR / ".venv-latest" / "bin" / "python"
    if not python.is_file():
        _fail(f"{python} does not exist")
    pins = _pymongo_latest_pins()
    check = subprocess.run(
        [str(python), "-c", "import json, sys; from importlib.metadata import version\n"
         "def v(p):\n try: return version(p)\n except Exception: return None\n"
         "print(json.dumps({p: v(p) for p in sys.argv[1:]}))", *pins],
        capture_output=True, text=True)
    installed = json.loads(check.stdout) if check.returncode == 0 else {}
    wrong = [f"{p} {installed.get(p)} installed, {v} pinned" for p, v in pins.items()
             if installed.get(p) != v]
    if wrong:
        _fail(f"{python.parent.parent}: {'; '.join(wrong)} {check.stderr}")
    return Client("pymongo", pins["pymongo"], (str(python), script), PYMONGO_DIR)


CLIENTS = {"node-driver": node_driver, "mongosh": mongosh, "go-driver": go_driver,
           "java-sync": java_sync, "pymongo": pymongo_client}


def pinned_version(name: str, version_set: str = VERSION_SET) -> str:
    """The release of ``name`` that ``version_set`` pins, read from the
    project's files (nothing installed needed): for test ids."""
    if name in ("node-driver", "mongosh"):
        return _npm_pin("mongodb" if name == "node-driver" else "mongosh", version_set)
    if name == "go-driver":
        return _go_pin(version_set)
    if name == "java-sync":
        return _pom_versions(version_set)["mongodb-driver-sync"]
    return _pymongo_latest_pins()["pymongo"] if _latest(version_set) else pymongo.version


def locate(name: str, version_set: str = VERSION_SET) -> Client:
    return CLIENTS[name](version_set)
