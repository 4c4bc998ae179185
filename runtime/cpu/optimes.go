package cpu

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// With NINFER_CPU_OPTIMES set in the environment (any value), a Backend
// times every op of every step it runs and writes the table to stderr when
// it closes (ninfer serve: at shutdown): per step size (rows) and op, the
// wall time of the op, the pool's dispatch and waits included, as total,
// per call and per step. Matmuls are told apart by their output width (a
// fused group shows on its first member, the others take no time), and
// attention's KV write shows on its own. It is how a decode step's time is
// split in docs/decode-steps.md; off, it costs one nil check per op.
const opTimesEnv = "NINFER_CPU_OPTIMES"

// opTimes accumulates op wall times by (rows, op label).
type opTimes struct {
	mu    sync.Mutex
	ops   map[opTimeKey]*opTimeSum
	steps map[int]int // steps by rows
}

type opTimeKey struct {
	rows  int
	label string
}

type opTimeSum struct {
	calls int
	total time.Duration
}

// newOpTimes returns an opTimes when NINFER_CPU_OPTIMES is set, else nil.
func newOpTimes() *opTimes {
	if os.Getenv(opTimesEnv) == "" {
		return nil
	}
	return &opTimes{ops: map[opTimeKey]*opTimeSum{}, steps: map[int]int{}}
}

// opLabel names op in the table: its kind, and a matmul's output width.
func opLabel(op tensor.Op) string {
	if op.Kind == tensor.OpMatMul {
		return fmt.Sprintf("%v N=%d", op.Kind, op.Out.Cols())
	}
	return op.Kind.String()
}

// add records one call of label in a step of rows rows.
func (o *opTimes) add(rows int, label string, d time.Duration) {
	o.mu.Lock()
	s := o.ops[opTimeKey{rows, label}]
	if s == nil {
		s = &opTimeSum{}
		o.ops[opTimeKey{rows, label}] = s
	}
	s.calls++
	s.total += d
	o.mu.Unlock()
}

// step records one step of rows rows.
func (o *opTimes) step(rows int) {
	o.mu.Lock()
	o.steps[rows]++
	o.mu.Unlock()
}

// write prints the table, by rows then by time spent, to w.
func (o *opTimes) write(w io.Writer) {
	o.mu.Lock()
	defer o.mu.Unlock()
	keys := make([]opTimeKey, 0, len(o.ops))
	for k := range o.ops {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b opTimeKey) int {
		if a.rows != b.rows {
			return cmp.Compare(a.rows, b.rows)
		}
		if c := cmp.Compare(o.ops[b].total, o.ops[a].total); c != 0 {
			return c
		}
		return cmp.Compare(a.label, b.label)
	})
	fmt.Fprintf(w, "cpu op times (%s): rows steps op calls total_ms ms/call ms/step\n", opTimesEnv)
	for _, k := range keys {
		s, steps := o.ops[k], max(1, o.steps[k.rows])
		ms := s.total.Seconds() * 1000
		fmt.Fprintf(w, "%d %d %q %d %.1f %.4f %.3f\n", k.rows, o.steps[k.rows], k.label, s.calls, ms, ms/float64(s.calls), ms/float64(steps))
	}
}
