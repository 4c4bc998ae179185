package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ninfer/ninfer-go/suites/bench"
)

// rssSlack is the share by which a process's peak RSS may exceed the
// memory it accounts for (weights, KV in use, workspace).
const rssSlack = 0.05

// Loading and running a model takes no memory beyond what `ninfer bench`
// accounts for: the peak RSS of a pp64+tg4 run is at most the peak RSS of
// `ninfer tokenize` on the same model (the binary, the tokenizer and the
// file's metadata pages), plus the weights' bytes, the KV the run used at
// its peak and the backend's workspace, plus rssSlack, with the file read
// into memory (the default) and mapped (--mmap). Scratch the kernels keep
// per weight (a copy of the weights in another layout, or of their
// scales) would break it. The model is NINFER_RSS_MODEL, one of a few
// hundred MB (such as the 0.6B-shape Q8_0 GGUF); the test is skipped
// without it.
func TestPeakRSSWithinAccountedMemory(t *testing.T) {
	model := os.Getenv("NINFER_RSS_MODEL")
	if model == "" {
		t.Skip("NINFER_RSS_MODEL not set")
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	base, _ := peakRSS(t, bin, "tokenize", "--model", model, "hello")
	for _, mmap := range []bool{false, true} {
		name := "loaded"
		if mmap {
			name = "mapped"
		}
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "report.json")
			args := []string{"bench", "--model", model, "-p", "64", "-n", "4", "-r", "1", "--warmup", "0",
				"--threads", "2", "--kv-capacity", "1024", "--peak-bandwidth", "-1", "--output", "json", "--output-file", out}
			if mmap {
				args = append(args, "--mmap")
			}
			rss, stderr := peakRSS(t, bin, args...)
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatalf("%v; stderr: %s", err, stderr)
			}
			var rep bench.Report
			if err := json.Unmarshal(data, &rep); err != nil {
				t.Fatal(err)
			}
			m := rep.Memory
			accounted := m.Weights.CapacityBytes + m.Sequence.PeakUsedBytes
			if m.Workspace != nil {
				accounted += m.Workspace.CapacityBytes
			}
			limit := base + int64(float64(accounted)*(1+rssSlack))
			t.Logf("peak RSS %d MB: tokenizer %d MB + weights %d MB + KV %d MB + workspace %d MB (limit %d MB)",
				rss>>20, base>>20, m.Weights.CapacityBytes>>20, m.Sequence.PeakUsedBytes>>20, (accounted-m.Weights.CapacityBytes-m.Sequence.PeakUsedBytes)>>20, limit>>20)
			if rss > limit {
				t.Errorf("peak RSS %d bytes, more than the %d accounted for", rss, limit)
			}
		})
	}
}

// peakRSS runs the test binary as the CLI with args and returns its peak
// resident set size in bytes and its stderr; it fails t if the run fails.
func peakRSS(t *testing.T, bin string, args ...string) (int64, []byte) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "NINFER_TEST_AS_CLI=1")
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ninfer %v: %v; stderr: %s", args, err, stderr.b)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Skip("no rusage on this platform")
	}
	return ru.Maxrss << 10, stderr.b // Linux reports kilobytes
}

// limitedBuffer keeps the last 4 KiB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.b = append(l.b, p...)
	if len(l.b) > 4096 {
		l.b = l.b[len(l.b)-4096:]
	}
	return len(p), nil
}
