"""Telemetry read back in memory: a test's own tracer and meter providers."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agents_sqlalchemy import Telemetry


class Exported:
    """A tracer provider and a meter provider of a test's own, read back in memory."""

    def __init__(self) -> None:
        self.spans_out = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans_out))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer = self.tracer_provider.get_tracer("app")

    def telemetry(self, **options: Any) -> Telemetry:
        return Telemetry(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **options
        )

    def spans(self) -> list[ReadableSpan]:
        return list(self.spans_out.get_finished_spans())

    def named(self, operation: str) -> list[ReadableSpan]:
        return [
            span
            for span in self.spans()
            if (span.attributes or {}).get("db.operation.name") == operation
        ]

    def metrics(self) -> dict[str, list[Any]]:
        """Every metric's data points, by name (one collection)."""
        found: dict[str, list[Any]] = {}
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found.setdefault(metric.name, []).extend(metric.data.data_points)
        return found

    def total(self, name: str, **where: Any) -> float:
        points = self.metrics().get(name, [])
        return sum(
            getattr(point, "value", None) or getattr(point, "sum", 0)
            for point in points
            if all(point.attributes.get(k) == v for k, v in where.items())
        )
