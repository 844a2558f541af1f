import 'reflect-metadata';
import {
  All,
  type ArgumentsHost,
  Catch,
  Controller,
  HttpException,
  Module,
  Req,
  Res,
  type Type,
} from '@nestjs/common';
import { BaseExceptionFilter, HttpAdapterHost, NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import {
  IdempotencyHttpException,
  IdempotencyModule,
  IdempotencyProblemFilter,
  Idempotent,
  idempotencyStep,
} from '../../src/http/nestjs.js';
import type { Behaviour, ServerFactory, ServerKind } from './http-servers.js';
import type { NestPlatform } from './nest-app.js';

// What the test handler needs of Express's response and Fastify's reply: both have these.
interface Reply {
  status(status: number): unknown;
  header(name: string, value: string): unknown;
}

// The behaviour suite's handler as a Nest route: its status and headers set on the response
// (passthrough), its body returned as the bytes the other adapters send.
function controllerOf(behave: Behaviour): Type {
  @Controller()
  class BehaviourController {
    @All(['run', 'other', 'things/:id'])
    @Idempotent()
    async handle(
      @Req() req: { body?: unknown; url: string },
      @Res({ passthrough: true }) res: Reply,
    ): Promise<unknown> {
      const answer = await behave(req.body, req.url.split('?', 1)[0] ?? '/', () =>
        idempotencyStep(req),
      );
      res.status(answer.status);
      const headers = { ...answer.headers };
      if (answer.kind === 'json' && headers['content-type'] === undefined) {
        headers['content-type'] = 'application/json; charset=utf-8';
      }
      for (const [name, value] of Object.entries(headers)) res.header(name, value);
      if (answer.kind === 'json') return Buffer.from(JSON.stringify(answer.body));
      if (answer.kind === 'binary') return Buffer.from(answer.body as Uint8Array);
      return answer.body;
    }
  }
  return BehaviourController;
}

// What the other test servers answer for a handler that throws: 500 `handler failed`. An
// application's catch-all filter comes before the module's, so it hands the layer's problems to
// IdempotencyProblemFilter, as the adapters guide says.
@Catch()
class HandlerFailed extends BaseExceptionFilter {
  readonly #problems: IdempotencyProblemFilter;

  constructor(adapterHost: HttpAdapterHost) {
    super(adapterHost.httpAdapter);
    this.#problems = new IdempotencyProblemFilter(adapterHost);
  }

  override catch(exception: unknown, host: ArgumentsHost): void {
    if (exception instanceof IdempotencyHttpException) {
      this.#problems.catch(exception, host);
      return;
    }
    if (exception instanceof HttpException) {
      super.catch(exception, host);
      return;
    }
    const adapter = this.httpAdapterHost?.httpAdapter ?? this.applicationRef;
    const res: unknown = host.switchToHttp().getResponse();
    adapter?.setHeader(res, 'content-type', 'text/plain');
    adapter?.reply(res, 'handler failed', 500);
  }
}

function startNest(platform: NestPlatform): ServerFactory {
  return async (store, options, behave) => {
    class AppModule {}
    Module({
      imports: [
        IdempotencyModule.forRoot({
          ...options,
          store,
          scope: (request) => {
            const client = request.headers['x-client'];
            return typeof client === 'string' ? client : undefined;
          },
        }),
      ],
      controllers: [controllerOf(behave)],
    })(AppModule);
    const adapter =
      platform === 'express'
        ? new ExpressAdapter()
        : new FastifyAdapter({ forceCloseConnections: true });
    // rawBody: the layer fingerprints the body as the client wrote it, as on the other adapters.
    const app = await NestFactory.create(AppModule, adapter, { logger: false, rawBody: true });
    app.useGlobalFilters(new HandlerFailed(app.get(HttpAdapterHost)));
    await app.listen(0, '127.0.0.1');
    return {
      url: (await app.getUrl()).replace('[::1]', '127.0.0.1'),
      close: async () => {
        if (platform === 'express') app.getHttpServer().closeAllConnections();
        await app.close();
      },
    };
  };
}

/** The NestJS module on both of Nest's platforms, for the behaviour suite. */
export const nestServerKinds: readonly ServerKind[] = [
  { name: 'NestJS on Express', start: startNest('express') },
  { name: 'NestJS on Fastify', start: startNest('fastify') },
];
