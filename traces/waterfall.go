package traces

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// JaegerSpan is one span as Jaeger's query API (/api/traces/ID) returns it.
type JaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	StartTime int64 `json:"startTime"` // microseconds since the epoch
	Duration  int64 `json:"duration"`  // microseconds
	Tags      []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

// Parent is the span's CHILD_OF parent id, or "".
func (s *JaegerSpan) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// FetchTrace reads one trace from a Jaeger query service at base (e.g.
// http://127.0.0.1:16686).
func FetchTrace(ctx context.Context, base, traceID string) ([]JaegerSpan, error) {
	u, err := url.JoinPath(base, "api", "traces", traceID)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jaeger %s: %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	var out struct {
		Data []struct {
			Spans []JaegerSpan `json:"spans"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("jaeger %s: %w", u, err)
	}
	if len(out.Data) == 0 || len(out.Data[0].Spans) == 0 {
		return nil, fmt.Errorf("trace %s not found", traceID)
	}
	return out.Data[0].Spans, nil
}

// waterfallKeys are the attributes a waterfall line shows, when present.
var waterfallKeys = []string{AttrPromptTokens, AttrCompletionTokens, AttrChunkTokens, AttrPrefillChunks,
	AttrDecodeRounds, AttrDecodeTokens, AttrStepBucket, AttrStepPrefillToken, AttrStepDecodeRows, AttrDrafted, AttrAccepted}

// RenderWaterfall writes one line per span in tree order: indented name,
// start offset from the trace start, a duration bar `width` characters
// wide for the whole trace, the duration and key attributes.
func RenderWaterfall(w io.Writer, spans []JaegerSpan, width int) {
	if len(spans) == 0 {
		return
	}
	t0, t1 := spans[0].StartTime, spans[0].StartTime+spans[0].Duration
	ids := map[string]bool{}
	for _, s := range spans {
		t0, t1 = min(t0, s.StartTime), max(t1, s.StartTime+s.Duration)
		ids[s.SpanID] = true
	}
	total := max(t1-t0, 1)
	children := map[string][]*JaegerSpan{}
	var roots []*JaegerSpan
	for i := range spans {
		s := &spans[i]
		if p := s.Parent(); p != "" && ids[p] {
			children[p] = append(children[p], s)
		} else {
			roots = append(roots, s)
		}
	}
	byStart := func(l []*JaegerSpan) {
		sort.SliceStable(l, func(i, j int) bool { return l[i].StartTime < l[j].StartTime })
	}
	var walk func(s *JaegerSpan, depth int)
	walk = func(s *JaegerSpan, depth int) {
		from := int((s.StartTime - t0) * int64(width) / total)
		n := max(int(s.Duration*int64(width)/total), 1)
		from = min(from, width-1)
		n = min(n, width-from)
		bar := strings.Repeat(" ", from) + strings.Repeat("█", n) + strings.Repeat(" ", width-from-n)
		name := strings.Repeat("  ", depth) + s.OperationName
		fmt.Fprintf(w, "%-28s %9s |%s| %9s", name, fmtMicros(s.StartTime-t0), bar, fmtMicros(s.Duration))
		tags := map[string]any{}
		for _, t := range s.Tags {
			tags[t.Key] = t.Value
		}
		for _, k := range waterfallKeys {
			if v, ok := tags[k]; ok {
				fmt.Fprintf(w, " %s=%v", k[strings.LastIndex(k, ".")+1:], v)
			}
		}
		fmt.Fprintln(w)
		kids := children[s.SpanID]
		byStart(kids)
		for _, c := range kids {
			walk(c, depth+1)
		}
	}
	byStart(roots)
	for _, r := range roots {
		walk(r, 0)
	}
}

func fmtMicros(us int64) string {
	d := time.Duration(us) * time.Microsecond
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%dµs", us)
}
