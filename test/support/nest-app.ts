import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import type { INestApplication, LoggerService, ModuleMetadata, Type } from '@nestjs/common';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';

/** The Nest platforms the adapter is tested on. */
export const nestPlatforms = ['express', 'fastify'] as const;

/** One of {@link nestPlatforms}. */
export type NestPlatform = (typeof nestPlatforms)[number];

/** A Nest application listening on 127.0.0.1. */
export interface RunningNestApp {
  readonly url: string;
  readonly app: INestApplication;
  /** Every warning and error Nest logged since the application started, in order. */
  readonly warnings: readonly string[];
  close(): Promise<void>;
}

// Nest's logger, keeping its warnings and errors for the tests to read instead of printing them.
class RecordingLogger implements LoggerService {
  readonly warnings: string[] = [];
  log(): void {}
  warn(message: unknown): void {
    this.warnings.push(`WARN ${String(message)}`);
  }
  error(message: unknown): void {
    this.warnings.push(`ERROR ${String(message)}`);
  }
}

/**
 * Starts a real Nest application of these imports, controllers and providers on `platform`,
 * listening on a free port of 127.0.0.1, its warnings and errors recorded rather than printed.
 */
export async function startNestApp(
  platform: NestPlatform,
  metadata: ModuleMetadata,
): Promise<RunningNestApp> {
  class AppModule {}
  Module(metadata)(AppModule as Type);
  const adapter =
    platform === 'express'
      ? new ExpressAdapter()
      : new FastifyAdapter({ forceCloseConnections: true });
  const logger = new RecordingLogger();
  const app = await NestFactory.create(AppModule, adapter, { logger });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    app,
    warnings: logger.warnings,
    close: async () => {
      if (platform === 'express') app.getHttpServer().closeAllConnections();
      await app.close();
    },
  };
}
