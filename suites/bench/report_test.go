package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// seedReport reads ../shared/seeds/004_*.txt, the seed's sample report.
func seedReport(t *testing.T) []byte {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "shared", "seeds", "004_*.txt"))
	if len(files) != 1 {
		t.Skipf("../shared/seeds/004_*.txt not found (%d matches)", len(files))
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// jsonPaths lists every key path of a decoded JSON value; arrays add "[]".
func jsonPaths(prefix string, v any, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			p := join(prefix, k)
			out[p] = true
			jsonPaths(p, x, out)
		}
	case []any:
		for _, x := range v {
			jsonPaths(prefix+"[]", x, out)
		}
	}
}

func join(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

// typePaths lists every JSON key path a Go type can produce.
func typePaths(prefix string, t reflect.Type, out map[string]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			name := strings.Split(f.Tag.Get("json"), ",")[0]
			p := join(prefix, name)
			out[p] = true
			typePaths(p, f.Type, out)
		}
	case reflect.Slice:
		typePaths(prefix+"[]", t.Elem(), out)
	}
}

func sortedKeys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// ours are the fields ninfer adds to the seed's report, each for a reason
// stated in report.go.
var ours = []string{
	"bandwidth", "bandwidth.peak_bytes_per_second", "bandwidth.peak_source", "bandwidth.triad_bytes", "bandwidth.triad_threads",
	"config.backend", "config.graph", "config.prefix_reuse", "config.sampling", "config.threads",
	"environment.arch", "environment.backend", "environment.cpu_cores", "environment.cpu_kernels", "environment.cpu_model", "environment.go_version",
	"environment.os", "environment.threads",
	"load.artifact_bytes_mapped",
	"memory.kv_accounting", "memory.kv_block_tokens", "memory.kv_bytes_per_token", "memory.kv_tokens_per_gib",
	"memory.state_bytes_per_sequence", "memory.state_checkpoint_bytes", "memory.state_checkpoints", "memory.state_slots",
	"memory.vision_workspace.capacity_bytes", "memory.vision_workspace.peak_used_bytes", "memory.vision_workspace.used_bytes",
	"tests[].batch", "tests[].decode_bandwidth_bytes_per_second", "tests[].decode_bandwidth_fraction_of_peak", "tests[].decode_bytes_per_token",
	"tests[].reps[].finish_reason", "tests[].reps[].prompt_tokens", "tests[].reps[].substituted_position", "tests[].reps[].substituted_token",
}

