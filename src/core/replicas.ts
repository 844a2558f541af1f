/**
 * A drizzle database made by `withReplicas(primary, replicas)`: its `select` goes to a replica,
 * its writes to `$primary`.
 */
interface WithReplicas<D> {
  readonly $primary: D;
  readonly $replicas: readonly D[];
}

/**
 * The database every statement that decides or writes must run on: the primary of a
 * `withReplicas` database, or the database itself. A replica lags its primary, so a claim, a
 * finish or a purge read there would see an old row (a finished key as in progress, an expired
 * answer as missing) and a write there is refused.
 */
export function primaryOf<D>(db: D): D {
  return (db as Partial<WithReplicas<D>>).$primary ?? db;
}

/** The replicas of a `withReplicas` database; none for a plain one. */
export function replicasOf<D>(db: D): readonly D[] {
  return (db as Partial<WithReplicas<D>>).$replicas ?? [];
}
