package httpfront

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/valyala/fasthttp"

	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
)

// GraphPath serves the compiled plan the engine runs (plan.Doc) and the
// caches it keeps: GET GraphPath answers Graph.
const GraphPath = "/v1/graph"

// LivePath serves the engine's figures now (LiveStats), for the web UI's
// plots: GET LivePath.
const LivePath = "/v1/stats/live"

// Graph is the GraphPath body.
type Graph struct {
	Model       string       `json:"model"`
	Plan        plan.Doc     `json:"plan"`
	CacheGroups []CacheGroup `json:"cache_groups"`
}

// CacheGroup is one cache the engine keeps: the paged KV cache of a model
// (the target's, or a draft model's own) or the target's recurrent state
// slots (a hybrid model).
type CacheGroup struct {
	Name  string `json:"name"`  // "kv", "kv:ALIAS" or "state"
	Kind  string `json:"kind"`  // "kv" or "state"
	Model string `json:"model"` // the alias of the model it serves
	// Total is the group's blocks (kv) or slots (state); BlockTokens the
	// tokens one KV block holds; UnitBytes the bytes of a block or slot
	// (0 when unknown).
	Total       int    `json:"total"`
	BlockTokens int    `json:"block_tokens,omitempty"`
	UnitBytes   int64  `json:"unit_bytes,omitempty"`
	DType       string `json:"dtype,omitempty"`
	// Used are blocks or slots held by sequences; Cached free KV blocks
	// that still hold a cached prefix.
	Used   int `json:"used"`
	Cached int `json:"cached,omitempty"`
}

// cacheGroups lists the caches m's engine keeps, with their use now.
func cacheGroups(m *Model, snap engine.Snapshot) []CacheGroup {
	var kvType, stateType string
	if m.Plan != nil {
		kvType, stateType = m.Plan.Policy.KVDType, m.Plan.Policy.StateDType
	}
	groups := []CacheGroup{{Name: "kv", Kind: "kv", Model: node.Target, Total: snap.KVBlocksTotal, BlockTokens: snap.KVBlockTokens,
		UnitBytes: snap.KVBlockBytes, DType: kvType, Used: snap.KVBlocksUsed, Cached: snap.KVBlocksCached}}
	if snap.StateSlotsTotal > 0 {
		groups = append(groups, CacheGroup{Name: "state", Kind: "state", Model: node.Target, Total: snap.StateSlotsTotal,
			UnitBytes: snap.StateSlotBytes, DType: stateType, Used: snap.StateSlotsUsed})
	}
	others := snap.ModelKV
	for _, alias := range slices.Sorted(maps.Keys(others)) {
		u := others[alias]
		groups = append(groups, CacheGroup{Name: "kv:" + alias, Kind: "kv", Model: alias, Total: u.Total,
			BlockTokens: snap.KVBlockTokens, DType: kvType, Used: u.Used})
	}
	return groups
}

func (s *Server) graph(ctx *fasthttp.RequestCtx, m *Model) {
	if m.Plan == nil {
		s.fail(ctx, &Error{Status: http.StatusNotFound, Type: typeInvalid, Code: "not_found",
			Message: "The served model has no compiled plan to show."})
		return
	}
	s.writeJSON(ctx, http.StatusOK, Graph{Model: m.ID, Plan: m.Plan.Doc(), CacheGroups: cacheGroups(m, m.Engine.Snapshot())})
}

// LiveStats is the LivePath body: the engine's load now, the counters of
// /metrics the web UI plots (rates are the client's differences), and the
// phases of the last finished requests.
type LiveStats struct {
	UnixMs      int64        `json:"unix_ms"`
	Running     int          `json:"running"`
	Waiting     int          `json:"waiting"`
	MaxRunning  int          `json:"max_running"`
	CacheUsage  float64      `json:"cache_usage"` // 0..1, as vllm:kv_cache_usage_perc
	CacheGroups []CacheGroup `json:"cache_groups"`
	// PrefixQueries and PrefixHits count prompt tokens looked up in the
	// prefix cache at admission and found there, since start.
	PrefixCache      bool  `json:"prefix_cache"`
	PrefixQueries    int64 `json:"prefix_queries"`
	PrefixHits       int64 `json:"prefix_hits"`
	PromptTokens     int64 `json:"prompt_tokens"`     // of finished requests, since start
	GenerationTokens int64 `json:"generation_tokens"` // of finished requests, since start
	// Speculative counts speculative decoding since start.
	Speculative SpecCounts `json:"speculative"`
	// Recent are the phases of the last finished sequences, oldest first.
	Recent []RequestPhases `json:"recent"`
}

