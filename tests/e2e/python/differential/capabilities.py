"""What the flat side (the backend itself) answers as MongoDB does, probed on
a scratch database: an operation shape the backend lacks or gets wrong on
plain collections is not generated (skipped by capability, never encoded as
expected)."""
from __future__ import annotations

from bson.int64 import Int64
from pymongo.errors import PyMongoError


def probe(client, db_name: str) -> set[str]:
    db = client[db_name]
    db.a.insert_many([{"_id": 1, "k": 1}, {"_id": 2, "k": 2}])
    db.b.insert_many([{"_id": 10, "f": 1}, {"_id": 11, "f": 1}, {"_id": 12, "f": 3}])
    found = set()

    def agg(coll, pipeline):
        return list(db[coll].aggregate(pipeline))

    db.n.insert_many([{"_id": 1, "f": None}, {"_id": 2}, {"_id": 3, "f": 1}])
    def write_error_counts():
        for multi in (False, True):
            reply = db.command({"update": "n", "updates": [
                {"q": {"_id": 3}, "u": {"$inc": {"f": 1, "g": "x"}}, "multi": multi}]})
            if not reply.get("writeErrors") or reply["n"] != 0:
                return False
        reply = db.command({"insert": "n", "documents": [{"_id": 3}], "ordered": True})
        return reply.get("writeErrors") and reply["n"] == 0

    def ordered_update_stops():
        reply = db.command({"update": "n", "updates": [
            {"q": {"_id": 3}, "u": {"$inc": {"f": "x"}}}, {"q": {"_id": 3}, "u": {"$set": {"h": 1}}}],
            "ordered": True})
        return reply.get("writeErrors") and reply["n"] == 0 and "h" not in db.n.find_one({"_id": 3})

    def ordered_insert_stops():
        reply = db.command({"insert": "n", "documents": [{"_id": 3}, {"_id": 4}], "ordered": True})
        return reply.get("writeErrors") and db.n.find_one({"_id": 4}) is None

    def array_values():
        db.arr.insert_many([{"_id": 1, "f": [1, 2]}, {"_id": 2, "f": []}, {"_id": 3, "f": 1}])
        ids = lambda q: sorted(d["_id"] for d in db.arr.find(q))
        return (ids({"f": [1, 2]}) == [1] and ids({"f": {"$in": [[1, 2]]}}) == [1]
                and ids({"f": {"$nin": [[1, 2]]}}) == [2, 3] and ids({"f": {"$in": [[]]}}) == [2]
                and ids({"f": {"$nin": [[]]}}) == [1, 3] and ids({"f": {"$ne": []}}) == [1, 3])

    def nan_compare():
        db.nan.insert_one({"_id": 1, "f": float("nan")})
        return list(db.nan.find({"f": {"$gt": 0}})) == [] and len(list(db.nan.find({"f": float("nan")}))) == 1

    def field_order():
        db.fo.insert_one({"_id": 1, "a": 1, "b": 2})
        db.fo.replace_one({"_id": 1}, {"c": 3, "a": 1})
        replaced = list(db.fo.find_one({"_id": 1}))
        db.fo.update_one({"_id": 1}, {"$set": {"z": 1, "a": 5}})
        return replaced == ["_id", "c", "a"] and list(db.fo.find_one({"_id": 1})) == ["_id", "c", "a", "z"]

    def update_no_create():
        db.command({"update": "nc", "updates": [{"q": {"_id": 1}, "u": {"$set": {"a": 1}}}]})
        db.command({"findAndModify": "nc", "query": {"_id": 1}, "update": {"$set": {"a": 1}}})
        db.command({"findAndModify": "nc", "query": {"_id": 1}, "remove": True})
        db.command({"delete": "nc", "deletes": [{"q": {"_id": 1}, "limit": 1}]})
        return "nc" not in db.list_collection_names()

    def fam_last_error_object():
        leo = lambda q, **kw: db.command({"findAndModify": "n", "query": q,
                                          "update": {"$set": {"x": 1}}, **kw}).get("lastErrorObject", {})
        return (leo({"_id": 1}) == {"n": 1, "updatedExisting": True}
                and leo({"_id": 99}, upsert=True) == {"n": 1, "updatedExisting": False, "upserted": 99}
                and leo({"_id": 98}) == {"n": 0, "updatedExisting": False})

    def group_arrays():
        db.grp.insert_many([{"_id": 1, "f": [None, "a"]}, {"_id": 2}, {"_id": 3, "f": None}])
        groups = {repr(d["_id"]): d["n"] for d in db.grp.aggregate(
            [{"$group": {"_id": "$f", "n": {"$sum": 1}}}])}
        return groups == {repr([None, "a"]): 1, "None": 2}

    def addtoset_as_distinct():
        db.ad.insert_many([{"_id": 1, "f": None}, {"_id": 2}, {"_id": 3, "f": 1},
                           {"_id": 4, "f": Int64(1)}, {"_id": 5, "f": 1.0}])
        values = agg("ad", [{"$group": {"_id": None, "v": {"$addToSet": "$f"}}}])[0]["v"]
        return len(values) == 2 and None in values and 1 in values

    def lookup_let_after_unwind():
        db.u.insert_many([{"_id": 1, "p": [{"v": 1}, {"v": 2}]}])
        return [len(d["j"]) for d in agg("a", [
            {"$lookup": {"from": "u", "let": {"kk": "$k"}, "pipeline": [
                {"$unwind": "$p"}, {"$replaceRoot": {"newRoot": "$p"}},
                {"$match": {"$expr": {"$eq": ["$v", "$$kk"]}}}], "as": "j"}},
            {"$sort": {"_id": 1}}])] == [1, 1]

    def lookup_let_filter_vars():
        rebuilt = {"$arrayToObject": {"$filter": {"input": {"$objectToArray": "$$ROOT"}, "as": "f",
                                                  "cond": {"$ne": ["$$f.k", "f"]}}}}
        return [d["j"] for d in agg("a", [
            {"$lookup": {"from": "b", "let": {"kk": "$k"}, "pipeline": [
                {"$replaceRoot": {"newRoot": rebuilt}}, {"$match": {"$expr": {"$eq": ["$_id", 10]}}}],
                "as": "j"}},
            {"$sort": {"_id": 1}}])] == [[{"_id": 10}], [{"_id": 10}]]

    def sort_empty_array_ties():
        db.sa.insert_many([{"_id": 1, "f": []}, {"_id": 2, "f": []}, {"_id": 3}, {"_id": 4, "f": [2, 0]}])
        order = lambda direction: [d["_id"] for d in db.sa.find().sort([("f", direction), ("_id", 1)])]
        return order(1) == [1, 2, 3, 4] and order(-1) == [4, 3, 1, 2]

    def partial_indexes():
        db.pi.insert_many([{"_id": 1, "t": "C", "a": 1}, {"_id": 2, "t": "O", "a": 1},
                           {"_id": 3, "t": "O", "a": 1}])
        db.command({"createIndexes": "pi", "indexes": [
            {"key": {"a": 1}, "name": "a_u", "unique": True, "partialFilterExpression": {"t": "C"}}]})
        db.pi.insert_one({"_id": 4, "t": "O", "a": 1})
        reply = db.command({"insert": "pi", "documents": [{"_id": 5, "t": "C", "a": 1}]})
        return [e.get("code") for e in reply.get("writeErrors", [])] == [11000]

    def create_existing_ok():
        return db.command({"create": "a"})["ok"] == 1

    def drop_indexes_list():
        db.command({"createIndexes": "b", "indexes": [{"key": {"f": 1}, "name": "f_1"},
                                                      {"key": {"f": -1}, "name": "f_-1"}]})
        db.command({"dropIndexes": "b", "index": ["f_1", "f_-1"]})
        return [i["name"] for i in db.b.list_indexes()] == ["_id_"]

    def drop_indexes_beside_others():
        db.dx1.insert_one({"_id": 1, "p": 1})
        db.dx2.insert_one({"_id": 1, "a": 1})
        db.command({"createIndexes": "dx1", "indexes": [{"key": {"p": 1}, "name": "p_1"}]})
        return db.command({"dropIndexes": "dx2", "index": "*"})["ok"] == 1

    def expr_array_equality():
        db.ae.insert_one({"_id": 1, "a": ["x", "y", "z"]})
        shorter = {"$expr": {"$eq": ["$$ROOT", {"$literal": {"_id": 1, "a": ["x", "y"]}}]}}
        return db.ae.count_documents(shorter) == 0

    def push_slice_zero():
        db.ps.insert_one({"_id": 1, "a": [1, 2, 3]})
        db.ps.update_one({"_id": 1}, {"$push": {"a": {"$each": [4], "$slice": 0}}, "$inc": {"n": 1}})
        return db.ps.find_one({"_id": 1}) == {"_id": 1, "a": [], "n": 1}

    def pipeline_update():
        db.pu.insert_one({"_id": 1, "f": 2, "g": 1})
        db.command({"update": "pu", "updates": [{"q": {"_id": 1}, "u": [{"$set": {"h": "$f"}}, {"$unset": "g"}]}]})
        db.command({"update": "pu", "updates": [{"q": {"_id": 2}, "u": [{"$set": {"h": 3}}], "upsert": True}]})
        return list(db.pu.find().sort("_id", 1)) == [{"_id": 1, "f": 2, "h": 2}, {"_id": 2, "h": 3}]

    checks = {
        # An update may be a pipeline (MongoDB 4.2), upserts too.
        "pipeline_update": pipeline_update,
        # $expr equality of documents compares arrays whole (the stand-in
        # takes a shorter array for equal): the guards of remold's own
        # rewrites of a document see an append.
        "expr_array_equality": expr_array_equality,
        # $push with $slice: 0 empties the array (DocumentDB keeps it, and
        # beside another operator stores one that reads two ways:
        # docs/backends.md, departure 13).
        "push_slice_zero": push_slice_zero,
        # dropIndexes takes a list of names (MongoDB 4.2).
        "drop_indexes_list": drop_indexes_list,
        # dropIndexes "*" of a collection while another collection of the
        # database has an index of its own (the stand-in looks for that
        # index in the first one, and fails with 27).
        "drop_indexes_beside_others": drop_indexes_beside_others,
        # create of an existing collection (same options) answers ok, as a
        # mongos does and a mongod since SERVER-60064 (MongoDB 7.0).
        "create_existing_ok": create_existing_ok,
        # A unique index with a partialFilterExpression holds only the
        # documents its filter matches.
        "partial_indexes": partial_indexes,
        # Documents whose sort key is [] tie (below null and missing): the
        # next key orders them.
        "sort_empty_array_ties": sort_empty_array_ties,
        # $addToSet keeps null, leaves missing out and takes 1, 1L and 1.0
        # as one value, as distinct does.
        "addtoset_as_distinct": addtoset_as_distinct,
        # A $lookup's let variables stay visible after $unwind in its pipeline.
        "lookup_let_after_unwind": lookup_let_after_unwind,
        # In a $lookup with let, a $filter's own variable ($$f.k) is bound.
        "lookup_let_filter_vars": lookup_let_filter_vars,
        # $group keys an array as a whole, apart from null.
        "group_arrays": group_arrays,
        # A write that matches nothing and upserts nothing creates no collection.
        "update_no_create": update_no_create,
        # findAndModify replies with lastErrorObject {n, updatedExisting, upserted}.
        "fam_last_error_object": fam_last_error_object,
        # A replacement keeps the order it was given; $set appends a new field.
        "field_order": field_order,
        # NaN is no greater than a number.
        "nan_compare": nan_compare,
        # A filter value that is an array matches a field equal to it (as a whole).
        "array_values": array_values,
        # An ordered batch stops at its first write error.
        "ordered_update_stops": ordered_update_stops,
        "ordered_insert_stops": ordered_insert_stops,
        # MongoDB's n leaves out a statement that failed.
        "write_error_counts": write_error_counts,
        # MongoDB: {f: {$gte: null}} and {$lte: null} match null and missing, $gt/$lt none.
        "compare_null": lambda: (sorted(d["_id"] for d in db.n.find({"f": {"$gte": None}})) == [1, 2]
                                 and sorted(d["_id"] for d in db.n.find({"f": {"$lte": None}})) == [1, 2]
                                 and list(db.n.find({"f": {"$gt": None}})) == []),
        "lookup_local": lambda: [len(d["j"]) for d in agg("a", [
            {"$lookup": {"from": "b", "localField": "k", "foreignField": "f", "as": "j"}},
            {"$sort": {"_id": 1}}])] == [2, 0],
        "lookup_pipeline": lambda: [len(d["j"]) for d in agg("a", [
            {"$lookup": {"from": "b", "let": {"kk": "$k"},
                         "pipeline": [{"$match": {"$expr": {"$eq": ["$f", "$$kk"]}}}], "as": "j"}},
            {"$sort": {"_id": 1}}])] == [2, 0],
        "unionWith": lambda: len(agg("a", [{"$unionWith": {"coll": "b", "pipeline": [
            {"$match": {"f": 1}}]}}])) == 4,
        "facet": lambda: agg("a", [{"$facet": {"x": [{"$lookup": {
            "from": "b", "localField": "k", "foreignField": "f", "as": "j"}}, {"$count": "n"}]}}])
            == [{"x": [{"n": 2}]}],
        "facet_pipeline": lambda: agg("a", [{"$facet": {"x": [{"$lookup": {
            "from": "b", "let": {"kk": "$k"}, "pipeline": [{"$match": {"$expr": {"$eq": ["$f", "$$kk"]}}}],
            "as": "j"}}, {"$unwind": "$j"}, {"$count": "n"}]}}]) == [{"x": [{"n": 2}]}],
        "graphLookup": lambda: [len(d["g"]) for d in agg("a", [
            {"$graphLookup": {"from": "b", "startWith": "$k", "connectFromField": "f",
                              "connectToField": "f", "as": "g", "maxDepth": 1}},
            {"$sort": {"_id": 1}}])] == [2, 0],
        "out": lambda: (agg("a", [{"$match": {"_id": 1}}, {"$out": "o1"}]) == []
                        and list(db.o1.find()) == [{"_id": 1, "k": 1}]),
        "merge": lambda: (agg("a", [{"$merge": {"into": "b", "on": "_id", "whenMatched": "merge",
                                                "whenNotMatched": "insert"}}]) == []
                          and db.b.count_documents({}) == 5),
        "renameCollection": lambda: client.admin.command(
            "renameCollection", f"{db_name}.a", to=f"{db_name}.a2", dropTarget=True)["ok"] == 1
            and db.a2.count_documents({}) == 2,
        "collStats": lambda: db.command("collStats", "b")["count"] == 3,
        "collStatsStage": lambda: agg("b", [{"$collStats": {"count": {}}}])[0]["count"]["count"] == 3,
    }
    try:
        for name, check in checks.items():
            try:
                if check():
                    found.add(name)
            except (PyMongoError, KeyError, IndexError, TypeError):
                pass
    finally:
        client.drop_database(db_name)
    return found
