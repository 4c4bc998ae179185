package page

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFormatSizes(t *testing.T) {
	tests := []struct {
		format        Format
		kvDim, layers int
		rowBytes      int
		perToken      int64
	}{
		{F32, 32, 5, 128, 1280},
		{F16, 32, 5, 64, 640},
		{BF16, 1024, 28, 2048, 114688},
		{Int8G64, 32, 5, 32 + 4, 360},     // a row shorter than a group is one group
		{Int8G64, 100, 1, 100 + 2*4, 216}, // the last group is short
		{Int8G64, 1024, 28, 1024 + 16*4, 60928},
		{FP8E4M3Row256, 64, 2, 64 + 4, 272},
		{FP8E4M3Row256, 1024, 28, 1024 + 4*4, 58240},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s with %d layers of width %d", tt.format.Name, tt.layers, tt.kvDim), func(t *testing.T) {
			if got := tt.format.RowBytes(tt.kvDim); got != tt.rowBytes {
				t.Errorf("RowBytes(%d) = %d, want %d", tt.kvDim, got, tt.rowBytes)
			}
			if got := BytesPerToken(tt.format, tt.layers, tt.kvDim); got != tt.perToken {
				t.Errorf("BytesPerToken = %d, want %d", got, tt.perToken)
			}
		})
	}
}

func TestCapacityTokens(t *testing.T) {
	tests := []struct {
		name   string
		budget int64
		format Format
		block  int
		want   int64
	}{
		{"one GiB of f32 for a 5x32 model", 1 << 30, F32, 1, 838860},
		{"rounded down to whole blocks", 1 << 30, F32, 16, 838848},
		{"int8 holds more", 1 << 30, Int8G64, 16, 2982608},
		{"less than one block", 1280*16 - 1, F32, 16, 0},
		{"exactly one block", 1280 * 16, F32, 16, 16},
		{"no budget", 0, F16, 16, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CapacityTokens(tt.budget, tt.format, 5, 32, tt.block); got != tt.want {
				t.Errorf("CapacityTokens(%d, %s, 5, 32, %d) = %d, want %d", tt.budget, tt.format.Name, tt.block, got, tt.want)
			}
		})
	}
}

func TestLookupFormat(t *testing.T) {
	for _, name := range FormatNames() {
		f, err := LookupFormat(name)
		if err != nil || f.Name != name {
			t.Errorf("LookupFormat(%q) = %+v, %v", name, f, err)
		}
	}
	if f, err := LookupFormat(""); err != nil || f != F32 {
		t.Errorf("LookupFormat(\"\") = %+v, %v, want f32", f, err)
	}
	if _, err := LookupFormat("int4"); err == nil {
		t.Error("LookupFormat(\"int4\") succeeded")
	}
	want := []string{"f32", "f16", "bf16", "int8-g64", "fp8-e4m3-row256"}
	if diff := cmp.Diff(want, FormatNames()); diff != "" {
		t.Errorf("FormatNames() (-want +got):\n%s", diff)
	}
}
