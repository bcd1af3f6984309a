package embedded

import (
	"context"
	"log/slog"
	"sync/atomic"

	"go.uber.org/zap/zapcore"
)

// slogCore passes etcd's log (its zap logger's) to slog, fields as
// attributes, a level lower: etcd warns at every start about what an
// embedded member does on purpose (one port for gRPC and HTTP, simple
// auth tokens) and logs errors when it is closed, so its warnings are
// debug lines here and its errors warnings. A fatal error is an error
// line: etcd ends the process after it (zap's Fatal calls os.Exit), and
// this core writes the line first, so no exit is silent. Info and debug
// lines are dropped (etcd logs every compaction and snapshot at info).
type slogCore struct {
	log    *slog.Logger
	fields []zapcore.Field
	// closing is set once the server is being closed: what etcd says
	// of its listeners going away then is expected (debug lines).
	closing *atomic.Bool
}

func (c slogCore) Enabled(l zapcore.Level) bool { return l >= zapcore.WarnLevel }

func (c slogCore) With(fields []zapcore.Field) zapcore.Core {
	return slogCore{log: c.log, fields: append(append([]zapcore.Field(nil), c.fields...), fields...), closing: c.closing}
}

func (c slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	attrs := make([]slog.Attr, 0, len(enc.Fields)+1)
	for k, v := range enc.Fields {
		attrs = append(attrs, slog.Any(k, v))
	}
	level := slog.LevelDebug
	msg := e.Message
	switch {
	case e.Level >= zapcore.DPanicLevel:
		level, msg = slog.LevelError, "etcd stops the process: "+msg
	case e.Level >= zapcore.ErrorLevel && (c.closing == nil || !c.closing.Load()):
		level = slog.LevelWarn
	}
	if e.LoggerName != "" {
		attrs = append(attrs, slog.String("logger", e.LoggerName))
	}
	c.log.LogAttrs(context.Background(), level, msg, attrs...)
	return nil
}

func (c slogCore) Sync() error { return nil }
