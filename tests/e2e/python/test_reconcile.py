"""``remold reconcile`` end to end: the real binary run as a subprocess with a
config file pointing at the test backend.

Each test writes its own rules (naming its own database), starts a private
remold with them, writes the source data THROUGH remold (so remold maintains
the computed values), and checks that reconcile finds nothing. It then
writes directly on the backend, bypassing remold, and checks that reconcile
reports exactly the documents those writes left wrong, by the right amounts,
exits 1, repairs them with ``--fix`` (exit 0), and that a third run is clean
and the stored values equal what this test computes from the source data.

The rules (one file per source collection):

    comments -> posts    commentCount: count, lastCommentAt: {max: createdAt}
    ratings  -> movies   ratingCount: count, ratingSum: {sum: stars},
                         derived ratingAvg: {divide: [ratingSum, ratingCount]}
    orders               total: {sum: {each: items, of: {product: [price, qty]}}}
    likes    -> songs    likeCount: count, create_target: true

Report lines (stdout) are parsed by ``parse_report``:

    <db.coll> <identity as Extended JSON>: <field> <observed>, expected <value> (off by <d>); ...[ => fixed]
    rule <name>: <db.coll>: N checked, N drifted, N fixed[, N orphan links]
    total: N drifted, N fixed, N not fixed
"""

from __future__ import annotations

import datetime as dt
import json
import os
import pty
import random
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from bson import ObjectId, json_util

from conftest import require_binary

RECONCILE_TIMEOUT = 300
T0 = dt.datetime(2026, 1, 1)


# --------------------------------------------------------------------------
# Rules, config, running reconcile.


def rules_text(db: str) -> dict[str, str]:
    return {
        "comments.yaml": f"""\
namespace: {db}.comments
pattern: computed
computed:
  aggregates:
    - target: posts
      link: {{from: postId, to: _id}}
      fields:
        commentCount: count
        lastCommentAt: {{max: createdAt}}
""",
        "ratings.yaml": f"""\
namespace: {db}.ratings
pattern: computed
computed:
  aggregates:
    - target: movies
      link: movieId
      fields:
        ratingCount: count
        ratingSum: {{sum: stars}}
      derived:
        ratingAvg: {{divide: [ratingSum, ratingCount]}}
""",
        "orders.yaml": f"""\
namespace: {db}.orders
pattern: computed
computed:
  fields:
    total: {{sum: {{each: items, of: {{product: [price, qty]}}}}}}
""",
        "likes.yaml": f"""\
namespace: {db}.likes
pattern: computed
computed:
  aggregates:
    - target: songs
      link: songId
      create_target: true
      fields:
        likeCount: count
""",
    }


@dataclass
class Drift:
    ns: str
    identity: dict
    fields: dict[str, dict] = field(default_factory=dict)  # name -> {observed, expected, off_by}
    text: str = ""
    outcome: str = ""  # "", "fixed", "not fixed: ..."
    target_missing: bool = False

    @property
    def id(self) -> Any:
        return next(iter(self.identity.values()))


@dataclass
class Report:
    rc: int
    stdout: str
    stderr: str
    drifts: list[Drift]
    summaries: dict[tuple[str, str], dict[str, int]]  # (rule, ns) -> counts

    def drifted(self, ns: str) -> dict[Any, Drift]:
        return {d.id: d for d in self.drifts if d.ns == ns}

    def __str__(self) -> str:
        return f"exit {self.rc}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"


_FIELD = re.compile(r"^(?P<name>[^ ]+) (?P<observed>.+?), "
                    r"(?:expected (?P<expected>.+?)(?: \(off by (?P<off>[-+][0-9.e+-]+)\))?"
                    r"|cannot compute: (?P<error>.+))$")
_SUMMARY = re.compile(r"^rule (?P<rule>[^:]+): (?P<ns>[^:]+): (?P<checked>\d+) checked, "
                      r"(?P<drifted>\d+) drifted, (?P<fixed>\d+) fixed(?:, (?P<orphans>\d+) orphan links)?$")


