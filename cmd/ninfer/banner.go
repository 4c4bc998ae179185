package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/ninfer/ninfer-go/httpfront"
	"github.com/ninfer/ninfer-go/runtime/cpu"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// serveSummary is what `ninfer serve` prints once the model is open: what
// llama-server and vLLM users look for at start-up.
type serveSummary struct {
	ID, Path, Graph string
	Threads         int // --threads (0 = all cores)
	APIKey          bool
	StepTokens      int // --step-tokens (0 = the engine's default)
}

// write prints the summary of inst as aligned "name  value" lines under a
// first line with the load time.
func (s serveSummary) write(w io.Writer, inst *instance.Instance) {
	f := inst.File
	snap := inst.Engine.Snapshot()
	fmt.Fprintf(w, "ninfer serve: loaded %s in %s\n", s.ID, inst.LoadTime.Round(time.Millisecond))
	line := func(name, format string, args ...any) {
		fmt.Fprintf(w, "  %-13s %s\n", name, fmt.Sprintf(format, args...))
	}
	info := inst.Engine.Model()
	line("model", "%s (%s)", s.Path, info.Arch)
	line("weights", "%s", weightTypes(f))
	ctx := fmt.Sprintf("%d tokens per request", inst.Engine.ContextLength())
	if info.ContextLength > 0 {
		ctx += fmt.Sprintf(" (trained %d)", info.ContextLength)
	}
	line("context", "%s", ctx)
	kvTokens := snap.KVBlocksTotal * snap.KVBlockTokens
	line("kv cache", "%d tokens, %s, %s (%d blocks of %d tokens)", kvTokens, bytesText(int64(snap.KVBlocksTotal)*snap.KVBlockBytes),
		inst.Plan.Policy.KVDType, snap.KVBlocksTotal, snap.KVBlockTokens)
	if snap.StateSlotsTotal > 0 {
		line("state slots", "%d recurrent state slots of %s", snap.StateSlotsTotal, bytesText(snap.StateSlotBytes))
	}
	if inst.Device.Name != "" {
		line("compute", "%s (driver %s, kernels built with %s)", inst.Device.Name, inst.Device.Driver, inst.Device.Runtime)
	} else {
		threads := s.Threads
		if threads == 0 {
			threads = runtime.NumCPU()
		}
		line("compute", "cpu, %d threads, %s kernels", threads, cpu.KernelLevel())
	}
	steps := "default"
	if s.StepTokens > 0 {
		steps = fmt.Sprint(s.StepTokens)
	}
	line("graph", "%s (max concurrency %d, step tokens %s, prefill chunk %d)", s.Graph, snap.MaxRunning, steps, inst.Plan.Policy.PrefillChunk)
	switch why := inst.Engine.PrefixCacheOff(); {
	case snap.PrefixCache && snap.CheckpointsMax > 0:
		hidden := ""
		if inst.Engine.CheckpointsKeepHidden() {
			hidden = ", each with the target's hidden state the MTP head resumes from"
		}
		line("prefix cache", "on (blocks of %d tokens; up to %d recurrent state checkpoints, %s%s)", snap.KVBlockTokens,
			snap.CheckpointsMax, bytesText(int64(snap.CheckpointsMax)*snap.CheckpointSlotBytes), hidden)
	case snap.PrefixCache:
		line("prefix cache", "on (blocks of %d tokens)", snap.KVBlockTokens)
	case why != "":
		line("prefix cache", "off: %s", why)
	default:
		line("prefix cache", "off (--no-prefix-cache)")
	}
	line("chat", "%s", chatSummary(inst))
	if s.APIKey {
		line("api key", "on (/v1/ calls need 'Authorization: Bearer KEY')")
	} else {
		line("api key", "off")
	}
}

// weightTypes lists the model's tensor types by count, most common first,
// and their bytes: "Q8_0 x 30, F32 x 11 (1.2 MiB)".
func weightTypes(f *weights.File) string {
	count := map[string]int{}
	var total int64
	for _, t := range f.Tensors {
		count[t.DType.String()]++
		total += int64(len(t.Data))
	}
	names := slices.SortedFunc(maps.Keys(count), func(a, b string) int {
		if count[a] != count[b] {
			return count[b] - count[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s x %d", n, count[n])
	}
	return fmt.Sprintf("%s (%s)", strings.Join(parts, ", "), bytesText(total))
}

// chatSummary says which chat template renders chat requests and which
// tool call parser reads replies.
func chatSummary(inst *instance.Instance) string {
	src := inst.Tokenizer.ChatTemplateSource()
	tmpl := "the model's template (tokenizer.chat_template)"
	switch {
	case inst.ChatErr != nil:
		return fmt.Sprintf("template does not compile (%v): /v1/chat/completions answers 400", inst.ChatErr)
	case src == "":
		tmpl = "plain template (the model has none)"
	}
	parser := httpfront.ToolParser(src)
	if parser == "" {
		parser = "none"
	}
	return tmpl + ", tool parser " + parser
}

// bytesText is n bytes in binary units: "512 B", "1.5 MiB".
func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// loadProgress reports the load of the model at path (size bytes) when it
// takes a while, on w: on a terminal one line rewritten every 200 ms with
// the time so far, else a plain line every 5 s. It prints nothing for a load under a second; stop
// ends it (and clears the terminal line).
func loadProgress(w io.Writer, path string, size int64) (stop func()) {
	tty := isTerminal(w)
	every := 5 * time.Second
	if tty {
		every = 200 * time.Millisecond
	}
	quit, done := make(chan struct{}), make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		wait := time.NewTimer(time.Second)
		defer wait.Stop()
		select {
		case <-quit:
			return
		case <-wait.C:
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			msg := fmt.Sprintf("ninfer serve: loading %s (%s) ... %s", filepath.Base(path), bytesText(size), time.Since(start).Round(100*time.Millisecond))
			if tty {
				fmt.Fprintf(w, "\r\033[K%s", msg)
			} else {
				fmt.Fprintln(w, msg)
			}
			select {
			case <-quit:
				if tty {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// modelBytes is the size of the model file, or of the files in a model
// folder.
func modelBytes(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if !st.IsDir() {
		return st.Size()
	}
	var n int64
	entries, _ := os.ReadDir(path)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
	}
	return n
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
