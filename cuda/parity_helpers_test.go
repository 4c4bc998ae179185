//go:build cuda || cudaemu

package cuda

// Helpers of the parity tests shared by the GPU run (parity_cuda_test.go)
// and the kernel emulator (emu_test.go): random weights, in-memory GGUF
// files, batches and the tolerance check.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// randTensor returns a [rows, cols] weight of dt with random contents:
// normal values for float dtypes, random quants (and high bits) and fp16
// scales (and offsets) for the 32-blocks of Q8_0, Q4_0, Q5_0, IQ4_NL,
// Q4_1 and Q5_1.
func randTensor(r *rand.Rand, name string, dt tensor.DType, rows, cols int) *weights.Tensor {
	rb, err := dt.RowBytes(cols)
	if err != nil {
		panic(err)
	}
	data := make([]byte, rows*rb)
	scale := func() uint16 { return tensor.F32ToF16(float32(math.Ldexp(0.5+r.Float64(), -r.IntN(6)-4))) }
	for row := range rows {
		b := data[row*rb : (row+1)*rb]
		switch dt {
		case tensor.F32:
			for i := range cols {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(r.NormFloat64())))
			}
		case tensor.F16:
			for i := range cols {
				binary.LittleEndian.PutUint16(b[2*i:], tensor.F32ToF16(float32(r.NormFloat64())))
			}
		case tensor.BF16:
			for i := range cols {
				binary.LittleEndian.PutUint16(b[2*i:], tensor.F32ToBF16(float32(r.NormFloat64())))
			}
		case tensor.Q8_0, tensor.Q4_0, tensor.Q5_0, tensor.IQ4_NL, tensor.Q4_1, tensor.Q5_1:
			bs := dt.BlockBytes() // an fp16 scale (and offset), then quants and high bits
			from := 2
			if dt == tensor.Q4_1 || dt == tensor.Q5_1 {
				from = 4
			}
			for blk := range cols / 32 {
				binary.LittleEndian.PutUint16(b[blk*bs:], scale())
				if from == 4 {
					binary.LittleEndian.PutUint16(b[blk*bs+2:], scale()^0x8000) // a negative offset
				}
				for i := from; i < bs; i++ {
					b[blk*bs+i] = byte(r.IntN(256))
				}
			}
		case tensor.Q2_K, tensor.Q3_K, tensor.Q4_K, tensor.Q5_K, tensor.Q6_K, tensor.IQ4_XS:
			// Random quants, sub-block scales and mins; then the fp16
			// super-block scale d (and dmin) at their offsets.
			bs := dt.BlockBytes()
			scales := map[tensor.DType][]int{tensor.Q2_K: {80, 82}, tensor.Q3_K: {108}, tensor.Q4_K: {0, 2}, tensor.Q5_K: {0, 2},
				tensor.Q6_K: {208}, tensor.IQ4_XS: {0}}[dt]
			for blk := range cols / tensor.QKK {
				for i := range bs {
					b[blk*bs+i] = byte(r.IntN(256))
				}
				for _, at := range scales {
					binary.LittleEndian.PutUint16(b[blk*bs+at:], scale())
				}
			}
		default:
			panic(fmt.Sprintf("randTensor: no generator for %v", dt))
		}
	}
	return &weights.Tensor{Name: name, DType: dt, Shape: []int{cols, rows}, Data: data}
}

// memFile is a GGUF file of ts, parsed from memory.
func memFile(t *testing.T, ts ...*weights.Tensor) *weights.File {
	t.Helper()
	var buf bytes.Buffer
	if err := weights.Write(&buf, 3, nil, ts); err != nil {
		t.Fatal(err)
	}
	f, err := weights.Parse(buf.Bytes(), "parity.gguf")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// near fails t when got differs from want by more than tol relative to
// the scale of want (max |want|, at least 1), printing the first values.
func near(t *testing.T, what string, want, got []float32, tol float64) {
	t.Helper()
	if msg := nearDiff(want, got, tol); msg != "" {
		t.Errorf("%s: %s", what, msg)
	}
}

// nearDiff is near's check: "" when got is within tol of want, else what
// differs.
func nearDiff(want, got []float32, tol float64) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%d values, want %d", len(got), len(want))
	}
	scale := 1.0
	for _, v := range want {
		scale = max(scale, math.Abs(float64(v)))
	}
	worst, at := 0.0, -1
	for i := range want {
		d := math.Abs(float64(want[i]) - float64(got[i]))
		if math.IsNaN(float64(got[i])) != math.IsNaN(float64(want[i])) {
			d = math.Inf(1)
		}
		if d > worst {
			worst, at = d, i
		}
	}
	if worst > tol*scale {
		n := min(8, len(want))
		return fmt.Sprintf("max |diff| %.3g at %d (scale %.3g, tolerance %.3g)\n  cpu  %v\n  cuda %v\n  at %d: cpu %v cuda %v",
			worst, at, scale, tol*scale, want[:n], got[:n], at, want[at], got[at])
	}
	return ""
}

func seqBatch(tokens, positions, rowSeq []int32, tables [][]int32, logitRows []int32) *exec.Batch {
	return &exec.Batch{Tokens: tokens, Positions: positions, RowSeq: rowSeq, Tables: tables, LogitRows: logitRows}
}

// oneSeq is a batch of n tokens of sequence 0 at positions from..from+n-1
// in blocks [0, 1, 2, ...], the last row sampled.
func oneSeq(r *rand.Rand, vocab, from, n, blocks int) *exec.Batch {
	b := &exec.Batch{Tables: [][]int32{make([]int32, blocks)}, LogitRows: []int32{int32(n - 1)}}
	for i := range blocks {
		b.Tables[0][i] = int32(i)
	}
	for i := range n {
		b.Tokens = append(b.Tokens, int32(r.IntN(vocab)))
		b.Positions = append(b.Positions, int32(from+i))
		b.RowSeq = append(b.RowSeq, 0)
	}
	return b
}

func randIDs(r *rand.Rand, vocab, n int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(r.IntN(vocab))
	}
	return ids
}

func count(from, n int) []int32 {
	v := make([]int32, n)
	for i := range v {
		v[i] = int32(from + i)
	}
	return v
}

func fill(x int32, n int) []int32 {
	v := make([]int32, n)
	for i := range v {
		v[i] = x
	}
	return v
}
