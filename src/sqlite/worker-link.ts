import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { DeploymentFinding } from '../core/deployment.js';
import { StoreClosedError } from '../core/errors.js';
import { StoreThreadExitedError } from './worker-errors.js';
import {
  type FromWorker,
  fromWire,
  type StatementName,
  type ToWorker,
  type WorkerCall,
  type WorkerOpenData,
  type WorkerResult,
} from './worker-protocol.js';

interface Waiting {
  readonly resolve: (value: unknown) => void;
  readonly reject: (reason: unknown) => void;
}

// A worker inherits the process's flags, but `--input-type` (of `node --input-type=module -e …`)
// applies to a string entry only and makes Node refuse the worker's file entry.
function threadArgv(): string[] {
  const argv: string[] = [];
  const flags = process.execArgv;
  for (let index = 0; index < flags.length; index++) {
    const flag = flags[index] as string;
    if (flag === '--input-type') index++;
    else if (!flag.startsWith('--input-type=')) argv.push(flag);
  }
  return argv;
}

// The worker's entry sits beside this module: `worker-thread.cjs` beside both builds,
// `worker-thread.ts` in the sources. The thread runs the CommonJS build whichever build opened the
// store: nothing but messages crosses to it, and Node's ES module loader resolves each of
// drizzle-orm's files against that package's large manifest, which made the thread start in
// ~620 ms against ~130 ms for require (Node 24, this machine). Node does not apply a loader to a
// worker's own entry, so from the sources (tests, tsx scripts) a small bootstrap registers tsx in
// the worker first and then imports the entry.
function startWorker(data: WorkerOpenData): Worker {
  // The CommonJS build's shim of import.meta.url names the shared chunk it sits in, not this
  // module's file: there, __filename does.
  const here = typeof __filename === 'string' ? pathToFileURL(__filename).href : import.meta.url;
  if (!here.endsWith('.ts')) {
    const entry = new URL('./worker-thread.cjs', here);
    return new Worker(entry, { workerData: data, execArgv: threadArgv() });
  }
  const entry = new URL('./worker-thread.ts', here);
  const tsx = createRequire(here).resolve('tsx/cjs/api');
  const bootstrap = `require(${JSON.stringify(tsx)}).register(); require(${JSON.stringify(fileURLToPath(entry))});`;
  return new Worker(bootstrap, { eval: true, workerData: data });
}

/**
 * The store's side of its worker thread: the calls of one turn go as one message, each promise
 * settles with its own answer, and a thread that ends on its own rejects every call with
 * {@link StoreThreadExitedError}. The thread holds the process open only while calls wait.
 */
export class WorkerLink {
  readonly #worker: Worker;
  readonly #waiting = new Map<number, Waiting>();
  #queue: WorkerCall[] = [];
  #nextId = 0;
  #flushing = false;
  #closing = false;
  #exited: StoreThreadExitedError | undefined;
  #crash: unknown;
  #batches = 0;

  private constructor(worker: Worker) {
    this.#worker = worker;
    worker.on('message', (message: FromWorker) => {
      if (message.kind !== 'results') return;
      this.#batches = message.batches;
      this.#settle(message.results);
    });
    // An uncaught error ends the thread; its exit follows, and is where the calls are failed.
    worker.on('error', (error) => {
      this.#crash = error;
    });
    worker.on('exit', (code) => this.#ended(code));
    worker.unref();
  }

  /**
   * Starts the worker on `data` and waits until it opened the file.
   *
   * @param data - what the worker opens
   * @returns the link, and the deployment warnings the worker's check found
   * @throws the error the worker's open threw, rebuilt with its type
   */
  static open(
    data: WorkerOpenData,
  ): Promise<{ link: WorkerLink; findings: readonly DeploymentFinding[] }> {
    const worker = startWorker(data);
    return new Promise((resolve, reject) => {
      let crash: unknown;
      const onError = (error: unknown) => {
        crash = error;
      };
      const onExit = (code: number) =>
        reject(new StoreThreadExitedError(crash === undefined ? code : undefined, crash));
      const onMessage = (message: FromWorker) => {
        worker.off('error', onError);
        worker.off('exit', onExit);
        worker.off('message', onMessage);
        if (message.kind === 'ready') {
          resolve({ link: new WorkerLink(worker), findings: message.findings });
        } else if (message.kind === 'failed') {
          const error = fromWire(message.error);
          void worker.terminate().then(() => reject(error));
        }
      };
      worker.on('error', onError);
      worker.on('exit', onExit);
      worker.on('message', onMessage);
    });
  }

  /** The worker thread the statements run on. */
  get worker(): Worker {
    return this.#worker;
  }

  /** How many transactions of more than one call the worker had run, as of its last answer. */
  get batches(): number {
    return this.#batches;
  }

  /** Whether the link takes no more calls: closed, or its thread ended. */
  get closed(): boolean {
    return this.#closing || this.#exited !== undefined;
  }

  /**
   * Runs the statement `name` with `args` on the worker, in this turn's message.
   *
   * @throws {@link StoreThreadExitedError} once the thread ended
   */
  call(name: StatementName, args: readonly unknown[]): Promise<unknown> {
    if (this.#exited !== undefined) return Promise.reject(this.#exited);
    if (this.#closing) return Promise.reject(new StoreClosedError());
    const id = this.#nextId++;
    if (this.#waiting.size === 0) this.#worker.ref();
    this.#queue.push({ id, name, args });
    if (!this.#flushing) {
      this.#flushing = true;
      setImmediate(() => this.#flush());
    }
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject });
    });
  }

  /**
   * Closes the worker's connection once every call made before has run, then ends the thread.
   * Resolves once the thread has exited; at once when it already had.
   */
  async close(): Promise<void> {
    if (this.#exited !== undefined || this.#closing) return;
    let failure: { error: unknown } | undefined;
    try {
      await this.call('close', []);
    } catch (error) {
      if (!(error instanceof StoreThreadExitedError)) failure = { error };
    }
    this.#closing = true;
    await this.#worker.terminate();
    if (failure !== undefined) throw failure.error;
  }

  #flush(): void {
    this.#flushing = false;
    const calls = this.#queue;
    this.#queue = [];
    if (calls.length === 0 || this.#exited !== undefined) return;
    const message: ToWorker = { calls };
    this.#worker.postMessage(message);
  }

  #settle(results: readonly WorkerResult[]): void {
    for (const result of results) {
      const waiting = this.#waiting.get(result.id);
      if (waiting === undefined) continue;
      this.#waiting.delete(result.id);
      if (result.ok) waiting.resolve(result.value);
      else waiting.reject(fromWire(result.error));
    }
    if (this.#waiting.size === 0) this.#worker.unref();
  }

  #ended(code: number): void {
    const error = this.#closing
      ? new StoreClosedError()
      : new StoreThreadExitedError(this.#crash === undefined ? code : undefined, this.#crash);
    if (!this.#closing) this.#exited = error as StoreThreadExitedError;
    this.#queue = [];
    for (const waiting of this.#waiting.values()) waiting.reject(error);
    this.#waiting.clear();
  }
}
