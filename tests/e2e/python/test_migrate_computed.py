"""`remold migrate` on a computed rule, online (tools/migrate/value_fill.h).

Posts and comments are written straight to the backend before the rule
exists, so no post holds its comment count, star sum or best stars. remold
then serves the comments under the rule with `migrating: true` while an
application adds, moves, rates and deletes comments through it, and a
reader checks posts against a flat oracle (the same comments in a
collection of their own, the values grouped from it). A post's values may
be missing until the migration fills them, but a value remold shows is
never wrong, and a post the application touched has them at once: its
write recomputed them from the sources, where an increment would have
counted only the comments written since the rule. The migration is killed
once and run again; it then fills every post while the application runs.
"""
from __future__ import annotations

import random
import signal
import threading
import time
from pathlib import Path

import pymongo
import pytest

from conftest import NO_PROXY
from migration_support import Application, drop_database_after_kills, start_migrate
from test_rules import run_remold

pytestmark = pytest.mark.skipif(NO_PROXY, reason="runs remold migrate against remold's rules")

N_POSTS = 2000
N_COMMENTS = 12000
FIELDS = ("commentCount", "starSum", "bestStars")


def rule_file(rules: Path, db: str) -> None:
    rules.mkdir(exist_ok=True)
    (rules / "comments.yaml").write_text(
        f"namespace: {db}.comments\npattern: computed\ncomputed:\n  migrating: true\n  aggregates:\n"
        "    - target: posts\n      link: {from: postId, to: _id}\n      fields:\n"
        "        commentCount: count\n        starSum: {sum: stars}\n        bestStars: {max: stars}\n")


def expected(oracle: pymongo.collection.Collection, post_id: int) -> dict:
    """The values of one post, grouped from the oracle's comments."""
    stars = [c.get("stars") for c in oracle.find({"postId": post_id})]
    numbers = [s for s in stars if isinstance(s, int)]
    if not stars:
        return {}
    return {"commentCount": len(stars), "starSum": sum(numbers), "bestStars": max(numbers) if numbers else None}


def differs(post: dict, want: dict, must_be_filled: bool) -> bool:
    """Whether a post read through remold shows a wrong value: one that
    differs from the oracle's (a count or sum of 0 and none are the same),
    or none on a post that must be filled."""
    if not want:
        return any(post.get(f) not in (None, 0) for f in FIELDS)
    if not any(f in post for f in FIELDS):
        return must_be_filled
    return any((post.get(f) or 0) != (want.get(f) or 0) for f in FIELDS)


class Comments(Application):
    """Writes comments through remold and to the oracle, and reads posts."""

    def __init__(self, database, direct_database):
        super().__init__()
        self.comments = database.comments
        self.posts = database.posts
        self.oracle = direct_database.comments_oracle
        self.rng = random.Random(5)
        self.next_id = N_COMMENTS
        self.touched: set[int] = set()

    def write_once(self) -> None:
        with self.lock:
            kind = self.rng.random()
            post = self.rng.randrange(N_POSTS)
            if kind < 0.4:
                doc = {"_id": self.next_id, "postId": post, "stars": self.rng.randrange(1, 6)}
                self.next_id += 1
                self.comments.insert_one(dict(doc))
                self.oracle.insert_one(doc)
                self.touched.add(post)
            else:
                target = {"_id": self.rng.randrange(self.next_id)}
                old = self.oracle.find_one(target)
                if old is None:
                    return
                if kind < 0.6:
                    update = {"$set": {"stars": self.rng.randrange(1, 6)}}
                elif kind < 0.8:
                    update = {"$set": {"postId": post}}  # moved to another post
                    self.touched.add(post)
                else:
                    update = None
                if update is None:
                    assert self.comments.delete_one(target).deleted_count == 1
                    self.oracle.delete_one(target)
                else:
                    assert self.comments.update_one(target, update).matched_count == 1
                    self.oracle.update_one(target, update)
                self.touched.add(old["postId"])
            self.writes += 1

    def read_once(self) -> None:
        with self.lock:
            post_id = self.rng.randrange(N_POSTS)
            post = self.posts.find_one({"_id": post_id})
            want = expected(self.oracle, post_id)
            must = post_id in self.touched
            self.reads += 1
        if differs(post, want, must):
            self.wrong.append(f"post {post_id}: {post} vs oracle {want} (touched: {must})")

    def check_every_post(self) -> list[str]:
        with self.lock:
            posts = {p["_id"]: p for p in self.posts.find()}
            wrong = []
            for post_id in range(N_POSTS):
                want = expected(self.oracle, post_id)
                if differs(posts[post_id], want, must_be_filled=True):
                    wrong.append(f"post {post_id}: {posts[post_id]} vs oracle {want}")
            return wrong


