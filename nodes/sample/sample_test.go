package sample

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ninfer/ninfer-go/runtime/exec"
)

func TestArgmaxTiesToLowerID(t *testing.T) {
	for _, tc := range []struct {
		logits []float32
		want   int32
	}{
		{[]float32{1, 3, 3, 2}, 1},
		{[]float32{-1, -1}, 0},
		{[]float32{0, 0, 5}, 2},
	} {
		if got := Argmax(tc.logits); got != tc.want {
			t.Errorf("Argmax(%v) = %d, want %d", tc.logits, got, tc.want)
		}
	}
}

func TestPick(t *testing.T) {
	logits := []float32{0, 2, 1.9, -5, 1}
	draw := func(s exec.Sampling, n int) []int32 {
		rng := rand.New(rand.NewPCG(s.Seed, 1))
		var out []int32
		for range n {
			out = append(out, Pick(logits, s, rng))
		}
		return out
	}
	if got := draw(exec.Sampling{Temperature: 0}, 3); !cmp.Equal(got, []int32{1, 1, 1}) {
		t.Errorf("greedy = %v", got)
	}
	if got := draw(exec.Sampling{Temperature: 1, TopK: 1}, 3); !cmp.Equal(got, []int32{1, 1, 1}) {
		t.Errorf("top_k 1 = %v", got)
	}
	a, b := draw(exec.Sampling{Temperature: 1, Seed: 7}, 50), draw(exec.Sampling{Temperature: 1, Seed: 7}, 50)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same seed differs:\n%s", diff)
	}
	for _, id := range draw(exec.Sampling{Temperature: 1, TopK: 2, Seed: 3}, 200) {
		if id != 1 && id != 2 {
			t.Fatalf("top_k 2 drew %d", id)
		}
	}
	for _, id := range draw(exec.Sampling{Temperature: 1, TopP: 0.3, Seed: 3}, 200) {
		if id != 1 {
			t.Fatalf("top_p 0.3 drew %d (only the top token has >= 0.3 mass)", id)
		}
	}
	for _, id := range draw(exec.Sampling{Temperature: 1, MinP: 0.5, Seed: 3}, 200) {
		if id != 1 && id != 2 {
			t.Fatalf("min_p 0.5 drew %d", id)
		}
	}
	seen := map[int32]bool{}
	for _, id := range draw(exec.Sampling{Temperature: 2, Seed: 9}, 500) {
		seen[id] = true
	}
	if len(seen) < 4 {
		t.Errorf("temperature 2 drew only %v", seen)
	}
}
