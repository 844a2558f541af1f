import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import {
  type ArgumentsHost,
  applyDecorators,
  type CallHandler,
  Catch,
  createParamDecorator,
  type DynamicModule,
  type ExceptionFilter,
  type ExecutionContext,
  HttpException,
  Inject,
  Injectable,
  type InjectionToken,
  type ModuleMetadata,
  type NestInterceptor,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
  type OptionalFactoryDependency,
  SetMetadata,
  StreamableFile,
  UseInterceptors,
} from '@nestjs/common';
import { APP_FILTER, HttpAdapterHost, Reflector } from '@nestjs/core';
import { defer, lastValueFrom, mergeMap, type Observable, of } from 'rxjs';
import { InvalidOptionError } from '../core/errors.js';
import type { LeasedIdempotencyStore } from '../core/store.js';
import type { TransactionRunner } from '../core/transaction-runner.js';
import { type Sweeper, type SweeperOptions, startSweeper } from '../sweeper.js';
import { abandonClaim, teedNodeStream, watchNodeResponse } from './node-response.js';
import { resolveOptions } from './options.js';
import {
  type AdapterLayer,
  type AdapterOptions,
  adapterLayer,
  assertScopeDecision,
  type Port,
  type ReadRequest,
  type ScopeOption,
} from './port.js';
import { type IdempotencyProblem, PROBLEM_CONTENT_TYPE } from './problems.js';
import { type HeaderValues, nodeHeaders } from './request.js';
import {
  flattenHeaders,
  type HttpResponse,
  type OutgoingHeaders,
  type WireResponse,
} from './response.js';
import { idempotencyStep } from './steps.js';

export { idempotencyStep } from './steps.js';

/**
 * What the layer reads of the request Nest hands over: Express's `Request` or Fastify's
 * `FastifyRequest`, depending on the platform. Anything a guard put on it (`request.user`) is
 * there.
 */
export interface NestHttpRequest {
  /** The HTTP method. */
  readonly method: string;
  /** The URL as received: the path and the query string (which is not fingerprinted). */
  readonly url: string;
  /** The URL before any router rewrote `url` (Express's mounted routers do). */
  readonly originalUrl?: string;
  /** The request headers, names in lower case. */
  readonly headers: HeaderValues;
  /** The body as the platform parsed it. */
  readonly body?: unknown;
  /** The body's bytes as the client sent them, kept by Nest when the app has `rawBody: true`. */
  readonly rawBody?: unknown;
  /** Express's header lines as received (name, value, …), to count repeated key headers. */
  readonly rawHeaders?: readonly string[];
  /** Whatever middleware and guards added, such as `user`. */
  readonly [property: string]: unknown;
}

/** What a route decorated with {@link Idempotent} may set for itself, over the module's options. */
export interface IdempotentRouteOptions extends Omit<AdapterOptions<NestHttpRequest>, 'scope'> {
  /**
   * Who the key belongs to, over the module's `scope`: a function of the request naming its
   * caller (`request.user`, which guards set before the layer runs), or `'global'`.
   */
  readonly scope?: ScopeOption<NestHttpRequest>;
  /**
   * The answer for a problem instead of an {@link IdempotencyHttpException} through Nest's
   * exception layer: a status, headers and a body, sent as they are, as on every adapter.
   */
  readonly onError?: (
    problem: IdempotencyProblem,
    request: NestHttpRequest,
  ) => HttpResponse | Promise<HttpResponse>;
  /**
   * The transactional form: the handler's writes (through the transaction that
   * {@link IdempotencyTransaction} injects) and its answer commit in one transaction of the
   * module's `transaction` runner, fenced by the key's fencing token. Default `false`.
   */
  readonly transactional?: boolean;
}

