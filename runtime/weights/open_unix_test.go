//go:build unix

package weights

import (
	"testing"
	"unsafe"
)

// TestLoadAlignsToHugePages checks that Load places the file's first byte
// on a 2 MiB boundary, so the weights fill whole huge pages.
func TestLoadAlignsToHugePages(t *testing.T) {
	f, err := Load(modelPath(t, "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tt := f.Tensors[0]
	start := uintptr(unsafe.Pointer(&tt.Data[0])) - uintptr(f.DataOffset) - uintptr(tt.Offset)
	if start%hugePage != 0 {
		t.Errorf("file starts at %#x, not on a %d-byte boundary", start, hugePage)
	}
	g := openModel(t, "stories260K.gguf")
	for i, tt := range f.Tensors {
		if string(tt.Data) != string(g.Tensors[i].Data) {
			t.Errorf("tensor %s: Load and Open data differ", tt.Name)
		}
	}
}
