import { builtinModules } from 'node:module';
import { join, relative } from 'node:path';
import { build, type Plugin } from 'esbuild';
import { installedManifest, repoRoot } from '../package/scratch-app.js';

// A Worker names the source (so tsc checks it); here each source entry becomes the packed
// package's subpath that builds it ('src/http/hono.ts' → 'drizzle-idempotency/hono'), so what
// runs in workerd is the package as published.
function packagedEntries(worker: string, app: string): Plugin {
  const { exports } = installedManifest(app);
  const subpathOf = new Map<string, string>();
  for (const [subpath, target] of Object.entries(exports)) {
    const file = JSON.stringify(target).match(/\.\/dist\/([^"]+)\.js"/)?.[1];
    if (file !== undefined) subpathOf.set(file, subpath);
  }
  return {
    name: 'packaged-entries',
    setup(bundle) {
      bundle.onResolve({ filter: /\/src\// }, async (args) => {
        if (args.importer !== worker) return undefined;
        const source = relative(join(repoRoot, 'src'), join(args.resolveDir, args.path));
        const subpath = subpathOf.get(source.replace(/\.js$/, ''));
        if (subpath === undefined) return { errors: [{ text: `${source} is no package entry` }] };
        const name = `drizzle-idempotency${subpath.slice(1)}`;
        const resolved = await bundle.resolve(name, { kind: 'import-statement', resolveDir: app });
        return resolved.errors.length > 0 ? { errors: resolved.errors } : { path: resolved.path };
      });
    },
  };
}

/**
 * Bundles the Worker at `worker` against the package installed in `app`, as wrangler does for a
 * Worker with nodejs_compat: one ES module, the workerd/worker/browser export conditions, and
 * Node's built-ins (and `cloudflare:` modules) left to the runtime. Without `app`, the source it
 * imports is bundled as it is, for a benchmark or a suite of the checkout rather than of the
 * packed package. `alias` replaces a package with a file (e.g. 'vitest' with a Worker's own).
 */
export async function bundleWorker(
  worker: string,
  app?: string,
  alias: Record<string, string> = {},
): Promise<string> {
  const result = await build({
    alias,
    entryPoints: [worker],
    bundle: true,
    write: false,
    format: 'esm',
    target: 'es2022',
    platform: 'neutral',
    conditions: ['workerd', 'worker', 'browser'],
    mainFields: ['browser', 'module', 'main'],
    external: ['node:*', 'cloudflare:*', ...builtinModules],
    plugins: app === undefined ? [] : [packagedEntries(worker, app)],
    logLevel: 'silent',
  });
  const [output] = result.outputFiles;
  if (output === undefined) throw new Error('esbuild wrote no bundle');
  return output.text;
}
