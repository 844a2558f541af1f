// The part of autocannon's API the HTTP benchmark uses; the package ships no types.
declare module 'autocannon' {
  interface Request {
    method?: string;
    path?: string;
    headers?: Record<string, string>;
    body?: string;
    setupRequest?: (request: Request) => Request;
  }
  interface Options {
    url: string;
    connections?: number;
    duration?: number;
    requests?: Request[];
  }
  interface Result {
    requests: { average: number; total: number };
    errors: number;
    timeouts: number;
    non2xx: number;
    latency: { p99: number; p50: number };
  }
  function autocannon(options: Options): Promise<Result>;
  // biome-ignore lint/style/noDefaultExport: this declares the package's own default export
  export default autocannon;
}
