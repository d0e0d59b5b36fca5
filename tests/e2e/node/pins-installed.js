// Exits 0 when every dependency in package.json beside this file (or in
// DIR, e.g. tests/e2e/node-latest) is installed in its node_modules at
// exactly its pinned version; otherwise lists the differences on stderr and
// exits 1. Used by scripts/install-deps.sh to decide whether `npm ci` must
// run.
//
//   node tests/e2e/node/pins-installed.js [DIR]
const path = require('path');

const dir = path.resolve(process.argv[2] ?? __dirname);
const pins = require(path.join(dir, 'package.json')).dependencies;
const wrong = [];
for (const [name, pinned] of Object.entries(pins)) {
  let installed = null;
  try {
    installed = require(path.join(dir, 'node_modules', name, 'package.json')).version;
  } catch {
    // not installed
  }
  if (installed !== pinned) wrong.push(`${name}: ${installed ?? 'missing'}, pinned ${pinned}`);
}
if (wrong.length) {
  console.error(wrong.join('\n'));
  process.exit(1);
}