/** Options of {@link IdempotencyModule.forRoot}: the store, and the defaults of every route. */
export interface IdempotencyModuleOptions
  extends Omit<IdempotentRouteOptions, 'transactional' | 'scope'> {
  /**
   * Who a key belongs to on every route (required; a route may set its own): a function of the
   * request naming its caller, or `'global'` for an API without callers. Without it the module
   * refuses to build, so no route shares one caller's keys with another by accident.
   */
  readonly scope: ScopeOption<NestHttpRequest>;
  /** Any {@link LeasedIdempotencyStore}, e.g. `openSqliteStore(path)`. The module does not close it. */
  readonly store: LeasedIdempotencyStore<unknown>;
  /**
   * The runner of transactional routes (`pgTransaction`, `libsqlTransaction` or `mysqlTransaction`
   * over `store`). better-sqlite3's `sqliteTransaction` cannot serve: Nest always awaits before it
   * calls a handler, and such a transaction cannot span an `await`.
   */
  readonly transaction?: TransactionRunner<unknown>;
  /**
   * Runs the built-in sweeper (`startSweeper`) over `store` while the application runs: `true` for
   * its defaults (every 5 minutes), or its options. It starts when the application has
   * bootstrapped and stops, waiting for the batch in flight, when the application closes, before
   * you close the store. Any number of instances may run it: one sweeps at a time.
   */
  readonly sweep?: true | SweeperOptions;
}

/** Options of {@link IdempotencyModule.forRootAsync}: a factory of the options, with Nest's DI. */
export interface IdempotencyModuleAsyncOptions extends Pick<ModuleMetadata, 'imports'> {
  /** Builds the options, from the providers in `inject`. */
  readonly useFactory: (
    ...args: never[]
  ) => IdempotencyModuleOptions | Promise<IdempotencyModuleOptions>;
  /** The providers handed to `useFactory`, in order. */
  readonly inject?: readonly (InjectionToken | OptionalFactoryDependency)[];
}

/** The injection token of the module's {@link IdempotencyModuleOptions}. */
export const IDEMPOTENCY_MODULE_OPTIONS = Symbol('drizzle-idempotency:module-options');

const ROUTE_OPTIONS = 'drizzle-idempotency:route-options';
// Where a transactional route's open transaction waits for the handler's parameter decorator.
const TRANSACTION = Symbol('drizzle-idempotency:transaction');

/**
 * The problem answers of the layer (400, 409, 410, 422, 500), thrown into Nest's exception layer
 * so exception filters see them. Unless a filter of the route, its controller or the application
 * (`useGlobalFilters`) takes it first, {@link IdempotencyProblemFilter} sends `problem.details()`
 * as `application/problem+json` with `problem.status`. The content type and `Retry-After` are set
 * on the response before the exception is thrown, so a filter of the application's keeps them
 * unless it overrides them.
 */
export class IdempotencyHttpException extends HttpException {
  /** The problem, to match on (`instanceof RequestInProgressError`, or `problem.code`). */
  readonly problem: IdempotencyProblem;

  /** @param problem - the layer's problem */
  constructor(problem: IdempotencyProblem) {
    super(problem.details(), problem.status, { cause: problem });
    this.problem = problem;
  }
}

/**
 * The exception filter {@link IdempotencyModule} registers for {@link IdempotencyHttpException}: it
 * sends the problem as `application/problem+json` through the platform (Express or Fastify). Nest's
 * default filter hands the platform an object, which Express's adapter in Nest 11.2 and later
 * always sends as `application/json`, logging a warning for each; the problem is therefore sent
 * here as its serialized text, which every platform sends as it is, under the type set with it.
 */
export class IdempotencyProblemFilter implements ExceptionFilter<IdempotencyHttpException> {
  readonly #adapterHost: HttpAdapterHost;

  /** @param adapterHost - Nest's holder of the platform adapter */
  constructor(adapterHost: HttpAdapterHost) {
    this.#adapterHost = adapterHost;
  }

