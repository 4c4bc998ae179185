package exec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWithDrafts(t *testing.T) {
	// Sequence 0 decodes token 7 at position 4; sequence 1 feeds a prompt
	// chunk (3 tokens, last sampled); sequence 2 feeds an unsampled chunk;
	// sequence 3 decodes token 9 at position 10.
	b := &Batch{
		Tokens:    []int32{7, 1, 2, 3, 5, 6, 9},
		Positions: []int32{4, 0, 1, 2, 0, 1, 10},
		RowSeq:    []int32{0, 1, 1, 1, 2, 2, 3},
		Tables:    [][]int32{{0}, {1}, {2}, {3}},
		LogitRows: []int32{0, 3, 6},
	}
	tests := []struct {
		name   string
		drafts Drafts
		want   *Batch
	}{
		{"no drafts keep the batch", Drafts{nil, nil, {}}, b},
		{"drafts follow their sequence's last token", Drafts{{70, 71}, nil, {90}}, &Batch{
			Tokens:    []int32{7, 70, 71, 1, 2, 3, 5, 6, 9, 90},
			Positions: []int32{4, 5, 6, 0, 1, 2, 0, 1, 10, 11},
			RowSeq:    []int32{0, 0, 0, 1, 1, 1, 2, 2, 3, 3},
			Tables:    b.Tables,
			LogitRows: []int32{0, 1, 2, 5, 8, 9},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := b.WithDrafts(tt.drafts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("WithDrafts (-want +got):\n%s", diff)
			}
			first, n := tt.drafts.Spans()
			for i := range first {
				if got.LogitRows[first[i]] != got.LogitRows[first[i]+n[i]-1]-int32(n[i]-1) {
					t.Errorf("sequence %d: logit rows %v are not contiguous from %d", i, got.LogitRows, first[i])
				}
			}
		})
	}
	if _, err := b.WithDrafts(Drafts{{1}}); err == nil {
		t.Error("WithDrafts accepted one draft list for three logit rows")
	}
}
