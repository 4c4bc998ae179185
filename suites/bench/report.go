// Package bench defines the `ninfer bench` report (the seed's
// ninfer_bench_report, schema version 15, plus CPU fields) and the
// statistics every ninfer measurement shares: means and sample standard
// deviations, percentiles, the seed's rounding rules for Markdown, speedup
// definitions, steady-interval selection and the two acceptance
// aggregations.
//
// Field names follow ../shared/seeds/004_*.txt exactly. A field that does
// not apply to a backend (a CUDA version on the CPU) or that ninfer does not
// measure is null, never a guess; schema.json documents every field.
package bench

import _ "embed"

// SchemaVersion is the report's schema_version.
const SchemaVersion = 15

// Report is one `ninfer bench` run.
type Report struct {
	SchemaVersion int    `json:"schema_version"`
	ArtifactType  string `json:"artifact_type"` // "ninfer_bench_report"
	Tool          string `json:"tool"`          // "ninfer_bench"
	// Command is the command line, arguments quoted where needed.
	Command     string      `json:"command"`
	Environment Environment `json:"environment"`
	Artifact    Artifact    `json:"artifact"`
	Load        Load        `json:"load"`
	Memory      Memory      `json:"memory"`
	Config      Config      `json:"config"`
	Bandwidth   Bandwidth   `json:"bandwidth"`
	Tests       []Test      `json:"tests"`
}

// Environment is the machine the run measured.
type Environment struct {
	GPUName            *string `json:"gpu_name"`             // null on the CPU backend
	CUDARuntimeVersion *string `json:"cuda_runtime_version"` // null on the CPU backend
	CUDADriverVersion  *string `json:"cuda_driver_version"`  // null on the CPU backend
	DeviceID           *int    `json:"device_id"`            // null on the CPU backend
	Backend            string  `json:"backend"`              // "cpu", "cuda"
	CPUModel           string  `json:"cpu_model"`            // /proc/cpuinfo "model name", "" if unknown
	CPUCores           int     `json:"cpu_cores"`            // logical CPUs usable by the process
	// CPUKernels is the CPU backend's kernel level on this machine:
	// "avx512" (AVX-512 VNNI), "avx2" or "ref" (the Go reference loops).
	CPUKernels string `json:"cpu_kernels"`
	Threads    int    `json:"threads"` // backend threads (0 = all cores)
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
}

// Artifact is the model file.
type Artifact struct {
	Path          string `json:"path"`
	FileSizeBytes int64  `json:"file_size_bytes"`
}

// Load describes loading the model.
type Load struct {
	Architecture string   `json:"architecture"` // GGUF general.architecture
	Name         string   `json:"name"`         // GGUF general.name, else the file name
	Formats      []string `json:"formats"`      // tensor dtypes present, sorted
	// PrefillSignature is the SHA-256 of the compiled plan's text: it
	// identifies the graph, policy (prefill chunk, KV format) and steps the
	// run executed.
	PrefillSignature string  `json:"prefill_signature"`
	LoadSeconds      float64 `json:"load_seconds"`
	// UploadSeconds is the host-to-device copy time; null on the CPU backend.
	UploadSeconds *float64 `json:"upload_seconds"`
	// ArtifactBytesRead are the bytes read eagerly at load (the GGUF header
	// and tensor infos). Tensor data is memory-mapped and paged in on first
	// use (during warm-up); see ArtifactBytesMapped.
	ArtifactBytesRead   int64  `json:"artifact_bytes_read"`
	ArtifactBytesMapped int64  `json:"artifact_bytes_mapped"`
	HostToDeviceBytes   *int64 `json:"host_to_device_bytes"` // null on the CPU backend
	PeakStagingBytes    *int64 `json:"peak_staging_bytes"`   // null on the CPU backend
	DeviceObjectCount   *int   `json:"device_object_count"`  // null on the CPU backend
	HostObjectCount     int    `json:"host_object_count"`    // tensors held by the host
}

// Arena is one memory region's accounting.
type Arena struct {
	CapacityBytes int64 `json:"capacity_bytes"`
	UsedBytes     int64 `json:"used_bytes"`
	PeakUsedBytes int64 `json:"peak_used_bytes"`
}