// SpecCounts are the speculative decoding counters of /metrics.
type SpecCounts struct {
	Rounds   int64 `json:"rounds"`
	Drafted  int64 `json:"drafted"`
	Accepted int64 `json:"accepted"`
	// AcceptedPerPosition[i] counts drafts accepted at draft position i.
	AcceptedPerPosition []int64 `json:"accepted_per_position"`
}

// RequestPhases are the phase timings of one finished sequence.
type RequestPhases struct {
	ReceivedUnixMs   int64   `json:"received_unix_ms"`
	PromptTokens     int     `json:"prompt_tokens"`
	CachedTokens     int     `json:"cached_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	QueueMs          float64 `json:"queue_ms"`   // submit -> first step
	PrefillMs        float64 `json:"prefill_ms"` // first step -> first token
	DecodeMs         float64 `json:"decode_ms"`  // first token -> done
	TotalMs          float64 `json:"total_ms"`   // received -> done
	FinishReason     string  `json:"finish_reason"`
	Drafted          int     `json:"drafted,omitempty"`
	Accepted         int     `json:"accepted,omitempty"`
}

// recentKept is how many finished sequences LiveStats.Recent holds.
const recentKept = 32

// recentPhases keeps the phases of the last recentKept finished sequences.
type recentPhases struct {
	mu   sync.Mutex
	list []RequestPhases // oldest first
}

func (r *recentPhases) add(received time.Time, st engine.Stats, finish string) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p := RequestPhases{ReceivedUnixMs: received.UnixMilli(), PromptTokens: st.PromptTokens, CachedTokens: st.CachedTokens,
		CompletionTokens: st.GeneratedTokens, QueueMs: ms(st.Queue), PrefillMs: ms(st.Prefill), DecodeMs: ms(st.Decode),
		FinishReason: finish, Drafted: st.Speculative.Drafted, Accepted: st.Speculative.Accepted}
	if !st.Done.IsZero() {
		p.TotalMs = ms(st.Done.Sub(received))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.list) == recentKept {
		r.list = append(r.list[:0], r.list[1:]...)
	}
	r.list = append(r.list, p)
}

func (r *recentPhases) snapshot() []RequestPhases {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]RequestPhases{}, r.list...)
}

func (s *Server) live(ctx *fasthttp.RequestCtx, m *Model) {
	snap := m.Engine.Snapshot()
	st := LiveStats{UnixMs: time.Now().UnixMilli(), Running: snap.Running, Waiting: snap.Waiting, MaxRunning: snap.MaxRunning,
		CacheUsage: snap.CacheUsage(), CacheGroups: cacheGroups(m, snap), PrefixCache: snap.PrefixCache,
		PrefixQueries: snap.PrefixQueries, PrefixHits: snap.PrefixHits, Recent: s.recent.snapshot()}
	s.metrics.readLive(&st)
	s.writeJSON(ctx, http.StatusOK, st)
}

// readLive reads the counters of LiveStats from the served model's series
// alone (not the whole registry), as a scrape would see them: each
// finished request's figures all or not at all.
func (m *Metrics) readLive(st *LiveStats) {
	m.recording.Lock()
	defer m.recording.Unlock()
	st.Speculative.AcceptedPerPosition = []int64{}
	ms := m.series.Load()
	if ms == nil {
		return
	}
	st.PromptTokens, st.GenerationTokens = counterValue(ms.nPrompt), counterValue(ms.nGeneration)
	st.Speculative.Rounds, st.Speculative.Drafted, st.Speculative.Accepted =
		counterValue(ms.nDrafts), counterValue(ms.nDraftTokens), counterValue(ms.nAccepted)
	st.Speculative.AcceptedPerPosition = perPosition(ms.nAcceptedPerPos)
}

// counterValue is c's count.
func counterValue(c prometheus.Counter) int64 {
	var d dto.Metric
	if c.Write(&d) != nil {
		return 0
	}
	return int64(d.GetCounter().GetValue())
}

// perPosition turns the per-position counters (label "position") into a
// slice indexed by position.
func perPosition(v *prometheus.CounterVec) []int64 {
	ch := make(chan prometheus.Metric)
	go func() {
		v.Collect(ch)
		close(ch)
	}()
	out := []int64{}
	for c := range ch {
		var m dto.Metric
		if c.Write(&m) != nil {
			continue
		}
		for _, l := range m.GetLabel() {
			if l.GetName() != "position" {
				continue
			}
			i, err := strconv.Atoi(l.GetValue())
			if err != nil || i < 0 || i > 1<<10 {
				continue
			}
			for len(out) <= i {
				out = append(out, 0)
			}
			out[i] = int64(m.GetCounter().GetValue())
		}
	}
	return out
}
