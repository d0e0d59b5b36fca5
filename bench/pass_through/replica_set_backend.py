"""A stand-in replica set for bench/pass_through/replica_set_run.sh: tests/e2e/python's
ShimReplicaSet (three mongo-java-server stand-ins, each behind a shim that
answers hello as a member). Prints "primary HOST:PORT" and "uri URI", then
serves until stdin reaches EOF."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "e2e" / "python"))

from replica_set import ShimReplicaSet  # noqa: E402

with ShimReplicaSet(3) as rs:
    print(f"primary {rs.primary.address}", flush=True)
    print(f"uri {rs.uri(heartbeatFrequencyMS=500)}", flush=True)
    sys.stdin.read()
