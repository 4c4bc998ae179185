package httpfront

// modelObject is the model's /v1/models entry: OpenAI's fields, the
// context length as vLLM (max_model_len: the most tokens one request may
// use) and llama-server (meta.n_ctx_train: the model's training context,
// Model.TrainContext, else max_model_len) give it, and the vocabulary size.
func modelObject(m *Model) map[string]any {
	ctxLen := m.Engine.ContextLength()
	train := m.TrainContext
	if train <= 0 {
		train = ctxLen
	}
	return map[string]any{"id": m.ID, "object": "model", "created": m.Created.Unix(), "owned_by": "ninfer",
		"max_model_len": ctxLen,
		"meta":          map[string]any{"n_ctx_train": train, "n_vocab": m.Tokenizer.VocabSize()}}
}
