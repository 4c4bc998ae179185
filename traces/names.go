// Package traces sets up OpenTelemetry tracing for ninfer and builds each
// request's phase spans. Span names and attribute keys live in this file
// only; the gen_ai.* keys are the ones vLLM and SGLang emit.
package traces

// Span names.
const (
	SpanRequest    = "llm_request" // root span of one API request (kind server)
	SpanQueue      = "queue"       // submitted -> first engine step
	SpanPrepare    = "prepare"     // template rendering and tokenization
	SpanVision     = "vision"      // decoding and encoding the request's images with the vision tower
	SpanPrefill    = "prefill"     // first engine step -> first token; one event per chunk
	SpanDecode     = "decode"      // first token -> last token
	SpanDraft      = "draft"       // speculative proposals
	SpanVerify     = "verify"      // speculative verification
	SpanEngineStep = "engine.step" // one batched engine step, linked to each request it advanced

	EventPrefillChunk = "prefill.chunk" // one prefill chunk, on the prefill span
)

// Request attributes (vLLM / SGLang names).
const (
	AttrRequestID        = "gen_ai.request.id"
	AttrRequestModel     = "gen_ai.request.model"
	AttrMaxTokens        = "gen_ai.request.max_tokens"
	AttrTemperature      = "gen_ai.request.temperature"
	AttrTopP             = "gen_ai.request.top_p"
	AttrN                = "gen_ai.request.n"
	AttrPromptTokens     = "gen_ai.usage.prompt_tokens"
	AttrCompletionTokens = "gen_ai.usage.completion_tokens"
	AttrFinishReason     = "gen_ai.response.finish_reasons"
	AttrTTFT             = "gen_ai.latency.time_to_first_token"
	AttrTimeInQueue      = "gen_ai.latency.time_in_queue"
	AttrTimeInPrefill    = "gen_ai.latency.time_in_model_prefill"
	AttrTimeInDecode     = "gen_ai.latency.time_in_model_decode"
	AttrE2E              = "gen_ai.latency.e2e"
)

// ninfer's own attributes.
const (
	AttrChunkTokens      = "ninfer.prefill.chunk_tokens" // tokens of one prefill chunk (event)
	AttrChunkStart       = "ninfer.prefill.chunk_start"  // first position of the chunk (event)
	AttrPrefillChunks    = "ninfer.prefill.chunks"       // chunks of the request's prompt
	AttrDecodeRounds     = "ninfer.decode.rounds"        // engine steps that produced tokens
	AttrDecodeTokens     = "ninfer.decode.tokens"        // tokens produced while decoding
	AttrStepBucket       = "ninfer.step.bucket"          // rows the step's device graph was prepared for
	AttrStepPrefillToken = "ninfer.step.prefill_tokens"  // prompt tokens in the step
	AttrStepDecodeRows   = "ninfer.step.decode_rows"     // sequences that sampled a token in the step
	AttrStepSequences    = "ninfer.step.sequences"       // sequences the step advanced
	AttrDrafted          = "ninfer.spec.drafted_tokens"  // speculative tokens proposed
	AttrAccepted         = "ninfer.spec.accepted_tokens" // speculative tokens accepted
	AttrAcceptedPerPos   = "ninfer.spec.accepted_per_position"
)