  /** Sends the problem, or ends the response when its headers are already sent. */
  catch(exception: IdempotencyHttpException, host: ArgumentsHost): void {
    const adapter = this.#adapterHost.httpAdapter;
    const response: unknown = host.switchToHttp().getResponse();
    if (adapter.isHeadersSent(response)) {
      adapter.end(response);
      return;
    }
    adapter.setHeader(response, 'content-type', PROBLEM_CONTENT_TYPE);
    adapter.reply(response, JSON.stringify(exception.getResponse()), exception.getStatus());
  }
}

// Declared without decorator syntax, as the interceptor's: the library needs no compiler flag.
Catch(IdempotencyHttpException)(IdempotencyProblemFilter);
Injectable()(IdempotencyProblemFilter);
Inject(HttpAdapterHost)(IdempotencyProblemFilter, undefined, 0);

// What the layer uses of Express's `Response` and Fastify's `FastifyReply`: both have these.
interface NestHttpResponse {
  readonly statusCode: number;
  getHeaders(): OutgoingHeaders;
}

// The Node response under Express's `Response` (itself) or Fastify's reply (`raw`).
function nodeResponse(res: NestHttpResponse): ServerResponse {
  return (res as { raw?: ServerResponse }).raw ?? (res as unknown as ServerResponse);
}

function setStatus(res: NestHttpResponse, status: number): void {
  (res as unknown as { status(status: number): void }).status(status);
}

function setHeaders(res: NestHttpResponse, headers: Readonly<Record<string, string>>): void {
  const reply = res as unknown as {
    header?: (name: string, value: string) => void;
    setHeader: (name: string, value: string) => void;
  };
  for (const [name, value] of Object.entries(headers)) {
    // Express's `res.header` exists too, and sets the same; Fastify's reply has no `setHeader`.
    if (typeof reply.setHeader === 'function') reply.setHeader(name, value);
    else reply.header?.(name, value);
  }
}

async function streamBytes(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) {
    chunks.push(typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : Buffer.from(chunk));
  }
  return Buffer.concat(chunks);
}

// The status and headers Nest sends a StreamableFile with: its type and disposition, unless the
// handler set its own.
function fileHead(file: StreamableFile, res: NestHttpResponse): Omit<WireResponse, 'body'> {
  const headers = flattenHeaders(res.getHeaders());
  const { type, disposition } = file.getHeaders();
  const extra: Record<string, string> =
    disposition === undefined ? {} : { 'content-disposition': String(disposition) };
  return {
    status: res.statusCode,
    headers: { ...extra, ...headers, 'content-type': headers['content-type'] ?? type },
  };
}

// The answer a handler's return value makes, as Nest would send it: JSON for an object, an array,
// a number or a boolean; a string as text; bytes and a StreamableFile as they are; nothing for
// `undefined` or `null`. The status and headers are those Nest and the handler put on the response.
async function answerOf(value: unknown, res: NestHttpResponse): Promise<HttpResponse> {
  const headers = flattenHeaders(res.getHeaders());
  const status = res.statusCode;
  const typed = (type: string) => headers['content-type'] ?? type;
  if (value === undefined || value === null) return { status, headers };
  if (value instanceof StreamableFile) {
    return { ...fileHead(value, res), body: await streamBytes(value.getStream()) };
  }
  if (value instanceof Uint8Array) {
    return {
      status,
      headers: { ...headers, 'content-type': typed('application/octet-stream') },
      body: value,
    };
  }
  if (typeof value === 'string') {
    const body = Buffer.from(value, 'utf8');
    return {
      status,
      headers: { ...headers, 'content-type': typed('text/plain; charset=utf-8') },
      body,
    };
  }
  const body = Buffer.from(JSON.stringify(value), 'utf8');
  return {
    status,
    headers: { ...headers, 'content-type': typed('application/json; charset=utf-8') },
    body,
  };
}

// Nest's REDIRECT_METADATA (`@nestjs/common/constants`, not exported by the package's root): what
// `@Redirect(url, statusCode)` puts on the handler.
const REDIRECT_METADATA = '__redirect__';

