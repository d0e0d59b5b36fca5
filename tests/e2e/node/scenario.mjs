// The driver-matrix scenario with the official Node.js driver.
//
//   node scenario.mjs PLAN_JSON
//
// PLAN_JSON is {uri, db, compressed: {NAME: URI, ...}}; the steps, their
// collections and the JSON printed on stdout are specified once, in
// tests/e2e/python/test_driver_matrix.py, which runs this and judges what it
// prints (documents and operations: scenario-common.cjs). Documents are
// printed as canonical Extended JSON, so their BSON types survive. A step
// that fails is reported, not thrown: the exit code is non-zero only if the
// script itself breaks.

import { BSON, MongoClient } from 'mongodb';
import common from './scenario-common.cjs';

const { EJSON } = BSON;
const {
  cursorDocs, BULK_ORDERED, BULK_UNORDERED, compressedDocs, readings, bulkCounts, bulkFailure,
  errorSeen,
} = common;

const plan = JSON.parse(process.argv[2] ?? 'null');
if (!plan?.uri || !plan?.db || !plan?.compressed) {
  console.error('usage: node scenario.mjs \'{"uri": ..., "db": ..., "compressed": {...}}\'');
  process.exit(2);
}

async function step(fn) {
  try {
    return { ok: true, ...(await fn()) };
  } catch (err) {
    return { ok: false, error: errorSeen(err) };
  }
}

async function crud(db) {
  const coll = db.collection('crud');
  const one = await coll.insertOne({ _id: 'a', n: 1, tags: ['x', 'y'] });
  const many = await coll.insertMany([{ _id: 'b', n: 2 }, { _id: 'c', n: 3 }]);
  const foundGte2 = await coll.find({ n: { $gte: 2 } }).sort({ _id: 1 }).toArray();
  const u1 = await coll.updateOne({ _id: 'a' }, { $inc: { n: 10 } });
  const um = await coll.updateMany({ n: { $lt: 5 } }, { $set: { small: true } });
  const d1 = await coll.deleteOne({ _id: 'b' });
  return {
    insertOneId: one.insertedId,
    insertManyCount: many.insertedCount,
    foundGte2,
    updateOne: { matched: u1.matchedCount, modified: u1.modifiedCount },
    updateMany: { matched: um.matchedCount, modified: um.modifiedCount },
    deleteOne: d1.deletedCount,
    final: await coll.find({}).sort({ _id: 1 }).toArray(),
    count: await coll.countDocuments({}),
  };
}

async function cursor(db) {
  const coll = db.collection('cursor');
  await coll.insertMany(cursorDocs());
  const found = coll.find({}).sort({ _id: 1 }).batchSize(50);
  const ids = [];
  const batches = [];
  let left = 0;  // documents of the current batch not yet returned
  for (let doc = await found.next(); doc !== null; doc = await found.next()) {
    if (left === 0) batches.push(found.bufferedCount() + 1);
    left = found.bufferedCount();
    ids.push(doc._id);
  }
  return { ids, batches };
}

async function bulkWrite(coll, operations, ordered) {
  try {
    return bulkCounts(await coll.bulkWrite(operations, { ordered }), []);
  } catch (err) {
    return bulkFailure(err);
  }
}

async function bulk(db) {
  const coll = db.collection('bulk');
  const ordered = await bulkWrite(coll, BULK_ORDERED, true);
  const unordered = await bulkWrite(coll, BULK_UNORDERED, false);
  return { ordered, unordered, final: await coll.find({}).sort({ _id: 1 }).toArray() };
}

async function compressed(name, uri) {
  const client = new MongoClient(uri, { serverSelectionTimeoutMS: 10000 });
  try {
    const coll = client.db(plan.db).collection(`compressed_${name}`);
    const inserted = (await coll.insertMany(compressedDocs())).insertedCount;
    return { inserted, found: await coll.find({}).sort({ _id: 1 }).toArray() };
  } finally {
    await client.close();
  }
}

async function bucket(db) {
  const coll = db.collection('readings');
  const inserted = [];
  for (const doc of readings()) {
    const { insertedId } = await coll.insertOne({ ...doc });
    inserted.push({ _id: insertedId, ...doc });
  }
  return { inserted, found: await coll.find({}).sort({ at: 1 }).toArray() };
}

async function refusal(db) {
  const coll = db.collection('readings');
  const attempt = await step(async () => {
    const r = await coll.updateOne({ sensor: 's1' }, { $set: { temp: 99.5 } });
    return { matched: r.matchedCount, modified: r.modifiedCount };
  });
  return { attempt, after: await coll.find({}).sort({ at: 1 }).toArray() };
}

const client = new MongoClient(plan.uri, { serverSelectionTimeoutMS: 10000 });
const out = {};
try {
  const db = client.db(plan.db);
  out.crud = await step(() => crud(db));
  out.cursor = await step(() => cursor(db));
  out.bulk = await step(() => bulk(db));
  out.compression = {};
  for (const [name, uri] of Object.entries(plan.compressed)) {
    out.compression[name] = await step(() => compressed(name, uri));
  }
  out.bucket = await step(() => bucket(db));
  out.refusal = await step(() => refusal(db));
} finally {
  await client.close();
}
console.log(EJSON.stringify(out, { relaxed: false }));
