import {
  AggregationTemporality,
  type DataPoint,
  type Histogram,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';

/** One exported data point of a metric, with its attributes. */
export interface Point {
  readonly attributes: Readonly<Record<string, unknown>>;
  readonly value: number | Histogram;
}

/** The real OpenTelemetry SDK with in-memory exporters, for one test. */
export interface OtelHarness {
  readonly tracerProvider: BasicTracerProvider;
  readonly meterProvider: MeterProvider;
  /** The spans ended so far. */
  spans(): ReadableSpan[];
  /** Collects the metrics now and returns the data points of each metric by name. */
  metrics(): Promise<Map<string, Point[]>>;
  shutdown(): Promise<void>;
}

/** A tracer and a meter provider of the real SDK, each exporting into memory. */
export function otelHarness(): OtelHarness {
  const spanExporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(spanExporter)],
  });
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  // Exports only when flushed: the interval is longer than any test.
  const reader = new PeriodicExportingMetricReader({
    exporter: metricExporter,
    exportIntervalMillis: 3_600_000,
  });
  const meterProvider = new MeterProvider({ readers: [reader] });
  return {
    tracerProvider,
    meterProvider,
    spans: () => spanExporter.getFinishedSpans(),
    async metrics() {
      metricExporter.reset();
      await reader.forceFlush();
      const points = new Map<string, Point[]>();
      for (const resource of metricExporter.getMetrics()) {
        for (const scope of resource.scopeMetrics) {
          for (const metric of scope.metrics) {
            const list = points.get(metric.descriptor.name) ?? [];
            for (const point of metric.dataPoints as DataPoint<number | Histogram>[]) {
              list.push({ attributes: point.attributes, value: point.value });
            }
            points.set(metric.descriptor.name, list);
          }
        }
      }
      return points;
    },
    async shutdown() {
      await tracerProvider.shutdown();
      await meterProvider.shutdown();
    },
  };
}
