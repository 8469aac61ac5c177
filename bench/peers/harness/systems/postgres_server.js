// The server side shared by the peers that run on PostgreSQL (pg-boss, graphile-worker):
// start/stop, and the database's size on disk per scheduled job (their jobs live in tables).
'use strict';

const servers = require('../servers');

const postgresServer = () => ({
  async start(ctx) {
    const procs = [await servers.startPostgres(ctx.ports.postgres, ctx.dir)];
    return { procs, conn: { postgresUrl: servers.postgresUrl(ctx.ports.postgres) }, pgPort: ctx.ports.postgres };
  },
  async stop(state) {
    for (const p of state.procs) await servers.stopProcess(p);
  },
  // A PostgreSQL queue keeps its jobs in tables: the memory workload reads the database's growth.
  memoryBytes: (state) => servers.postgresBytes(state.pgPort),
  diskBytes: () => null,
  // The server is a process per connection: no one figure is its peak, so none is given.
  peakServerBytes: () => null,
});

module.exports = { postgresServer };
