package cli

import (
	"io"
	"log/slog"
)

// ObservabilityFlags say how the scaler logs, and what the benchmark
// records of its memory.
type ObservabilityFlags struct {
	LogFormat string `env:"SCALER_LOG_FORMAT" enum:"json,text" default:"json" help:"Log format: json or text."`
	LogLevel  string `env:"SCALER_LOG_LEVEL" enum:"debug,info,warn,error" default:"info" help:"Log level: debug, info, warn or error."`
	// The benchmark (make bench) tells where a pass's memory goes.
	BenchHeapProfile string `env:"SCALER_BENCH_HEAP_PROFILE" hidden:"" placeholder:"DIR" help:"Benchmark only: after each pass write the heap profile to DIR/heap-<pass>.pprof and log the runtime's memory figures."`
}

func newLogger(w io.Writer, format, level string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level)) // kong's enum already checked it
	opts := &slog.HandlerOptions{Level: lv}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
