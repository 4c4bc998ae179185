// Package kvquant registers kv.cache, the policy node that picks a graph's
// KV cache page format and block size. The formats' sizes and codecs live in
// runtime/kv/page, where backends use them.
package kvquant

import (
	"strings"

	"github.com/ninfer/ninfer-go/runtime/kv/page"
	"github.com/ninfer/ninfer-go/runtime/node"
)

func init() {
	one, most := 1.0, 4096.0
	var formats []string
	for _, f := range page.Formats() {
		formats = append(formats, "`"+f.Name+"` ("+f.Doc+")")
	}
	node.Register(node.Spec{
		Op:        "kv.cache",
		Placement: node.Policy,
		Params: []node.Param{
			{Name: "dtype", Kind: node.Enum, Default: page.F32.Name, Enum: page.FormatNames(),
				Doc: "format of the K and V rows stored in the cache pages"},
			{Name: "block", Kind: node.Int, Default: int64(16), Min: &one, Max: &most,
				Doc: "tokens per KV cache block (the unit of allocation)"},
			{Name: "state", Kind: node.Enum, Default: "f32", Enum: []string{"f32", "bf16"},
				Doc: "how a hybrid model's recurrent state slots are stored: bf16 halves them, computed in f32 and rounded back every step (`ninfer kv-eval --kv state-bf16` measures the error)"},
		},
		Summary: "Choose the KV cache page format and block size.",
		Doc: "K and V rows are quantized as they are written into the cache and dequantized in attention. " +
			"Scales cover groups of contiguous values of one token's K or V row in one layer; groups never " +
			"span tokens, and a row shorter than the group is one group. Formats: " + strings.Join(formats, "; ") +
			". `ninfer kv-eval` measures what a format costs in accuracy against f32.",
		NewPolicy: func(p node.Params) (node.PolicyNode, error) {
			return Cache{DType: p.String("dtype"), Block: p.Int("block"), State: p.String("state")}, nil
		},
	})
}

// Cache is the kv.cache node: the KV page format and block size of a plan.
type Cache struct {
	DType string // a page.Format name
	Block int    // tokens per block, >= 1
	State string // recurrent state storage: "f32" or "bf16"
}

// Fold implements node.PolicyNode: it sets KVDType and KVBlockTokens.
func (c Cache) Fold(p *node.PlanPolicy) error {
	p.KVDType = c.DType
	p.KVBlockTokens = c.Block
	if c.State != "" {
		p.StateDType = c.State
	}
	return nil
}
