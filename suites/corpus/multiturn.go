package corpus

import (
	"context"
	"fmt"
	"image/color"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/ninfer/ninfer-go/suites/bench"
)

// MultiTurn is a multi-turn chat workload: Conversations conversations of
// Turns turns each. A conversation opens with its own system prompt of
// about SystemWords words; every turn adds a user message of about
// UserWords words, and the model's reply (ReplyTokens tokens) joins the
// history, so each turn's prompt extends the previous turn's, as chat
// clients and agents resend the whole conversation. Conversations run
// Concurrency at a time, each turn after the previous one's reply.
type MultiTurn struct {
	Conversations int    `json:"conversations"`
	Turns         int    `json:"turns"`
	SystemWords   int    `json:"system_words"`
	UserWords     int    `json:"user_words"`
	ReplyTokens   int    `json:"reply_tokens"`
	Concurrency   int    `json:"concurrency"`
	Seed          uint64 `json:"seed"`
}

// Validate reports the first unusable setting.
func (mt MultiTurn) Validate() error {
	switch {
	case mt.Conversations < 1 || mt.Turns < 1 || mt.Concurrency < 1:
		return fmt.Errorf("multi-turn: conversations %d, turns %d and concurrency %d must be >= 1", mt.Conversations, mt.Turns, mt.Concurrency)
	case mt.SystemWords < 0 || mt.UserWords < 1 || mt.ReplyTokens < 1:
		return fmt.Errorf("multi-turn: system words %d must be >= 0, user words %d and reply tokens %d >= 1", mt.SystemWords, mt.UserWords, mt.ReplyTokens)
	}
	return nil
}

// words is the vocabulary the synthetic messages are drawn from.
var words = strings.Fields(`the a of and to in is was for on that with as it by at from his her they this
	which or an be are had not but have one all were we when there can said so what more up out if about who get
	time story house river garden morning letter window mountain village friend teacher engine market winter
	summer light voice question answer reason number system method table paper result measure value signal
	walks finds builds carries opens watches remembers explains counts changes follows returns quiet small
	bright early careful distant simple heavy gentle sudden ancient narrow`)

// text is n words drawn with rng, in sentences of eight.
func text(rng *rand.Rand, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		w := words[rng.IntN(len(words))]
		if i%8 == 0 {
			w = strings.ToUpper(w[:1]) + w[1:]
		}
		b.WriteString(w)
		if i%8 == 7 || i == n-1 {
			b.WriteByte('.')
		}
	}
	return b.String()
}

// TurnResult is one turn's measurement.
type TurnResult struct {
	Conversation int `json:"conversation"`
	Turn         int `json:"turn"` // 1-based
	Result
}

// Run sends the workload with c (which must be a chat client) and returns
// every turn's result, conversation-major. A conversation stops at its
// first failed turn.
func (mt MultiTurn) Run(ctx context.Context, c *Client) []TurnResult {
	out := make([][]TurnResult, mt.Conversations)
	release := time.Now()
	work := make(chan int)
	var wg sync.WaitGroup
	for range mt.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for conv := range work {
				out[conv] = mt.conversation(ctx, c, conv, release)
			}
		}()
	}
	for conv := range mt.Conversations {
		work <- conv
	}
	close(work)
	wg.Wait()
	var all []TurnResult
	for _, o := range out {
		all = append(all, o...)
	}
	return all
}

// conversation runs one conversation's turns in order.
func (mt MultiTurn) conversation(ctx context.Context, c *Client, conv int, release time.Time) []TurnResult {
	h := mt.history(conv)
	var out []TurnResult
	for turn := 1; turn <= mt.Turns; turn++ {
		r := h.next(ctx, c, release)
		out = append(out, r)
		if r.Error != "" {
			break
		}
	}
	return out
}