def migrate(rules: Path, backend_uri: str, *args: str):
    return start_migrate(rules, backend_uri, "comments", *args)


def test_migrate_computed_online_with_a_kill(private_remold, backend, direct_client, db_name, tmp_path):
    database = direct_client[db_name]
    rng = random.Random(3)
    database.posts.insert_many([{"_id": i, "title": f"post {i}"} for i in range(N_POSTS)])
    comments = [{"_id": i, "postId": rng.randrange(N_POSTS), "stars": rng.randrange(1, 6)}
                for i in range(N_COMMENTS)]
    database.comments.insert_many([dict(c) for c in comments])
    database.comments_oracle.insert_many(comments)
    database.comments_oracle.create_index("postId")
    database.comments.create_index("postId")
    rules = tmp_path / "rules"
    rule_file(rules, db_name)
    try:
        remold = private_remold(extra_args=("--rules", str(rules)))
        client = pymongo.MongoClient(remold.uri)
        app = Comments(client[db_name], database)
        app.start()
        time.sleep(2.0)  # writes before any migration: the posts they touch are filled at once

        # Killed while it fills, then run again from the start.
        first = migrate(rules, backend.uri)
        time.sleep(1.0)
        first.send_signal(signal.SIGKILL)
        first.wait()
        second = migrate(rules, backend.uri)
        out, err = second.communicate(timeout=600)
        assert second.returncode == 0, out + err
        assert "migrate: done" in out, out
        filled_line = next(line for line in out.splitlines() if line.startswith("migrate: filled"))

        time.sleep(1.0)  # the application goes on over the filled posts
        app.finish()
        everywhere = app.check_every_post()
        assert not everywhere, everywhere[:5]

        # Nothing left to fill, and nothing to move back.
        dry = run_remold("migrate", "--backend", backend.uri, "--rules", str(rules), "--rule", "comments",
                         "--dry-run")
        assert dry.returncode == 0 and "0 value(s) would be filled" in dry.stdout, dry.stdout + dry.stderr
        back = run_remold("migrate", "--backend", backend.uri, "--rules", str(rules), "--rule", "comments",
                          "--to", "flat")
        assert back.returncode == 2 and "nothing to migrate back" in back.stderr, back.stderr
        throttled = run_remold("migrate", "--backend", backend.uri, "--rules", str(rules), "--rule", "comments",
                               "--max-rate", "10")
        assert throttled.returncode == 2 and "apply to rules that move documents" in throttled.stderr

        print(f"\ncomputed adoption: {app.writes} writes, {app.reads} reads, {len(app.wrong)} wrong, "
              f"{len(app.touched)} posts touched, killed once and run again ({filled_line})")
        assert not app.wrong, app.wrong[:5]
        assert app.writes > 20 and app.reads > 20, (app.writes, app.reads)
    finally:
        drop_database_after_kills(direct_client, db_name)


def test_concurrent_writers_settle_each_others_fills(private_remold, backend, direct_client, db_name, tmp_path):
    """8 clients add and remove comments of the same 3 posts at once, while
    the rule is migrating and the posts hold no values yet. Every write
    recomputes its post from the comments; whichever writer sees a
    difference sets it, and none stops before it sees the post and its
    comments agree, so once they are done each post is exact, with no
    migration run."""
    database = direct_client[db_name]
    posts = [0, 1, 2]
    database.posts.insert_many([{"_id": p} for p in posts])
    database.comments.insert_many([{"_id": f"seed{i}", "postId": i % 3, "stars": 1 + i % 5} for i in range(30)])
    rules = tmp_path / "rules"
    rule_file(rules, db_name)
    try:
        remold = private_remold(extra_args=("--rules", str(rules)))
        errors: list[str] = []

        def writer(n: int) -> None:
            client = pymongo.MongoClient(remold.uri)
            comments = client[db_name].comments
            rng = random.Random(n)
            try:
                for i in range(40):
                    comment_id = f"w{n}-{i}"
                    comments.insert_one({"_id": comment_id, "postId": rng.choice(posts), "stars": rng.randrange(1, 6)})
                    if rng.random() < 0.4:
                        comments.delete_one({"_id": comment_id})
                    if rng.random() < 0.3:
                        comments.update_one({"_id": comment_id}, {"$set": {"postId": rng.choice(posts)}})
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(f"{type(exc).__name__}: {exc}")
            finally:
                client.close()

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not errors, errors
        wrong = []
        for post in database.posts.find():
            want = expected(database.comments, post["_id"])
            if differs(post, want, must_be_filled=True):
                wrong.append(f"post {post['_id']}: {post} vs {want}")
        assert not wrong, wrong
        assert "did not settle" not in remold.stderr(), remold.stderr()[-2000:]
    finally:
        drop_database_after_kills(direct_client, db_name)
