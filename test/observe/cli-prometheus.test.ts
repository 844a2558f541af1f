import { describe, expect, it } from 'vitest';
import { SWEEP_NOW, seedBacklog } from '../support/backlog.js';
import { idem } from '../support/cli.js';
import { freshDbPath, tempDir } from '../support/temp.js';

const dir = tempDir('idem-cli-prometheus-');

describe('idem stats --prometheus', () => {
  it('prints the gauges at --now in the Prometheus text format', async () => {
    const path = freshDbPath(dir);
    seedBacklog(path, { expired: 3, live: 2, pending: 4, stalePending: 1 });
    const result = await idem(['stats', '--db', path, '--now', String(SWEEP_NOW), '--prometheus']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const samples = result.stdout.split('\n').filter((line) => /^[a-z]/.test(line));
    expect(samples.slice(0, 4)).toEqual([
      'idempotency_pending_keys 5',
      'idempotency_done_keys 5',
      'idempotency_expired_keys 3',
      'idempotency_stale_pending_keys 1',
    ]);
    // A store that keeps leases counts lapsed and unrecorded keys too: none in this backlog.
    expect(samples.slice(4)).toEqual(
      samples.length > 4
        ? ['idempotency_lapsed_pending_keys 0', 'idempotency_unrecorded_keys 0']
        : [],
    );
    expect(result.stdout).toContain('# TYPE idempotency_expired_keys gauge\n');
  });

  it('refuses --prometheus together with --json', async () => {
    const path = freshDbPath(dir);
    seedBacklog(path, { expired: 0, live: 1 });
    const result = await idem(['stats', '--db', path, '--json', '--prometheus']);
    expect(result.code).not.toBe(0);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/cannot be used with/);
  });
});