/** What `@Redirect(url, statusCode)` declares on a route. */
interface RedirectRoute {
  readonly url: string;
  readonly statusCode?: number;
}

// The redirect Nest sends for a `@Redirect` route's return value: the returned `url` and
// `statusCode` over the decorator's (302 without either), as its router does. No body is kept:
// Express writes its own short one for the redirect, as it does on every replay.
function redirectAnswer(value: unknown, route: RedirectRoute, res: NestHttpResponse): HttpResponse {
  const { url, statusCode } = (value ?? {}) as { url?: unknown; statusCode?: unknown };
  const status =
    typeof statusCode === 'number' && statusCode ? statusCode : (route.statusCode ?? 302);
  const location = typeof url === 'string' && url ? url : route.url;
  return { status, headers: { ...flattenHeaders(res.getHeaders()), location } };
}

// What the layer sees of the request Nest hands over. Nest keeps the bytes the parser read as
// `rawBody` when the app is made with `rawBody: true`: the fingerprint then tells apart bodies a
// JSON parser reads alike.
function nestRequest(req: NestHttpRequest): ReadRequest {
  return {
    method: req.method,
    path: (req.originalUrl ?? req.url).split('?', 1)[0] ?? '/',
    headers: req.rawHeaders ? nodeHeaders(req.headers, req.rawHeaders) : req.headers,
    body: req.rawBody instanceof Uint8Array ? req.rawBody : req.body,
  };
}

// One request through Nest: an answer is its exact bytes handed to Nest to send; a problem goes
// into Nest's exception layer (its headers set first, so they are sent whatever a filter writes);
// passing it on is the handler as if the layer were not there.
function nestPort(
  req: NestHttpRequest,
  res: NestHttpResponse,
  next: CallHandler,
  redirect: RedirectRoute | undefined,
): Port<NestHttpRequest, Observable<unknown>> {
  return {
    request: req,
    read: () => nestRequest(req),
    send(answer: WireResponse) {
      setHeaders(res, answer.headers);
      // Nest answers a `@Redirect` route with a redirect to what the handler returns, whatever
      // it is: the recorded redirect is handed back in the form Nest reads.
      const location = answer.headers.location;
      if (redirect !== undefined && location !== undefined) {
        return of({ url: location, statusCode: answer.status });
      }
      setStatus(res, answer.status);
      if (answer.body === undefined) return of(undefined);
      const type = answer.headers['content-type'] ?? 'application/octet-stream';
      return of(new StreamableFile(answer.body, { type, length: answer.body.byteLength }));
    },
    problem(problem, answer) {
      setHeaders(res, answer.headers);
      throw new IdempotencyHttpException(problem);
    },
    pass: () => next.handle(),
  };
}

function runHandler(next: CallHandler): Promise<unknown> {
  return lastValueFrom(next.handle(), { defaultValue: undefined });
}

/**
 * The interceptor behind {@link Idempotent}. Nest runs it after guards and around pipes: a request
 * a guard refuses never reaches it, and a pipe's refusal (a validation 400) is thrown inside
 * `next.handle()`, so it releases the key like any throw and the corrected retry runs.
 */
export class IdempotencyInterceptor implements NestInterceptor {
  readonly #options: IdempotencyModuleOptions;
  readonly #reflector: Reflector;
  // One layer per route, built on its first request from the module's and the route's options.
  readonly #layers = new WeakMap<object, AdapterLayer<NestHttpRequest, undefined>>();

  /**
   * @param options - the module's options
   * @param reflector - Nest's metadata reader, for the route's options
   */
  constructor(options: IdempotencyModuleOptions, reflector: Reflector) {
    this.#options = options;
    this.#reflector = reflector;
  }

  /** Answers replays and problems, or runs the handler once for a new key. */
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return defer(() => this.#intercept(context, next)).pipe(mergeMap((answered) => answered));
  }

