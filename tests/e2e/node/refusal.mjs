// What a Node.js application sees of remold's refusals.
//
//   node refusal.mjs CONNECTION_STRING DB BUCKETED_COLLECTION PLAIN_COLLECTION
//
// Uses the connection string as given (so retryWrites stays at the driver's
// default, true). Runs, through the official driver, an ordinary insertOne +
// find on PLAIN_COLLECTION and on BUCKETED_COLLECTION (a collection with a
// bucket rule, where remold stores readings inside buckets), then operations
// remold refuses there: updateOne, findOneAndUpdate, createIndex.
// Prints one JSON object, each step either {ok: true, ...} or {ok: false,
// name, code, codeName, message} exactly as the driver hands the error to the
// application. Exits 0 whatever the steps did; non-zero only if the script
// itself breaks.

import { MongoClient } from 'mongodb';

const [uri, dbName, bucketed, plain] = process.argv.slice(2);
if (!uri || !dbName || !bucketed || !plain) {
  console.error('usage: node refusal.mjs CONNECTION_STRING DB BUCKETED_COLLECTION PLAIN_COLLECTION');
  process.exit(2);
}

function seen(err) {
  return {
    ok: false,
    name: err?.name ?? null,
    code: err?.code ?? null,
    codeName: err?.codeName ?? null,
    message: err?.message ?? String(err),
  };
}

async function step(fn) {
  try {
    return { ok: true, ...(await fn()) };
  } catch (err) {
    return seen(err);
  }
}

const client = new MongoClient(uri, { serverSelectionTimeoutMS: 10000 });
const out = { retryWrites: client.options.retryWrites };
try {
  const db = client.db(dbName);
  const plainColl = db.collection(plain);
  const readings = db.collection(bucketed);
  const at = new Date(Date.UTC(2024, 2, 4, 0, 5));

  out.plainInsertFind = await step(async () => {
    const { insertedId } = await plainColl.insertOne({ name: 'plain', n: 1 });
    const found = await plainColl.find({ _id: insertedId }).toArray();
    return { found: found.map(({ name, n }) => ({ name, n })) };
  });
  out.bucketInsertFind = await step(async () => {
    await readings.insertOne({ sensor: 's1', at, temp: 21.5 });
    const found = await readings.find({ sensor: 's1' }).toArray();
    return { found: found.map(({ sensor, temp }) => ({ sensor, temp })) };
  });
  out.updateOne = await step(async () => {
    const r = await readings.updateOne({ sensor: 's1' }, { $set: { temp: 99 } });
    return { matchedCount: r.matchedCount, modifiedCount: r.modifiedCount };
  });
  out.findOneAndUpdate = await step(async () => {
    const r = await readings.findOneAndUpdate({ sensor: 's1' }, { $set: { temp: 99 } });
    return { value: r };
  });
  out.createIndex = await step(async () => ({ name: await readings.createIndex({ temp: 1 }) }));
  out.afterRefusals = await step(async () => {
    const found = await readings.find({ sensor: 's1' }).toArray();
    return { found: found.map(({ sensor, temp }) => ({ sensor, temp })) };
  });
} finally {
  await client.close();
}
console.log(JSON.stringify(out));
