package traces

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Config selects where spans go. The zero value turns tracing off.
type Config struct {
	// Endpoint is the OTLP/HTTP base URL, e.g. http://127.0.0.1:4318; "" = off.
	Endpoint string
	// ServiceName names the service in the backend; "" = "ninfer".
	ServiceName string
	// SampleRatio is the fraction of root spans kept (parent-based); 0 means 1.
	SampleRatio float64
}

// ConfigFromEnv fills c's empty fields from the standard variables
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) and
// OTEL_SERVICE_NAME; explicit values (flags) win.
func ConfigFromEnv(c Config) Config {
	if c.Endpoint == "" {
		c.Endpoint = os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	}
	if c.Endpoint == "" {
		c.Endpoint = os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	if c.ServiceName == "" {
		c.ServiceName = os.Getenv("OTEL_SERVICE_NAME")
	}
	if c.ServiceName == "" {
		c.ServiceName = "ninfer"
	}
	return c
}

// Provider is a configured tracer provider. Tracer is a no-op when
// tracing is off, so callers may use it unconditionally; Enabled lets hot
// paths skip building attributes.
type Provider struct {
	Tracer     trace.Tracer
	Enabled    bool
	Propagator propagation.TextMapPropagator
	shutdown   func(context.Context) error
}

// Off is a provider with tracing disabled.
func Off() *Provider {
	return &Provider{Tracer: noop.NewTracerProvider().Tracer("ninfer"), Propagator: propagation.TraceContext{},
		shutdown: func(context.Context) error { return nil }}
}

// Start builds the provider for c: an OTLP/HTTP batch exporter, parent-based
// ratio sampling and W3C trace-context propagation.
func Start(ctx context.Context, c Config) (*Provider, error) {
	if c.Endpoint == "" {
		return Off(), nil
	}
	if c.SampleRatio < 0 || c.SampleRatio > 1 {
		return nil, fmt.Errorf("trace sample ratio %g not in [0, 1]", c.SampleRatio)
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("otlp endpoint %q: want http(s)://host:port", c.Endpoint)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(u.Host)}
	if u.Scheme == "http" {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	if p := strings.TrimSuffix(u.Path, "/"); p != "" && p != "/v1/traces" {
		opts = append(opts, otlptracehttp.WithURLPath(p+"/v1/traces"))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	ratio := c.SampleRatio
	if ratio == 0 {
		ratio = 1
	}
	res := resource.NewSchemaless(semconv.ServiceName(c.ServiceName))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
	)
	return &Provider{Tracer: tp.Tracer("github.com/ninfer/ninfer-go"), Enabled: true,
		Propagator: propagation.TraceContext{}, shutdown: tp.Shutdown}, nil
}

// NewWithSDK wraps an SDK tracer provider (tests use one with a span recorder).
func NewWithSDK(tp *sdktrace.TracerProvider) *Provider {
	return &Provider{Tracer: tp.Tracer("github.com/ninfer/ninfer-go"), Enabled: true,
		Propagator: propagation.TraceContext{}, shutdown: tp.Shutdown}
}

// Shutdown flushes buffered spans and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error { return p.shutdown(ctx) }