  #route(context: ExecutionContext): IdempotencyModuleOptions & IdempotentRouteOptions {
    const own = this.#reflector.get<IdempotentRouteOptions | undefined>(
      ROUTE_OPTIONS,
      context.getHandler(),
    );
    const { store, transaction: _transaction, ...defaults } = this.#options;
    return { ...defaults, ...own, scope: own?.scope ?? defaults.scope, store };
  }

  #layer(
    context: ExecutionContext,
    route: IdempotencyModuleOptions,
  ): AdapterLayer<NestHttpRequest, undefined> {
    const handler = context.getHandler();
    let layer = this.#layers.get(handler);
    if (layer === undefined) {
      layer = adapterLayer(this.#options.store, route);
      this.#layers.set(handler, layer);
    }
    return layer;
  }

  async #intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const http = context.switchToHttp();
    const req = http.getRequest<NestHttpRequest>();
    const res = http.getResponse<NestHttpResponse>();
    const route = this.#route(context);
    const runner = route.transactional ? this.#options.transaction : undefined;
    if (route.transactional && runner === undefined) {
      throw new InvalidOptionError(
        'a route with @Idempotent({ transactional: true }) needs the `transaction` option of IdempotencyModule.forRoot',
      );
    }
    const layer = this.#layer(context, route);
    const redirect = this.#reflector.get<RedirectRoute | undefined>(
      REDIRECT_METADATA,
      context.getHandler(),
    );
    const port = nestPort(req, res, next, redirect);
    // A StreamableFile is left as it is, to be sent as it is read, and teed.
    const streamedAnswer = async () => {
      const value = await runHandler(next);
      if (redirect !== undefined) return redirectAnswer(value, redirect, res);
      return value instanceof StreamableFile ? value : answerOf(value, res);
    };
    // Inside a transaction the answer must be whole before the transaction records it.
    const answer = async () => {
      const answered = await streamedAnswer();
      return answered instanceof StreamableFile ? answerOf(answered, res) : answered;
    };
    if (runner) {
      // The handler's parameter decorator takes the transaction from the request.
      return layer.transact(port, runner, (request, tx) => {
        (request as unknown as Record<symbol, unknown>)[TRANSACTION] = tx;
        return answer();
      });
    }
    return layer.serve(port, async (execution) => {
      // A handler that destroys its response (or has it destroyed) may never return: its key is
      // released when the response closes, not left pending under a live heartbeat.
      const watch = watchNodeResponse(nodeResponse(res), ({ failure }) =>
        abandonClaim(execution, failure?.error),
      );
      let answered: HttpResponse | StreamableFile;
      try {
        answered = await streamedAnswer();
      } catch (error) {
        if (watch.settle()) await execution.fail(error);
        throw error;
      }
      // The key was released when the response was destroyed: this late answer is nobody's.
      if (!watch.settle()) return of(undefined);
      if (answered instanceof StreamableFile) {
        const streamed = execution.stream(fileHead(answered, res));
        const body = teedNodeStream(answered.getStream(), nodeResponse(res), streamed);
        return of(new StreamableFile(body, answered.options));
      }
      return layer.finish(port, execution, answered, (result) => port.send(result.response));
    });
  }
}

// Nest's dependency injection, declared without decorator syntax so the library needs no
// compiler flag: the options by their token, then the Reflector.
Injectable()(IdempotencyInterceptor);
Inject(IDEMPOTENCY_MODULE_OPTIONS)(IdempotencyInterceptor, undefined, 0);
Inject(Reflector)(IdempotencyInterceptor, undefined, 1);

