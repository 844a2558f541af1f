#!/usr/bin/env bash
# Lane: the packed package installed beside the newest release within each peer range (Express,
# Fastify, Hono, NestJS, pg, postgres, mysql2, @libsql/client, PGlite, Neon serverless,
# PlanetScale, the OpenTelemetry API), as an application installing it today gets them. Runs the
# adapters' HTTP behaviour suites, the store contracts (on the servers too), the OpenTelemetry
# tests and the install test's NestJS application there; then installs Express 4, Fastify 4 and the Nest 11 minor
# before the newest over them and runs the HTTP suites again. Prints the versions it tested.
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
  test/store/sqlite-contract.test.ts \
  test/store/pg-contract.test.ts test/store/mysql-contract.test.ts \
  test/runtimes/neon-http.pg-server.test.ts test/runtimes/planetscale.mysql-server.test.ts \
  test/observe/requests.test.ts test/observe/store.test.ts
# Of the install test, only the NestJS application links this application's peers: the plain
# installs fetch their own pinned Express and Fastify from the registry (here even with
# legacy-peer-deps, so weaker than in npm test, which runs them on this very tarball), and the
# shipped documentation does not depend on a peer.
lane_vitest "$app" test/package/install.test.ts -t 'NestJS application on CommonJS'

previous_list="$(resolve previous)"
mapfile -t previous <<<"$previous_list"
lane_npm_install "$app" --no-save "${previous[@]}" >&2
# What npm placed, not what was asked for: a pass that silently ran the newest again would prove
# nothing of the older majors.
for pin in "${previous[@]}"; do
  name="${pin%@*}"
  installed="$(node -p 'require(process.argv[1]).version' "$app/node_modules/$name/package.json")"
  if [ "$installed" != "${pin##*@}" ]; then
    echo "newest-peers: asked for $pin, npm installed $name $installed" >&2
    exit 1
  fi
done
lane_say "Express 4, Fastify 4 and the Nest minor before: the HTTP suites"
# The stores are those of the first pass: the behaviour suite runs these adapters on one of them.
lane_vitest "$app" test/http/behaviour.test.ts -t '(Express|Fastify|NestJS).* on SQLite file'
lane_vitest "$app" test/http/adapters.test.ts test/http/nestjs.test.ts \
  test/http/nestjs-redirect.test.ts

lane_say "newest-peers: passed with"
node -e '
  const [newest, previous] = process.argv.slice(1).map((file) => require(file));
  for (const [name, version] of Object.entries(newest)) {
    const also = previous[name] === undefined ? "" : ` and ${previous[name]}`;
    console.log(`   ${name} ${version}${also}`);
  }
' "$lane_work/newest.versions.json" "$lane_work/previous.versions.json"
