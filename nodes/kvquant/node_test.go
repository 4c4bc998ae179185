package kvquant_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/graphs"
	_ "github.com/ninfer/ninfer-go/nodes/kvquant"
	_ "github.com/ninfer/ninfer-go/nodes/model"
	_ "github.com/ninfer/ninfer-go/nodes/prefill"
	_ "github.com/ninfer/ninfer-go/nodes/sample"
	"github.com/ninfer/ninfer-go/runtime/compile"
	"github.com/ninfer/ninfer-go/runtime/kv/page"
	"github.com/ninfer/ninfer-go/runtime/node"
)

// TestGraphsFoldKVPolicy compiles every shipped kv-FORMAT graph and checks
// that kv.cache folded its format and block size into the plan's policy.
func TestGraphsFoldKVPolicy(t *testing.T) {
	for _, f := range page.Formats()[1:] {
		t.Run(f.Name, func(t *testing.T) {
			file, src, err := graphs.Source("kv-" + f.Name)
			if err != nil {
				t.Fatal(err)
			}
			p, err := compile.Source(file, src, node.Default, node.Params{"block": int64(32)})
			if err != nil {
				t.Fatal(err)
			}
			want := node.PlanPolicy{PrefillChunk: 512, KVDType: f.Name, KVBlockTokens: 32, StateDType: "f32"}
			if diff := cmp.Diff(want, p.Policy); diff != "" {
				t.Errorf("policy (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCacheRejectsUnknownFormat(t *testing.T) {
	src := `graph: bad
nodes:
  - {id: cache, op: kv.cache, with: {dtype: int4}}
  - {id: fwd, op: model.forward, in: {tokens: $in.tokens, positions: $in.positions}}
  - {id: pick, op: sample.token, in: {logits: fwd.logits}}
out: {tokens: pick.tokens}
`
	_, err := compile.Source("bad.yaml", []byte(src), node.Default, nil)
	want := `bad.yaml:3:45: param dtype of kv.cache: "int4" is not one of f32, f16, bf16, int8-g64, fp8-e4m3-row256`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("compile error = %v, want %q", err, want)
	}
}
