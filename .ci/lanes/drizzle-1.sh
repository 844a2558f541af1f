#!/usr/bin/env bash
# Lane: Drizzle 1.0 (its newest release candidate until the final release ships) over the packed
# package, on the active LTS with better-sqlite3 13. Runs the store and lease contracts, the HTTP
# behaviour suite, the packed-package tests (drizzle-kit generate and migrate over a schema that
# re-exports the keys table), the stores' refusal of a database they do not recognise and a
# consumer of every entry point typechecked with skipLibCheck: false against drizzle 1.0
# (test/package/consumer-types.test.ts); then proves a file store keeps its rows across a restart.
source "$(dirname "$0")/lib.bash"

# The newest 1.x release, or while there is none the newest 1.0 release candidate.
newest_1() {
  npm view "$1" versions --json | node -e '
    const all = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
    const release = all.filter((v) => /^1\.\d+\.\d+$/.test(v));
    const rc = all.filter((v) => /^1\.0\.0-rc\.\d+$/.test(v));
    const rcNumber = (v) => Number(v.split(".").pop());
    const pick = release.length > 0 ? release.at(-1) : rc.sort((a, b) => rcNumber(a) - rcNumber(b)).at(-1);
    if (pick === undefined) process.exit(1);
    console.log(pick);'
}

tarball="$(lane_pack)"
lane_use_node 24
orm="$(newest_1 drizzle-orm)"
kit="$(newest_1 drizzle-kit)"
app="$lane_work/drizzle-1"
lane_app "$app" "$tarball" "drizzle-orm@$orm" "drizzle-kit@$kit" better-sqlite3@13
cp -R "$lane_root/.ci/lanes/drizzle-1/." "$app/lane/"
lane_say "Drizzle 1.0 lane: tested with"
lane_versions "$app" drizzle-orm drizzle-kit better-sqlite3 @libsql/client @electric-sql/pglite pg postgres express fastify hono @nestjs/core typescript

lane_say 'the store and lease contracts, the HTTP behaviour suite, the packed package and its types'
lane_vitest "$app" test/store/sqlite-contract.test.ts \
  test/store/pg-contract.test.ts test/http/behaviour.test.ts test/package/pack.test.ts \
  test/package/push.test.ts test/open/unrecognised-pg-mysql-database.test.ts \
  test/package/consumer-types.test.ts

lane_say 'a file store keeps its rows across a restart'
(cd "$app" && node lane/restart.mjs write "$lane_work/restart.db" && node lane/restart.mjs read "$lane_work/restart.db")
