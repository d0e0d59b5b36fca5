// Exits 0 when every dependency in package.json beside this file is
// installed in node_modules at exactly its pinned version; otherwise lists
// the differences on stderr and exits 1. Used by scripts/install-deps.sh to
// decide whether `npm ci` must run.
//
//   node tests/e2e/node/pins-installed.js
const path = require('path');

const pins = require(path.join(__dirname, 'package.json')).dependencies;
const wrong = [];
for (const [name, pinned] of Object.entries(pins)) {
  let installed = null;
  try {
    installed = require(path.join(__dirname, 'node_modules', name, 'package.json')).version;
  } catch {
    // not installed
  }
  if (installed !== pinned) wrong.push(`${name}: ${installed ?? 'missing'}, pinned ${pinned}`);
}
if (wrong.length) {
  console.error(wrong.join('\n'));
  process.exit(1);
}
