package weights

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// Info reads a model file's facts once: a missing key leaves its field 0
// (the name falls back to the file's), a malformed one is an error that
// names it.
func TestInfo(t *testing.T) {
	embd := &Tensor{Name: "token_embd.weight", Shape: []int{2, 3}, DType: tensor.F32, Data: f32Bytes(1, 2, 3, 4, 5, 6)}
	arch := KV{Key: "general.architecture", Value: Str("qwen3")}
	tests := []struct {
		name    string
		kvs     []KV
		tensors []*Tensor
		want    Info
		wantErr string
	}{
		{"every fact", []KV{arch, {Key: "general.name", Value: Str("Tiny")}, {Key: "qwen3.context_length", Value: U32(4096)},
			{Key: "qwen3.block_count", Value: U32(2)}}, []*Tensor{embd},
			Info{Arch: "qwen3", Name: "Tiny", ContextLength: 4096, Layers: 2, Vocab: 3, Embed: 2}, ""},
		{"none said", []KV{arch}, nil, Info{Arch: "qwen3", Name: "model"}, ""},
		{"context out of range", []KV{arch, {Key: "qwen3.context_length", Value: U64(1 << 25)}}, nil, Info{},
			"qwen3.context_length = 33554432 out of range"},
		{"context zero", []KV{arch, {Key: "qwen3.context_length", Value: U32(0)}}, nil, Info{},
			"qwen3.context_length = 0 out of range"},
		{"context past int64", []KV{arch, {Key: "qwen3.context_length", Value: U64(1<<64 - 1)}}, nil, Info{},
			"qwen3.context_length = 18446744073709551615 out of range"},
		{"context of the wrong type", []KV{arch, {Key: "qwen3.context_length", Value: Str("4k")}}, nil, Info{},
			`key "qwen3.context_length"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "model.gguf")
			if err := os.WriteFile(path, writeFile(t, 3, tt.kvs, tt.tensors), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := f.Info()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Info() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Info() (-want +got):\n%s", diff)
			}
		})
	}
}