// Memory is the memory accounting: weights, the KV cache (the sequence
// arena), and capacity figures. Fields ninfer does not track on a backend
// are null.
type Memory struct {
	Device         *int   `json:"device"` // null on the CPU backend
	MaxContext     int    `json:"max_context"`
	KVCapacityMode string `json:"kv_capacity_mode"` // "explicit" (--kv-capacity) or "automatic"
	KVCapacity     int    `json:"kv_capacity"`      // tokens
	// KVCapacityPageGroups is the number of KV blocks of KVBlockTokens tokens.
	KVCapacityPageGroups    int    `json:"kv_capacity_page_groups"`
	KVCapacityMaxPageGroups int    `json:"kv_capacity_max_page_groups"`
	KVCache                 string `json:"kv_cache"` // KV page format: "f32", "f16", "int8-g64" ...
	Weights                 Arena  `json:"weights"`
	// Sequence is the KV cache: capacity is reserved at start-up; used is
	// the blocks held when the report was written; peak is the blocks that
	// hold the K and V of the longest request (prompt + generated - 1
	// tokens; one request runs at a time).
	Sequence Arena `json:"sequence"`
	// Workspace is the backend's scratch (exec.Workspace: on the CPU the
	// programs' activation buffers and the kernels' scratch); null for a
	// backend that does not account it.
	Workspace                      *Arena `json:"workspace"`
	VisionWorkspace                *Arena `json:"vision_workspace"` // the vision tower backend's scratch (--mmproj); null: no tower
	MinimumRuntimeReservationBytes *int64 `json:"minimum_runtime_reservation_bytes"`
	// KVCapacityIncrementBytes is the memory of one more KV block.
	KVCapacityIncrementBytes   *int64 `json:"kv_capacity_increment_bytes"`
	RuntimeReservationBytes    *int64 `json:"runtime_reservation_bytes"`
	AvailableAfterWeightsBytes *int64 `json:"available_after_weights_bytes"`
	AvailableAfterStartupBytes *int64 `json:"available_after_startup_bytes"`
	KVCapacityHeadroomBytes    *int64 `json:"kv_capacity_headroom_bytes"`
	PlannedSlackBytes          *int64 `json:"planned_slack_bytes"`
	CUDAGraphAllowanceBytes    *int64 `json:"cuda_graph_allowance_bytes"`
	// KVPayloadBytes is the KV cache's K and V data (and scales, for
	// quantized formats) at full capacity.
	KVPayloadBytes int64 `json:"kv_payload_bytes"`
	KVBlockTokens  int   `json:"kv_block_tokens"`
	// KVBytesPerToken is K+V for one token over all layers, scales included.
	KVBytesPerToken int64 `json:"kv_bytes_per_token"`
	// StateBytesPerSequence is a hybrid model's recurrent state per
	// sequence and StateSlots the slots reserved (0 without state).
	StateBytesPerSequence int64 `json:"state_bytes_per_sequence"`
	StateSlots            int   `json:"state_slots"`
	// StateCheckpoints is the most recurrent state checkpoints (a hybrid
	// model's prefix cache, each of StateBytesPerSequence) the budget
	// holds, StateCheckpointBytes their memory.
	StateCheckpoints     int   `json:"state_checkpoints"`
	StateCheckpointBytes int64 `json:"state_checkpoint_bytes"`
	// KVTokensPerGiB is how many tokens of KV one GiB holds in this format.
	KVTokensPerGiB int64 `json:"kv_tokens_per_gib"`
	// KVAccounting names the source of the KV figures.
	KVAccounting string `json:"kv_accounting"`
}

// Prime describes the decode path's priming before measurement.
type Prime struct {
	Primed       bool `json:"primed"`        // warm-up repetitions ran
	OutputTokens int  `json:"output_tokens"` // tokens generated while priming
}

