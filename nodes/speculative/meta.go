package speculative

import (
	"fmt"

	"github.com/ninfer/ninfer-go/runtime/weights"
)

// meta reads a drafter GGUF's ARCH.KEY metadata, keeping every error.
type meta struct {
	f    *weights.File
	arch string
	errs []error
}

// uint is ARCH.key, or def when it is absent and def >= 0 (def < 0: the
// key is required).
func (m *meta) uint(key string, def int) int {
	if def >= 0 && !m.f.Has(m.arch+"."+key) {
		return def
	}
	v, err := m.f.Uint(m.arch + "." + key)
	if err != nil {
		m.errs = append(m.errs, err)
	}
	return int(v)
}

// float is ARCH.key, or def when it is absent.
func (m *meta) float(key string, def float32) float32 {
	if !m.f.Has(m.arch + "." + key) {
		return def
	}
	v, err := m.f.Float(m.arch + "." + key)
	if err != nil {
		m.errs = append(m.errs, err)
	}
	return float32(v)
}

// bool is ARCH.key, false when it is absent.
func (m *meta) bool(key string) bool {
	if !m.f.Has(m.arch + "." + key) {
		return false
	}
	v, err := m.f.Bool(m.arch + "." + key)
	if err != nil {
		m.errs = append(m.errs, err)
	}
	return v
}

// ints is the required int array ARCH.key.
func (m *meta) ints(key string) []int {
	v, err := m.f.Int32s(m.arch + "." + key)
	if err != nil {
		m.errs = append(m.errs, err)
	}
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// errorf records a problem with the drafter's shape.
func (m *meta) errorf(format string, args ...any) {
	m.errs = append(m.errs, fmt.Errorf(format, args...))
}
