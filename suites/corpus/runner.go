package corpus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ninfer/ninfer-go/suites/bench"
)

// Run sends reqs in order with exactly conc persistent workers: each
// worker takes the next request of the send order and sends the one after
// only when it has read the whole response. The workers are started, then
// released together; makespan runs from the release to the last complete
// response. Results are in send order.
func Run(ctx context.Context, c *Client, reqs []Request, conc int) (results []Result, makespan float64, release time.Time) {
	results = make([]Result, len(reqs))
	var next atomic.Int64
	start := make(chan struct{})
	var ready, wg sync.WaitGroup
	for w := range conc {
		ready.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready.Done()
			<-start
			for {
				i := int(next.Add(1) - 1)
				if i >= len(reqs) || ctx.Err() != nil {
					return
				}
				r := c.Send(ctx, reqs[i], release)
				r.Worker = w
				results[i] = r
			}
		}()
	}
	ready.Wait()
	release = time.Now()
	close(start)
	wg.Wait()
	for _, r := range results {
		makespan = max(makespan, r.End)
	}
	return results, makespan, release
}

// IntervalsPath is the server endpoint the steady-decode metric needs:
//
//	GET /v1/stats/intervals?since_unix_ms=MS
//
// answering 200 with {"interval_seconds": 1, "intervals": [bench.Interval...]}:
// every one-second engine interval that started at or after since_unix_ms,
// oldest first, the one still being filled last with complete false. A
// server without it answers 404, and the corpus report then says steady
// decode was not measured.
const IntervalsPath = "/v1/stats/intervals"

// ErrNoIntervals means the server does not expose per-second intervals.
var ErrNoIntervals = errors.New("the server exposes no per-second engine intervals (GET " + IntervalsPath + ")")

// FetchIntervals reads the server's intervals since the release.
func FetchIntervals(ctx context.Context, hc *http.Client, baseURL string, since time.Time) ([]bench.Interval, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	url := fmt.Sprintf("%s%s?since_unix_ms=%d", baseURL, IntervalsPath, since.UnixMilli())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, ErrNoIntervals
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d: %s", IntervalsPath, resp.StatusCode, body)
	}
	var doc struct {
		Intervals []bench.Interval `json:"intervals"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("GET %s: %w", IntervalsPath, err)
	}
	return doc.Intervals, nil
}