// Config is the run's configuration.
type Config struct {
	MaxContext         int     `json:"max_context"`
	PrefillChunk       int     `json:"prefill_chunk"`
	KVCache            string  `json:"kv_cache"`
	SpeculativeBackend *string `json:"speculative_backend"` // null: no speculation
	DraftTokens        int     `json:"draft_tokens"`
	ProposalHead       *string `json:"proposal_head"` // null: no speculation
	UseCUDAGraph       bool    `json:"use_cuda_graph"`
	// DecodePath names how a decode step runs ("cpu_op_list": the CPU
	// backend's prepared op list, one per batch shape; "cuda_graph":
	// CUDA graphs captured per bucket and replayed, "cuda_eager": kernels
	// launched one by one; prefixed with the speculative backend, as
	// "mtp_cuda_graph").
	DecodePath       string `json:"decode_path"`
	DecodeGraphPrime Prime  `json:"decode_graph_prime"`
	Repetitions      int    `json:"repetitions"`
	Warmup           int    `json:"warmup"`
	// CorpusPath is the prompt corpus ("builtin:NAME" for an embedded one).
	CorpusPath   string `json:"corpus_path"`
	CorpusTokens int    `json:"corpus_tokens"`
	Graph        string `json:"graph"`
	Backend      string `json:"backend"`
	Threads      int    `json:"threads"`
	PrefixReuse  bool   `json:"prefix_reuse"` // always false: every prompt is computed
	Sampling     string `json:"sampling"`     // "greedy"
}

// Bandwidth is the memory-bandwidth reference a run's achieved bandwidth is
// compared with.
type Bandwidth struct {
	// PeakBytesPerSecond is the reference peak; null if neither measured
	// nor given.
	PeakBytesPerSecond *float64 `json:"peak_bytes_per_second"`
	// PeakSource is "triad" (measured), "given" (--peak-bandwidth) or "none".
	PeakSource string `json:"peak_source"`
	// TriadBytes is the bytes one triad pass moves (24 per element, STREAM's
	// convention); 0 unless PeakSource is "triad".
	TriadBytes int64 `json:"triad_bytes"`
	// TriadThreads is the goroutines the triad ran on.
	TriadThreads int `json:"triad_threads"`
}

// Test is one benchmark test (pp512, tg128, pp2048+tg512) over its measured
// repetitions. Means and sample standard deviations are over repetitions;
// a deviation is null with fewer than two. Rates are per-repetition ratios,
// then averaged.
type Test struct {
	Label   string `json:"label"` // pp{P}, tg{G}, pp{P}+tg{G}
	Kind    string `json:"kind"`  // "pp", "tg", "pp+tg"
	NPrompt int    `json:"n_prompt"`
	NGen    int    `json:"n_gen"`
	// Batch is the sequences decoded together: 1 as llama-bench; B runs B
	// concurrent requests, each with its own prompt, and its token counts
	// and rates are summed over them (Label gets "@bB").
	Batch                 int      `json:"batch"`
	RequestedOutputTokens int      `json:"requested_output_tokens"` // n_gen + 1: prefill yields the first
	PrefillTokSMean       *float64 `json:"prefill_tok_s_mean"`      // null for tg
	PrefillTokSStddev     *float64 `json:"prefill_tok_s_stddev"`
	DecodeOutputTokSMean  *float64 `json:"decode_output_tok_s_mean"` // null for pp
	DecodeOutputTokSStd   *float64 `json:"decode_output_tok_s_stddev"`
	DecodeEngineTokSMean  *float64 `json:"decode_engine_tok_s_mean"`
	DecodeEngineTokSStd   *float64 `json:"decode_engine_tok_s_stddev"`
	PrepareSecondsMean    float64  `json:"prepare_seconds_mean"`
	PrepareSecondsStddev  *float64 `json:"prepare_seconds_stddev"`
	PrefillSecondsMean    *float64 `json:"prefill_seconds_mean"` // null for tg
	PrefillSecondsStddev  *float64 `json:"prefill_seconds_stddev"`
	DecodeSecondsMean     *float64 `json:"decode_seconds_mean"` // null for pp
	DecodeSecondsStddev   *float64 `json:"decode_seconds_stddev"`
	TotalSecondsMean      float64  `json:"total_seconds_mean"`
	TotalSecondsStddev    *float64 `json:"total_seconds_stddev"`
	// WorkspacePeakBytes and WorkspaceAllocatorPeakBytes are null: the CPU
	// backend does not account its scratch buffers.
	WorkspacePeakBytes          *int64      `json:"workspace_peak_bytes"`
	WorkspaceAllocatorPeakBytes *int64      `json:"workspace_allocator_peak_bytes"`
	Speculative                 Speculative `json:"speculative"` // summed over repetitions
	// DecodeBytesPerToken is the mean memory read per decoded token:
	// weights (an embedding row when the output matrix is separate),
	// divided by Batch (one step reads them once for every sequence), plus
	// the KV of the context. Null for pp.
	DecodeBytesPerToken *float64 `json:"decode_bytes_per_token"`
	// DecodeBandwidthBytesPerSecond is DecodeBytesPerToken x the mean
	// decode rate.
	DecodeBandwidthBytesPerSecond *float64 `json:"decode_bandwidth_bytes_per_second"`
	// DecodeBandwidthFractionOfPeak divides that by Bandwidth.PeakBytesPerSecond.
	DecodeBandwidthFractionOfPeak *float64 `json:"decode_bandwidth_fraction_of_peak"`
	Reps                          []Rep    `json:"reps"`
}

