package grammar

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// benchDir is JSONSchemaBench's visible sample (../shared from the
// repository root; see its README).
func benchDir(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "shared", "golden", "jsonschemabench")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("JSONSchemaBench sample: %v", err)
	}
	return dir
}

type benchSchema struct {
	ID     string          `json:"id"`
	Schema json.RawMessage `json:"schema"`
	Tests  []struct {
		Valid bool            `json:"valid"`
		Data  json.RawMessage `json:"data"`
	} `json:"tests"`
}

func readBench(t testing.TB, path string) []benchSchema {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []benchSchema
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var s benchSchema
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// validator compiles schema with an independent implementation (formats
// asserted); nil when it cannot (remote references, regexes Go lacks).
func validator(schema json.RawMessage) *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(schema)))
	if err != nil {
		return nil
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.AssertFormat()
	c.UseLoader(noLoader{})
	if err := c.AddResource("mem:///schema.json", doc); err != nil {
		return nil
	}
	sch, err := c.Compile("mem:///schema.json")
	if err != nil {
		return nil
	}
	return sch
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) { return nil, fmt.Errorf("no remote schemas: %s", url) }

// fullBench runs every schema (NINFER_SCHEMABENCH=full); by default a
// fixed sample keeps the test short.
func fullBench() bool { return os.Getenv("NINFER_SCHEMABENCH") == "full" }

// benchCoverage is the coverage each dataset must reach (the full run).
var benchCoverage = map[string]float64{
	"Glaiveai2K": 0.98, "Github_easy": 0.9, "Kubernetes": 0.9, "Snowplow": 0.9, "WashingtonPost": 0.9,
	"Github_medium": 0.6, "Github_hard": 0.6,
}

// TestJSONSchemaBench compiles every schema of JSONSchemaBench's visible
// sample, generates forced output from random logits (as a random-weight
// model would) and validates it independently: no output may fail
// validation, and each dataset's coverage (schemas compiled whose output
// validates) must reach its target.
func TestJSONSchemaBench(t *testing.T) {
	dir := benchDir(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	pieces, v := testVocab()
	var report []string
	for _, path := range files {
		dataset := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		if dataset == "maskbench-tests" {
			continue
		}
		schemas := readBench(t, path)
		var compiled, valid, checked int
		errs := map[string]int{}
		for i, s := range schemas {
			if !fullBench() && i%6 != 0 {
				continue
			}
			sch := validator(s.Schema)
			if sch == nil {
				continue // the reference validator cannot read it either
			}
			checked++
			src, err := FromSchema(s.Schema)
			if err != nil {
				errs[firstWords(err.Error())]++
				continue
			}
			g, err := Parse(src)
			if err != nil {
				t.Errorf("%s: FromSchema's GBNF does not parse: %v", s.ID, err)
				continue
			}
			compiled++
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			text, complete := generateCached(g, pieces, v, 3000, rng)
			if !complete {
				errs["no complete output"]++
				continue
			}
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
			if err != nil {
				t.Errorf("%s: output does not parse: %v\n%s", s.ID, err, text)
				continue
			}
			if err := sch.Validate(inst); err != nil {
				t.Errorf("%s: output does not validate: %v\n%s", s.ID, err, text)
				continue
			}
			valid++
		}
		if checked == 0 {
			continue
		}
		cov := float64(valid) / float64(checked)
		report = append(report, fmt.Sprintf("%-16s %3d schemas  compiled %3d  valid %3d  coverage %.2f", dataset, checked, compiled, valid, cov))
		if testing.Verbose() {
			for _, k := range sortedByCount(errs) {
				report = append(report, fmt.Sprintf("    %4d %s", errs[k], k))
			}
		}
		if want, ok := benchCoverage[dataset]; ok && fullBench() && cov < want {
			t.Errorf("%s: coverage %.2f, want >= %.2f", dataset, cov, want)
		}
	}
	t.Log("\n" + strings.Join(report, "\n"))
}

func firstWords(s string) string {
	if i := strings.Index(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	if len(s) > 90 {
		s = s[:90]
	}
	return s
}

func sortedByCount(m map[string]int) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return m[keys[a]] > m[keys[b]] || m[keys[a]] == m[keys[b]] && keys[a] < keys[b] })
	return keys
}

// generateCached is generate on interned states (Cache), as the server
// decodes.
func generateCached(g *Grammar, pieces [][]byte, v *Vocab, budget int, rng *rand.Rand) (string, bool) {
	eog := int32(len(pieces) - 1)
	st := g.NewCache().Start()
	var out []byte
	for n := 0; n < budget; n++ {
		best, bestLogit := int32(-1), -1.0
		v.Allow(st, budget-n, func(id int32) {
			if l := rng.Float64(); l > bestLogit {
				best, bestLogit = id, l
			}
		})
		if st.Accepting() {
			if l := rng.Float64(); l > bestLogit || best < 0 {
				best = eog
			}
		}
		if best < 0 {
			return string(out), false
		}
		if best == eog {
			return string(out), true
		}
		out = append(out, pieces[best]...)
		st = st.AdvanceBytes(pieces[best])
	}
	return string(out), st.Accepting()
}
