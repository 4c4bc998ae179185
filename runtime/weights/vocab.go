package weights

import "fmt"

// SameVocabulary reports, as an error naming the first difference, whether
// draft cannot draft for target: their token embeddings (the logits'
// width) must have as many rows and their tokenizer.ggml.tokens lists must
// be the same texts in the same order.
func SameVocabulary(target, draft *File) error {
	rows := func(f *File) (int, error) {
		t, err := f.Tensor("token_embd.weight")
		if err != nil {
			return 0, err
		}
		return t.Rows(), nil
	}
	tn, err := rows(target)
	if err != nil {
		return err
	}
	dn, err := rows(draft)
	if err != nil {
		return err
	}
	mismatch := func(format string, a ...any) error {
		return fmt.Errorf("vocabulary mismatch: draft model %s and target model %s: %s", draft.Path, target.Path, fmt.Sprintf(format, a...))
	}
	if tn != dn {
		return mismatch("%d token embeddings in the draft, %d in the target", dn, tn)
	}
	tt, err := target.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return fmt.Errorf("target model %s: %w", target.Path, err)
	}
	dt, err := draft.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return fmt.Errorf("draft model %s: %w", draft.Path, err)
	}
	if len(tt) != len(dt) {
		return mismatch("%d tokens in the draft's tokenizer, %d in the target's", len(dt), len(tt))
	}
	for i := range tt {
		if tt[i] != dt[i] {
			return mismatch("token %d is %q in the draft, %q in the target", i, dt[i], tt[i])
		}
	}
	return nil
}
