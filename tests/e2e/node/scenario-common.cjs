// What the two JavaScript runs of the driver-matrix scenario share
// (scenario.mjs with the Node.js driver, scenario-mongosh.js in mongosh,
// whose shell API is synchronous where the driver's is not): the documents
// and operations of the steps, and the shape of what they report. The steps
// are specified in tests/e2e/python/test_driver_matrix.py.
'use strict';

const T0 = Date.UTC(2024, 2, 4);
const MINUTE = 60 * 1000;

function cursorDocs() {
  return Array.from({ length: 250 }, (_, i) => ({ _id: i, pad: 'p'.repeat(100) }));
}

const BULK_ORDERED = [
  { insertOne: { document: { _id: 1, k: 'a', n: 1 } } },
  { insertOne: { document: { _id: 2, k: 'b', n: 2 } } },
  { insertOne: { document: { _id: 3, k: 'c', n: 3 } } },
  { updateOne: { filter: { _id: 1 }, update: { $inc: { n: 10 } } } },
  { updateMany: { filter: { n: { $lt: 5 } }, update: { $set: { flag: true } } } },
  { deleteOne: { filter: { _id: 3 } } },
  { replaceOne: { filter: { _id: 2 }, replacement: { k: 'B', n: 20 } } },
  { updateOne: { filter: { _id: 4 }, update: { $set: { k: 'd' } }, upsert: true } },
];

const BULK_UNORDERED = [
  { insertOne: { document: { _id: 2, k: 'duplicate' } } },
  { insertOne: { document: { _id: 5, k: 'e', n: 5 } } },
  { updateOne: { filter: { _id: 2 }, update: { $set: { u: true } } } },
  { deleteOne: { filter: { _id: 1 } } },
];

function compressedDocs() {
  return Array.from({ length: 20 }, (_, i) => ({ _id: i, text: `row ${i} ${'compressible '.repeat(20)}` }));
}

function readings() {
  return Array.from({ length: 12 }, (_, i) => ({
    sensor: `s${1 + (i % 2)}`,
    at: new Date(T0 + i * 10 * MINUTE),
    temp: 20.25 + i,
  }));
}

// A bulk write's result (or, when it failed, its partial result and errors).
function bulkCounts(result, writeErrors) {
  return {
    inserted: result.insertedCount,
    matched: result.matchedCount,
    modified: result.modifiedCount,
    deleted: result.deletedCount,
    upserted: result.upsertedCount,
    writeErrors: writeErrors.map((e) => ({ index: e.index, code: e.code })),
  };
}

// A bulk write error carries the partial result; anything else is rethrown.
function bulkFailure(err) {
  if (!err || !err.result || err.writeErrors === undefined) throw err;
  return bulkCounts(err.result, [].concat(err.writeErrors));
}

// An error as the driver hands it to the application.
function errorSeen(err) {
  return {
    kind: (err && err.constructor && err.constructor.name) || typeof err,
    code: err && err.code !== undefined ? err.code : null,
    codeName: (err && err.codeName) || null,
    message: (err && err.message) || String(err),
  };
}

module.exports = {
  cursorDocs, BULK_ORDERED, BULK_UNORDERED, compressedDocs, readings, bulkCounts, bulkFailure,
  errorSeen,
};