def parse_drift(line: str) -> Drift:
    ns, rest = line.split(" ", 1)
    identity, end = json.JSONDecoder().raw_decode(rest)
    identity = json_util.loads(json.dumps(identity))
    body = rest[end:]
    assert body.startswith(": "), line
    body = body[2:]
    outcome = ""
    if " => " in body:
        body, outcome = body.rsplit(" => ", 1)
    drift = Drift(ns, identity, text=line, outcome=outcome)
    if body.startswith("target missing"):
        drift.target_missing = True
        return drift
    for part in body.split("; "):
        match = _FIELD.match(part)
        assert match, f"unparsable field {part!r} in {line!r}"
        drift.fields[match["name"]] = {"observed": match["observed"], "expected": match["expected"],
                                       "off_by": match["off"], "error": match["error"]}
    return drift


def parse_report(result: subprocess.CompletedProcess) -> Report:
    drifts, summaries = [], {}
    for line in result.stdout.splitlines():
        if not line.strip() or line.startswith("total: "):
            continue
        summary = _SUMMARY.match(line)
        if summary:
            counts = {k: int(v) for k, v in summary.groupdict().items()
                      if k not in ("rule", "ns") and v is not None}
            summaries[(summary["rule"], summary["ns"])] = counts
            continue
        drifts.append(parse_drift(line))
    return Report(result.returncode, result.stdout, result.stderr, drifts, summaries)


def run_reconcile(config: Path, *args: str, stderr=subprocess.PIPE) -> subprocess.CompletedProcess:
    binary = require_binary()
    return subprocess.run([str(binary), "reconcile", "--config", str(config), *args],
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
                          text=True, timeout=RECONCILE_TIMEOUT)


@pytest.fixture
def env(tmp_path, backend, private_remold, make_client, direct_client, db_name):
    rules_dir = tmp_path / "rules"
    rules_dir.mkdir()
    for name, text in rules_text(db_name).items():
        (rules_dir / name).write_text(text)
    config = tmp_path / "remold.yaml"
    config.write_text(f"backend: {backend.uri}\nrules: {rules_dir}\nlog_level: warn\n")
    remold = private_remold(extra_args=("--rules", str(rules_dir)))
    client = make_client(remold.uri)

    def reconcile(*args: str) -> Report:
        return parse_report(run_reconcile(config, *args))

    yield SimpleNamespace(db=client[db_name], direct=direct_client[db_name], name=db_name,
                          config=config, rules_dir=rules_dir, reconcile=reconcile, remold=remold)
    direct_client.drop_database(db_name)


def assert_clean(report: Report, *rules: str) -> None:
    assert report.rc == 0, str(report)
    assert report.drifts == [], str(report)
    for rule in rules:
        assert any(r == rule for r, _ in report.summaries), f"no summary for rule {rule}:\n{report}"
    assert all(s["drifted"] == 0 for s in report.summaries.values()), str(report)


def ms(value: dt.datetime) -> dt.datetime:
    """What a BSON date keeps: milliseconds."""
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


# --------------------------------------------------------------------------
# Oracles: the maintained values computed here from the source data.


def expected_posts(direct) -> dict[Any, dict]:
    out = {}
    for post in direct.posts.find({}, {"_id": 1}):
        comments = list(direct.comments.find({"postId": post["_id"]}))
        dates = [c["createdAt"] for c in comments if c.get("createdAt") is not None]
        out[post["_id"]] = {"commentCount": len(comments), "lastCommentAt": max(dates) if dates else None}
    return out


def expected_movies(direct) -> dict[Any, dict]:
    out = {}
    for movie in direct.movies.find({}, {"_id": 1}):
        stars = [r["stars"] for r in direct.ratings.find({"movieId": movie["_id"]})]
        count, total = len(stars), sum(stars)
        out[movie["_id"]] = {"ratingCount": count, "ratingSum": total,
                             "ratingAvg": total / count if count else None}
    return out


def order_total(order: dict) -> Any:
    return sum(item["price"] * item["qty"] for item in order.get("items", []))


def assert_posts_match_sources(direct) -> None:
    for post_id, want in expected_posts(direct).items():
        post = direct.posts.find_one({"_id": post_id})
        assert post.get("commentCount", 0) == want["commentCount"], (post, want)
        assert post.get("lastCommentAt") == want["lastCommentAt"], (post, want)


