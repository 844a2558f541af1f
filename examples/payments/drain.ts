import type { NextFunction, Request, RequestHandler, Response } from 'express';

/**
 * The idempotent requests a process holds a claim for, so that a graceful stop closes the store
 * only once each claim is finished or released. Connections are not enough to tell: a connection
 * dropped at the end of the grace period leaves its request's handler running, and a store closed
 * under it leaves the key pending (retries get 409 until its lease lapses).
 */
export interface Drain {
  /**
   * Placed before the routes: once stopping, a new request is answered 503 with
   * `Connection: close` before anything is claimed, so no claim starts after the stop began.
   */
  readonly refuseWhenStopping: RequestHandler;
  /** Wraps an idempotent route: its request counts until the route's work (claim to answer) ends. */
  track(route: RequestHandler): RequestHandler;
  /** Starts the stop; resolves once every tracked request has ended, however it ended. */
  stop(): Promise<void>;
  /** How many tracked requests are running. */
  readonly running: number;
}

/** A fresh {@link Drain}. */
export function createDrain(): Drain {
  const running = new Set<Promise<unknown>>();
  let stopping = false;
  return {
    refuseWhenStopping: (_req: Request, res: Response, next: NextFunction) => {
      if (!stopping) {
        next();
        return;
      }
      res
        .status(503)
        .set({ connection: 'close', 'retry-after': '1' })
        .type('application/problem+json')
        .send(
          JSON.stringify({
            type: 'urn:payments-example:problem:stopping',
            title: 'Service stopping',
            status: 503,
            detail: 'this instance is shutting down; retry the request',
          }),
        );
    },
    track:
      (route) =>
      (req: Request, res: Response, next: NextFunction): Promise<unknown> => {
        const work = Promise.resolve(route(req, res, next));
        running.add(work);
        const settled = () => {
          running.delete(work);
        };
        work.then(settled, settled);
        return work;
      },
    async stop() {
      stopping = true;
      // A request tracked while waiting is waited for too.
      while (running.size > 0) await Promise.allSettled([...running]);
    },
    get running() {
      return running.size;
    },
  };
}
