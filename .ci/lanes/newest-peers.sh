#!/usr/bin/env bash
# Lane: the packed package installed beside the newest release within each peer range (Express,
# Fastify, Hono, NestJS, pg, postgres, mysql2, @libsql/client, PGlite, Neon serverless,
# PlanetScale, the OpenTelemetry API), as an application installing it today gets them. Runs the
# adapters' HTTP behaviour suites, the store contracts (on the servers too), the OpenTelemetry
# tests and the install test there. Prints the versions it tested. The older majors (Express 4,
# Fastify 4) are not run here yet: the behaviour suite's throwing async handlers need Express 4's
# explicit next(error), which its test servers do not pass.
source "$(dirname "$0")/lib.bash"

for var in DATABASE_URL MYSQL_URL; do
  if [ -z "${!var:-}" ]; then
    echo "newest-peers: $var is not set; the lane runs the store contract on the server." >&2
    exit 1
  fi
done

# The OpenTelemetry SDKs the tests read spans and metrics with may lag the newest API in their
# peer ranges; the tarball's own peer ranges are checked by the install test's plain install.
export npm_config_legacy_peer_deps=true

resolve() {
  node "$lane_root/.ci/lanes/newest-peers-versions.mjs" "$lane_root/package.json" "$lane_work" "$1"
}

tarball="$(lane_pack)"
newest_list="$(resolve newest)"
mapfile -t newest <<<"$newest_list"
app="$lane_work/newest-peers"
lane_app "$app" "$tarball" "${newest[@]}"
lane_say "newest peers: the suites"
lane_vitest "$app" test/http/behaviour.test.ts test/http/adapters.test.ts \
  test/http/nestjs.test.ts test/http/nestjs-redirect.test.ts \
  test/store/sqlite-contract.test.ts test/store/libsql-contract.test.ts \
  test/store/pg-contract.test.ts test/store/mysql-contract.mysql-server.test.ts \
  test/runtimes/neon-http.pg-server.test.ts test/runtimes/planetscale.mysql-server.test.ts \
  test/observe/requests.test.ts test/observe/store.test.ts test/package/install.test.ts

lane_say "newest-peers: passed with"
node -e '
  const newest = require(process.argv[1]);
  for (const [name, version] of Object.entries(newest)) console.log(`   ${name} ${version}`);
' "$lane_work/newest.versions.json"
