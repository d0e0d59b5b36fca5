"""The soak's bucket workload (bench/soak/soak.sh): `soak.readings`, stored by the
bucket rule in `soak.readings_buckets` (per sensor and hour, max_count 50 or
60 as reloads alternate it). Each client is one sensor ("cNN") reporting a
reading a minute from T0 (`_id` "cNN-rMINUTE", `temp` a function of the
minute): one per insert, or ten per insert_many (ordered or not). It reads
back one of its hours (find: every reading once, with its temp; count;
the hour's count and average through a $group the buckets answer) and,
past 4 hours, deletes its oldest whole hour. At the end every reading is
checked through remold and in the buckets on the backend directly: present
once if acknowledged, absent if its hour's delete was, never twice; and
every bucket's count and sum agree with its readings.
"""
from __future__ import annotations

import datetime as dt
import math

from soak_ledger import ABSENT, Ledger, Problem, compare

T0 = dt.datetime(2024, 1, 1)
HOUR = dt.timedelta(hours=1)
LIVE_HOURS = 4
PRESENT = "present"


def temp(minute: int) -> float:
    return (minute * 7 % 400) / 10 - 5


def minute_of(key: str) -> int:
    return int(key.rsplit("-r", 1)[1])


class Readings:
    name = "readings"
    weight = 3

    def __init__(self) -> None:
        self.ledger = Ledger()
        self.hours: dict[int, dict[int, list]] = {}   # client -> hour -> its reading keys
        self.minute: dict[int, int] = {}

    def setup(self, db) -> None:
        pass

    def _new(self, client, n: int) -> list[dict]:
        minute = self.minute.get(client.index, 0)
        self.minute[client.index] = minute + n
        hours = self.hours.setdefault(client.index, {})
        docs = []
        for m in range(minute, minute + n):
            key = f"{client.tag}-r{m}"
            hours.setdefault(m // 60, []).append(key)
            docs.append({"_id": key, "sensor": client.tag, "at": T0 + dt.timedelta(minutes=m), "temp": temp(m)})
        return docs

    def _bounds(self, keys) -> tuple[int, int]:
        certain = sum(1 for k in keys if ABSENT not in self.ledger.states(k))
        possible = sum(1 for k in keys if self.ledger.states(k) != {ABSENT})
        return certain, possible

    def step(self, client) -> None:
        coll = client.db.readings
        hours = self.hours.get(client.index, {})
        roll = client.rng.random()
        if not hours or roll < 0.45:
            many = client.rng.random() < 0.4
            docs = self._new(client, 10 if many else 1)
            if many:
                ordered = client.rng.random() < 0.5
                out = client.attempt("readings.insert_many", lambda: coll.insert_many(docs, ordered=ordered))
            else:
                out = client.attempt("readings.insert_one", lambda: coll.insert_one(docs[0]))
            for doc in docs:
                (self.ledger.acked if out.ok else self.ledger.unknown)(doc["_id"], PRESENT)
            return
        hour = client.rng.choice(list(hours))
        keys = hours[hour]
        span = {"sensor": client.tag, "at": {"$gte": T0 + hour * HOUR, "$lt": T0 + (hour + 1) * HOUR}}
        if len(hours) > LIVE_HOURS and roll < 0.55:
            oldest = min(hours)
            keys = hours.pop(oldest)
            span["at"] = {"$gte": T0 + oldest * HOUR, "$lt": T0 + (oldest + 1) * HOUR}
            certain, possible = self._bounds(keys)
            out = client.attempt("readings.delete_hour", lambda: coll.delete_many(span))
            for key in keys:
                (self.ledger.acked if out.ok else self.ledger.unknown)(key, ABSENT)
            if out.ok and not certain <= out.result.deleted_count <= possible:
                client.wrong("readings delete", f"hour {oldest}: deleted {out.result.deleted_count}, "
                                                f"expected {certain}..{possible}")
        elif roll < 0.75:
            out = client.attempt("readings.find_hour", lambda: list(coll.find(span)))
            if not out.ok:
                return
            found, seen = {}, set()
            for doc in out.result:
                if doc["_id"] in seen:
                    client.wrong("readings find", f"{doc['_id']} returned twice")
                seen.add(doc["_id"])
                found[doc["_id"]] = PRESENT
                if doc.get("temp") != temp(minute_of(doc["_id"])) or doc.get("sensor") != client.tag:
                    client.wrong("readings find", f"{doc['_id']}: {doc}")
            for problem in compare(self.ledger, found, keys, f"readings hour {hour}"):
                client.wrong("readings find", str(problem))
        elif roll < 0.9:
            certain, possible = self._bounds(keys)
            out = client.attempt("readings.count_hour", lambda: coll.count_documents(span))
            if out.ok and not certain <= out.result <= possible:
                client.wrong("readings count", f"hour {hour}: {out.result}, expected {certain}..{possible}")
        else:
            certain, possible = self._bounds(keys)
            pipeline = [{"$match": span}, {"$group": {"_id": {"$hour": "$at"}, "n": {"$sum": 1},
                                                      "avg": {"$avg": "$temp"}}}]
            out = client.attempt("readings.group_hour", lambda: list(coll.aggregate(pipeline)))
            if not out.ok:
                return
            n = out.result[0]["n"] if out.result else 0
            if len(out.result) > 1 or not certain <= n <= possible or (
                    out.result and out.result[0]["_id"] != hour % 24):
                client.wrong("readings $group", f"hour {hour}: {out.result}, expected n {certain}..{possible}")
            elif certain == possible and n:
                want = sum(temp(minute_of(k)) for k in keys if self.ledger.states(k) == {PRESENT}) / n
                if not math.isclose(out.result[0]["avg"], want, rel_tol=1e-9, abs_tol=1e-9):
                    client.wrong("readings $group", f"hour {hour}: avg {out.result[0]['avg']}, expected {want}")

    def verify(self, remold_db, backend_db) -> tuple[list[Problem], dict]:
        problems = []
        stored: dict = {}
        for bucket in backend_db.readings_buckets.find():
            readings = bucket.get("m", [])
            temps = [r.get("temp") for r in readings]
            if bucket.get("count") != len(readings) or not math.isclose(
                    bucket.get("sum", {}).get("temp", 0), sum(temps), abs_tol=1e-6) or len(readings) > 60:
                problems.append(Problem("derived", "readings bucket on the backend",
                                        f"{bucket['_id']}: count {bucket.get('count')}, {len(readings)} readings, "
                                        f"sum {bucket.get('sum')} vs {sum(temps)}"))
            for r in readings:
                stored[r["_id"]] = stored.get(r["_id"], 0) + 1
        through = {}
        for doc in remold_db.readings.find({}, {"_id": 1}):
            through[doc["_id"]] = through.get(doc["_id"], 0) + 1
        for where, counts in (("readings in the buckets on the backend", stored),
                              ("readings through remold", through)):
            problems += [Problem("doubled", where, f"{k!r} stored {n} times") for k, n in counts.items() if n > 1]
            problems += compare(self.ledger, dict.fromkeys(counts, PRESENT), list(self.ledger.keys()), where)
        return problems, {"readings": len(stored), "buckets": backend_db.readings_buckets.count_documents({})}