func TestFieldSetMatchesTheSeed(t *testing.T) {
	var seed any
	if err := json.Unmarshal(seedReport(t), &seed); err != nil {
		t.Fatal(err)
	}
	seedSet, typeSet := map[string]bool{}, map[string]bool{}
	jsonPaths("", seed, seedSet)
	typePaths("", reflect.TypeFor[Report](), typeSet)
	var missing []string
	for p := range seedSet {
		if !typeSet[p] {
			missing = append(missing, p)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the seed's fields missing from Report:\n%s", strings.Join(missing, "\n"))
	}
	var extra []string
	for p := range typeSet {
		if !seedSet[p] {
			extra = append(extra, p)
		}
	}
	sort.Strings(extra)
	want := slices.Clone(ours)
	sort.Strings(want)
	if diff := cmp.Diff(want, extra); diff != "" {
		t.Errorf("fields beyond the seed's (-listed +actual):\n%s", diff)
	}
}

func TestSchemaDescribesExactlyTheReportType(t *testing.T) {
	var s map[string]any
	if err := json.Unmarshal(SchemaJSON, &s); err != nil {
		t.Fatal(err)
	}
	defs := s["$defs"].(map[string]any)
	schemaSet := map[string]bool{}
	var walk func(prefix string, node map[string]any)
	walk = func(prefix string, node map[string]any) {
		if alts, ok := node["anyOf"].([]any); ok {
			for _, a := range alts {
				walk(prefix, a.(map[string]any))
			}
		}
		if ref, ok := node["$ref"].(string); ok {
			node = defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
		}
		if items, ok := node["items"].(map[string]any); ok {
			walk(prefix+"[]", items)
		}
		props, _ := node["properties"].(map[string]any)
		req, _ := node["required"].([]any)
		if len(req) != len(props) {
			t.Errorf("%s: %d required of %d properties; every field is always present (null when not applicable)", prefix, len(req), len(props))
		}
		if props != nil && node["additionalProperties"] != false {
			t.Errorf("%s: additionalProperties is not false", prefix)
		}
		for k, v := range props {
			p := join(prefix, k)
			schemaSet[p] = true
			walk(p, v.(map[string]any))
		}
	}
	walk("", s)
	typeSet := map[string]bool{}
	typePaths("", reflect.TypeFor[Report](), typeSet)
	if diff := cmp.Diff(sortedKeys(typeSet), sortedKeys(schemaSet)); diff != "" {
		t.Errorf("schema.json vs Report (-type +schema):\n%s", diff)
	}
}

func TestAggregateReproducesTheSeedsStatistics(t *testing.T) {
	var want Report
	if err := json.Unmarshal(seedReport(t), &want); err != nil {
		t.Fatal(err)
	}
	for _, wt := range want.Tests {
		t.Run(wt.Label, func(t *testing.T) {
			got := Test{Label: wt.Label, Kind: wt.Kind, NPrompt: wt.NPrompt, NGen: wt.NGen, Reps: wt.Reps}
			Aggregate(&got)
			// The seed prints 10 significant digits, so a deviation of
			// timings that differ in their fifth digit agrees to ~1e-6.
			opts := []cmp.Option{cmpopts.EquateApprox(2e-6, 0), cmpopts.IgnoreFields(Test{}, "RequestedOutputTokens", "WorkspacePeakBytes", "WorkspaceAllocatorPeakBytes")}
			if diff := cmp.Diff(wt, got, opts...); diff != "" {
				t.Errorf("Aggregate (-seed +got):\n%s", diff)
			}
		})
	}
}

// A prompt with an image (ninfer bench --image) prefills its image rows
// too: the prefill rate counts the tokens the repetition sent, not
// n_prompt alone.
func TestAggregatePrefillRateCountsImageRows(t *testing.T) {
	got := Test{Kind: KindPP, NPrompt: 64, Batch: 2, Reps: []Rep{
		{PromptTokens: 64 + 192, Timings: Timings{PrefillSeconds: 2}},
		{PromptTokens: 64 + 192, Timings: Timings{PrefillSeconds: 4}},
	}}
	Aggregate(&got)
	want := (256.0*2/2 + 256.0*2/4) / 2
	if got.PrefillTokSMean == nil || *got.PrefillTokSMean != want {
		t.Errorf("prefill tok/s mean %v, want %v", got.PrefillTokSMean, want)
	}
}

// sampleReport is the seed's report completed with ninfer's fields, as
// `ninfer bench` would fill them on the CPU backend.
func sampleReport(t *testing.T) Report {
	var r Report
	if err := json.Unmarshal(seedReport(t), &r); err != nil {
		t.Fatal(err)
	}
	r.Environment = Environment{Backend: "cpu", CPUModel: "Test CPU", CPUCores: 2, CPUKernels: "avx2", GoVersion: "go1.26", OS: "linux", Arch: "amd64"}
	r.Memory.Device = nil
	r.Memory.KVAccounting, r.Memory.KVBlockTokens, r.Memory.KVBytesPerToken, r.Memory.KVTokensPerGiB = "runtime/kv", 64, 35096, 30594
	r.Config.Graph, r.Config.Backend, r.Config.Sampling = "plain", "cpu", "greedy"
	peak := 1.8e12
	r.Bandwidth = Bandwidth{PeakBytesPerSecond: &peak, PeakSource: "triad", TriadBytes: 3 << 27, TriadThreads: 2}
	for i := range r.Tests {
		r.Tests[i].Batch = 1
		for j := range r.Tests[i].Reps {
			r.Tests[i].Reps[j].FinishReason = "length"
			r.Tests[i].Reps[j].PromptTokens = max(1, r.Tests[i].NPrompt)
		}
		SetBandwidth(&r.Tests[i], 17.5e9, &peak)
	}
	return r
}

func TestSchemaValidation(t *testing.T) {
	good, err := json.Marshal(sampleReport(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(good); err != nil {
		t.Fatalf("a complete report does not validate:\n%v", err)
	}
	tests := []struct {
		name, from, to, want string
	}{
		{"a wrong schema version", `"schema_version":15`, `"schema_version":14`, "$.schema_version: 14, want 15"},
		{"an unknown field", `"tool":"ninfer_bench"`, `"tool":"ninfer_bench","extra":1`, `$: unexpected property "extra"`},
		{"a missing field", `"tool":"ninfer_bench",`, ``, `$: missing required "tool"`},
		{"null where a number is required", `"load_seconds":3.30988622`, `"load_seconds":null`, "$.load.load_seconds: type null, want number"},
		{"a fraction where an integer is required", `"n_gen":256`, `"n_gen":256.5`, "$.tests[0].n_gen: type number, want integer"},
		{"a negative count", `"n_gen":256`, `"n_gen":-1`, "$.tests[0].n_gen: -1 < minimum 0"},
		{"an unknown test kind", `"kind":"tg"`, `"kind":"decode"`, "$.tests[0].kind: decode is not one of [pp tg pp+tg]"},
		{"a workspace that is neither an arena nor null", `"workspace":{`, `"workspace":7,"x":{`, "$.memory.workspace: matches no anyOf alternative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(good, []byte(tc.from)) {
				t.Fatalf("report has no %s", tc.from)
			}
			bad := bytes.Replace(good, []byte(tc.from), []byte(tc.to), 1)
			err := Validate(bad)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestMarkdownReport(t *testing.T) {
	r := sampleReport(t)
	md := r.Markdown()
	for _, want := range []string{
		"| test | prompt | gen | reps | prefill tok/s | decode tok/s | prefill s | decode s | total s | decode GB/s | of peak |",
		"| tg256 | 0 | 256 | 3 | — | 54.3 ± 0.0 | — | 4.71 ± 0.00 | 4.75 ± 0.00 | 950.4 | 52.8% |",
		"| pp2048+tg512 | 2048 | 512 | 3 | 3609.9 ± 3.4 | 77.1 ± 0.0 | 0.57 ± 0.00 | 6.64 ± 0.00 | 7.20 ± 0.00 | 1350.0 | 75.0% |",
		"Peak bandwidth 1800.0 GB/s, measured by a 402653184-byte triad on 2 goroutines.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
}
