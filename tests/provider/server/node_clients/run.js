// Shared by the client scripts: run named steps in order, each result or error kept under its name,
// then print them all as one JSON line (what test_node_clients.py reads) and exit: a socket a client
// left open (the AWS SDK's MetadataService does not read an error answer's body) would otherwise hold
// Node until the server closes the idle connection.
'use strict';
module.exports = async function run(steps) {
  const out = {};
  for (const [name, step] of steps) {
    try {
      out[name] = await step();
    } catch (error) {
      out[name] = {error: `${error && error.name}: ${String(error && error.message).slice(0, 400)}`,
                   status: error && error.response ? error.response.status : undefined};
    }
  }
  process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0));
};