// RunSideBySide sends the workload to every client (chat clients, one per
// server) one request at a time, turn by turn: each turn of a
// conversation goes to the clients one after another before the next
// turn, and each client keeps its own history (its server's replies). So
// a busy host's load falls on every server alike, which measuring them one
// after another does not give. Concurrency is not used. It returns each
// client's results, conversation-major; a client's conversation stops at
// its first failed turn.
func (mt MultiTurn) RunSideBySide(ctx context.Context, clients []*Client) [][]TurnResult {
	out := make([][]TurnResult, len(clients))
	release := time.Now()
	for conv := range mt.Conversations {
		hs := make([]*history, len(clients))
		for i := range clients {
			hs[i] = mt.history(conv)
		}
		for range mt.Turns {
			for i, c := range clients {
				if hs[i].failed {
					continue
				}
				out[i] = append(out[i], hs[i].next(ctx, c, release))
			}
		}
	}
	return out
}

// history is one conversation's messages so far.
type history struct {
	mt     MultiTurn
	conv   int
	rng    *rand.Rand
	msgs   []Message
	turn   int // turns sent
	failed bool
}

// history starts conversation conv: its system prompt, drawn from the
// conversation's own seed, as its user messages will be.
func (mt MultiTurn) history(conv int) *history {
	h := &history{mt: mt, conv: conv, rng: rand.New(rand.NewPCG(mt.Seed, uint64(conv)))}
	if mt.SystemWords > 0 {
		h.msgs = append(h.msgs, Message{Role: "system", Content: text(h.rng, mt.SystemWords)})
	}
	return h
}

// next sends the conversation's next turn with c: a new user message after
// the history, whose reply joins the history.
func (h *history) next(ctx context.Context, c *Client, release time.Time) TurnResult {
	mt := h.mt
	h.turn++
	h.msgs = append(h.msgs, Message{Role: "user", Content: text(h.rng, mt.UserWords)})
	r := c.Send(ctx, Request{Index: h.conv*mt.Turns + h.turn - 1, Fixture: fmt.Sprintf("conv%d-turn%d", h.conv, h.turn),
		Category: "multi-turn", Seed: uint64(h.conv), MaxTokens: mt.ReplyTokens, Messages: append([]Message(nil), h.msgs...)}, release)
	if r.Error != "" {
		h.failed = true
	} else {
		h.msgs = append(h.msgs, Message{Role: "assistant", Content: r.Text})
	}
	return TurnResult{Conversation: h.conv, Turn: h.turn, Result: r}
}

// TurnRow summarises one turn number over the conversations.
type TurnRow struct {
	Turn         int     `json:"turn"`
	N            int     `json:"n"`             // conversations that reached the turn without error
	PromptTokens float64 `json:"prompt_tokens"` // mean
	CachedTokens float64 `json:"cached_tokens"` // mean, as the server reports it
	HitRate      float64 `json:"hit_rate"`      // cached / prompt tokens
	TTFT         Latency `json:"ttft"`
}

// MultiTurnRun is the workload measured against one server setup.
type MultiTurnRun struct {
	Label    string       `json:"label"` // "ninfer, prefix cache on", "llama-server", ...
	Server   string       `json:"server"`
	Turns    []TurnRow    `json:"turns"`
	HitRate  float64      `json:"hit_rate"` // over every turn
	Failures int          `json:"failures"`
	Results  []TurnResult `json:"results"`
}

// NewMultiTurnRun summarises results per turn.
func NewMultiTurnRun(label, server string, turns int, results []TurnResult) MultiTurnRun {
	run := MultiTurnRun{Label: label, Server: server, Results: results}
	var prompt, cached float64
	for t := 1; t <= turns; t++ {
		row := TurnRow{Turn: t}
		var ttft []float64
		var p, c float64
		for _, r := range results {
			if r.Turn != t {
				continue
			}
			if r.Error != "" || r.Usage == nil {
				run.Failures++
				continue
			}
			row.N++
			ttft = append(ttft, r.TTFT)
			p += float64(r.Usage.PromptTokens)
			c += float64(r.Cached())
		}
		if row.N > 0 {
			row.PromptTokens, row.CachedTokens = p/float64(row.N), c/float64(row.N)
			row.HitRate = c / max(p, 1)
		}
		row.TTFT = latency(ttft)
		prompt, cached = prompt+p, cached+c
		run.Turns = append(run.Turns, row)
	}
	run.HitRate = cached / max(prompt, 1)
	return run
}