// Rep is one measured repetition. With a Batch of B, its token counts are
// summed over the B requests, submitted together; its timings are the
// batch's phases on the engine's clock (prepare: submit -> the first
// request's first step; prefill: -> every request has its first token;
// decode: the first request's first token -> the last request done, so
// with staggered prefills the decode rate is a lower bound; total: submit
// -> the last final event, as the caller saw it), and its prompt and
// substitution are the first request's.
type Rep struct {
	GeneratedOutputTokens int `json:"generated_output_tokens"`
	// DecodeOutputTokens excludes the first token, which prefill produces.
	DecodeOutputTokens int `json:"decode_output_tokens"`
	// DecodeEngineTokens are the tokens the engine committed in decode
	// steps (equal to DecodeOutputTokens without speculation).
	DecodeEngineTokens int         `json:"decode_engine_tokens"`
	Timings            Timings     `json:"timings"`
	Speculative        Speculative `json:"speculative"`
	// PromptTokens is the prompt actually sent (1 for tg tests).
	PromptTokens int `json:"prompt_tokens"`
	// SubstitutedPosition and SubstitutedToken are the prompt position and
	// the token put there to make this repetition's prompt unique.
	SubstitutedPosition int    `json:"substituted_position"`
	SubstitutedToken    int32  `json:"substituted_token"`
	FinishReason        string `json:"finish_reason"`
}

// Timings are one repetition's phase durations in seconds.
type Timings struct {
	PrepareSeconds float64 `json:"prepare_seconds"` // submit -> first engine step (queue)
	VisionSeconds  float64 `json:"vision_seconds"`  // encoding the repetition's images (ninfer bench --image); 0 without
	PrefillSeconds float64 `json:"prefill_seconds"` // first step -> first token
	DecodeSeconds  float64 `json:"decode_seconds"`  // first token -> last token
	TotalSeconds   float64 `json:"total_seconds"`   // vision_seconds + (submit -> final event, as the caller saw it)
}

// Speculative counts speculative decoding work. Without speculation it has
// Enabled false, zero counts and null ratios.
type Speculative struct {
	Backend             string   `json:"backend"` // "none" without speculation
	Enabled             bool     `json:"enabled"`
	DraftWindow         int      `json:"draft_window"`
	Rounds              int      `json:"rounds"`
	DraftedTokens       int      `json:"drafted_tokens"`
	AcceptedTokens      int      `json:"accepted_tokens"`
	FallbackSteps       int      `json:"fallback_steps"`
	AcceptanceRate      *float64 `json:"acceptance_rate"`   // accepted / drafted
	AcceptanceLength    *float64 `json:"acceptance_length"` // 1 + accepted / rounds
	AcceptedPerPosition []int    `json:"accepted_per_position"`
}

// Disabled is the speculative block of a run that does not speculate.
func Disabled() Speculative {
	return Speculative{Backend: "none", AcceptedPerPosition: []int{}}
}

// Corpus is the built-in prompt corpus (corpus.txt): English prose, a
// little code and arithmetic, written for ninfer. `ninfer bench` tokenizes
// it with the model's tokenizer and takes prompts from it.
//
//go:embed corpus.txt
var Corpus string