def assert_movies_match_sources(direct) -> None:
    for movie_id, want in expected_movies(direct).items():
        movie = direct.movies.find_one({"_id": movie_id})
        assert movie.get("ratingCount", 0) == want["ratingCount"], (movie, want)
        assert movie.get("ratingSum", 0) == want["ratingSum"], (movie, want)
        if want["ratingAvg"] is None:
            assert movie.get("ratingAvg") is None, (movie, want)
        else:
            assert movie["ratingAvg"] == pytest.approx(want["ratingAvg"]), (movie, want)


# --------------------------------------------------------------------------
# Seeding through remold.


def seed_blog(env, rng: random.Random) -> SimpleNamespace:
    """Posts and movies, comments and ratings written through remold."""
    db = env.db
    posts = [ObjectId() for _ in range(8)]
    db.posts.insert_many([{"_id": p, "title": f"post {k}"} for k, p in enumerate(posts)])
    comments = []
    for k in range(60):
        # posts[7] gets no comment at all
        comments.append({"_id": k, "postId": posts[rng.randrange(7)], "author": f"a{k % 5}",
                         "createdAt": ms(T0 + dt.timedelta(minutes=rng.randrange(100_000)))})
    db.comments.insert_many(comments[:40])
    for comment in comments[40:]:
        db.comments.insert_one(comment)
    db.comments.delete_many({"_id": {"$in": [3, 9, 27]}})
    db.comments.delete_one({"_id": 31})
    db.comments.update_one({"_id": 5}, {"$set": {"createdAt": ms(T0 + dt.timedelta(days=400))}})
    db.comments.update_one({"_id": 6}, {"$set": {"postId": posts[6]}})

    movies = [f"m{k}" for k in range(5)]
    db.movies.insert_many([{"_id": m, "title": m.upper()} for m in movies])
    ratings = [{"_id": k, "movieId": movies[rng.randrange(4)], "stars": rng.randrange(1, 6)}
               for k in range(40)]
    db.ratings.insert_many(ratings)
    db.ratings.update_one({"_id": 2}, {"$set": {"stars": 5}})
    db.ratings.delete_one({"_id": 4})
    return SimpleNamespace(posts=posts, movies=movies)


# --------------------------------------------------------------------------
# (a) cross-collection aggregates: posts/comments and movies/ratings.


def test_aggregates_drift_reported_and_fixed(env):
    rng = random.Random(7)
    seeded = seed_blog(env, rng)
    direct = env.direct
    # remold maintained everything: nothing to report.
    assert_clean(env.reconcile(), "comments", "ratings")
    assert_posts_match_sources(direct)
    assert_movies_match_sources(direct)

    # Bypass remold.
    before = expected_posts(direct)
    p_new, p_deleted, p_set = seeded.posts[1], seeded.posts[2], seeded.posts[3]
    newest = ms(T0 + dt.timedelta(days=500))
    direct.comments.insert_many([
        {"_id": 1000, "postId": p_new, "author": "x", "createdAt": ms(T0 + dt.timedelta(minutes=5))},
        {"_id": 1001, "postId": p_new, "author": "x", "createdAt": newest},
    ])
    # delete a comment of p_deleted that is not its latest, so only the count drifts
    victims = sorted(direct.comments.find({"postId": p_deleted}), key=lambda c: c["createdAt"])
    assert len(victims) >= 2, "the seed gives every post but the last several comments"
    direct.comments.delete_one({"_id": victims[0]["_id"]})
    direct.posts.update_one({"_id": p_set}, {"$set": {"commentCount": 99}})
    rating = direct.ratings.find_one({"movieId": seeded.movies[1]})
    new_stars = 1 if rating["stars"] != 1 else 2
    direct.ratings.update_one({"_id": rating["_id"]}, {"$set": {"stars": new_stars}})
    movie_before = direct.movies.find_one({"_id": seeded.movies[1]})

    report = env.reconcile()
    assert report.rc == 1, str(report)
    posts = report.drifted(f"{env.name}.posts")
    movies = report.drifted(f"{env.name}.movies")
    assert set(posts) == {p_new, p_deleted, p_set}, str(report)
    assert set(movies) == {seeded.movies[1]}, str(report)
    assert len(report.drifts) == 4, str(report)

    assert posts[p_new].fields["commentCount"]["off_by"] == "-2"
    assert posts[p_new].fields["lastCommentAt"]["expected"] == newest.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    assert posts[p_deleted].fields["commentCount"]["off_by"] == "+1"
    assert set(posts[p_deleted].fields) == {"commentCount"}
    assert posts[p_set].fields["commentCount"]["observed"] == "99"
    assert posts[p_set].fields["commentCount"]["off_by"] == f"+{99 - before[p_set]['commentCount']}"
    assert set(posts[p_set].fields) == {"commentCount"}
    movie = movies[seeded.movies[1]]
    assert set(movie.fields) == {"ratingSum", "ratingAvg"}, movie.text
    assert int(movie.fields["ratingSum"]["off_by"]) == rating["stars"] - new_stars
    assert movie.fields["ratingSum"]["observed"] == str(movie_before["ratingSum"])
    assert report.summaries[("comments", f"{env.name}.posts")]["drifted"] == 3
    assert report.summaries[("ratings", f"{env.name}.movies")]["drifted"] == 1
    assert "total: 4 drifted, 0 fixed, 4 not fixed" in report.stdout

    fixed = env.reconcile("--fix")
    assert fixed.rc == 0, str(fixed)
    assert {(d.ns, d.id) for d in fixed.drifts} == {(d.ns, d.id) for d in report.drifts}, str(fixed)
    assert all(d.outcome == "fixed" for d in fixed.drifts), str(fixed)
    assert fixed.summaries[("comments", f"{env.name}.posts")]["fixed"] == 3

    assert_clean(env.reconcile(), "comments", "ratings")
    assert_posts_match_sources(direct)
    assert_movies_match_sources(direct)


