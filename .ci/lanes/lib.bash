# Shared by the lanes: Node from the npm registry, the packed package, and a scratch application
# that installs it with a plain `npm install` and runs this checkout's tests against it.
# Sourced, never run. Every failure ends the lane with a non-zero status: a lane that cannot run
# fails, it never skips.
set -euo pipefail

lane_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
lane_work="$(mktemp -d "${TMPDIR:-/tmp}/idem-lane-XXXXXX")"
trap 'rm -rf "$lane_work"' EXIT

lane_say() { printf '\n== %s\n' "$*"; }

# Puts Node <major> first on PATH, native modules building against its headers.
lane_use_node() {
  local bin
  bin="$("$lane_root/.ci/install-node" "$1")"
  export PATH="$bin:$PATH"
  export npm_config_nodedir
  npm_config_nodedir="${bin%/bin}"
  lane_say "Node $(node --version), npm $(npm --version)"
}

# The packed package, copied into the lane's folder; prints its path. `.ci/run` packs once and
# names that tarball in IDEM_PACKED_TARBALL; a lane run alone by hand packs its own (.ci/pack).
lane_pack() {
  if [ -n "${IDEM_PACKED_TARBALL:-}" ]; then
    cp "$IDEM_PACKED_TARBALL" "$lane_work/drizzle-idempotency-given.tgz" &&
      echo "$lane_work/drizzle-idempotency-given.tgz"
    return
  fi
  "$lane_root/.ci/pack" "$lane_work"
}

# lane_npm_install <dir> [npm install arguments...]: npm install in <dir>, tried three times.
# A package's newest release can reach the registry before a dependency it names does (mysql2
# 3.25.0 asked for sql-escaper ^1.10.0 minutes before it could be fetched): that fails with
# ETARGET, and a later try that revalidates every cached manifest (--prefer-online) installs it.
# Any other failure ends the lane at once.
lane_npm_install() {
  local dir="$1" try log
  shift
  log="$lane_work/npm-install.log"
  for try in 1 2 3; do
    if (cd "$dir" && npm install --no-audit --no-fund --loglevel=error --prefer-online "$@" \
      2>"$log"); then
      cat "$log" >&2
      return 0
    fi
    cat "$log" >&2
    grep -q 'ETARGET' "$log" || return 1
    [ "$try" = 3 ] && return 1
    echo "lane: a version npm was asked for is not in the registry yet; trying again in 60 s" >&2
    sleep 60
  done
}

# lane_app <dir> <tarball> [name@version ...]: a scratch application with the tarball and this
# checkout's dev dependencies (the tools the tests need), the named versions in their place.
lane_app() {
  local dir="$1" tarball="$2"
  shift 2
  mkdir -p "$dir"
  node "$lane_root/.ci/lanes/app-manifest.mjs" "$lane_root/package.json" "$tarball" "$@" \
    >"$dir/package.json"
  lane_npm_install "$dir" >&2
  # This checkout's tests, run against the installed package: the vitest config maps every
  # public entry point the tests import from src/ to the package (see app-vitest.config.ts).
  cp -R "$lane_root/test" "$lane_root/src" "$lane_root/drizzle" "$dir/"
  cp "$lane_root/.ci/lanes/app-vitest.config.ts" "$dir/vitest.config.ts"
  cp "$lane_root/tsconfig.json" "$dir/tsconfig.json"
}

# Prints the versions the application installed for the packages named (read from their
# manifests on disk: a package's exports map need not expose its package.json).
lane_versions() {
  local dir="$1" name
  shift
  for name in "$@"; do
    printf '   %s %s\n' "$name" \
      "$(node -p 'require(process.argv[1]).version' "$dir/node_modules/$name/package.json")"
  done
}

# lane_vitest <dir> <files...>: runs the test files in the application against its package.
lane_vitest() {
  local dir="$1" tarball
  shift
  tarball="$(ls "$lane_work"/drizzle-idempotency-*.tgz)"
  # vitest takes a missing file as a filter that matches nothing: a renamed test file would drop
  # out of the lane without a word.
  local arg
  for arg in "$@"; do
    case "$arg" in
      *.test.ts) [ -f "$dir/$arg" ] || { echo "lane: no test file $arg" >&2; return 1; } ;;
    esac
  done
  (cd "$dir" && IDEM_PACKED_TARBALL="$tarball" npx vitest run "$@")
}
