// One consumer process: node consumer.js SYSTEM CONN_JSON OPTS_JSON RECORD_FILE
// Consumes through the system's own client, records every processed job (lib.RecordFile)
// before acknowledging it, and tells the driver how many it has recorded.
'use strict';

const { system } = require('./systems');
const { nowMs, idOf, RecordFile, work } = require('./lib');

const [name, connJson, optsJson, recordPath] = process.argv.slice(2);
const conn = JSON.parse(connJson);
const opts = JSON.parse(optsJson);
const records = new RecordFile(recordPath);
let recorded = 0;

function onBatch(payloads) {
  const at = nowMs();
  const entries = payloads.map((p) => [idOf(p), at]);
  for (let i = 0; i < payloads.length; ++i) work(opts.workMicros);
  records.write(entries);
  recorded += entries.length;
}

setInterval(() => process.send({ recorded }), 50);
system(name).consume(conn, opts, onBatch, () => process.send({ ready: true })).catch((e) => {
  console.error(`consumer ${name}: ${e.stack || e.message}`);
  process.exit(1);
});