# --------------------------------------------------------------------------
# (b) same-document computed fields: orders.


def test_same_document_fields_drift_reported_and_fixed(env):
    rng = random.Random(11)
    orders = []
    for k in range(12):
        items = [{"sku": f"s{j}", "price": rng.randrange(1, 50), "qty": rng.randrange(1, 4)}
                 for j in range(rng.randrange(1, 4))]
        orders.append({"_id": k, "items": items})
    env.db.orders.insert_many(orders)
    env.db.orders.update_one({"_id": 4}, {"$push": {"items": {"sku": "extra", "price": 3, "qty": 2}}})
    direct = env.direct
    assert direct.orders.find_one({"_id": 0}).get("total") == order_total(orders[0]), \
        "remold computes total on insert"
    assert_clean(env.reconcile("--rule", "orders"), "orders")

    direct.orders.update_one({"_id": 2}, {"$set": {"total": 1}})
    direct.orders.update_one({"_id": 5}, {"$push": {"items": {"sku": "x", "price": 10, "qty": 3}}})
    direct.orders.update_one({"_id": 7}, {"$unset": {"total": ""}})
    direct.orders.insert_one({"_id": 100, "items": [{"price": 2, "qty": 2}]})
    direct.orders.insert_one({"_id": 101, "items": [{"price": "free", "qty": 2}]})

    report = env.reconcile("--rule", "orders")
    assert report.rc == 1, str(report)
    drifted = report.drifted(f"{env.name}.orders")
    assert set(drifted) == {2, 5, 7, 100, 101}, str(report)
    stored = {o["_id"]: o for o in direct.orders.find()}
    assert drifted[2].fields["total"]["observed"] == "1"
    assert drifted[2].fields["total"]["off_by"] == f"{1 - order_total(stored[2]):+d}"
    assert drifted[5].fields["total"]["off_by"] == "-30"
    assert drifted[7].fields["total"]["observed"] == "missing"
    assert drifted[7].fields["total"]["expected"] == str(order_total(stored[7]))
    assert drifted[100].fields["total"]["expected"] == "4"
    assert "price" in drifted[101].fields["total"]["error"]

    fixed = env.reconcile("--rule", "orders", "--fix")
    assert fixed.rc == 1, f"order 101 cannot be computed, so drift remains:\n{fixed}"
    outcomes = {d.id: d.outcome for d in fixed.drifts}
    assert outcomes == {2: "fixed", 5: "fixed", 7: "fixed", 100: "fixed",
                        101: "not fixed: cannot compute"}, str(fixed)
    assert "total: 5 drifted, 4 fixed, 1 not fixed" in fixed.stdout

    direct.orders.delete_one({"_id": 101})
    assert_clean(env.reconcile("--rule", "orders"), "orders")
    for order in direct.orders.find():
        assert order["total"] == order_total(order), order