// MultiTurnReport compares runs of one workload.
type MultiTurnReport struct {
	Tool        string            `json:"tool"` // "ninfer_multiturn"
	Command     string            `json:"command"`
	Model       string            `json:"model"`
	Workload    MultiTurn         `json:"workload"`
	Environment bench.Environment `json:"environment"`
	Runs        []MultiTurnRun    `json:"runs"`
	Notes       []string          `json:"notes"`
}

// Markdown renders the per-turn table of every run, and the last turn's
// TTFT relative to the first run.
func (r *MultiTurnReport) Markdown() string {
	var b strings.Builder
	w := r.Workload
	fmt.Fprintf(&b, "# Multi-turn workload — %s\n\n", r.Model)
	fmt.Fprintf(&b, "%d conversations x %d turns, %d at a time; system prompt ~%d words, user messages ~%d words, replies %d tokens (greedy).\n\n",
		w.Conversations, w.Turns, w.Concurrency, w.SystemWords, w.UserWords, w.ReplyTokens)
	fmt.Fprintf(&b, "| run | turn | n | prompt tokens | cached tokens | hit rate | TTFT mean ms | TTFT p50 ms | TTFT p99 ms |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|\n")
	for _, run := range r.Runs {
		for _, t := range run.Turns {
			fmt.Fprintf(&b, "| %s | %d | %d | %.0f | %.0f | %.1f%% | %.1f | %.1f | %.1f |\n", run.Label, t.Turn, t.N, t.PromptTokens, t.CachedTokens,
				100*t.HitRate, t.TTFT.Mean, t.TTFT.P50, t.TTFT.P99)
		}
	}
	b.WriteString("\n| run | hit rate (all turns) | failures | last-turn TTFT mean ms | vs first run |\n|---|---|---|---|---|\n")
	var base float64
	for i, run := range r.Runs {
		last := run.Turns[len(run.Turns)-1].TTFT.Mean
		if i == 0 {
			base = last
		}
		ratio := "—"
		if last > 0 && base > 0 {
			ratio = fmt.Sprintf("%.2fx faster", base/last)
			if last > base {
				ratio = fmt.Sprintf("%.2fx slower", last/base)
			}
		}
		fmt.Fprintf(&b, "| %s | %.1f%% | %d | %.1f | %s |\n", run.Label, 100*run.HitRate, run.Failures, last, ratio)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\n- %s", n)
	}
	b.WriteString("\n")
	return b.String()
}

// PlotMultiTurn is the file name of the per-turn TTFT plot.
const PlotMultiTurn = "ttft_per_turn.png"

// Plot writes the mean TTFT per turn of every run into dir.
func (r *MultiTurnReport) Plot(dir string) (string, error) {
	p := plot.New()
	p.Title.Text = "Time to first token per turn — " + r.Model
	p.X.Label.Text = "turn"
	p.Y.Label.Text = "TTFT mean, milliseconds"
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	var ticks plot.ConstantTicks
	for t := 1; t <= r.Workload.Turns; t++ {
		ticks = append(ticks, plot.Tick{Value: float64(t), Label: fmt.Sprint(t)})
	}
	p.X.Tick.Marker = ticks
	colors := []color.Color{blue, orange, green}
	top := 0.0
	for i, run := range r.Runs {
		var xys plotter.XYs
		for _, t := range run.Turns {
			xys = append(xys, plotter.XY{X: float64(t.Turn), Y: t.TTFT.Mean})
			top = max(top, t.TTFT.Mean)
		}
		if err := line(p, run.Label, xys, colors[i%len(colors)], false); err != nil {
			return "", err
		}
	}
	frame(p, top)
	path := filepath.Join(dir, PlotMultiTurn)
	return path, p.Save(6*vg.Inch, 4*vg.Inch, path)
}
