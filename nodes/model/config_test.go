package model

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/weights"
)

func sharedModel(t *testing.T, name string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "models", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("model not found: %s", p)
	}
	return p
}

// setKey is a rewrite edit that sets key to v.
func setKey(key string, v weights.Value) func([]weights.KV, []*weights.Tensor) ([]weights.KV, []*weights.Tensor) {
	return func(kvs []weights.KV, ts []*weights.Tensor) ([]weights.KV, []*weights.Tensor) {
		for i := range kvs {
			if kvs[i].Key == key {
				kvs[i].Value = v
			}
		}
		return kvs, ts
	}
}

// withKey writes a copy of the GGUF at path with key set to v (rewrite).
func withKey(t *testing.T, path, key string, v weights.Value) *weights.File {
	t.Helper()
	return rewrite(t, path, setKey(key, v))
}

// A block_count far past the blocks in the file is one error with a count,
// not one line per missing tensor; a few missing tensors are each named.
func TestMissingTensorsAreCounted(t *testing.T) {
	path := sharedModel(t, "stories260K.gguf")
	f := withKey(t, path, "llama.block_count", weights.U32(1000))
	_, err := ReadConfig(f)
	if err == nil {
		t.Fatal("block_count 1000 loaded")
	}
	msg := err.Error()
	if n := strings.Count(msg, "\n"); n > 0 || !strings.Contains(msg, "8955 of the 9003 tensors the model needs are missing") ||
		!strings.Contains(msg, "1000 layers declared by llama.block_count; the file has tensors for 5") {
		t.Errorf("error (%d lines):\n%.2000s", n+1, msg)
	}

	f = withKey(t, path, "llama.block_count", weights.U32(6))
	_, err = ReadConfig(f)
	if err == nil || strings.Count(err.Error(), "\n") != 8 || !strings.Contains(err.Error(), `"blk.5.ffn_up.weight"`) {
		t.Errorf("one block too many: %v", err)
	}
}

// A hybrid GGUF with a missing Gated DeltaNet tensor, an inconsistent
// state size or an unknown architecture gets an error naming the tensor or
// the key.
func TestHybridBadFiles(t *testing.T) {
	path := sharedModel(t, "tiny-qwen35-f32.gguf")
	drop := func(name string) func([]weights.KV, []*weights.Tensor) ([]weights.KV, []*weights.Tensor) {
		return func(kvs []weights.KV, ts []*weights.Tensor) ([]weights.KV, []*weights.Tensor) {
			return kvs, slices.DeleteFunc(slices.Clone(ts), func(t *weights.Tensor) bool { return t.Name == name })
		}
	}
	set := setKey
	for _, tc := range []struct {
		name string
		edit func([]weights.KV, []*weights.Tensor) ([]weights.KV, []*weights.Tensor)
		want string
	}{
		{"a missing ssm tensor", drop("blk.4.ssm_conv1d.weight"), `tensor "blk.4.ssm_conv1d.weight": not found`},
		{"a missing gated-attention tensor", drop("blk.7.attn_q_norm.weight"), `"blk.7.attn_q_norm.weight"`},
		{"a state size the inner size contradicts", set("qwen35.ssm.state_size", weights.U32(8)), "ssm.inner_size = 64, want time_step_rank 4 x state_size 8"},
		{"value heads not a multiple of key heads", set("qwen35.ssm.time_step_rank", weights.U32(3)), "ssm.inner_size"},
		{"an unknown architecture", set("general.architecture", weights.Str("qwen99")), `architecture "qwen99" not supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := rewrite(t, path, tc.edit)
			_, err := ReadConfig(f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
	f, err := weights.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	if c.Layers != 8 || c.Hybrid.NextN != 1 || c.AttentionLayers() != 2 || !c.Recurrent(0) || c.Recurrent(3) || c.Recurrent(7) {
		t.Errorf("config %+v hybrid %+v", c, c.Hybrid)
	}
}