# --------------------------------------------------------------------------
# (c) choosing rules, errors, progress.


def test_rule_selection_errors_and_progress(env, tmp_path):
    seed_blog(env, random.Random(3))
    only = env.reconcile("--rule", "comments")
    assert only.rc == 0, str(only)
    assert {rule for rule, _ in only.summaries} == {"comments"}, str(only)
    # non-TTY progress: plain lines naming the rule and the scanned collection
    assert re.search(rf"^reconcile: rule comments: \d+/\d+ {env.name}\.posts checked$",
                     only.stderr, re.M), only.stderr
    assert "\r" not in only.stderr

    unknown = env.reconcile("--rule", "nosuchrule")
    assert unknown.rc == 2, str(unknown)
    assert "no rule named 'nosuchrule'" in unknown.stderr
    assert "comments" in unknown.stderr, "the message lists the computed rules"
    assert unknown.stdout == ""

    (env.rules_dir / "products.yaml").write_text(
        f"namespace: {env.name}.products\npattern: attribute\nattribute:\n  fields: [color]\n")
    not_computed = env.reconcile("--rule", "products")
    assert not_computed.rc == 2, str(not_computed)
    assert "is an attribute rule" in not_computed.stderr

    bad_flag = env.reconcile("--frobnicate")
    assert bad_flag.rc == 2 and "unknown argument '--frobnicate'" in bad_flag.stderr

    unreachable = tmp_path / "unreachable.yaml"
    unreachable.write_text(f"backend: mongodb://127.0.0.1:1/?connectTimeoutMS=500\nrules: {env.rules_dir}\n")
    down = parse_report(run_reconcile(unreachable))
    assert down.rc == 2, str(down)
    assert "cannot reach the backend" in down.stderr


def test_progress_bar_on_a_terminal(env):
    seed_blog(env, random.Random(5))
    controller, terminal = pty.openpty()
    try:
        result = run_reconcile(env.config, "--rule", "comments", stderr=terminal)
    finally:
        os.close(terminal)
    output = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO: the terminal's other side is closed
            break
        if not chunk:
            break
        output += chunk
    os.close(controller)
    text = output.decode(errors="replace")
    assert result.returncode == 0, f"{result.stdout}\n{text}"
    assert re.search(r"\r\[#+\] 100%  8/8 posts", text), repr(text)


# --------------------------------------------------------------------------
# (d) missing targets and orphan links.


def test_missing_targets_and_orphan_links(env):
    env.db.likes.insert_many([{"songId": s} for s in ["s1", "s1", "s2"]])
    assert env.direct.songs.find_one({"_id": "s1"})["likeCount"] == 2, "remold creates targets"
    env.db.posts.insert_one({"_id": "p1"})
    env.db.comments.insert_one({"postId": "p1", "createdAt": T0})
    assert_clean(env.reconcile(), "likes", "comments")

    env.direct.songs.delete_one({"_id": "s2"})
    env.direct.likes.insert_one({"songId": "s3"})
    env.direct.comments.insert_many([{"postId": "nopost", "createdAt": T0},
                                     {"postId": "nopost2", "createdAt": T0}])
    report = env.reconcile()
    assert report.rc == 1, str(report)
    songs = report.drifted(f"{env.name}.songs")
    assert set(songs) == {"s2", "s3"} and all(d.target_missing for d in songs.values()), str(report)
    assert "likeCount 1" in songs["s3"].text
    # comments on posts that do not exist: informational, not drift
    assert report.summaries[("comments", f"{env.name}.posts")] == \
        {"checked": 1, "drifted": 0, "fixed": 0, "orphans": 2}, str(report)

    fixed = env.reconcile("--fix")
    assert fixed.rc == 0, str(fixed)
    assert env.direct.songs.find_one({"_id": "s3"})["likeCount"] == 1
    assert env.direct.songs.find_one({"_id": "s2"})["likeCount"] == 1
    assert_clean(env.reconcile(), "likes")
