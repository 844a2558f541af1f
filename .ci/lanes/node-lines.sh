#!/usr/bin/env bash
# Lane: the packed package on the Node lines beside the active LTS (22, in maintenance, and 26,
# current), installed with a plain `npm install` beside better-sqlite3 13, which needs Node 22 or
# later. Runs the packed-package tests and the store and lease contracts there.
source "$(dirname "$0")/lib.bash"

tarball="$(lane_pack)"
for major in 22 26; do
  (
    lane_use_node "$major"
    app="$lane_work/node-$major"
    lane_app "$app" "$tarball" better-sqlite3@13
    lane_say "Node $major: tested with"
    lane_versions "$app" better-sqlite3 drizzle-orm drizzle-kit @libsql/client @electric-sql/pglite vitest
    lane_vitest "$app" test/package/pack.test.ts test/store/sqlite-contract.test.ts \
      test/store/pg-contract.test.ts
  )
done
