package httpfront_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ninfer/ninfer-go/httpfront"
)

// BenchmarkServeDecode measures aggregate decode throughput through the
// HTTP server: C clients each send one greedy /v1/completions request of
// 64 tokens per iteration, on the largest bundled model
// (llama-2-tiny-random, 32000-token vocabulary). It reports generated
// tokens per second over all clients (tok/s).
//
//	go test ./httpfront -run '^$' -bench ServeDecode -benchtime 5x
func BenchmarkServeDecode(b *testing.B) {
	const model = "llama-2-tiny-random.gguf"
	modelPath(b, model)
	for _, c := range []int{1, 2, 4, 8, 16} {
		b.Run(fmt.Sprintf("C=%d", c), func(b *testing.B) {
			s := start(b, model, httpfront.Config{}, c)
			body := `{"model":"llama-2-tiny-random","prompt":"Once upon a time","max_tokens":64,"temperature":0}`
			var tokens atomic.Int64
			b.ResetTimer()
			begin := time.Now()
			for range b.N {
				var wg sync.WaitGroup
				for range c {
					wg.Add(1)
					go func() {
						defer wg.Done()
						resp, err := http.Post(s.url+"/v1/completions", "application/json", strings.NewReader(body))
						if err != nil {
							b.Error(err)
							return
						}
						defer resp.Body.Close()
						var doc struct {
							Usage struct {
								CompletionTokens int64 `json:"completion_tokens"`
							} `json:"usage"`
						}
						if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != 200 {
							b.Errorf("status %d: %v", resp.StatusCode, err)
							return
						}
						tokens.Add(doc.Usage.CompletionTokens)
					}()
				}
				wg.Wait()
			}
			b.ReportMetric(float64(tokens.Load())/time.Since(begin).Seconds(), "tok/s")
		})
	}
}
