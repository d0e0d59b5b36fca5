// The driver-matrix scenario in mongosh, through its own shell API.
//
//   REMOLD_DRIVER_PLAN=PLAN_JSON mongosh --nodb --norc --quiet --file scenario-mongosh.js
//
// PLAN_JSON is {uri, db, compressed: {NAME: URI, ...}} (mongosh takes no
// script arguments, hence the environment variable); the steps, their
// collections and the JSON printed on stdout are specified once, in
// tests/e2e/python/test_driver_matrix.py, which runs this and judges what it
// prints (documents and operations: scenario-common.cjs). Documents are
// printed as canonical Extended JSON, so their BSON types survive. A step
// that fails is reported, not thrown.

const {
  cursorDocs, BULK_ORDERED, BULK_UNORDERED, compressedDocs, readings, bulkCounts, bulkFailure,
  errorSeen,
} = require(require('path').join(__dirname, 'scenario-common.cjs'));

const plan = JSON.parse(process.env.REMOLD_DRIVER_PLAN || 'null');
if (!plan || !plan.uri || !plan.db || !plan.compressed) {
  throw new Error('REMOLD_DRIVER_PLAN must be {"uri": ..., "db": ..., "compressed": {...}}');
}

function step(fn) {
  try {
    return Object.assign({ ok: true }, fn());
  } catch (err) {
    return { ok: false, error: errorSeen(err) };
  }
}

function crud(db) {
  const coll = db.getCollection('crud');
  const one = coll.insertOne({ _id: 'a', n: 1, tags: ['x', 'y'] });
  const many = coll.insertMany([{ _id: 'b', n: 2 }, { _id: 'c', n: 3 }]);
  const foundGte2 = coll.find({ n: { $gte: 2 } }).sort({ _id: 1 }).toArray();
  const u1 = coll.updateOne({ _id: 'a' }, { $inc: { n: 10 } });
  const um = coll.updateMany({ n: { $lt: 5 } }, { $set: { small: true } });
  const d1 = coll.deleteOne({ _id: 'b' });
  return {
    insertOneId: one.insertedId,
    insertManyCount: Object.keys(many.insertedIds).length,
    foundGte2,
    updateOne: { matched: u1.matchedCount, modified: u1.modifiedCount },
    updateMany: { matched: um.matchedCount, modified: um.modifiedCount },
    deleteOne: d1.deletedCount,
    final: coll.find({}).sort({ _id: 1 }).toArray(),
    count: coll.countDocuments({}),
  };
}

function cursor(db) {
  const coll = db.getCollection('cursor');
  coll.insertMany(cursorDocs());
  const found = coll.find({}).sort({ _id: 1 }).batchSize(50);
  const ids = [];
  const batches = [];
  let left = 0;  // documents of the current batch not yet returned
  while (found.hasNext()) {
    const doc = found.next();
    if (left === 0) batches.push(found.objsLeftInBatch() + 1);
    left = found.objsLeftInBatch();
    ids.push(doc._id);
  }
  return { ids, batches };
}

function bulkWrite(coll, operations, ordered) {
  try {
    return bulkCounts(coll.bulkWrite(operations, { ordered }), []);
  } catch (err) {
    return bulkFailure(err);
  }
}

function bulk(db) {
  const coll = db.getCollection('bulk');
  const ordered = bulkWrite(coll, BULK_ORDERED, true);
  const unordered = bulkWrite(coll, BULK_UNORDERED, false);
  return { ordered, unordered, final: coll.find({}).sort({ _id: 1 }).toArray() };
}

function compressed(name, uri) {
  const client = Mongo(uri);
  try {
    const coll = client.getDB(plan.db).getCollection('compressed_' + name);
    const inserted = Object.keys(coll.insertMany(compressedDocs()).insertedIds).length;
    return { inserted, found: coll.find({}).sort({ _id: 1 }).toArray() };
  } finally {
    client.close();
  }
}

function bucket(db) {
  const coll = db.getCollection('readings');
  const inserted = [];
  for (const doc of readings()) {
    const result = coll.insertOne(Object.assign({}, doc));
    inserted.push(Object.assign({ _id: result.insertedId }, doc));
  }
  return { inserted, found: coll.find({}).sort({ at: 1 }).toArray() };
}

function refusal(db) {
  const coll = db.getCollection('readings');
  const attempt = step(() => {
    const r = coll.updateOne({ sensor: 's1' }, { $set: { temp: 99.5 } });
    return { matched: r.matchedCount, modified: r.modifiedCount };
  });
  return { attempt, after: coll.find({}).sort({ at: 1 }).toArray() };
}

const client = Mongo(plan.uri);
const out = {};
try {
  const db = client.getDB(plan.db);
  out.crud = step(() => crud(db));
  out.cursor = step(() => cursor(db));
  out.bulk = step(() => bulk(db));
  out.compression = {};
  for (const name of Object.keys(plan.compressed)) {
    out.compression[name] = step(() => compressed(name, plan.compressed[name]));
  }
  out.bucket = step(() => bucket(db));
  out.refusal = step(() => refusal(db));
} finally {
  client.close();
}
print(EJSON.stringify(out, { relaxed: false }));
