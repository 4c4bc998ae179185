package traces

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const jaegerJSON = `{"data":[{"traceID":"abc","spans":[
 {"traceID":"abc","spanID":"2","operationName":"prefill","references":[{"refType":"CHILD_OF","traceID":"abc","spanID":"1"}],"startTime":1000300,"duration":700,"tags":[{"key":"gen_ai.usage.prompt_tokens","type":"int64","value":7}]},
 {"traceID":"abc","spanID":"1","operationName":"llm_request","references":[],"startTime":1000000,"duration":3000,"tags":[{"key":"gen_ai.usage.completion_tokens","type":"int64","value":5}]},
 {"traceID":"abc","spanID":"3","operationName":"decode","references":[{"refType":"CHILD_OF","traceID":"abc","spanID":"1"}],"startTime":1001000,"duration":2000,"tags":[]}
]}]}`

func TestFetchAndRender(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/traces/abc" {
			http.Error(w, `{"errors":[{"code":404,"msg":"trace not found"}]}`, http.StatusNotFound)
			return
		}
		w.Write([]byte(jaegerJSON))
	}))
	defer srv.Close()
	spans, err := FetchTrace(context.Background(), srv.URL, "abc")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	RenderWaterfall(&b, spans, 10)
	want := []string{
		"llm_request                        0µs |██████████|     3.0ms completion_tokens=5",
		"  prefill                        300µs | ██       |     700µs prompt_tokens=7",
		"  decode                         1.0ms |   ██████ |     2.0ms",
	}
	if diff := cmp.Diff(want, strings.Split(strings.TrimRight(b.String(), "\n"), "\n")); diff != "" {
		t.Errorf("waterfall (-want +got):\n%s", diff)
	}
	if _, err := FetchTrace(context.Background(), srv.URL, "nope"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("missing trace: err = %v", err)
	}
}