/**
 * Makes a route idempotent with the `Idempotency-Key` header, with the options of
 * {@link IdempotencyModule} and those given here over them:
 *
 * - a new key runs the handler once; its answer (the status and headers Nest and the handler set,
 *   and the returned value as JSON, text or bytes) is stored, then sent as those exact bytes; a
 *   returned `StreamableFile` goes out as it is read and is teed, kept while it fits
 *   `maxStoredBytes` (see docs/http.md, "Streamed answers");
 * - a retry gets the stored bytes with `Idempotent-Replayed: true`, without running the handler;
 * - another body with the same key gets 422, a retry while the first runs 409 with `Retry-After`,
 *   a missing or malformed key 400: each an {@link IdempotencyHttpException} through Nest's
 *   exception layer, `application/problem+json` by default;
 * - a handler that throws (an `HttpException` too), a pipe that refuses the request, or an answer
 *   whose status is not stored (5xx by default) releases the key, so the retry runs; so do a
 *   `StreamableFile` whose stream errors and a response destroyed before the handler answered
 *   (its late answer is dropped). Guards run before the layer: what they refuse never touches
 *   the store.
 *
 * A handler that writes its answer through `@Res()` itself is not covered: return the answer.
 *
 * @param options - the route's own options over the module's, see {@link IdempotentRouteOptions}
 * @example
 * ```ts
 * @Controller('payments')
 * class PaymentsController {
 *   @Post()
 *   @Idempotent({ scope: (request) => (request.user as { id: string }).id })
 *   create(@Body() body: { amount: number }) {
 *     return { id: 'p_1', amount: body.amount };
 *   }
 * }
 * ```
 * @throws {@link InvalidOptionError} for a bad option, when the class is defined
 */
export function Idempotent(options: IdempotentRouteOptions = {}): MethodDecorator {
  if (options.scope !== undefined) assertScopeDecision(options.scope, '@Idempotent');
  resolveOptions(options);
  return applyDecorators(
    SetMetadata(ROUTE_OPTIONS, options),
    UseInterceptors(IdempotencyInterceptor),
  );
}

/**
 * The open transaction of a route decorated with `@Idempotent({ transactional: true })`, as a
 * handler parameter: its writes through it commit with the stored answer, or not at all.
 *
 * @example
 * ```ts
 * @Post()
 * @Idempotent({ transactional: true })
 * async create(@IdempotencyTransaction() tx: PgTx, @Body() body: { amount: number }) {
 *   const [payment] = await tx.insert(payments).values(body).returning();
 *   return payment;
 * }
 * ```
 */
export const IdempotencyTransaction: () => ParameterDecorator = createParamDecorator(
  (_data: unknown, context: ExecutionContext) => {
    const request = context.switchToHttp().getRequest<Record<symbol, unknown>>();
    if (!(TRANSACTION in request)) {
      throw new InvalidOptionError(
        '@IdempotencyTransaction() is only for routes with @Idempotent({ transactional: true })',
      );
    }
    return request[TRANSACTION];
  },
);

/**
 * A parameter decorator that injects the step function of an idempotent route's handler (see
 * `idempotencyStep` and docs/steps.md): the module's or the route's `steps` option
 * (`pgSteps(store, { secret })`, `mysqlSteps`, `sqliteSteps`) records each step under the
 * request's key, so a retry that takes the key over after a crash gets the recorded results
 * without running them again. Give the parameter its type, `Step<TX>` with the step log's
 * transaction.
 *
 * @example
 * ```ts
 * @Post()
 * @Idempotent()
 * async create(@IdempotencyStep() step: Step<PgHandlerTransaction>, @Body() body: { amount: number }) {
 *   const charge = await step('charge', ({ key }) => provider.charge(body.amount, key));
 *   return { charge };
 * }
 * ```
 */
export const IdempotencyStep: () => ParameterDecorator = createParamDecorator(
  (_data: unknown, context: ExecutionContext) =>
    idempotencyStep(context.switchToHttp().getRequest<object>()),
);

