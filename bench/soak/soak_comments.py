"""The soak's computed workload (bench/soak/soak.sh): `soak.comments`, whose rule
keeps each post of `soak.posts` holding commentCount and lastCommentAt (the
latest createdAt). Each client has 4 posts ("cNN-postK", written through
remold at setup) and inserts comments on them (`_id` "cNN-mSEQ", createdAt
growing), deletes them, moves them to another of its posts, and reads a
post: its count and latest must be those of its comments as the client was
told, unless a write on that post faulted (failed, or was in flight while
the backend was down: its follow-ups may be missing, which
docs/patterns/computed.md documents and `remold reconcile` repairs); at most about 40 live comments a
client. At the end every comment is checked through remold and on the
backend directly, and every post against its comments on the backend.
"""
from __future__ import annotations

import datetime as dt

from soak_ledger import ABSENT, Ledger, Problem, compare

T0 = dt.datetime(2024, 1, 1)
POSTS = 4
LIVE = 40


def created(key: str) -> dt.datetime:
    return T0 + dt.timedelta(seconds=int(key.rsplit("-m", 1)[1]))


def expected(comments: list) -> tuple:
    """(commentCount, lastCommentAt) of a post holding these comments' keys."""
    return len(comments), max(map(created, comments)) if comments else None


class Comments:
    name = "comments"
    weight = 2

    def __init__(self, clients: int) -> None:
        self.ledger = Ledger()
        self.mine: dict[int, list] = {}
        self.tainted: set = set()
        self.posts = [f"c{i:02d}-post{k}" for i in range(clients) for k in range(POSTS)]

    def setup(self, db) -> None:
        db.posts.insert_many([{"_id": p, "title": p} for p in self.posts])

    def _in(self, mine: list, post: str) -> list:
        return [k for k in mine if self.ledger.certain(k) == post]

    def step(self, client) -> None:
        mine = self.mine.setdefault(client.index, [])
        coll = client.db.comments
        posts = [f"{client.tag}-post{k}" for k in range(POSTS)]
        roll = client.rng.random()
        if not mine or (roll < 0.3 and len(mine) < LIVE):
            key, post = f"{client.tag}-m{client.next_seq()}", client.rng.choice(posts)
            out = client.attempt("comments.insert", lambda: coll.insert_one(
                {"_id": key, "postId": post, "createdAt": created(key), "text": "soak"}))
            (self.ledger.acked if out.ok else self.ledger.unknown)(key, post)
            mine.append(key)
            if out.faulted:
                self.tainted.add(post)
        elif roll < 0.5 or len(mine) >= LIVE:
            key = client.rng.choice(mine)
            out = client.attempt("comments.delete", lambda: coll.delete_one({"_id": key}))
            if out.faulted:
                self.tainted.update(self.ledger.states(key) - {ABSENT})
            if not out.ok:
                self.ledger.unknown(key, ABSENT)
                return
            if out.result.deleted_count == 0 and ABSENT not in self.ledger.states(key):
                client.wrong("comments delete", f"{key}: deleted nothing, possible {self.ledger.states(key)}")
            self.ledger.acked(key, ABSENT)
            mine.remove(key)
        elif roll < 0.7:
            key, post = client.rng.choice(mine), client.rng.choice(posts)
            out = client.attempt("comments.move", lambda: coll.update_one({"_id": key}, {"$set": {"postId": post}}))
            if out.faulted:
                self.tainted.update((self.ledger.states(key) - {ABSENT}) | {post})
            if not out.ok:
                self.ledger.unknown(key, post)
            elif out.result.matched_count == 1:
                self.ledger.acked(key, post)
            elif ABSENT in self.ledger.states(key):
                self.ledger.acked(key, ABSENT)
                mine.remove(key)
            else:
                client.wrong("comments move", f"{key}: matched nothing, possible {self.ledger.states(key)}")
        else:
            post = client.rng.choice(posts)
            out = client.attempt("comments.read_post", lambda: client.db.posts.find_one({"_id": post}))
            if out.ok and post not in self.tainted:
                count, latest = expected(self._in(mine, post))
                got = (out.result.get("commentCount", 0), out.result.get("lastCommentAt"))
                if got != (count, latest):
                    client.wrong("comments post", f"{post}: {got}, expected {(count, latest)}")

    def verify(self, remold_db, backend_db) -> tuple[list[Problem], dict]:
        keys = list(self.ledger.keys())
        problems = []
        on_backend = {}
        for where, db in (("comments through remold", remold_db), ("comments on the backend", backend_db)):
            found = {d["_id"]: d.get("postId") for d in db.comments.find({}, {"postId": 1})}
            problems += compare(self.ledger, found, keys, where)
            on_backend = found
        by_post: dict = {}
        for key, post in on_backend.items():
            by_post.setdefault(post, []).append(key)
        drift = 0
        for post in backend_db.posts.find({"_id": {"$in": self.posts}}):
            want = expected(by_post.get(post["_id"], []))
            got = (post.get("commentCount", 0), post.get("lastCommentAt"))
            if got != want:
                kind = "drift" if post["_id"] in self.tainted else "derived"
                drift += kind == "drift"
                problems.append(Problem(kind, "posts on the backend", f"{post['_id']}: {got}, its comments {want}"))
        return problems, {"comments": len(on_backend), "posts drifted": drift}
