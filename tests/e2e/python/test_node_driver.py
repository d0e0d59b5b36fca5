"""remold's refusals as a Node.js application sees them.

The official Node.js driver (pinned in tests/e2e/node/package.json, installed
by scripts/install-deps.sh) runs tests/e2e/node/refusal.mjs through a remold
serving a bucket rule, with a plain connection string, so retryWrites is the
driver's default (true). That driver, like mongosh, swaps any code-20
(IllegalOperation) error on a write for its own "This MongoDB deployment does
not support retryable writes" text, so remold's refusal codes must be ones it
passes on unchanged, and this test checks remold's own message reaches the
application.

Never skipped: without node or the driver the test fails and says how to
install them.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import SOURCE_DIR

NODE_DIR = SOURCE_DIR / "tests" / "e2e" / "node"
INSTALL_HINT = "run scripts/install-deps.sh"
RETRYABLE_WRITES_TEXT = "does not support retryable writes"


def node_binary() -> str:
    """The node install-deps.sh chose, with the pinned driver installed, or fail."""
    found = subprocess.run([str(NODE_DIR / "find-node.sh")], capture_output=True, text=True)
    if found.returncode != 0:
        pytest.fail(f"no Node.js that the driver accepts (see engines in {NODE_DIR}/package.json): "
                    f"{INSTALL_HINT}\n{found.stderr}")
    pinned = json.loads((NODE_DIR / "package.json").read_text())["dependencies"]["mongodb"]
    installed = NODE_DIR / "node_modules" / "mongodb" / "package.json"
    if not installed.is_file():
        pytest.fail(f"the MongoDB Node.js driver is not installed in {NODE_DIR}/node_modules: "
                    f"{INSTALL_HINT}")
    version = json.loads(installed.read_text())["version"]
    if version != pinned:
        pytest.fail(f"MongoDB Node.js driver {version} installed, {pinned} pinned: {INSTALL_HINT}")
    return found.stdout.strip()


@pytest.fixture
def node_db(db_name, direct_client):
    """The test's own database name; dropped on the backend afterwards."""
    yield db_name
    direct_client.drop_database(db_name)


def test_node_driver_sees_remolds_refusals(node_db, tmp_path, private_remold, direct_client):
    node = node_binary()
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "readings.yaml").write_text("\n".join([
        f"namespace: {node_db}.readings",
        "pattern: bucket",
        "bucket:",
        "  collection: readings_buckets",
        "  meta: [sensor]",
        "  time: at",
        "  span: 1h",
        "  summaries:",
        "    temp: [sum, min, max]",
    ]) + "\n")
    remold = private_remold(extra_args=("--rules", str(rules)))
    # No options but the credentials' (a backend that requires them): the
    # driver's defaults, retryWrites among them.
    assert "retryWrites" not in remold.uri

    run = subprocess.run([node, str(NODE_DIR / "refusal.mjs"), remold.uri, node_db, "readings",
                          "plain"], cwd=NODE_DIR, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"refusal.mjs exited {run.returncode}:\n{run.stderr}"
    seen = json.loads(run.stdout)
    everything = json.dumps(seen, indent=2)
    assert seen["retryWrites"] is True, everything

    # The ordinary path works through remold: a collection with no rule, and
    # an insert + find the bucket rule rewrites.
    assert seen["plainInsertFind"] == {"ok": True, "found": [{"name": "plain", "n": 1}]}, everything
    assert seen["bucketInsertFind"] == {"ok": True, "found": [{"sensor": "s1", "temp": 21.5}]}, \
        everything
    assert direct_client[node_db]["readings_buckets"].count_documents({}) == 1

    # Writes on individual readings: refused with remold's reason, unchanged.
    prefix = f"bucket rule 'readings' for {node_db}.readings: "
    for step, command in (("updateOne", "update"), ("findOneAndUpdate", "findAndModify")):
        error = seen[step]
        assert error["ok"] is False, f"{step} was not refused:\n{everything}"
        assert RETRYABLE_WRITES_TEXT not in error["message"], \
            f"{step}: the driver replaced remold's message (code 20?):\n{everything}"
        assert error["message"].startswith(prefix + command + " of individual readings is not "
                                           "supported"), f"{step}:\n{everything}"
        assert error["code"] == 72 and error["codeName"] == "InvalidOptions", \
            f"{step}:\n{everything}"

    # A command the bucket rule does not support (createIndexes, which the
    # driver also counts as a write).
    error = seen["createIndex"]
    assert error["ok"] is False, f"createIndex was not refused:\n{everything}"
    assert RETRYABLE_WRITES_TEXT not in error["message"], everything
    assert error["message"].startswith(prefix + "command 'createIndexes' is not supported"), \
        everything
    assert error["code"] == 115 and error["codeName"] == "CommandNotSupported", everything

    # Nothing was changed by the refused operations.
    assert seen["afterRefusals"] == {"ok": True, "found": [{"sensor": "s1", "temp": 21.5}]}, \
        everything