function checked(options: IdempotencyModuleOptions): IdempotencyModuleOptions {
  if (typeof options?.store?.acquire !== 'function') {
    throw new InvalidOptionError('IdempotencyModule needs a `store` (a LeasedIdempotencyStore)');
  }
  assertScopeDecision(options.scope, 'IdempotencyModule');
  if (options.steps !== undefined && options.steps.store !== options.store) {
    throw new InvalidOptionError("the `steps` log must be over the module's `store`");
  }
  if (options.transaction !== undefined && options.transaction.store !== options.store) {
    throw new InvalidOptionError("the `transaction` runner must be over the module's `store`");
  }
  if (options.transaction?.synchronous) {
    throw new InvalidOptionError(
      'a synchronous transaction runner (better-sqlite3) cannot serve Nest handlers, which are always awaited; use libsqlTransaction, pgTransaction or mysqlTransaction',
    );
  }
  if (options.sweep !== undefined && options.sweep !== true) {
    if (typeof options.sweep !== 'object' || options.sweep === null) {
      throw new InvalidOptionError('sweep must be true or the options of startSweeper');
    }
  }
  resolveOptions(options);
  return options;
}

/**
 * Runs the sweeper of {@link IdempotencyModuleOptions.sweep}, when asked for, from the
 * application's bootstrap to its close.
 */
export class IdempotencySweeperService implements OnApplicationBootstrap, OnModuleDestroy {
  readonly #options: IdempotencyModuleOptions;
  #sweeper: Sweeper | undefined;

  /** @param options - the module's options */
  constructor(options: IdempotencyModuleOptions) {
    this.#options = options;
  }

  /** Starts the sweeper when the module's options ask for one. */
  onApplicationBootstrap(): void {
    const { sweep, store } = this.#options;
    if (sweep === undefined) return;
    this.#sweeper = startSweeper(store as LeasedIdempotencyStore, sweep === true ? {} : sweep);
  }

  /** Stops the sweeper, waiting for the batch in flight. */
  async onModuleDestroy(): Promise<void> {
    await this.#sweeper?.stop();
  }
}

// Declared without decorator syntax, as the interceptor's: the library needs no compiler flag.
Injectable()(IdempotencySweeperService);
Inject(IDEMPOTENCY_MODULE_OPTIONS)(IdempotencySweeperService, undefined, 0);

/**
 * The NestJS module of the idempotency layer: import it once (it is global), then decorate routes
 * with {@link Idempotent}.
 *
 * @example
 * ```ts
 * @Module({
 *   imports: [
 *     IdempotencyModule.forRoot({
 *       store: openSqliteStore('./idempotency.db'),
 *       scope: (request) => (request.user as { id: string }).id,
 *     }),
 *   ],
 *   controllers: [PaymentsController],
 * })
 * class AppModule {}
 * ```
 */
// biome-ignore lint/complexity/noStaticOnlyClass: a Nest module is a class configured by statics
export class IdempotencyModule {
  /**
   * The module with these options.
   *
   * @throws {@link InvalidOptionError} for a bad option, at once
   */
  static forRoot(options: IdempotencyModuleOptions): DynamicModule {
    return {
      module: IdempotencyModule,
      global: true,
      providers: [
        { provide: IDEMPOTENCY_MODULE_OPTIONS, useValue: checked(options) },
        IdempotencyInterceptor,
        IdempotencySweeperService,
        { provide: APP_FILTER, useClass: IdempotencyProblemFilter },
      ],
      exports: [IDEMPOTENCY_MODULE_OPTIONS, IdempotencyInterceptor],
    };
  }

  /**
   * The module with options built by a factory, e.g. from a config service or a database
   * provider.
   *
   * @throws {@link InvalidOptionError} for a bad option, when the application starts
   */
  static forRootAsync(options: IdempotencyModuleAsyncOptions): DynamicModule {
    return {
      module: IdempotencyModule,
      global: true,
      imports: options.imports ?? [],
      providers: [
        {
          provide: IDEMPOTENCY_MODULE_OPTIONS,
          useFactory: async (...args: never[]) => checked(await options.useFactory(...args)),
          inject: [...(options.inject ?? [])],
        },
        IdempotencyInterceptor,
        IdempotencySweeperService,
        { provide: APP_FILTER, useClass: IdempotencyProblemFilter },
      ],
      exports: [IDEMPOTENCY_MODULE_OPTIONS, IdempotencyInterceptor],
    };
  }
}
